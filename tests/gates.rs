//! End-to-end tests of health-gated restarts (issue 31) on the local cluster: a blocking pod holds
//! a due slot, which runs once when the pod goes (or is recorded `skipped/blocking_pods` when the
//! pod outlasts its starting deadline); a real Prometheus (Debian's package, on loopback) whose
//! rule fires on demand holds a slot the same way (`alert_firing`, the alert named in the note);
//! with Prometheus stopped, the documented fail-safe (`onUnknown: Hold` → `gate_unknown` with the
//! error; `Proceed` → it runs). Every scenario ends with the ledger check: each slot exactly one
//! record, each fired slot rolled once. No assertion on durations: conditions are waited for
//! with deadlines.

mod common;

use std::{
    process::{Child, Command, Stdio},
    time::Duration,
};

use chrono::{DateTime, Duration as Span, SubsecRound, Timelike, Utc};
use common::{
    Operator, TestNamespace, client,
    eru::{create_eru, created, deployment, settle, status, template_slot, time, wait_ready},
    free_port,
    ledger::{Ledger, SlotRecord, check, slot_records},
    wait_for,
};
use eru_operator::eru::{Eru, EruStatus};
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

/// A slot `lead` seconds from now, on a whole second, and the daily schedule that has it as its
/// only slot of the day (UTC).
fn one_slot(lead: i64) -> (DateTime<Utc>, String) {
    let slot = (Utc::now() + Span::seconds(lead)).trunc_subsecs(0);
    let schedule = format!("{} {} {} * * *", slot.second(), slot.minute(), slot.hour());
    (slot, schedule)
}

/// The ordering every scenario here relies on: each Eru existed before its slot, so the slot is
/// owed and held (or run) however late the operator's first pass comes; the slot's deadline, not
/// the operator's speed, bounds the rest. The lead given to `one_slot` covers only these API
/// calls, and this says so plainly rather than letting a slow machine turn into a wrong reason.
async fn created_before(erus: &Api<Eru>, names: &[&str], slot: DateTime<Utc>) {
    for name in names {
        let at = created(erus, name).await;
        assert!(
            at < slot,
            "{name} was created at {at}, not before its slot {slot}: the lead given to one_slot was too short for this machine"
        );
    }
}

/// A pause pod labelled `labels`.
async fn pod(client: &Client, ns: &str, name: &str, labels: Value) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
}

/// Waits until the Eru's status shows its slot held for `reason`; returns the status.
async fn held(erus: &Api<Eru>, name: &str, slot: DateTime<Utc>, reason: &str) -> EruStatus {
    wait_for(
        &format!("{name}: slot {slot} held ({reason})"),
        Duration::from_secs(60),
        || async {
            let s = status(erus, name).await?;
            let h = s.held.as_ref()?;
            (h.slot == slot && h.reason == reason).then_some(s)
        },
    )
    .await
}

/// Waits until the operator recorded `slot` of `name`; returns its one record.
async fn recorded(operator: &Operator, name: &str, slot: DateTime<Utc>, within: Duration) -> SlotRecord {
    wait_for(&format!("{name}: slot {slot} recorded"), within, || async {
        let records = slot_records(operator, name).ok()?;
        let covering: Vec<SlotRecord> = records.into_iter().filter(|r| r.covers(slot)).collect();
        assert!(covering.len() <= 1, "{name}: two records of {slot}: {covering:?}");
        covering.into_iter().next()
    })
    .await
}

