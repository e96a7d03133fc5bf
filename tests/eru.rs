//! Eru end to end, against the local cluster with the operator under `deploy/` RBAC: restarts and
//! rollouts, a SIGKILL right after the patch, downtime accounting, auto-creation, gates and bad
//! input.

mod common;

use std::time::Duration;

use chrono::{Timelike, Utc};
use common::{
    Operator, TestNamespace, client,
    eru::{
        create_eru, create_raw_eru, created, deployment, documented_h, events, items, settle, status,
        template_slot, time, wait_ready, wait_settled,
    },
    get_json,
    ledger::{
        self, LAST_HEARTBEAT, Ledger, ON_SCHEDULE, Workload, check, check_daily, check_every, every,
        every_since_created,
    },
    wait_for,
};
use eru_operator::eru::{
    Eru, LastManualRun, RESTARTED_AT_ANNOTATION as RESTARTED_AT, core::run::RUN_ANNOTATION,
};
use k8s_openapi::api::apps::v1::Deployment;
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

const SECOND: chrono::Duration = chrono::Duration::seconds(1);

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn scheduled_restart_rolls_out_and_status_agrees_with_the_journal() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "eru-restart").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 3, json!({})).await;
    wait_ready(&deployments, "web", 3).await;
    let operator = Operator::start(&client, &ns.name, &[]).await;
    create_eru(
        &client,
        &ns.name,
        "web",
        json!({"schedule": "*/10 * * * * *", "target": {"kind": "Deployment", "name": "web"}}),
    )
    .await
    .unwrap();

    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let last = wait_for("a succeeded restart", Duration::from_secs(60), || async {
        status(&erus, "web")
            .await?
            .last_restart
            .filter(|r| r.outcome == "succeeded")
    })
    .await;
    // the Deployment carries that slot and finished rolling it out with kwok Pods Ready
    let d = deployments.get("web").await.unwrap();
    assert!(template_slot(&d).unwrap() >= last.slot);
    assert_eq!(
        last.slot.timestamp() % 10,
        0,
        "slots are on the schedule: {}",
        last.slot
    );
    let row = items(&operator, "/history?name=web")
        .into_iter()
        .find(|r| time(&r["slot"]) == last.slot)
        .expect("the restart in /history");
    assert_eq!(row["outcome"], "succeeded");
    assert_eq!(time(&row["started_at"]), last.started_at);
    assert_eq!(time(&row["finished_at"]), last.finished_at.unwrap());
    assert!(last.duration_seconds.unwrap() >= 0.0);
    let transitions = operator.chained_transitions("Eru", "web");
    for (from, to, event) in [
        ("Waiting", "Restarting", "SlotDue"),
        ("Restarting", "RollingOut", "RestartPatched"),
        ("RollingOut", "Waiting", "RolloutDone"),
    ] {
        assert!(
            transitions
                .iter()
                .any(|t| t["from"] == from && t["to"] == to && t["event"] == event),
            "missing {from} → {to} on {event}: {transitions:?}"
        );
    }
    let s = status(&erus, "web").await.unwrap();
    assert!(s.next_schedule_time.unwrap() > last.slot);
    assert!(
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );
    assert_eq!(get_json(&operator.url("/readyz"))["caches"], true);
    let settled = settle(&erus, &operator, "web").await;
    check_every(
        &client,
        &ns.name,
        &operator,
        "web",
        Workload::Deployment("web"),
        10,
        settled,
    )
    .await;
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn sigkill_right_after_the_patch_restarts_the_slot_once() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "eru-kill").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 2, json!({})).await;
    wait_ready(&deployments, "web", 2).await;
    let mut operator = Operator::start_with_env(
        &client,
        &ns.name,
        &[],
        &[("ERU_FAILPOINT", "hang-after-restart-patch")],
    )
    .await;
    create_eru(
        &client,
        &ns.name,
        "web",
        json!({"schedule": "*/10 * * * * *", "target": {"kind": "Deployment", "name": "web"}}),
    )
    .await
    .unwrap();

    let slot = wait_for("the restart patch", Duration::from_secs(40), || async {
        template_slot(&deployments.get("web").await.ok()?)
    })
    .await;
    operator.kill(); // SIGKILL, between the patch and everything after it
    let killed = Utc::now();
    operator.env.clear();
    // down until the rollout has finished unobserved, and the Deployment's record of that is
    // older than what the operator takes for "just now" (2 s: it would use its own clock then)
    let completed = wait_for("the rollout to finish", Duration::from_secs(60), || async {
        let d = deployments.get("web").await.ok()?;
        let s = d.status.as_ref()?;
        let done = s.observed_generation == d.metadata.generation
            && s.updated_replicas == Some(2)
            && s.available_replicas == Some(2)
            && s.replicas == Some(2);
        let progressing =
            s.conditions.iter().flatten().find(|c| {
                c.type_ == "Progressing" && c.reason.as_deref() == Some("NewReplicaSetAvailable")
            })?;
        let at = progressing.last_update_time.as_ref()?.0;
        done.then(|| chrono::DateTime::from_timestamp(at.as_second(), 0).unwrap())
    })
    .await;
    wait_for(
        "the rollout's completion 3 s in the past",
        Duration::from_secs(10),
        || async { (Utc::now() > completed + SECOND * 3).then_some(()) },
    )
    .await;
    let restarting = Utc::now();
    operator.restart().await;

    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    wait_for(
        "the killed slot's restart to finish",
        Duration::from_secs(60),
        || async {
            let rows = items(&operator, "/history?name=web");
            rows.iter()
                .any(|r| time(&r["slot"]) == slot && r["outcome"] == "succeeded")
                .then_some(())
        },
    )
    .await;
    // stop further slots, then compare the journal with the Deployment
    let settled = settle(&erus, &operator, "web").await;
    wait_for("suspended and idle", Duration::from_secs(60), || async {
        let s = status(&erus, "web").await?;
        (s.phase.as_deref() == Some("Suspended")).then_some(())
    })
    .await;
    // a slot due while the operator was killed (if one was) is operator_down, or ran late
    let expected = every_since_created(&client, &ns.name, "web", Workload::Deployment("web"), 10, settled)
        .await
        .expect(
            killed - LAST_HEARTBEAT,
            restarting + SECOND * 10,
            &[ON_SCHEDULE, &["operator_down"]].concat(),
        );
    check(&client, &ns.name, &operator, &expected).await;
    let rows = items(&operator, "/history?name=web&limit=1000");
    assert_eq!(
        rows.iter().filter(|r| time(&r["slot"]) == slot).count(),
        1,
        "one restart for the slot: {rows:?}"
    );
    // when it really landed and finished, not when the restarted operator noticed
    let row = rows.iter().find(|r| time(&r["slot"]) == slot).unwrap();
    let (patched, finished) = (time(&row["patched_at"]), time(&row["finished_at"]));
    assert!(
        patched >= slot - chrono::Duration::seconds(1) && patched <= killed,
        "patched_at from the API server's record of the patch: {row}"
    );
    assert!(
        finished >= patched && finished < restarting,
        "finished_at from the Deployment's Progressing condition: {row}"
    );
    let generation = deployments.get("web").await.unwrap().metadata.generation.unwrap();
    assert_eq!(
        generation,
        1 + rows.len() as i64,
        "each journaled restart patched the template exactly once: {rows:?}"
    );
    let starts = items(&operator, "/transitions?kind=Eru&name=web")
        .iter()
        .filter(|t| t["to"] == "Restarting")
        .count();
    assert!(
        starts <= rows.len(),
        "{starts} restarts begun for {} journaled",
        rows.len()
    );
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn downtime_is_recorded_as_operator_down_and_only_the_latest_slot_runs() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "eru-down").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    wait_ready(&deployments, "web", 1).await;
    let mut operator = Operator::start(&client, &ns.name, &[]).await;
    create_eru(
        &client,
        &ns.name,
        "web",
        json!({"schedule": "*/4 * * * * *", "target": {"kind": "Deployment", "name": "web"}}),
    )
    .await
    .unwrap();
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    wait_for(
        "a first restart, then Waiting",
        Duration::from_secs(60),
        || async {
            let s = status(&erus, "web").await?;
            (s.last_restart?.outcome == "succeeded" && s.phase.as_deref() == Some("Waiting")).then_some(())
        },
    )
    .await;

    operator.stop();
    let stopped = Utc::now();
    // down for 13 s: three or four slots of */4 pass with no operator
    tokio::time::sleep(Duration::from_secs(13)).await;
    let restarted = Utc::now();
    operator.restart().await;
    let ready = Utc::now();

    wait_for("the downtime accounted", Duration::from_secs(60), || async {
        (!items(&operator, "/missed?name=web&reason=operator_down").is_empty()).then_some(())
    })
    .await;
    let settled = settle(&erus, &operator, "web").await;
    let born = created(&erus, "web").await;
    let window = (born + SECOND, settled);
    // the slots of the 13 s down (to the new process's first pass) are operator_down, but the
    // newest, which ran at that pass
    let expected = Ledger::deployment("web", "web", window, every(4, window.0, window.1)).require(
        stopped,
        ready,
        "operator_down",
        &["fired"],
    );
    let records = check(&client, &ns.name, &operator, &expected).await;
    let record = |slot: chrono::DateTime<Utc>| {
        records
            .iter()
            .find(|r| r.covers(slot))
            .unwrap_or_else(|| panic!("slot {slot}: {records:?}"))
    };
    let down: Vec<_> = records
        .iter()
        .filter(|r| r.reason.as_deref() == Some("operator_down"))
        .collect();
    let count: i64 = down.iter().map(|r| r.slot_count).sum();
    // one downtime: from the old process's last heartbeat (before it stopped) to the new one's
    // start (after it was started again)
    let (start, end) = down[0].window.expect("operator_down names its window");
    assert!(start <= stopped, "window start {start} after the stop {stopped}");
    assert!(
        end >= restarted,
        "window end {end} before the restart {restarted}"
    );
    assert!(
        down.iter()
            .all(|r| r.window == Some((start, end)) && r.result == "missed"),
        "{down:?}"
    );
    // the new process accounted the downtime in its first pass, after it was started and by the
    // time it was ready: the newest slot then ran (the catch-up), every older one since the stop
    // is operator_down (bounds from the test's clock, not from the records' evaluation times)
    let catch_up = every(4, stopped, ready)
        .into_iter()
        .find(|s| record(*s).fired())
        .expect("a slot of the downtime ran at the start");
    let newest_due = *every(4, stopped, restarted)
        .last()
        .expect("slots came due while the operator was down");
    assert!(
        newest_due <= catch_up && catch_up <= ready,
        "the catch-up {catch_up} is the newest slot at the first pass: due by the start \
         ({newest_due}) and by readiness ({ready})"
    );
    for slot in every(4, stopped, catch_up).into_iter().filter(|s| *s < catch_up) {
        let r = record(slot);
        assert_eq!(
            r.reason.as_deref(),
            Some("operator_down"),
            "slot {slot} of the downtime: {r:?}"
        );
    }
    assert!(
        count >= 2,
        "13 s down under */4 misses at least 2 slots: {down:?}"
    );
    // the status is written after the journal in the same pass: wait for it
    wait_for(
        "status.missedSlots to count the downtime",
        Duration::from_secs(30),
        || async {
            let s = status(&erus, "web").await?;
            (s.missed_slots >= count && s.last_missed_time.is_some()).then_some(())
        },
    )
    .await;
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn annotation_creates_updates_and_deletes_an_eru_but_never_a_users() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "eru-auto").await;
    let operator = Operator::start(&client, &ns.name, &[]).await;
    let annotations = json!({"metadata": {"annotations": {"mtsre.meitu.com/eru": "true", "mtsre.meitu.com/eru-schedule": "0 3 * * *"}}});
    let d = deployment(&client, &ns.name, "auto", 1, annotations.clone()).await;
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let eru = wait_for("the automatic Eru", Duration::from_secs(30), || async {
        erus.get_opt("auto").await.ok().flatten()
    })
    .await;
    assert_eq!(eru.spec.schedule, "0 3 * * *");
    assert_eq!(eru.owner_references()[0].uid, d.uid().unwrap());
    assert_eq!(eru.labels()["app.kubernetes.io/managed-by"], "eru-operator");

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let edit = json!({"metadata": {"annotations": {"mtsre.meitu.com/eru-schedule": "30 4 * * mon", "mtsre.meitu.com/eru-timezone": "Europe/Berlin"}}});
    deployments
        .patch("auto", &PatchParams::default(), &Patch::Merge(edit))
        .await
        .unwrap();
    wait_for(
        "the Eru to follow the annotation",
        Duration::from_secs(30),
        || async {
            let e = erus.get("auto").await.ok()?;
            (e.spec.schedule == "30 4 * * mon" && e.spec.time_zone.as_deref() == Some("Europe/Berlin"))
                .then_some(())
        },
    )
    .await;
    // the suspend annotation suspends the automatic Eru, and removing it resumes it
    for (value, suspended) in [(json!("true"), true), (Value::Null, false)] {
        let edit = json!({"metadata": {"annotations": {"mtsre.meitu.com/eru-suspend": value}}});
        deployments
            .patch("auto", &PatchParams::default(), &Patch::Merge(edit))
            .await
            .unwrap();
        wait_for(
            &format!("the automatic Eru suspended = {suspended}"),
            Duration::from_secs(30),
            || async { (erus.get("auto").await.ok()?.spec.suspend == suspended).then_some(()) },
        )
        .await;
    }
    let off = json!({"metadata": {"annotations": {"mtsre.meitu.com/eru": "false"}}});
    deployments
        .patch("auto", &PatchParams::default(), &Patch::Merge(off))
        .await
        .unwrap();
    wait_for(
        "the automatic Eru to be deleted",
        Duration::from_secs(30),
        || async { erus.get_opt("auto").await.ok()?.is_none().then_some(()) },
    )
    .await;

    // a user's Eru of the same name is reported, not taken over
    create_eru(
        &client,
        &ns.name,
        "mine",
        json!({"schedule": "0 1 * * *", "target": {"kind": "Deployment", "name": "mine"}}),
    )
    .await
    .unwrap();
    deployment(&client, &ns.name, "mine", 1, annotations).await;
    wait_for("an EruConflict Event", Duration::from_secs(30), || async {
        (!events(&client, &ns.name, "mine", "EruConflict").await.is_empty()).then_some(())
    })
    .await;
    // updates of the Deployment that change nothing about the conflict report nothing again
    for replicas in [2, 1, 2] {
        deployments
            .patch(
                "mine",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": replicas}})),
            )
            .await
            .unwrap();
        wait_ready(&deployments, "mine", replicas).await;
    }
    // a barrier: a second conflict, reported after the updates above were seen (one watch, in
    // order)
    create_eru(
        &client,
        &ns.name,
        "later",
        json!({"schedule": "0 1 * * *", "target": {"kind": "Deployment", "name": "later"}}),
    )
    .await
    .unwrap();
    let annotations = json!({"metadata": {"annotations": {"mtsre.meitu.com/eru": "true"}}});
    deployment(&client, &ns.name, "later", 1, annotations).await;
    wait_for("the barrier's EruConflict", Duration::from_secs(30), || async {
        (!events(&client, &ns.name, "later", "EruConflict").await.is_empty()).then_some(())
    })
    .await;
    let reported = events(&client, &ns.name, "mine", "EruConflict").await;
    let times: i32 = reported
        .iter()
        .map(|e| e.series.as_ref().map_or(1, |s| s.count))
        .sum();
    assert_eq!(
        times, 1,
        "one EruConflict, not one per Deployment update: {reported:?}"
    );
    let mine = erus.get("mine").await.unwrap();
    assert_eq!(mine.spec.schedule, "0 1 * * *");
    assert!(mine.labels().get("app.kubernetes.io/managed-by").is_none());
    for name in ["mine", "later"] {
        check_daily(&client, &ns.name, &operator, name, name, (1, 0)).await;
    }
}

