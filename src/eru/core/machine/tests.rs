//! Unit tests of the Eru machine: every transition, record and action.

use chrono::{Duration, TimeZone};

use super::*;
use crate::{
    eru::core::messages::{Gate, Pending, Template},
    machine::{Decision, step},
};

/// Dispatches `event` from `state`; a due slot that asks for a place is given one (the fleet is
/// not capped), as one pass does.
fn dispatch(machine: EruMachine, state: State, event: &EruEvent) -> (State, EruDecision) {
    let (state, mut decision) = crate::machine::dispatch(machine, state, event);
    if state.asks_place().is_none() {
        return (state, decision);
    }
    let state = step(
        EruMachine,
        state,
        &EruEvent::Place { granted: true },
        &mut decision,
    );
    (state, decision)
}

fn rolling(slot: DateTime<Utc>, patched_at: DateTime<Utc>) -> State {
    State::RollingOut {
        rollout: Rollout {
            cause: Cause::Slot(slot),
            target: "web".into(),
            patched_at,
            landed_generation: None,
        },
    }
}

fn t(m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, 3, m, 0).unwrap()
}

fn due_at(slot: DateTime<Utc>) -> Due {
    Due {
        slot,
        deadline: slot + Duration::minutes(5),
        target: "web".into(),
        dry_run: false,
    }
}

fn slots(slot: DateTime<Utc>, gate: Gate) -> SlotsDue {
    SlotsDue {
        records: vec![],
        due: Some(due_at(slot)),
        gate,
        gate_note: None,
        template: None,
        journal_outages: Vec::new(),
        health: crate::eru::core::hold::Answer::Open,
        earlier_hold: None,
        need: Default::default(),
        paused: None,
        now: slot,
    }
}

fn due(slot: DateTime<Utc>, gate: Gate) -> EruEvent {
    EruEvent::SlotsDue(slots(slot, gate))
}

fn skipped(slot: DateTime<Utc>, reason: Reason) -> SlotRecord {
    SlotRecord::one(slot, reason, None, "web")
}

fn restarting(slot: DateTime<Utc>) -> State {
    State::Restarting {
        restart: Restart::decided(&due_at(slot)),
    }
}

fn pending(now: DateTime<Utc>) -> Pending {
    Pending {
        now,
        blocked: None,
        note: None,
        retry_due: true,
        downtime: None,
        journal_outage: None,
    }
}

fn failed(message: &str, at: DateTime<Utc>) -> EruEvent {
    EruEvent::PatchFailed {
        message: message.into(),
        at,
        retry_at: at + Duration::seconds(2),
    }
}

#[test]
fn a_due_slot_is_decided_then_patched_then_rolls_out_then_succeeds() {
    let (state, decision) = dispatch(EruMachine, State::Waiting {}, &due(t(1), Gate::Open));
    assert_eq!(state, restarting(t(1)));
    assert_eq!(
        decision.records,
        vec![EruRecord::Decided {
            slot: t(1),
            deadline: t(6),
            target: "web".into()
        }]
    );
    assert_eq!(
        decision.actions,
        [EruAction::AskPlace {
            slot: t(1),
            deadline: t(6)
        }],
        "a place is asked for; the patch is RestartPending's to send"
    );
    assert_eq!(decision.transitions[0].event, "SlotDue");

    let mut decision = Decision::default();
    let state = step(
        EruMachine,
        state,
        &EruEvent::RestartPending(pending(t(1))),
        &mut decision,
    );
    assert_eq!(
        decision.actions,
        vec![EruAction::PatchRestart {
            slot: t(1),
            target: "web".into()
        }]
    );
    let state = step(
        EruMachine,
        state,
        &EruEvent::RestartPatched {
            at: t(1),
            generation: None,
        },
        &mut decision,
    );
    assert_eq!(state, rolling(t(1), t(1)));
    let state = step(EruMachine, state, &EruEvent::RolloutProgressed, &mut decision);
    let state = step(
        EruMachine,
        state,
        &EruEvent::RolloutDone { finished_at: t(2) },
        &mut decision,
    );
    assert_eq!(state, State::Waiting {});
    let phases: Vec<_> = decision
        .transitions
        .iter()
        .map(|t| (t.from, t.to, t.event))
        .collect();
    assert_eq!(
        phases,
        [
            ("Restarting", "RollingOut", "RestartPatched"),
            ("RollingOut", "Waiting", "RolloutDone")
        ]
    );
    assert_eq!(
        decision.records,
        vec![
            EruRecord::Patched {
                slot: t(1),
                at: t(1),
                target: "web".into(),
                generation: None
            },
            EruRecord::Finished {
                slot: t(1),
                patched_at: t(1),
                outcome: crate::vocab::Outcome::Succeeded,
                finished_at: Some(t(2)),
                reason: None
            }
        ]
    );
}

