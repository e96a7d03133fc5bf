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

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

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

/// The status each object was last written with, until the watch cache shows that write.
///
/// Statuses are written off the pass ([`crate::runtime::StatusWriter`]), so for a while after a
/// pass the watch cache holds an older status; restoring the machine from that stale
/// `status.phase` would replay a transition and journal it twice. Until the cache shows the last
/// write, passes use the status remembered here.
///
/// When the cache shows it is told by the resourceVersion the write produced, not by the cache
/// merely moving: an earlier write landing (or a spec edit) moves the cache to a version that
/// still lacks the newest status. An entry ends when the cache holds the version its write
/// produced, or (should the cache skip that version, as after a relist) a later one with the
/// same status; so the memo holds only writes the caches have yet to show, each as its JSON text
/// (a `serde_json::Value` tree takes several times its size). A write that never lands (the
/// server refuses it for good) stays remembered: the journal already holds its transitions.
#[derive(Debug, Default)]
pub struct StatusMemo {
    written: Mutex<Written>,
}

#[derive(Debug, Default)]
struct Written {
    /// The number of the last write remembered, of any object.
    last: u64,
    by_uid: HashMap<String, Write>,
}

/// One object's last status write.
#[derive(Debug)]
struct Write {
    /// Its number: a write that lands reports it, so an earlier write landing is told apart.
    number: u64,
    /// Its JSON text, shared with the status writer's queue (one copy while both hold it).
    status: Arc<str>,
    digest: u64,
    /// The resourceVersion the write produced, once it landed.
    landed: Option<String>,
    /// The version the cache held when last looked at (a watch event can beat the write's
    /// response).
    seen: Option<String>,
}

impl Write {
    /// Whether a cache at `resource_version`, holding a status of digest `cached`, shows this write.
    fn shown(&self, resource_version: &str, cached: Option<u64>) -> bool {
        self.landed
            .as_deref()
            .is_some_and(|landed| landed == resource_version || cached == Some(self.digest))
    }
}

impl StatusMemo {
    /// The freshest known status of object `uid`, cached at `resource_version` as `cached`.
    pub fn current<S: Serialize + DeserializeOwned + Clone>(
        &self,
        uid: &str,
        resource_version: &str,
        cached: Option<&S>,
    ) -> Option<S> {
        self.written(uid, resource_version, cached.map(status_digest))
            .or_else(|| cached.cloned())
    }

    /// The status last written for object `uid`, while its cache (at `resource_version`, holding
    /// a status of digest `cached`) does not show it yet.
    pub fn written<S: DeserializeOwned>(
        &self,
        uid: &str,
        resource_version: &str,
        cached: Option<u64>,
    ) -> Option<S> {
        let mut written = self.written.lock().expect("status memo lock");
        let write = written.by_uid.get_mut(uid)?;
        if write.shown(resource_version, cached) {
            written.by_uid.remove(uid);
            return None;
        }
        write.seen = Some(resource_version.to_string());
        serde_json::from_str(&write.status).ok()
    }

    /// Remembers that `status` is being written for object `uid`; returns the write's number
    /// (for [`StatusMemo::landed`]) and the status as JSON text, for the writer to send.
    pub fn remember<S: Serialize>(&self, uid: &str, status: &S) -> (u64, Arc<str>) {
        let text: Arc<str> = serde_json::to_string(status).unwrap_or_default().into();
        let mut written = self.written.lock().expect("status memo lock");
        written.last += 1;
        let number = written.last;
        let write = Write {
            number,
            digest: key_hash(&*text),
            status: text.clone(),
            landed: None,
            seen: None,
        };
        written.by_uid.insert(uid.to_string(), write);
        (number, text)
    }

    /// Write `number` of object `uid` landed as `resource_version`: once the cache holds that
    /// version, the write is shown. A write that a newer one replaced changes nothing.
    pub fn landed(&self, uid: &str, number: u64, resource_version: &str) {
        let mut written = self.written.lock().expect("status memo lock");
        let Some(write) = written.by_uid.get_mut(uid) else {
            return;
        };
        if write.number != number {
            return;
        }
        if write.seen.as_deref() == Some(resource_version) {
            // the watch event came before the response
            written.by_uid.remove(uid);
            shrink_after_burst(&mut written.by_uid);
        } else {
            write.landed = Some(resource_version.to_string());
        }
    }

