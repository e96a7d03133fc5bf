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
    eru::{create_eru, created, deployment, events, items, status, template_slot, time, wait_ready},
    kubectl,
    ledger::{Ledger, SlotRecord, check, every, violations},
    wait_for,
};
use eru_operator::eru::{Eru, EruStatus};
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

/// Suspends the Eru and waits until it is idle, so nothing changes while a test reads; returns
/// the instant before the suspension was sent, and the status then.
async fn settle(erus: &Api<Eru>, name: &str) -> (DateTime<Utc>, EruStatus) {
    let at = Utc::now();
    edit(erus, name, json!({"suspend": true})).await;
    let status = wait_for("suspended and idle", Duration::from_secs(60), || async {
        let s = status(erus, name).await?;
        (s.phase.as_deref() == Some("Suspended")).then_some(s)
    })
    .await;
    (at, status)
}

/// The `*/5`-second slots strictly inside `(from, to)`, a second of margin each side (the API
/// server records edits to the second).
fn slots_within(from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    every(5, from + SECOND, to - SECOND)
        .into_iter()
        .filter(|slot| from + SECOND < *slot && *slot < to - SECOND)
        .collect()
}

/// The one record of `slot` among `records` (the ledger check has proved there is one).
fn record_of(records: &[SlotRecord], slot: DateTime<Utc>) -> &SlotRecord {
    let covering: Vec<&SlotRecord> = records.iter().filter(|r| r.covers(slot)).collect();
    assert_eq!(covering.len(), 1, "slot {slot}: {covering:?}");
    covering[0]
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
    let born = created(&erus, "web").await;
    restarted_after(&operator, "web", Utc::now() - SECOND * 10).await;

    // suspended for 30 s: nothing touches the Deployment meanwhile (a quiet target)
    edit(&erus, "web", json!({"suspend": true})).await;
    let suspended = Utc::now();
    tokio::time::sleep(Duration::from_secs(30)).await;
    let resuming = Utc::now();
    edit(&erus, "web", json!({"suspend": false})).await;
    let resumed = Utc::now();
    let first_after = restarted_after(&operator, "web", resumed).await;
    let (settled, last) = settle(&erus, "web").await;

    // every slot from the Eru's creation to the last suspension: one record, the workload agrees
    let window = (born + SECOND, settled);
    let records = check(
        &client,
        &ns.name,
        &operator,
        &Ledger::deployment("web", "web", window, every(5, window.0, window.1)),
    )
    .await;
    let inside = slots_within(suspended, resuming);
    assert!(inside.len() >= 4, "{inside:?}");
    for slot in &inside {
        let row = record_of(&records, *slot);
        assert_eq!(
            (row.result.as_str(), row.reason.as_deref()),
            ("skipped", Some("suspended")),
            "{row:?}"
        );
    }
    let missed = items(&operator, "/missed?name=web&limit=1000");
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
    // after resuming, nothing is held back as suspended: every slot up to the first restart
    // after it is that restart or superseded by it
    for slot in every(5, resumed + SECOND, first_after) {
        let row = record_of(&records, slot);
        assert!(
            row.fired() || row.reason.as_deref() == Some("superseded"),
            "slot {slot} after resuming, before the restart of {first_after}: {row:?}"
        );
    }
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
    let (settled, _) = settle(&erus, "web").await;

    // the yearly schedule has no slot in this test's minutes; the new one's from the edit on
    let window = (edited + SECOND, settled);
    check(
        &client,
        &ns.name,
        &operator,
        &Ledger::deployment("web", "web", window, every(5, window.0, window.1)),
    )
    .await;

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

    // the journal's volume (or database) is replaced while the operator is down
    operator.stop();
    let stopped = Utc::now();
    let before = status(&erus, "web").await.unwrap();
    let restarted_slot = template_slot(&deployments.get("web").await.unwrap()).unwrap();
    let generation = deployments.get("web").await.unwrap().metadata.generation.unwrap();
    if operator.database_url.is_some() {
        // on PostgreSQL: an empty database in its place
        operator.database_url = Some(common::fresh_database("lost"));
    } else {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", operator.database.display()));
        }
    }
    tokio::time::sleep(Duration::from_secs(12)).await;
    let starting = Utc::now();
    operator.restart().await;
    let resumed = restarted_after(&operator, "web", starting).await;
    let (settled, after) = settle(&erus, "web").await;

    // every slot after what the lost journal accounted: one record in the new one; the workload's
    // rollouts of the slots the lost journal fired are not the new journal's to show
    let lost_through = before.accounted_through.expect("the status's cursor");
    let window = (lost_through + chrono::Duration::milliseconds(1), settled);
    check(
        &client,
        &ns.name,
        &operator,
        &Ledger {
            journal_from: Some(lost_through),
            ..Ledger::deployment("web", "web", window, every(5, window.0, window.1))
        },
    )
    .await;

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
    let file = common::eru::freeze_template(&deployments, &ns.name, "web").await;

    let operator = Operator::start(&client, &ns.name, &[]).await;
    let spec = json!({"schedule": "*/15 * * * * *", "startingDeadlineSeconds": 8,
                      "target": {"kind": "Deployment", "name": "web"}});
    create_eru(&client, &ns.name, "web", spec).await.unwrap();
    let born = created(&Api::<Eru>::namespaced(client.clone(), &ns.name), "web").await;
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
    // backing off (1 s, 2 s, 4 s) leaves room for at most 4 tries in 8 s (a slow machine only
    // makes fewer); before, it tried every second
    assert!(
        (1..=4).contains(&attempts),
        "retries back off (1 s, 2 s, 4 s within 8 s): {attempts}"
    );

    // the policy goes away: the next slot restarts, and the abandoned one is never applied
    kubectl(&["delete", "-f", file.path().to_str().unwrap()]);
    let next = restarted_after(&operator, "web", slot).await;
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let (settled, _) = settle(&erus, "web").await;
    assert!(next > slot);
    let window = (born + SECOND, settled);
    let records = check(
        &client,
        &ns.name,
        &operator,
        &Ledger::deployment("web", "web", window, every(15, window.0, window.1)),
    )
    .await;
    assert_eq!(
        (
            record_of(&records, slot).result.as_str(),
            record_of(&records, slot).patched_at()
        ),
        ("missed", None),
        "the abandoned slot"
    );
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

