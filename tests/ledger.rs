//! The slot ledger end to end, tried as a user would: suspending on a quiet target, editing the
//! schedule, losing the journal, and a restart patch the API server refuses. Each of these made
//! the ledger lie before spec epochs, the cluster-held cursor and restart deadlines (slots
//! restarted inside a suspension or before an edit, restarted slots re-recorded as
//! `operator_down`, 45 patch attempts in 45 s then a `failed` rollout that never started).

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::{
    Operator, TestNamespace, client,
    eru::{create_eru, deployment, events, items, status, template_slot, time, wait_ready},
    kubectl, wait_for,
};
use eru::eru::{Eru, EruStatus};
use k8s_openapi::api::apps::v1::Deployment;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::{Value, json};

const SECOND: chrono::Duration = chrono::Duration::seconds(1);

async fn edit(erus: &Api<Eru>, name: &str, spec: Value) {
    erus.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": spec })),
    )
    .await
    .unwrap();
}

/// Waits for a succeeded restart of a slot after `after`; returns its slot.
async fn restarted_after(operator: &Operator, name: &str, after: DateTime<Utc>) -> DateTime<Utc> {
    let url = format!("/history?name={name}&outcome=succeeded");
    wait_for(
        &format!("a succeeded restart of {name} after {after}"),
        Duration::from_secs(60),
        || async {
            items(operator, &url)
                .iter()
                .map(|r| time(&r["slot"]))
                .find(|slot| *slot > after)
        },
    )
    .await
}

/// Suspends the Eru and waits until it is idle, so nothing changes while a test reads.
async fn settle(erus: &Api<Eru>, name: &str) -> EruStatus {
    edit(erus, name, json!({"suspend": true})).await;
    wait_for("suspended and idle", Duration::from_secs(60), || async {
        let s = status(erus, name).await?;
        (s.phase.as_deref() == Some("Suspended")).then_some(s)
    })
    .await
}

