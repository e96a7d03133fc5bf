//! The slot ledger end to end, tried as a user would: suspending on a quiet target, editing the
//! schedule, losing the journal, and a restart patch the API server refuses. Each of these made
//! the ledger lie before spec epochs, the cluster-held cursor and restart deadlines (slots
//! restarted inside a suspension or before an edit, restarted slots re-recorded as
//! `operator_down`, 45 patch attempts in 45 s then a `failed` rollout that never started).

mod common;

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use common::{
    Operator, TestNamespace, client,
    eru::{create_eru, created, deployment, events, items, status, template_slot, time, wait_ready},
    kubectl,
    ledger::{Ledger, ON_SCHEDULE, SlotRecord, check, every, slot_records, violations},
    wait_for,
};
use eru_operator::eru::{Eru, EruStatus, RESTARTED_AT_ANNOTATION};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
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
    // suspended from the edit's second on (a slot a moment before it may already have run) to
    // the resumption's; the slots strictly inside, suspended
    let expected = Ledger::deployment("web", "web", window, every(5, window.0, window.1))
        .expect(
            suspended - SECOND,
            resumed + SECOND,
            &[ON_SCHEDULE, &["suspended"]].concat(),
        )
        .require(suspended + SECOND, resuming - SECOND, "suspended", &[]);
    let records = check(&client, &ns.name, &operator, &expected).await;
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
    // settling suspends the Eru; a restart that outlasts the 5-s period on a loaded machine gives
    // a slot up honestly (ON_SCHEDULE, which the ledger check above held each record to)
    assert!(
        missed.iter().all(|m| {
            let reason = m["reason"].as_str().unwrap_or_default();
            reason == "suspended" || ON_SCHEDULE.contains(&reason)
        }),
        "{missed:?}"
    );
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
    // (the test's own clock: every slot after the stop is the new journal's to account; the
    // lost one's are checked below against the template it left)
    let window = (stopped + chrono::Duration::milliseconds(1), settled);
    check(
        &client,
        &ns.name,
        &operator,
        &Ledger {
            journal_from: Some(stopped),
            // no journal saw the slots from the stop to the start: journal_lost, but the newest,
            // which runs at the start; never operator_down (the new journal cannot prove it)
            ..Ledger::deployment("web", "web", window, every(5, window.0, window.1)).require(
                window.0,
                starting,
                "journal_lost",
                &[ON_SCHEDULE, &["journal_lost"]].concat(),
            )
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
        // the window ends when the new journal's first run began: before it decided its first
        // restart (whose slot may be a moment older: due, within its deadline, at the start)
        let resumed_decided = (history.iter())
            .find(|r| time(&r["slot"]) == resumed)
            .map(|r| time(&r["decided_at"]))
            .expect("the resumed restart in /history");
        assert!(
            end >= starting - SECOND && end <= resumed_decided,
            "window end {end}, the first restart decided at {resumed_decided}"
        );
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
    // the refused patches as the journal counts them (the Events that also say so may be
    // dropped or aggregated by the API server: they prove nothing by their number)
    let refused = slot_records(&operator, "web")
        .unwrap()
        .into_iter()
        .find(|r| r.covers(slot))
        .map(|r| r.raw["restart"]["failed_patches"].as_i64())
        .expect("the slot's record");
    // backing off (1 s, 2 s, 4 s) leaves room for at most 4 tries in 8 s (a slow machine only
    // makes fewer); before, it tried every second
    assert!(
        refused.is_some_and(|n| (1..=4).contains(&n)),
        "retries back off (1 s, 2 s, 4 s within 8 s): {refused:?}"
    );
    assert!(
        !events(&client, &ns.name, "web", "RestartPatchFailed")
            .await
            .is_empty(),
        "a refused patch is an Event too"
    );

    // the policy goes away: the next slot restarts, and the abandoned one is never applied
    let lifted = Utc::now();
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
        // every slot while the template was frozen is patch_failed (each given up at its 8 s
        // deadline, before the next), but one decided before the lift that lands after it
        &Ledger::deployment("web", "web", window, every(15, window.0, window.1))
            .expect(window.0, lifted, &["patch_failed"])
            .expect(lifted - SECOND * 8, lifted, &["patch_failed", "fired"])
            .require(slot, slot, "patch_failed", &[]),
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

/// The ledger check every scenario ends with must itself fail on every kind of lie it claims to
/// catch, each forged into a journal (or a workload) that is otherwise consistent, one at a time
/// and put back: a fired record whose patch never reached the workload, a slot accounted for
/// another reason than the scenario caused, a required reason nowhere, a slot covered twice, a
/// record off the schedule, a record that contradicts itself, a landed patch on a slot not
/// restarted, a template carrying another slot than the newest fired one, a slot's record gone,
/// a slot rolled twice.
#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn the_ledger_check_fails_on_every_kind_of_forged_record() {
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
    // a paused Deployment: the next slots are skipped, never patched (two of them)
    let paused_at = Utc::now();
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": true}})),
        )
        .await
        .unwrap();
    let skipped = wait_for("two target_paused slots", Duration::from_secs(60), || async {
        let mut paused: Vec<Value> = items(&operator, "/slots?name=web&reason=target_paused")
            .into_iter()
            .filter(|r| time(&r["slot"]) > paused_at)
            .collect();
        paused.sort_by_key(|r| time(&r["slot"]));
        (paused.len() >= 2).then_some(paused)
    })
    .await;
    let (settled, _) = settle(&erus, "web").await;
    let window = (born + SECOND, settled);
    let expected = Ledger::deployment("web", "web", window, every(5, window.0, window.1))
        .expect(paused_at, window.1, &[ON_SCHEDULE, &["target_paused"]].concat())
        .require_some(paused_at, window.1, "target_paused");
    let records = check(&client, &ns.name, &operator, &expected).await;
    let clean = || async { violations(&client, &ns.name, &operator, &expected).await };
    assert_eq!(clean().await, Vec::<String>::new());

    let uid = skipped[0]["uid"].as_str().unwrap().to_string();
    let (one, two) = (
        skipped[0]["slot"].as_str().unwrap(),
        skipped[1]["slot"].as_str().unwrap(),
    );
    let off = (time(&skipped[0]["slot"]) + SECOND * 2).to_rfc3339_opts(SecondsFormat::Millis, true);
    let (one_at, off_at) = (time(&skipped[0]["slot"]), time(&skipped[0]["slot"]) + SECOND * 2);
    let ns_name = &ns.name;
    let put_back_one = format!(
        "UPDATE slots SET result = 'skipped', reason = 'target_paused', last_slot = slot, slot_count = 1 WHERE uid = '{uid}' AND slot = '{one}'"
    );
    // (what is forged, the forgery, how it is put back, what the check must say)
    let forgeries = [
        (
            "a fired record, with a landed and succeeded restart, on a slot never rolled",
            format!(
                "UPDATE slots SET result = 'fired', reason = 'scheduled' WHERE uid = '{uid}' AND slot = '{one}';
                 INSERT INTO restarts (uid, namespace, name, target, slot, decided_at, deadline_at, patched_at,
                                       finished_at, outcome)
                 VALUES ('{uid}', '{ns_name}', 'web', 'web', '{one}', '{one}', '{one}', '{one}', '{one}', 'succeeded')
                 ON CONFLICT (uid, slot) DO UPDATE SET patched_at = excluded.patched_at, outcome = 'succeeded'"
            ),
            format!("{put_back_one}; DELETE FROM restarts WHERE uid = '{uid}' AND slot = '{one}'"),
            format!("fired slot {one_at} rolled 0 times"),
        ),
        (
            "a slot accounted for another reason than the scenario caused",
            format!("UPDATE slots SET result = 'missed', reason = 'operator_down' WHERE uid = '{uid}' AND slot = '{one}'"),
            put_back_one.clone(),
            format!("slot {one_at} is accounted operator_down"),
        ),
        (
            "a slot covered by two records (a summary reaching over the next one's)",
            format!("UPDATE slots SET last_slot = '{two}', slot_count = 2 WHERE uid = '{uid}' AND slot = '{one}'"),
            put_back_one.clone(),
            format!("slot {} has 2 records", time(&skipped[1]["slot"])),
        ),
        (
            "a record off the schedule",
            format!(
                "INSERT INTO slots (uid, namespace, name, target, slot, last_slot, slot_count, result, reason, evaluated_at)
                 VALUES ('{uid}', '{ns_name}', 'web', 'web', '{off}', '{off}', 1, 'skipped', 'target_paused', '{off}')"
            ),
            format!("DELETE FROM slots WHERE uid = '{uid}' AND slot = '{off}'"),
            format!("a record on {off_at}, no slot of the schedule"),
        ),
        (
            "a record that contradicts itself (one slot counted as two)",
            format!("UPDATE slots SET slot_count = 2 WHERE uid = '{uid}' AND slot = '{one}'"),
            put_back_one.clone(),
            "a record that contradicts itself".to_string(),
        ),
        (
            "a landed patch on a slot not restarted",
            format!(
                "INSERT INTO restarts (uid, namespace, name, target, slot, decided_at, deadline_at, patched_at,
                                       finished_at, outcome)
                 VALUES ('{uid}', '{ns_name}', 'web', 'web', '{one}', '{one}', '{one}', '{one}', '{one}', 'succeeded')"
            ),
            format!("DELETE FROM restarts WHERE uid = '{uid}' AND slot = '{one}'"),
            format!("slot {one_at} is skipped but its patch landed"),
        ),
    ];
    for (what, forge, put_back, caught) in &forgeries {
        common::eru::journal_sql(&operator, forge);
        let wrong = clean().await;
        assert!(
            wrong.iter().any(|w| w.contains(caught.as_str())),
            "{what}: the check must say \"{caught}\", it says {wrong:#?}"
        );
        common::eru::journal_sql(&operator, put_back);
        assert_eq!(clean().await, Vec::<String>::new(), "{what}: put back");
    }

    // a reason the scenario caused and no slot has
    let wrong = violations(
        &client,
        &ns.name,
        &operator,
        &Ledger::deployment("web", "web", window, every(5, window.0, window.1))
            .expect(paused_at, window.1, &[ON_SCHEDULE, &["target_paused"]].concat())
            .require_some(window.0, window.1, "operator_down"),
    )
    .await;
    assert!(
        wrong
            .iter()
            .any(|w| w.contains("is accounted operator_down, which the scenario caused")),
        "a required reason nowhere: {wrong:#?}"
    );

    // the template carrying another slot than the newest fired one (the paused Deployment does
    // not roll it), put back after
    let carried = common::eru::template_slot(&deployments.get("web").await.unwrap()).unwrap();
    let carry = |slot: &str| json!({"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: slot}}}}});
    deployments
        .patch("web", &PatchParams::default(), &Patch::Merge(carry(one)))
        .await
        .unwrap();
    let wrong = clean().await;
    assert!(
        wrong.iter().any(|w| w.contains(&format!(
            "carries {:?}, the newest fired slot is {:?}",
            Some(one_at),
            Some(carried)
        ))),
        "a template mismatch: {wrong:#?}"
    );
    let carried_text = carried.to_rfc3339_opts(SecondsFormat::Secs, true);
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(carry(&carried_text)),
        )
        .await
        .unwrap();
    wait_for("the template put back", Duration::from_secs(30), || async {
        clean().await.is_empty().then_some(())
    })
    .await;

    // a second rollout of the newest fired slot, a copy of its ReplicaSet as the next revision
    // (the Deployment controller renumbers around it: from here on nothing is put back)
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns.name);
    let all = sets.list(&Default::default()).await.unwrap().items;
    let revision = |rs: &ReplicaSet| -> i64 {
        rs.annotations()["deployment.kubernetes.io/revision"]
            .parse()
            .unwrap()
    };
    let newest = all.iter().max_by_key(|rs| revision(rs)).unwrap();
    let mut copy = newest.clone();
    copy.metadata = kube::api::ObjectMeta {
        name: Some(format!("{}-forged", newest.name_any())),
        labels: newest.metadata.labels.clone(),
        owner_references: newest.metadata.owner_references.clone(),
        annotations: Some(
            [(
                "deployment.kubernetes.io/revision".to_string(),
                (revision(newest) + 1).to_string(),
            )]
            .into(),
        ),
        ..Default::default()
    };
    copy.spec.as_mut().unwrap().replicas = Some(0);
    copy.status = None;
    sets.create(&PostParams::default(), &copy).await.unwrap();
    let wrong = clean().await;
    assert!(
        wrong
            .iter()
            .any(|w| w.contains(&format!("fired slot {carried} rolled 2 times"))),
        "a slot rolled twice: {wrong:#?}"
    );

    // the record of a fired slot gone
    let gone = record_of(&records, first);
    assert!(gone.fired(), "{gone:?}");
    let gone_text = gone.raw["slot"].as_str().unwrap().to_string();
    common::eru::journal_sql(
        &operator,
        &format!("DELETE FROM slots WHERE uid = '{uid}' AND slot = '{gone_text}'"),
    );
    let wrong = clean().await;
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

