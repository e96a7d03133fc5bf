//! State-machine plumbing shared by the three kinds.
//!
//! Every kind models its object as a statig *blocking* machine (the async flavour makes the
//! reconcile future non-`Send`, which `Controller::run` rejects). A reconcile restores the machine
//! from `status.phase`, dispatches observed events and gets back the new state plus a
//! [`Decision`]: the transitions the `after_transition` hook recorded, the records the handlers
//! want journaled and the actions they chose. Handlers are pure; the reconciler journals the
//! transitions and records, then performs the actions, and feeds an action's result back as an
//! event in the same pass.
//! Entry actions re-run when a machine is restored, so the machines here have none.

use statig::blocking::{IntoStateMachine, IntoStateMachineExt, State, Superstate};

/// A state's stable name: `status.phase`, journal columns and metric labels.
pub trait Phase {
    fn phase(&self) -> &'static str;
}

/// An event's stable name, journaled with the transitions it causes.
pub trait EventName {
    fn name(&self) -> &'static str;
}

/// One transition, as data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    pub from: &'static str,
    pub to: &'static str,
    pub event: &'static str,
}

/// A kind whose machine journals nothing but its transitions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoRecord {}

/// What one dispatch decided: the machine's context while it runs. Records (rows for the journal)
/// are kept apart from actions (cluster writes and Events): a reconcile journals the transitions
/// and records first, and only then performs the actions.
#[derive(Debug, PartialEq)]
pub struct Decision<A, R = NoRecord> {
    event: &'static str,
    pub transitions: Vec<Transition>,
    pub records: Vec<R>,
    pub actions: Vec<A>,
}

impl<A, R> Default for Decision<A, R> {
    fn default() -> Self {
        Self {
            event: "",
            transitions: Vec::new(),
            records: Vec::new(),
            actions: Vec::new(),
        }
    }
}

impl<A, R> Decision<A, R> {
    /// Asks the reconciler to perform `action` once this pass is journaled.
    pub fn act(&mut self, action: A) {
        self.actions.push(action);
    }

    /// Asks the reconciler to journal `record` with this pass's transitions.
    pub fn record(&mut self, record: R) {
        self.records.push(record);
    }

    /// Records a transition; call it from the machine's `after_transition` hook.
    /// A transition to the same phase is not one.
    pub fn transition(&mut self, from: &impl Phase, to: &impl Phase) {
        if from.phase() == to.phase() {
            return;
        }
        self.transitions.push(Transition {
            from: from.phase(),
            to: to.phase(),
            event: self.event,
        });
    }
}

/// Restores a machine in `state`, dispatches `event` and returns the new state with what was
/// decided. Pure: no I/O happens here.
pub fn dispatch<M, E, A, R>(machine: M, state: M::State, event: &E) -> (M::State, Decision<A, R>)
where
    M: for<'e, 'c> IntoStateMachine<Event<'e> = E, Context<'c> = Decision<A, R>> + IntoStateMachineExt,
    M::State: State<M> + Clone,
    for<'s> M::Superstate<'s>: Superstate<M>,
    E: EventName,
{
    let mut decision = Decision::default();
    let state = step(machine, state, event, &mut decision);
    (state, decision)
}

/// Like [`dispatch`], adding to an existing decision: a reconcile that feeds several events
/// through one machine collects all their transitions, records and actions in order.
pub fn step<M, E, A, R>(machine: M, state: M::State, event: &E, decision: &mut Decision<A, R>) -> M::State
where
    M: for<'e, 'c> IntoStateMachine<Event<'e> = E, Context<'c> = Decision<A, R>> + IntoStateMachineExt,
    M::State: State<M> + Clone,
    for<'s> M::Superstate<'s>: Superstate<M>,
    E: EventName,
{
    decision.event = event.name();
    let mut restored = machine.uninitialized_state_machine();
    *restored.state_mut() = state;
    let mut running = restored.init_with_context(decision);
    running.handle_with_context(event, decision);
    running.state().clone()
}

#[cfg(test)]
mod tests {
    use statig::prelude::*;

    use super::*;

    /// A tiny door: enough to prove restore, dispatch and transition recording.
    #[derive(Default)]
    struct Door;

    enum DoorEvent {
        Push,
        Lock,
    }

    impl EventName for DoorEvent {
        fn name(&self) -> &'static str {
            match self {
                DoorEvent::Push => "Push",
                DoorEvent::Lock => "Lock",
            }
        }
    }

    #[derive(Debug, PartialEq)]
    enum DoorCommand {
        Beep,
    }

    #[state_machine(
        initial = "State::closed()",
        state(derive(Debug, Clone, PartialEq)),
        after_transition = "Self::after_transition"
    )]
    impl Door {
        #[state]
        fn closed(event: &DoorEvent, context: &mut Decision<DoorCommand>) -> Outcome<State> {
            match event {
                DoorEvent::Push => {
                    context.act(DoorCommand::Beep);
                    Transition(State::open())
                }
                DoorEvent::Lock => Transition(State::locked()),
            }
        }

        #[state]
        fn open(event: &DoorEvent) -> Outcome<State> {
            match event {
                DoorEvent::Push => Transition(State::closed()),
                DoorEvent::Lock => Handled,
            }
        }

        #[state]
        fn locked() -> Outcome<State> {
            Handled
        }

        fn after_transition(&mut self, from: &State, to: &State, context: &mut Decision<DoorCommand>) {
            context.transition(from, to);
        }
    }

    impl Phase for State {
        fn phase(&self) -> &'static str {
            match self {
                State::Closed {} => "Closed",
                State::Open {} => "Open",
                State::Locked {} => "Locked",
            }
        }
    }

    #[test]
    fn dispatch_records_transition_and_commands() {
        let (state, decision) = dispatch(Door, State::Closed {}, &DoorEvent::Push);
        assert_eq!(state, State::Open {});
        assert_eq!(
            decision.transitions,
            vec![super::Transition {
                from: "Closed",
                to: "Open",
                event: "Push"
            }]
        );
        assert_eq!(decision.actions, vec![DoorCommand::Beep]);
    }

    #[test]
    fn restored_state_is_where_dispatch_starts() {
        // restored as Open, the same event goes the other way and decides nothing else
        let (state, decision) = dispatch(Door, State::Open {}, &DoorEvent::Push);
        assert_eq!(state, State::Closed {});
        assert_eq!(decision.transitions[0].from, "Open");
        assert!(decision.actions.is_empty());
    }

    #[test]
    fn handled_event_records_nothing() {
        let (state, decision) = dispatch(Door, State::Locked {}, &DoorEvent::Lock);
        assert_eq!(state, State::Locked {});
        assert!(decision.transitions.is_empty() && decision.actions.is_empty());
        let (_, decision) = dispatch(Door, State::Open {}, &DoorEvent::Lock);
        assert!(decision.transitions.is_empty());
    }
}
