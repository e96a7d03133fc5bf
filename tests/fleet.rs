//! End-to-end tests of fleet-safe restarts (issue 14) on the local cluster: the fleet cap sampled
//! from the Deployments themselves, blackout windows (an Eru's own and the operator's cluster-wide
//! list), dry runs (an Eru's and the whole operator's), jitter and hashed schedules, the restart
//! pace.

mod common;

use std::{collections::HashMap, time::Duration};

use chrono::{DateTime, Duration as Span, SubsecRound, Timelike, Utc};
use common::{
    Operator, TestNamespace, client,
    eru::{
        Accounted, accounted, create_eru, created, deployment, documented_fnv1a64, documented_h,
        documented_splitmix64, items, settle, template_slot, time, wait_ready,
    },
    ledger::{
        Ledger, SlotRecord, Workload, at_seconds, check, check_daily, check_every, every, slot_records,
    },
    wait_for,
};
use eru_operator::eru::Eru;
use k8s_openapi::api::apps::v1::Deployment;
use kube::{Api, ResourceExt, api::ListParams};
use serde_json::json;

/// Whether a Deployment is rolling out the restart of `slot`: its template carries the slot and
/// the Deployment controller has not finished (not caught up, or replicas not all updated and
/// available, or old ones left).
fn rolling_out(d: &Deployment, slot: DateTime<Utc>) -> bool {
    if template_slot(d) != Some(slot) {
        return false;
    }
    let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let Some(s) = d.status.as_ref() else { return true };
    let caught_up = s.observed_generation >= d.metadata.generation;
    !(caught_up
        && s.updated_replicas == Some(want)
        && s.available_replicas == Some(want)
        && s.replicas == Some(want))
}

/// A slot `lead` from now, on a whole second.
fn slot_in(lead: i64) -> DateTime<Utc> {
    (Utc::now() + Span::seconds(lead)).trunc_subsecs(0)
}

/// Waits until the operator has accounted every slot of `name` up to `slot` (a record at or after
/// it), as long as the slot is away plus a generous minute; panics if it does not.
async fn accounted_through(operator: &Operator, name: &str, slot: DateTime<Utc>) {
    let wait = (slot - Utc::now()).to_std().unwrap_or_default() + Duration::from_secs(60);
    wait_for(&format!("{name} accounted through {slot}"), wait, || async {
        slot_records(operator, name)
            .unwrap()
            .iter()
            .any(|r| r.last_slot >= slot)
            .then_some(())
    })
    .await;
}

/// The one record of `slot` in `records`, as [`Accounted`].
fn of(records: &[SlotRecord], slot: DateTime<Utc>) -> Accounted {
    let covering: Vec<&SlotRecord> = records.iter().filter(|r| r.covers(slot)).collect();
    assert_eq!(covering.len(), 1, "slot {slot}: {covering:?}");
    covering[0].accounted()
}

/// The jitter offset as the operator's docs define it (src/eru/hash.rs): FNV-1a 64 of the Eru's
/// uid and the slot's Unix milliseconds (little-endian), the first output of SplitMix64 seeded
/// with it, modulo the jitter in milliseconds. Written out here, not taken from the operator.
fn documented_offset(uid: &str, slot: DateTime<Utc>, jitter_seconds: u64) -> Span {
    let seed = documented_fnv1a64(uid.bytes().chain(slot.timestamp_millis().to_le_bytes()));
    let z = documented_splitmix64(seed, 1);
    Span::milliseconds((z % (jitter_seconds * 1000)) as i64)
}