/// Annotations changed while the operator was down are acted on at its start, although plain
/// workloads (most of a fleet) are no longer looked at: an automatic Eru whose workload lost the
/// annotation is deleted, a workload annotated meanwhile gets one, and a user's Eru named like a
/// plain workload is left alone.
#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn annotations_changed_while_the_operator_was_down_are_acted_on_at_its_start() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "eru-auto-down").await;
    let mut operator = Operator::start(&client, &ns.name, &[]).await;
    let on = json!({"metadata": {"annotations": {"mtsre.meitu.com/eru": "true"}}});
    deployment(&client, &ns.name, "was", 1, on.clone()).await;
    deployment(&client, &ns.name, "plain", 1, json!({})).await;
    let users = json!({"schedule": "0 1 * * *", "target": {"kind": "Deployment", "name": "plain"}});
    create_eru(&client, &ns.name, "plain", users).await.unwrap();
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    wait_for("the automatic Eru", Duration::from_secs(30), || async {
        erus.get_opt("was").await.ok().flatten()
    })
    .await;
    operator.stop();

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let off = json!({"metadata": {"annotations": {"mtsre.meitu.com/eru": null}}});
    deployments
        .patch("was", &PatchParams::default(), &Patch::Merge(off))
        .await
        .unwrap();
    deployment(&client, &ns.name, "new", 1, on).await;
    operator.restart().await;
    wait_for(
        "the Eru of the workload that lost its annotation to be deleted",
        Duration::from_secs(30),
        || async { erus.get_opt("was").await.ok()?.is_none().then_some(()) },
    )
    .await;
    wait_for(
        "the Eru of the workload annotated meanwhile",
        Duration::from_secs(30),
        || async { erus.get_opt("new").await.ok().flatten() },
    )
    .await;
    let plain = erus.get("plain").await.unwrap();
    assert_eq!(plain.spec.schedule, "0 1 * * *", "a user's Eru is never touched");
    assert!(
        events(&client, &ns.name, "plain", "EruConflict").await.is_empty(),
        "a plain workload has no conflict to report"
    );
    check_daily(&client, &ns.name, &operator, "plain", "plain", (1, 0)).await;
    // the automatic Eru's default `H 3 * * *`: 03:mm UTC, mm from its name as docs/eru.md says
    let minute = documented_h(&ns.name, "new", 1, 60) as u32;
    let next = wait_for(
        "the new automatic Eru scheduled",
        Duration::from_secs(30),
        || async { erus.get("new").await.ok()?.status?.next_schedule_time },
    )
    .await;
    assert_eq!((next.hour(), next.minute()), (3, minute), "{next}");
    check_daily(&client, &ns.name, &operator, "new", "new", (3, minute)).await;
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn paused_target_is_skipped_and_an_invalid_schedule_recovers() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "eru-gates").await;
    let operator = Operator::start(&client, &ns.name, &[]).await;
    deployment(&client, &ns.name, "paused", 1, json!({"spec": {"paused": true}})).await;
    create_eru(
        &client,
        &ns.name,
        "paused",
        json!({"schedule": "*/3 * * * * *", "target": {"kind": "Deployment", "name": "paused"}}),
    )
    .await
    .unwrap();
    wait_for("a target_paused skip", Duration::from_secs(30), || async {
        let missed = items(&operator, "/missed?name=paused");
        missed
            .iter()
            .any(|m| m["reason"] == "target_paused" && m["result"] == "skipped")
            .then_some(())
    })
    .await;
    assert!(
        items(&operator, "/history?name=paused").is_empty(),
        "a paused Deployment is never restarted"
    );

    // the CRD schema refuses what it can check
    for spec in [
        json!({"schedule": "every day", "target": {"kind": "Deployment", "name": "x"}}),
        json!({"schedule": "* * * * *", "target": {"kind": "CronJob", "name": "x"}}),
        json!({"schedule": "* * * * *", "timeZone": "not a zone!", "target": {"kind": "Deployment", "name": "x"}}),
        json!({"schedule": "* * * * *", "startingDeadlineSeconds": -1, "target": {"kind": "Deployment", "name": "x"}}),
        // 0 would let no slot run (a reconcile runs a moment after its slot)
        json!({"schedule": "* * * * *", "startingDeadlineSeconds": 0, "target": {"kind": "Deployment", "name": "x"}}),
    ] {
        let refused = create_raw_eru(&client, &ns.name, "nonsense", spec.clone()).await;
        assert!(
            matches!(refused, Err(kube::Error::Api(ref s)) if s.code == 422),
            "{spec}: {refused:?}"
        );
    }

    // the operator reports what only it can check, and recovers once it is fixed
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    create_eru(
        &client,
        &ns.name,
        "broken",
        json!({"schedule": "61 * * * *", "target": {"kind": "Deployment", "name": "web"}}),
    )
    .await
    .unwrap();
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    wait_for(
        "phase Invalid with a condition",
        Duration::from_secs(30),
        || async {
            let s = status(&erus, "broken").await?;
            let invalid = s
                .conditions
                .iter()
                .any(|c| c.type_ == "ScheduleValid" && c.status == "False" && c.message.contains("61"));
            (s.phase.as_deref() == Some("Invalid") && invalid).then_some(())
        },
    )
    .await;
    wait_for("an InvalidSpec Event", Duration::from_secs(30), || async {
        (!events(&client, &ns.name, "broken", "InvalidSpec")
            .await
            .is_empty())
        .then_some(())
    })
    .await;
    erus.patch(
        "broken",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"schedule": "*/5 * * * *"}})),
    )
    .await
    .unwrap();
    wait_for("recovery to Waiting", Duration::from_secs(30), || async {
        let s = status(&erus, "broken").await?;
        let valid = s
            .conditions
            .iter()
            .any(|c| c.type_ == "ScheduleValid" && c.status == "True");
        (s.phase.as_deref() == Some("Waiting") && valid && s.next_schedule_time.is_some()).then_some(())
    })
    .await;
    // the other Eru kept being accounted meanwhile and after: a slot after the recovery is
    // skipped target_paused too, every slot has one record, and its Deployment never rolled
    let recovered = Utc::now();
    let after = wait_for(
        "a target_paused slot after the recovery",
        Duration::from_secs(30),
        || async {
            items(&operator, "/slots?name=paused&reason=target_paused")
                .iter()
                .map(|r| time(&r["slot"]))
                .find(|slot| *slot > recovered)
        },
    )
    .await;
    let erus_paused = created(&erus, "paused").await;
    let window = (erus_paused + SECOND, after);
    // every slot, from the Eru's birth on, skipped for its paused target
    let expected = Ledger::deployment("paused", "paused", window, every(3, window.0, window.1)).require(
        window.0,
        window.1,
        "target_paused",
        &[],
    );
    check(&client, &ns.name, &operator, &expected).await;
}

