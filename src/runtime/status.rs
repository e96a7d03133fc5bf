//! Status writes, off the critical path of a pass: a pass hands its object's new status to the
//! [`StatusWriter`] and returns at once; the writer applies the latest status of each object (a
//! newer one replaces one not yet sent), a few objects at a time but one write per object at a
//! time (two in flight could land in the wrong order and leave the older status in the cluster),
//! and retries a failed write with backoff until it lands or a newer status replaces it. So when
//! many slots are due at once, the passes' restart patches reach the API server first and the
//! statuses follow.
//!
//! Statuses are projections of the journal and the cluster: a status lost with the process is
//! computed again by the next pass, and the journal, not the status, says what is in flight.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::StreamExt;
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, Patch, PatchParams},
};
use serde::Serialize;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::{
    MANAGER,
    throttle::{self, Budget, Class},
    urgent::Urgent,
};
use crate::memory::shrink_after_burst;

mod memo;

pub use memo::{StatusMemo, status_digest};

/// Status writes in flight at once.
const CONCURRENCY: usize = 8;

/// A status waiting to be written.
#[derive(Clone, Debug)]
struct Pending {
    resource: ApiResource,
    namespace: String,
    name: String,
    /// The status as JSON text, shared with the [`StatusMemo`]: during a burst thousands wait
    /// here, and a `serde_json::Value` tree takes several times the memory of its text.
    status: Arc<str>,
    /// Its number in the [`StatusMemo`], told when it lands.
    number: u64,
    failures: u32,
}

/// The writes waiting and in flight, by object uid.
#[derive(Default)]
struct Queue {
    pending: HashMap<String, Pending>,
    /// Objects with a write in flight: a newer status of theirs waits for it to end.
    writing: HashSet<String>,
}

/// The handle of the status writer; cheap to clone.
#[derive(Clone)]
pub struct StatusWriter {
    queue_state: Arc<Mutex<Queue>>,
    queue: mpsc::UnboundedSender<String>,
    /// Told each write that lands, so passes use it until the watch cache shows it.
    memo: Arc<StatusMemo>,
    urgent: Urgent,
    /// Status writes in flight (Events wait for them).
    writing: Urgent,
}

impl StatusWriter {
    /// Starts the writer with `client`; it lets the `urgent` writes in flight go first, marks its
    /// own in `writing`, and remembers each write in `memo` until the watch cache shows it.
    pub fn spawn(client: Client, urgent: Urgent, writing: Urgent, memo: Arc<StatusMemo>) -> Self {
        let (queue, rx) = mpsc::unbounded_channel();
        let writer = Self {
            queue_state: Arc::default(),
            queue,
            memo,
            urgent,
            writing,
        };
        tokio::spawn(writer.clone().run(client, rx));
        writer
    }

