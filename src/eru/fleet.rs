//! The fleet cap: how many restarts may be in flight at once, across the operator
//! (`--max-concurrent-restarts`) and per namespace (`--max-concurrent-restarts-per-namespace`).
//!
//! A restart holds a place from the pass that decides it until the pass that sees its rollout
//! end (or gives it up). A due slot that finds no place waits in the queue, in slot order: a
//! freed place goes to the first waiting slot whose namespace has room, and that Eru is
//! reconciled at once to take it. A slot still waiting at its starting deadline is recorded
//! `skipped/fleet_capacity` by its own pass. The queue lives in memory: after a restart of the
//! operator, restarts in flight are counted again from the journal before any place is given.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Mutex,
};

use chrono::{DateTime, Utc};
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;

use super::CachedEru;
pub use super::core::messages::Grant;

/// The caps; `None` is unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    pub total: Option<usize>,
    pub per_namespace: Option<usize>,
}

impl Limits {
    /// Whether nothing is capped.
    pub fn unlimited(&self) -> bool {
        self.total.is_none() && self.per_namespace.is_none()
    }
}

/// A waiting slot.
#[derive(Clone, Debug)]
struct Waiter {
    namespace: String,
    name: String,
    deadline: DateTime<Utc>,
}

#[derive(Debug, Default)]
struct Inner {
    /// uid → namespace of each restart in flight.
    active: HashMap<String, String>,
    per_namespace: HashMap<String, usize>,
    /// (slot, uid) → waiter, in slot order.
    waiting: BTreeMap<(DateTime<Utc>, String), Waiter>,
    /// uid → the slot it waits with.
    waiting_slot: HashMap<String, DateTime<Utc>>,
}

/// The fleet's places and queue.
#[derive(Debug)]
pub struct Fleet {
    limits: Limits,
    inner: Mutex<Inner>,
    /// Erus to reconcile now: a place freed up for them.
    wake: mpsc::UnboundedSender<ObjectRef<CachedEru>>,
}

impl Inner {
    fn hold(&mut self, uid: &str, namespace: &str) {
        if self
            .active
            .insert(uid.to_string(), namespace.to_string())
            .is_none()
        {
            *self.per_namespace.entry(namespace.to_string()).or_default() += 1;
        }
    }

    fn leave(&mut self, uid: &str) -> bool {
        if let Some(slot) = self.waiting_slot.remove(uid) {
            self.waiting.remove(&(slot, uid.to_string()));
        }
        let Some(namespace) = self.active.remove(uid) else {
            return false;
        };
        if let Some(n) = self.per_namespace.get_mut(&namespace) {
            *n -= 1;
            if *n == 0 {
                self.per_namespace.remove(&namespace);
            }
        }
        true
    }

    /// The waiters a place is free for now, in slot order (at most one per free place).
    fn next_in_line(&self, limits: &Limits, now: DateTime<Utc>) -> Vec<(String, Waiter)> {
        let mut taken: HashMap<&str, usize> = HashMap::new();
        let mut chosen = Vec::new();
        for ((_, uid), w) in &self.waiting {
            if w.deadline < now {
                continue;
            }
            let total = self.active.len() + chosen.len();
            if limits.total.is_some_and(|max| total >= max) {
                break;
            }
            let ns = self.per_namespace.get(w.namespace.as_str()).copied().unwrap_or(0)
                + taken.get(w.namespace.as_str()).copied().unwrap_or(0);
            if limits.per_namespace.is_some_and(|max| ns >= max) {
                continue;
            }
            *taken.entry(&w.namespace).or_default() += 1;
            chosen.push((uid.clone(), w.clone()));
        }
        chosen
    }
}

impl Fleet {
    /// A fleet with `limits`; the receiver yields Erus to reconcile because a place freed up.
    pub fn new(limits: Limits) -> (Self, mpsc::UnboundedReceiver<ObjectRef<CachedEru>>) {
        let (wake, rx) = mpsc::unbounded_channel();
        (
            Self {
                limits,
                inner: Mutex::new(Inner::default()),
                wake,
            },
            rx,
        )
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Asks for a place for the restart of `slot` of the Eru `uid`. Granted when it already
    /// holds one, or when it is first in line (slot order) among the waiters with room.
    pub fn request(
        &self,
        uid: &str,
        namespace: &str,
        name: &str,
        slot: DateTime<Utc>,
        deadline: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Grant {
        if self.limits.unlimited() {
            return Grant::Granted;
        }
        let mut inner = self.inner.lock().expect("fleet lock");
        if inner.active.contains_key(uid) {
            return Grant::Granted;
        }
        if let Some(old) = inner.waiting_slot.insert(uid.to_string(), slot) {
            inner.waiting.remove(&(old, uid.to_string()));
        }
        let waiter = Waiter {
            namespace: namespace.to_string(),
            name: name.to_string(),
            deadline,
        };
        inner.waiting.insert((slot, uid.to_string()), waiter);
        let first = inner
            .next_in_line(&self.limits, now)
            .into_iter()
            .any(|(u, _)| u == uid);
        // next_in_line gives places only where the caps leave room
        if first {
            inner.waiting_slot.remove(uid);
            inner.waiting.remove(&(slot, uid.to_string()));
            inner.hold(uid, namespace);
            return Grant::Granted;
        }
        let ahead = inner.waiting.range(..(slot, uid.to_string())).count();
        Grant::Queued {
            ahead,
            in_flight: inner.active.len(),
        }
    }

    /// Counts a restart in flight (one restored from the journal, or still rolling out) without
    /// asking: it already runs.
    pub fn hold(&self, uid: &str, namespace: &str) {
        if self.limits.unlimited() {
            return;
        }
        let mut inner = self.inner.lock().expect("fleet lock");
        if let Some(slot) = inner.waiting_slot.remove(uid) {
            inner.waiting.remove(&(slot, uid.to_string()));
        }
        inner.hold(uid, namespace);
    }

    /// The Eru `uid` neither restarts nor waits: its place (or its turn) goes to the next in line,
    /// who are woken.
    pub fn leave(&self, uid: &str, now: DateTime<Utc>) {
        if self.limits.unlimited() {
            return;
        }
        let mut inner = self.inner.lock().expect("fleet lock");
        let waited = inner.waiting_slot.contains_key(uid);
        if inner.leave(uid) || waited {
            for (_, w) in inner.next_in_line(&self.limits, now) {
                let _ = self.wake.send(ObjectRef::new(&w.name).within(&w.namespace));
            }
        }
    }

    /// The slot the Eru `uid` waits with, if it waits.
    pub fn waiting(&self, uid: &str) -> Option<DateTime<Utc>> {
        self.inner
            .lock()
            .expect("fleet lock")
            .waiting_slot
            .get(uid)
            .copied()
    }

    /// How many slots wait, and how many restarts are in flight.
    pub fn sizes(&self) -> (usize, usize) {
        let inner = self.inner.lock().expect("fleet lock");
        (inner.waiting.len(), inner.active.len())
    }
}

#[cfg(test)]
mod tests {
    use chrono::{Duration, TimeZone};

    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 23, 3, 0, 0).unwrap() + Duration::seconds(s)
    }

