//! Kubernetes Events, off the passes' critical path and last in line: a pass queues an Event and
//! goes on; a few tasks publish the queue after the restart patches and the status writes in
//! flight ([`Urgent`]). Events are best effort: when the API server cannot keep up, an Event is
//! dropped — the queue is full, or the API server answered 429 (never retried:
//! [`super::throttle`]) — counted in `eru_events_dropped_total`, with a log line, never a pass
//! held up. (Awaited inline, the `SlotDue` Event of a burst of due slots went to the API server
//! before each restart patch, doubling the requests every patch queued behind.)
//!
//! The publisher is the operator's own, not kube's `Recorder`: that one keeps every Event it sent
//! for six minutes (to count repeats as a series) and sweeps the whole cache at every publish, so
//! a fleet restart of 10,000 Erus (three Events each) held ~30,000 Events — tens of MB — and spent
//! its CPU sweeping them. Here a repeat is recognised by a hash of what the Event says (the note
//! included: two slots' `SlotDue` are two Events, not one series under the first note), and at
//! most [`SERIES`] recent Events are remembered, by hash and name.

use std::{
    collections::{HashMap, VecDeque},
    hash::{Hash, Hasher},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::StreamExt;
use k8s_openapi::{
    api::{core::v1::ObjectReference, events::v1::Event as K8sEvent},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
    runtime::events::{Event, EventType},
};
use prometheus::IntCounter;
use serde_json::json;
use tokio::sync::mpsc;
use tracing::warn;

use super::{
    throttle::{self, Budget, Class},
    urgent::Urgent,
};

/// Events waiting at most; past that new ones are dropped.
const QUEUE: usize = 4096;
/// Events published at once.
const CONCURRENCY: usize = 8;
/// Recent Events remembered, to send a repeat as a count on the first.
pub const SERIES: usize = 1024;
/// How long a repeat counts on its first Event (kube's and client-go's figure).
const SERIES_TTL: Duration = Duration::from_secs(6 * 60);

/// Who reports the Events.
#[derive(Clone, Debug)]
pub struct Reporter {
    pub controller: String,
    pub instance: String,
}

/// The handle of the Event publisher; cheap to clone.
#[derive(Clone, Debug)]
pub struct EventQueue {
    queue: mpsc::Sender<(Event, ObjectReference)>,
    dropped: IntCounter,
}

/// Which writes an Event waits for.
#[derive(Clone, Debug)]
pub struct Ahead {
    /// Restart patches.
    pub urgent: Urgent,
    /// Status writes.
    pub statuses: Urgent,
}

impl EventQueue {
    /// Starts publishing as `reporter` with `client`, after the writes `ahead` in flight; Events
    /// not sent are counted in `dropped`.
    pub fn spawn(client: Client, reporter: Reporter, ahead: Ahead, dropped: IntCounter) -> Self {
        let (tx, rx) = mpsc::channel::<(Event, ObjectReference)>(QUEUE);
        let publisher = Arc::new(Publisher {
            client,
            reporter,
            recent: Mutex::default(),
        });
        let queued = futures::stream::unfold(rx, |mut rx| async { rx.recv().await.map(|e| (e, rx)) });
        let lost = dropped.clone();
        tokio::spawn(queued.for_each_concurrent(CONCURRENCY, move |(event, reference)| {
            let (publisher, ahead, lost) = (publisher.clone(), ahead.clone(), lost.clone());
            async move {
                ahead.urgent.yield_to().await;
                ahead.statuses.yield_to().await;
                let budget = Budget {
                    class: Class::Event,
                    until: None,
                };
                if let Err(e) = throttle::within(budget, publisher.publish(&event, &reference)).await {
                    lost.inc();
                    warn!(object = ?reference.name, reason = %event.reason, error = %e, "could not publish Event; dropped");
                }
            }
        }));
        Self { queue: tx, dropped }
    }

    /// Queues `event` about `reference`.
    pub fn publish(&self, event: Event, reference: ObjectReference) {
        if let Err(e) = self.queue.try_send((event, reference)) {
            let (event, _) = e.into_inner();
            self.dropped.inc();
            // a log line at the 1st, 2nd, 4th, 8th, ... drop: a long burst does not flood the log
            let dropped = self.dropped.get();
            if dropped.is_power_of_two() {
                warn!(reason = %event.reason, dropped, "Event queue full; Events dropped so far");
            }
        }
    }
}

/// An Event sent lately: its object's name and how often it was said.
#[derive(Debug)]
struct Sent {
    name: String,
    count: i32,
    last: Instant,
}

/// The last [`SERIES`] Events sent, by [`what`] they say, oldest first in `order`.
#[derive(Debug, Default)]
struct Recent {
    sent: HashMap<u64, Sent>,
    order: VecDeque<u64>,
}

impl Recent {
    /// The name and count of `key` if it was sent within [`SERIES_TTL`], counting this repeat.
    fn repeat(&mut self, key: u64, now: Instant) -> Option<(String, i32)> {
        let sent = self.sent.get_mut(&key)?;
        if now.duration_since(sent.last) > SERIES_TTL {
            return None;
        }
        sent.count += 1;
        sent.last = now;
        Some((sent.name.clone(), sent.count))
    }

    /// Remembers `key` as the Event `name` (forgetting the oldest past [`SERIES`]).
    fn remember(&mut self, key: u64, name: String, now: Instant) {
        if self
            .sent
            .insert(
                key,
                Sent {
                    name,
                    count: 1,
                    last: now,
                },
            )
            .is_none()
        {
            self.order.push_back(key);
        }
        while self.order.len() > SERIES {
            if let Some(old) = self.order.pop_front() {
                self.sent.remove(&old);
            }
        }
    }

    fn forget(&mut self, key: u64) {
        self.sent.remove(&key);
        self.order.retain(|k| *k != key);
    }
}

/// A hash of what an Event says: a repeat has the same.
fn what(event: &Event, reference: &ObjectReference) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    (event.type_ == EventType::Warning).hash(&mut h);
    (&event.reason, &event.action, &event.note).hash(&mut h);
    (
        &reference.kind,
        &reference.namespace,
        &reference.name,
        &reference.uid,
    )
        .hash(&mut h);
    h.finish()
}

