//! The Eru state machine. Pure: handlers decide, the reconciler acts.
//!
//! This first cut covers the spec's validity and suspension; the restart states (Restarting,
//! RollingOut) and slot accounting come with the scheduling work.

use statig::prelude::*;

use crate::machine::{Decision, EventName, Phase};

/// What the reconciler saw of an Eru's spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EruEvent {
    /// The spec parses; `suspend` as set.
    SpecValid { suspend: bool },
    /// The schedule or time zone does not parse.
    SpecInvalid { reason: String },
}

impl EventName for EruEvent {
    fn name(&self) -> &'static str {
        match self {
            EruEvent::SpecValid { .. } => "SpecValid",
            EruEvent::SpecInvalid { .. } => "SpecInvalid",
        }
    }
}

/// What the reconciler is asked to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EruCommand {
    /// Tell the user the spec is invalid (Warning Event).
    ReportInvalid { reason: String },
}

/// The Eru machine.
#[derive(Default)]
pub struct EruMachine;

#[state_machine(
    initial = "State::waiting()",
    state(derive(Debug, Clone, PartialEq, Eq)),
    after_transition = "Self::after_transition"
)]
impl EruMachine {
    /// Waiting for the next slot.
    #[state(superstate = "spec")]
    fn waiting(event: &EruEvent) -> Outcome<State> {
        match event {
            EruEvent::SpecValid { suspend: true } => Transition(State::suspended()),
            _ => Super,
        }
    }

    #[state(superstate = "spec")]
    fn suspended(event: &EruEvent) -> Outcome<State> {
        match event {
            EruEvent::SpecValid { suspend: false } => Transition(State::waiting()),
            _ => Super,
        }
    }

    #[state(superstate = "spec")]
    fn invalid(event: &EruEvent) -> Outcome<State> {
        match event {
            EruEvent::SpecValid { suspend: false } => Transition(State::waiting()),
            EruEvent::SpecValid { suspend: true } => Transition(State::suspended()),
            EruEvent::SpecInvalid { .. } => Handled,
        }
    }

    #[superstate]
    fn spec(event: &EruEvent, context: &mut Decision<EruCommand>) -> Outcome<State> {
        match event {
            EruEvent::SpecInvalid { reason } => {
                context.command(EruCommand::ReportInvalid {
                    reason: reason.clone(),
                });
                Transition(State::invalid())
            }
            EruEvent::SpecValid { .. } => Handled,
        }
    }

    fn after_transition(&mut self, from: &State, to: &State, context: &mut Decision<EruCommand>) {
        context.record(from, to);
    }
}

impl Phase for State {
    fn phase(&self) -> &'static str {
        match self {
            State::Waiting {} => "Waiting",
            State::Suspended {} => "Suspended",
            State::Invalid {} => "Invalid",
        }
    }
}

/// Restores the state named by `status.phase`.
pub fn restore(phase: Option<&str>) -> State {
    match phase {
        Some("Suspended") => State::Suspended {},
        Some("Invalid") => State::Invalid {},
        _ => State::Waiting {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::dispatch;

    #[test]
    fn invalid_spec_is_reported_once_and_recovers() {
        let bad = EruEvent::SpecInvalid {
            reason: "61 is not a minute".into(),
        };
        let (state, decision) = dispatch(EruMachine, State::Waiting {}, &bad);
        assert_eq!(state, State::Invalid {});
        assert_eq!(
            decision.commands,
            vec![EruCommand::ReportInvalid {
                reason: "61 is not a minute".into()
            }]
        );
        let (state, decision) = dispatch(EruMachine, State::Invalid {}, &bad);
        assert_eq!(state, State::Invalid {});
        assert!(
            decision.commands.is_empty(),
            "an unchanged invalid spec is not reported again"
        );
        let (state, decision) = dispatch(
            EruMachine,
            State::Invalid {},
            &EruEvent::SpecValid { suspend: false },
        );
        assert_eq!(state, State::Waiting {});
        assert_eq!(decision.transitions[0].event, "SpecValid");
    }

    #[test]
    fn suspend_and_resume() {
        let (state, _) = dispatch(
            EruMachine,
            State::Waiting {},
            &EruEvent::SpecValid { suspend: true },
        );
        assert_eq!(state, State::Suspended {});
        let (state, _) = dispatch(
            EruMachine,
            State::Suspended {},
            &EruEvent::SpecValid { suspend: false },
        );
        assert_eq!(state, State::Waiting {});
    }

    #[test]
    fn restore_round_trips() {
        for state in [State::Waiting {}, State::Suspended {}, State::Invalid {}] {
            assert_eq!(restore(Some(state.phase())), state);
        }
    }
}
