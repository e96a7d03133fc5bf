//! The Eru state machine. Pure: handlers decide, the reconciler journals and acts.
//!
//! ```text
//!            SlotsDue (gate open)          RestartPatched              RolloutDone / RolloutFailed
//!  Waiting ───────────────────────▶ Restarting{slot} ─────────▶ RollingOut{slot} ───────────────▶ Waiting
//!     ▲ │ SpecReady{suspend}                                        │ SlotsDue: skipped concurrent_rollout
//!     │ ▼                                                           │
//!  Suspended          Invalid ◀── SpecInvalid (from anywhere)      TargetMissing ◀── TargetMissing
//! ```
//! A restart in flight when the spec turns invalid or the target disappears ends `abandoned`.

use chrono::{DateTime, Utc};
use statig::prelude::*;

use super::accounting::{Reason, SlotRecord};
use crate::machine::{Decision, EventName, Phase};

/// Whether the target may be restarted now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    Open,
    Paused,
    Unhealthy,
    Missing,
}

/// Slots that came due since the last pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotsDue {
    /// Missed or skipped slots (accounted, not restartable).
    pub records: Vec<SlotRecord>,
    /// The slot to restart now, if any.
    pub due: Option<DateTime<Utc>>,
    pub gate: Gate,
    /// The slot the target's pod template already carries (a restart patched earlier).
    pub template_slot: Option<DateTime<Utc>>,
}

/// Events of an Eru, derived by the reconciler from what it observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EruEvent {
    /// The schedule or time zone does not parse.
    SpecInvalid {
        reason: String,
    },
    /// The target Deployment does not exist.
    TargetMissing,
    /// The spec is valid and the target exists.
    SpecReady {
        suspend: bool,
    },
    SlotsDue(SlotsDue),
    /// The target's template does not carry the slot being restarted yet: (re)patch it.
    RestartPending,
    /// The target's template carries the slot.
    RestartPatched,
    RolloutProgressed,
    RolloutDone {
        finished_at: DateTime<Utc>,
    },
    RolloutFailed {
        finished_at: DateTime<Utc>,
        reason: String,
    },
}

impl EventName for EruEvent {
    fn name(&self) -> &'static str {
        match self {
            EruEvent::SpecInvalid { .. } => "SpecInvalid",
            EruEvent::TargetMissing => "TargetMissing",
            EruEvent::SpecReady { .. } => "SpecReady",
            EruEvent::SlotsDue(_) => "SlotDue",
            EruEvent::RestartPending => "RestartPending",
            EruEvent::RestartPatched => "RestartPatched",
            EruEvent::RolloutProgressed => "RolloutProgressed",
            EruEvent::RolloutDone { .. } => "RolloutDone",
            EruEvent::RolloutFailed { .. } => "RolloutFailed",
        }
    }
}

/// How a restart ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestartOutcome {
    Succeeded,
    Failed,
    Abandoned,
}

impl RestartOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            RestartOutcome::Succeeded => "succeeded",
            RestartOutcome::Failed => "failed",
            RestartOutcome::Abandoned => "abandoned",
        }
    }
}

/// What the reconciler is asked to do. Records are journaled before anything is acted on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EruCommand {
    /// Journal missed or skipped slots.
    RecordSlots(Vec<SlotRecord>),
    /// Journal a slot as fired and its restart as started.
    RecordFired {
        slot: DateTime<Utc>,
    },
    /// Set the slot on the target's pod template (idempotent: keyed by the slot).
    PatchRestart {
        slot: DateTime<Utc>,
    },
    /// Journal the end of a restart, and tell the user.
    FinishRestart {
        slot: DateTime<Utc>,
        outcome: RestartOutcome,
        finished_at: Option<DateTime<Utc>>,
        reason: Option<String>,
    },
    ReportInvalid {
        reason: String,
    },
    ReportTargetMissing,
}

/// The Eru machine.
#[derive(Default)]
pub struct EruMachine;

/// A skipped record for one slot.
fn skipped(slot: DateTime<Utc>, reason: Reason) -> SlotRecord {
    SlotRecord {
        first: slot,
        last: slot,
        count: 1,
        reason,
        window: None,
    }
}

#[state_machine(
    initial = "State::waiting()",
    state(derive(Debug, Clone, PartialEq, Eq)),
    after_transition = "Self::after_transition"
)]
impl EruMachine {
    /// Waiting for the next slot.
    #[state(superstate = "idle")]
    fn waiting(event: &EruEvent, context: &mut Decision<EruCommand>) -> Outcome<State> {
        match event {
            EruEvent::SpecReady { suspend: true } => Transition(State::suspended()),
            EruEvent::SlotsDue(due) => {
                if !due.records.is_empty() {
                    context.command(EruCommand::RecordSlots(due.records.clone()));
                }
                let Some(slot) = due.due else { return Handled };
                if due.template_slot == Some(slot) {
                    // patched before a crash, or by another replica: never patch twice
                    context.command(EruCommand::RecordFired { slot });
                    return Transition(State::rolling_out(slot));
                }
                match due.gate {
                    Gate::Open => {
                        context.command(EruCommand::RecordFired { slot });
                        context.command(EruCommand::PatchRestart { slot });
                        Transition(State::restarting(slot))
                    }
                    Gate::Paused => record_skip(context, slot, Reason::TargetPaused),
                    Gate::Unhealthy => record_skip(context, slot, Reason::TargetUnhealthy),
                    Gate::Missing => record_skip(context, slot, Reason::TargetMissing),
                }
            }
            _ => Super,
        }
    }