/// Deletion: an Eru deleted mid-rollout leaves no per-Eru series in /metrics (its rollout start
/// among them: no shipped alert can fire for it), and its restart in progress is finished
/// `abandoned` with reason `eru_deleted`;
/// an Eru deleted while the operator was down gets the same once the operator is back. Before,
/// kube-runtime never reconciled an Eru that had left its cache: its series and its open restart
/// stayed forever (EruScheduleOverdue and EruRolloutStuck fired for an Eru that no longer existed).
#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn a_deleted_eru_leaves_no_series_and_its_restart_in_progress_is_abandoned() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "eru-delete").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    for name in ["slow-a", "slow-b", "keep"] {
        deployment(&client, &ns.name, name, 1, json!({})).await;
    }
    // the barrier's: no Pod, so outside the quota below
    deployment(&client, &ns.name, "barrier", 0, json!({})).await;
    for name in ["slow-a", "slow-b", "keep"] {
        wait_ready(&deployments, name, 1).await;
    }
    // A quota of exactly the Pods there are: a restart's surge Pod can never be created, so a
    // restart stays rolling out while the old Pods keep the targets available.
    let quotas: Api<k8s_openapi::api::core::v1::ResourceQuota> = Api::namespaced(client.clone(), &ns.name);
    let quota =
        serde_json::from_value(json!({"metadata": {"name": "pods"}, "spec": {"hard": {"pods": "3"}}}))
            .unwrap();
    quotas.create(&PostParams::default(), &quota).await.unwrap();
    wait_for("the quota to be counted", Duration::from_secs(30), || async {
        quotas.get("pods").await.ok()?.status?.used.map(|_| ())
    })
    .await;
    let mut operator = Operator::start(&client, &ns.name, &[]).await;
    for name in ["slow-a", "slow-b"] {
        create_eru(
            &client,
            &ns.name,
            name,
            json!({"schedule": "*/3 * * * * *", "rolloutTimeoutSeconds": 3600,
                   "target": {"kind": "Deployment", "name": name}}),
        )
        .await
        .unwrap();
    }
    for name in ["keep", "barrier"] {
        create_eru(
            &client,
            &ns.name,
            name,
            json!({"schedule": "0 0 1 1 *", "target": {"kind": "Deployment", "name": name}}),
        )
        .await
        .unwrap();
    }
    for name in ["slow-a", "slow-b"] {
        wait_for(
            &format!("{name} rolling out"),
            Duration::from_secs(60),
            || async { (status(&erus, name).await?.phase.as_deref() == Some("RollingOut")).then_some(()) },
        )
        .await;
    }
    let metrics_url = operator.url("/metrics"); // the port stays across restarts
    let metrics = || common::get(&metrics_url).1;
    let series_of = |text: &str, name: &str| {
        text.lines()
            .filter(|l| !l.starts_with('#') && l.contains(&format!("name=\"{name}\"")))
            .count()
    };
    let rolling_out = |text: &str| {
        text.lines()
            .find(|l| l.starts_with("eru_objects{kind=\"Eru\",phase=\"RollingOut\"}"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
    };
    let before = metrics();
    assert!(
        series_of(&before, "slow-a") > 0,
        "per-Eru series exist while it does"
    );
    assert_eq!(rolling_out(&before), Some(2.0), "{before}");
    // each rolling-out Eru says since when its rollout runs, as its journal does (the per-Eru
    // EruRolloutStuck alert reads it); an Eru not rolling out has no such series
    let started = |text: &str, name: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("eru_rollout_started_timestamp_seconds{{name=\"{name}\"")))
            .and_then(|l| l.rsplit(' ').next()?.parse::<i64>().ok())
    };
    for name in ["slow-a", "slow-b"] {
        let open = items(&operator, &format!("/history?name={name}&outcome=in_progress"));
        assert_eq!(
            started(&before, name),
            Some(time(&open[0]["patched_at"]).timestamp()),
            "{name}: {open:?}\n{before}"
        );
    }
    assert_eq!(started(&before, "keep"), None, "{before}");

    erus.delete("slow-a", &Default::default()).await.unwrap();
    let base = operator.url("");
    let abandoned = |name: &'static str| {
        let url = format!("{base}/history?name={name}&outcome=abandoned");
        move || {
            let url = url.clone();
            async move {
                let rows = get_json(&url)["items"].as_array().cloned().unwrap_or_default();
                rows.into_iter().find(|r| r["reason"] == "eru_deleted")
            }
        }
    };
    let row = wait_for(
        "slow-a's restart abandoned",
        Duration::from_secs(30),
        abandoned("slow-a"),
    )
    .await;
    assert!(row["finished_at"].is_string(), "{row}");
    let after = wait_for("slow-a's series gone", Duration::from_secs(30), || async {
        let text = metrics();
        (series_of(&text, "slow-a") == 0).then_some(text)
    })
    .await;
    assert_eq!(
        rolling_out(&after),
        Some(1.0),
        "only slow-b still rolls out: {after}"
    );
    assert!(series_of(&after, "keep") > 0, "the other Erus keep theirs");
    // deleted and created again at once: the new Eru of that name keeps its series
    let keep_spec = json!({"schedule": "0 0 1 1 *", "target": {"kind": "Deployment", "name": "keep"}});
    erus.delete("keep", &Default::default()).await.unwrap();
    wait_for("keep gone", Duration::from_secs(30), || async {
        erus.get_opt("keep").await.ok()?.is_none().then_some(())
    })
    .await;
    create_eru(&client, &ns.name, "keep", keep_spec).await.unwrap();
    wait_for("the new keep reconciled", Duration::from_secs(30), || async {
        status(&erus, "keep").await?.phase.map(|_| ())
    })
    .await;
    // a barrier: the operator follows deletions one by one in the watch's order, so once the
    // barrier's (deleted after the old keep) series are gone, the old keep's deletion was handled
    assert!(series_of(&metrics(), "barrier") > 0, "{}", metrics());
    erus.delete("barrier", &Default::default()).await.unwrap();
    wait_for("the barrier's series gone", Duration::from_secs(30), || async {
        (series_of(&metrics(), "barrier") == 0).then_some(())
    })
    .await;
    assert!(series_of(&metrics(), "keep") > 0, "the namesake's series stay");
    assert!(
        items(&operator, "/history?name=slow-a&outcome=in_progress").is_empty(),
        "nothing of the deleted Eru stays in progress"
    );

    // deleted while the operator is down: found at start-up
    operator.stop();
    erus.delete("slow-b", &Default::default()).await.unwrap();
    wait_for("slow-b gone from the API", Duration::from_secs(30), || async {
        erus.get_opt("slow-b").await.ok()?.is_none().then_some(())
    })
    .await;
    operator.restart().await;
    wait_for(
        "slow-b's restart abandoned",
        Duration::from_secs(30),
        abandoned("slow-b"),
    )
    .await;
    let text = metrics();
    assert_eq!(series_of(&text, "slow-b"), 0, "{text}");
    assert!(
        matches!(rolling_out(&text), None | Some(0.0)),
        "nothing rolls out: {text}"
    );
}