struct Publisher {
    client: Client,
    reporter: Reporter,
    recent: Mutex<Recent>,
}

impl Publisher {
    /// Creates `event` about `reference` as an `events.k8s.io/v1` Event, or counts a repeat of a
    /// recent one on it (its `series`).
    async fn publish(&self, event: &Event, reference: &ObjectReference) -> kube::Result<()> {
        let namespace = reference.namespace.as_deref().unwrap_or("default");
        let events: Api<K8sEvent> = Api::namespaced(self.client.clone(), namespace);
        let key = what(event, reference);
        let now = Timestamp::now();
        let repeat = self
            .recent
            .lock()
            .expect("events lock")
            .repeat(key, Instant::now());
        if let Some((name, count)) = repeat {
            let series = json!({"series": {"count": count, "lastObservedTime": MicroTime(now)}});
            match events
                .patch(&name, &PatchParams::default(), &Patch::Merge(&series))
                .await
            {
                Ok(_) => return Ok(()),
                // expired (an Event lives an hour) or deleted: a new one
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    self.recent.lock().expect("events lock").forget(key);
                }
                Err(e) => return Err(e),
            }
        }
        let name = format!(
            "{}.{:x}",
            reference.name.as_deref().unwrap_or(&self.reporter.controller),
            now.as_nanosecond()
        );
        let k8s = K8sEvent {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.to_string()),
                ..ObjectMeta::default()
            },
            action: Some(event.action.clone()),
            reason: Some(event.reason.clone()),
            note: event.note.clone(),
            type_: Some(
                match event.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_string(),
            ),
            event_time: Some(MicroTime(now)),
            regarding: Some(reference.clone()),
            related: event.secondary.clone(),
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(self.reporter.instance.clone()),
            ..K8sEvent::default()
        };
        events.create(&PostParams::default(), &k8s).await?;
        self.recent
            .lock()
            .expect("events lock")
            .remember(key, name, Instant::now());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_count_on_the_first_event_within_the_window_and_the_memory_is_bounded() {
        let mut recent = Recent::default();
        let t0 = Instant::now();
        assert_eq!(recent.repeat(1, t0), None);
        recent.remember(1, "web.1".into(), t0);
        assert_eq!(
            recent.repeat(1, t0 + Duration::from_secs(60)),
            Some(("web.1".into(), 2))
        );
        // the window runs from the last repeat
        assert_eq!(
            recent.repeat(1, t0 + Duration::from_secs(400)),
            Some(("web.1".into(), 3))
        );
        assert_eq!(
            recent.repeat(1, t0 + Duration::from_secs(400) + SERIES_TTL * 2),
            None
        );
        // never more than SERIES remembered; the oldest go first
        for key in 2..(SERIES as u64 + 10) {
            recent.remember(key, format!("web.{key}"), t0);
        }
        assert_eq!(recent.sent.len(), SERIES);
        assert_eq!(recent.order.len(), SERIES);
        assert!(!recent.sent.contains_key(&1));
        recent.forget(SERIES as u64 + 9);
        assert_eq!(recent.sent.len(), SERIES - 1);
    }

    #[test]
    fn two_notes_are_two_events() {
        let reference = ObjectReference {
            kind: Some("Eru".into()),
            namespace: Some("a".into()),
            name: Some("web".into()),
            uid: Some("u".into()),
            ..ObjectReference::default()
        };
        let due = |note: &str| Event {
            type_: EventType::Normal,
            reason: "SlotDue".into(),
            note: Some(note.into()),
            action: "Schedule".into(),
            secondary: None,
        };
        assert_eq!(what(&due("slot 1"), &reference), what(&due("slot 1"), &reference));
        assert_ne!(what(&due("slot 1"), &reference), what(&due("slot 2"), &reference));
    }
}