    #[state(superstate = "idle")]
    fn suspended(event: &EruEvent, context: &mut Decision<EruCommand>) -> Outcome<State> {
        match event {
            EruEvent::SpecReady { suspend: false } => Transition(State::waiting()),
            EruEvent::SlotsDue(due) => {
                let mut records = due.records.clone();
                records.extend(due.due.map(|slot| skipped(slot, Reason::Suspended)));
                if !records.is_empty() {
                    context.command(EruCommand::RecordSlots(records));
                }
                Handled
            }
            _ => Super,
        }
    }

    #[state(superstate = "idle")]
    fn invalid(event: &EruEvent) -> Outcome<State> {
        match event {
            EruEvent::SpecInvalid { .. } => Handled,
            EruEvent::SpecReady { suspend: false } => Transition(State::waiting()),
            EruEvent::SpecReady { suspend: true } => Transition(State::suspended()),
            _ => Super,
        }
    }

    #[state(superstate = "idle")]
    fn target_missing(event: &EruEvent, context: &mut Decision<EruCommand>) -> Outcome<State> {
        match event {
            EruEvent::TargetMissing => Handled,
            EruEvent::SpecReady { suspend: false } => Transition(State::waiting()),
            EruEvent::SpecReady { suspend: true } => Transition(State::suspended()),
            EruEvent::SlotsDue(due) => {
                let mut records = due.records.clone();
                records.extend(due.due.map(|slot| skipped(slot, Reason::TargetMissing)));
                if !records.is_empty() {
                    context.command(EruCommand::RecordSlots(records));
                }
                Handled
            }
            _ => Super,
        }
    }

    /// The restart of `slot` is journaled; the target's template does not carry it yet.
    #[state(superstate = "busy")]
    fn restarting(
        slot: &DateTime<Utc>,
        event: &EruEvent,
        context: &mut Decision<EruCommand>,
    ) -> Outcome<State> {
        match event {
            EruEvent::RestartPending => {
                context.command(EruCommand::PatchRestart { slot: *slot });
                Handled
            }
            EruEvent::RestartPatched => Transition(State::rolling_out(*slot)),
            _ => Super,
        }
    }

    /// The target rolls out the restart of `slot`.
    #[state(superstate = "busy")]
    fn rolling_out(
        slot: &DateTime<Utc>,
        event: &EruEvent,
        context: &mut Decision<EruCommand>,
    ) -> Outcome<State> {
        match event {
            EruEvent::RolloutProgressed => Handled,
            EruEvent::RolloutDone { finished_at } => {
                let outcome = RestartOutcome::Succeeded;
                context.command(EruCommand::FinishRestart {
                    slot: *slot,
                    outcome,
                    finished_at: Some(*finished_at),
                    reason: None,
                });
                Transition(State::waiting())
            }
            EruEvent::RolloutFailed { finished_at, reason } => {
                context.command(EruCommand::FinishRestart {
                    slot: *slot,
                    outcome: RestartOutcome::Failed,
                    finished_at: Some(*finished_at),
                    reason: Some(reason.clone()),
                });
                Transition(State::waiting())
            }
            _ => Super,
        }
    }

    /// Not restarting: spec and target problems move between these states.
    #[superstate]
    fn idle(event: &EruEvent, context: &mut Decision<EruCommand>) -> Outcome<State> {
        match event {
            EruEvent::SpecInvalid { reason } => {
                context.command(EruCommand::ReportInvalid {
                    reason: reason.clone(),
                });
                Transition(State::invalid())
            }
            EruEvent::TargetMissing => {
                context.command(EruCommand::ReportTargetMissing);
                Transition(State::target_missing())
            }
            _ => Handled,
        }
    }

    /// A restart is in flight: new slots are skipped; losing the spec or target abandons it.
    #[superstate]
    fn busy(slot: &DateTime<Utc>, event: &EruEvent, context: &mut Decision<EruCommand>) -> Outcome<State> {
        let abandon = |context: &mut Decision<EruCommand>, reason: &str| {
            context.command(EruCommand::FinishRestart {
                slot: *slot,
                outcome: RestartOutcome::Abandoned,
                finished_at: None,
                reason: Some(reason.to_string()),
            });
        };
        match event {
            EruEvent::SlotsDue(due) => {
                let mut records = due.records.clone();
                records.extend(
                    due.due
                        .filter(|d| d != slot)
                        .map(|d| skipped(d, Reason::ConcurrentRollout)),
                );
                if !records.is_empty() {
                    context.command(EruCommand::RecordSlots(records));
                }
                Handled
            }
            EruEvent::SpecInvalid { reason } => {
                abandon(context, "the spec became invalid");
                context.command(EruCommand::ReportInvalid {
                    reason: reason.clone(),
                });
                Transition(State::invalid())
            }
            EruEvent::TargetMissing => {
                abandon(context, "the target disappeared");
                context.command(EruCommand::ReportTargetMissing);
                Transition(State::target_missing())
            }
            _ => Handled,
        }
    }

