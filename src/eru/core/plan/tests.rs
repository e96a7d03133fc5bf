//! Unit tests of one pass's plan: epochs, the cursor from journal, status and template, a lost
//! journal's seed and window, the restart in flight.

use std::collections::HashMap;

use chrono::TimeZone;
use serde_json::json;

use super::*;
use crate::eru::core::blackout::Blackouts;
use crate::eru::{
    Blackout,
    CachedEru,
    EruStatus,
    LastRestart,
    core::{
        ledger::Reason,
        messages::{EruAction, EruRecord},
        observed::{Cluster, Journaled, Ledger, OpenRestart, Operator},
        restart::{Cause, Restart},
        schedule::Schedule,
        target::TargetView,
    },
    // fixtures from real objects, as the pass converts them
    pass::observe::{epoch_spec, shown},
    workloads::view_deployment,
};
use crate::vocab::Outcome;

/// The plan of `o`, its current spec's blackouts compiled from its spec and the cluster's list
/// as the pass compiles them (the tests edit those, not the compiled ones).
fn plan(mut o: Observed) -> Plan {
    let c = &o.cluster;
    o.cluster.blackouts = match c.schedule {
        Ok(_) => Blackouts::in_force(
            &c.spec.blackouts,
            &o.operator.cluster_blackouts,
            c.spec.time_zone.as_deref(),
            &c.h_key,
        ),
        Err(_) => Blackouts::default(),
    };
    super::plan(o)
}

fn t(m: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, 3, m, s).unwrap()
}

fn eru(schedule: &str, generation: i64) -> CachedEru {
    serde_json::from_value(json!({
        "apiVersion": "mtsre.meitu.com/v1", "kind": "Eru",
        "metadata": {"name": "web", "namespace": "ns", "uid": "u1", "generation": generation,
                     "creationTimestamp": "2026-11-22T03:00:00Z"},
        "spec": {"schedule": schedule, "target": {"kind": "Deployment", "name": "web"}}
    }))
    .unwrap()
}

fn target(template_slot: Option<DateTime<Utc>>) -> TargetView {
    let annotations = template_slot
        .map(|s| json!({"mtsre.meitu.com/restartedAt": crate::eru::core::schedule::slot_text(s)}));
    view_deployment(
        &serde_json::from_value(json!({
            "metadata": {"name": "web", "generation": 2},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"annotations": annotations}, "spec": {"containers": []}}},
            "status": {"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1,
                       "readyReplicas": 1, "availableReplicas": 1}
        }))
        .unwrap(),
    )
}

/// An operator that has run since 02:00 and a journal that accounted the Eru up to `cursor`.
fn observed(eru: &CachedEru, now: DateTime<Utc>, cursor: Option<DateTime<Utc>>) -> Observed {
    let spec = epoch_spec(&eru.spec);
    Observed {
        now,
        cluster: Cluster {
            uid: "u1".into(),
            h_key: "ns/nightly".into(),
            generation: eru.metadata.generation.unwrap(),
            created: t(0, 0),
            spec_written_at: None,
            spec: spec.clone(),
            rollout_timeout_seconds: eru.spec.rollout_timeout_seconds,
            schedule: Schedule::parse(&eru.spec.schedule, None).map_err(|e| e.to_string()),
            blackouts: Blackouts::default(),
            invalid: None,
            pause_after: None,
            resume: None,
            shown: None,
            targets: HashMap::from([("web".to_string(), target(None))]),
            run: None,
        },
        journal: Journaled {
            ledger: cursor.map(|c| Ledger {
                accounted_through: Some(c),
            }),
            epochs: vec![Epoch {
                generation: 1,
                from: t(0, 0),
                spec,
            }],
            open_restart: None,
            open_run: None,
            run: None,
            runs: vec![(t(0, 0) - Duration::hours(1), now)],
            outages: Vec::new(),
            pauses: Default::default(),
        },
        operator: Operator::default(),
    }
}

/// The status's latest restart of `slot`, patched at its slot, `finished` then (succeeded) or
/// still in progress.
fn last_restart(slot: DateTime<Utc>, finished: Option<DateTime<Utc>>) -> LastRestart {
    LastRestart {
        slot,
        started_at: slot,
        decided_at: Some(slot),
        patched_at: Some(slot),
        finished_at: finished,
        outcome: if finished.is_some() {
            "succeeded"
        } else {
            "in_progress"
        }
        .into(),
        reason: None,
        duration_seconds: finished.map(|at| (at - slot).as_seconds_f64()),
        target: Some("web".into()),
        reverted_by: None,
        reverted_at: None,
    }
}

/// What the cluster shows of a restart of 03:05 rolling out: the status (RollingOut, its restart
/// in progress) and the target's template carrying the slot.
fn rolling_out_at_5(o: &mut Observed) {
    o.cluster.shown = Some(shown(&EruStatus {
        phase: Some("RollingOut".into()),
        accounted_through: Some(t(5, 0)),
        last_restart: Some(last_restart(t(5, 0), None)),
        ..EruStatus::default()
    }));
    o.cluster.targets.insert("web".into(), target(Some(t(5, 0))));
}

/// The journal's open restart of `slot` on `target` with its `deadline`, decided at
/// `decided_at`, not patched, no attempt failed yet.
fn open(
    (slot, target, deadline): (DateTime<Utc>, &str, DateTime<Utc>),
    decided_at: DateTime<Utc>,
) -> OpenRestart {
    OpenRestart {
        restart: Restart {
            cause: Cause::Slot(slot),
            target: target.into(),
            deadline,
            attempts: 0,
            last_error: None,
            next_attempt_at: None,
        },
        decided_at,
        patched_at: None,
        landed_generation: None,
        silence: None,
    }
}

/// `open` after `attempts` refused patches, the next one due at `next_attempt_at`.
fn retrying(mut open: OpenRestart, attempts: u32, next_attempt_at: DateTime<Utc>) -> OpenRestart {
    open.restart.attempts = attempts;
    open.restart.last_error = Some("denied".into());
    open.restart.next_attempt_at = Some(next_attempt_at);
    open
}

/// What one pass decided, the fleet giving the place a due slot asks for.
struct Pass {
    state: State,
    decision: crate::eru::core::messages::EruDecision,
    rollout_timeout: Duration,
    wake: Option<DateTime<Utc>>,
}

fn decide(_eru: &CachedEru, observed: &Observed) -> Pass {
    let mut plan = plan(observed.clone());
    if plan.state.asks_place().is_some() {
        plan.after(Fed::Place(Grant::Granted));
    }
    Pass {
        wake: plan.state.wake(observed.now, plan.rollout_timeout),
        state: plan.state.clone(),
        rollout_timeout: plan.rollout_timeout,
        decision: plan.take(),
    }
}

fn records(pass: &Pass) -> Vec<(DateTime<Utc>, Reason)> {
    pass.decision
        .records
        .iter()
        .flat_map(|r| match r {
            EruRecord::Slots(slots) => slots.iter().map(|s| (s.first, s.reason)).collect(),
            EruRecord::GaveUp { record, .. } => vec![(record.first, record.reason)],
            _ => vec![],
        })
        .collect()
}

#[test]
fn a_due_slot_is_decided_and_patched_in_the_same_pass() {
    let eru = eru("* * * * *", 1);
    let pass = decide(
        &eru,
        &observed(&eru, t(5, 0) + Duration::milliseconds(3), Some(t(4, 0))),
    );
    assert!(matches!(pass.state, State::Restarting { .. }));
    assert!(matches!(pass.decision.records[0], EruRecord::Decided { slot, .. } if slot == t(5, 0)));
    assert!(
        matches!(
            pass.decision.actions.as_slice(),
            [EruAction::AskPlace { .. }, EruAction::PatchRestart { .. }]
        ),
        "a place, then the patch: {:?}",
        pass.decision.actions
    );
    assert!(pass.wake.is_some(), "woken for the deadline");
}