/// Deleted and created again under the same names, as users do. The target Deployment: its
/// slots meanwhile are `target_missing`, and restarts resume on the new one. Then the Eru: the
/// new one has another uid and a ledger of its own; `/slots?uid=` tells the two apart (`name`
/// alone lists both), and each passes the ledger check against the one Deployment they share.
#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn a_target_and_an_eru_deleted_and_created_again_keep_two_true_ledgers() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "ledger-again").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    wait_ready(&deployments, "web", 1).await;
    let operator = Operator::start(&client, &ns.name, &[]).await;
    let spec = json!({"schedule": "*/5 * * * * *", "target": {"kind": "Deployment", "name": "web"}});
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let old_uid = create_eru(&client, &ns.name, "web", spec.clone())
        .await
        .unwrap()
        .uid()
        .unwrap();
    let born = created(&erus, "web").await;
    restarted_after(&operator, "web", born).await;

    // the Deployment deleted, two slots pass without it, then it is created again
    let deleting = Utc::now();
    deployments
        .delete("web", &DeleteParams::foreground())
        .await
        .unwrap();
    wait_for("the Deployment gone", Duration::from_secs(60), || async {
        deployments.get_opt("web").await.ok()?.is_none().then_some(())
    })
    .await;
    let gone = Utc::now();
    wait_for("two target_missing slots", Duration::from_secs(60), || async {
        let missing = items(&operator, "/slots?name=web&reason=target_missing");
        (missing.iter().filter(|r| time(&r["slot"]) > gone).count() >= 2).then_some(())
    })
    .await;
    let recreating = Utc::now();
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    wait_ready(&deployments, "web", 1).await;
    let ready = Utc::now();
    let resumed = restarted_after(&operator, "web", ready).await;

    // the Eru deleted and created again at once, under its name
    let deleting_eru = Utc::now();
    erus.delete("web", &DeleteParams::default()).await.unwrap();
    wait_for("the Eru gone", Duration::from_secs(60), || async {
        erus.get_opt("web").await.ok()?.is_none().then_some(())
    })
    .await;
    let new_uid = create_eru(&client, &ns.name, "web", spec)
        .await
        .unwrap()
        .uid()
        .unwrap();
    assert_ne!(old_uid, new_uid);
    let reborn = created(&erus, "web").await;
    restarted_after(&operator, "web", reborn).await;
    let (settled, _) = settle(&erus, "web").await;

    // the old Eru's ledger: its slots while the Deployment was gone are target_missing (around
    // the deletion and the creation, the slot may also have run, or found the new Deployment not
    // yet available); a restart open when it was deleted is eru_deleted
    let edges = [
        ON_SCHEDULE,
        &["target_missing", "target_unhealthy", "patch_failed"],
    ]
    .concat();
    let old_window = (born + SECOND, deleting_eru - SECOND);
    let old = Ledger {
        uid: Some(old_uid.clone()),
        // the rollouts of the slots before the creation went with the deleted Deployment, and
        // those after the Eru's deletion are the new Eru's
        journal_from: Some(recreating),
        journal_until: Some(deleting_eru),
        ..Ledger::deployment("web", "web", old_window, every(5, old_window.0, old_window.1))
            .expect(deleting - SECOND, ready + SECOND, &edges)
            .require(gone + SECOND, recreating - SECOND, "target_missing", &[])
            .expect(
                resumed + chrono::Duration::milliseconds(1),
                deleting_eru,
                &[ON_SCHEDULE, &["eru_deleted"]].concat(),
            )
    };
    let old_records = check(&client, &ns.name, &operator, &old).await;
    // the new one's: every slot from its creation restarted, on the same Deployment
    let new_window = (reborn + SECOND, settled);
    let new = Ledger {
        uid: Some(new_uid.clone()),
        journal_from: Some(reborn),
        ..Ledger::deployment("web", "web", new_window, every(5, new_window.0, new_window.1))
    };
    let new_records = check(&client, &ns.name, &operator, &new).await;

    // never mixed: each ledger's records carry its uid, none of the old one's is after its
    // deletion, and the name alone lists both
    for (records, uid) in [(&old_records, &old_uid), (&new_records, &new_uid)] {
        assert!(
            records.iter().all(|r| r.raw["uid"] == uid.as_str()),
            "{records:?}"
        );
    }
    assert!(
        old_records.iter().all(|r| r.last_slot <= deleting_eru),
        "{old_records:?}"
    );
    let by_name = slot_records(&operator, "web").unwrap();
    assert_eq!(
        by_name.len(),
        old_records.len() + new_records.len(),
        "/slots?name=web lists both ledgers"
    );
}