    fn after_transition(&mut self, from: &State, to: &State, context: &mut Decision<EruCommand>) {
        context.record(from, to);
    }
}

fn record_skip(context: &mut Decision<EruCommand>, slot: DateTime<Utc>, reason: Reason) -> Outcome<State> {
    context.command(EruCommand::RecordSlots(vec![skipped(slot, reason)]));
    Handled
}

impl Phase for State {
    fn phase(&self) -> &'static str {
        match self {
            State::Waiting {} => "Waiting",
            State::Suspended {} => "Suspended",
            State::Invalid {} => "Invalid",
            State::TargetMissing {} => "TargetMissing",
            State::Restarting { .. } => "Restarting",
            State::RollingOut { .. } => "RollingOut",
        }
    }
}

impl State {
    /// The slot being restarted, in Restarting and RollingOut.
    pub fn slot(&self) -> Option<DateTime<Utc>> {
        match self {
            State::Restarting { slot } | State::RollingOut { slot } => Some(*slot),
            _ => None,
        }
    }
}

/// Restores the machine from `status.phase` and `status.currentSlot`; a restart the journal has
/// open but the status does not show (a crash between journal and status) resumes as Restarting.
pub fn restore(
    phase: Option<&str>,
    current_slot: Option<DateTime<Utc>>,
    open_restart: Option<DateTime<Utc>>,
) -> State {
    match (phase, current_slot) {
        (Some("RollingOut"), Some(slot)) if open_restart.is_none_or(|open| open == slot) => {
            State::RollingOut { slot }
        }
        (Some("Restarting"), Some(slot)) if open_restart.is_none_or(|open| open == slot) => {
            State::Restarting { slot }
        }
        _ => match open_restart {
            Some(slot) => State::Restarting { slot },
            None => match phase {
                Some("Suspended") => State::Suspended {},
                Some("Invalid") => State::Invalid {},
                Some("TargetMissing") => State::TargetMissing {},
                _ => State::Waiting {},
            },
        },
    }
}

#[cfg(test)]
mod tests {
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
        assert_eq!(
            decision.commands,
            vec![
                EruCommand::RecordFired { slot: t(1) },
                EruCommand::PatchRestart { slot: t(1) }
            ]
        );
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
            decision.commands,
            vec![EruCommand::FinishRestart {
                slot: t(1),
                outcome: RestartOutcome::Succeeded,
                finished_at: Some(t(2)),
                reason: None
            }]
        );
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
        assert_eq!(decision.commands, vec![EruCommand::RecordFired { slot: t(1) }]);
    }

    #[test]
    fn restarting_repatches_until_the_template_carries_the_slot() {
        let (state, decision) = dispatch(
            EruMachine,
            State::Restarting { slot: t(1) },
            &EruEvent::RestartPending,
        );
        assert_eq!(state, State::Restarting { slot: t(1) });
        assert_eq!(decision.commands, vec![EruCommand::PatchRestart { slot: t(1) }]);
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
                decision.commands,
                vec![EruCommand::RecordSlots(vec![skipped(t(1), reason)])]
            );
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
            decision.commands,
            vec![EruCommand::RecordSlots(vec![skipped(
                t(2),
                Reason::ConcurrentRollout
            )])]
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
            decision.commands[0],
            EruCommand::FinishRestart {
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
            decision.commands[0],
            EruCommand::FinishRestart {
                outcome: RestartOutcome::Abandoned,
                ..
            }
        ));
        assert_eq!(
            decision.commands[1],
            EruCommand::ReportInvalid {
                reason: "61 is not a minute".into()
            }
        );
        let (state, decision) = dispatch(EruMachine, State::Invalid {}, &bad);
        assert_eq!(state, State::Invalid {});
        assert!(
            decision.commands.is_empty(),
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
        assert_eq!(decision.commands, vec![EruCommand::ReportTargetMissing]);
        let (state, decision) = dispatch(EruMachine, state, &due(t(1), Gate::Missing));
        assert_eq!(state, State::TargetMissing {});
        assert_eq!(
            decision.commands,
            vec![EruCommand::RecordSlots(vec![skipped(
                t(1),
                Reason::TargetMissing
            )])]
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
            decision.commands,
            vec![EruCommand::RecordSlots(vec![skipped(t(1), Reason::Suspended)])]
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
}
