//! The wake-ups of a controller run by [`super::runner`]: each object's next instant (a slot,
//! a retry, a rollout's deadline), kept compactly in one timer (~0.1 KB an object: the instant,
//! a hash of its name, `namespace/name` once). kube's controller kept them in its scheduler: two
//! copies of each object's reference, and the capacity of its largest moment (the initial listing,
//! every slot many objects share) for as long as the process ran, ~0.75 KB an object at 10,000.
//!
//! The instants are wall-clock times (a slot is one): the timer sleeps until the earliest, is
//! woken when a sooner one comes, and looks at the clock at least every [`TICK`], so a clock that
//! jumps moves every wake-up with it.

use std::{
    collections::{BTreeSet, HashMap},
    sync::{Arc, Mutex},
    time::Duration,
};

use chrono::{DateTime, Utc};
use futures::Stream;
use kube::{Resource, runtime::reflector::ObjectRef};
use tokio::sync::{Notify, mpsc};

use crate::memory::{key_hash, shrink_after_burst};

/// How often the timer looks at the clock at least.
const TICK: Duration = Duration::from_secs(15);

/// One waiting object.
#[derive(Debug)]
struct Waiting {
    /// Milliseconds since the epoch.
    at: i64,
    /// `namespace/name`, one allocation.
    object: Box<str>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Object (by the [`key_hash`] of its namespace and name) → its wake-up.
    by_object: HashMap<u64, Waiting>,
    /// (instant, object) in order.
    queue: BTreeSet<(i64, u64)>,
}

#[derive(Debug, Default)]
struct Timer {
    inner: Mutex<Inner>,
    /// Told when a wake-up comes sooner than every other: the timer sleeps until the earliest.
    sooner: Notify,
}

/// The wake-ups of one controller; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Wakes(Arc<Timer>);

fn key(namespace: &str, name: &str) -> u64 {
    key_hash((namespace, name))
}

