//! Far wake-ups, kept compactly outside kube's controller. A requeued object waits in the
//! controller's scheduler: two copies of its reference (name, namespace, uid, resource version)
//! in a map and a delay queue, ~0.75 KB an object (massif, 10,000 Erus each waiting for a yearly
//! slot). Most objects wait hours or months; they wait here instead (~0.1 KB each) and are handed
//! back to the controller [`LEAD`] before their instant, so the pass then requeues itself through
//! the scheduler to the millisecond. The instants are wall-clock times, checked at least every
//! [`TICK`]: a clock that jumps while an object waits months moves its wake-up with it.

use std::{
    collections::{BTreeSet, HashMap},
    sync::{Arc, Mutex},
    time::Duration,
};

use chrono::{DateTime, Utc};
use futures::Stream;
use kube::{Resource, runtime::reflector::ObjectRef};
use tokio::sync::mpsc;

use crate::memory::{key_hash, shrink_after_burst};

/// A wake-up at most this far ahead is left to the controller's scheduler.
pub const HORIZON: Duration = Duration::from_secs(5 * 60);

/// How long before its instant a far wake-up hands its object back to the controller.
pub const LEAD: Duration = Duration::from_secs(60);

/// How often the timer looks at the clock at least.
const TICK: Duration = Duration::from_secs(15);

/// When a pass that wants to run again at `at` should come back, seen at `now`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// Soon: requeue through the controller's scheduler in this long.
    Requeue(Duration),
    /// Far: hand the object back at this instant ([`LEAD`] before `at`).
    Far(DateTime<Utc>),
}

/// [`Wake`] for an instant `at`, seen at `now`. Pure.
pub fn wake(now: DateTime<Utc>, at: DateTime<Utc>) -> Wake {
    let ahead = (at - now).to_std().unwrap_or_default();
    if ahead <= HORIZON {
        Wake::Requeue(ahead)
    } else {
        Wake::Far(at - chrono::Duration::from_std(LEAD).expect("a minute"))
    }
}

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

/// The far wake-ups of one controller; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct FarWakes(Arc<Mutex<Inner>>);

fn key(namespace: &str, name: &str) -> u64 {
    key_hash((namespace, name))
}

impl FarWakes {
    /// Wakes the object `name` in `namespace` at `at` (instead of any earlier wish).
    pub fn wake_at(&self, namespace: &str, name: &str, at: DateTime<Utc>) {
        let mut inner = self.0.lock().expect("far wakes lock");
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
    }

    /// Forgets the wake-up of the object `name` in `namespace`, if it has one.
    pub fn cancel(&self, namespace: &str, name: &str) {
        let mut inner = self.0.lock().expect("far wakes lock");
        let k = key(namespace, name);
        if let Some(old) = inner.by_object.remove(&k) {
            inner.queue.remove(&(old.at, k));
        }
    }

    /// How many objects wait.
    pub fn len(&self) -> usize {
        self.0.lock().expect("far wakes lock").by_object.len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes out the objects due at `now`, earliest first, as `namespace/name`.
    fn due(&self, now: DateTime<Utc>) -> Vec<Box<str>> {
        let mut inner = self.0.lock().expect("far wakes lock");
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
        let inner = self.0.lock().expect("far wakes lock");
        inner.queue.first().map_or(TICK, |&(at, _)| {
            Duration::from_millis((at - now.timestamp_millis()).max(0) as u64).min(TICK)
        })
    }

    /// The objects as they come due, for `Controller::reconcile_on`. The timer runs as long as
    /// the stream is held.
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
                if tx.is_closed() {
                    return;
                }
                tokio::time::sleep(wakes.sleep_for(Utc::now())).await;
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
    fn near_instants_stay_with_the_scheduler_far_ones_come_back_a_lead_early() {
        let now = t("2026-11-24T03:00:00Z");
        assert_eq!(
            wake(now, t("2026-11-24T03:00:00.250Z")),
            Wake::Requeue(Duration::from_millis(250))
        );
        assert_eq!(
            wake(now, t("2026-11-24T02:59:00Z")),
            Wake::Requeue(Duration::ZERO)
        );
        assert_eq!(
            wake(now, t("2026-11-24T03:05:00Z")),
            Wake::Requeue(HORIZON),
            "the horizon itself is near"
        );
        assert_eq!(
            wake(now, t("2027-01-01T00:00:00Z")),
            Wake::Far(t("2026-12-31T23:59:00Z"))
        );
    }

    #[test]
    fn each_object_waits_once_for_its_latest_wish_and_comes_due_in_order() {
        let wakes = FarWakes::default();
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
        let wakes = FarWakes::default();
        let now = t("2026-11-24T03:00:00Z");
        assert_eq!(wakes.sleep_for(now), TICK);
        wakes.wake_at("ns", "a", t("2026-11-24T03:00:02Z"));
        assert_eq!(wakes.sleep_for(now), Duration::from_secs(2));
        assert_eq!(wakes.sleep_for(t("2026-11-24T03:00:05Z")), Duration::ZERO);
    }

    #[tokio::test]
    async fn due_objects_are_handed_to_the_stream() {
        use futures::StreamExt;
        let wakes = FarWakes::default();
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
}