/// The ledger check of an Eru with one slot (`slot`) from its creation to now, accounted as
/// `account` (`fired`, or the reason it was skipped).
async fn check_one(
    client: &Client,
    ns: &str,
    operator: &Operator,
    (name, slot, account): (&str, DateTime<Utc>, &'static str),
) {
    let erus: Api<Eru> = Api::namespaced(client.clone(), ns);
    let from = created(&erus, name).await + Span::seconds(1);
    let expected =
        Ledger::deployment(name, name, (from, Utc::now()), vec![slot]).require(slot, slot, account, &[]);
    check(client, ns, operator, &expected).await;
}

/// A gated Eru restarting the Deployment of its own name at `schedule`.
async fn gated_eru(client: &Client, ns: &str, name: &str, schedule: &str, deadline: i64, gates: Value) {
    create_eru(
        client,
        ns,
        name,
        json!({"schedule": schedule, "target": {"kind": "Deployment", "name": name},
               "startingDeadlineSeconds": deadline, "gates": gates}),
    )
    .await
    .unwrap();
}

/// The value of an unlabelled series in the operator's `/metrics`.
fn metric(operator: &Operator, series: &str) -> Option<f64> {
    let (_, body) = operator.get("/metrics");
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn a_blocking_pod_holds_a_slot_until_it_goes_or_the_deadline_passes() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "gates-pods").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    for name in ["released", "outlasted"] {
        deployment(&client, &ns.name, name, 1, json!({})).await;
    }
    for name in ["released", "outlasted"] {
        wait_ready(&deployments, name, 1).await;
    }
    // notifications of holds that last 3 s, and of everything else
    let receiver = common::receiver::Receiver::start(common::free_port(), &[]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notifications.yaml");
    let hook = format!(
        "{{name: hook, type: webhook, url: 'http://127.0.0.1:{}/'}}",
        receiver.port
    );
    std::fs::write(
        &file,
        format!("sinks: [{hook}]\nroutes: [{{sink: hook, heldLongerThan: 3s}}]\n"),
    )
    .unwrap();
    let file = file.display().to_string();
    let operator = Operator::start(
        &client,
        &ns.name,
        &[
            "--gate-poll-interval",
            "1s",
            "--gate-cache-ttl",
            "1s",
            "--notifications-file",
            &file,
        ],
    )
    .await;
    // a migration for each Eru, running before their slots
    pod(
        &client,
        &ns.name,
        "migrate-released",
        json!({"job": "migrate-released"}),
    )
    .await;
    pod(
        &client,
        &ns.name,
        "migrate-outlasted",
        json!({"job": "migrate-outlasted"}),
    )
    .await;
    let (slot, schedule) = one_slot(8);
    let selector = |job: &str| json!({"blockingPodSelector": {"matchLabels": {"job": job}}});
    gated_eru(
        &client,
        &ns.name,
        "released",
        &schedule,
        300,
        selector("migrate-released"),
    )
    .await;
    gated_eru(
        &client,
        &ns.name,
        "outlasted",
        &schedule,
        12,
        selector("migrate-outlasted"),
    )
    .await;
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    created_before(&erus, &["released", "outlasted"], slot).await;

    // both held: visible in the status (and its Ready condition), the metric, and no record yet
    let shown = held(&erus, "released", slot, "blocking_pods").await;
    let h = shown.held.as_ref().unwrap();
    assert!(h.note.contains("migrate-released"), "{h:?}");
    assert_eq!(h.deadline, slot + Span::seconds(300));
    let ready = shown.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.reason, "Held", "{ready:?}");
    held(&erus, "outlasted", slot, "blocking_pods").await;
    let event = wait_for("a Held Event", Duration::from_secs(30), || async {
        common::eru::events(&client, &ns.name, "released", "Held")
            .await
            .into_iter()
            .next()
    })
    .await;
    let note = event.note.unwrap_or_default();
    assert!(
        note.contains("blocking_pods") && note.contains("migrate-released"),
        "{note}"
    );
    wait_for(
        "eru_held_slots to count the held slots",
        Duration::from_secs(30),
        || async { (metric(&operator, "eru_held_slots").unwrap_or(0.0) >= 1.0).then_some(()) },
    )
    .await;
    assert!(
        slot_records(&operator, "released")
            .unwrap()
            .iter()
            .all(|r| !r.covers(slot)),
        "a held slot has no record"
    );
    assert_eq!(template_slot(&deployments.get("released").await.unwrap()), None);
    // and in the audit of the running operator: on its Eru, counted in the verdict, on the page
    let audit = operator.get_json(&format!("/audit?namespace={}", ns.name));
    let released = (audit["erus"].as_array().unwrap().iter())
        .find(|e| e["name"] == "released")
        .unwrap_or_else(|| panic!("no Eru released in {audit}"));
    assert_eq!(released["held"]["reason"], "blocking_pods", "{released}");
    let held_slot = DateTime::parse_from_rfc3339(released["held"]["slot"].as_str().unwrap()).unwrap();
    assert_eq!(held_slot, slot);
    assert!(
        released["held"]["note"]
            .as_str()
            .unwrap()
            .contains("migrate-released")
    );
    assert!(
        audit["verdict"]["held"].as_u64().unwrap() >= 1,
        "{}",
        audit["verdict"]
    );
    let (code, page) = operator.get(&format!("/ui?namespace={}", ns.name));
    assert_eq!(code, 200);
    let row = page
        .split(r#"<g class="row" data-eru=""#)
        .find(|r| r.starts_with(&format!("{}/released\"", ns.name)))
        .unwrap_or_else(|| panic!("no row for released: {page}"));
    assert!(
        row.contains(r#"data-kind="held" data-reason="blocking_pods""#),
        "{row}"
    );

    // the pod of "outlasted" stays past its deadline: skipped/blocking_pods, the pod and the hold
    // named, never patched
    let record = recorded(&operator, "outlasted", slot, Duration::from_secs(60)).await;
    assert_eq!(
        (record.result.as_str(), record.reason.as_deref()),
        ("skipped", Some("blocking_pods")),
        "{record:?}"
    );
    let note = record.note.clone().unwrap_or_default();
    assert!(
        note.starts_with("blocking pods running in ")
            && note.contains("migrate-outlasted")
            && note.contains("held from "),
        "{note}"
    );
    assert_eq!(template_slot(&deployments.get("outlasted").await.unwrap()), None);

    // the migration of "released" ends: its slot runs, once
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    pods.delete("migrate-released", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let record = recorded(&operator, "released", slot, Duration::from_secs(60)).await;
    assert!(record.fired(), "{record:?}");
    // the status is written after the record is committed, by the status writer: the hold
    // leaves it within a few seconds
    wait_for(
        "the status of released without the hold",
        Duration::from_secs(10),
        || async {
            let s = status(&erus, "released").await?;
            (s.held.is_none() || s.held.as_ref().is_some_and(|h| h.slot != slot)).then_some(())
        },
    )
    .await;

    check_one(&client, &ns.name, &operator, ("released", slot, "fired")).await;
    check_one(&client, &ns.name, &operator, ("outlasted", slot, "blocking_pods")).await;
    let _ = pods
        .delete("migrate-outlasted", &DeleteParams::default().grace_period(0))
        .await;

    // the holds were told once each, with the gate's reason and the pod; then how each ended
    let key = |name: &str, event: &str| {
        format!(
            "{}/{name}/{}/{event}",
            ns.name,
            slot.format("%Y-%m-%dT%H:%M:%S%.3fZ")
        )
    };
    let wanted = [
        key("released", "slot_held"),
        key("outlasted", "slot_held"),
        key("outlasted", "slot_skipped"),
        key("released", "restart_succeeded"),
    ];
    let events = wait_for("the holds' notifications", Duration::from_secs(60), || async {
        let events: Vec<Value> = (receiver.received().iter())
            .flat_map(|r| r.json["events"].as_array().cloned().unwrap_or_default())
            .collect();
        let keys: Vec<&str> = events.iter().filter_map(|e| e["key"].as_str()).collect();
        wanted
            .iter()
            .all(|k| keys.contains(&k.as_str()))
            .then_some(events)
    })
    .await;
    for name in ["released", "outlasted"] {
        let held: Vec<&Value> = events
            .iter()
            .filter(|e| e["key"] == key(name, "slot_held"))
            .collect();
        assert!(held.iter().all(|e| e == &held[0]), "{held:?}");
        assert_eq!(held[0]["reason"], "blocking_pods", "{}", held[0]);
        let note = held[0]["note"].as_str().unwrap();
        assert!(
            note.contains(&format!("migrate-{name}")) && note.starts_with("held since "),
            "{note}"
        );
    }
    let held_events = events.iter().filter(|e| e["event"] == "slot_held").count();
    let distinct: std::collections::BTreeSet<&str> = (events.iter())
        .filter(|e| e["event"] == "slot_held")
        .filter_map(|e| e["key"].as_str())
        .collect();
    assert_eq!(
        distinct.len(),
        2,
        "a hold is one event, whatever the passes: {events:?}"
    );
    // the receiver took every message, so nothing was sent twice: one outbox row per hold
    assert_eq!(held_events, 2, "{events:?}");
}

/// A PodDisruptionBudget at zero holds a slot (the gate is opt-in): relaxed, the slot runs, once;
/// kept at zero past the deadline, the slot is recorded skipped/pdb_blocked naming the budget. A
/// budget of other pods holds nothing.
#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn a_pod_disruption_budget_at_zero_holds_a_slot_until_it_has_room() {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    let client = client().await;
    let ns = TestNamespace::create(&client, "gates-pdb").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let names = ["relaxed", "outlasted", "unrelated"];
    for name in names {
        deployment(&client, &ns.name, name, 2, json!({})).await;
    }
    for name in names {
        wait_ready(&deployments, name, 2).await;
    }
    // "relaxed" and "outlasted": budgets allowing no disruption of their two pods; "unrelated":
    // at zero too, but its budget selects other pods
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ns.name);
    for (budget, app) in [
        ("relaxed", "relaxed"),
        ("outlasted", "outlasted"),
        ("other", "not-unrelated"),
    ] {
        let pdb = json!({"metadata": {"name": budget},
                         "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": app}}}});
        budgets
            .create(&PostParams::default(), &serde_json::from_value(pdb).unwrap())
            .await
            .unwrap();
    }
    wait_for("the budgets counted at zero", Duration::from_secs(60), || async {
        let list = budgets.list(&Default::default()).await.ok()?;
        let at_zero = (list.items.iter())
            .filter_map(|b| b.status.as_ref())
            .filter(|s| s.current_healthy == Some(2) && s.disruptions_allowed == Some(0))
            .count();
        (at_zero == 2).then_some(())
    })
    .await;
    let operator = Operator::start(
        &client,
        &ns.name,
        &["--gate-poll-interval", "1s", "--gate-cache-ttl", "1s"],
    )
    .await;
    let (slot, schedule) = one_slot(8);
    let gates = json!({"podDisruptionBudgets": true});
    gated_eru(&client, &ns.name, "relaxed", &schedule, 300, gates.clone()).await;
    gated_eru(&client, &ns.name, "outlasted", &schedule, 12, gates.clone()).await;
    gated_eru(&client, &ns.name, "unrelated", &schedule, 300, gates).await;
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    created_before(&erus, &names, slot).await;

    let shown = held(&erus, "relaxed", slot, "pdb_blocked").await;
    let note = &shown.held.as_ref().unwrap().note;
    assert_eq!(
        note,
        "PodDisruptionBudgets allowing no disruption: relaxed (2 healthy, 2 desired)"
    );
    held(&erus, "outlasted", slot, "pdb_blocked").await;
    // a budget of other pods: the slot runs at once
    assert!(
        recorded(&operator, "unrelated", slot, Duration::from_secs(60))
            .await
            .fired()
    );
    assert_eq!(template_slot(&deployments.get("relaxed").await.unwrap()), None);

    // "outlasted" keeps its budget at zero past its deadline
    let record = recorded(&operator, "outlasted", slot, Duration::from_secs(60)).await;
    assert_eq!(
        (record.result.as_str(), record.reason.as_deref()),
        ("skipped", Some("pdb_blocked")),
        "{record:?}"
    );
    let note = record.note.clone().unwrap_or_default();
    assert!(
        note.starts_with("PodDisruptionBudgets allowing no disruption: outlasted (2 healthy, 2 desired)")
            && note.contains("held from "),
        "{note}"
    );
    assert_eq!(template_slot(&deployments.get("outlasted").await.unwrap()), None);

    // the budget of "relaxed" allows one disruption: its slot runs, once
    let relax = Patch::Merge(json!({"spec": {"minAvailable": 1}}));
    budgets
        .patch("relaxed", &PatchParams::default(), &relax)
        .await
        .unwrap();
    let record = recorded(&operator, "relaxed", slot, Duration::from_secs(60)).await;
    assert!(record.fired(), "{record:?}");

    check_one(&client, &ns.name, &operator, ("relaxed", slot, "fired")).await;
    check_one(&client, &ns.name, &operator, ("outlasted", slot, "pdb_blocked")).await;
    check_one(&client, &ns.name, &operator, ("unrelated", slot, "fired")).await;
    let evaluations = operator.get("/metrics").1;
    assert!(
        evaluations.contains(r#"eru_gate_evaluations_total{gate="pod_disruption_budgets",result="closed"}"#),
        "{evaluations}"
    );
}