#[test]
fn a_new_generation_is_an_epoch_from_its_api_write() {
    let mut eru = eru("*/5 * * * * *", 2);
    eru.spec.schedule = "*/5 * * * * *".into();
    let mut o = observed(&eru, t(1, 0) + Duration::milliseconds(300), Some(t(0, 0)));
    o.journal.epochs[0].spec.schedule = "0 0 1 1 *".into();
    o.cluster.spec_written_at = Some(t(0, 58));
    let pass = decide(&eru, &o);
    let epoch = pass.decision.records.iter().find_map(|r| match r {
        EruRecord::Epoch(e) => Some(e.clone()),
        _ => None,
    });
    assert_eq!(epoch.map(|e| (e.generation, e.from)), Some((2, t(0, 58))));
    assert!(
        records(&pass).is_empty(),
        "no slot of the new schedule before 00:58"
    );
    assert!(matches!(pass.state, State::Restarting { ref restart } if restart.slot() == Some(t(1, 0))));
}

#[test]
fn a_lost_journal_is_seeded_from_the_status_and_its_stretch_is_journal_lost() {
    let eru = eru("* * * * *", 1);
    let now = t(10, 0) + Duration::milliseconds(5);
    let mut o = observed(&eru, now, None);
    o.journal.runs = vec![(t(8, 30), now)]; // this journal's first run
    o.journal.epochs.clear();
    o.cluster.shown = Some(shown(&EruStatus {
        accounted_through: Some(t(4, 0)),
        missed_slots: 7,
        last_restart: Some(last_restart(t(3, 0), Some(t(3, 1)))),
        ..EruStatus::default()
    }));
    // the lost journal restarted 05:00 (the template says so): not again, not recorded again
    o.cluster.targets.insert("web".into(), target(Some(t(5, 0))));
    let pass = decide(&eru, &o);
    let seed = pass.decision.records.iter().find_map(|r| match r {
        EruRecord::Seed(s) => Some(s.clone()),
        _ => None,
    });
    assert_eq!(
        seed.map(|s| (s.missed_slots, s.accounted_through)),
        Some((7, Some(t(4, 0))))
    );
    let got = records(&pass);
    assert_eq!(got.first(), Some(&(t(6, 0), Reason::JournalLost)), "{got:?}");
    assert!(got.iter().all(|(slot, _)| *slot > t(5, 0)));
    let lost: Vec<_> = got.iter().filter(|(_, r)| *r == Reason::JournalLost).collect();
    assert_eq!(
        lost.len(),
        3,
        "06:00, 07:00, 08:00 before the first run at 08:30: {got:?}"
    );
    assert!(!got.iter().any(|(_, r)| *r == Reason::OperatorDown));
}

#[test]
fn a_spec_changed_after_a_lost_journals_cursor_leaves_a_reported_gap_and_none_at_it() {
    let eru = eru("* * * * *", 3);
    let now = t(10, 0) + Duration::milliseconds(5);
    let mut o = observed(&eru, now, None);
    o.journal.epochs.clear();
    o.cluster.spec_written_at = Some(t(7, 30));
    o.cluster.shown = Some(shown(&EruStatus {
        accounted_through: Some(t(4, 0)),
        ..EruStatus::default()
    }));
    let pass = decide(&eru, &o);
    assert_eq!(
        pass.decision.actions.first(),
        Some(&EruAction::ReportGap {
            from: t(4, 0),
            to: t(7, 30)
        })
    );
    assert!(records(&pass).iter().all(|(slot, _)| *slot > t(7, 30)));
    assert!(pass.decision.records.contains(&EruRecord::Advance(t(7, 30))));
    // a spec that took effect exactly at the cursor leaves no gap to report (mutation:
    // `from > cursor` → `>=`, an empty gap reported)
    o.cluster.spec_written_at = Some(t(4, 0));
    let pass = decide(&eru, &o);
    assert!(
        !pass
            .decision
            .actions
            .iter()
            .any(|a| matches!(a, EruAction::ReportGap { .. })),
        "{:?}",
        pass.decision.actions
    );
}

#[test]
fn a_restart_in_flight_comes_from_the_journal_and_lands() {
    let eru = eru("0 0 1 1 *", 1);
    let mut o = observed(&eru, t(5, 2), Some(t(5, 0)));
    o.cluster.shown = Some(shown(&EruStatus {
        phase: Some("Waiting".into()),
        ..EruStatus::default()
    }));
    o.journal.open_restart = Some(open((t(5, 0), "web", t(10, 0)), t(5, 0)));
    o.cluster.targets.insert("web".into(), target(Some(t(5, 0))));
    let pass = decide(&eru, &o);
    // landed (the template carries it) and, the target being settled, rolled out
    assert_eq!(pass.state, State::Waiting {});
    assert!(matches!(pass.decision.records[0], EruRecord::Patched { slot, .. } if slot == t(5, 0)));
    assert!(matches!(
        pass.decision.records[1],
        EruRecord::Finished {
            outcome: Outcome::Succeeded,
            ..
        }
    ));
}

#[test]
fn a_rollout_a_lost_journal_left_in_progress_is_taken_over() {
    let eru = eru("0 0 1 1 *", 1);
    let mut o = observed(&eru, t(5, 2), None);
    rolling_out_at_5(&mut o);
    let pass = decide(&eru, &o);
    let kinds: Vec<&str> = pass
        .decision
        .records
        .iter()
        .map(|r| match r {
            EruRecord::Decided { .. } => "decided",
            EruRecord::Patched { .. } => "patched",
            EruRecord::Finished { .. } => "finished",
            _ => "other",
        })
        .filter(|k| *k != "other")
        .collect();
    assert_eq!(kinds, ["decided", "patched", "finished"], "its end is recorded");
    // journaled with the deadline its slot had (mutation: `slot - startingDeadlineSeconds`)
    let deadline = pass.decision.records.iter().find_map(|r| match r {
        EruRecord::Decided { deadline, .. } => Some(*deadline),
        _ => None,
    });
    assert_eq!(deadline, Some(t(5, 0) + Duration::seconds(300)));
    // taken over by a transition of the machine, journaled as any other
    let moves: Vec<(&str, &str, &str)> = (pass.decision.transitions.iter())
        .map(|t| (t.from, t.to, t.event))
        .collect();
    assert_eq!(
        moves,
        [
            ("Waiting", "RollingOut", "Adopt"),
            ("RollingOut", "Waiting", "RolloutDone")
        ]
    );
}

/// An Eru of `schedule` on the StatefulSet `web` (its journal key `StatefulSet/web`), whose
/// strategy is `strategy`.
fn statefulset_eru(schedule: &str, strategy: serde_json::Value) -> (CachedEru, Observed, DateTime<Utc>) {
    let mut eru = eru(schedule, 1);
    eru.spec.target.kind = crate::eru::TargetKind::StatefulSet;
    let now = t(5, 0) + Duration::milliseconds(3);
    let mut o = observed(&eru, now, Some(t(4, 0)));
    assert_eq!(o.cluster.spec.target, "StatefulSet/web");
    o.cluster.targets = HashMap::from([(
        "StatefulSet/web".to_string(),
        crate::eru::workloads::view_statefulset(
            &serde_json::from_value(json!({
                "metadata": {"name": "web", "generation": 1},
                "spec": {"replicas": 2, "selector": {}, "template": {}, "updateStrategy": strategy},
                "status": {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2,
                           "readyReplicas": 2, "availableReplicas": 2}
            }))
            .unwrap(),
        ),
    )]);
    (eru, o, now)
}

#[test]
fn a_statefulset_target_is_restarted_by_its_key() {
    let (eru, o, _) = statefulset_eru("* * * * *", json!({"type": "RollingUpdate"}));
    let pass = decide(&eru, &o);
    assert!(matches!(pass.state, State::Restarting { ref restart } if restart.target == "StatefulSet/web"));
    assert!(matches!(
        pass.decision.actions.as_slice(),
        [EruAction::AskPlace { .. }, EruAction::PatchRestart { target, .. }] if target == "StatefulSet/web"
    ));
    assert_eq!(
        pass.rollout_timeout,
        Duration::seconds(600),
        "no progress deadline of its own"
    );
}