#[test]
fn an_already_landed_slot_is_never_patched_again() {
    let mut event = slots(t(1), Gate::Open);
    event.template = Some(Template {
        slot: t(1),
        landed_at: t(1) + Duration::milliseconds(40),
        generation: None,
    });
    let (state, decision) = dispatch(EruMachine, State::Waiting {}, &EruEvent::SlotsDue(event));
    assert_eq!(state, rolling(t(1), t(1) + Duration::milliseconds(40)));
    assert!(
        matches!(decision.records[1], EruRecord::Patched { at, .. } if at == t(1) + Duration::milliseconds(40))
    );
    assert!(decision.actions.is_empty(), "no patch");
}

#[test]
fn a_failed_patch_backs_off_and_is_retried_only_when_due() {
    let mut decision = Decision::default();
    let state = step(
        EruMachine,
        restarting(t(1)),
        &failed("denied by policy", t(1)),
        &mut decision,
    );
    let State::Restarting { restart } = &state else {
        panic!("{state:?}")
    };
    assert_eq!(
        (restart.attempts, restart.last_error.as_deref()),
        (1, Some("denied by policy"))
    );
    assert!(matches!(&decision.records[0], EruRecord::Attempt { error, .. } if error == "denied by policy"));
    assert!(decision.transitions.is_empty(), "still Restarting");

    let waiting = Pending {
        retry_due: false,
        ..pending(t(2))
    };
    let (state, decision) = dispatch(EruMachine, state, &EruEvent::RestartPending(waiting));
    assert!(decision.actions.is_empty(), "within the backoff: no patch");
    let (_, decision) = dispatch(EruMachine, state, &EruEvent::RestartPending(pending(t(3))));
    assert_eq!(decision.actions.len(), 1, "the backoff is over: patch again");
}

#[test]
fn a_patch_that_never_lands_is_given_up_at_the_deadline_as_patch_failed() {
    let (state, _) = dispatch(EruMachine, restarting(t(1)), &failed("webhook denied", t(1)));
    let late = pending(t(6) + Duration::seconds(1));
    let (state, decision) = dispatch(EruMachine, state, &EruEvent::RestartPending(late));
    assert_eq!(state, State::Waiting {});
    assert!(decision.actions.is_empty(), "never patched after the deadline");
    let EruRecord::GaveUp { slot, reason, record } = &decision.records[0] else {
        panic!("{:?}", decision.records)
    };
    assert_eq!(*slot, t(1));
    assert_eq!(record.reason, Reason::PatchFailed);
    assert!(
        reason.starts_with("patch_failed: the restart patch did not land by 2026-11-22T03:06:00Z"),
        "{reason}"
    );
    assert!(
        reason.ends_with("last error (1 failed patch): webhook denied"),
        "{reason}"
    );
}

#[test]
fn a_restart_never_attempted_before_the_deadline_is_operator_down_or_past_deadline() {
    let window = (t(1), t(8));
    let down = Pending {
        downtime: Some(window),
        ..pending(t(8))
    };
    let (_, decision) = dispatch(EruMachine, restarting(t(1)), &EruEvent::RestartPending(down));
    let EruRecord::GaveUp { record, .. } = &decision.records[0] else {
        panic!()
    };
    assert_eq!(
        (record.reason, record.window),
        (Reason::OperatorDown, Some(window))
    );
    let (_, decision) = dispatch(
        EruMachine,
        restarting(t(1)),
        &EruEvent::RestartPending(pending(t(8))),
    );
    let EruRecord::GaveUp { record, .. } = &decision.records[0] else {
        panic!()
    };
    assert_eq!(record.reason, Reason::PastDeadline);
}

