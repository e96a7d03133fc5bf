//! Status writes, off the critical path of a pass: a pass hands its object's new status to the
//! [`StatusWriter`] and returns at once; the writer applies the latest status of each object (a
//! newer one replaces one not yet sent), a few at a time, and retries a failed write with backoff
//! until it lands or a newer status replaces it. So when many slots are due at once, the passes'
//! restart patches reach the API server first and the statuses follow.
//!
//! Statuses are projections of the journal and the cluster: a status lost with the process is
//! computed again by the next pass, and the journal, not the status, says what is in flight.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::StreamExt;
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, Patch, PatchParams},
};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::{
    MANAGER,
    throttle::{self, Budget, Class},
    urgent::Urgent,
};
use crate::memory::shrink_after_burst;

/// Status writes in flight at once.
const CONCURRENCY: usize = 8;

/// A status waiting to be written.
#[derive(Clone, Debug)]
struct Pending {
    resource: ApiResource,
    namespace: String,
    name: String,
    /// The apply body (apiVersion, kind and status) as JSON text: during a burst thousands wait
    /// here, and a `serde_json::Value` tree takes several times the memory of its text.
    body: String,
    failures: u32,
}

/// The handle of the status writer; cheap to clone.
#[derive(Clone)]
pub struct StatusWriter {
    pending: Arc<Mutex<HashMap<String, Pending>>>,
    queue: mpsc::UnboundedSender<String>,
    urgent: Urgent,
    /// Status writes in flight (Events wait for them).
    writing: Urgent,
}

impl StatusWriter {
    /// Starts the writer with `client`; it lets the `urgent` writes in flight go first, and
    /// marks its own in `writing`.
    pub fn spawn(client: Client, urgent: Urgent, writing: Urgent) -> Self {
        let (queue, rx) = mpsc::unbounded_channel();
        let writer = Self {
            pending: Arc::default(),
            queue,
            urgent,
            writing,
        };
        tokio::spawn(writer.clone().run(client, rx));
        writer
    }

    /// Queues `status` for the object `uid` (replacing one of it not yet sent).
    pub fn write(
        &self,
        uid: &str,
        resource: ApiResource,
        namespace: &str,
        name: &str,
        status: serde_json::Value,
    ) {
        let body =
            serde_json::json!({"apiVersion": resource.api_version, "kind": resource.kind, "status": status})
                .to_string();
        let pending = Pending {
            resource,
            namespace: namespace.to_string(),
            name: name.to_string(),
            body,
            failures: 0,
        };
        let queued = self
            .pending
            .lock()
            .expect("status queue lock")
            .insert(uid.to_string(), pending)
            .is_some();
        // an object waits in the channel once, however often its status changes meanwhile: the
        // channel holds at most one entry per object (and one per failed write waiting its retry)
        if !queued {
            let _ = self.queue.send(uid.to_string());
        }
    }

    /// Statuses queued and not yet written.
    pub fn backlog(&self) -> usize {
        self.pending.lock().expect("status queue lock").len()
    }

    /// Forgets a deleted object's pending status.
    pub fn forget(&self, uid: &str) {
        let mut pending = self.pending.lock().expect("status queue lock");
        pending.remove(uid);
        shrink_after_burst(&mut pending);
    }

    /// Takes the pending status of `uid` out of the queue.
    fn take(&self, uid: &str) -> Option<Pending> {
        let mut queue = self.pending.lock().expect("status queue lock");
        let pending = queue.remove(uid);
        shrink_after_burst(&mut queue);
        pending
    }

    async fn run(self, client: Client, rx: mpsc::UnboundedReceiver<String>) {
        let uids = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|uid| (uid, rx)) });
        uids.for_each_concurrent(CONCURRENCY, |uid| {
            let (writer, client) = (self.clone(), client.clone());
            async move { writer.send(&client, uid).await }
        })
        .await;
    }

    /// Writes the pending status of `uid`, if any; a failure is queued again after a backoff
    /// unless a newer status arrived meanwhile.
    async fn send(&self, client: &Client, uid: String) {
        self.urgent.yield_to().await;
        let Some(pending) = self.take(&uid) else {
            return; // written already (the uid was queued twice), or forgotten
        };
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &pending.namespace, &pending.resource);
        let body: serde_json::Value = serde_json::from_str(&pending.body).expect("JSON this writer rendered");
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
        match result {
            Ok(_) => debug!(kind = %pending.resource.kind, name = %pending.name, "status written"),
            Err(kube::Error::Api(status)) if status.code == 404 => {} // deleted meanwhile
            Err(e) => {
                let failures = pending.failures + 1;
                let delay = Duration::from_millis(200 * (1 << failures.min(8))).min(Duration::from_secs(30));
                warn!(kind = %pending.resource.kind, name = %pending.name, error = %e, ?delay, "status write failed; retrying");
                let newer = {
                    let mut queue = self.pending.lock().expect("status queue lock");
                    let newer = queue.contains_key(&uid);
                    if !newer {
                        queue.insert(uid.clone(), Pending { failures, ..pending });
                    }
                    newer
                };
                if !newer {
                    let queue = self.queue.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        let _ = queue.send(uid);
                    });
                }
            }
        }
    }
}