#[test]
fn a_not_rollable_target_skips_the_slot_with_the_note_and_gives_up_a_pending_restart() {
    let (eru, mut o, now) = statefulset_eru(
        "* * * * *",
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}),
    );
    let pass = decide(&eru, &o);
    assert_eq!(pass.state, State::Waiting {});
    assert!(pass.decision.actions.is_empty(), "never patched");
    let note = "StatefulSet web uses updateStrategy RollingUpdate with partition 1: \
                pods below ordinal 1 would not be restarted";
    let skipped: Vec<_> = pass
        .decision
        .records
        .iter()
        .flat_map(|r| match r {
            EruRecord::Slots(slots) => slots.clone(),
            _ => vec![],
        })
        .collect();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(
        (
            skipped[0].first,
            skipped[0].reason,
            skipped[0].target.as_str(),
            skipped[0].note.as_deref()
        ),
        (t(5, 0), Reason::TargetNotRollable, "StatefulSet/web", Some(note))
    );

    // decided before it became not rollable, not landed: given up with the note
    o.journal.ledger.as_mut().unwrap().accounted_through = Some(t(5, 0));
    o.journal.open_restart = Some(open((t(5, 0), "StatefulSet/web", t(10, 0)), t(5, 0)));
    o.now = now + Duration::seconds(1);
    let pass = decide(&eru, &o);
    assert_eq!(pass.state, State::Waiting {});
    assert!(pass.decision.actions.is_empty(), "never patched");
    let gave_up = pass.decision.records.iter().find_map(|r| match r {
        EruRecord::GaveUp { record, .. } => Some(record.clone()),
        _ => None,
    });
    assert_eq!(
        gave_up.map(|r| (r.reason, r.note)),
        Some((Reason::TargetNotRollable, Some(note.to_string())))
    );
}

#[test]
fn slots_and_a_decided_restart_lost_to_a_journal_outage_are_journal_unavailable() {
    // */5 s with a 2 s deadline; the journal took no writes from 03:00:01 to 03:00:13
    let mut eru = eru("*/5 * * * * *", 1);
    eru.spec.starting_deadline_seconds = 2;
    let outage = (t(0, 1), t(0, 13));
    let mut o = observed(&eru, t(0, 16), Some(t(0, 0)));
    o.journal.outages = vec![outage];
    let pass = decide(&eru, &o);
    assert_eq!(
        records(&pass),
        [
            (t(0, 5), Reason::JournalUnavailable),
            (t(0, 10), Reason::JournalUnavailable)
        ]
    );
    assert!(matches!(pass.state, State::Restarting { ref restart } if restart.slot() == Some(t(0, 15))));

    // the restart of 03:00:00 was decided, then nothing could be journaled until past its deadline
    o.journal.open_restart = Some(open((t(0, 0), "web", t(0, 2)), t(0, 0)));
    let pass = decide(&eru, &o);
    let gave_up = pass.decision.records.iter().find_map(|r| match r {
        EruRecord::GaveUp { record, .. } => Some((record.first, record.reason, record.window)),
        _ => None,
    });
    assert_eq!(
        gave_up,
        Some((t(0, 0), Reason::JournalUnavailable, Some(outage))),
        "was past_deadline"
    );
}

fn closed(reason: Reason, note: &str) -> hold::Answer {
    hold::Answer::Closed {
        reason,
        note: note.into(),
    }
}

#[test]
fn a_closed_gate_holds_the_due_slot_unaccounted_and_wakes_at_the_poll() {
    let eru = eru("* * * * *", 1);
    let mut o = observed(&eru, t(1, 2), Some(t(0, 30)));
    o.operator.gate = closed(Reason::BlockingPods, "blocking pods running in ns: migrate-1");
    o.operator.gate_poll = Duration::seconds(10);
    let mut plan = plan(o);
    assert_eq!(plan.state.asks_place(), None, "a held slot takes no fleet place");
    let held = plan.held.clone().expect("held");
    assert_eq!(
        (held.slot, held.since, held.reason),
        (t(1, 0), t(1, 2), Reason::BlockingPods)
    );
    assert_eq!(plan.wake(), Some(t(1, 12)), "asked again at the poll interval");
    let decided = plan.take();
    assert!(
        matches!(decided.actions.as_slice(), [EruAction::Hold(h)] if h.slot == t(1, 0) && h.reason == Reason::BlockingPods && h.since == h.checked_at),
        "nothing patched, the hold reported: {:?}",
        decided.actions
    );
    assert!(
        decided
            .records
            .iter()
            .all(|r| !matches!(r, EruRecord::Slots(_) | EruRecord::Decided { .. })),
        "no record of the held slot: {:?}",
        decided.records
    );
    assert_eq!(plan.state, State::Waiting {});
}

#[test]
fn a_held_slot_runs_once_the_gate_opens_before_its_deadline() {
    let eru = eru("* * * * *", 1);
    let mut o = observed(&eru, t(1, 40), Some(t(0, 30)));
    o.operator.held = Some(Held::new(
        t(1, 0),
        t(1, 0) + Duration::seconds(300),
        t(1, 2),
        (Reason::AlertFiring, "alerts firing: X"),
        None,
    ));
    let pass = decide(&eru, &o);
    assert!(matches!(pass.state, State::Restarting { .. }), "{:?}", pass.state);
    assert!(
        !pass
            .decision
            .actions
            .iter()
            .any(|a| matches!(a, EruAction::Hold(_)))
    );
    assert!(
        pass.decision
            .actions
            .iter()
            .any(|a| matches!(a, EruAction::PatchRestart { slot, .. } if *slot == t(1, 0)))
    );
}

#[test]
fn a_slot_held_past_its_deadline_is_skipped_with_the_gates_reason_once() {
    let mut eru = eru("* * * * *", 1);
    eru.spec.starting_deadline_seconds = 30;
    let mut o = observed(&eru, t(1, 31), Some(t(0, 30)));
    o.journal.epochs[0].spec.starting_deadline_seconds = 30;
    o.cluster.spec.starting_deadline_seconds = 30;
    o.operator.gate = closed(Reason::AlertFiring, "alerts firing: HighErrorRate");
    o.operator.held = Some(Held::new(
        t(1, 0),
        t(1, 30),
        t(1, 2),
        (Reason::AlertFiring, "alerts firing: HighErrorRate"),
        None,
    ));
    let mut plan = plan(o);
    assert_eq!(plan.held, None, "nothing left to hold");
    let decided = plan.take();
    let slots: Vec<_> = decided
        .records
        .iter()
        .flat_map(|r| match r {
            EruRecord::Slots(s) => s.clone(),
            _ => vec![],
        })
        .collect();
    assert_eq!(slots.len(), 1, "{slots:?}");
    assert_eq!((slots[0].first, slots[0].reason), (t(1, 0), Reason::AlertFiring));
    assert!(
        slots[0]
            .note
            .as_deref()
            .unwrap()
            .starts_with("alerts firing: HighErrorRate; held from")
    );
    assert!(decided.actions.is_empty(), "never patched after the deadline");
}

#[test]
fn target_gates_and_dry_runs_compose_with_a_hold() {
    // a paused target skips at once (its own reason comes first)
    let eru = eru("* * * * *", 1);
    let mut o = observed(&eru, t(1, 2), Some(t(0, 30)));
    o.operator.gate = closed(Reason::BlockingPods, "p");
    let mut paused = o.clone();
    let mut view = target(None);
    view.paused = true;
    paused.cluster.targets.insert("web".into(), view);
    let pass = decide(&eru, &paused);
    assert_eq!(records(&pass), vec![(t(1, 0), Reason::TargetPaused)]);
    // a dry run is held too: it shows the gates' decision
    let mut dry = o.clone();
    dry.operator.dry_run_all = true;
    let plan = plan(dry);
    assert!(plan.held.is_some());
}