#[test]
fn a_restart_whose_deadline_passed_in_a_journal_outage_is_journal_unavailable() {
    let outage = (t(2), t(7));
    let gave_up = |pending: Pending, state: State| {
        let (state, decision) = dispatch(EruMachine, state, &EruEvent::RestartPending(pending));
        assert_eq!(state, State::Waiting {});
        let EruRecord::GaveUp { record, reason, .. } = &decision.records[0] else {
            panic!("{decision:?}")
        };
        (record.reason, record.window, reason.clone())
    };
    let (reason, window, text) = gave_up(
        Pending {
            journal_outage: Some(outage),
            ..pending(t(8))
        },
        restarting(t(1)),
    );
    assert_eq!((reason, window), (Reason::JournalUnavailable, Some(outage)));
    assert_eq!(
        text,
        "journal_unavailable: the journal took no writes from 2026-11-22T03:02:00.000Z to \
         2026-11-22T03:07:00.000Z; the restart patch did not land by 2026-11-22T03:06:00Z \
         (startingDeadlineSeconds)"
    );
    // no operator at all comes first; patches the API refused say so
    let down = (t(4), t(9));
    let (reason, window, _) = gave_up(
        Pending {
            downtime: Some(down),
            journal_outage: Some(outage),
            ..pending(t(9))
        },
        restarting(t(1)),
    );
    assert_eq!((reason, window), (Reason::OperatorDown, Some(down)));
    let attempted = State::Restarting {
        restart: Restart {
            attempts: 2,
            last_error: Some("denied".into()),
            ..Restart::decided(&due_at(t(1)))
        },
    };
    let (reason, ..) = gave_up(
        Pending {
            journal_outage: Some(outage),
            ..pending(t(8))
        },
        attempted,
    );
    assert_eq!(reason, Reason::PatchFailed);
    // an outage before the deadline, over by then: the restart could not go on either
    let (reason, window, _) = gave_up(
        Pending {
            journal_outage: Some((t(2), t(3))),
            ..pending(t(8))
        },
        restarting(t(1)),
    );
    assert_eq!((reason, window), (Reason::JournalUnavailable, Some((t(2), t(3)))));
}

#[test]
fn a_restart_a_journal_outage_kept_from_landing_is_not_superseded() {
    let outage = (t(1), t(3));
    let newer = SlotsDue {
        journal_outages: vec![outage],
        ..slots(t(4), Gate::Open)
    };
    let (state, decision) = dispatch(EruMachine, restarting(t(1)), &EruEvent::SlotsDue(newer));
    assert!(matches!(state, State::Restarting { ref restart } if restart.slot() == Some(t(4))));
    let EruRecord::GaveUp { record, reason, .. } = &decision.records[0] else {
        panic!("{decision:?}")
    };
    assert_eq!(
        (record.first, record.reason, record.window),
        (t(1), Reason::JournalUnavailable, Some(outage))
    );
    assert!(
        reason.contains("superseded by slot 2026-11-22T03:04:00Z"),
        "{reason}"
    );
    // an outage after the newer slot came due does not explain it
    let later = SlotsDue {
        journal_outages: vec![(t(4), t(6))],
        ..slots(t(4), Gate::Open)
    };
    let (_, decision) = dispatch(EruMachine, restarting(t(1)), &EruEvent::SlotsDue(later));
    let EruRecord::GaveUp { record, .. } = &decision.records[0] else {
        panic!("{decision:?}")
    };
    assert_eq!(record.reason, Reason::Superseded);
}

#[test]
fn a_closed_gate_gives_up_an_unlanded_restart_with_its_reason() {
    for reason in [
        Reason::Suspended,
        Reason::SpecInvalid,
        Reason::TargetPaused,
        Reason::TargetUnhealthy,
        Reason::TargetMissing,
    ] {
        let blocked = Pending {
            blocked: Some(reason),
            ..pending(t(2))
        };
        let (state, decision) = dispatch(EruMachine, restarting(t(1)), &EruEvent::RestartPending(blocked));
        assert_eq!(state, State::Waiting {});
        assert!(decision.actions.is_empty());
        let EruRecord::GaveUp {
            record, reason: text, ..
        } = &decision.records[0]
        else {
            panic!()
        };
        assert_eq!(record.reason, reason);
        assert_eq!(record.reason.result(), crate::journal::SlotResult::Skipped);
        assert!(text.starts_with(reason.as_str()), "{text}");
    }
}