    /// Queues `status` for the object `uid` (replacing one of it not yet sent); passes read it
    /// from the memo until the watch cache shows it.
    pub fn write<S: Serialize>(
        &self,
        uid: &str,
        resource: ApiResource,
        namespace: &str,
        name: &str,
        status: &S,
    ) {
        // remembered before it is queued: it may land before this returns
        let (number, status) = self.memo.remember(uid, status);
        let pending = Pending {
            resource,
            namespace: namespace.to_string(),
            name: name.to_string(),
            status,
            number,
            failures: 0,
        };
        let queued = (self.lock().pending).insert(uid.to_string(), pending).is_some();
        // an object waits in the channel once, however often its status changes meanwhile: the
        // channel holds at most one entry per object (and one per failed write waiting its retry)
        if !queued {
            let _ = self.queue.send(uid.to_string());
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue_state.lock().expect("status queue lock")
    }

    /// Statuses queued and not yet written.
    pub fn backlog(&self) -> usize {
        self.lock().pending.len()
    }

    /// Forgets a deleted object's pending status.
    pub fn forget(&self, uid: &str) {
        let mut queue = self.lock();
        queue.pending.remove(uid);
        shrink_after_burst(&mut queue.pending);
    }

    /// Takes the pending status of `uid` out of the queue, unless a write of it is in flight
    /// (which sends this one when it ends); marks it in flight.
    fn take(&self, uid: &str) -> Option<Pending> {
        let mut queue = self.lock();
        if queue.writing.contains(uid) {
            return None;
        }
        let pending = queue.pending.remove(uid)?;
        queue.writing.insert(uid.to_string());
        shrink_after_burst(&mut queue.pending);
        Some(pending)
    }

    async fn run(self, client: Client, rx: mpsc::UnboundedReceiver<String>) {
        let uids = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|uid| (uid, rx)) });
        uids.for_each_concurrent(CONCURRENCY, |uid| {
            let (writer, client) = (self.clone(), client.clone());
            async move { writer.send(&client, uid).await }
        })
        .await;
    }

    /// Writes the pending status of `uid`, if any and none of it is in flight; a failure is
    /// queued again after a backoff unless a newer status arrived meanwhile, which goes next.
    async fn send(&self, client: &Client, uid: String) {
        self.urgent.yield_to().await;
        let Some(pending) = self.take(&uid) else {
            return; // written already (the uid was queued twice), in flight, or forgotten
        };
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &pending.namespace, &pending.resource);
        let status: serde_json::Value =
            serde_json::from_str(&pending.status).expect("JSON the memo rendered");
        let body = serde_json::json!({
            "apiVersion": pending.resource.api_version,
            "kind": pending.resource.kind,
            "status": status,
        });
        let _writing = self.writing.begin();
        let budget = Budget {
            class: Class::Status,
            until: None,
        };
        let result = throttle::within(
            budget,
            api.patch_status(
                &pending.name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&body),
            ),
        )
        .await;
        let failed = match result {
            Ok(written) => {
                let version = written.metadata.resource_version.unwrap_or_default();
                self.memo.landed(&uid, pending.number, &version);
                debug!(kind = %pending.resource.kind, name = %pending.name, "status written");
                None
            }
            Err(kube::Error::Api(status)) if status.code == 404 => None, // deleted meanwhile
            Err(e) => {
                let failures = pending.failures + 1;
                let delay = Duration::from_millis(200 * (1 << failures.min(8))).min(Duration::from_secs(30));
                warn!(kind = %pending.resource.kind, name = %pending.name, error = %e, ?delay, "status write failed; retrying");
                Some((Pending { failures, ..pending }, delay))
            }
        };
        let mut queue = self.lock();
        queue.writing.remove(&uid);
        if queue.pending.contains_key(&uid) {
            // a newer status arrived meanwhile (it replaces a failed one)
            drop(queue);
            let _ = self.queue.send(uid);
        } else if let Some((pending, delay)) = failed {
            queue.pending.insert(uid.clone(), pending);
            drop(queue);
            let queue = self.queue.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let _ = queue.send(uid);
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http::{Request, Response};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::client::Body;
    use tokio::sync::Notify;

    use super::*;

    /// An API server that stores the status patches of one object in the order they arrive,
    /// answering each with the next resourceVersion; the first one is slow (held until `release`).
    #[derive(Default)]
    struct Server {
        stored: Mutex<Vec<String>>,
        in_flight: AtomicUsize,
        most_in_flight: AtomicUsize,
        first_arrived: Notify,
        release: Notify,
    }

    impl Server {
        async fn answer(&self, request: Request<Body>) -> Response<Body> {
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.most_in_flight.fetch_max(now, Ordering::SeqCst);
            let body = request.into_body().collect_bytes().await.unwrap();
            let patch: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let phase = patch["status"]["phase"].as_str().unwrap().to_string();
            if phase == "Progressing" {
                self.first_arrived.notify_one();
                self.release.notified().await;
            }
            let version = {
                let mut stored = self.stored.lock().unwrap();
                stored.push(phase);
                stored.len() + 1
            };
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            let object = serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "web", "namespace": "ns", "resourceVersion": version.to_string()},
            });
            Response::new(Body::from(object.to_string().into_bytes()))
        }
    }

    #[tokio::test]
    async fn one_write_per_object_in_flight_so_the_newest_status_lands_last() {
        let server = Arc::new(Server::default());
        let service = {
            let server = server.clone();
            tower::service_fn(move |request| {
                let server = server.clone();
                async move { Ok::<_, std::convert::Infallible>(server.answer(request).await) }
            })
        };
        let client = Client::new(service, "ns");
        let memo = Arc::new(StatusMemo::default());
        let writer = StatusWriter::spawn(client, Urgent::default(), Urgent::default(), memo.clone());
        let write = |phase: &str| {
            let status = serde_json::json!({ "phase": phase });
            writer.write("u", ApiResource::erase::<ConfigMap>(&()), "ns", "web", &status);
        };
        write("Progressing");
        server.first_arrived.notified().await;
        // the first write is in flight: the newer one must wait for it, not overtake it
        write("Stable");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            server.stored.lock().unwrap().len(),
            0,
            "nothing overtook the write in flight"
        );
        server.release.notify_one();
        for _ in 0..200 {
            if server.stored.lock().unwrap().len() == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(*server.stored.lock().unwrap(), ["Progressing", "Stable"]);
        assert_eq!(server.most_in_flight.load(Ordering::SeqCst), 1);
        // the memo waits for the cache to show the last write (version 3), not the first (2)
        let stable = Some(status_digest(&serde_json::json!({"phase": "Stable"})));
        let progressing = Some(status_digest(&serde_json::json!({"phase": "Progressing"})));
        assert_eq!(
            memo.written::<serde_json::Value>("u", "2", progressing),
            Some(serde_json::json!({"phase": "Stable"}))
        );
        for _ in 0..200 {
            memo.cache_shows("u", "3", stable);
            if memo.pending() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(memo.pending(), 0, "the cache shows the last write");
    }
}