#[test]
fn upcoming_slots_carry_their_jitter_and_the_blackout_that_will_skip_them() {
    // every minute, jittered up to 30 s; a spec blackout over 03:07-03:08 and a cluster one
    // (absolute) over 03:09-03:10; the pass runs at 03:05:30
    let mut eru = eru("* * * * *", 1);
    eru.spec.jitter_seconds = Some(30);
    eru.spec.blackouts = vec![Blackout {
        name: Some("deploys".into()),
        schedule: Some("7 3 * * *".into()),
        duration_seconds: Some(60),
        start: None,
        end: None,
    }];
    let mut o = observed(&eru, t(5, 30), Some(t(5, 0)));
    o.cluster.spec = epoch_spec(&eru.spec);
    o.journal.epochs[0].spec = o.cluster.spec.clone();
    o.operator.cluster_blackouts = std::sync::Arc::new(vec![Blackout {
        name: Some("freeze".into()),
        schedule: None,
        duration_seconds: None,
        start: Some(t(9, 0)),
        end: Some(t(10, 0)),
    }]);
    let upcoming = plan(o.clone()).upcoming(5);
    // the first is the next restart the status shows
    assert_eq!(plan(o.clone()).next_restart(), Some(upcoming[0].restart_at));
    let slots: Vec<DateTime<Utc>> = upcoming.iter().map(|u| u.slot).collect();
    assert_eq!(slots, [t(6, 0), t(7, 0), t(8, 0), t(9, 0), t(10, 0)]);
    for u in &upcoming {
        let offset = u.restart_at - u.slot;
        assert_eq!(offset, ledger::jitter_offset("u1", u.slot, 30), "{u:?}");
        assert!(
            offset >= Duration::zero() && offset < Duration::seconds(30),
            "{u:?}"
        );
    }
    let covered: Vec<(DateTime<Utc>, Option<&str>)> =
        upcoming.iter().map(|u| (u.slot, u.blackout.as_deref())).collect();
    assert!(
        covered[1]
            .1
            .is_some_and(|n| n.starts_with("blackout \"deploys\"")),
        "{covered:?}"
    );
    assert!(
        covered[3]
            .1
            .is_some_and(|n| n.starts_with("cluster blackout \"freeze\"")),
        "{covered:?}"
    );
    for i in [0, 2, 4] {
        assert_eq!(covered[i].1, None, "{covered:?}");
    }

    // a slot just passed whose jittered restart is still ahead is upcoming, as nextScheduleTime
    // says; one whose restart has begun is not
    let offset = ledger::jitter_offset("u1", t(6, 0), 30);
    for (now, listed) in [
        (t(6, 0) + offset - Duration::milliseconds(1), true),
        (t(6, 0) + offset, false),
    ] {
        o.now = now;
        let first = plan(o.clone()).upcoming(1)[0].slot;
        assert_eq!(first == t(6, 0), listed, "at {now}: {first}");
    }

    // suspended: nothing is upcoming (its slots will be skipped), as nextScheduleTime
    eru.spec.suspend = true;
    o.cluster.spec = epoch_spec(&eru.spec);
    let p = plan(o);
    assert_eq!(p.upcoming(5), []);
    assert_eq!(p.next_restart(), None);
}

/// A refused patch is retried after the backoff of its attempt (mutations: the attempt not
/// counted, `attempts - 1` or `* 1`, and the retry before the failure: `at - delay`).
#[test]
fn each_refused_patch_is_retried_after_the_backoff_of_its_attempt() {
    let eru = eru("* * * * *", 1);
    let mut o = observed(&eru, t(5, 0) + Duration::milliseconds(3), Some(t(4, 0)));
    let mut retries = Vec::new();
    for attempt in 1..=3 {
        let mut p = plan(o.clone());
        if p.state.asks_place().is_some() {
            p.after(Fed::Place(Grant::Granted));
        }
        let at = o.now + Duration::milliseconds(5);
        p.after(Fed::PatchFailed {
            message: "denied".into(),
            at,
        });
        let State::Restarting { restart } = &p.state else {
            panic!("attempt {attempt}: {:?}", p.state);
        };
        assert_eq!(restart.attempts, attempt, "attempts are counted");
        let retry_at = restart.next_attempt_at.expect("a retry");
        assert_eq!(retry_at, at + retry_delay(attempt), "attempt {attempt}");
        assert!(retry_at > at);
        retries.push(retry_at - at);
        // the next pass, at the retry: the journal holds the open restart with its attempts
        o.journal.open_restart = Some(OpenRestart {
            restart: restart.clone(),
            decided_at: t(5, 0) + Duration::milliseconds(3),
            patched_at: None,
            landed_generation: None,
            silence: None,
        });
        o.now = retry_at;
    }
    assert!(
        retries.windows(2).all(|w| w[0] < w[1]),
        "backing off: {retries:?}"
    );
}

/// A slot waiting for a fleet place wakes its Eru just after its deadline, to record it
/// `fleet_capacity` if no place came (mutation: `deadline - 1 ms`, a pass that finds the
/// deadline not yet passed and asks to be woken in the past again).
#[test]
fn a_queued_slot_wakes_its_eru_just_after_its_deadline() {
    // a yearly schedule (03:05 on the 22nd of November): no other slot wakes it sooner
    let eru = eru("5 3 22 11 *", 1);
    let o = observed(&eru, t(5, 0) + Duration::milliseconds(3), Some(t(4, 0)));
    let mut p = plan(o);
    assert!(p.state.asks_place().is_some(), "{:?}", p.state);
    p.after(Fed::Place(Grant::Queued {
        ahead: 2,
        in_flight: 1,
        paced: false,
    }));
    let queued = p.queued.clone().expect("queued");
    assert_eq!(queued.deadline, t(5, 0) + Duration::seconds(300));
    assert_eq!(p.wake(), Some(queued.deadline + Duration::milliseconds(1)));
    // what the status and the Event say waits (mutation: `Queued::what` emptied)
    assert_eq!(queued.what(), "slot 2026-11-22T03:05:00Z");
    let run = Queued {
        run: Some("deploy-42".into()),
        ..queued
    };
    assert_eq!(run.what(), "manual run \"deploy-42\"");
}

/// A dry run is the operator's (`--dry-run`) or the spec's, either alone (mutation: `|=` → `&=`
/// would patch a spec's dry run unless the operator's was set too, and the other way round).
#[test]
fn a_due_slot_is_a_dry_run_when_the_spec_or_the_operator_says_so() {
    let dry_run = |pass: &Pass| {
        let journaled = pass
            .decision
            .records
            .iter()
            .any(|r| matches!(r, EruRecord::DryRun { slot, .. } if *slot == t(5, 0)));
        let patched = pass
            .decision
            .actions
            .iter()
            .any(|a| matches!(a, EruAction::PatchRestart { .. }));
        assert_ne!(journaled, patched, "{:?}", pass.decision);
        journaled
    };
    let now = t(5, 0) + Duration::milliseconds(3);
    for (spec, operator) in [(false, false), (true, false), (false, true), (true, true)] {
        let mut eru = eru("* * * * *", 1);
        eru.spec.dry_run = spec;
        let mut o = observed(&eru, now, Some(t(4, 0)));
        o.operator.dry_run_all = operator;
        assert_eq!(
            dry_run(&decide(&eru, &o)),
            spec || operator,
            "spec {spec}, operator {operator}"
        );
    }
}

/// A decided restart's patch that could not be sent because no operator ran between its
/// decision and its deadline is given up as `operator_down`; the decision's instant comes from
/// the journal's open restart (mutation: the open restart not matched by its slot, so the
/// window would start at the pass, after the deadline, and find no downtime).
#[test]
fn a_restart_decided_before_a_downtime_that_outlasted_its_deadline_is_operator_down() {
    let eru = eru("5 3 22 11 *", 1);
    let decided_at = t(5, 0) + Duration::milliseconds(3);
    // (a decided restart's slot is accounted: the cursor is at it)
    let mut o = observed(&eru, t(12, 0), Some(t(5, 0)));
    // the operator stopped right after deciding, and came back after the deadline (03:10)
    o.journal.runs = vec![(t(0, 0) - Duration::hours(1), t(5, 1)), (t(11, 0), t(12, 0))];
    o.journal.open_restart = Some(open((t(5, 0), "web", t(10, 0)), decided_at));
    let pass = decide(&eru, &o);
    assert_eq!(records(&pass), vec![(t(5, 0), Reason::OperatorDown)]);
}

/// A refused patch is tried again at its retry instant, not a millisecond before (mutations:
/// `next_attempt_at <= now` → `>` or `<`).
#[test]
fn a_refused_patch_is_tried_again_at_its_retry_instant() {
    let eru = eru("5 3 22 11 *", 1);
    let retry_at = t(5, 2);
    let mut o = observed(&eru, retry_at, Some(t(5, 0)));
    o.journal.open_restart = Some(retrying(
        open((t(5, 0), "web", t(10, 0)), t(5, 0) + Duration::milliseconds(3)),
        1,
        retry_at,
    ));
    let patches = |o: &Observed| {
        let pass = decide(&eru, o);
        pass.decision
            .actions
            .iter()
            .any(|a| matches!(a, EruAction::PatchRestart { slot, .. } if *slot == t(5, 0)))
    };
    assert!(patches(&o), "at its retry instant");
    o.now = retry_at - Duration::milliseconds(1);
    assert!(!patches(&o), "a millisecond before");
}