/// A 6-field schedule matching `slot` once a day (UTC).
fn once_at(slot: DateTime<Utc>) -> String {
    format!("{} {} {} * * *", slot.second(), slot.minute(), slot.hour())
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn thirty_erus_on_one_slot_never_roll_more_than_the_cap() {
    const ERUS: usize = 30;
    const CAP: usize = 5;
    let client = client().await;
    let ns = TestNamespace::create(&client, "fleet-cap").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    // minReadySeconds makes each rollout last a few seconds, so waves are visible
    let slow = json!({"spec": {"minReadySeconds": 3, "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}});
    for i in 0..ERUS {
        deployment(&client, &ns.name, &format!("web-{i}"), 1, slow.clone()).await;
    }
    for i in 0..ERUS {
        wait_ready(&deployments, &format!("web-{i}"), 1).await;
    }
    let operator = Operator::start(
        &client,
        &ns.name,
        &["--max-concurrent-restarts", &CAP.to_string()],
    )
    .await;
    let slot = slot_in(25);
    // a place must be found within 12 s of the slot, or the slot is skipped (fleet_capacity)
    for i in 0..ERUS {
        create_eru(
            &client,
            &ns.name,
            &format!("e-{i}"),
            json!({"schedule": once_at(slot), "target": {"kind": "Deployment", "name": format!("web-{i}")},
                   "startingDeadlineSeconds": 12}),
        )
        .await
        .unwrap();
    }

    // sample the Deployments (from the API server, not the operator) until every Eru accounted
    // its slot
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let mut most = 0;
    let mut samples = 0;
    let mut queued_seen = 0;
    let settled = |operator: &Operator| {
        let restarts = items(operator, "/history?limit=1000");
        let missed = items(operator, "/missed?limit=1000");
        let finished = restarts
            .iter()
            .filter(|r| time(&r["slot"]) == slot && r["outcome"] != "in_progress")
            .count();
        let skipped = missed.iter().filter(|m| time(&m["slot"]) == slot).count();
        finished + skipped == ERUS
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !settled(&operator) {
        assert!(
            std::time::Instant::now() < deadline,
            "the slot was not accounted by every Eru in 120 s"
        );
        let list = deployments.list(&ListParams::default()).await.unwrap();
        let now = list.items.iter().filter(|d| rolling_out(d, slot)).count();
        most = most.max(now);
        samples += 1;
        // waiting Erus say so in a condition
        let waiting = erus
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .filter(|e| {
                e.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Queued" && c.status == "True")
                })
            })
            .count();
        queued_seen = queued_seen.max(waiting);
        assert!(
            now <= CAP,
            "{now} Deployments rolling out at once with --max-concurrent-restarts {CAP}"
        );
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    println!("fleet cap: at most {most} of {ERUS} rolling out at once over {samples} samples (cap {CAP})");
    // (not a race with the sampler: the slot starts CAP restarts at once, and minReadySeconds
    // keeps each rolling out for 3 s at least, some twenty samples; the cap's safety is the
    // per-sample assertion above, this one says the cap was reached)
    assert_eq!(
        most, CAP,
        "the cap was used in full (the slot started {CAP} at once)"
    );
    println!("fleet cap: at most {queued_seen} Erus showed Queued=True at once");
    assert!(queued_seen >= 1, "no waiting Eru showed the Queued condition");

    // every Eru's slot: succeeded, or skipped for fleet capacity
    let mut outcomes: HashMap<String, usize> = HashMap::new();
    for i in 0..ERUS {
        let name = format!("e-{i}");
        let records = accounted(&operator, &name, 1, slot, slot);
        let outcome = match &records[0].1 {
            Accounted::Fired(outcome) => outcome.clone(),
            Accounted::Missed { reason, .. } => reason.clone(),
        };
        assert!(
            outcome == "succeeded" || outcome == "fleet_capacity",
            "{name}: slot {slot} ended {outcome}"
        );
        *outcomes.entry(outcome).or_default() += 1;
    }
    println!("fleet cap outcomes: {outcomes:?}");
    assert!(outcomes.get("succeeded").copied().unwrap_or(0) >= CAP);
    assert!(
        outcomes.get("fleet_capacity").copied().unwrap_or(0) >= 1,
        "waves of {CAP} rollouts of 3 s each cannot all start within 12 s"
    );
    // the queue empties and the skipped Erus say why in their history
    let metrics = common::get(&operator.url("/metrics")).1;
    assert!(metrics.contains("eru_restarts_queued 0"), "queue not empty");
    assert!(metrics.contains("eru_restarts_in_flight 0"), "places not freed");
    // the once-a-day schedule has exactly this slot in the test's minutes; every Deployment
    // rolled it once if and only if its Eru fired it
    for i in 0..ERUS {
        let (eru, target) = (format!("e-{i}"), format!("web-{i}"));
        let born = created(&erus, &eru).await;
        check(
            &client,
            &ns.name,
            &operator,
            &Ledger::deployment(&eru, &target, (born + Span::seconds(1), Utc::now()), vec![slot]).expect(
                slot,
                slot,
                &["fired", "fleet_capacity"],
            ),
        )
        .await;
    }
}

/// The restart pace (issue 57): twelve Erus due at one slot under `--restart-rate 1` with a
/// starting deadline of 5 s. Restarts begin a second apart (the first at once), so about six make
/// it; every other slot waited in the fleet queue and is recorded `skipped/fleet_capacity`, none
/// patched late, none lost, none twice.
#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn a_fixed_pace_begins_a_restart_a_second_and_records_the_rest_at_their_deadline() {
    const ERUS: usize = 12;
    const DEADLINE: i64 = 5;
    let client = client().await;
    let ns = TestNamespace::create(&client, "fleet-pace").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    for i in 0..ERUS {
        deployment(&client, &ns.name, &format!("web-{i}"), 1, json!({})).await;
    }
    for i in 0..ERUS {
        wait_ready(&deployments, &format!("web-{i}"), 1).await;
    }
    let operator = Operator::start(&client, &ns.name, &["--restart-rate", "1"]).await;
    let slot = slot_in(20);
    for i in 0..ERUS {
        create_eru(
            &client,
            &ns.name,
            &format!("e-{i}"),
            json!({"schedule": once_at(slot), "target": {"kind": "Deployment", "name": format!("web-{i}")},
                   "startingDeadlineSeconds": DEADLINE}),
        )
        .await
        .unwrap();
    }
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    // while the slot's restarts begin, the waiting Erus say what they wait for
    let paced_seen = std::cell::Cell::new(false);
    wait_for(
        "every Eru to account the slot",
        Duration::from_secs(90),
        || async {
            let listed = erus.list(&ListParams::default()).await.unwrap();
            let paced = listed.items.iter().any(|e| {
                e.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.message.contains("restart pace"))
                })
            });
            paced_seen.set(paced_seen.get() || paced);
            let records = (0..ERUS)
                .filter(|i| {
                    slot_records(&operator, &format!("e-{i}"))
                        .unwrap()
                        .iter()
                        .any(|r| r.covers(slot))
                })
                .count();
            (records == ERUS).then_some(())
        },
    )
    .await;
    assert!(
        paced_seen.get(),
        "no waiting Eru said it waits for the restart pace"
    );

    // the pace hands out a token a second (one at once): the k-th restart is decided k seconds
    // after the first's token at the earliest, so at least k - 1 seconds after the first was
    // decided (that pass took at most a second); every patch landed by the deadline
    let restarts: Vec<(DateTime<Utc>, DateTime<Utc>)> = items(&operator, "/history?limit=1000")
        .iter()
        .filter(|r| time(&r["slot"]) == slot)
        .map(|r| (time(&r["decided_at"]), time(&r["patched_at"])))
        .collect();
    let mut decided: Vec<DateTime<Utc>> = restarts.iter().map(|r| r.0).collect();
    decided.sort();
    let offsets = |v: &[DateTime<Utc>]| v.iter().map(|p| (*p - slot).as_seconds_f64()).collect::<Vec<_>>();
    println!("paced restarts decided at {:?}", offsets(&decided));
    for (k, at) in decided.iter().enumerate() {
        assert!(
            *at - decided[0] >= Span::seconds(k as i64 - 1),
            "restart {k} decided {} after the first: faster than 1 a second",
            *at - decided[0]
        );
    }
    for (_, patched) in &restarts {
        assert!(
            *patched <= slot + Span::seconds(DEADLINE),
            "patched past the deadline: {patched}"
        );
    }
    let patched = restarts;
    // every slot: fired, or skipped for the fleet (the pace) with nothing patched
    let mut outcomes: HashMap<String, usize> = HashMap::new();
    for i in 0..ERUS {
        let records = accounted(&operator, &format!("e-{i}"), 1, slot, slot);
        let outcome = match &records[0].1 {
            Accounted::Fired(_) => "fired".to_string(),
            Accounted::Missed { reason, .. } => reason.clone(),
        };
        *outcomes.entry(outcome).or_default() += 1;
    }
    println!("paced outcomes: {outcomes:?}");
    let fired = outcomes.get("fired").copied().unwrap_or(0);
    assert_eq!(fired, patched.len(), "{outcomes:?}");
    assert!(
        (4..=7).contains(&fired),
        "1 a second for {DEADLINE} s: {outcomes:?}"
    );
    assert_eq!(
        outcomes.get("fleet_capacity").copied().unwrap_or(0),
        ERUS - fired,
        "{outcomes:?}"
    );
    let metrics = common::get(&operator.url("/metrics")).1;
    assert!(
        metrics.contains("eru_restart_pace_per_second 1\n"),
        "the pace's gauge"
    );
    assert!(
        metrics.contains("eru_restart_pace_why{why=\"ceiling\"} 1"),
        "why: the configured rate"
    );
    assert!(metrics.contains("eru_restarts_queued 0"), "queue not empty");
    for i in 0..ERUS {
        let (eru, target) = (format!("e-{i}"), format!("web-{i}"));
        let born = created(&erus, &eru).await;
        check(
            &client,
            &ns.name,
            &operator,
            &Ledger::deployment(&eru, &target, (born + Span::seconds(1), Utc::now()), vec![slot]).expect(
                slot,
                slot,
                &["fired", "fleet_capacity"],
            ),
        )
        .await;
    }
}