/// The columns `kubectl get eru NAME -o wide` prints, split on runs of two spaces or more: the
/// header's and the Eru's row.
fn wide_row(ns: &str, name: &str) -> Vec<(String, String)> {
    let out = common::kubectl(&["get", "eru", name, "-n", ns, "-o", "wide"]);
    let mut lines = out.lines();
    let header = lines.next().unwrap_or_default().to_string();
    let row = lines.next().unwrap_or_default().to_string();
    // the columns start where the header's titles start
    let starts: Vec<usize> = header
        .char_indices()
        .filter(|&(i, c)| c != ' ' && (i == 0 || header[..i].ends_with("  ")))
        .map(|(i, _)| i)
        .collect();
    let cell = |text: &str, from: usize, to: Option<usize>| -> String {
        let end = to.unwrap_or(text.len()).min(text.len());
        text.get(from.min(end)..end)
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    (0..starts.len())
        .map(|i| {
            let next = starts.get(i + 1).copied();
            (cell(&header, starts[i], next), cell(&row, starts[i], next))
        })
        .collect()
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn a_suspension_with_a_note_and_the_status_at_a_glance() {
    const NOTE: &str = "INC-7: frozen for the database migration";
    const STEP: i64 = 5;
    let client = client().await;
    let ns = TestNamespace::create(&client, "eru-glance").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    wait_ready(&deployments, "web", 1).await;
    let operator = Operator::start(&client, &ns.name, &[]).await;
    // every 5 s; a blackout opens at :00 and :30 of each minute for 3 s, so those slots are skipped
    create_eru(
        &client,
        &ns.name,
        "web",
        json!({"schedule": "*/5 * * * * *", "target": {"kind": "Deployment", "name": "web"},
               "blackouts": [{"name": "half-minutes", "schedule": "0,30 * * * * *", "durationSeconds": 3}]}),
    )
    .await
    .unwrap();
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let covered = |slot: chrono::DateTime<Utc>| slot.second().is_multiple_of(30);

    // the next five slots, each with its restart instant (no jitter: the slot) and the blackout
    // that will skip it; the list shows a covered slot within 30 s
    let upcoming = wait_for(
        "a blackout among the upcoming slots",
        Duration::from_secs(45),
        || async {
            let s = status(&erus, "web").await?;
            s.upcoming
                .iter()
                .any(|u| u.blackout.is_some())
                .then_some(s.upcoming)
        },
    )
    .await;
    assert_eq!(upcoming.len(), 5, "{upcoming:?}");
    for (i, u) in upcoming.iter().enumerate() {
        assert_eq!(u.slot.timestamp() % STEP, 0, "{u:?}");
        assert_eq!(u.restart_at, u.slot, "{u:?}");
        assert_eq!(u.blackout.is_some(), covered(u.slot), "{u:?}");
        if let Some(next) = upcoming.get(i + 1) {
            assert_eq!(
                next.slot - u.slot,
                chrono::Duration::seconds(STEP),
                "{upcoming:?}"
            );
        }
    }
    let flagged = upcoming.iter().find_map(|u| u.blackout.clone()).unwrap();
    assert!(flagged.starts_with("blackout \"half-minutes\""), "{flagged}");

    // the latest records, newest first: a restart that succeeded, and the blackout's skip
    let recent = wait_for(
        "a succeeded restart and a blackout in status.recent",
        Duration::from_secs(60),
        || async {
            let recent = status(&erus, "web").await?.recent;
            let ok = recent
                .iter()
                .any(|r| r.result == "fired" && r.outcome.as_deref() == Some("succeeded"))
                && recent.iter().any(|r| r.reason.as_deref() == Some("blackout"));
            ok.then_some(recent)
        },
    )
    .await;
    assert!(recent.len() <= 5, "{recent:?}");
    assert!(
        recent.windows(2).all(|w| w[0].slot > w[1].slot),
        "newest first: {recent:?}"
    );
    for r in &recent {
        assert_eq!(r.slots, 1, "{r:?}");
        if r.reason.as_deref() == Some("blackout") {
            assert!(
                covered(r.slot) && r.note.as_deref().is_some_and(|n| n.contains("half-minutes")),
                "{r:?}"
            );
        }
    }
    let columns = wide_row(&ns.name, "web");
    let titles: Vec<&str> = columns.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        titles,
        [
            "NAME",
            "TARGET",
            "SCHEDULE",
            "READY",
            "SUSPEND",
            "LAST",
            "NEXT",
            "MISSED",
            "OUTCOME",
            "PHASE",
            "TIME ZONE",
            "NOTE",
            "AGE"
        ],
        "{columns:?}"
    );
    let value = |columns: &[(String, String)], title: &str| {
        columns
            .iter()
            .find(|(t, _)| t == title)
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    assert_eq!(value(&columns, "READY"), "Scheduled", "{columns:?}");
    assert_eq!(value(&columns, "SUSPEND"), "false", "{columns:?}");
    assert!(
        value(&columns, "MISSED").parse::<i64>().unwrap() >= 1,
        "the blackout's skip: {columns:?}"
    );
    let narrow = common::kubectl(&["get", "eru", "web", "-n", &ns.name]);
    let narrow: Vec<&str> = narrow.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        narrow,
        [
            "NAME", "TARGET", "SCHEDULE", "READY", "SUSPEND", "LAST", "NEXT", "MISSED", "AGE"
        ]
    );

    // suspended with a note: on the records it skips, in Ready, in the wide columns, in the audit
    let suspend = |on: bool| json!({"spec": {"suspend": on, "suspendNote": NOTE}});
    let suspended = Utc::now();
    erus.patch("web", &PatchParams::default(), &Patch::Merge(suspend(true)))
        .await
        .unwrap();
    let shown = wait_for(
        "a suspended slot in status.recent",
        Duration::from_secs(30),
        || async {
            let s = status(&erus, "web").await?;
            let newest = s.recent.first()?;
            (newest.reason.as_deref() == Some("suspended")).then_some(s)
        },
    )
    .await;
    assert_eq!(shown.recent[0].note.as_deref(), Some(NOTE), "{:?}", shown.recent);
    assert!(
        shown.upcoming.is_empty(),
        "nothing is upcoming while suspended: {:?}",
        shown.upcoming
    );
    assert_eq!(shown.next_schedule_time, None);
    let ready = shown.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.reason, "Suspended");
    assert!(ready.message.contains(NOTE), "{ready:?}");
    let columns = wide_row(&ns.name, "web");
    assert_eq!(value(&columns, "READY"), "Suspended", "{columns:?}");
    assert_eq!(value(&columns, "SUSPEND"), "true", "{columns:?}");
    assert_eq!(value(&columns, "NOTE"), NOTE, "{columns:?}");
    // two more suspended slots, then resumed (the note stays in the spec, read only while suspended)
    wait_for("two suspended slots", Duration::from_secs(30), || async {
        let suspended = items(&operator, "/slots?name=web&reason=suspended");
        (suspended.len() >= 2).then_some(())
    })
    .await;
    erus.patch("web", &PatchParams::default(), &Patch::Merge(suspend(false)))
        .await
        .unwrap();
    let resumed = Utc::now();
    let after = wait_for("a restart after the resume", Duration::from_secs(60), || async {
        let recent = status(&erus, "web").await?.recent;
        recent
            .into_iter()
            .find(|r| r.slot > resumed + SECOND && r.result == "fired")
    })
    .await;
    assert_eq!(after.note, None, "{after:?}");
    for record in items(&operator, "/slots?name=web&reason=suspended") {
        assert_eq!(record["note"], NOTE, "{record}");
    }
    let until = settle(&erus, &operator, "web").await;

    // the audit lists the note under the suspended slots, and the epoch that carried it
    let audit = operator.get_json(&format!(
        "/audit?namespace={}&since={}&until={}",
        ns.name,
        suspended.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    ));
    let web = &audit["erus"][0];
    let skipped = web["not_restarted"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["reason"] == "suspended")
        .unwrap_or_else(|| panic!("no suspended slots in {web}"));
    assert_eq!(skipped["notes"], json!([NOTE]), "{skipped}");
    assert!(
        web["epochs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["suspend"] == true && e["suspend_note"] == NOTE),
        "{}",
        web["epochs"]
    );

    // and every slot for its reason: the blackout's, the suspension's, the rest on schedule
    let mut expected =
        every_since_created(&client, &ns.name, "web", Workload::Deployment("web"), STEP, until).await;
    for slot in expected.slots.clone() {
        if covered(slot) {
            expected = expected.expect(slot, slot, &["blackout"]);
        }
    }
    // (a covered slot at the suspension's edges may be either)
    let edges = [ON_SCHEDULE, &["blackout"]].concat();
    let expected = expected.require(suspended - SECOND, resumed + SECOND, "suspended", &edges);
    check(&client, &ns.name, &operator, &expected).await;
}

/// Notifications are never lost: a receiver down at first, then refusing (503) and hanging up
/// after reading (its answer lost), and the operator SIGKILLed twice: while the records of a
/// restart, a suspension and a downtime wait in the outbox with the receiver down, and again
/// while a message is in flight (read by the receiver, not yet answered). Every event the journal
/// records arrives at least once, signed; nothing arrives for an event that did not happen; a
/// copy sent again carries the same key and content (the receiver counts the copies); the
/// downtime of several slots arrives as one event.
#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn notifications_arrive_at_least_once_across_a_down_receiver_and_a_sigkill() {
    use common::receiver::{Answer, Receiver};
    let client = client().await;
    let ns = TestNamespace::create(&client, "eru-notify").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    wait_ready(&deployments, "web", 1).await;
    let port = common::free_port();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notifications.yaml");
    std::fs::write(
        &file,
        format!(
            "sinks:\n- {{name: hook, type: webhook, url: 'http://127.0.0.1:{port}/eru', hmacSecret: s3cret}}\n\
             routes:\n- {{sink: hook, namespaces: ['{}']}}\n",
            ns.name
        ),
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let flags = ["--notifications-file", file, "--notification-backoff-max", "3s"];
    let mut operator = Operator::start(&client, &ns.name, &flags).await;
    create_eru(
        &client,
        &ns.name,
        "web",
        json!({"schedule": "*/5 * * * * *", "target": {"kind": "Deployment", "name": "web"}}),
    )
    .await
    .unwrap();
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let born = created(&erus, "web").await;
    let suspend = |on: bool| {
        let erus = erus.clone();
        async move {
            let patch = Patch::Merge(json!({"spec": {"suspend": on}}));
            erus.patch("web", &PatchParams::default(), &patch).await.unwrap();
        }
    };
    // a restart, then two suspended slots: all journaled while the receiver is down
    common::eru::succeeded_after(&operator, "web", born).await;
    let suspended = Utc::now();
    suspend(true).await;
    wait_for("two suspended slots", Duration::from_secs(30), || async {
        let skipped = items(&operator, "/missed?name=web&reason=suspended");
        (skipped.len() >= 2).then_some(())
    })
    .await;
    suspend(false).await;
    let resumed = Utc::now();
    wait_for(
        "no notification delivered yet",
        Duration::from_secs(5),
        || async {
            let pending = operator.get_json("/audit")["operator"]["notifications"]["pending"].as_i64()?;
            (pending >= 3).then_some(())
        },
    )
    .await;
    // killed with the outbox full, and down for three slots or more
    operator.kill();
    let killed = Utc::now();
    tokio::time::sleep(Duration::from_secs(16)).await;
    operator.restart().await;
    let ready = Utc::now();
    let receiver = Receiver::start(
        port,
        &[
            Answer::Refuse,
            Answer::HangUp,
            Answer::Refuse,
            Answer::HangUp,
            Answer::Slow,
        ],
    );
    // killed again while the receiver holds a message it read and has not answered yet
    wait_for("a message in flight", Duration::from_secs(60), || async {
        (receiver.received().iter())
            .any(|r| r.answer == Answer::Slow)
            .then_some(())
    })
    .await;
    // (counted by this process: the counters start again with the next)
    let retried = metric(&operator, "eru_notifications_retried_total", "sink=\"hook\"");
    assert!(retried >= 2.0, "the refusals and hang-ups are retries: {retried}");
    operator.kill();
    let killed_in_flight = Utc::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    operator.restart().await;
    let ready_again = Utc::now();
    wait_for("the downtime accounted", Duration::from_secs(60), || async {
        (!items(&operator, "/missed?name=web&reason=operator_down").is_empty()).then_some(())
    })
    .await;
    let back = Utc::now();
    common::eru::succeeded_after(&operator, "web", back).await;
    // no more slots: the journal's events are final
    let rescheduled = Utc::now();
    erus.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"schedule": "0 0 1 1 *"}})),
    )
    .await
    .unwrap();
    wait_for("no restart in progress", Duration::from_secs(60), || async {
        items(&operator, "/history?name=web&outcome=in_progress")
            .is_empty()
            .then_some(())
    })
    .await;
    let (received, owed) = wait_for("every owed event delivered", Duration::from_secs(60), || async {
        // what was sent, then what is owed: an event sent was journaled before
        let received = receiver.received();
        let owed = common::receiver::owed(&operator, &ns.name, "web");
        let delivered = common::receiver::delivered(&received);
        let pending = operator.get_json("/audit")["operator"]["notifications"]["pending"].as_i64();
        (owed.is_subset(&delivered) && pending == Some(0)).then_some((received, owed))
    })
    .await;

    // every slot's reason: the suspension's and the downtime's, the rest on schedule
    let expected = every_since_created(
        &client,
        &ns.name,
        "web",
        Workload::Deployment("web"),
        5,
        rescheduled,
    )
    .await
    .require(suspended, resumed + SECOND * 5, "suspended", ON_SCHEDULE)
    // (the kill came soon after the resume: a slot due just before it may be either)
    .expect(
        killed - LAST_HEARTBEAT,
        killed,
        &[ON_SCHEDULE, &["suspended", "operator_down"]].concat(),
    )
    .require(killed, ready, "operator_down", ON_SCHEDULE)
    // (a short second downtime: its slot may still fire within its deadline)
    .expect(
        killed_in_flight - LAST_HEARTBEAT,
        ready_again,
        &[ON_SCHEDULE, &["operator_down"]].concat(),
    );
    check(&client, &ns.name, &operator, &expected).await;
    // nothing for an event that did not happen, and every event in the journal's terms
    let owed_now = common::receiver::owed(&operator, &ns.name, "web");
    assert_eq!(
        owed, owed_now,
        "the journal's events did not change while delivering"
    );
    let copies = common::receiver::verify(&received, &owed, b"s3cret");
    assert!(received.iter().all(|r| r.json["eru"]["name"] == "web"));
    let answers: Vec<Answer> = received.iter().map(|r| r.answer).collect();
    assert_eq!(
        answers[..5],
        [
            Answer::Refuse,
            Answer::HangUp,
            Answer::Refuse,
            Answer::HangUp,
            Answer::Slow
        ],
        "the script was played"
    );
    // what was in flight when the operator died came again, under the same keys
    let in_flight: Vec<&str> = (received.iter())
        .filter(|r| r.answer == Answer::Slow)
        .flat_map(|r| r.json["events"].as_array().unwrap().iter())
        .filter_map(|e| e["key"].as_str())
        .collect();
    assert!(!in_flight.is_empty());
    for key in &in_flight {
        let taken = (received.iter())
            .filter(|r| r.answer == Answer::Accept)
            .flat_map(|r| r.json["events"].as_array().unwrap().iter())
            .filter(|e| e["key"] == *key)
            .count();
        assert!(
            copies[*key].len() >= 2 && taken >= 1,
            "{key}, in flight at the kill, was not sent again: {} copies",
            copies[*key].len()
        );
    }
    // what was read but not answered came again, under the same keys
    let hung_up: Vec<&str> = (received.iter())
        .filter(|r| r.answer == Answer::HangUp)
        .flat_map(|r| r.json["events"].as_array().unwrap().iter())
        .filter_map(|e| e["key"].as_str())
        .collect();
    assert!(!hung_up.is_empty());
    for key in hung_up {
        assert!(
            copies[key].len() >= 2,
            "{key} was not sent again after the hang-up"
        );
    }
    // the downtime: its slots (journaled together) arrive in one message, summed up in one line
    let first_downtime = |key: &str| {
        let slot = key.split('/').nth(2).unwrap();
        let slot = chrono::DateTime::parse_from_rfc3339(slot).unwrap();
        slot < killed_in_flight
    };
    let down: Vec<&str> = owed
        .iter()
        .filter(|k| k.ends_with("slot_missed") && first_downtime(k))
        .map(String::as_str)
        .collect();
    let carried = |r: &&common::receiver::Received| {
        let keys: Vec<&str> = (r.json["events"].as_array().unwrap().iter())
            .filter_map(|e| e["key"].as_str())
            .collect();
        r.answer == Answer::Accept && down.iter().all(|k| keys.contains(k))
    };
    let message = received
        .iter()
        .find(carried)
        .unwrap_or_else(|| panic!("no message carried all of {down:?}"));
    let slots: i64 = (message.json["events"].as_array().unwrap().iter())
        .filter(|e| e["reason"] == "operator_down")
        .map(|e| e["slot_count"].as_i64().unwrap())
        .sum();
    assert!(
        slots >= 2,
        "16 s down under */5 misses 2 slots or more: {}",
        message.body
    );
    let summary = message.json["summary"].as_str().unwrap();
    assert!(
        summary.contains(&format!("{slots} slots ")) && summary.contains("missed (operator_down)"),
        "one line for the downtime: {summary}"
    );
    // the kinds of event the scenario made
    for event in ["restart_succeeded", "slot_skipped", "slot_missed"] {
        assert!(owed.iter().any(|k| k.ends_with(event)), "no {event} in {owed:?}");
    }
    let (_, metrics) = operator.get("/metrics");
    let sample = |name: &str| {
        (metrics.lines())
            .find(|l| l.starts_with(&format!("{name}{{sink=\"hook\"}}")))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {name} for the sink:\n{metrics}"))
    };
    assert!(sample("eru_notifications_delivered_total") >= 1.0);
}