/// Only a lost journal's rollout is taken over: with a ledger (the journal has this Eru), a
/// status still showing a restart in progress is a stale one, never adopted again (mutation:
/// `||` → `&&` in `rolling_out_unjournaled`).
#[test]
fn a_stale_status_is_not_a_rollout_to_take_over_while_the_journal_has_the_eru() {
    let eru = eru("0 0 1 1 *", 1);
    let mut o = observed(&eru, t(5, 2), Some(t(5, 0)));
    rolling_out_at_5(&mut o);
    let pass = decide(&eru, &o);
    assert!(
        !pass
            .decision
            .records
            .iter()
            .any(|r| matches!(r, EruRecord::Decided { .. } | EruRecord::Patched { .. })),
        "{:?}",
        pass.decision.records
    );
    assert!(!pass.decision.transitions.iter().any(|t| t.event == "Adopt"));
}

/// A restart's rollout is judged by the timeout of the workload it restarts, not of the one the
/// spec names now (the spec retargeted meanwhile; mutations: the `Restarting` or the
/// `RollingOut` arm dropped from `rollout_timeout`).
#[test]
fn a_pending_restart_keeps_the_rollout_timeout_of_its_own_target() {
    let eru = eru("5 3 22 11 *", 1);
    let mut o = observed(&eru, t(5, 1), Some(t(5, 0)));
    let mut old = target(None);
    old.rollout_timeout_seconds = 100;
    o.cluster.targets.insert("old".into(), old);
    o.journal.open_restart = Some(retrying(open((t(5, 0), "old", t(10, 0)), t(5, 0)), 1, t(6, 0)));
    assert_ne!(o.cluster.targets["web"].rollout_timeout_seconds, 100);
    assert_eq!(plan(o.clone()).rollout_timeout, Duration::seconds(100));
    // and once it landed, while it rolls out (the `RollingOut` arm)
    o.journal.open_restart.as_mut().unwrap().patched_at = Some(t(5, 1));
    let landed = plan(o);
    assert!(
        matches!(landed.state, State::RollingOut { .. }),
        "{:?}",
        landed.state
    );
    assert_eq!(landed.rollout_timeout, Duration::seconds(100));
}

/// A lost journal is seeded with the status's cursor as the status tells it: a status written
/// before the cursor was kept tells it by its latest restart (mutation: the seed's
/// `accounted_through` taken from the status's cursor field alone).
#[test]
fn a_lost_journal_is_seeded_with_the_latest_instant_the_status_accounts() {
    let eru = eru("* * * * *", 1);
    let now = t(10, 0) + Duration::milliseconds(5);
    let mut o = observed(&eru, now, None);
    o.journal.runs = vec![(t(8, 30), now)];
    o.cluster.shown = Some(shown(&EruStatus {
        accounted_through: None,
        last_restart: Some(last_restart(t(3, 0), Some(t(3, 1)))),
        ..EruStatus::default()
    }));
    let pass = decide(&eru, &o);
    let seed = pass.decision.records.iter().find_map(|r| match r {
        EruRecord::Seed(s) => Some(s.accounted_through),
        _ => None,
    });
    assert_eq!(seed, Some(Some(t(3, 0))));
}

/// A journal restored from an older backup: the status's cursor is ahead of the journal's, and
/// the journal's is moved to it, so nothing the status accounts is accounted again (mutation:
/// `cursor > journal's` → `<`, never advanced).
#[test]
fn a_journal_behind_the_status_is_advanced_to_the_status_cursor() {
    let eru = eru("* * * * *", 1);
    // the journal's cursor at `journal`, the status's at 04:00
    let pass_with = |journal: DateTime<Utc>| {
        let mut o = observed(&eru, t(4, 30), Some(journal));
        o.cluster.shown = Some(shown(&EruStatus {
            accounted_through: Some(t(4, 0)),
            ..EruStatus::default()
        }));
        decide(&eru, &o)
    };
    let pass = pass_with(t(2, 0));
    assert!(
        pass.decision.records.contains(&EruRecord::Advance(t(4, 0))),
        "{:?}",
        pass.decision.records
    );
    assert!(records(&pass).iter().all(|(slot, _)| *slot > t(4, 0)));
    // already there: no advance to journal
    let pass = pass_with(t(4, 0));
    assert!(
        !pass
            .decision
            .records
            .iter()
            .any(|r| matches!(r, EruRecord::Advance(_)))
    );
}

/// With its ledger in the journal, the stretch before this journal's first run is downtime
/// (`operator_down`), never a lost journal's: only a journal without the Eru, seeded from the
/// status, has a stretch it cannot account (mutations: the guard made `true` or `||`).
#[test]
fn before_the_first_run_of_a_journal_with_the_ledger_is_operator_down() {
    let eru = eru("* * * * *", 1);
    let now = t(10, 0) + Duration::milliseconds(5);
    let mut o = observed(&eru, now, Some(t(4, 0)));
    o.journal.runs = vec![(t(8, 30), now)];
    o.cluster.shown = Some(shown(&EruStatus {
        accounted_through: Some(t(4, 0)),
        ..EruStatus::default()
    }));
    let got = records(&decide(&eru, &o));
    let down: Vec<DateTime<Utc>> = got
        .iter()
        .filter(|(_, r)| *r == Reason::OperatorDown)
        .map(|(slot, _)| *slot)
        .collect();
    assert_eq!(down, [t(5, 0), t(6, 0), t(7, 0), t(8, 0)], "{got:?}");
    assert!(!got.iter().any(|(_, r)| *r == Reason::JournalLost), "{got:?}");
}

/// A jitter far longer than the schedule's period (every second, up to a day later) leaves
/// tens of thousands of passed slots whose restarts may still be ahead: a pass looks at the
/// first 64 of them only, then at the slots after now (mutations: the passed slots not counted,
/// or the bound moved by one). The instant is picked so that the 64th passed slot's restart is
/// still ahead, so the bound shows in the list.
#[test]
fn upcoming_slots_are_found_in_bounded_work_whatever_the_jitter() {
    const DAY: i64 = 86_400;
    let mut eru = eru("* * * * * *", 1);
    eru.spec.jitter_seconds = Some(DAY);
    let fire = |slot: DateTime<Utc>| slot + ledger::jitter_offset("u1", slot, DAY);
    let second = Duration::seconds(1);
    // the i-th passed slot a pass at `now` looks at (1-based), from now - 1 day
    let passed = |now: DateTime<Utc>, i: i64| now - Duration::seconds(DAY) + second * i as i32;
    let now = (0..200_000)
        .map(|k| t(5, 30) + second * k)
        .find(|now| fire(passed(*now, 64)) > *now)
        .expect("an instant whose 64th passed slot restarts later");
    let expected: Vec<DateTime<Utc>> = (1..=64)
        .map(|i| passed(now, i))
        .filter(|slot| fire(*slot) > now)
        .chain((1..).map(|i| now + second * i))
        .take(5)
        .collect();
    assert!(expected.contains(&passed(now, 64)), "{expected:?}");
    let mut o = observed(&eru, now, Some(now - second));
    o.cluster.spec = epoch_spec(&eru.spec);
    o.journal.epochs[0].spec = o.cluster.spec.clone();
    let upcoming = plan(o).upcoming(5);
    let slots: Vec<DateTime<Utc>> = upcoming.iter().map(|u| u.slot).collect();
    assert_eq!(slots, expected);
    assert!(
        upcoming
            .iter()
            .all(|u| u.restart_at == fire(u.slot) && u.restart_at > now)
    );
}

mod manual_runs {
    //! A manual run (`mtsre.meitu.com/run-now`) through one plan: journaled apart from the slots,
    //! through the fleet and the gates, once per token.

    use super::*;
    use crate::eru::core::{
        observed::{OpenRun, RunSeen},
        run::{Asked, ManualRun, RunRecord},
    };
    use crate::vocab::RunOutcome;

    fn asked(token: &str) -> Option<Result<Asked, String>> {
        Some(Ok(Asked {
            token: token.into(),
            requested_by: Some("kubectl-annotate".into()),
            set_at: Some(t(7, 0)),
        }))
    }

    /// An hourly Eru accounted through 03:00, asked at 03:07 for run "a", observed at 03:07:30.
    fn asking(token: &str) -> Observed {
        let e = eru("0 * * * *", 1);
        let mut o = observed(&e, t(7, 30), Some(t(0, 0)));
        o.cluster.run = asked(token);
        o
    }

