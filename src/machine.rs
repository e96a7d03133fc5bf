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

use std::{collections::HashMap, sync::Mutex};

use serde::{Serialize, de::DeserializeOwned};

use crate::memory::{key_hash, shrink_after_burst};
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

    /// Everything of `other` after everything of `self`, as if one dispatch had decided both.
    pub fn extend(&mut self, other: Decision<A, R>) {
        self.transitions.extend(other.transitions);
        self.records.extend(other.records);
        self.actions.extend(other.actions);
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

/// A digest of a status as this operator serializes it: two statuses with the same digest are the
/// same (a cache may keep the digest of a status instead of all of it).
pub fn status_digest<S: Serialize>(status: &S) -> u64 {
    key_hash(serde_json::to_string(status).unwrap_or_default())
}

/// The status each object was last written with, and the resourceVersion that write was based on.
///
/// Right after a status patch the watch cache may still hold the version the patch was based
/// on; restoring the machine from that stale `status.phase` would replay a transition. Until the
/// cache moves past that version, reconciles use the status remembered here; once it has, the
/// entry is dropped (a cache never goes back), so the memo holds only the writes the cache has yet
/// to show, each as its JSON text (a `serde_json::Value` tree takes several times its size).
#[derive(Debug, Default)]
pub struct StatusMemo {
    written: Mutex<HashMap<String, (String, String)>>,
}

impl StatusMemo {
    /// The freshest known status of object `uid`, cached at `resource_version`.
    pub fn current<S: DeserializeOwned + Clone>(
        &self,
        uid: &str,
        resource_version: &str,
        cached: Option<&S>,
    ) -> Option<S> {
        self.written(uid, resource_version).or_else(|| cached.cloned())
    }

    /// The status written for object `uid` on top of `resource_version`, while its cache still
    /// holds that version (the write is not in the cache yet).
    pub fn written<S: DeserializeOwned>(&self, uid: &str, resource_version: &str) -> Option<S> {
        let mut written = self.written.lock().expect("status memo lock");
        match written.get(uid) {
            Some((based_on, status)) if based_on == resource_version => serde_json::from_str(status).ok(),
            Some(_) => {
                written.remove(uid); // the cache moved past the write
                None
            }
            None => None,
        }
    }

    /// Records that `status` was written on top of `resource_version`.
    pub fn remember<S: Serialize>(&self, uid: &str, resource_version: &str, status: &S) {
        if let Ok(text) = serde_json::to_string(status) {
            self.written
                .lock()
                .expect("status memo lock")
                .insert(uid.to_string(), (resource_version.to_string(), text));
        }
    }

    /// Drops what is remembered of object `uid` once its cache holds `resource_version`, another
    /// version than the write was based on: the cache has moved past it. Called as the cache
    /// applies each watch event, so an object that is not reconciled again (an Eru waiting months
    /// for its next slot) is not remembered for months.
    pub fn settle(&self, uid: &str, resource_version: &str) {
        let mut written = self.written.lock().expect("status memo lock");
        if written
            .get(uid)
            .is_some_and(|(based_on, _)| based_on != resource_version)
        {
            written.remove(uid);
            shrink_after_burst(&mut written);
        }
    }

    /// How many writes the caches have yet to show.
    pub fn pending(&self) -> usize {
        self.written.lock().expect("status memo lock").len()
    }

    /// Forgets a deleted object.
    pub fn forget(&self, uid: &str) {
        let mut written = self.written.lock().expect("status memo lock");
        written.remove(uid);
        shrink_after_burst(&mut written);
    }
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
    fn status_memo_covers_a_stale_cache_only() {
        let memo = StatusMemo::default();
        let cached = "Pending".to_string();
        assert_eq!(memo.current("u", "1", Some(&cached)), Some(cached.clone()));
        memo.remember("u", "1", &"Stable".to_string());
        assert_eq!(
            memo.current("u", "1", Some(&cached)),
            Some("Stable".to_string()),
            "cache still at 1"
        );
        assert_eq!(
            memo.current("u", "2", Some(&cached)),
            Some(cached.clone()),
            "cache moved on"
        );
        assert_eq!(
            memo.pending(),
            0,
            "the write is in the cache: nothing left to remember"
        );
        memo.remember("u", "2", &"Stable".to_string());
        memo.forget("u");
        assert_eq!(memo.pending(), 0);
        assert_eq!(memo.current("u", "1", Some(&cached)), Some(cached));
    }

    #[test]
    fn status_memo_settles_as_the_cache_moves() {
        let memo = StatusMemo::default();
        memo.remember("u", "1", &"Stable".to_string());
        memo.settle("u", "1");
        assert_eq!(
            memo.pending(),
            1,
            "the cache still holds the version the write was based on"
        );
        memo.settle("other", "7");
        assert_eq!(memo.pending(), 1, "another object's event settles nothing");
        memo.settle("u", "2");
        assert_eq!(
            memo.pending(),
            0,
            "the cache moved past the write, without a pass"
        );
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
