//! The wake-ups of a controller run by [`super::runner`]: each object's next instant (a slot,
//! a retry, a rollout's deadline), kept compactly in one timer (~0.1 KB an object: the instant,
//! a hash of its name, `namespace/name` once). kube's controller kept them in its scheduler: two
//! copies of each object's reference, and the capacity of its largest moment (the initial listing,
//! every slot many objects share) for as long as the process ran, ~0.75 KB an object at 10,000.
//!
//! A slot, a deadline or a restart patch's retry is a wall-clock instant the pass decided
//! ([`Wakes::wake_at`]): a clock that jumps moves it. A failed pass's retry or a backlog is a
//! delay ([`Wakes::wake_in`]) on the monotonic clock: a clock stepped back an hour does not put
//! it off an hour. The timer sleeps until the earliest of both, is woken
//! when a sooner one comes, and looks at the clocks at least every [`TICK`].

use std::{
    collections::{BTreeSet, HashMap},
    sync::{Arc, Mutex},
    time::Duration,
};

use chrono::{DateTime, Utc};
use futures::Stream;
use kube::{Resource, runtime::reflector::ObjectRef};
use tokio::{
    sync::{Notify, mpsc},
    time::Instant,
};

use crate::memory::{key_hash, shrink_after_burst};

/// How often the timer looks at the clock at least.
const TICK: Duration = Duration::from_secs(15);

/// When an object wakes: at a wall-clock instant (a slot, a deadline: moved with a clock that
/// jumps) or after a delay (a failed pass's retry, a backlog: on the monotonic clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    /// Milliseconds since the epoch.
    Wall(i64),
    Mono(Instant),
}

/// The two clocks, read once.
#[derive(Clone, Copy, Debug)]
struct Now {
    /// Milliseconds since the epoch.
    wall: i64,
    mono: Instant,
}

impl Now {
    fn current() -> Self {
        Self {
            wall: Utc::now().timestamp_millis(),
            mono: Instant::now(),
        }
    }

    /// How long until `at`; zero once it passed.
    fn until(self, at: At) -> Duration {
        match at {
            At::Wall(at) => Duration::from_millis((at - self.wall).max(0) as u64),
            At::Mono(at) => at.saturating_duration_since(self.mono),
        }
    }
}

/// One waiting object.
#[derive(Debug)]
struct Waiting {
    at: At,
    /// `namespace/name`, one allocation.
    object: Box<str>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Object (by the [`key_hash`] of its namespace and name) → its wake-up.
    by_object: HashMap<u64, Waiting>,
    /// (instant, object) in order, for each clock.
    wall: BTreeSet<(i64, u64)>,
    mono: BTreeSet<(Instant, u64)>,
}

impl Inner {
    fn remove(&mut self, k: u64) -> Option<Waiting> {
        let old = self.by_object.remove(&k)?;
        match old.at {
            At::Wall(at) => self.wall.remove(&(at, k)),
            At::Mono(at) => self.mono.remove(&(at, k)),
        };
        Some(old)
    }

    /// Sets the wake-up of `k` (instead of any other); returns whether it is the soonest of its
    /// clock.
    fn set(&mut self, k: u64, at: At, namespace: &str, name: &str) -> bool {
        let object = match self.remove(k) {
            Some(old) => old.object,
            None => format!("{namespace}/{name}").into_boxed_str(),
        };
        self.by_object.insert(k, Waiting { at, object });
        match at {
            At::Wall(t) => {
                self.wall.insert((t, k));
                self.wall.first() == Some(&(t, k))
            }
            At::Mono(t) => {
                self.mono.insert((t, k));
                self.mono.first() == Some(&(t, k))
            }
        }
    }
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

    fn set(&self, namespace: &str, name: &str, at: At) {
        let soonest = self.lock().set(key(namespace, name), at, namespace, name);
        if soonest {
            self.0.sooner.notify_one();
        }
    }

    /// Wakes the object `name` in `namespace` at the wall-clock instant `at`, instead of any
    /// other wish (a pass decides its object's next wake-up as a whole).
    pub fn wake_at(&self, namespace: &str, name: &str, at: DateTime<Utc>) {
        self.set(namespace, name, At::Wall(at.timestamp_millis()));
    }