    fn runs(records: &[EruRecord]) -> Vec<RunRecord> {
        records
            .iter()
            .filter_map(|r| match r {
                EruRecord::Run(run) => Some(run.clone()),
                _ => None,
            })
            .collect()
    }

    fn run(token: &str) -> ManualRun {
        ManualRun {
            token: token.into(),
            requested_by: Some("kubectl-annotate".into()),
            requested_at: t(7, 0),
            deadline: t(12, 0),
            target: "web".into(),
            attempts: 0,
            last_error: None,
            next_attempt_at: None,
        }
    }

    fn ended(records: &[EruRecord]) -> Option<(RunOutcome, String)> {
        runs(records).into_iter().find_map(|r| match r {
            RunRecord::Ended { outcome, reason, .. } => Some((outcome, reason.unwrap_or_default())),
            _ => None,
        })
    }

    #[test]
    fn a_new_token_is_journaled_asks_a_place_and_is_patched_once_granted() {
        let mut plan = plan(asking("a"));
        let first = plan.take();
        assert_eq!(
            runs(&first.records),
            vec![RunRecord::Requested {
                run: run("a"),
                waits: None
            }],
            "asked at the annotation's write, deadline after startingDeadlineSeconds"
        );
        assert!(
            first.actions.contains(&EruAction::AskPlace {
                slot: t(7, 0),
                deadline: t(12, 0)
            }),
            "{:?}",
            first.actions
        );
        plan.after(Fed::Place(Grant::Granted));
        let decided = plan.take();
        assert_eq!(
            runs(&decided.records),
            vec![RunRecord::Decided { token: "a".into() }]
        );
        assert!(decided.actions.contains(&EruAction::PatchRun {
            token: "a".into(),
            target: "web".into()
        }));
        plan.after(Fed::Patched {
            at: t(7, 31),
            generation: None,
        });
        let patched = plan.take();
        assert_eq!(
            runs(&patched.records),
            vec![RunRecord::Patched {
                token: "a".into(),
                at: t(7, 31)
            }]
        );
        assert!(matches!(plan.state, State::RollingOut { .. }));
        // only run records: no slot's (fired, missed, skipped) nor a restart's
        for records in [&first.records, &decided.records, &patched.records] {
            assert!(
                records.iter().all(|r| matches!(r, EruRecord::Run(_))),
                "the slot arithmetic is untouched: {records:?}"
            );
        }
    }

    #[test]
    fn a_started_token_is_never_run_again() {
        let mut o = asking("a");
        o.journal.run = Some(RunSeen::Started);
        let mut plan = plan(o);
        let decided = plan.take();
        assert!(runs(&decided.records).is_empty(), "{:?}", decided.records);
        assert!(
            !decided
                .actions
                .iter()
                .any(|a| matches!(a, EruAction::AskPlace { .. }))
        );
    }

    #[test]
    fn a_blackout_makes_it_wait_and_its_deadline_refuses_it() {
        let mut o = asking("a");
        o.cluster.spec.blackouts = vec![
            serde_json::from_value::<Blackout>(json!({
                "start": "2026-11-22T03:00:00Z", "end": "2026-11-22T04:00:00Z"
            }))
            .unwrap(),
        ];
        let mut plan = plan(o.clone());
        let waits = plan.take();
        match runs(&waits.records).as_slice() {
            [RunRecord::Requested { waits: Some(why), .. }] => {
                assert!(why.starts_with("blackout: "), "{why}")
            }
            other => panic!("{other:?}"),
        }
        let deadline = t(12, 0) + Duration::milliseconds(1);
        assert_eq!(plan.run_waits, Some(deadline), "the blackout ends later");
        assert!(plan.wake().is_some_and(|at| at <= deadline));
        assert!(
            !waits
                .actions
                .iter()
                .any(|a| matches!(a, EruAction::AskPlace { .. }))
        );
        // past its deadline, still in the blackout: refused, saying why
        o.now = t(12, 1);
        o.journal.run = Some(RunSeen::Waiting {
            run: run("a"),
            waited: Some("blackout: ...".into()),
        });
        let (outcome, reason) = ended(&plan_records(o)).unwrap();
        assert_eq!(outcome, RunOutcome::Refused);
        assert!(
            reason.starts_with("not started by its deadline 2026-11-22T03:12:00Z (blackout: "),
            "{reason}"
        );
    }

    fn plan_records(o: Observed) -> Vec<EruRecord> {
        plan(o).take().records
    }

    /// A run whose target is paused waits and is looked at again at the gate poll (mutation:
    /// `+` → `-` in `Plan::run_now`); refused past its deadline, it is not looked at again (`&&`
    /// → `||` in the `blocked` of `Plan::run_now`).
    #[test]
    fn a_blocked_run_is_looked_at_again_at_the_gate_poll_until_its_deadline() {
        let mut o = asking("a");
        o.operator.gate_poll = Duration::seconds(10);
        let mut paused = target(None);
        paused.paused = true;
        o.cluster.targets.insert("web".into(), paused);
        let waits = plan(o.clone());
        assert_eq!(
            waits.run_waits,
            Some(t(7, 40) + Duration::milliseconds(1)),
            "now (03:07:30) and the poll"
        );
        o.now = t(12, 1);
        o.journal.run = Some(RunSeen::Waiting {
            run: run("a"),
            waited: Some("target_paused: the target web".into()),
        });
        let refused = plan(o);
        assert_eq!(refused.run_waits, None, "refused: nothing to look at again");
    }

    /// A dry run is the spec's or the operator's, either alone; it ends at once, nothing to look
    /// at again (mutations: `||` → `&&` for `dry_run`, `&&` → `||` in the `blocked` of
    /// `Plan::run_now` and in its `blocked && Waiting`).
    #[test]
    fn a_run_is_a_dry_run_when_the_spec_or_the_operator_says_so() {
        for (spec, operator) in [(true, false), (false, true)] {
            let mut o = asking("a");
            o.cluster.spec.dry_run = spec;
            o.operator.dry_run_all = operator;
            let mut plan = plan(o);
            let records = plan.take().records;
            assert_eq!(
                ended(&records).map(|(outcome, _)| outcome),
                Some(RunOutcome::DryRun),
                "spec {spec}, operator {operator}: {records:?}"
            );
            assert_eq!(plan.run_waits, None);
        }
    }

    #[test]
    fn a_suspended_eru_refuses_it_at_once() {
        let mut o = asking("a");
        o.cluster.spec.suspend = true;
        o.cluster.shown = Some(crate::eru::core::observed::Shown {
            phase: Some("Suspended".into()),
            ..Default::default()
        });
        let records = plan_records(o);
        assert!(matches!(runs(&records)[0], RunRecord::Requested { .. }));
        let (outcome, reason) = ended(&records).unwrap();
        assert_eq!(
            (outcome, reason.as_str()),
            (RunOutcome::Refused, "suspended: the Eru is suspended")
        );
    }

    #[test]
    fn a_token_the_template_carries_is_taken_over_not_patched_again() {
        let mut o = asking("a");
        let mut view = target(None);
        view.template_run = Some("ns/nightly:a".into());
        view.run_applied_at = Some(t(7, 10));
        o.cluster.targets.insert("web".into(), view);
        let mut plan = plan(o);
        let decided = plan.take();
        assert_eq!(
            runs(&decided.records)[1..3],
            [
                RunRecord::Decided { token: "a".into() },
                RunRecord::Patched {
                    token: "a".into(),
                    at: t(7, 10)
                }
            ]
        );
        assert!(
            !decided
                .actions
                .iter()
                .any(|a| matches!(a, EruAction::PatchRun { .. } | EruAction::AskPlace { .. }))
        );
        // its rollout had ended already: judged in the same pass (no target change may come)
        assert!(
            matches!(
                runs(&decided.records).last(),
                Some(RunRecord::Ended {
                    outcome: RunOutcome::Succeeded,
                    ..
                })
            ),
            "{:?}",
            decided.records
        );
        assert_eq!(plan.state, State::Waiting {});
    }

