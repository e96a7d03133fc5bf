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
    pub const ALL: [RestartOutcome; 3] = [
        RestartOutcome::Succeeded,
        RestartOutcome::Failed,
        RestartOutcome::Abandoned,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RestartOutcome::Succeeded => "succeeded",
            RestartOutcome::Failed => "failed",
            RestartOutcome::Abandoned => "abandoned",
        }
    }
}

/// What the journal gets from a pass, before anything is acted on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EruRecord {
    /// Missed or skipped slots.
    Slots(Vec<SlotRecord>),
    /// A slot fired: its restart begins.
    Fired { slot: DateTime<Utc> },
    /// A restart ended.
    Finished {
        slot: DateTime<Utc>,
        outcome: RestartOutcome,
        /// When it ended, if the machine knows (else: when it was journaled).
        finished_at: Option<DateTime<Utc>>,
        reason: Option<String>,
    },
}

/// What the reconciler does in the cluster once the pass is journaled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EruAction {
    /// Set the slot on the target's pod template (idempotent: keyed by the slot).
    PatchRestart { slot: DateTime<Utc> },
    /// Tell the user the spec is invalid (an Event).
    ReportInvalid { reason: String },
    /// Tell the user the target does not exist (an Event).
    ReportTargetMissing,
}

/// What one Eru pass decided.
pub type EruDecision = Decision<EruAction, EruRecord>;

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
    fn waiting(event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        match event {
            EruEvent::SpecReady { suspend: true } => Transition(State::suspended()),
            EruEvent::SlotsDue(due) => {
                if !due.records.is_empty() {
                    context.record(EruRecord::Slots(due.records.clone()));
                }
                let Some(slot) = due.due else { return Handled };
                if due.template_slot == Some(slot) {
                    // patched before a crash, or by another replica: never patch twice
                    context.record(EruRecord::Fired { slot });
                    return Transition(State::rolling_out(slot));
                }
                match due.gate {
                    Gate::Open => {
                        context.record(EruRecord::Fired { slot });
                        context.act(EruAction::PatchRestart { slot });
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
    fn suspended(event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        match event {
            EruEvent::SpecReady { suspend: false } => Transition(State::waiting()),
            EruEvent::SlotsDue(due) => {
                let mut records = due.records.clone();
                records.extend(due.due.map(|slot| skipped(slot, Reason::Suspended)));
                if !records.is_empty() {
                    context.record(EruRecord::Slots(records));
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
    fn target_missing(event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        match event {
            EruEvent::TargetMissing => Handled,
            EruEvent::SpecReady { suspend: false } => Transition(State::waiting()),
            EruEvent::SpecReady { suspend: true } => Transition(State::suspended()),
            EruEvent::SlotsDue(due) => {
                let mut records = due.records.clone();
                records.extend(due.due.map(|slot| skipped(slot, Reason::TargetMissing)));
                if !records.is_empty() {
                    context.record(EruRecord::Slots(records));
                }
                Handled
            }
            _ => Super,
        }
    }

    /// The restart of `slot` is journaled; the target's template does not carry it yet.
    #[state(superstate = "busy")]
    fn restarting(slot: &DateTime<Utc>, event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        match event {
            EruEvent::RestartPending => {
                context.act(EruAction::PatchRestart { slot: *slot });
                Handled
            }
            EruEvent::RestartPatched => Transition(State::rolling_out(*slot)),
            _ => Super,
        }
    }

    /// The target rolls out the restart of `slot`.
    #[state(superstate = "busy")]
    fn rolling_out(slot: &DateTime<Utc>, event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        match event {
            EruEvent::RolloutProgressed => Handled,
            EruEvent::RolloutDone { finished_at } => {
                let outcome = RestartOutcome::Succeeded;
                context.record(EruRecord::Finished {
                    slot: *slot,
                    outcome,
                    finished_at: Some(*finished_at),
                    reason: None,
                });
                Transition(State::waiting())
            }
            EruEvent::RolloutFailed { finished_at, reason } => {
                context.record(EruRecord::Finished {
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
    fn idle(event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        match event {
            EruEvent::SpecInvalid { reason } => {
                context.act(EruAction::ReportInvalid {
                    reason: reason.clone(),
                });
                Transition(State::invalid())
            }
            EruEvent::TargetMissing => {
                context.act(EruAction::ReportTargetMissing);
                Transition(State::target_missing())
            }
            _ => Handled,
        }
    }

    /// A restart is in flight: new slots are skipped; losing the spec or target abandons it.
    #[superstate]
    fn busy(slot: &DateTime<Utc>, event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        let abandon = |context: &mut EruDecision, reason: &str| {
            context.record(EruRecord::Finished {
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
                    context.record(EruRecord::Slots(records));
                }
                Handled
            }
            EruEvent::SpecInvalid { reason } => {
                abandon(context, "the spec became invalid");
                context.act(EruAction::ReportInvalid {
                    reason: reason.clone(),
                });
                Transition(State::invalid())
            }
            EruEvent::TargetMissing => {
                abandon(context, "the target disappeared");
                context.act(EruAction::ReportTargetMissing);
                Transition(State::target_missing())
            }
            _ => Handled,
        }
    }

    fn after_transition(&mut self, from: &State, to: &State, context: &mut EruDecision) {
        context.transition(from, to);
    }
}

fn record_skip(context: &mut EruDecision, slot: DateTime<Utc>, reason: Reason) -> Outcome<State> {
    context.record(EruRecord::Slots(vec![skipped(slot, reason)]));
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
mod tests;