/// A notifications file of webhook sinks (name, port) each routed every event of `ns`.
fn sinks_file(dir: &std::path::Path, ns: &str, sinks: &[(&str, u16)]) -> String {
    let mut text = String::from("sinks:\n");
    for (name, port) in sinks {
        text += &format!("- {{name: {name}, type: webhook, url: 'http://127.0.0.1:{port}/eru'}}\n");
    }
    text += "routes:\n";
    for (name, _) in sinks {
        text += &format!("- {{sink: {name}, namespaces: ['{ns}']}}\n");
    }
    let file = dir.join(format!("notifications-{}.yaml", sinks.len()));
    std::fs::write(&file, text).unwrap();
    file.display().to_string()
}

/// The value of the series `name{labels}` in `operator`'s /metrics (0 when absent).
fn metric(operator: &Operator, name: &str, labels: &str) -> f64 {
    let (_, metrics) = operator.get("/metrics");
    let series = format!("{name}{{{labels}}} ");
    (metrics.lines())
        .find_map(|l| l.strip_prefix(&series)?.parse().ok())
        .unwrap_or(0.0)
}

/// The notifier's send timeout (src/notify/message.rs), which a hanging receiver waits out.
const SEND_TIMEOUT_SECONDS: f64 = 10.0;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// A receiver that never answers (each message waits out the 10 s send timeout) and one that
/// refuses connections, each with a backlog of 250 notifications of 125 Erus, delay only
/// themselves: the healthy sink's restart events do not queue behind the hanging one's send
/// timeouts (their median latency stays under half of one; the latencies alone and beside the
/// bad sinks are printed), the refused sink's lane backs off (a bounded number of journal
/// statements a second, from the operator's metrics), and the backlogs stay pending, none lost.
#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn a_hanging_and_a_refusing_receiver_delay_only_their_own_notifications() {
    use common::receiver::{Receiver, backlog, latencies, stalling};
    let client = client().await;
    let ns = TestNamespace::create(&client, "eru-lanes").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    wait_ready(&deployments, "web", 1).await;
    let dir = tempfile::tempdir().unwrap();
    let healthy = Receiver::start(common::free_port(), &[]);
    let (slow_port, refused_port) = (common::free_port(), common::free_port());
    let stalled = stalling(slow_port);
    let alone = sinks_file(dir.path(), &ns.name, &[("ok", healthy.port)]);
    let all = sinks_file(
        dir.path(),
        &ns.name,
        &[
            ("ok", healthy.port),
            ("slow", slow_port),
            ("refused", refused_port),
        ],
    );
    let mut operator = Operator::start(&client, &ns.name, &["--notifications-file", &alone]).await;
    create_eru(
        &client,
        &ns.name,
        "web",
        json!({"schedule": "*/4 * * * * *", "target": {"kind": "Deployment", "name": "web"}}),
    )
    .await
    .unwrap();
    let events = |n: usize| {
        let healthy = &healthy;
        async move {
            wait_for(
                &format!("{n} restarts told"),
                Duration::from_secs(120),
                || async {
                    let waited = latencies(&healthy.received(), "web", "restart_succeeded");
                    (waited.len() >= n).then_some(waited)
                },
            )
            .await
        }
    };
    let by_itself = events(4).await;
    let told_alone = by_itself.len();

    // the same, beside two bad sinks with a backlog each
    operator.stop();
    for sink in ["slow", "refused"] {
        backlog(&operator, &ns.name, sink, (250, 125), &format!("old-{sink}")).await;
    }
    operator.set_flags(&["--notifications-file", &all]);
    operator.restart().await;
    let started = Utc::now();
    let queries_before = metric(
        &operator,
        "eru_notifications_journal_queries_total",
        "sink=\"refused\"",
    );
    let beside = events(told_alone + 4).await;
    let seconds = (Utc::now() - started).num_milliseconds() as f64 / 1000.0;
    let queries = metric(
        &operator,
        "eru_notifications_journal_queries_total",
        "sink=\"refused\"",
    ) - queries_before;
    let beside = beside[told_alone.min(beside.len())..].to_vec();
    let (alone_p50, beside_p50) = (median(by_itself.clone()), median(beside.clone()));
    println!(
        "healthy sink latency: alone median {alone_p50:.3}s {by_itself:?}; beside the bad sinks \
         median {beside_p50:.3}s {beside:?} (ratio {:.2}); the refused lane ran {queries} journal \
         statements in {seconds:.0}s; the hanging receiver read {} messages",
        beside_p50 / alone_p50.max(0.001),
        stalled.load(std::sync::atomic::Ordering::Relaxed)
    );
    // Not a ratio of timings (a loaded CI machine stretches both runs unevenly): what a shared
    // queue would cost. Behind the hanging receiver's backlog, every healthy message would wait
    // for whole 10 s send timeouts; each lane on its own waits for none of them.
    assert!(
        beside_p50 < SEND_TIMEOUT_SECONDS / 2.0,
        "the healthy sink waited for the bad ones: median {beside_p50:.3}s ({beside:?}) against \
         {alone_p50:.3}s alone; a message behind the hanging receiver waits {SEND_TIMEOUT_SECONDS}s"
    );
    assert!(
        queries / seconds <= 10.0,
        "the refused lane spins: {queries} statements in {seconds:.0}s"
    );
    assert!(
        metric(
            &operator,
            "eru_notifications_failed_attempts_total",
            "sink=\"refused\""
        ) >= 1.0
    );
    assert!(
        stalled.load(std::sync::atomic::Ordering::Relaxed) >= 1,
        "the hanging sink was tried"
    );
    // nothing of the backlogs was lost or given up: it waits for its receivers
    let outbox = &operator.get_json("/audit")["operator"]["notifications"];
    assert_eq!(outbox["dropped"], 0, "{outbox}");
    assert!(outbox["pending"].as_i64().unwrap() >= 500, "{outbox}");
    for sink in ["slow", "refused"] {
        let pending = metric(
            &operator,
            "eru_notifications_pending",
            &format!("sink=\"{sink}\""),
        );
        assert!(pending >= 250.0, "{sink}: {pending} pending");
    }
}