/// `expected`, its slots in the cluster-wide blackout `*/20 * * * * *` of 10 s within `window`
/// skipped `blackout`, at least one.
fn cluster_windows(mut expected: Ledger<'_>, window: (DateTime<Utc>, DateTime<Utc>)) -> Ledger<'_> {
    let mut opened = window.0.timestamp() / 20 * 20;
    while opened <= window.1.timestamp() {
        let at = DateTime::from_timestamp(opened, 0).unwrap();
        expected = expected.expect(at, at + Span::milliseconds(9_999), &["blackout"]);
        opened += 20;
    }
    expected.require_some(window.0, window.1, "blackout")
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn blackouts_skip_exactly_their_slots_and_name_the_window() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "fleet-blackout").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "own", 1, json!({})).await;
    deployment(&client, &ns.name, "shared", 1, json!({})).await;
    wait_ready(&deployments, "own", 1).await;
    wait_ready(&deployments, "shared", 1).await;
    // the operator's cluster-wide list: every 20 s, a window of 10 s (slots :00 and :05 of it)
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("blackouts.yaml");
    std::fs::write(
        &file,
        "- name: every-twenty\n  schedule: \"*/20 * * * * *\"\n  durationSeconds: 10\n",
    )
    .unwrap();
    let operator = Operator::start(&client, &ns.name, &["--blackouts-file", file.to_str().unwrap()]).await;
    // the Eru's own window: an absolute one of 15 s, starting 12 s from now (on a slot)
    let start = {
        let at = Utc::now() + Span::seconds(12);
        DateTime::from_timestamp(at.timestamp() / 5 * 5 + 5, 0).unwrap()
    };
    let end = start + Span::seconds(15);
    let window = json!([{"name": "release-freeze", "start": start, "end": end}]);
    // the cluster-wide window applies to every Eru: "own" avoids it with a time zone-free
    // schedule on seconds the cluster window never holds (:10 and :15 of every 20 s)
    let began = Utc::now();
    create_eru(
        &client,
        &ns.name,
        "own",
        json!({"schedule": "10,15,30,35,50,55 * * * * *", "target": {"kind": "Deployment", "name": "own"},
               "blackouts": window}),
    )
    .await
    .unwrap();
    create_eru(
        &client,
        &ns.name,
        "shared",
        json!({"schedule": "*/5 * * * * *", "target": {"kind": "Deployment", "name": "shared"}}),
    )
    .await
    .unwrap();
    let until = end.max(began + Span::seconds(45)) + Span::seconds(5);
    let own_seconds = [10, 15, 30, 35, 50, 55];
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let (own_born, shared_born) = (created(&erus, "own").await, created(&erus, "shared").await);
    let own_window = (own_born + Span::seconds(1), until);
    let shared_window = (shared_born + Span::seconds(1), until);
    let own_last = *at_seconds(&own_seconds, own_window.0, until).last().unwrap();
    let shared_last = *every(5, shared_window.0, until).last().unwrap();
    accounted_through(&operator, "own", own_last).await;
    accounted_through(&operator, "shared", shared_last).await;
    let own = check(
        &client,
        &ns.name,
        &operator,
        &Ledger::deployment(
            "own",
            "own",
            own_window,
            at_seconds(&own_seconds, own_window.0, until),
        )
        .require(start, end - Span::milliseconds(1), "blackout", &[]),
    )
    .await;
    let shared = check(
        &client,
        &ns.name,
        &operator,
        &cluster_windows(
            Ledger::deployment(
                "shared",
                "shared",
                shared_window,
                every(5, shared_window.0, until),
            ),
            shared_window,
        ),
    )
    .await;

    // "own": its slots inside [start, end) are blackout, named; none outside is
    let mut own_blackout = 0;
    for slot in at_seconds(&own_seconds, own_window.0, until) {
        let record = of(&own, slot);
        let inside = start <= slot && slot < end;
        match &record {
            Accounted::Missed { reason, window } if reason == "blackout" => {
                assert!(inside, "own: {slot} outside the window recorded blackout");
                assert_eq!(*window, Some((start, end)));
                own_blackout += 1;
            }
            other => assert!(!inside, "own: {slot} inside the window recorded {other:?}"),
        }
    }
    assert!(own_blackout >= 1, "the window held at least one slot of own");
    let notes: Vec<String> = items(&operator, "/missed?name=own&reason=blackout")
        .iter()
        .map(|m| m["note"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        notes
            .iter()
            .all(|n| n.starts_with("blackout \"release-freeze\" (spec.blackouts[0]) from ")),
        "{notes:?}"
    );

    // "shared": exactly the slots at :00 and :05 of every 20 s are blackout (cluster-wide)
    let mut fired = 0;
    for slot in every(5, shared_window.0, until) {
        let record = of(&shared, slot);
        let inside = slot.second() % 20 < 10;
        match &record {
            Accounted::Missed { reason, window } if reason == "blackout" => {
                assert!(
                    inside,
                    "shared: {slot} recorded blackout outside the cluster window"
                );
                let opened = DateTime::from_timestamp(slot.timestamp() / 20 * 20, 0).unwrap();
                assert_eq!(*window, Some((opened, opened + Span::seconds(10))));
            }
            Accounted::Fired(_) => {
                assert!(!inside, "shared: {slot} restarted inside the cluster window");
                fired += 1;
            }
            other => assert!(!inside, "shared: {slot} inside the window recorded {other:?}"),
        }
    }
    assert!(fired >= 2, "slots outside the windows restart");
    let note = items(&operator, "/missed?name=shared&reason=blackout")[0]["note"].clone();
    assert!(
        note.as_str()
            .unwrap()
            .starts_with("cluster blackout \"every-twenty\" from "),
        "{note}"
    );
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn a_dry_run_changes_nothing_for_a_minute_while_its_history_shows_every_slot() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "fleet-dry").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 2, json!({})).await;
    deployment(&client, &ns.name, "api", 1, json!({})).await;
    wait_ready(&deployments, "web", 2).await;
    wait_ready(&deployments, "api", 1).await;
    let before = deployments.get("web").await.unwrap();
    let operator = Operator::start(&client, &ns.name, &[]).await;
    create_eru(
        &client,
        &ns.name,
        "dry",
        json!({"schedule": "*/5 * * * * *", "target": {"kind": "Deployment", "name": "web"}, "dryRun": true}),
    )
    .await
    .unwrap();
    // a minute of slots
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let born = created(&erus, "dry").await;
    let until = born + Span::seconds(61);
    accounted_through(&operator, "dry", *every(5, born, until).last().unwrap()).await;

    let after = deployments.get("web").await.unwrap();
    assert_eq!(
        after.metadata.generation, before.metadata.generation,
        "the Deployment changed"
    );
    assert_eq!(
        template_slot(&after),
        None,
        "the template got a restart annotation"
    );
    assert_eq!(after.spec, before.spec);
    let window = (born + Span::seconds(1), until);
    let records = check(
        &client,
        &ns.name,
        &operator,
        &Ledger::deployment("dry", "web", window, every(5, window.0, window.1)).require(
            window.0,
            window.1,
            "dry_run",
            &[],
        ),
    )
    .await;
    let slots = every(5, window.0, window.1);
    assert!(slots.len() >= 11, "a minute of */5 slots: {}", slots.len());
    for slot in &slots {
        assert_eq!(
            of(&records, *slot),
            Accounted::Missed {
                reason: "dry_run".into(),
                window: None
            },
            "slot {slot}"
        );
    }
    let history = items(&operator, "/history?name=dry&limit=1000");
    assert!(history.len() >= slots.len());
    for r in &history {
        assert_eq!(r["outcome"], "dry_run");
        assert!(r["patched_at"].is_null(), "a dry run never patches: {r}");
        let reason = r["reason"].as_str().unwrap();
        assert!(
            reason.contains(&format!(
                "mtsre.meitu.com/restartedAt={}",
                r["slot"].as_str().unwrap().replace(".000", "")
            )),
            "what would have been patched: {reason}"
        );
    }
    let status = erus.get("dry").await.unwrap().status.unwrap();
    let ready = status.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.reason, "DryRun");

    // the whole operator dry: an ordinary Eru journals dry_run too, and patches nothing
    drop(operator);
    let operator = Operator::start(&client, &ns.name, &["--dry-run"]).await;
    create_eru(
        &client,
        &ns.name,
        "plain",
        json!({"schedule": "*/5 * * * * *", "target": {"kind": "Deployment", "name": "api"}}),
    )
    .await
    .unwrap();
    let born = created(&erus, "plain").await;
    let until = born + Span::seconds(16);
    accounted_through(&operator, "plain", *every(5, born, until).last().unwrap()).await;
    let window = (born + Span::seconds(1), until);
    let records = check(
        &client,
        &ns.name,
        &operator,
        &Ledger::deployment("plain", "api", window, every(5, window.0, window.1)).require(
            window.0,
            window.1,
            "dry_run",
            &[],
        ),
    )
    .await;
    let slots = every(5, window.0, window.1);
    assert!(slots.len() >= 2);
    for slot in slots {
        assert!(
            matches!(of(&records, slot), Accounted::Missed { reason, .. } if reason == "dry_run"),
            "{slot}: {records:?}"
        );
    }
    assert_eq!(template_slot(&deployments.get("api").await.unwrap()), None);
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn jitter_moves_each_restart_by_its_own_stable_offset() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "fleet-jitter").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    wait_ready(&deployments, "web", 1).await;
    let operator = Operator::start(&client, &ns.name, &[]).await;
    let eru = create_eru(
        &client,
        &ns.name,
        "jittery",
        json!({"schedule": "*/10 * * * * *", "target": {"kind": "Deployment", "name": "web"}, "jitterSeconds": 6}),
    )
    .await
    .unwrap();
    let uid = eru.uid().unwrap();
    let landed: Vec<(DateTime<Utc>, DateTime<Utc>)> =
        wait_for("three jittered restarts", Duration::from_secs(60), || async {
            let done: Vec<_> = items(&operator, "/history?name=jittery")
                .iter()
                .filter(|r| r["outcome"] == "succeeded")
                .map(|r| (time(&r["slot"]), time(&r["patched_at"])))
                .collect();
            (done.len() >= 3).then_some(done)
        })
        .await;
    let mut offsets = Vec::new();
    for (slot, patched_at) in landed {
        let offset = documented_offset(&uid, slot, 6);
        let due = slot + offset;
        println!(
            "jitter: slot {slot}, offset {} ms, patch landed {} ms after it",
            offset.num_milliseconds(),
            (patched_at - due).num_milliseconds()
        );
        // the API server's record of the patch (whole seconds would be a second early)
        assert!(
            patched_at >= due,
            "patched before its jittered instant: {patched_at} < {due}"
        );
        offsets.push(offset);
    }
    offsets.dedup();
    assert!(offsets.len() > 1, "one offset for every slot: {offsets:?}");
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let settled = settle(&erus, &operator, "jittery").await;
    check_every(
        &client,
        &ns.name,
        &operator,
        "jittery",
        Workload::Deployment("web"),
        10,
        settled,
    )
    .await;
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn an_annotated_deployment_gets_a_hashed_schedule_spread_by_name() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "fleet-hash").await;
    let operator = Operator::start(&client, &ns.name, &[]).await;
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let names = ["alpha", "bravo", "charlie", "delta"];
    for name in names {
        deployment(
            &client,
            &ns.name,
            name,
            1,
            json!({"metadata": {"annotations": {"mtsre.meitu.com/eru": "true"}}}),
        )
        .await;
    }
    let mut minutes = Vec::new();
    for name in names {
        let next = wait_for(
            &format!("the automatic Eru {name} scheduled"),
            Duration::from_secs(30),
            || async {
                let eru = erus.get_opt(name).await.ok().flatten()?;
                assert_eq!(
                    eru.spec.schedule, "H 3 * * *",
                    "the default schedule of automatic Erus"
                );
                eru.status?.next_schedule_time
            },
        )
        .await;
        // the next 03:mm:00 UTC, within a day
        let now = Utc::now();
        assert!(
            next > now - Span::seconds(5) && next <= now + Span::days(1),
            "{name}: {next}"
        );
        assert_eq!(
            (next.hour(), next.second(), next.nanosecond()),
            (3, 0, 0),
            "{name}: {next}"
        );
        // the minute docs/eru.md defines (the hash written out by the test)
        let documented = documented_h(&ns.name, name, 1, 60) as u32;
        assert_eq!(next.minute(), documented, "{name}: {next}");
        minutes.push(documented);
    }
    minutes.sort_unstable();
    minutes.dedup();
    assert!(minutes.len() > 1, "four names, one minute: {minutes:?}");
    // the CLI previews the same instant
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_eru-operator"))
        .args([
            "schedule",
            "H 3 * * *",
            "--name",
            &format!("{}/alpha", ns.name),
            "--count",
            "1",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let first = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(first.len(), 20, "{first}");
    assert_eq!(
        &first[14..16],
        format!("{:02}", documented_h(&ns.name, "alpha", 1, 60)).as_str()
    );
    for name in names {
        let minute = documented_h(&ns.name, name, 1, 60) as u32;
        check_daily(&client, &ns.name, &operator, name, name, (3, minute)).await;
    }
    drop(operator);
}