/// The ledger check every scenario ends with must itself fail when the journal lies: a fired
/// record whose patch never reached the workload (forged into a journal that is otherwise
/// consistent: fired, with a landed, succeeded restart), and a slot whose record is gone.
#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn the_ledger_check_fails_on_a_forged_fired_record_and_on_a_missing_one() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "ledger-forged").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    wait_ready(&deployments, "web", 1).await;
    let operator = Operator::start(&client, &ns.name, &[]).await;
    let spec = json!({"schedule": "*/5 * * * * *", "target": {"kind": "Deployment", "name": "web"}});
    create_eru(&client, &ns.name, "web", spec).await.unwrap();
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let born = created(&erus, "web").await;
    let first = restarted_after(&operator, "web", born).await;
    // a paused Deployment: the next slots are skipped, never patched
    let paused_at = Utc::now();
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": true}})),
        )
        .await
        .unwrap();
    let skipped = wait_for("a target_paused slot", Duration::from_secs(60), || async {
        items(&operator, "/slots?name=web&reason=target_paused")
            .into_iter()
            .find(|r| time(&r["slot"]) > paused_at)
    })
    .await;
    let (settled, _) = settle(&erus, "web").await;
    let window = (born + SECOND, settled);
    let expected = Ledger::deployment("web", "web", window, every(5, window.0, window.1));
    let records = check(&client, &ns.name, &operator, &expected).await;
    assert!(
        violations(&client, &ns.name, &operator, &expected)
            .await
            .is_empty()
    );

    // a fired record, with a landed and succeeded restart, on a slot the workload never rolled
    let forged = skipped["slot"].as_str().unwrap().to_string();
    let uid = skipped["uid"].as_str().unwrap().to_string();
    common::eru::journal_sql(
        &operator,
        &format!(
            "UPDATE slots SET result = 'fired', reason = 'scheduled' WHERE uid = '{uid}' AND slot = '{forged}';
             INSERT INTO restarts (uid, namespace, name, target, slot, decided_at, deadline_at, patched_at,
                                   finished_at, outcome)
             VALUES ('{uid}', '{ns}', 'web', 'web', '{forged}', '{forged}', '{forged}', '{forged}', '{forged}',
                     'succeeded')
             ON CONFLICT (uid, slot) DO UPDATE SET patched_at = excluded.patched_at, outcome = 'succeeded'",
            ns = ns.name
        ),
    );
    let wrong = violations(&client, &ns.name, &operator, &expected).await;
    let forged_at = time(&skipped["slot"]);
    assert!(
        wrong
            .iter()
            .any(|w| w.contains(&format!("fired slot {forged_at} rolled 0 times"))),
        "the forged fired record is caught: {wrong:?}"
    );
    common::eru::journal_sql(
        &operator,
        &format!(
            "UPDATE slots SET result = 'skipped', reason = 'target_paused' WHERE uid = '{uid}' AND slot = '{forged}';
             DELETE FROM restarts WHERE uid = '{uid}' AND slot = '{forged}'"
        ),
    );
    assert_eq!(
        violations(&client, &ns.name, &operator, &expected).await,
        Vec::<String>::new(),
        "the journal restored"
    );

    // the record of a fired slot gone
    let gone = record_of(&records, first);
    assert!(gone.fired(), "{gone:?}");
    let gone_text = gone.raw["slot"].as_str().unwrap().to_string();
    common::eru::journal_sql(
        &operator,
        &format!("DELETE FROM slots WHERE uid = '{uid}' AND slot = '{gone_text}'"),
    );
    let wrong = violations(&client, &ns.name, &operator, &expected).await;
    assert!(
        wrong
            .iter()
            .any(|w| w.contains(&format!("slot {first} has 0 records"))),
        "the missing record is caught: {wrong:?}"
    );
    assert!(
        wrong
            .iter()
            .any(|w| w.contains(&format!("rolled slot {first}, which has no fired record"))),
        "the workload's rollout without its record is caught: {wrong:?}"
    );
}