    fn fleet(
        total: Option<usize>,
        per_namespace: Option<usize>,
    ) -> (Fleet, mpsc::UnboundedReceiver<ObjectRef<CachedEru>>) {
        Fleet::new(Limits { total, per_namespace })
    }

    #[test]
    fn unlimited_grants_everything() {
        let (f, _) = fleet(None, None);
        for i in 0..100 {
            assert_eq!(
                f.request(&i.to_string(), "ns", "e", t(0), t(300), t(0)),
                Grant::Granted
            );
        }
        assert_eq!(f.sizes(), (0, 0));
    }

    #[test]
    fn cap_queues_in_slot_order_and_hands_places_on() {
        let (f, mut woken) = fleet(Some(2), None);
        assert_eq!(f.request("a", "ns", "a", t(0), t(300), t(0)), Grant::Granted);
        assert_eq!(f.request("b", "ns", "b", t(0), t(300), t(0)), Grant::Granted);
        // the same Eru asking again keeps its place
        assert_eq!(f.request("a", "ns", "a", t(0), t(300), t(1)), Grant::Granted);
        // c (slot 10) asks before d (slot 5): d is still first in line
        assert!(matches!(
            f.request("c", "ns", "c", t(10), t(310), t(10)),
            Grant::Queued {
                ahead: 0,
                in_flight: 2
            }
        ));
        assert!(matches!(
            f.request("d", "ns", "d", t(5), t(305), t(11)),
            Grant::Queued { ahead: 0, .. }
        ));
        assert_eq!(f.waiting("c"), Some(t(10)));
        f.leave("a", t(20));
        assert_eq!(woken.try_recv().unwrap().name, "d", "the earliest slot is woken");
        assert!(woken.try_recv().is_err(), "one place, one waiter woken");
        // c cannot jump the queue while d has not taken its place
        assert!(matches!(
            f.request("c", "ns", "c", t(10), t(310), t(21)),
            Grant::Queued { ahead: 1, .. }
        ));
        assert_eq!(f.request("d", "ns", "d", t(5), t(305), t(22)), Grant::Granted);
        assert_eq!(f.sizes(), (1, 2));
    }

    #[test]
    fn per_namespace_cap_lets_other_namespaces_pass() {
        let (f, mut woken) = fleet(Some(3), Some(1));
        assert_eq!(f.request("a", "one", "a", t(0), t(300), t(0)), Grant::Granted);
        assert!(matches!(
            f.request("b", "one", "b", t(0), t(300), t(0)),
            Grant::Queued { .. }
        ));
        assert_eq!(
            f.request("c", "two", "c", t(1), t(300), t(1)),
            Grant::Granted,
            "another namespace has room"
        );
        f.leave("a", t(5));
        let next = woken.try_recv().unwrap();
        assert_eq!(
            (next.name.as_str(), next.namespace.as_deref()),
            ("b", Some("one"))
        );
    }

    #[test]
    fn expired_waiters_do_not_block_the_line_and_leaving_forgets_the_turn() {
        let (f, _) = fleet(Some(1), None);
        assert_eq!(f.request("a", "ns", "a", t(0), t(300), t(0)), Grant::Granted);
        assert!(matches!(
            f.request("late", "ns", "late", t(1), t(10), t(1)),
            Grant::Queued { .. }
        ));
        f.leave("a", t(20));
        // "late" is past its deadline: the next one takes the place
        assert_eq!(f.request("b", "ns", "b", t(15), t(315), t(21)), Grant::Granted);
        f.leave("late", t(22));
        assert_eq!(f.waiting("late"), None);
        // holding (a restored restart) counts against the cap
        f.hold("r", "ns");
        assert_eq!(f.sizes(), (0, 2));
    }
}