/// `--notification-outbox-max` lowered below a backlog of 70,000 notifications: the oldest beyond
/// the cap are dropped in bounded statements (one statement of 70,000 ids is over either backend's
/// limit of bound parameters), the drop is counted per sink and reason and shown in the audit,
/// the newest are delivered, and a new restart's event is delivered after.
#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn lowering_the_outbox_cap_below_a_backlog_of_70000_drops_the_oldest_and_delivery_goes_on() {
    use common::receiver::{Receiver, backlog, delivered};
    const BACKLOG: u32 = 70_000;
    const CAP: u32 = 1_000;
    let client = client().await;
    let ns = TestNamespace::create(&client, "eru-outbox-cap").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    wait_ready(&deployments, "web", 1).await;
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let file = sinks_file(dir.path(), &ns.name, &[("hook", port)]);
    // the receiver is down while the backlog grows
    let mut operator = Operator::start(&client, &ns.name, &["--notifications-file", &file]).await;
    operator.stop();
    backlog(&operator, &ns.name, "hook", (BACKLOG, 700), "old").await;
    let cap = CAP.to_string();
    operator.set_flags(&["--notifications-file", &file, "--notification-outbox-max", &cap]);
    operator.restart().await;
    let receiver = Receiver::start(port, &[]);
    let outbox = wait_for(
        "the backlog under the cap, the rest delivered",
        Duration::from_secs(120),
        || async {
            let outbox = operator.get_json("/audit")["operator"]["notifications"].clone();
            (outbox["pending"] == 0 && outbox["dropped"].as_i64()? > 0).then_some(outbox)
        },
    )
    .await;
    let dropped = outbox["dropped"].as_i64().unwrap();
    let delivered_rows = outbox["delivered"].as_i64().unwrap();
    assert_eq!(dropped + delivered_rows, i64::from(BACKLOG), "{outbox}");
    assert_eq!(
        dropped,
        i64::from(BACKLOG - CAP),
        "the cap is applied before a lane sends: {outbox}"
    );
    assert_eq!(
        outbox["drops"],
        json!([{"sink": "hook", "reason": "outbox_full", "count": dropped, "last": outbox["drops"][0]["last"]}]),
        "{outbox}"
    );
    assert!(
        outbox_summary(&operator).contains(&format!("{dropped} outbox_full to hook")),
        "the audit says why"
    );
    let counted = metric(
        &operator,
        "eru_notifications_dropped_total",
        "reason=\"outbox_full\",sink=\"hook\"",
    );
    assert_eq!(counted as i64, dropped);
    let keys = delivered(&receiver.received());
    assert_eq!(keys.len() as i64, delivered_rows, "each kept one delivered");
    assert!(
        keys.contains(&format!(
            "{}/old-{}/{BACKLOG}/slot_skipped",
            ns.name,
            BACKLOG % 700
        )),
        "the newest kept"
    );
    // delivery goes on: a new restart is told
    create_eru(
        &client,
        &ns.name,
        "web",
        json!({"schedule": "*/5 * * * * *", "target": {"kind": "Deployment", "name": "web"}}),
    )
    .await
    .unwrap();
    wait_for("a new restart told", Duration::from_secs(90), || async {
        (delivered(&receiver.received()).iter())
            .any(|k| k.starts_with(&format!("{}/web/", ns.name)) && k.ends_with("restart_succeeded"))
            .then_some(())
    })
    .await;
}

/// The audit page (its "Notifications now" line sums the outbox up).
fn outbox_summary(operator: &Operator) -> String {
    let (status, page) = operator.get("/ui");
    assert_eq!(status, 200, "{page}");
    page
}

/// Sets `token` as the run-now annotation of the Eru `name`, as field manager `manager`.
async fn ask_run(erus: &Api<Eru>, name: &str, token: &str, manager: &str) {
    let patch = json!({
        "apiVersion": "mtsre.meitu.com/v1", "kind": "Eru",
        "metadata": {"name": name, "annotations": {RUN_ANNOTATION: token}}
    });
    erus.patch(name, &PatchParams::apply(manager).force(), &Patch::Apply(patch))
        .await
        .unwrap();
}

/// The Eru's latest manual run once it is `token`'s and `outcome`.
async fn run_ends(erus: &Api<Eru>, name: &str, token: &str, outcome: &str) -> LastManualRun {
    wait_for(
        &format!("manual run {token} of {name} {outcome}"),
        Duration::from_secs(60),
        || async {
            status(erus, name)
                .await?
                .last_manual_run
                .filter(|r| r.token == token && r.outcome == outcome)
        },
    )
    .await
}

/// Waits until the current 30-second slot is 3 to 12 s old: a run asked then rolls out before
/// the next slot.
async fn between_slots() {
    wait_for("a moment between two slots", Duration::from_secs(40), || async {
        (3..=12).contains(&(Utc::now().second() % 30)).then_some(())
    })
    .await;
}

/// Run now (`mtsre.meitu.com/run-now`), as an SRE uses it: one restart per distinct token, by
/// whichever field manager set it (named in the record); the same token set again restarts
/// nothing; a blackout makes it wait (and it runs when the blackout ends, or is refused at its
/// deadline, saying why); a suspended Eru refuses it at once. The runs are journaled apart: the
/// slots around them are each accounted once (every one fired), the workload shows one revision
/// per run, and the audit lists the runs apart.
#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn run_now_restarts_once_per_token_waits_out_a_blackout_and_is_refused_with_its_reason() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "eru-run-now").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    for name in ["web", "quiet"] {
        deployment(&client, &ns.name, name, 1, json!({})).await;
        wait_ready(&deployments, name, 1).await;
    }
    // each run's end is told, under a key of its token
    let receiver = common::receiver::Receiver::start(common::free_port(), &[]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notifications.yaml");
    std::fs::write(
        &file,
        format!(
            "sinks: [{{name: hook, type: webhook, url: 'http://127.0.0.1:{}/eru'}}]\n\
             routes: [{{sink: hook, events: [run_succeeded, run_failed, run_abandoned, run_refused]}}]\n",
            receiver.port
        ),
    )
    .unwrap();
    let file = file.display().to_string();
    let operator = Operator::start(&client, &ns.name, &["--notifications-file", &file]).await;
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let blackout_end = Utc::now() + chrono::Duration::seconds(30);
    // quiet: no slot in the test; a blackout for the next 30 s; a run waits 10 s at most
    create_eru(
        &client,
        &ns.name,
        "quiet",
        json!({"schedule": "0 0 1 1 *", "startingDeadlineSeconds": 10,
               "blackouts": [{"start": Utc::now() - chrono::Duration::minutes(1), "end": blackout_end,
                              "name": "change-freeze"}],
               "target": {"kind": "Deployment", "name": "quiet"}}),
    )
    .await
    .unwrap();
    wait_for("quiet Waiting", Duration::from_secs(30), || async {
        (status(&erus, "quiet").await?.phase.as_deref() == Some("Waiting")).then_some(())
    })
    .await;
    let generation = |name: &'static str| {
        let deployments = deployments.clone();
        async move { deployments.get(name).await.unwrap().metadata.generation.unwrap() }
    };
    let quiet_before = generation("quiet").await;

    // in the blackout: it waits, then its deadline refuses it with the blackout as the reason
    ask_run(&erus, "quiet", "b1", "sre-alice").await;
    let waiting = run_ends(&erus, "quiet", "b1", "waiting").await;
    assert!(
        waiting
            .reason
            .as_deref()
            .is_some_and(|r| r.starts_with("blackout: ")),
        "{waiting:?}"
    );
    assert_eq!(waiting.requested_by.as_deref(), Some("sre-alice"));
    let refused = run_ends(&erus, "quiet", "b1", "refused").await;
    let reason = refused.reason.unwrap();
    assert!(
        reason.starts_with("not started by its deadline") && reason.contains("blackout: "),
        "{reason}"
    );
    assert!(refused.patched_at.is_none());
    assert_eq!(
        generation("quiet").await,
        quiet_before,
        "a refused run restarts nothing"
    );

    // asked 5 s before the blackout ends: it waits, and runs once the blackout is over
    let ask_at = blackout_end - chrono::Duration::seconds(5);
    tokio::time::sleep((ask_at - Utc::now()).to_std().unwrap_or_default()).await;
    ask_run(&erus, "quiet", "b2", "sre-alice").await;
    let ran = run_ends(&erus, "quiet", "b2", "succeeded").await;
    assert!(ran.patched_at.unwrap() >= blackout_end, "{ran:?}");
    assert_eq!(generation("quiet").await, quiet_before + 1);

    // suspended, with a note: refused at once
    erus.patch(
        "quiet",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": true, "suspendNote": "INC-7"}})),
    )
    .await
    .unwrap();
    wait_for("quiet Suspended", Duration::from_secs(30), || async {
        (status(&erus, "quiet").await?.phase.as_deref() == Some("Suspended")).then_some(())
    })
    .await;
    ask_run(&erus, "quiet", "b3", "kubectl-eru").await;
    let refused = run_ends(&erus, "quiet", "b3", "refused").await;
    assert_eq!(refused.reason.as_deref(), Some("suspended: the Eru is suspended"));
    assert_eq!(refused.requested_by.as_deref(), Some("kubectl-eru"));
    assert_eq!(generation("quiet").await, quiet_before + 1);
    assert!(
        !events(&client, &ns.name, "quiet", "ManualRunRefused")
            .await
            .is_empty()
    );

    // web: a slot every 30 s; runs between them
    create_eru(
        &client,
        &ns.name,
        "web",
        json!({"schedule": "*/30 * * * * *", "target": {"kind": "Deployment", "name": "web"}}),
    )
    .await
    .unwrap();
    between_slots().await;
    ask_run(&erus, "web", "a1", "sre-alice").await;
    let first = run_ends(&erus, "web", "a1", "succeeded").await;
    assert_eq!(first.requested_by.as_deref(), Some("sre-alice"));
    let after_first = generation("web").await;
    // the same token again, even removed and set anew by someone else: nothing runs
    erus.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {RUN_ANNOTATION: null}}})),
    )
    .await
    .unwrap();
    ask_run(&erus, "web", "a1", "sre-bob").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let again = status(&erus, "web").await.unwrap().last_manual_run.unwrap();
    assert_eq!(again, first, "the same token's run, unchanged");
    // (a slot may have fired meanwhile: that is its own revision, with its slot)
    let template = deployments.get("web").await.unwrap().spec.unwrap().template;
    let carried = template.metadata.unwrap().annotations.unwrap_or_default();
    // the Eru and the token: another Eru of the workload given the same token runs its own
    let mark = format!("{}/web:a1", ns.name);
    assert_eq!(carried.get(RUN_ANNOTATION), Some(&mark));
    // a new token: once more
    between_slots().await;
    ask_run(&erus, "web", "a2", "sre-alice").await;
    run_ends(&erus, "web", "a2", "succeeded").await;
    assert!(generation("web").await > after_first);
    let settled = settle(&erus, &operator, "web").await;
    let rollouts = ledger::rollouts(&client, &ns.name, Workload::Deployment("web"))
        .await
        .unwrap();
    let tokens: Vec<&str> = (rollouts.runs.iter())
        .map(|(_, mark)| mark.rsplit_once(':').map_or(mark.as_str(), |(_, token)| token))
        .collect();
    assert_eq!(
        tokens,
        ["a1", "a2"],
        "one revision per token: {:?}",
        rollouts.revisions
    );
    // every slot of web fired, once; the runs are no slot's
    check_every(
        &client,
        &ns.name,
        &operator,
        "web",
        Workload::Deployment("web"),
        30,
        settled,
    )
    .await;

    // the audit lists the runs apart from the slots, and accounts every slot once
    let audit = get_json(&operator.url(&format!("/audit?namespace={}", ns.name)));
    assert_eq!(audit["verdict"]["accounted"], true, "{audit}");
    let runs_of = |name: &str| -> Vec<(String, String)> {
        let eru = audit["erus"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap();
        let mut runs: Vec<(String, String)> = (eru["manual_runs"].as_array().unwrap().iter())
            .map(|r| {
                (
                    r["token"].as_str().unwrap().into(),
                    r["outcome"].as_str().unwrap().into(),
                )
            })
            .collect();
        runs.sort();
        runs
    };
    let pair = |t: &str, o: &str| (t.to_string(), o.to_string());
    assert_eq!(runs_of("web"), [pair("a1", "succeeded"), pair("a2", "succeeded")]);
    assert_eq!(
        runs_of("quiet"),
        [
            pair("b1", "refused"),
            pair("b2", "succeeded"),
            pair("b3", "refused")
        ]
    );
    // every run's end told once under its token's key, with why; nothing else
    let key = |name: &str, token: &str, event: &str| format!("{}/{name}/run/{token}/{event}", ns.name);
    let expected: std::collections::BTreeSet<String> = [
        key("web", "a1", "run_succeeded"),
        key("web", "a2", "run_succeeded"),
        key("quiet", "b1", "run_refused"),
        key("quiet", "b2", "run_succeeded"),
        key("quiet", "b3", "run_refused"),
    ]
    .into();
    let received = wait_for("every run's end told", Duration::from_secs(30), || async {
        let received = receiver.received();
        (common::receiver::delivered(&received) == expected).then_some(received)
    })
    .await;
    let told = |k: &str| {
        (received.iter())
            .flat_map(|r| r.json["events"].as_array().unwrap().clone())
            .find(|e| e["key"] == k)
            .unwrap()
    };
    let b1 = told(&key("quiet", "b1", "run_refused"));
    assert!(
        b1["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("not started by its deadline")),
        "{b1}"
    );
    assert_eq!(b1["note"], "run-now token b1", "{b1}");
}

/// A manual run across a SIGKILL right after its patch, then a lost journal: its token is patched
/// once. The restarted operator finds the token on the pod template and tracks that rollout to its
/// end; the operator on a replaced journal (the Eru still asks for the token) takes the template's
/// run over instead of running it again; a new token runs once more.
#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn a_run_is_patched_once_across_a_sigkill_and_a_lost_journal() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "eru-run-kill").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 2, json!({})).await;
    wait_ready(&deployments, "web", 2).await;
    let mut operator = Operator::start_with_env(
        &client,
        &ns.name,
        &[],
        &[("ERU_FAILPOINT", "hang-after-restart-patch")],
    )
    .await;
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    create_eru(
        &client,
        &ns.name,
        "web",
        json!({"schedule": "0 0 1 1 *", "target": {"kind": "Deployment", "name": "web"}}),
    )
    .await
    .unwrap();
    let generation = || async { deployments.get("web").await.unwrap().metadata.generation.unwrap() };
    let before = generation().await;
    ask_run(&erus, "web", "k1", "sre-alice").await;
    wait_for("the run's patch", Duration::from_secs(40), || async {
        let d = deployments.get("web").await.ok()?;
        let meta = d.spec?.template.metadata?;
        (meta.annotations?.get(RUN_ANNOTATION)?.ends_with(":k1")).then_some(())
    })
    .await;
    operator.kill(); // between the patch and its record
    operator.env.clear();
    operator.restart().await;
    let ran = run_ends(&erus, "web", "k1", "succeeded").await;
    assert_eq!(ran.requested_by.as_deref(), Some("sre-alice"));
    assert_eq!(generation().await, before + 1, "patched once across the SIGKILL");
    let journaled = items(&operator, "/transitions?kind=Eru&name=web");
    assert!(
        journaled
            .iter()
            .any(|t| t["event"] == "RestartPatched" && t["from"] == "Restarting"),
        "the restarted operator saw the landed patch: {journaled:?}"
    );

    // the journal is replaced while the operator is down; the Eru still asks for k1
    operator.stop();
    if operator.database_url.is_some() {
        operator.database_url = Some(common::fresh_database("lostrun"));
    } else {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", operator.database.display()));
        }
    }
    operator.restart().await;
    wait_for(
        "the new journal's record of k1",
        Duration::from_secs(30),
        || async {
            let audit = get_json(&operator.url(&format!("/audit?namespace={}", ns.name)));
            let eru = audit["erus"]
                .as_array()?
                .iter()
                .find(|e| e["name"] == "web")?
                .clone();
            let runs = eru["manual_runs"].as_array()?.clone();
            runs.iter()
                .any(|r| r["token"] == "k1" && r["outcome"] == "succeeded")
                .then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        generation().await,
        before + 1,
        "a lost journal does not run the token again"
    );
    ask_run(&erus, "web", "k2", "sre-alice").await;
    run_ends(&erus, "web", "k2", "succeeded").await;
    assert_eq!(generation().await, before + 2);
    let rollouts = ledger::rollouts(&client, &ns.name, Workload::Deployment("web"))
        .await
        .unwrap();
    let tokens: Vec<&str> = (rollouts.runs.iter())
        .map(|(_, mark)| mark.rsplit_once(':').map_or(mark.as_str(), |(_, token)| token))
        .collect();
    assert_eq!(tokens, ["k1", "k2"]);
}

