//! Kubernetes Events, off the passes' critical path: a pass queues an Event and goes on; a few
//! tasks publish the queue through the shared recorder. (Awaited inline, the `SlotDue` Event of a
//! burst of due slots went to the API server before each restart patch, doubling the requests
//! every patch queued behind.) Events are best effort: when the API server cannot keep up and
//! the queue is full, an Event is dropped with a log line, never a pass held up.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, Recorder};
use tokio::sync::mpsc;
use tracing::warn;

use super::urgent::Urgent;

/// Events waiting at most; past that new ones are dropped.
const QUEUE: usize = 8192;
/// Events published at once.
const CONCURRENCY: usize = 8;

/// The handle of the Event publisher; cheap to clone.
#[derive(Clone, Debug)]
pub struct EventQueue {
    queue: mpsc::Sender<(Event, ObjectReference)>,
    dropped: Arc<AtomicU64>,
}

impl EventQueue {
    /// Starts publishing through `recorder`, after the `urgent` writes in flight.
    pub fn spawn(recorder: Recorder, urgent: Urgent) -> Self {
        let (tx, rx) = mpsc::channel::<(Event, ObjectReference)>(QUEUE);
        let queued = futures::stream::unfold(rx, |mut rx| async { rx.recv().await.map(|e| (e, rx)) });
        tokio::spawn(queued.for_each_concurrent(CONCURRENCY, move |(event, reference)| {
            let (recorder, urgent) = (recorder.clone(), urgent.clone());
            async move {
                urgent.yield_to().await;
                if let Err(e) = recorder.publish(&event, &reference).await {
                    warn!(object = ?reference.name, reason = %event.reason, error = %e, "could not publish Event");
                }
            }
        }));
        Self {
            queue: tx,
            dropped: Arc::default(),
        }
    }

    /// Queues `event` about `reference`.
    pub fn publish(&self, event: Event, reference: ObjectReference) {
        if let Err(e) = self.queue.try_send((event, reference)) {
            let (event, _) = e.into_inner();
            // a log line at the 1st, 2nd, 4th, 8th, ... drop: a long burst does not flood the log
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if dropped.is_power_of_two() {
                warn!(reason = %event.reason, dropped, "Event queue full; Events dropped so far");
            }
        }
    }
}