impl Wakes {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.inner.lock().expect("wakes lock")
    }

    /// Wakes the object `name` in `namespace` at `at` (instead of any earlier wish).
    pub fn wake_at(&self, namespace: &str, name: &str, at: DateTime<Utc>) {
        let mut inner = self.lock();
        let k = key(namespace, name);
        let at = at.timestamp_millis();
        let old = inner.by_object.insert(
            k,
            Waiting {
                at,
                object: format!("{namespace}/{name}").into_boxed_str(),
            },
        );
        if let Some(old) = old {
            inner.queue.remove(&(old.at, k));
        }
        inner.queue.insert((at, k));
        let soonest = inner.queue.first() == Some(&(at, k));
        drop(inner);
        if soonest {
            self.0.sooner.notify_one();
        }
    }

    /// Forgets the wake-up of the object `name` in `namespace`, if it has one.
    pub fn cancel(&self, namespace: &str, name: &str) {
        let mut inner = self.lock();
        let k = key(namespace, name);
        if let Some(old) = inner.by_object.remove(&k) {
            inner.queue.remove(&(old.at, k));
        }
    }

    /// How many objects wait.
    pub fn len(&self) -> usize {
        self.lock().by_object.len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes out the objects due at `now`, earliest first, as `namespace/name`.
    fn due(&self, now: DateTime<Utc>) -> Vec<Box<str>> {
        let mut inner = self.lock();
        let now = now.timestamp_millis();
        let mut due = Vec::new();
        while let Some(&(at, k)) = inner.queue.first() {
            if at > now {
                break;
            }
            inner.queue.pop_first();
            if let Some(w) = inner.by_object.remove(&k) {
                due.push(w.object);
            }
        }
        shrink_after_burst(&mut inner.by_object);
        due
    }

    /// How long until the earliest wake-up after `now`, at most [`TICK`].
    fn sleep_for(&self, now: DateTime<Utc>) -> Duration {
        self.lock().queue.first().map_or(TICK, |&(at, _)| {
            Duration::from_millis((at - now.timestamp_millis()).max(0) as u64).min(TICK)
        })
    }

    /// The objects as they come due. The timer runs as long as the stream is held.
    pub fn due_stream<K>(&self) -> impl Stream<Item = ObjectRef<K>> + Send + 'static
    where
        K: Resource<DynamicType = ()> + 'static,
    {
        let (tx, rx) = mpsc::unbounded_channel();
        let wakes = self.clone();
        tokio::spawn(async move {
            loop {
                for object in wakes.due(Utc::now()) {
                    // names and namespaces hold no '/'
                    let (namespace, name) = object.split_once('/').unwrap_or(("", &object));
                    if tx.send(ObjectRef::<K>::new(name).within(namespace)).is_err() {
                        return;
                    }
                }
                tokio::select! {
                    () = tokio::time::sleep(wakes.sleep_for(Utc::now())) => {}
                    () = wakes.0.sooner.notified() => {}
                    () = tx.closed() => return,
                }
            }
        });
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn each_object_waits_once_for_its_latest_wish_and_comes_due_in_order() {
        let wakes = Wakes::default();
        wakes.wake_at("ns", "a", t("2026-12-01T00:00:00Z"));
        wakes.wake_at("ns", "b", t("2026-11-30T00:00:00Z"));
        wakes.wake_at("ns", "a", t("2026-11-29T00:00:00Z"));
        wakes.wake_at("other", "a", t("2027-01-01T00:00:00Z"));
        assert_eq!(wakes.len(), 3, "a rescheduled object waits once");
        assert!(wakes.due(t("2026-11-28T23:59:59Z")).is_empty());
        let due = wakes.due(t("2026-11-30T00:00:00Z"));
        assert_eq!(
            due,
            ["ns/a".into(), "ns/b".into()],
            "earliest first, its latest wish"
        );
        assert_eq!(wakes.len(), 1);
        wakes.cancel("other", "a");
        assert!(wakes.is_empty() && wakes.due(t("2030-01-01T00:00:00Z")).is_empty());
    }

    #[test]
    fn the_timer_sleeps_until_the_earliest_wake_up_at_most_a_tick() {
        let wakes = Wakes::default();
        let now = t("2026-11-24T03:00:00Z");
        assert_eq!(wakes.sleep_for(now), TICK);
        wakes.wake_at("ns", "a", t("2026-11-24T03:00:02Z"));
        assert_eq!(wakes.sleep_for(now), Duration::from_secs(2));
        assert_eq!(wakes.sleep_for(t("2026-11-24T03:00:05Z")), Duration::ZERO);
    }

    #[tokio::test]
    async fn due_objects_are_handed_to_the_stream() {
        use futures::StreamExt;
        let wakes = Wakes::default();
        wakes.wake_at("ns", "past", t("2020-01-01T00:00:00Z"));
        wakes.wake_at("ns", "future", t("2100-01-01T00:00:00Z"));
        let mut due = Box::pin(wakes.due_stream::<k8s_openapi::api::core::v1::ConfigMap>());
        let first = tokio::time::timeout(Duration::from_secs(5), due.next())
            .await
            .expect("due at once")
            .expect("an object");
        assert_eq!(
            (first.name.as_str(), first.namespace.as_deref()),
            ("past", Some("ns"))
        );
        assert_eq!(wakes.len(), 1, "the future one still waits");
    }

    /// A wake-up sooner than the one the timer sleeps for wakes it (not the next look at the
    /// clock, up to a [`TICK`] late: a retry or a slot under 15 s away would come late).
    #[tokio::test]
    async fn a_sooner_wake_up_wakes_the_sleeping_timer() {
        use futures::StreamExt;
        let wakes = Wakes::default();
        wakes.wake_at("ns", "later", Utc::now() + chrono::Duration::hours(1));
        let mut due = Box::pin(wakes.due_stream::<k8s_openapi::api::core::v1::ConfigMap>());
        tokio::time::sleep(Duration::from_millis(50)).await;
        let at = Utc::now() + chrono::Duration::milliseconds(200);
        wakes.wake_at("ns", "soon", at);
        let soon = tokio::time::timeout(Duration::from_secs(5), due.next())
            .await
            .expect("woken before the next tick")
            .expect("an object");
        assert_eq!(soon.name, "soon");
        assert!(Utc::now() >= at, "not before its instant");
    }
}
