//! The shared controller [`Context`]: clients, journal, metrics and Event recorder, and the commit
//! path by which a reconcile's decisions leave its machine — journaled first, then announced.

use std::sync::Arc;

use chrono::Utc;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Api, Client, Resource, ResourceExt,
    api::ApiResource,
    runtime::events::{Event, EventType},
};

use tokio::sync::mpsc;

use super::{
    Readiness,
    events::EventQueue,
    leader::Leadership,
    status::{StatusMemo, StatusWriter},
    urgent::Urgent,
    watch::Gone,
};
use crate::{
    Result,
    journal::{Appended, Entry, Journal, NewTransition, ObjectKey},
    machine::Transition,
    metrics::Metrics,
};

/// Operator-wide settings the reconcilers read.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Only this namespace is watched, when set.
    pub namespace: Option<String>,
    /// Schedule for Erus created from a Deployment annotation without a schedule.
    pub default_schedule: String,
    /// Image of memcached Deployments.
    pub memcached_image: String,
    /// Eru passes that run at once.
    pub concurrency: u16,
}

/// What every reconcile gets: clients and the shared journal, metrics and Event recorder.
pub struct Context {
    pub client: Client,
    pub journal: Journal,
    pub metrics: Metrics,
    /// Publishes Events off the passes' critical path.
    pub events: EventQueue,
    pub settings: Settings,
    /// Statuses written (or queued) but maybe not yet in the watch caches.
    pub statuses: Arc<StatusMemo>,
    /// Writes statuses off the passes' critical path.
    pub status_writer: StatusWriter,
    /// Restart patches in flight, which status writes and Events let go first.
    pub urgent: Urgent,
    /// Whether this process acts (holds the leader Lease); passes of a standby do nothing.
    pub leadership: Leadership,
    /// What `/readyz` reports (the journal part follows every append).
    pub readiness: Readiness,
}

/// The journal identity of an object.
pub fn object_key<K: Resource>(kind: &'static str, obj: &K) -> ObjectKey {
    ObjectKey {
        kind,
        namespace: obj.meta().namespace.clone().unwrap_or_default(),
        name: obj.meta().name.clone().unwrap_or_default(),
        uid: obj.meta().uid.clone().unwrap_or_default(),
    }
}

impl Context {
    /// An `Api` for the kind in one namespace.
    pub fn api<K>(&self, namespace: &str) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Journals one pass's `transitions` with the rest of its `entry`, in one transaction. What a
    /// replay journals again is not appended twice ([`Appended`] counts what is new).
    pub async fn journal<K>(
        &self,
        kind: &'static str,
        obj: &K,
        transitions: &[Transition],
        mut entry: Entry,
    ) -> Result<Appended>
    where
        K: Resource<DynamicType = ()>,
    {
        let object = object_key(kind, obj);
        let observed = obj.meta().resource_version.clone().unwrap_or_default();
        let now = Utc::now();
        entry
            .transitions
            .extend(transitions.iter().map(|t| NewTransition {
                object: object.clone(),
                observed: observed.clone(),
                from: t.from,
                to: t.to,
                event: t.event,
                at: now,
                detail: serde_json::json!({}),
            }));
        if entry.is_empty() {
            return Ok(Appended::default());
        }
        let timer = self.metrics.journal_write.start_timer();
        let appended = self.append(&entry).await;
        timer.observe_duration();
        appended
    }

    /// Appends `entry` to the journal; a failure (disk full, database down) turns `/readyz` and
    /// `eru_journal_up` to not ready until an append or heartbeat works again.
    pub async fn append(&self, entry: &Entry) -> Result<Appended> {
        let appended = self.journal.append(entry).await;
        self.metrics.journal_wrote(&appended, &self.readiness);
        appended
    }

    /// Counts journaled `transitions` and emits an Event for each; a replay that journaled no
    /// transition announces nothing.
    pub fn announce<K>(&self, kind: &'static str, obj: &K, transitions: &[Transition], appended: &Appended)
    where
        K: Resource<DynamicType = ()>,
    {
        if appended.transitions == 0 {
            return;
        }
        for t in transitions {
            self.metrics.count_transition(kind, t.from, t.to);
            let note = format!("{} → {} on {}", t.from, t.to, t.event);
            self.publish(obj, EventType::Normal, t.to, t.event, Some(note));
        }
    }

    /// [`journal`](Self::journal) then [`announce`](Self::announce): the whole path for kinds
    /// whose passes journal only transitions.
    pub async fn commit<K>(&self, kind: &'static str, obj: &K, transitions: &[Transition]) -> Result<()>
    where
        K: Resource<DynamicType = ()>,
    {
        let appended = self.journal(kind, obj, transitions, Entry::default()).await?;
        self.announce(kind, obj, transitions, &appended);
        Ok(())
    }

    /// Queues `status` for the object (server-side apply by the [`StatusWriter`]), unless it is
    /// what the object already has, and remembers it until the watch cache catches up. Returns at
    /// once: the write follows the pass.
    pub fn apply_status<K, S>(&self, obj: &K, known: Option<&S>, status: &S)
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
        S: serde::Serialize + PartialEq,
    {
        if known != Some(status) {
            self.write_status(obj, status);
        }
    }

    /// Queues `status` for `obj` (see [`Context::apply_status`]), whatever is known of it.
    pub fn write_status<K, S>(&self, obj: &K, status: &S)
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
        S: serde::Serialize,
    {
        self.status_writer.write(
            obj.meta().uid.as_deref().unwrap_or_default(),
            ApiResource::erase::<K>(&()),
            &obj.namespace().unwrap_or_default(),
            &obj.name_any(),
            status,
        );
    }

    /// Forgets a deleted object: its status memo and its per-object metric series.
    pub fn forget<K: Resource>(&self, kind: &'static str, obj: &K) {
        self.forget_uid(kind, obj.meta().uid.as_deref().unwrap_or_default());
    }

    /// [`Context::forget`] by uid, for an object that already left the cache.
    pub fn forget_uid(&self, kind: &'static str, uid: &str) {
        self.statuses.forget(uid);
        self.status_writer.forget(uid);
        self.metrics.forget_phase(kind, uid);
    }

    /// Forgets every object of `kind` that leaves its cache (see [`Gone`]), calling `also` for
    /// each; runs until the watch ends.
    pub async fn forget_gone(
        &self,
        kind: &'static str,
        mut gone: mpsc::UnboundedReceiver<Gone>,
        also: impl Fn(&Gone),
    ) {
        while let Some(g) = gone.recv().await {
            tracing::debug!(kind, namespace = %g.namespace, name = %g.name, "deleted: forgetting it");
            self.forget_uid(kind, &g.uid);
            also(&g);
        }
    }

    /// Queues a Kubernetes Event about `obj` (see [`EventQueue`]). Best effort: a failure is
    /// logged, never returned.
    pub fn publish<K>(&self, obj: &K, type_: EventType, reason: &str, action: &str, note: Option<String>)
    where
        K: Resource<DynamicType = ()>,
    {
        self.publish_to(obj.object_ref(&()), type_, reason, action, note);
    }

    /// [`Context::publish`] about the object `reference` names (one that may have left the
    /// cache).
    pub fn publish_to(
        &self,
        reference: ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: Option<String>,
    ) {
        let event = Event {
            type_,
            reason: reason.to_string(),
            note,
            action: action.to_string(),
            secondary: None,
        };
        self.events.publish(event, reference);
    }
}