#[test]
fn a_target_that_is_not_rollable_skips_the_slot_with_why() {
    let note = "StatefulSet web uses updateStrategy OnDelete: a pod-template change rolls no pod";
    let mut slots = slots(t(1), Gate::NotRollable);
    slots.gate_note = Some(note.into());
    let (state, decision) = dispatch(EruMachine, State::Waiting {}, &EruEvent::SlotsDue(slots));
    assert_eq!(state, State::Waiting {});
    assert!(decision.actions.is_empty(), "never patched");
    assert_eq!(
        decision.records,
        vec![EruRecord::Slots(vec![
            skipped(t(1), Reason::TargetNotRollable).noted(note)
        ])]
    );
    assert_eq!(
        Reason::TargetNotRollable.result(),
        crate::journal::SlotResult::Skipped
    );

    // a restart decided but not landed is given up the same way, the note in its record
    let blocked = Pending {
        blocked: Some(Reason::TargetNotRollable),
        note: Some(note.into()),
        ..pending(t(2))
    };
    let (state, decision) = dispatch(EruMachine, restarting(t(1)), &EruEvent::RestartPending(blocked));
    assert_eq!(state, State::Waiting {});
    assert!(decision.actions.is_empty());
    let EruRecord::GaveUp {
        record, reason: text, ..
    } = &decision.records[0]
    else {
        panic!("{:?}", decision.records)
    };
    assert_eq!(*record, skipped(t(1), Reason::TargetNotRollable).noted(note));
    assert!(
        text.starts_with("target_not_rollable: the target became not rollable before the patch landed")
            && text.contains(note),
        "{text}"
    );
}

#[test]
fn a_newer_due_slot_supersedes_an_unlanded_restart() {
    let (state, _) = dispatch(EruMachine, restarting(t(1)), &failed("API unavailable", t(1)));
    let (state, decision) = dispatch(EruMachine, state, &due(t(2), Gate::Open));
    assert_eq!(state, restarting(t(2)), "the newer slot starts afresh");
    let EruRecord::GaveUp { slot, reason, record } = &decision.records[0] else {
        panic!()
    };
    assert_eq!((*slot, record.reason), (t(1), Reason::PatchFailed));
    assert!(
        reason.contains("superseded by slot 2026-11-22T03:02:00Z"),
        "{reason}"
    );
    assert!(matches!(decision.records[1], EruRecord::Decided { slot, .. } if slot == t(2)));

    // superseded by a slot whose gate is closed: the old one is given up, the new one skipped
    let (state, decision) = dispatch(EruMachine, restarting(t(1)), &due(t(2), Gate::Paused));
    assert_eq!(state, State::Waiting {});
    let EruRecord::GaveUp { record, .. } = &decision.records[0] else {
        panic!()
    };
    assert_eq!(record.reason, Reason::Superseded, "never attempted: superseded");
    assert_eq!(
        decision.records[1],
        EruRecord::Slots(vec![skipped(t(2), Reason::TargetPaused)])
    );
}

#[test]
fn gates_skip_with_their_reason() {
    for (gate, reason) in [
        (Gate::Paused, Reason::TargetPaused),
        (Gate::Unhealthy, Reason::TargetUnhealthy),
        (Gate::Missing, Reason::TargetMissing),
        (Gate::NotRollable, Reason::TargetNotRollable),
    ] {
        let (state, decision) = dispatch(EruMachine, State::Waiting {}, &due(t(1), gate));
        assert_eq!(state, State::Waiting {});
        assert_eq!(
            decision.records,
            vec![EruRecord::Slots(vec![skipped(t(1), reason)])]
        );
        assert!(decision.actions.is_empty());
    }
}

#[test]
fn slots_during_a_rollout_are_concurrent_rollout() {
    let (state, decision) = dispatch(EruMachine, rolling(t(1), t(1)), &due(t(2), Gate::Open));
    assert_eq!(state, rolling(t(1), t(1)));
    assert_eq!(
        decision.records,
        vec![EruRecord::Slots(vec![skipped(t(2), Reason::ConcurrentRollout)])]
    );
}

#[test]
fn failure_and_a_vanished_target_end_the_rollout() {
    let failed = EruEvent::RolloutFailed {
        finished_at: t(9),
        reason: "ProgressDeadlineExceeded".into(),
    };
    let (state, decision) = dispatch(EruMachine, rolling(t(1), t(1)), &failed);
    assert_eq!(state, State::Waiting {});
    assert!(matches!(
        decision.records[0],
        EruRecord::Finished {
            outcome: crate::vocab::Outcome::Failed,
            ..
        }
    ));
    let (state, decision) = dispatch(EruMachine, rolling(t(1), t(1)), &EruEvent::TargetGone);
    assert_eq!(state, State::Waiting {});
    assert!(matches!(
        decision.records[0],
        EruRecord::Finished {
            outcome: crate::vocab::Outcome::Abandoned,
            ..
        }
    ));
}