/// The `*/5`-second slots strictly inside `(from, to)`, a second of margin each side (the API
/// server records edits to the second).
fn slots_within(from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let first = (from + SECOND).timestamp() / 5 * 5 + 5;
    (first..)
        .step_by(5)
        .map(|s| DateTime::from_timestamp(s, 0).unwrap())
        .take_while(|slot| *slot < to - SECOND)
        .collect()
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn slots_while_suspended_are_skipped_even_on_a_quiet_target_and_none_runs_after() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "ledger-suspend").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    wait_ready(&deployments, "web", 1).await;
    let operator = Operator::start(&client, &ns.name, &[]).await;
    let spec = json!({"schedule": "*/5 * * * * *", "target": {"kind": "Deployment", "name": "web"}});
    create_eru(&client, &ns.name, "web", spec).await.unwrap();
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    restarted_after(&operator, "web", Utc::now() - SECOND * 10).await;

    // suspended for 30 s: nothing touches the Deployment meanwhile (a quiet target)
    edit(&erus, "web", json!({"suspend": true})).await;
    let suspended = Utc::now();
    tokio::time::sleep(Duration::from_secs(30)).await;
    let resuming = Utc::now();
    edit(&erus, "web", json!({"suspend": false})).await;
    let resumed = Utc::now();
    let first_after = restarted_after(&operator, "web", resumed).await;
    let last = settle(&erus, "web").await;

    let inside = slots_within(suspended, resuming);
    assert!(inside.len() >= 4, "{inside:?}");
    let missed = items(&operator, "/missed?name=web&limit=1000");
    for slot in &inside {
        let row = missed
            .iter()
            .find(|m| time(&m["slot"]) <= *slot && *slot <= time(&m["last_slot"]))
            .unwrap_or_else(|| panic!("slot {slot} has no record: {missed:?}"));
        assert_eq!(
            (row["result"].as_str(), row["reason"].as_str()),
            (Some("skipped"), Some("suspended")),
            "{row}"
        );
    }
    let history = items(&operator, "/history?name=web&limit=1000");
    assert!(
        history
            .iter()
            .all(|r| !(suspended + SECOND..resuming - SECOND).contains(&time(&r["slot"]))),
        "no slot inside the suspension is restarted: {history:?}"
    );
    assert!(
        missed.iter().all(|m| m["reason"] != "past_deadline"),
        "nothing is late with the operator running: {missed:?}"
    );
    assert!(
        first_after <= resumed + SECOND * 6,
        "the next slot after resuming runs: {first_after}"
    );
    assert!(last.missed_slots >= inside.len() as i64, "{last:?}");
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn a_new_schedule_has_no_slots_before_it_was_edited_in() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "ledger-edit").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    wait_ready(&deployments, "web", 1).await;
    let operator = Operator::start(&client, &ns.name, &[]).await;
    let spec = json!({"schedule": "0 0 1 1 *", "target": {"kind": "Deployment", "name": "web"}});
    create_eru(&client, &ns.name, "web", spec).await.unwrap();
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    wait_for("the yearly Eru waiting", Duration::from_secs(30), || async {
        (status(&erus, "web").await?.phase.as_deref() == Some("Waiting")).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    let editing = Utc::now();
    edit(&erus, "web", json!({"schedule": "*/5 * * * * *"})).await;
    let edited = Utc::now();
    let first = restarted_after(&operator, "web", edited - SECOND * 5).await;
    settle(&erus, "web").await;

    assert!(
        first > editing - SECOND,
        "the first restart is of the new schedule after the edit: {first}"
    );
    let history = items(&operator, "/history?name=web&limit=1000");
    assert!(
        history.iter().all(|r| time(&r["slot"]) > editing - SECOND),
        "no restart of a slot before the edit: {history:?}"
    );
    let missed = items(&operator, "/missed?name=web&limit=1000");
    assert!(
        missed.iter().all(|m| time(&m["slot"]) > editing - SECOND),
        "no slot of the new schedule before the edit is recorded: {missed:?}"
    );
    assert!(missed.iter().all(|m| m["reason"] == "suspended"), "{missed:?}");
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn a_lost_journal_resumes_from_the_cluster_and_never_restarts_or_recounts_a_slot() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "ledger-lost").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    wait_ready(&deployments, "web", 1).await;
    let mut operator = Operator::start(&client, &ns.name, &[]).await;
    let spec = json!({"schedule": "*/5 * * * * *", "target": {"kind": "Deployment", "name": "web"}});
    create_eru(&client, &ns.name, "web", spec).await.unwrap();
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let first = restarted_after(&operator, "web", Utc::now() - SECOND * 10).await;
    let second = restarted_after(&operator, "web", first).await;
    wait_for(
        "the second restart in the status",
        Duration::from_secs(30),
        || async {
            let s = status(&erus, "web").await?;
            (s.last_restart?.slot >= second && s.phase.as_deref() == Some("Waiting")).then_some(())
        },
    )
    .await;

    // the journal's volume is replaced while the operator is down
    operator.stop();
    let stopped = Utc::now();
    let before = status(&erus, "web").await.unwrap();
    let restarted_slot = template_slot(&deployments.get("web").await.unwrap()).unwrap();
    let generation = deployments.get("web").await.unwrap().metadata.generation.unwrap();
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", operator.database.display()));
    }
    tokio::time::sleep(Duration::from_secs(12)).await;
    let starting = Utc::now();
    operator.restart().await;
    let resumed = restarted_after(&operator, "web", starting).await;
    let after = settle(&erus, "web").await;

    let history = items(&operator, "/history?name=web&limit=1000");
    assert!(
        history.iter().all(|r| time(&r["slot"]) > restarted_slot),
        "nothing the lost journal restarted is restarted again: {history:?} (last before: {restarted_slot})"
    );
    let landed = history.iter().filter(|r| !r["patched_at"].is_null()).count() as i64;
    let now_generation = deployments.get("web").await.unwrap().metadata.generation.unwrap();
    assert_eq!(
        now_generation - generation,
        landed,
        "each new restart patched the template once"
    );
    let missed = items(&operator, "/missed?name=web&limit=1000");
    assert!(
        missed.iter().all(|m| m["reason"] != "operator_down"),
        "no downtime is claimed that the new journal cannot prove: {missed:?}"
    );
    let lost: Vec<&Value> = missed.iter().filter(|m| m["reason"] == "journal_lost").collect();
    assert!(
        !lost.is_empty(),
        "the stretch no journal covers is recorded: {missed:?}"
    );
    for m in &lost {
        assert_eq!(m["result"], "missed");
        let (start, end) = (time(&m["window"]["start"]), time(&m["window"]["end"]));
        assert!(
            start >= restarted_slot && start <= stopped,
            "window start {start}"
        );
        assert!(end >= starting - SECOND && end <= resumed, "window end {end}");
        assert!(
            time(&m["slot"]) > restarted_slot && time(&m["last_slot"]) < resumed,
            "{m}"
        );
    }
    assert!(
        missed.iter().all(|m| time(&m["slot"]) > restarted_slot),
        "slots accounted by the lost journal are not recorded again: {missed:?}"
    );
    assert!(
        after.missed_slots >= before.missed_slots,
        "missedSlots never goes backwards"
    );
    assert!(after.last_restart.unwrap().slot >= before.last_restart.unwrap().slot);
    assert!(after.accounted_through >= before.accounted_through);
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn a_denied_restart_backs_off_and_is_abandoned_at_its_deadline_never_applied_later() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "ledger-deny").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    wait_ready(&deployments, "web", 1).await;
    // a ValidatingAdmissionPolicy freezing the pod templates of this namespace
    let policy = format!("freeze-{}", ns.name);
    let manifest = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": policy},
         "spec": {"failurePolicy": "Fail",
                  "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                                                          "operations": ["UPDATE"], "resources": ["deployments"]}]},
                  "validations": [{"expression": "object.spec.template == oldObject.spec.template",
                                   "message": "the pod template is frozen"}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": policy},
         "spec": {"policyName": policy, "validationActions": ["Deny"],
                  "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns.name}}}}}
    ]});
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), manifest.to_string()).unwrap();
    kubectl(&["apply", "-f", file.path().to_str().unwrap()]);
    // a dry run goes through admission and changes nothing
    let frozen = |deployments: Api<Deployment>| async move {
        let patch = json!({"spec": {"template": {"metadata": {"annotations": {"probe": "x"}}}}});
        let dry_run = PatchParams {
            dry_run: true,
            ..PatchParams::default()
        };
        deployments
            .patch("web", &dry_run, &Patch::Merge(patch))
            .await
            .is_err()
    };
    wait_for("the policy in force", Duration::from_secs(30), || async {
        frozen(deployments.clone()).await.then_some(())
    })
    .await;

    let operator = Operator::start(&client, &ns.name, &[]).await;
    let spec = json!({"schedule": "*/15 * * * * *", "startingDeadlineSeconds": 8,
                      "target": {"kind": "Deployment", "name": "web"}});
    create_eru(&client, &ns.name, "web", spec).await.unwrap();
    let abandoned = wait_for(
        "a restart abandoned at its deadline",
        Duration::from_secs(60),
        || async {
            items(&operator, "/history?name=web&outcome=abandoned")
                .into_iter()
                .next()
        },
    )
    .await;
    let slot = time(&abandoned["slot"]);
    let reason = abandoned["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("patch_failed: the restart patch did not land by"),
        "{reason}"
    );
    assert!(
        reason.contains("the pod template is frozen"),
        "the API's own message: {reason}"
    );
    assert!(
        abandoned["patched_at"].is_null() && abandoned["duration_seconds"].is_null(),
        "{abandoned}"
    );
    assert!(
        time(&abandoned["finished_at"]) >= slot + SECOND * 8,
        "given up at the deadline, not before"
    );
    let missed = items(&operator, "/missed?name=web");
    let row = missed
        .iter()
        .find(|m| time(&m["slot"]) == slot)
        .expect("the slot in /missed");
    assert_eq!(
        (row["result"].as_str(), row["reason"].as_str()),
        (Some("missed"), Some("patch_failed"))
    );
    let attempts: i32 = events(&client, &ns.name, "web", "RestartPatchFailed")
        .await
        .iter()
        .filter(|e| {
            e.note
                .as_deref()
                .unwrap_or_default()
                .contains(&common::eru::slot_text(slot))
        })
        .map(|e| e.series.as_ref().map_or(1, |s| s.count))
        .sum();
    assert!(
        (2..=5).contains(&attempts),
        "retries back off (1 s, 2 s, 4 s within 8 s): {attempts}"
    );

    // the policy goes away: the next slot restarts, and the abandoned one is never applied
    kubectl(&["delete", "-f", file.path().to_str().unwrap()]);
    let next = restarted_after(&operator, "web", slot).await;
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    settle(&erus, "web").await;
    assert!(next > slot);
    let history = items(&operator, "/history?name=web&limit=1000");
    assert!(
        history.iter().all(|r| r["outcome"] != "failed"),
        "no rollout claimed that never started: {history:?}"
    );
    let missed = items(&operator, "/missed?name=web&limit=1000");
    assert!(
        missed.iter().all(|m| m["reason"] != "concurrent_rollout"),
        "nothing was rolling out: {missed:?}"
    );
    let landed: Vec<DateTime<Utc>> = history
        .iter()
        .filter(|r| !r["patched_at"].is_null())
        .map(|r| time(&r["slot"]))
        .collect();
    assert!(
        !landed.contains(&slot),
        "the abandoned slot never landed: {landed:?}"
    );
    let d = deployments.get("web").await.unwrap();
    assert!(template_slot(&d).unwrap() > slot);
    assert_eq!(
        d.metadata.generation.unwrap(),
        1 + landed.len() as i64,
        "one template change per landed restart"
    );
}