/// A restart undone by another client: a second field manager (as Argo CD with a manifest that
/// carries the annotation) force-applies `mtsre.meitu.com/restartedAt` back to an old value with
/// server-side apply. The restart's record names that manager and when it was seen (status,
/// `/history`, an Event pointing at docs/gitops.md, the audit's count); the slot keeps its one
/// record, and the next slot restarts as usual.
#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn a_restart_another_manager_reverts_is_told_by_name_and_accounted_once() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "eru-revert").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 2, json!({})).await;
    wait_ready(&deployments, "web", 2).await;
    let operator = Operator::start(&client, &ns.name, &[]).await;
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    create_eru(
        &client,
        &ns.name,
        "web",
        json!({"schedule": "*/10 * * * * *", "target": {"kind": "Deployment", "name": "web"}}),
    )
    .await
    .unwrap();
    wait_for("a succeeded restart", Duration::from_secs(60), || async {
        status(&erus, "web")
            .await?
            .last_restart
            .filter(|r| r.outcome == "succeeded")
    })
    .await;
    // suspended, so the restart to revert stays the latest
    let suspend = |on: bool| {
        let erus = erus.clone();
        async move {
            let patch = Patch::Merge(json!({"spec": {"suspend": on}}));
            erus.patch("web", &PatchParams::default(), &patch).await.unwrap();
        }
    };
    suspend(true).await;
    let suspended = Utc::now();
    let last = wait_for(
        "suspended, the last restart ended",
        Duration::from_secs(60),
        || async {
            let s = status(&erus, "web").await?;
            let last = s.last_restart.filter(|r| r.outcome == "succeeded")?;
            (s.phase.as_deref() == Some("Suspended")).then_some(last)
        },
    )
    .await;
    assert_eq!(last.target.as_deref(), Some("web"));
    let generation = deployments.get("web").await.unwrap().metadata.generation.unwrap();

    // the second client: the annotation back to an old value, under its own field manager
    let revert = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: "2020-01-01T00:00:00Z"}}}}
    });
    deployments
        .patch(
            "web",
            &PatchParams::apply("argocd-controller").force(),
            &Patch::Apply(revert),
        )
        .await
        .unwrap();
    let reverted = wait_for("the restart marked reverted", Duration::from_secs(30), || async {
        status(&erus, "web")
            .await?
            .last_restart
            .filter(|r| r.reverted_by.is_some())
    })
    .await;
    assert_eq!(reverted.slot, last.slot, "the restart that was undone");
    assert_eq!(reverted.reverted_by.as_deref(), Some("argocd-controller"));
    assert_eq!(
        reverted.outcome, "succeeded",
        "its rollout did finish; then it was undone"
    );
    assert!(reverted.reverted_at.unwrap() > last.finished_at.unwrap());
    assert_eq!(
        deployments.get("web").await.unwrap().metadata.generation.unwrap(),
        generation + 1,
        "the revert rolled the pods once more, and the operator did not answer it"
    );
    let row = items(&operator, "/history?name=web&limit=1000")
        .into_iter()
        .find(|r| time(&r["slot"]) == last.slot)
        .unwrap();
    assert_eq!(row["reverted_by"], "argocd-controller", "{row}");
    let told = events(&client, &ns.name, "web", "RestartReverted").await;
    let note = told[0].note.clone().unwrap_or_default();
    assert!(
        note.contains("was replaced by 2020-01-01T00:00:00Z by argocd-controller")
            && note.contains("docs/gitops.md"),
        "{note}"
    );
    let audit = get_json(&operator.url(&format!("/audit?namespace={}", ns.name)));
    assert_eq!(audit["erus"][0]["fired"]["reverted"], 1, "{audit}");
    let (code, page) = common::get(&operator.url(&format!("/ui?namespace={}", ns.name)));
    assert_eq!(code, 200);
    assert_eq!(
        page.matches(r#"data-kind="reverted""#).count(),
        1,
        "the page rings the one reverted restart"
    );

    // resumed once the revert's own rollout ended (until then a slot is rightly skipped
    // target_unhealthy, which this scenario is not about): the next slot restarts as usual,
    // and every slot has its one record
    wait_settled(&deployments, "web", 2).await;
    suspend(false).await;
    let resumed = Utc::now();
    wait_for("a restart after the revert", Duration::from_secs(60), || async {
        status(&erus, "web")
            .await?
            .last_restart
            .filter(|r| r.slot > resumed && r.outcome == "succeeded")
    })
    .await;
    let settled = settle(&erus, &operator, "web").await;
    let mut expected =
        every_since_created(&client, &ns.name, "web", Workload::Deployment("web"), 10, settled)
            .await
            .expect(
                suspended,
                resumed + SECOND * 10,
                &[ON_SCHEDULE, &["suspended"]].concat(),
            );
    // the revision the revert made carries 2020's value: a slot of no Eru's
    expected.journal_from = Some(created(&erus, "web").await - SECOND);
    check(&client, &ns.name, &operator, &expected).await;
}