#[test]
fn spec_changes_wait_for_a_restart_in_flight() {
    let bad = EruEvent::SpecInvalid {
        reason: "61 is not a minute".into(),
    };
    for busy in [rolling(t(1), t(1)), restarting(t(1))] {
        for event in [
            bad.clone(),
            EruEvent::TargetMissing,
            EruEvent::SpecReady { suspend: true },
        ] {
            let (state, decision) = dispatch(EruMachine, busy.clone(), &event);
            assert_eq!(state, busy, "{event:?}");
            assert!(decision.records.is_empty() && decision.actions.is_empty());
        }
    }
}

#[test]
fn invalid_spec_is_reported_once_and_recovers() {
    let bad = EruEvent::SpecInvalid {
        reason: "61 is not a minute".into(),
    };
    let (state, decision) = dispatch(EruMachine, State::Waiting {}, &bad);
    assert_eq!(state, State::Invalid {});
    assert_eq!(
        decision.actions,
        vec![EruAction::ReportInvalid {
            reason: "61 is not a minute".into()
        }]
    );
    let (state, decision) = dispatch(EruMachine, State::Invalid {}, &bad);
    assert_eq!(state, State::Invalid {});
    assert!(
        decision.actions.is_empty() && decision.records.is_empty(),
        "an unchanged invalid spec is reported once"
    );
    // a slot of an earlier, valid epoch that comes due now is skipped: the spec is invalid now
    let (_, decision) = dispatch(EruMachine, State::Invalid {}, &due(t(1), Gate::Open));
    assert_eq!(
        decision.records,
        vec![EruRecord::Slots(vec![skipped(t(1), Reason::SpecInvalid)])]
    );
    let (state, _) = dispatch(
        EruMachine,
        State::Invalid {},
        &EruEvent::SpecReady { suspend: false },
    );
    assert_eq!(state, State::Waiting {});
}

#[test]
fn target_missing_and_found() {
    let (state, decision) = dispatch(EruMachine, State::Waiting {}, &EruEvent::TargetMissing);
    assert_eq!(state, State::TargetMissing {});
    assert_eq!(decision.actions, vec![EruAction::ReportTargetMissing]);
    let (state, decision) = dispatch(EruMachine, state, &due(t(1), Gate::Missing));
    assert_eq!(state, State::TargetMissing {});
    assert_eq!(
        decision.records,
        vec![EruRecord::Slots(vec![skipped(t(1), Reason::TargetMissing)])]
    );
    let (state, _) = dispatch(EruMachine, state, &EruEvent::SpecReady { suspend: false });
    assert_eq!(state, State::Waiting {});
}

#[test]
fn suspended_skips_and_resumes() {
    let (state, _) = dispatch(
        EruMachine,
        State::Waiting {},
        &EruEvent::SpecReady { suspend: true },
    );
    assert_eq!(state, State::Suspended {});
    let (state, decision) = dispatch(EruMachine, state, &due(t(1), Gate::Open));
    assert_eq!(state, State::Suspended {});
    assert_eq!(
        decision.records,
        vec![EruRecord::Slots(vec![skipped(t(1), Reason::Suspended)])]
    );
    let (state, _) = dispatch(EruMachine, state, &EruEvent::SpecReady { suspend: false });
    assert_eq!(state, State::Waiting {});
}

#[test]
fn restore_takes_a_restart_in_flight_from_the_journal_only() {
    let pending = Restart::decided(&due_at(t(2)));
    assert_eq!(
        restore(Some("Waiting"), Some(InFlight::Pending(pending.clone()))),
        State::Restarting { restart: pending }
    );
    assert_eq!(
        restore(
            Some("Restarting"),
            Some(InFlight::Landed(Rollout {
                cause: Cause::Slot(t(1)),
                target: "web".into(),
                patched_at: t(1),
                landed_generation: None
            }))
        ),
        rolling(t(1), t(1))
    );
    assert_eq!(
        restore(Some("RollingOut"), None),
        State::Waiting {},
        "a status from a lost journal does not make a restart in flight"
    );
    assert_eq!(restore(Some("Suspended"), None), State::Suspended {});
    assert_eq!(restore(None, None), State::Waiting {});
    assert_eq!(restore(Some("TargetMissing"), None), State::TargetMissing {});
}