    /// The cache of object `uid` now holds `resource_version`, with a status of digest `cached`:
    /// drops the remembered write if that shows it. Called as the cache applies each watch
    /// event, so an object that is not reconciled again (an Eru waiting months for its next slot)
    /// is not remembered for months.
    pub fn settle(&self, uid: &str, resource_version: &str, cached: Option<u64>) {
        let mut written = self.written.lock().expect("status memo lock");
        let Some(write) = written.by_uid.get_mut(uid) else {
            return;
        };
        if write.shown(resource_version, cached) {
            written.by_uid.remove(uid);
            shrink_after_burst(&mut written.by_uid);
        } else {
            write.seen = Some(resource_version.to_string());
        }
    }

    /// How many writes the caches have yet to show.
    pub fn pending(&self) -> usize {
        self.written.lock().expect("status memo lock").by_uid.len()
    }

    /// Forgets a deleted object.
    pub fn forget(&self, uid: &str) {
        let mut written = self.written.lock().expect("status memo lock");
        written.by_uid.remove(uid);
        shrink_after_burst(&mut written.by_uid);
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
    fn status_memo_covers_a_stale_cache_until_it_shows_the_write() {
        let memo = StatusMemo::default();
        let cached = "Pending".to_string();
        assert_eq!(memo.current("u", "1", Some(&cached)), Some(cached.clone()));
        let (write, _) = memo.remember("u", &"Stable".to_string());
        assert_eq!(
            memo.current("u", "1", Some(&cached)),
            Some("Stable".into()),
            "cache still at 1"
        );
        assert_eq!(
            memo.current("u", "2", Some(&cached)),
            Some("Stable".into()),
            "the cache moved (a spec edit), but the write has not landed"
        );
        memo.landed("u", write, "3");
        assert_eq!(
            memo.current("u", "2", Some(&cached)),
            Some("Stable".into()),
            "landed as 3, cache at 2"
        );
        assert_eq!(memo.pending(), 1);
        assert_eq!(
            memo.current("u", "3", Some(&"Stable".to_string())),
            Some("Stable".into())
        );
        assert_eq!(
            memo.pending(),
            0,
            "the cache shows the write: nothing left to remember"
        );
        memo.remember("u", &"Stable".to_string());
        memo.forget("u");
        assert_eq!(memo.pending(), 0);
        assert_eq!(memo.current("u", "1", Some(&cached)), Some(cached));
    }

    #[test]
    fn status_memo_is_not_fooled_by_an_earlier_write_landing() {
        // a pass writes S1; the next, on the same cached version, writes S2 while S1 is in flight
        let memo = StatusMemo::default();
        let (s1, _) = memo.remember("u", &"Progressing".to_string());
        let (s2, _) = memo.remember("u", &"Stable".to_string());
        memo.landed("u", s1, "2");
        memo.settle("u", "2", Some(status_digest(&"Progressing".to_string())));
        assert_eq!(
            memo.current("u", "2", Some(&"Progressing".to_string())),
            Some("Stable".to_string()),
            "the cache shows S1, not S2: restoring from it would replay Progressing → Stable"
        );
        memo.landed("u", s2, "3");
        memo.settle("u", "3", Some(status_digest(&"Stable".to_string())));
        assert_eq!(memo.pending(), 0);
    }

    #[test]
    fn status_memo_settles_as_the_cache_shows_the_write() {
        let memo = StatusMemo::default();
        let stable = Some(status_digest(&"Stable".to_string()));
        let (write, _) = memo.remember("u", &"Stable".to_string());
        memo.settle("u", "1", None);
        memo.settle("other", "7", None);
        assert_eq!(
            memo.pending(),
            1,
            "neither the old version nor another object's event settles it"
        );
        memo.landed("u", write, "2");
        memo.settle("u", "2", stable);
        assert_eq!(
            memo.pending(),
            0,
            "the cache holds the version the write produced, without a pass"
        );

        // the watch event comes before the write's response
        let (write, _) = memo.remember("u", &"Stable".to_string());
        memo.settle("u", "5", stable);
        assert_eq!(memo.pending(), 1, "not landed yet: 5 may be an older write");
        memo.landed("u", write, "5");
        assert_eq!(memo.pending(), 0, "the cache already held what it produced");

        // the cache skipped the version (a relist) but shows the same status
        let (write, _) = memo.remember("u", &"Stable".to_string());
        memo.landed("u", write, "8");
        memo.settle("u", "9", stable);
        assert_eq!(memo.pending(), 0);
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