/// The revert docs/gitops.md describes, done as a user of `kubectl patch --type json` would: the
/// restart's annotation removed from the template 3 s into its rollout (minReadySeconds keeps the
/// rollout going). The restart is marked reverted once, while its rollout runs: status, `/history`,
/// one `RestartReverted` Event, the counter and the audit say so; and the next slot restarts as
/// usual.
#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn a_restart_whose_annotation_is_removed_mid_rollout_is_marked_reverted_once() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "eru-revert-json").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(
        &client,
        &ns.name,
        "web",
        2,
        json!({"spec": {"minReadySeconds": 10}}),
    )
    .await;
    wait_ready(&deployments, "web", 2).await;
    let operator = Operator::start(&client, &ns.name, &[]).await;
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    create_eru(
        &client,
        &ns.name,
        "web",
        json!({"schedule": "*/30 * * * * *", "target": {"kind": "Deployment", "name": "web"}}),
    )
    .await
    .unwrap();
    let rolling = wait_for("a restart rolling out", Duration::from_secs(60), || async {
        let last = status(&erus, "web").await?.last_restart?;
        (last.outcome == "in_progress" && last.patched_at.is_some()).then_some(last)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let path = format!(
        "/spec/template/metadata/annotations/{}",
        RESTARTED_AT.replace('~', "~0").replace('/', "~1")
    );
    let remove = json!([{"op": "remove", "path": path}]).to_string();
    common::kubectl(&[
        "-n",
        &ns.name,
        "patch",
        "deployment",
        "web",
        "--type",
        "json",
        "--field-manager",
        "sre-bob",
        "-p",
        &remove,
    ]);
    let reverted = wait_for("the restart marked reverted", Duration::from_secs(30), || async {
        status(&erus, "web")
            .await?
            .last_restart
            .filter(|r| r.reverted_at.is_some())
    })
    .await;
    assert_eq!(reverted.slot, rolling.slot, "the restart that was undone");
    let row = items(&operator, "/history?name=web&limit=1000")
        .into_iter()
        .find(|r| time(&r["slot"]) == rolling.slot)
        .unwrap();
    assert!(!row["reverted_at"].is_null(), "{row}");
    // the next slot restarts as usual; then the revert is still told once
    wait_for("a restart after the revert", Duration::from_secs(60), || async {
        status(&erus, "web")
            .await?
            .last_restart
            .filter(|r| r.slot > rolling.slot && r.outcome == "succeeded")
    })
    .await;
    let told = events(&client, &ns.name, "web", "RestartReverted").await;
    assert_eq!(told.len(), 1, "{told:?}");
    let (_, metrics) = operator.get("/metrics");
    assert!(
        metrics.lines().any(|l| l == "eru_restarts_reverted_total 1"),
        "the counter: {}",
        metrics
            .lines()
            .filter(|l| l.contains("reverted"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let audit = get_json(&operator.url(&format!("/audit?namespace={}", ns.name)));
    assert_eq!(audit["erus"][0]["fired"]["reverted"], 1, "{audit}");
}

/// Pause on failure, as an SRE meets it: a Deployment whose new pods cannot start (a quota
/// leaves no room for one), so a restart's rollout times out and fails; the on-call rolls it back
/// (`kubectl rollout undo`), and the next slot restarts it again, and fails again. After two in a
/// row (`failurePolicy.pauseAfter: 2`) the Eru pauses itself: the status (phase,
/// `pausedOnFailure`, Ready False), an Event, and a notification naming both restarts. Its next
/// slots are skipped `paused_on_failure` with the pause's note; a spec edit does not resume it.
/// Once the quota is lifted, `eru-operator resume` does, and the next slot restarts. Every slot
/// is accounted with its reason.
#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn two_failed_restarts_in_a_row_pause_the_eru_until_the_cli_resumes_it() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "eru-pause").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    wait_ready(&deployments, "web", 1).await;
    let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota",
                       "metadata": {"name": "no-room", "namespace": ns.name},
                       "spec": {"hard": {"pods": "1"}}});
    let quota_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(quota_file.path(), quota.to_string()).unwrap();
    let quota_path = quota_file.path().display().to_string();
    common::kubectl(&["apply", "-f", &quota_path]);
    wait_for(
        "the quota to count web's pod",
        Duration::from_secs(60),
        || async {
            let used = common::kubectl(&[
                "get",
                "resourcequota",
                "no-room",
                "-n",
                &ns.name,
                "-o",
                "jsonpath={.status.used.pods}",
            ]);
            (used.trim() == "1").then_some(())
        },
    )
    .await;
    let receiver = common::receiver::Receiver::start(common::free_port(), &[]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notifications.yaml");
    std::fs::write(
        &file,
        format!(
            "sinks: [{{name: hook, type: webhook, url: 'http://127.0.0.1:{}/eru'}}]\n\
             routes: [{{sink: hook, events: [paused_on_failure]}}]\n",
            receiver.port
        ),
    )
    .unwrap();
    let file = file.display().to_string();
    let operator = Operator::start(&client, &ns.name, &["--notifications-file", &file]).await;
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    create_eru(
        &client,
        &ns.name,
        "web",
        json!({"schedule": "*/15 * * * * *", "rolloutTimeoutSeconds": 4, "failurePolicy": {"pauseAfter": 2},
               "target": {"kind": "Deployment", "name": "web"}}),
    )
    .await
    .unwrap();

    // the first restart fails, and the on-call rolls it back; the next one fails too
    let failed = |n: usize| {
        let operator = &operator;
        async move {
            let failed: Vec<_> = (ledger::slot_records(operator, "web").ok()?.into_iter())
                .filter(|r| r.outcome() == Some("failed"))
                .collect();
            (failed.len() >= n).then_some(failed)
        }
    };
    wait_for("a failed restart", Duration::from_secs(60), || failed(1)).await;
    common::kubectl(&["rollout", "undo", "deployment/web", "-n", &ns.name]);
    wait_settled(&deployments, "web", 1).await;

    // the second fails, and the Eru pauses itself: status, Ready, an Event
    let (phase, pause, shown) = wait_for("web paused on failure", Duration::from_secs(90), || async {
        let s = status(&erus, "web").await?;
        Some((s.phase.clone()?, s.paused_on_failure.clone()?, s))
    })
    .await;
    assert_eq!(phase, "PausedOnFailure");
    assert_eq!(pause.why.matches("Z failed (").count(), 2, "{}", pause.why);
    let ready = (shown.conditions.iter()).find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "PausedOnFailure")
    );
    assert!(ready.message.contains("kubectl eru resume"), "{}", ready.message);
    let failed = failed(2).await.unwrap();
    assert_eq!(failed.len(), 2, "{failed:?}");
    for r in &failed {
        let slot = r.slot.format("%Y-%m-%dT%H:%M:%SZ").to_string();
        assert!(
            pause.why.contains(&format!("slot {slot} failed")),
            "{slot}: {}",
            pause.why
        );
    }
    let event = wait_for("a PausedOnFailure Event", Duration::from_secs(30), || async {
        events(&client, &ns.name, "web", "PausedOnFailure")
            .await
            .into_iter()
            .next()
    })
    .await;
    assert!(event.note.unwrap_or_default().contains(&pause.why));
    let paused_series = format!(
        r#"eru_paused_since_timestamp_seconds{{name="web",namespace="{}"}} {}"#,
        ns.name,
        pause.since.timestamp()
    );
    assert!(
        operator.get("/metrics").1.contains(&paused_series),
        "{paused_series}"
    );

    // the next slots: skipped paused_on_failure, with the pause's note; a spec edit changes nothing
    let skipped = |after: chrono::DateTime<Utc>| {
        let operator = &operator;
        async move {
            (ledger::slot_records(operator, "web").ok()?.into_iter())
                .find(|r| r.slot > after && r.reason.as_deref() == Some("paused_on_failure"))
        }
    };
    let first = wait_for("a slot skipped for the pause", Duration::from_secs(30), || {
        skipped(pause.since)
    })
    .await;
    let since = pause.since.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let note = first.note.clone().unwrap_or_default();
    assert!(
        note.starts_with(&format!("paused on failure since {since}: ")),
        "{note}"
    );
    let edited = Utc::now();
    erus.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"startingDeadlineSeconds": 60}})),
    )
    .await
    .unwrap();
    wait_for(
        "a slot after the edit skipped for the pause",
        Duration::from_secs(30),
        || skipped(edited + SECOND),
    )
    .await;
    assert_eq!(
        status(&erus, "web").await.unwrap().phase.as_deref(),
        Some("PausedOnFailure")
    );

    // told once, naming both restarts, under the pause's key
    let key = format!(
        "{}/web/{}/paused_on_failure",
        ns.name,
        pause.since.format("%Y-%m-%dT%H:%M:%S%.3fZ")
    );
    let told = wait_for("the pause's notification", Duration::from_secs(60), || async {
        let events: Vec<Value> = (receiver.received().iter())
            .flat_map(|r| r.json["events"].as_array().cloned().unwrap_or_default())
            .filter(|e| e["key"] == key.as_str())
            .collect();
        (!events.is_empty()).then_some(events)
    })
    .await;
    assert_eq!(told[0]["event"], "paused_on_failure", "{told:?}");
    assert_eq!(told[0]["note"], pause.why.as_str());

    // the quota lifted, the CLI resumes it (nothing else did): the next slot restarts
    common::kubectl(&["delete", "-f", &quota_path]);
    let resumed_at = Utc::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_eru-operator"))
        .args(["resume", &format!("{}/web", ns.name)])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&since));
    wait_for("web resumed", Duration::from_secs(30), || async {
        let s = status(&erus, "web").await?;
        (s.paused_on_failure.is_none() && s.phase.as_deref() != Some("PausedOnFailure")).then_some(())
    })
    .await;
    let resumed_seen = Utc::now();
    wait_for(
        "a slot restarted after the resume",
        Duration::from_secs(60),
        || async {
            (ledger::slot_records(&operator, "web").ok()?.into_iter())
                .find(|r| r.slot > resumed_seen && r.fired() && r.outcome() == Some("succeeded"))
        },
    )
    .await;
    let not_paused = format!(
        r#"eru_paused_since_timestamp_seconds{{name="web",namespace="{}"}} 0"#,
        ns.name
    );
    assert!(operator.get("/metrics").1.contains(&not_paused), "{not_paused}");
    wait_for("a Resumed Event", Duration::from_secs(30), || async {
        events(&client, &ns.name, "web", "Resumed")
            .await
            .into_iter()
            .next()
    })
    .await;
    // a second resume finds nothing to resume
    let again = std::process::Command::new(env!("CARGO_BIN_EXE_eru-operator"))
        .args(["resume", &format!("{}/web", ns.name)])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("is not paused on failure"));

    // every slot accounted: failed restarts until the pause, skipped for it until the resume
    let to = settle(&erus, &operator, "web").await;
    let expected = every_since_created(&client, &ns.name, "web", Workload::Deployment("web"), 15, to).await;
    let (from, _) = expected.window;
    let expected = expected
        .require(from, pause.since, "fired_failed", &["target_unhealthy"])
        .require(pause.since + SECOND, resumed_at, "paused_on_failure", &[])
        .expect(
            resumed_at,
            resumed_seen,
            &[ON_SCHEDULE, &["paused_on_failure"]].concat(),
        )
        // (the quota gone, a rollout may still outlast its 4 s on a loaded machine: one failure
        // pauses nothing, and a restart that succeeded after the resume is waited for above)
        .expect(resumed_seen, to, &[ON_SCHEDULE, &["fired_failed"]].concat())
        .require_some(resumed_seen, to, "fired");
    check(&client, &ns.name, &operator, &expected).await;
    drop(operator);
}