/// `need.minPodAgeSeconds`: while every pod of the target is younger, a due slot is skipped
/// `not_needed` with the oldest pod named; once one is old enough, the slot runs; the pod the
/// restart made is young again, so the next slots are not needed either.
#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn a_restart_runs_only_once_a_pod_is_older_than_min_pod_age() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "need-age").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    wait_ready(&deployments, "web", 1).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let started = |pod: &Pod| eru_operator::runtime::time_of(pod.metadata.creation_timestamp.as_ref()?);
    let first_pod = pods.list(&Default::default()).await.unwrap().items;
    let [first_pod] = first_pod.as_slice() else {
        panic!("one pod: {first_pod:?}")
    };
    let born = started(first_pod).unwrap();
    let operator = Operator::start(&client, &ns.name, &[]).await;
    create_eru(
        &client,
        &ns.name,
        "web",
        json!({"schedule": "*/5 * * * * *", "target": {"kind": "Deployment", "name": "web"},
               "need": {"minPodAgeSeconds": 20}}),
    )
    .await
    .unwrap();
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    // the first restart: once the first pod is 20 s old
    let restarted = common::eru::succeeded_after(&operator, "web", born).await;
    assert!(
        restarted >= born + Span::seconds(15),
        "restarted at {restarted}, its pod started at {born}"
    );
    let second_pod = wait_for("the restart's pod", Duration::from_secs(30), || async {
        let list = pods.list(&Default::default()).await.ok()?;
        (list.items.iter())
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(started)
            .find(|at| *at > born)
    })
    .await;
    // and the one after it, once that pod is 20 s old
    let again = common::eru::succeeded_after(&operator, "web", restarted).await;
    assert!(
        again >= second_pod + Span::seconds(15),
        "restarted at {again}, its pod started at {second_pod}"
    );
    let settled = settle(&erus, &operator, "web").await;

    // every slot: not_needed while the pods were young, the two restarts, and nothing else but
    // a slot given up to a rollout in progress
    let created_at = created(&erus, "web").await;
    let window = (created_at + Span::seconds(1), settled);
    let allowed: &[&str] = &["fired", "not_needed", "concurrent_rollout", "superseded"];
    let expected = Ledger::deployment("web", "web", window, common::ledger::every(5, window.0, window.1))
        .expect(window.0, window.1, allowed)
        .require_some(window.0, restarted - Span::seconds(1), "not_needed")
        .require_some(
            restarted + Span::seconds(1),
            again - Span::seconds(1),
            "not_needed",
        );
    let records = check(&client, &ns.name, &operator, &expected).await;
    for r in records
        .iter()
        .filter(|r| r.reason.as_deref() == Some("not_needed"))
    {
        let note = r.note.as_deref().unwrap_or_default();
        assert!(
            note.starts_with(
                "every pod of Deployment/web is younger than 20 s (minPodAgeSeconds): the oldest of 1, web-"
            ),
            "{r:?}"
        );
        // a pod younger than 20 s at the slot's pass: the slot came before its 20th second
        let pod = if r.slot < restarted { born } else { second_pod };
        assert!(
            r.slot < pod + Span::seconds(20),
            "{r:?} came after the pod's 20th second ({pod})"
        );
    }
    // no slot was skipped while a pod was old enough
    for r in records.iter().filter(|r| r.fired()) {
        assert!(r.slot == restarted || r.slot == again, "{r:?}");
    }
}

/// `need.query`: a recording rule below the threshold skips the slots (`not_needed`, the value and
/// the query as sent in the note); above it, the slot runs; with Prometheus gone and
/// `onUnknown: Skip`, the slots are `need_unknown` with the error, never `not_needed`.
#[tokio::test]
#[ignore = "needs the local cluster and Prometheus: hack/test.sh"]
async fn a_need_query_restarts_only_above_its_threshold_and_says_when_it_cannot_ask() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "need-query").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    wait_ready(&deployments, "web", 1).await;
    let mut prometheus = Prometheus::start();
    // labelled `namespace`: the operator confines every selector of the query by that label
    prometheus.record(0.1, json!({"namespace": ns.name}));
    // the rule's first evaluation: a slot before it has no sample to judge ("returned no sample")
    wait_for_sync("the recorded need", || {
        (prometheus.query("eru_test_need").as_deref() == Some("0.1")).then_some(())
    });
    let url = prometheus.url();
    let flags = ["--prometheus-url", &url, "--gate-cache-ttl", "1s"];
    let operator = Operator::start(&client, &ns.name, &flags).await;
    create_eru(
        &client,
        &ns.name,
        "web",
        json!({"schedule": "*/5 * * * * *", "target": {"kind": "Deployment", "name": "web"},
               "need": {"query": "max(eru_test_need{namespace=\"$namespace\"})", "threshold": "0.5", "onUnknown": "Skip"}}),
    )
    .await
    .unwrap();
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let first = |reason: &'static str, after: DateTime<Utc>| {
        let operator = &operator;
        async move {
            wait_for(
                &format!("a slot {reason} after {after}"),
                Duration::from_secs(60),
                || async {
                    let records = slot_records(operator, "web").ok()?;
                    records
                        .into_iter()
                        .find(|r| r.slot > after && r.reason.as_deref() == Some(reason))
                },
            )
            .await
        }
    };
    let low = first("not_needed", created(&erus, "web").await).await;
    let expected_note = format!(
        "the need query returned 0.1 at most, not above its threshold 0.5: max(eru_test_need{{namespace=\"{}\"}})",
        ns.name
    );
    assert_eq!(low.note.as_deref(), Some(expected_note.as_str()), "{low:?}");
    // above the threshold: restarted
    let raised = Utc::now();
    prometheus.record(0.9, json!({"namespace": ns.name}));
    let restarted = common::eru::succeeded_after(&operator, "web", raised).await;
    // Prometheus gone: need_unknown, with the error
    let stopped = Utc::now();
    prometheus.stop();
    let unknown = first("need_unknown", stopped).await;
    let note = unknown.note.clone().unwrap_or_default();
    assert!(
        note.starts_with(&format!("asking Prometheus at {url}/api/v1/query failed")),
        "{note}"
    );
    let settled = settle(&erus, &operator, "web").await;

    let created_at = created(&erus, "web").await;
    let window = (created_at + Span::seconds(1), settled);
    let busy: &[&str] = &["concurrent_rollout", "superseded"];
    // after the stop, an answer cached for a second may still be the last one Prometheus gave;
    // then need_unknown, at least once (the first can come right after the stop, and the test
    // settles right after it: no stretch of a fixed length after the stop is assumed)
    let cached: &[&str] = &["not_needed", "fired"];
    let expected = Ledger::deployment("web", "web", window, common::ledger::every(5, window.0, window.1))
        .expect(window.0, raised, &[&["not_needed"], busy].concat())
        .expect(raised, stopped, &[cached, busy].concat())
        .require(stopped, settled, "need_unknown", &[cached, busy].concat());
    let records = check(&client, &ns.name, &operator, &expected).await;
    assert!(
        records.iter().any(|r| r.fired() && r.slot == restarted),
        "{records:?}"
    );
}