#[test]
fn a_dry_run_slot_is_journaled_not_decided_for_a_patch() {
    let mut slots = slots(t(1), Gate::Open);
    slots.due.as_mut().unwrap().dry_run = true;
    let (state, decision) = dispatch(EruMachine, State::Waiting {}, &EruEvent::SlotsDue(slots));
    assert_eq!(state, State::Waiting {}, "nothing in flight");
    assert!(decision.actions.is_empty(), "nothing to patch");
    assert!(matches!(
        decision.records.as_slice(),
        [EruRecord::DryRun { slot, patch, .. }]
            if *slot == t(1) && patch.contains("mtsre.meitu.com/restartedAt=2026-11-22T03:01:00Z")
    ));
    // a closed gate says what would have stopped the restart, dry or not
    let mut closed = self::slots(t(1), Gate::Paused);
    closed.due.as_mut().unwrap().dry_run = true;
    let (_, decision) = dispatch(EruMachine, State::Waiting {}, &EruEvent::SlotsDue(closed));
    assert_eq!(
        decision.records,
        vec![EruRecord::Slots(vec![skipped(t(1), Reason::TargetPaused)])]
    );
}

#[test]
fn without_a_place_the_due_slot_waits_unaccounted() {
    let slots = slots(t(1), Gate::Open);
    let (state, mut decision) =
        crate::machine::dispatch(EruMachine, State::Waiting {}, &EruEvent::SlotsDue(slots));
    assert_eq!(state.asks_place(), Some((t(1), t(6))), "it asks the fleet");
    let state = step(
        EruMachine,
        state,
        &EruEvent::Place { granted: false },
        &mut decision,
    );
    assert_eq!(state, State::Waiting {});
    assert!(decision.records.is_empty());
    assert_eq!(
        decision.actions,
        [EruAction::AskPlace {
            slot: t(1),
            deadline: t(6)
        }],
        "only the question"
    );
    assert!(decision.transitions.is_empty(), "it never left Waiting");
}

/// A need condition is asked last: a slot it says is not needed is skipped with its evidence
/// (a dry run too), never patched; a closed target gate or a health gate's hold comes first; an
/// unknown answer with `onUnknown: Skip` is `need_unknown`, never `not_needed`.
#[test]
fn a_slot_not_needed_is_skipped_with_the_evidence_after_every_other_reason() {
    use crate::eru::core::{hold::Answer, need::Need};
    let evidence = "every pod of Deployment/web is younger than 3600 s (minPodAgeSeconds): …";
    let with = |gate: Gate, need: Need| {
        let mut slots = slots(t(1), gate);
        slots.need = Box::new(need);
        EruEvent::SlotsDue(slots)
    };
    let not_needed = || Need::NotNeeded(evidence.into());
    let (state, decision) = dispatch(EruMachine, State::Waiting {}, &with(Gate::Open, not_needed()));
    assert_eq!(state, State::Waiting {});
    assert!(decision.actions.is_empty(), "no place asked, nothing patched");
    assert_eq!(
        decision.records,
        vec![EruRecord::Slots(vec![
            skipped(t(1), Reason::NotNeeded).noted(evidence)
        ])]
    );
    let (_, decision) = dispatch(
        EruMachine,
        State::Waiting {},
        &with(Gate::Open, Need::Unknown("reading the pods failed".into())),
    );
    assert_eq!(
        decision.records,
        vec![EruRecord::Slots(vec![
            skipped(t(1), Reason::NeedUnknown).noted("reading the pods failed")
        ])]
    );
    // a paused target says why first
    let (_, decision) = dispatch(EruMachine, State::Waiting {}, &with(Gate::Paused, not_needed()));
    assert_eq!(
        decision.records,
        vec![EruRecord::Slots(vec![skipped(t(1), Reason::TargetPaused)])]
    );
    // a health gate holds it first (the need is asked again once the gates open)
    let mut held = slots(t(1), Gate::Open);
    held.health = Answer::Closed {
        reason: Reason::BlockingPods,
        note: "migrate runs".into(),
    };
    held.need = Box::new(not_needed());
    let (_, decision) = dispatch(EruMachine, State::Waiting {}, &EruEvent::SlotsDue(held));
    assert!(decision.records.is_empty(), "{:?}", decision.records);
    assert!(
        matches!(decision.actions[..], [EruAction::Hold(_)]),
        "{:?}",
        decision.actions
    );
    // a dry run that would not help is not_needed, not dry_run
    let mut dry = slots(t(1), Gate::Open);
    dry.due.as_mut().unwrap().dry_run = true;
    dry.need = Box::new(not_needed());
    let (_, decision) = dispatch(EruMachine, State::Waiting {}, &EruEvent::SlotsDue(dry));
    assert_eq!(
        decision.records,
        vec![EruRecord::Slots(vec![
            skipped(t(1), Reason::NotNeeded).noted(evidence)
        ])]
    );
}