    #[test]
    fn a_run_rolling_out_ends_when_its_target_settles_and_a_due_slot_is_concurrent() {
        let e = eru("*/5 * * * *", 1);
        let mut o = observed(&e, t(5, 10), Some(t(0, 0)));
        let mut view = target(None);
        view.template_run = Some("ns/nightly:a".into());
        view.settled = false;
        o.cluster.targets.insert("web".into(), view.clone());
        o.journal.open_run = Some(OpenRun {
            run: run("a"),
            patched_at: Some(t(4, 0)),
        });
        let records = plan_records(o.clone());
        let slot = records.iter().find_map(|r| match r {
            EruRecord::Slots(s) => Some(s[0].clone()),
            _ => None,
        });
        let slot = slot.expect("the 03:05 slot is recorded");
        assert_eq!(slot.reason, Reason::ConcurrentRollout);
        assert_eq!(slot.note.as_deref(), Some("manual run \"a\" was rolling out"));
        // settled: succeeded
        view.settled = true;
        o.cluster.targets.insert("web".into(), view);
        o.journal.ledger = Some(Ledger {
            accounted_through: Some(t(5, 0)),
        });
        let (outcome, _) = ended(&plan_records(o)).unwrap();
        assert_eq!(outcome, RunOutcome::Succeeded);
    }
}

/// A restart not landed when the spec turns invalid beside a valid schedule: given up as
/// `spec_invalid`, never patched (mutation: `||` → `&&` in `Plan::pending`).
#[test]
fn a_restart_not_landed_is_given_up_when_the_spec_turns_invalid() {
    let e = eru("*/5 * * * *", 1);
    let mut o = observed(&e, t(5, 10), Some(t(5, 0)));
    o.journal.open_restart = Some(open((t(5, 0), "web", t(10, 0)), t(5, 0)));
    o.cluster.invalid = Some("spec.silence.matchers: namespace=\"b\" …".into());
    let pass = decide(&e, &o);
    assert_eq!(records(&pass), [(t(5, 0), Reason::SpecInvalid)]);
    assert!(
        !(pass.decision.actions.iter()).any(|a| matches!(a, EruAction::PatchRestart { .. })),
        "{:?}",
        pass.decision.actions
    );
}