/// `need.query` is confined to the Eru's namespace (issue 54): `tenant_value` has a series in the
/// Eru's namespace (0.1) and one in another (0.97). A query naming the other namespace and one
/// naming none are both evaluated on the Eru's own: every slot `not_needed` with 0.1 in its note,
/// never 0.97. A query that cannot be confined makes the Eru Invalid (condition and Event) and
/// nothing restarts it. An answer of 100,000 series (served by a fake Prometheus of the test's:
/// the bound is the operator's, and 100,000 real series cost minutes of a 2-core machine) is
/// `need_unknown` with why; the operator's memory is read before and after.
#[tokio::test]
#[ignore = "needs the local cluster and Prometheus: hack/test.sh"]
async fn a_need_query_sees_only_its_erus_namespace_and_a_huge_answer_is_refused() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "need-tenant").await;
    let other = TestNamespace::create(&client, "need-other").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    for name in ["other", "none", "refused"] {
        deployment(&client, &ns.name, name, 1, json!({})).await;
        wait_ready(&deployments, name, 1).await;
    }
    let prometheus = Prometheus::start();
    prometheus.rules(&format!(
        "groups:\n  - name: tenants\n    interval: 1s\n    rules:\n      - record: tenant_value\n        expr: vector(0.1)\n        labels: {{namespace: {}}}\n      - record: tenant_value\n        expr: vector(0.97)\n        labels: {{namespace: {}}}\n",
        ns.name, other.name
    ));
    wait_for_sync("both tenants' series", || {
        (prometheus.query("count(tenant_value)").as_deref() == Some("2")).then_some(())
    });
    let url = prometheus.url();
    let operator = Operator::start(
        &client,
        &ns.name,
        &["--prometheus-url", &url, "--gate-cache-ttl", "1s"],
    )
    .await;
    let need = |query: &str| json!({"query": query, "threshold": "0.5", "onUnknown": "Skip"});
    for (name, query) in [
        (
            "other",
            format!("max(tenant_value{{namespace=\"{}\"}})", other.name),
        ),
        ("none", "max(tenant_value)".to_string()),
        (
            "refused",
            "max(tenant_value{namespace=\"$namespace\"}".to_string(),
        ),
    ] {
        create_eru(
            &client,
            &ns.name,
            name,
            json!({"schedule": "*/5 * * * * *", "target": {"kind": "Deployment", "name": name},
                   "need": need(&query)}),
        )
        .await
        .unwrap();
    }
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    refused_as_invalid(&client, &erus, &ns.name).await;
    // three slots of each, at least
    let enough = Utc::now() + Span::seconds(15);
    for name in ["other", "none"] {
        wait_for(
            &format!("{name}: a slot after {enough}"),
            Duration::from_secs(60),
            || async {
                slot_records(&operator, name)
                    .ok()?
                    .into_iter()
                    .find(|r| r.slot > enough)
            },
        )
        .await;
    }
    let confined = format!(
        "the need query returned 0.1 at most, not above its threshold 0.5: max(tenant_value{{namespace=\"{}\"}})",
        ns.name
    );
    for name in ["other", "none"] {
        let settled = settle(&erus, &operator, name).await;
        let from = created(&erus, name).await + Span::seconds(1);
        // every slot not_needed, from A's value: nothing restarted, so nothing else may happen
        let expected = Ledger::deployment(
            name,
            name,
            (from, settled),
            common::ledger::every(5, from, settled),
        )
        .require(from, settled, "not_needed", &[]);
        for record in check(&client, &ns.name, &operator, &expected).await {
            assert_eq!(
                record.note.as_deref(),
                Some(confined.as_str()),
                "{name}: {record:?}"
            );
        }
    }
    // the refused Eru never restarted: each of its slots is skipped spec_invalid, when due
    let refused = deployments.get("refused").await.unwrap();
    assert_eq!(
        template_slot(&refused),
        None,
        "the refused Eru restarted its target"
    );
    let records = slot_records(&operator, "refused").unwrap();
    assert!(!records.is_empty(), "no record of the refused Eru's slots");
    assert!(
        records
            .iter()
            .all(|r| r.reason.as_deref() == Some("spec_invalid")),
        "{records:?}"
    );
    huge_answer_is_refused(&client).await;
}

/// Waits until the Eru `refused` (its need query does not parse) is Invalid, its condition and
/// its Event saying why.
async fn refused_as_invalid(client: &Client, erus: &Api<Eru>, ns: &str) {
    let why = format!("need.query cannot be confined to namespace {ns}: it does not parse as PromQL");
    wait_for("refused: Invalid, with why", Duration::from_secs(30), || async {
        let s = status(erus, "refused").await?;
        let invalid = (s.conditions.iter())
            .any(|c| c.type_ == "ScheduleValid" && c.status == "False" && c.message.starts_with(&why));
        (s.phase.as_deref() == Some("Invalid") && invalid).then_some(())
    })
    .await;
    wait_for(
        "refused: an InvalidSpec Event",
        Duration::from_secs(30),
        || async {
            let events = common::eru::events(client, ns, "refused", "InvalidSpec").await;
            (events.iter())
                .find(|e| e.note.as_deref().is_some_and(|n| n.starts_with(&why)))
                .map(|_| ())
        },
    )
    .await;
}

/// An Eru whose query answers 100,000 series (a fake Prometheus, `onUnknown: Skip`): every slot
/// `need_unknown`, the note saying the answer was too large; the query the fake received is the
/// confined one. Prints the operator's VmRSS and VmHWM before and after (docs: the bound).
async fn huge_answer_is_refused(client: &Client) {
    let ns = TestNamespace::create(client, "need-huge").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(client, &ns.name, "huge", 1, json!({})).await;
    wait_ready(&deployments, "huge", 1).await;
    let fake = FakePrometheus::start(&ns.name, 100_000);
    let url = fake.url();
    let operator = Operator::start(
        client,
        &ns.name,
        &["--prometheus-url", &url, "--gate-cache-ttl", "1s"],
    )
    .await;
    let before = memory(&operator);
    create_eru(
        client,
        &ns.name,
        "huge",
        json!({"schedule": "*/5 * * * * *", "target": {"kind": "Deployment", "name": "huge"},
               "need": {"query": "tenant_value", "threshold": "0.5", "onUnknown": "Skip"}}),
    )
    .await
    .unwrap();
    let enough = Utc::now() + Span::seconds(15);
    wait_for("huge: a slot after 15 s", Duration::from_secs(60), || async {
        slot_records(&operator, "huge")
            .ok()?
            .into_iter()
            .find(|r| r.slot > enough)
    })
    .await;
    let after = memory(&operator);
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let settled = settle(&erus, &operator, "huge").await;
    let from = created(&erus, "huge").await + Span::seconds(1);
    let expected = Ledger::deployment(
        "huge",
        "huge",
        (from, settled),
        common::ledger::every(5, from, settled),
    )
    .require(from, settled, "need_unknown", &[]);
    for record in check(client, &ns.name, &operator, &expected).await {
        assert_eq!(
            record.note.as_deref(),
            Some("the need query answered more than 1024 KiB; narrow it (an aggregation such as max)"),
            "{record:?}"
        );
    }
    let sent = fake.queries();
    assert!(!sent.is_empty(), "the fake Prometheus was never asked");
    let confined = format!("tenant_value{{namespace=\"{}\"}}", ns.name);
    assert!(sent.iter().all(|q| *q == confined), "{sent:?}");
    println!(
        "operator memory, {} answers of {} bytes: VmRSS {} -> {} kB, VmHWM {} -> {} kB",
        sent.len(),
        fake.body_len(),
        before.0,
        after.0,
        before.1,
        after.1
    );
}

/// The operator's (VmRSS, VmHWM) in kB, from /proc.
fn memory(operator: &Operator) -> (u64, u64) {
    let pid = operator.pid().expect("the operator runs");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        (status.lines())
            .find_map(|l| {
                l.strip_prefix(name)?
                    .trim()
                    .strip_suffix("kB")?
                    .trim()
                    .parse()
                    .ok()
            })
            .unwrap_or_else(|| panic!("{name} in /proc/{pid}/status"))
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// An HTTP server on loopback answering every `/api/v1/query` with the same vector of `series`
/// samples of `tenant_value` in `namespace` (about 100 bytes each), keeping the queries asked.
struct FakePrometheus {
    port: u16,
    queries: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    body_len: usize,
}

impl FakePrometheus {
    fn start(namespace: &str, series: usize) -> Self {
        let samples: Vec<String> = (0..series)
            .map(|i| format!(r#"{{"metric":{{"__name__":"tenant_value","namespace":"{namespace}","pod":"p-{i:06}"}},"value":[1700000000,"0.1"]}}"#))
            .collect();
        let body = format!(
            r#"{{"status":"success","data":{{"resultType":"vector","result":[{}]}}}}"#,
            samples.join(",")
        );
        let body = std::sync::Arc::new(body.into_bytes());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let queries = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (kept, answer) = (queries.clone(), body.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (kept, answer) = (kept.clone(), answer.clone());
                std::thread::spawn(move || serve_one(stream, &kept, &answer));
            }
        });
        Self {
            port,
            queries,
            body_len: body.len(),
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn queries(&self) -> Vec<String> {
        self.queries.lock().unwrap().clone()
    }

    fn body_len(&self) -> usize {
        self.body_len
    }
}

/// One request: its `query` parameter kept, the answer written whole (the operator may hang up
/// first: its bound).
fn serve_one(stream: std::net::TcpStream, kept: &std::sync::Mutex<Vec<String>>, answer: &[u8]) {
    use std::io::{BufRead, Write};
    let mut reader = std::io::BufReader::new(&stream);
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let target = line.split_whitespace().nth(1).unwrap_or_default().to_string();
    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
        line.clear();
    }
    if let Some((_, query)) = target.split_once('?') {
        let asked = form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "query");
        kept.lock().unwrap().extend(asked.map(|(_, v)| v.into_owned()));
    }
    let mut stream = &stream;
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        answer.len()
    );
    let _ = stream
        .write_all(head.as_bytes())
        .and_then(|_| stream.write_all(answer));
}

/// A Prometheus server of its own on loopback, killed on drop, evaluating one rule file the test
/// rewrites (and reloads) to make its alert fire or stop.
struct Prometheus {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
}