    /// Wakes the object `name` in `namespace` within `after` (the monotonic clock), unless it
    /// wakes sooner already: a failed pass's retry never puts off a slot that comes first.
    pub fn wake_in(&self, namespace: &str, name: &str, after: Duration) {
        let now = Now::current();
        let k = key(namespace, name);
        let sooner = (self.lock().by_object.get(&k)).is_some_and(|w| now.until(w.at) <= after);
        if !sooner {
            self.set(namespace, name, At::Mono(now.mono + after));
        }
    }

    /// Forgets the wake-up of the object `name` in `namespace`, if it has one.
    pub fn cancel(&self, namespace: &str, name: &str) {
        self.lock().remove(key(namespace, name));
    }

    /// How many objects wait.
    pub fn len(&self) -> usize {
        self.lock().by_object.len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes out the objects due at `now` as `namespace/name`, earliest first on each clock.
    fn due(&self, now: Now) -> Vec<Box<str>> {
        let mut inner = self.lock();
        let mut due = Vec::new();
        // each round pops an entry, so the loops end whatever the map holds
        while inner.wall.first().is_some_and(|(at, _)| *at <= now.wall) {
            let (_, k) = inner.wall.pop_first().expect("a first entry");
            due.extend(inner.by_object.remove(&k).map(|w| w.object));
        }
        while inner.mono.first().is_some_and(|(at, _)| *at <= now.mono) {
            let (_, k) = inner.mono.pop_first().expect("a first entry");
            due.extend(inner.by_object.remove(&k).map(|w| w.object));
        }
        shrink_after_burst(&mut inner.by_object);
        due
    }

    /// How long until the earliest wake-up after `now`, at most [`TICK`].
    fn sleep_for(&self, now: Now) -> Duration {
        let inner = self.lock();
        let wall = inner.wall.first().map(|&(at, _)| now.until(At::Wall(at)));
        let mono = inner.mono.first().map(|&(at, _)| now.until(At::Mono(at)));
        [wall, mono].into_iter().flatten().fold(TICK, Duration::min)
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
                for object in wakes.due(Now::current()) {
                    // names and namespaces hold no '/'
                    let (namespace, name) = object.split_once('/').unwrap_or(("", &object));
                    if tx.send(ObjectRef::<K>::new(name).within(namespace)).is_err() {
                        return;
                    }
                }
                tokio::select! {
                    () = tokio::time::sleep(wakes.sleep_for(Now::current())) => {}
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

    /// The clocks at the wall-clock instant `s` (the monotonic one now).
    fn wall(s: &str) -> Now {
        Now {
            wall: t(s).timestamp_millis(),
            mono: Instant::now(),
        }
    }

    #[test]
    fn each_object_waits_once_for_its_latest_wish_and_comes_due_in_order() {
        let wakes = Wakes::default();
        wakes.wake_at("ns", "a", t("2026-12-01T00:00:00Z"));
        wakes.wake_at("ns", "b", t("2026-11-30T00:00:00Z"));
        wakes.wake_at("ns", "a", t("2026-11-29T00:00:00Z"));
        wakes.wake_at("other", "a", t("2027-01-01T00:00:00Z"));
        assert_eq!(wakes.len(), 3, "a rescheduled object waits once");
        assert!(!wakes.is_empty());
        assert!(wakes.due(wall("2026-11-28T23:59:59Z")).is_empty());
        let due = wakes.due(wall("2026-11-30T00:00:00Z"));
        assert_eq!(
            due,
            ["ns/a".into(), "ns/b".into()],
            "earliest first, its latest wish"
        );
        assert_eq!(wakes.len(), 1);
        wakes.cancel("other", "a");
        assert!(wakes.is_empty() && wakes.due(wall("2030-01-01T00:00:00Z")).is_empty());
    }

    #[test]
    fn the_timer_sleeps_until_the_earliest_wake_up_at_most_a_tick() {
        let wakes = Wakes::default();
        let now = wall("2026-11-24T03:00:00Z");
        assert_eq!(wakes.sleep_for(now), TICK);
        wakes.wake_at("ns", "a", t("2026-11-24T03:00:02Z"));
        assert_eq!(wakes.sleep_for(now), Duration::from_secs(2));
        assert_eq!(wakes.sleep_for(wall("2026-11-24T03:00:05Z")), Duration::ZERO);
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
        // the timer compares milliseconds, truncated
        let millis = Utc::now().timestamp_millis();
        assert!(millis >= at.timestamp_millis(), "not before its instant");
    }

    /// A pass's wish replaces the last one, a later one too: the earlier instant no longer wakes
    /// the object (mutation: the old entry left in the queue).
    #[test]
    fn a_later_wish_replaces_a_sooner_one() {
        let wakes = Wakes::default();
        wakes.wake_at("ns", "a", t("2026-11-30T00:00:00Z"));
        wakes.wake_at("ns", "a", t("2026-12-01T00:00:00Z"));
        assert!(wakes.due(wall("2026-11-30T12:00:00Z")).is_empty());
        assert_eq!(wakes.due(wall("2026-12-01T00:00:00Z")), ["ns/a".into()]);
        assert!(wakes.is_empty());
    }

    /// A delay keeps a sooner wish (a failed pass's retry never puts off a slot due first) and
    /// replaces a later one; it runs on the monotonic clock, so a wall clock stepped back or
    /// forward neither delays nor hastens it.
    #[tokio::test(start_paused = true)]
    async fn a_delay_keeps_a_sooner_wish_and_ignores_the_wall_clock() {
        let wakes = Wakes::default();
        let slot = Utc::now() + chrono::Duration::seconds(1);
        wakes.wake_at("ns", "a", slot);
        wakes.wake_in("ns", "a", Duration::from_secs(5));
        let now = Now::current();
        assert!(wakes.sleep_for(now) <= Duration::from_secs(1), "the slot kept");
        wakes.wake_in("ns", "a", Duration::from_millis(10));
        let sleep = wakes.sleep_for(Now::current());
        assert!(sleep <= Duration::from_millis(10), "the sooner delay: {sleep:?}");
        let hour = 3_600_000;
        let stepped_back = |mono| Now {
            wall: Utc::now().timestamp_millis() - hour,
            mono,
        };
        assert!(
            wakes.due(stepped_back(now.mono)).is_empty(),
            "not before its delay"
        );
        let later = now.mono + Duration::from_millis(20);
        assert_eq!(
            wakes.due(stepped_back(later)),
            ["ns/a".into()],
            "due though the wall clock went back an hour"
        );
        assert!(wakes.is_empty(), "once");
    }

    /// A pass's wall-clock wish replaces a pending delay (a retry): the delay's instant no longer
    /// wakes the object.
    #[tokio::test(start_paused = true)]
    async fn a_wish_replaces_a_pending_delay() {
        let wakes = Wakes::default();
        wakes.wake_in("ns", "a", Duration::from_millis(10));
        let now = Now::current();
        wakes.wake_at("ns", "a", Utc::now() + chrono::Duration::hours(1));
        let after_the_delay = Now {
            wall: now.wall + 20,
            mono: now.mono + Duration::from_millis(20),
        };
        assert!(wakes.due(after_the_delay).is_empty());
        assert_eq!(wakes.len(), 1);
    }

    /// A delay sooner than every wake-up wakes the sleeping timer too (mutation: the monotonic
    /// queue's "soonest" reversed, so a 5 s retry would wait for the next look at the clock).
    #[tokio::test]
    async fn a_sooner_delay_wakes_the_sleeping_timer() {
        use futures::StreamExt;
        let wakes = Wakes::default();
        wakes.wake_at("ns", "later", Utc::now() + chrono::Duration::hours(1));
        let mut due = Box::pin(wakes.due_stream::<k8s_openapi::api::core::v1::ConfigMap>());
        tokio::time::sleep(Duration::from_millis(50)).await;
        wakes.wake_in("ns", "retry", Duration::from_millis(200));
        let retry = tokio::time::timeout(Duration::from_secs(5), due.next())
            .await
            .expect("woken before the next tick")
            .expect("an object");
        assert_eq!(retry.name, "retry");
    }
}
