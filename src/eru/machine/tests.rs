//! Unit tests of the Eru machine: every transition, record and action.

use chrono::TimeZone;

use super::*;
use crate::machine::{dispatch, step};

fn t(m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, 3, m, 0).unwrap()
}

fn due(slot: DateTime<Utc>, gate: Gate) -> EruEvent {
    EruEvent::SlotsDue(SlotsDue {
        records: vec![],
        due: Some(slot),
        gate,
        template_slot: None,
    })
}

#[test]
fn a_due_slot_restarts_then_rolls_out_then_succeeds() {
    let (state, decision) = dispatch(EruMachine, State::Waiting {}, &due(t(1), Gate::Open));
    assert_eq!(state, State::Restarting { slot: t(1) });
    assert_eq!(decision.records, vec![EruRecord::Fired { slot: t(1) }]);
    assert_eq!(decision.actions, vec![EruAction::PatchRestart { slot: t(1) }]);
    assert_eq!(decision.transitions[0].event, "SlotDue");

    let mut decision = Decision::default();
    let state = step(EruMachine, state, &EruEvent::RestartPatched, &mut decision);
    assert_eq!(state, State::RollingOut { slot: t(1) });
    let state = step(EruMachine, state, &EruEvent::RolloutProgressed, &mut decision);
    assert_eq!(state, State::RollingOut { slot: t(1) });
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
        vec![EruRecord::Finished {
            slot: t(1),
            outcome: RestartOutcome::Succeeded,
            finished_at: Some(t(2)),
            reason: None
        }]
    );
    assert!(decision.actions.is_empty());
}

#[test]
fn an_already_patched_slot_is_never_patched_again() {
    let event = EruEvent::SlotsDue(SlotsDue {
        records: vec![],
        due: Some(t(1)),
        gate: Gate::Open,
        template_slot: Some(t(1)),
    });
    let (state, decision) = dispatch(EruMachine, State::Waiting {}, &event);
    assert_eq!(state, State::RollingOut { slot: t(1) });
    assert_eq!(decision.records, vec![EruRecord::Fired { slot: t(1) }]);
    assert!(decision.actions.is_empty(), "no patch");
}

#[test]
fn restarting_repatches_until_the_template_carries_the_slot() {
    let (state, decision) = dispatch(
        EruMachine,
        State::Restarting { slot: t(1) },
        &EruEvent::RestartPending,
    );
    assert_eq!(state, State::Restarting { slot: t(1) });
    assert_eq!(decision.actions, vec![EruAction::PatchRestart { slot: t(1) }]);
    assert!(decision.records.is_empty());
}

#[test]
fn gates_skip_with_their_reason() {
    for (gate, reason) in [
        (Gate::Paused, Reason::TargetPaused),
        (Gate::Unhealthy, Reason::TargetUnhealthy),
        (Gate::Missing, Reason::TargetMissing),
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
    let (state, decision) = dispatch(
        EruMachine,
        State::RollingOut { slot: t(1) },
        &due(t(2), Gate::Open),
    );
    assert_eq!(state, State::RollingOut { slot: t(1) });
    assert_eq!(
        decision.records,
        vec![EruRecord::Slots(vec![skipped(t(2), Reason::ConcurrentRollout)])]
    );
}

#[test]
fn failure_still_returns_to_waiting() {
    let failed = EruEvent::RolloutFailed {
        finished_at: t(9),
        reason: "ProgressDeadlineExceeded".into(),
    };
    let (state, decision) = dispatch(EruMachine, State::RollingOut { slot: t(1) }, &failed);
    assert_eq!(state, State::Waiting {});
    assert!(matches!(
        decision.records[0],
        EruRecord::Finished {
            outcome: RestartOutcome::Failed,
            ..
        }
    ));
}

#[test]
fn invalid_spec_abandons_a_restart_and_recovers() {
    let bad = EruEvent::SpecInvalid {
        reason: "61 is not a minute".into(),
    };
    let (state, decision) = dispatch(EruMachine, State::RollingOut { slot: t(1) }, &bad);
    assert_eq!(state, State::Invalid {});
    assert!(matches!(
        decision.records[0],
        EruRecord::Finished {
            outcome: RestartOutcome::Abandoned,
            ..
        }
    ));
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
fn restore_prefers_the_journal_for_an_open_restart() {
    assert_eq!(
        restore(Some("RollingOut"), Some(t(1)), Some(t(1))),
        State::RollingOut { slot: t(1) }
    );
    assert_eq!(
        restore(Some("Waiting"), None, Some(t(2))),
        State::Restarting { slot: t(2) }
    );
    assert_eq!(
        restore(Some("RollingOut"), Some(t(1)), None),
        State::RollingOut { slot: t(1) }
    );
    assert_eq!(restore(Some("Suspended"), None, None), State::Suspended {});
    assert_eq!(restore(None, None, None), State::Waiting {});
    assert_eq!(
        restore(Some("TargetMissing"), None, None),
        State::TargetMissing {}
    );
}