impl Prometheus {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nrule_files: ['{}']\n",
            dir.path().join("gate.rules.yaml").display()
        );
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        let mut prometheus = Self {
            child: None,
            port: free_port(),
            dir,
        };
        prometheus.rule(None);
        let child = Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                prometheus.dir.path().join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                prometheus.dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{}", prometheus.port))
            .arg("--web.enable-lifecycle")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(prometheus.dir.path().join("prometheus.log")).unwrap())
            .spawn()
            .expect("prometheus on PATH (Debian package prometheus; hack/deps.sh installs it)");
        prometheus.child = Some(child);
        wait_for_sync("Prometheus to answer", || prometheus.alerts().ok().map(|_| ()));
        prometheus
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Writes the rule file: alert `GateTest` with `labels` firing at once (`vector(1)`, no
    /// `for`), or no rule; and has Prometheus reload it if it runs.
    fn rule(&self, labels: Option<Value>) {
        let rules = match labels {
            Some(labels) => format!(
                "groups:\n  - name: gate\n    interval: 1s\n    rules:\n      - alert: GateTest\n        expr: vector(1)\n        labels: {labels}\n"
            ),
            None => "groups: []\n".to_string(),
        };
        self.rules(&rules);
    }

    /// Writes the recording rule `eru_test_need` = `value`, labelled `labels`, and reloads.
    fn record(&self, value: f64, labels: Value) {
        self.rules(&format!(
            "groups:\n  - name: need\n    interval: 1s\n    rules:\n      - record: eru_test_need\n        expr: vector({value})\n        labels: {labels}\n"
        ));
    }

    /// Writes the rule file and has Prometheus reload it if it runs.
    fn rules(&self, rules: &str) {
        std::fs::write(self.dir.path().join("gate.rules.yaml"), rules).unwrap();
        if self.child.is_some() {
            let agent = common::agent(Some(Duration::from_secs(5)));
            let (status, _) = (agent.post(format!("{}/-/reload", self.url())).send_empty())
                .map(|r| (r.status().as_u16(), ()))
                .unwrap();
            assert_eq!(status, 200, "reload");
        }
    }

    /// The value of the first sample `query` answers now, as Prometheus writes it.
    fn query(&self, query: &str) -> Option<String> {
        let agent = common::agent(Some(Duration::from_secs(5)));
        let mut response = (agent.get(format!("{}/api/v1/query", self.url())))
            .query("query", query)
            .call()
            .ok()?;
        let body: Value = serde_json::from_str(&response.body_mut().read_to_string().ok()?).ok()?;
        body["data"]["result"][0]["value"][1].as_str().map(str::to_string)
    }

    /// The names of the firing alerts.
    fn alerts(&self) -> Result<Vec<String>, String> {
        let agent = common::agent(Some(Duration::from_secs(5)));
        let mut response = agent
            .get(format!("{}/api/v1/alerts", self.url()))
            .call()
            .map_err(|e| e.to_string())?;
        let body: Value =
            serde_json::from_str(&response.body_mut().read_to_string().map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
        Ok(body["data"]["alerts"]
            .as_array()
            .ok_or("no alerts")?
            .iter()
            .filter(|a| a["state"] == "firing")
            .map(|a| a["labels"]["alertname"].as_str().unwrap_or_default().to_string())
            .collect())
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Polls `check` every 200 ms for at most 60 s (a synchronous [`wait_for`]).
fn wait_for_sync<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[tokio::test]
#[ignore = "needs the local cluster and Debian's prometheus: hack/test.sh"]
async fn a_firing_alert_holds_a_slot_and_an_unreachable_prometheus_fails_safe() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "gates-alerts").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let names = ["cleared", "outlasted", "unknown", "proceeds"];
    for name in names {
        deployment(&client, &ns.name, name, 1, json!({})).await;
    }
    for name in names {
        wait_ready(&deployments, name, 1).await;
    }
    let mut prometheus = Prometheus::start();
    // an alert about the workloads of this namespace (its `deployment` label names one)
    prometheus.rule(Some(json!({"namespace": ns.name, "severity": "page"})));
    wait_for_sync("GateTest to fire", || {
        prometheus
            .alerts()
            .ok()
            .filter(|a| a.contains(&"GateTest".to_string()))
            .map(|_| ())
    });
    let operator = Operator::start(
        &client,
        &ns.name,
        &[
            "--prometheus-url",
            &prometheus.url(),
            "--gate-poll-interval",
            "1s",
            "--gate-cache-ttl",
            "1s",
        ],
    )
    .await;
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let alerts = |on_unknown: &str| json!({"alerts": {"name": "Gate.*", "labels": {"namespace": "$namespace"}, "onUnknown": on_unknown}});

    // firing: "cleared" (deadline 300 s) and "outlasted" (12 s) are held
    let (slot, schedule) = one_slot(8);
    gated_eru(&client, &ns.name, "cleared", &schedule, 300, alerts("Hold")).await;
    gated_eru(&client, &ns.name, "outlasted", &schedule, 12, alerts("Hold")).await;
    created_before(&erus, &["cleared", "outlasted"], slot).await;
    let shown = held(&erus, "cleared", slot, "alert_firing").await;
    assert!(shown.held.unwrap().note.contains("GateTest"));
    // the alert outlasts the deadline of "outlasted": skipped/alert_firing, the alert and the
    // hold in its note
    let record = recorded(&operator, "outlasted", slot, Duration::from_secs(60)).await;
    assert_eq!(
        (record.result.as_str(), record.reason.as_deref()),
        ("skipped", Some("alert_firing")),
        "{record:?}"
    );
    let note = record.note.clone().unwrap_or_default();
    assert!(note.starts_with("alerts firing: GateTest; held from "), "{note}");
    // the alert clears: "cleared" runs, once
    prometheus.rule(None);
    wait_for_sync("GateTest to stop", || {
        prometheus.alerts().ok().filter(|a| a.is_empty()).map(|_| ())
    });
    let record = recorded(&operator, "cleared", slot, Duration::from_secs(60)).await;
    assert!(record.fired(), "{record:?}");

    // Prometheus stopped: onUnknown Hold records gate_unknown with the error; Proceed runs
    prometheus.stop();
    let (slot2, schedule2) = one_slot(8);
    gated_eru(&client, &ns.name, "unknown", &schedule2, 12, alerts("Hold")).await;
    gated_eru(&client, &ns.name, "proceeds", &schedule2, 300, alerts("Proceed")).await;
    created_before(&erus, &["unknown", "proceeds"], slot2).await;
    held(&erus, "unknown", slot2, "gate_unknown").await;
    let record = recorded(&operator, "unknown", slot2, Duration::from_secs(60)).await;
    assert_eq!(
        (record.result.as_str(), record.reason.as_deref()),
        ("skipped", Some("gate_unknown")),
        "{record:?}"
    );
    let note = record.note.clone().unwrap_or_default();
    assert!(
        note.starts_with("asking Prometheus at ") && note.contains("held from "),
        "{note}"
    );
    let record = recorded(&operator, "proceeds", slot2, Duration::from_secs(60)).await;
    assert!(record.fired(), "{record:?}");

    for expected in [
        ("cleared", slot, "fired"),
        ("outlasted", slot, "alert_firing"),
        ("unknown", slot2, "gate_unknown"),
        ("proceeds", slot2, "fired"),
    ] {
        check_one(&client, &ns.name, &operator, expected).await;
    }
    let evaluations = operator.get("/metrics").1;
    assert!(
        evaluations.contains("eru_gate_evaluations_total{gate=\"alerts\",result=\"closed\"}"),
        "the evaluations are counted"
    );
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn the_api_server_refuses_gates_that_cannot_work() {
    let client = client().await;
    common::install();
    let ns = TestNamespace::create(&client, "gates-cel").await;
    let refused = |spec: Value| {
        let client = client.clone();
        let ns = ns.name.clone();
        async move {
            let mut body = json!({"schedule": "0 3 * * *", "target": {"kind": "Deployment", "name": "web"}});
            common::eru::merge(&mut body, spec);
            common::eru::create_raw_eru(&client, &ns, "bad", body)
                .await
                .err()
                .map(|e| e.to_string())
        }
    };
    let empty = refused(json!({"gates": {}})).await.expect("refused");
    assert!(
        empty.contains("gates needs blockingPodSelector, alerts or podDisruptionBudgets: true"),
        "{empty}"
    );
    let all = refused(json!({"gates": {"blockingPodSelector": {}}}))
        .await
        .expect("refused");
    assert!(all.contains("empty blockingPodSelector"), "{all}");
    let unknown = refused(json!({"gates": {"alerts": {"onUnknown": "Maybe"}}}))
        .await
        .expect("refused");
    assert!(unknown.contains("onUnknown"), "{unknown}");
    // a budget gate switched off is no gate; a need without a condition is no need
    let off = refused(json!({"gates": {"podDisruptionBudgets": false}}))
        .await
        .expect("refused");
    assert!(
        off.contains("gates needs blockingPodSelector, alerts or podDisruptionBudgets: true"),
        "{off}"
    );
    let need = refused(json!({"need": {"onUnknown": "Skip"}}))
        .await
        .expect("refused");
    assert!(need.contains("need needs minPodAgeSeconds"), "{need}");
    let age = refused(json!({"need": {"minPodAgeSeconds": 0}}))
        .await
        .expect("refused");
    assert!(age.contains("minPodAgeSeconds"), "{age}");
    // an invalid regexp passes the schema: the Eru is Invalid, with why
    let operator = Operator::start(&client, &ns.name, &[]).await;
    create_eru(
        &client,
        &ns.name,
        "regexp",
        json!({"schedule": "0 3 * * *", "target": {"kind": "Deployment", "name": "web"},
               "gates": {"alerts": {"name": "(unclosed"}}}),
    )
    .await
    .unwrap();
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    wait_for(
        "the Eru with a bad regexp to be Invalid",
        Duration::from_secs(30),
        || async {
            let s = status(&erus, "regexp").await?;
            let c = s.conditions.iter().find(|c| c.type_ == "ScheduleValid")?;
            (s.phase.as_deref() == Some("Invalid") && c.message.contains("gates.alerts.name")).then_some(())
        },
    )
    .await;
    drop(operator);
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn cluster_wide_gates_hold_every_eru_and_a_dry_run_shows_the_decision() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "gates-cluster").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    for name in ["plain", "dry"] {
        deployment(&client, &ns.name, name, 1, json!({})).await;
    }
    for name in ["plain", "dry"] {
        wait_ready(&deployments, name, 1).await;
    }
    // the operator's file as a mapping: no blackouts, a cluster-wide blocking-pod selector
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("blackouts.yaml");
    std::fs::write(
        &file,
        "blackouts: []\ngates:\n  blockingPodSelector:\n    matchLabels: {blocks-restarts: \"true\"}\n",
    )
    .unwrap();
    let operator = Operator::start(
        &client,
        &ns.name,
        &[
            "--blackouts-file",
            file.to_str().unwrap(),
            "--gate-poll-interval",
            "1s",
            "--gate-cache-ttl",
            "1s",
        ],
    )
    .await;
    pod(&client, &ns.name, "backup", json!({"blocks-restarts": "true"})).await;
    let (slot, schedule) = one_slot(8);
    for (name, deadline, dry) in [("plain", 12, false), ("dry", 300, true)] {
        create_eru(
            &client,
            &ns.name,
            name,
            json!({"schedule": schedule, "target": {"kind": "Deployment", "name": name},
                   "startingDeadlineSeconds": deadline, "dryRun": dry}),
        )
        .await
        .unwrap();
    }
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    created_before(&erus, &["plain", "dry"], slot).await;
    // an Eru without gates of its own is held by the cluster's, and skipped at its deadline
    let record = recorded(&operator, "plain", slot, Duration::from_secs(60)).await;
    assert_eq!(
        (record.result.as_str(), record.reason.as_deref()),
        ("skipped", Some("blocking_pods")),
        "{record:?}"
    );
    let note = record.note.clone().unwrap_or_default();
    assert!(
        note.contains("(cluster-wide gate)") && note.contains("backup"),
        "{note}"
    );
    // a dry run is held the same way, and journaled dry_run once the gate opens
    held(&erus, "dry", slot, "blocking_pods").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    pods.delete("backup", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let record = recorded(&operator, "dry", slot, Duration::from_secs(60)).await;
    assert_eq!(
        (record.result.as_str(), record.reason.as_deref()),
        ("skipped", Some("dry_run")),
        "{record:?}"
    );
    for (name, account) in [("plain", "blocking_pods"), ("dry", "dry_run")] {
        check_one(&client, &ns.name, &operator, (name, slot, account)).await;
        assert_eq!(
            template_slot(&deployments.get(name).await.unwrap()),
            None,
            "{name} never patched"
        );
    }
}

/// Issue 47: a held slot stays held across a crash. Three Erus due at one instant: one held by a
/// blocking pod, one by a firing alert, one without gates that fires; a second operator (its own
/// namespace) asks a Prometheus that does not answer, so its Eru is held `gate_unknown`. Both
/// operators are SIGKILLed just after the slot, once the holds are in the status and the fired
/// restart is journaled, and started again before the deadline; the gates stay closed past it.
/// The records: `skipped` with each gate's reason and what held it, never `operator_down` (an
/// operator ran at the deadline and asked the gates); the fired one restarted once; and the
/// downtime of the kill starts after the last thing the killed run journaled, not at its older
/// heartbeat.
#[tokio::test]
#[ignore = "needs the local cluster and Debian's prometheus: hack/test.sh"]
async fn a_slot_held_when_the_operator_dies_keeps_its_gates_reason_after_a_restart() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "gates-crash").await;
    let dark = TestNamespace::create(&client, "gates-crash-dark").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let dark_deployments: Api<Deployment> = Api::namespaced(client.clone(), &dark.name);
    for name in ["pods", "alert", "fires"] {
        deployment(&client, &ns.name, name, 1, json!({})).await;
    }
    deployment(&client, &dark.name, "unknown", 1, json!({})).await;
    for name in ["pods", "alert", "fires"] {
        wait_ready(&deployments, name, 1).await;
    }
    wait_ready(&dark_deployments, "unknown", 1).await;
    let prometheus = Prometheus::start();
    prometheus.rule(Some(json!({"namespace": ns.name})));
    wait_for_sync("GateTest to fire", || {
        prometheus
            .alerts()
            .ok()
            .filter(|a| a.contains(&"GateTest".to_string()))
            .map(|_| ())
    });
    let gate_flags = ["--gate-poll-interval", "1s", "--gate-cache-ttl", "1s"];
    let url = prometheus.url();
    let mut operator = Operator::start(
        &client,
        &ns.name,
        &[&gate_flags[..], &["--prometheus-url", &url]].concat(),
    )
    .await;
    // a Prometheus nobody answers at: a port taken from the pool and never listened on
    let nobody = format!("http://127.0.0.1:{}", free_port());
    let mut dark_operator = Operator::start(
        &client,
        &dark.name,
        &[&gate_flags[..], &["--prometheus-url", &nobody]].concat(),
    )
    .await;
    pod(&client, &ns.name, "backup-0", json!({"job": "backup"})).await;

    // the deadline leaves room for the kill, the restart and a few gate polls after it
    let deadline = 40;
    let (slot, schedule) = one_slot(10);
    let alerts = |on_unknown: &str| json!({"alerts": {"name": "Gate.*", "labels": {"namespace": "$namespace"}, "onUnknown": on_unknown}});
    gated_eru(
        &client,
        &ns.name,
        "pods",
        &schedule,
        deadline,
        json!({"blockingPodSelector": {"matchLabels": {"job": "backup"}}}),
    )
    .await;
    gated_eru(&client, &ns.name, "alert", &schedule, deadline, alerts("Hold")).await;
    create_eru(
        &client,
        &ns.name,
        "fires",
        json!({"schedule": schedule, "target": {"kind": "Deployment", "name": "fires"},
               "startingDeadlineSeconds": deadline}),
    )
    .await
    .unwrap();
    gated_eru(
        &client,
        &dark.name,
        "unknown",
        &schedule,
        deadline,
        alerts("Hold"),
    )
    .await;
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let dark_erus: Api<Eru> = Api::namespaced(client.clone(), &dark.name);
    created_before(&erus, &["pods", "alert", "fires"], slot).await;
    created_before(&dark_erus, &["unknown"], slot).await;

    // the slot comes: two holds in the status, the third Eru's restart journaled and patched
    held(&erus, "pods", slot, "blocking_pods").await;
    held(&erus, "alert", slot, "alert_firing").await;
    held(&dark_erus, "unknown", slot, "gate_unknown").await;
    let fired = wait_for(
        "the restart of fires patched",
        Duration::from_secs(30),
        || async {
            let records = slot_records(&operator, "fires").ok()?;
            let record = records.into_iter().find(|r| r.covers(slot))?;
            record.patched_at().map(|at| (record, at))
        },
    )
    .await;
    // SIGKILL both just after the slot (nothing is journaled for a hold), and start them again
    // a few seconds later, well before the deadline
    operator.kill();
    dark_operator.kill();
    let killed_at = Utc::now();
    assert!(
        killed_at < slot + Span::seconds(deadline - 15),
        "the kill came too late to restart before the deadline ({killed_at}): the test needs a \
         longer deadline on this machine"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    operator.restart().await;
    dark_operator.restart().await;
    let restarted_at = Utc::now();
    assert!(
        restarted_at < slot + Span::seconds(deadline),
        "restarted after the deadline"
    );

    // at the deadline, with the gates still closed: each gate's reason, and what held it
    for (operator, name, reason, named) in [
        (&operator, "pods", "blocking_pods", "backup-0"),
        (&operator, "alert", "alert_firing", "GateTest"),
        (&dark_operator, "unknown", "gate_unknown", "asking Prometheus at "),
    ] {
        let record = recorded(operator, name, slot, Duration::from_secs(90)).await;
        assert_eq!(
            (record.result.as_str(), record.reason.as_deref()),
            ("skipped", Some(reason)),
            "{name}: the gate held it through the restart until its deadline: {record:?}"
        );
        let note = record.note.clone().unwrap_or_default();
        assert!(
            note.contains(named) && note.contains("held from "),
            "{name}: {note}"
        );
        assert_eq!(record.window, None, "{name}: no downtime window: {record:?}");
    }
    let record = recorded(&operator, "fires", slot, Duration::from_secs(10)).await;
    assert!(record.fired(), "{record:?}");

    // the kill's downtime starts at the killed run's last sign of life: after the fired record
    // was journaled (its patch time), not at an older heartbeat
    let audit = operator.get_json(&format!("/audit?namespace={}", ns.name));
    let downtime = audit["operator"]["downtime"].as_array().unwrap().clone();
    assert_eq!(downtime.len(), 1, "one downtime, the kill's: {downtime:?}");
    let start: DateTime<Utc> = downtime[0]["start"].as_str().unwrap().parse().unwrap();
    let end: DateTime<Utc> = downtime[0]["end"].as_str().unwrap().parse().unwrap();
    assert!(
        fired.1 <= start && start <= killed_at && killed_at <= end && end <= restarted_at,
        "the downtime {start} .. {end} starts at the last sign of life (after the patch at {}) \
         and holds the kill at {killed_at}",
        fired.1
    );
    assert!(
        audit["operator"]["no_journal"]["end"].as_str().is_some(),
        "the window before the journal's first run is said, not called downtime: {}",
        audit["operator"]
    );

    for expected in [
        ("pods", slot, "blocking_pods"),
        ("alert", slot, "alert_firing"),
        ("fires", slot, "fired"),
    ] {
        check_one(&client, &ns.name, &operator, expected).await;
    }
    check_one(
        &client,
        &dark.name,
        &dark_operator,
        ("unknown", slot, "gate_unknown"),
    )
    .await;
    for name in ["pods", "alert"] {
        assert_eq!(
            template_slot(&deployments.get(name).await.unwrap()),
            None,
            "{name} never patched"
        );
    }
}

/// Posts an alert `alertname` about `namespace` to Alertmanager, firing for ten minutes.
fn fire(alertmanager: &str, alertname: &str, namespace: &str) {
    let alert = json!([{"labels": {"alertname": alertname, "namespace": namespace},
                        "endsAt": (Utc::now() + Span::minutes(10)).to_rfc3339()}]);
    common::agent(Some(Duration::from_secs(5)))
        .post(&format!("{alertmanager}/api/v2/alerts"))
        .header("Content-Type", "application/json")
        .send(alert.to_string())
        .unwrap_or_else(|e| panic!("posting an alert to {alertmanager}: {e}"));
}

/// Alertmanager's state of the alert `alertname` about `namespace` ("active", "suppressed") and
/// the silences that suppress it.
fn alert_state(alertmanager: &str, alertname: &str, namespace: &str) -> Option<(String, Vec<String>)> {
    let url = format!("{alertmanager}/api/v2/alerts?filter=alertname%3D%22{alertname}%22");
    let alerts = common::get_json(&url);
    let alert = (alerts.as_array()?.iter()).find(|a| a["labels"]["namespace"] == namespace)?;
    let by = (alert["status"]["silencedBy"].as_array().into_iter().flatten())
        .filter_map(|id| id.as_str().map(str::to_string))
        .collect();
    Some((alert["status"]["state"].as_str()?.to_string(), by))
}

/// Tenancy of silences: an Eru's own matchers can only narrow its namespace. An Eru whose matchers
/// say "every alert of the cluster" (`alertname=~".+"`) silences its own namespace's alert while
/// it restarts and never another namespace's, which Alertmanager itself keeps active; the silence
/// carries the namespace's matcher and ends within the rollout's timeout and a minute, though the
/// slot's deadline is a year away. An Eru whose matcher names another namespace is Invalid (an
/// InvalidSpec Event saying why), creates no silence and restarts nothing: its slot is skipped
/// `spec_invalid`.
#[tokio::test]
#[ignore = "needs the local cluster and an Alertmanager: hack/test.sh"]
async fn an_erus_silence_stays_in_its_namespace_and_ends_with_its_rollout() {
    let am = alertmanager();
    let client = client().await;
    let ns = TestNamespace::create(&client, "silence-tenancy").await;
    let other = format!("{}-other", ns.name);
    let probe = format!("EruTenancy{}", Utc::now().timestamp());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(
        &client,
        &ns.name,
        "web",
        1,
        json!({"spec": {"minReadySeconds": 8}}),
    )
    .await;
    deployment(&client, &ns.name, "foreign", 1, json!({})).await;
    for name in ["web", "foreign"] {
        wait_ready(&deployments, name, 1).await;
    }
    for namespace in [&ns.name, &other] {
        fire(&am, &probe, namespace);
    }
    let operator = Operator::start(&client, &ns.name, &["--alertmanager-url", &am]).await;
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let (slot, schedule) = one_slot(10);
    let every_alert = json!({"matchers": [{"name": "alertname", "value": ".+", "regex": true}]});
    let web = json!({"schedule": schedule, "startingDeadlineSeconds": 31_536_000, "rolloutTimeoutSeconds": 120,
                     "silence": every_alert, "target": {"kind": "Deployment", "name": "web"}});
    let elsewhere = json!({"matchers": [{"name": "namespace", "value": other}]});
    let foreign = json!({"schedule": schedule, "startingDeadlineSeconds": 8, "silence": elsewhere,
                         "target": {"kind": "Deployment", "name": "foreign"}});
    create_eru(&client, &ns.name, "web", web).await.unwrap();
    create_eru(&client, &ns.name, "foreign", foreign).await.unwrap();
    created_before(&erus, &["web", "foreign"], slot).await;

    let silence = wait_for("web rolling out, silenced", Duration::from_secs(40), || async {
        status(&erus, "web")
            .await?
            .last_restart
            .filter(|r| r.slot == slot && r.outcome == "in_progress" && r.patched_at.is_some())?;
        let silences = silences_of(&am, &ns.name);
        silences.into_iter().find(|s| s["status"]["state"] == "active")
    })
    .await;
    let id = silence["id"].as_str().unwrap().to_string();
    let matchers: Vec<(&str, &str, bool)> = (silence["matchers"].as_array().unwrap().iter())
        .map(|m| {
            (
                m["name"].as_str().unwrap(),
                m["value"].as_str().unwrap(),
                m["isRegex"] == true,
            )
        })
        .collect();
    assert_eq!(
        matchers,
        [("namespace", ns.name.as_str(), false), ("alertname", ".+", true)]
    );
    let lasts = time(&silence["endsAt"]) - time(&silence["startsAt"]);
    assert!(
        lasts <= Span::seconds(120 + 60 + 5),
        "the silence lasts {lasts}: {silence}"
    );
    // Alertmanager's own word: this namespace's alert silenced by it, the other's still active
    let own = wait_for("the Eru's alert suppressed", Duration::from_secs(20), || async {
        alert_state(&am, &probe, &ns.name).filter(|(state, _)| state == "suppressed")
    })
    .await;
    assert_eq!(own.1, std::slice::from_ref(&id), "{own:?}");
    let theirs = alert_state(&am, &probe, &other).expect("the other namespace's alert");
    assert_eq!(
        theirs,
        ("active".to_string(), vec![]),
        "another namespace's alert was silenced"
    );

    // a silence named outside its namespace: Invalid, told, no silence, no restart
    let phase = wait_for("foreign Invalid", Duration::from_secs(20), || async {
        status(&erus, "foreign").await?.phase.filter(|p| p == "Invalid")
    })
    .await;
    assert_eq!(phase, "Invalid");
    let told = common::eru::events(&client, &ns.name, "foreign", "InvalidSpec").await;
    let note = told
        .iter()
        .find_map(|e| e.note.clone())
        .expect("an InvalidSpec Event");
    assert!(
        note.contains(&format!("namespace={other:?}")) && note.contains("confined"),
        "{note}"
    );
    // its slot and its deadline (8 s) pass: no silence anywhere, no patch
    tokio::time::sleep(
        (slot - Utc::now() + Span::seconds(10))
            .to_std()
            .unwrap_or_default(),
    )
    .await;
    assert!(
        silences_of(&am, &other).is_empty(),
        "a silence of another namespace"
    );
    assert_eq!(
        deployments.get("foreign").await.unwrap().metadata.generation,
        Some(1)
    );
    // fixed (its own namespace) after the deadline: valid again, and the slot it was invalid for
    // is accounted so (fixed within the deadline, the slot would still run)
    let mine = json!({"spec": {"silence": {"matchers": [{"name": "namespace", "value": ns.name}]}}});
    erus.patch("foreign", &PatchParams::default(), &Patch::Merge(&mine))
        .await
        .unwrap();
    let record = recorded(&operator, "foreign", slot, Duration::from_secs(40)).await;
    assert_eq!(record.reason.as_deref(), Some("spec_invalid"), "{record:?}");
    assert_eq!(
        deployments.get("foreign").await.unwrap().metadata.generation,
        Some(1)
    );
    wait_for("web succeeded", Duration::from_secs(60), || async {
        status(&erus, "web")
            .await?
            .last_restart
            .filter(|r| r.outcome == "succeeded")
    })
    .await;
    for name in ["web", "foreign"] {
        settle(&erus, &operator, name).await;
    }
    check_one(&client, &ns.name, &operator, ("web", slot, "fired")).await;
    check_one(&client, &ns.name, &operator, ("foreign", slot, "spec_invalid")).await;
}

/// The Alertmanager of `hack/alertmanager.sh` (hack/test.sh starts one).
fn alertmanager() -> String {
    std::env::var("ERU_TEST_ALERTMANAGER_URL")
        .expect("ERU_TEST_ALERTMANAGER_URL: hack/test.sh starts an Alertmanager (hack/alertmanager.sh)")
}

/// The silences Alertmanager holds with the matcher `namespace="<ns>"` (expired ones too).
fn silences_of(alertmanager: &str, ns: &str) -> Vec<Value> {
    let url = format!("{alertmanager}/api/v2/silences?filter=namespace%3D%22{ns}%22");
    let silences = common::get_json(&url);
    silences.as_array().expect("a list of silences").clone()
}

/// Silences while restarting (`spec.silence`, a real Alertmanager from Debian's package): the
/// target's alerts are silenced just before the patch (the default matchers: its namespace and
/// its pods), the silence is active while the rollout runs (minReadySeconds makes it last) and
/// expired at its end, and the restart's record keeps its id. A silence Alertmanager refuses
/// holds the patch (`onUnknown: Hold`: given up at the deadline as `patch_failed`, saying why) or
/// is gone without (`Proceed`: restarted, a `SilenceFailed` Event). Each slot one record.
#[tokio::test]
#[ignore = "needs the local cluster and an Alertmanager: hack/test.sh"]
async fn a_restart_is_silenced_while_it_rolls_out_and_an_unknown_silence_follows_on_unknown() {
    let am = alertmanager();
    let client = client().await;
    let ns = TestNamespace::create(&client, "eru-silence").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(
        &client,
        &ns.name,
        "web",
        1,
        json!({"spec": {"minReadySeconds": 6}}),
    )
    .await;
    deployment(&client, &ns.name, "held", 1, json!({})).await;
    deployment(&client, &ns.name, "loud", 1, json!({})).await;
    for name in ["web", "held", "loud"] {
        wait_ready(&deployments, name, 1).await;
    }
    let operator = Operator::start(&client, &ns.name, &["--alertmanager-url", &am]).await;
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let (slot, schedule) = one_slot(10);
    let eru = |name: &str, silence: Value| {
        json!({"schedule": schedule, "startingDeadlineSeconds": 8, "silence": silence,
               "target": {"kind": "Deployment", "name": name}})
    };
    // a matcher Alertmanager refuses: a regular expression that is none (the operator confines
    // every silence to the Eru's namespace, so a set matching only the empty string cannot be
    // written any more)
    let refused = json!([{"name": "pod", "value": "web-(", "regex": true}]);
    create_eru(&client, &ns.name, "web", eru("web", json!({})))
        .await
        .unwrap();
    create_eru(
        &client,
        &ns.name,
        "held",
        eru("held", json!({"matchers": refused, "onUnknown": "Hold"})),
    )
    .await
    .unwrap();
    create_eru(
        &client,
        &ns.name,
        "loud",
        eru("loud", json!({"matchers": refused, "onUnknown": "Proceed"})),
    )
    .await
    .unwrap();
    created_before(&erus, &["web", "held", "loud"], slot).await;

    // during web's rollout: one active silence of its namespace and pods
    let active = wait_for("web rolling out, silenced", Duration::from_secs(40), || async {
        let s = status(&erus, "web").await?;
        let r = s
            .last_restart
            .filter(|r| r.slot == slot && r.outcome == "in_progress" && r.patched_at.is_some())?;
        let silences = silences_of(&am, &ns.name);
        let on = silences
            .iter()
            .find(|s| s["status"]["state"] == "active")?
            .clone();
        Some((r, on))
    })
    .await
    .1;
    assert_eq!(active["createdBy"], "eru-operator");
    let matchers: Vec<(String, String, bool)> = (active["matchers"].as_array().unwrap().iter())
        .map(|m| {
            (
                m["name"].as_str().unwrap().into(),
                m["value"].as_str().unwrap().into(),
                m["isRegex"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        matchers,
        [
            ("namespace".into(), ns.name.clone(), false),
            ("pod".into(), "web-[a-z0-9]+-[a-z0-9]{5}".into(), true)
        ]
    );
    let comment = active["comment"].as_str().unwrap();
    assert!(
        comment.contains(&slot.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        "{comment}"
    );
    let id = active["id"].as_str().unwrap().to_string();
    // at the rollout's end: expired, and the restart's record keeps it
    wait_for("web succeeded", Duration::from_secs(60), || async {
        status(&erus, "web")
            .await?
            .last_restart
            .filter(|r| r.outcome == "succeeded")
    })
    .await;
    wait_for("the silence expired", Duration::from_secs(30), || async {
        let silences = silences_of(&am, &ns.name);
        silences
            .iter()
            .find(|s| s["id"] == id.as_str() && s["status"]["state"] == "expired")
            .map(drop)
    })
    .await;
    let row = common::eru::items(&operator, "/history?name=web")
        .into_iter()
        .find(|r| r["silence_id"] == id.as_str())
        .expect("the restart's record names its silence");
    assert!(
        row["silence_expired_at"].is_string() && row["silence_until"].is_string(),
        "{row}"
    );

    // refused by Alertmanager: held until the deadline, then given up saying why
    let record = recorded(&operator, "held", slot, Duration::from_secs(40)).await;
    assert_eq!(record.reason.as_deref(), Some("patch_failed"), "{record:?}");
    let given_up = common::eru::items(&operator, "/history?name=held")
        .into_iter()
        .find(|r| r["outcome"] == "abandoned")
        .expect("the held restart's record");
    let reason = given_up["reason"].as_str().unwrap();
    assert!(
        reason.contains("no Alertmanager silence") && reason.contains("HTTP 400"),
        "{reason}"
    );
    assert_eq!(
        deployments.get("held").await.unwrap().metadata.generation,
        Some(1),
        "never patched"
    );
    // refused, onUnknown Proceed: restarted unsilenced, and told
    wait_for("loud succeeded", Duration::from_secs(40), || async {
        status(&erus, "loud")
            .await?
            .last_restart
            .filter(|r| r.outcome == "succeeded")
    })
    .await;
    let told = common::eru::events(&client, &ns.name, "loud", "SilenceFailed").await;
    assert!(!told.is_empty(), "a SilenceFailed Event");
    assert!(
        silences_of(&am, &ns.name).iter().all(|s| s["id"] == id.as_str()),
        "the refused ones created nothing"
    );
    for name in ["web", "held", "loud"] {
        settle(&erus, &operator, name).await;
    }
    check_one(&client, &ns.name, &operator, ("web", slot, "fired")).await;
    check_one(&client, &ns.name, &operator, ("held", slot, "patch_failed")).await;
    check_one(&client, &ns.name, &operator, ("loud", slot, "fired")).await;
}
