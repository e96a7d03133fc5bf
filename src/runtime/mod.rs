//! The runtime every kind shares, importing none of them: the controller [`Context`] and its
//! commit path, the [`pass`] skeleton every kind's reconcile runs on, the [`drive`]r with its
//! error policy, watch caches ([`watch`]), the Deployment view ([`deployment`]) and process
//! [`Readiness`].
//!
//! Imports point one way: `app` → kinds (`eru`, `podset`, `memcached`) → `runtime` →
//! `journal`/`metrics`/`machine`.

pub mod cache;
pub mod context;
pub mod deployment;
pub mod driver;
pub mod events;
pub mod leader;
pub mod lean;
pub mod pass;
pub mod runner;
pub mod status;
pub mod throttle;
pub mod urgent;
pub mod wakes;
pub mod watch;

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

pub use context::{Context, Settings, object_key};
pub use driver::{drive, shutdown_requested};

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta, Time};

/// Field manager for server-side apply of the operator's own objects (statuses, auto-created
/// Erus), and the controller name in Events. Each set of fields the operator applies to *other*
/// objects has a manager of its own (a restart's annotation, a Memcached's Deployment), so one
/// apply never drops or fights over another's fields.
pub const MANAGER: &str = "eru-operator";

/// The API server's message of a failed call, without the Rust wrapper text (for Events and
/// conditions, where users read it).
pub fn api_message(error: &kube::Error) -> String {
    match error {
        // API Priority and Fairness's answer is plain text, not a Status
        kube::Error::Api(status) if status.code == 429 => format!(
            "the API server throttled the request (429 Too Many Requests: {})",
            status.message.trim_end_matches('.')
        ),
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

/// A Kubernetes time as chrono's.
pub fn time_of(t: &Time) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(t.0.as_second(), t.0.subsec_nanosecond().max(0) as u32)
}

/// When the API server last recorded a change by a managedFields entry `matching` (its clock,
/// second precision), the latest if several match.
pub fn managed_at(
    meta: &ObjectMeta,
    matching: impl Fn(&ManagedFieldsEntry) -> bool,
) -> Option<DateTime<Utc>> {
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|e| matching(e))
        .filter_map(|e| e.time.as_ref().and_then(time_of))
        .max()
}

/// Whether a managedFields entry owns fields of the object's `spec` (not a subresource's).
pub fn writes_spec(entry: &ManagedFieldsEntry) -> bool {
    entry.subresource.as_deref().unwrap_or_default().is_empty()
        && top_level_fields(entry).any(|f| f == "f:spec")
}

/// The top-level keys of a managedFields entry's field set: of the set as the API server sends
/// it (a JSON object), or as a lean cache keeps it (the list of those keys, see
/// [`watch::lean_meta`]).
pub fn top_level_fields(entry: &ManagedFieldsEntry) -> impl Iterator<Item = &str> {
    use serde_json::Value;
    let fields = entry.fields_v1.as_ref().map(|f| &f.0);
    let object = fields
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|o| o.keys().map(String::as_str));
    let listed = fields
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str);
    object.chain(listed)
}

/// Readiness of the process, reported by `/readyz`.
#[derive(Clone, Debug, Default)]
pub struct Readiness {
    pub journal: Arc<AtomicBool>,
    pub crds: Arc<AtomicBool>,
    pub caches: Arc<AtomicBool>,
    /// Whether this process acts now (holds the leader Lease, or leader election is off); a
    /// standby serves reads and keeps its caches warm.
    pub leader: leader::Leadership,
}

impl Readiness {
    /// Ready once the journal is open, the CRDs are established and the watch caches synced; a
    /// standby is ready too (it serves the read API, and takes over at once).
    pub fn is_ready(&self) -> bool {
        self.journal.load(Ordering::Relaxed)
            && self.crds.load(Ordering::Relaxed)
            && self.caches.load(Ordering::Relaxed)
    }
}