/// A spec invalid though its schedule is fine (an unconfinable need query, a silence naming
/// another namespace, an alert gate's bad regexp): the Eru is Invalid, and its due slot is
/// skipped `spec_invalid` when due — not found past its deadline once the spec is fixed.
#[test]
fn a_spec_invalid_beside_its_schedule_skips_its_due_slots_as_spec_invalid() {
    let e = eru("*/5 * * * *", 1);
    let mut o = observed(&e, t(5, 1), Some(t(0, 0)));
    o.cluster.invalid = Some("spec.silence.matchers: namespace=\"b\" …".into());
    let decided = plan(o).take();
    let skipped: Vec<(DateTime<Utc>, DateTime<Utc>, Reason)> = (decided.records.iter())
        .filter_map(|r| match r {
            EruRecord::Slots(slots) => Some(slots.iter().map(|s| (s.first, s.last, s.reason))),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(skipped, [(t(5, 0), t(5, 0), Reason::SpecInvalid)]);
    assert!(
        !decided
            .actions
            .iter()
            .any(|a| matches!(a, EruAction::AskPlace { .. })),
        "{:?}",
        decided.actions
    );
}

mod reverts {
    //! A restart another field manager undid: during its rollout it fails, saying who; after, it
    //! is marked once; either way its slot keeps its one record.

    use super::*;
    use crate::eru::core::messages::Revert;

    fn replaced_by_argocd(at: DateTime<Utc>) -> TargetView {
        let mut view = target(Some(t(0, 0)));
        view.template_writer = Some(("argocd-controller".into(), at));
        view
    }

    fn reverted(records: &[EruRecord]) -> Option<(DateTime<Utc>, Revert)> {
        records.iter().find_map(|r| match r {
            EruRecord::Reverted { slot, revert, .. } => Some((*slot, revert.clone())),
            _ => None,
        })
    }

    #[test]
    fn a_rollout_whose_slot_left_the_template_fails_naming_the_writer() {
        let e = eru("*/5 * * * *", 1);
        // the patch landed at generation 2; the cache shows generation 3, without the slot
        let rolling = |view: TargetView| {
            let mut o = observed(&e, t(5, 30), Some(t(5, 0)));
            let mut restart = open((t(5, 0), "web", t(10, 0)), t(5, 0));
            restart.patched_at = Some(t(5, 1));
            restart.landed_generation = Some(2);
            o.journal.open_restart = Some(restart);
            o.cluster.targets.insert("web".into(), view);
            o
        };
        let at_generation = |generation: Option<i64>, written: DateTime<Utc>| TargetView {
            generation,
            ..replaced_by_argocd(written)
        };
        let decided = plan(rolling(at_generation(Some(3), t(5, 20)))).take();
        let finished = decided.records.iter().find_map(|r| match r {
            EruRecord::Finished { outcome, reason, .. } => Some((*outcome, reason.clone().unwrap())),
            _ => None,
        });
        let (outcome, reason) = finished.expect("the restart ends");
        assert_eq!(outcome, Outcome::Failed);
        assert!(
            reason.starts_with("reverted: ")
                && reason.contains("by argocd-controller at 2026-11-22T03:05:20Z"),
            "{reason}"
        );
        let (slot, revert) = reverted(&decided.records).unwrap();
        assert_eq!((slot, revert.by.as_deref()), (t(5, 0), Some("argocd-controller")));
        assert!(
            !decided.records.iter().any(|r| matches!(r, EruRecord::Slots(_))),
            "its slot keeps its one (fired) record: {:?}",
            decided.records
        );
        // a cache that has not seen the patch (its generation is older), though a writer's
        // whole-second time reads as the patch's own second: still rolling out
        for (generation, written) in [(Some(1), t(5, 1)), (Some(2), t(5, 20)), (None, t(5, 20))] {
            let decided = plan(rolling(at_generation(generation, written))).take();
            assert!(
                reverted(&decided.records).is_none(),
                "{generation:?}: {:?}",
                decided.records
            );
        }
    }

    /// At 03:07, the status (`phase`) shows the restart of 03:05 ended at 03:05:10, and the
    /// template no longer carries it: argocd-controller wrote it at 03:06.
    fn undone_at_6(phase: &str) -> Observed {
        let e = eru("*/5 * * * *", 1);
        let mut o = observed(&e, t(7, 0), Some(t(5, 0)));
        o.cluster.shown = Some(shown(&EruStatus {
            phase: Some(phase.into()),
            accounted_through: Some(t(5, 0)),
            last_restart: Some(last_restart(t(5, 0), Some(t(5, 10)))),
            ..EruStatus::default()
        }));
        o.cluster
            .targets
            .insert("web".into(), replaced_by_argocd(t(6, 0)));
        o
    }

    /// Not while a restart is in flight (a manual run's, here): it is told once that ended. (The
    /// machine's busy and starting states drop a `Reverted` event, so `Plan::reverted`'s guard
    /// only saves the look: its `||` → `&&` mutant is equivalent; docs/development.md.)
    #[test]
    fn a_revert_is_not_told_while_a_restart_is_in_flight() {
        use crate::eru::core::{observed::OpenRun, run::ManualRun};
        let mut o = undone_at_6("Restarting");
        o.journal.open_run = Some(OpenRun {
            run: ManualRun {
                token: "r".into(),
                requested_by: None,
                requested_at: t(6, 50),
                deadline: t(11, 50),
                target: "web".into(),
                attempts: 0,
                last_error: None,
                next_attempt_at: None,
            },
            patched_at: None,
        });
        let decided = plan(o).take();
        assert!(reverted(&decided.records).is_none(), "{:?}", decided.records);
    }

    #[test]
    fn an_ended_restart_undone_later_is_marked_once() {
        let mut o = undone_at_6("Waiting");
        let (slot, revert) = reverted(&plan(o.clone()).take().records).expect("marked");
        assert_eq!(
            (slot, revert.by.as_deref(), revert.carries),
            (t(5, 0), Some("argocd-controller"), Some(t(0, 0)))
        );
        // once the status shows it, not again
        let mut status = last_restart(t(5, 0), Some(t(5, 10)));
        status.reverted_by = Some("argocd-controller".into());
        status.reverted_at = Some(t(6, 30));
        o.cluster.shown = Some(shown(&EruStatus {
            phase: Some("Waiting".into()),
            accounted_through: Some(t(5, 0)),
            last_restart: Some(status),
            ..EruStatus::default()
        }));
        assert!(reverted(&plan(o).take().records).is_none());
    }
}

mod silences {
    //! The silence of a restart is expired when the restart ends, and only then.

    use super::*;

    fn silenced(o: &mut Observed, patched_at: Option<DateTime<Utc>>) {
        let mut restart = open((t(5, 0), "web", t(10, 0)), t(5, 0));
        restart.patched_at = patched_at;
        restart.silence = Some("s-1".into());
        o.journal.open_restart = Some(restart);
    }

    fn expires(actions: &[EruAction]) -> Vec<&EruAction> {
        actions
            .iter()
            .filter(|a| matches!(a, EruAction::ExpireSilence { .. }))
            .collect()
    }

    #[test]
    fn a_silence_is_expired_once_its_rollout_ends_not_before() {
        let e = eru("*/5 * * * *", 1);
        // rolled out: ended now, its silence expired once
        let mut o = observed(&e, t(6, 0), Some(t(5, 0)));
        silenced(&mut o, Some(t(5, 1)));
        o.cluster.targets.insert("web".into(), target(Some(t(5, 0))));
        let decided = plan(o).take();
        assert_eq!(
            expires(&decided.actions),
            [&EruAction::ExpireSilence {
                slot: t(5, 0),
                id: "s-1".into()
            }]
        );
        // still rolling out: kept
        let mut o = observed(&e, t(6, 0), Some(t(5, 0)));
        silenced(&mut o, Some(t(5, 1)));
        let mut view = target(Some(t(5, 0)));
        view.settled = false;
        o.cluster.targets.insert("web".into(), view);
        assert!(expires(&plan(o).take().actions).is_empty());
        // given up before it landed (past its deadline): expired too
        let mut o = observed(&e, t(9, 0), Some(t(5, 0)));
        silenced(&mut o, None);
        o.journal.open_restart.as_mut().unwrap().restart.deadline = t(8, 0);
        let decided = plan(o).take();
        assert!(
            decided
                .records
                .iter()
                .any(|r| matches!(r, EruRecord::GaveUp { .. }))
        );
        assert_eq!(expires(&decided.actions).len(), 1, "{:?}", decided.actions);
    }
}

mod run_edges {
    //! A manual run beside slots and other tokens: superseded only by a slot that starts,
    //! withdrawn when another token replaces it, refused at its deadline for the fleet's cap.

    use super::*;
    use crate::eru::core::{
        observed::{OpenRun, RunSeen, Shown},
        run::{Asked, ManualRun, RunRecord},
    };
    use crate::vocab::RunOutcome;

    fn run(token: &str) -> ManualRun {
        ManualRun {
            token: token.into(),
            requested_by: None,
            requested_at: t(4, 0),
            deadline: t(9, 0),
            target: "web".into(),
            attempts: 0,
            last_error: None,
            next_attempt_at: None,
        }
    }

    fn runs(records: &[EruRecord]) -> Vec<RunRecord> {
        (records.iter())
            .filter_map(|r| match r {
                EruRecord::Run(run) => Some(run.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_run_not_landed_is_superseded_only_by_a_slot_that_starts() {
        let e = eru("*/5 * * * *", 1);
        // the slot is skipped (a blackout): the run goes on
        let mut o = observed(&e, t(5, 1), Some(t(0, 0)));
        o.journal.open_run = Some(OpenRun {
            run: run("a"),
            patched_at: None,
        });
        let mut blacked = o.clone();
        let window = json!({"start": "2026-11-22T03:04:30Z", "end": "2026-11-22T03:05:30Z"});
        blacked.cluster.spec.blackouts = vec![serde_json::from_value(window).unwrap()];
        blacked.journal.epochs[0].spec.blackouts = blacked.cluster.spec.blackouts.clone();
        let mut p = plan(blacked);
        let decided = p.take();
        assert!(
            !runs(&decided.records)
                .iter()
                .any(|r| matches!(r, RunRecord::Ended { .. })),
            "{:?}",
            decided.records
        );
        assert!(
            decided
                .records
                .iter()
                .any(|r| matches!(r, EruRecord::Slots(s) if s[0].reason == Reason::Blackout)),
            "{:?}",
            decided.records
        );
        // the slot starts: the run is given up for it
        let mut p = plan(o);
        p.after(Fed::Place(Grant::Granted));
        let mut all = p.take().records;
        all.extend(p.take().records);
        assert!(
            runs(&all).iter().any(|r| matches!(r,
                RunRecord::Ended { outcome: RunOutcome::Abandoned, reason: Some(why), .. }
                if why.starts_with("superseded by slot 2026-11-22T03:05:00Z"))),
            "{all:?}"
        );
    }

    /// A slot that waits for a place in the fleet: the run the Eru asks for is not even seen in
    /// that pass (one request per pass; mutation: `||` → `&&` in `Plan::run_now`).
    #[test]
    fn a_run_is_not_asked_for_in_a_pass_whose_slot_waits_for_a_place() {
        let e = eru("7 3 * * *", 1);
        let mut o = observed(&e, t(7, 0) + Duration::milliseconds(3), Some(t(6, 0)));
        o.cluster.run = Some(Ok(Asked {
            token: "a".into(),
            requested_by: None,
            set_at: Some(t(6, 59)),
        }));
        let mut plan = plan(o);
        assert!(plan.state.asks_place().is_some(), "the slot of 03:07 asks");
        let first = plan.take();
        assert!(runs(&first.records).is_empty(), "{:?}", first.records);
        plan.after(Fed::Place(Grant::Queued {
            ahead: 0,
            in_flight: 1,
            paced: true,
        }));
        let after = plan.take();
        assert!(runs(&after.records).is_empty(), "{:?}", after.records);
        assert!(
            !(after.actions.iter()).any(|a| matches!(a, EruAction::AskPlace { .. })),
            "{:?}",
            after.actions
        );
    }

    /// At 03:07, run "old" waits (the status says so) and the Eru now asks for "new".
    pub(super) fn old_replaced_by_new() -> Observed {
        let e = eru("0 * * * *", 1);
        let mut o = observed(&e, t(7, 0), Some(t(0, 0)));
        o.cluster.shown = Some(Shown {
            phase: Some("Waiting".into()),
            waiting_run: Some("old".into()),
            ..Shown::default()
        });
        o.cluster.run = Some(Ok(Asked {
            token: "new".into(),
            requested_by: None,
            set_at: Some(t(6, 59)),
        }));
        o
    }

    #[test]
    fn a_waiting_run_another_token_replaced_is_refused_saying_so() {
        let mut o = old_replaced_by_new();
        let records = runs(&plan(o.clone()).take().records);
        assert!(
            records.contains(&RunRecord::Withdrawn {
                token: "old".into(),
                reason: "replaced by token \"new\" before it started".into()
            }),
            "{records:?}"
        );
        // the same token still asked: it waits on, nothing withdrawn (mutation: the guard
        // `asked.token == waiting` → false in `Plan::withdrawn`)
        o.cluster.run = Some(Ok(Asked {
            token: "old".into(),
            requested_by: None,
            set_at: Some(t(6, 0)),
        }));
        let records = runs(&plan(o.clone()).take().records);
        assert!(
            !(records.iter()).any(|r| matches!(r, RunRecord::Withdrawn { .. })),
            "{records:?}"
        );
        // the annotation removed
        o.cluster.run = None;
        let records = runs(&plan(o).take().records);
        assert_eq!(
            records,
            [RunRecord::Withdrawn {
                token: "old".into(),
                reason: "mtsre.meitu.com/run-now was removed before it started".into()
            }]
        );
    }

    #[test]
    fn a_run_that_never_got_a_place_is_refused_for_the_fleets_cap() {
        let e = eru("0 * * * *", 1);
        let mut o = observed(&e, t(9, 30), Some(t(0, 0)));
        o.cluster.run = Some(Ok(Asked {
            token: "a".into(),
            requested_by: None,
            set_at: Some(t(4, 0)),
        }));
        o.journal.run = Some(RunSeen::Waiting {
            run: run("a"),
            waited: None,
        });
        o.operator.queued = Some(t(4, 0));
        let records = runs(&plan(o).take().records);
        assert!(
            records.iter().any(|r| matches!(r,
                RunRecord::Ended { outcome: RunOutcome::Refused, reason: Some(why), .. }
                if why.contains("fleet_capacity"))),
            "{records:?}"
        );
    }
}

mod order;
mod pauses;
