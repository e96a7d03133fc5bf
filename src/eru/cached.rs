//! An Eru as the operator caches it. The full [`Eru`] is 800 bytes before any of its strings, and
//! its status another ~1 KB in a dozen allocations (three conditions of four strings each); at
//! 10,000 Erus that was the largest part of the operator's memory. The cache keeps what a pass
//! reads, in native form: the spec, the status without its conditions' reasons and messages
//! (every pass computes them anew) and a digest of all of it (which tells whether a new status
//! differs), and of the managedFields only when the spec was last written. Writes go through the
//! full type.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use k8s_openapi::{
    NamespaceResourceScope,
    apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time},
};
use kube::Resource;
use serde::{Deserialize, Deserializer};

use super::{Eru, EruSpec, EruStatus, HeldSlot, LastManualRun, LastRestart, PausedOnFailure};
use crate::runtime::{managed_at, status::status_digest, watch::lean_meta, writes_spec};

/// An Eru as cached.
#[derive(Clone, Debug, Deserialize)]
pub struct CachedEru {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: EruSpec,
    /// [`CachedEru::status`] rebuilds it.
    #[serde(default, rename = "status", deserialize_with = "cached_status")]
    cached_status: Option<CachedStatus>,
    /// When the spec was last written, by the managedFields (the API server's clock, seconds);
    /// set by [`CachedEru::lean`].
    #[serde(skip)]
    spec_written_at: Option<DateTime<Utc>>,
    /// Who set the run-now annotation and when they last wrote the Eru, by the managedFields
    /// (rare: boxed); set by [`CachedEru::lean`].
    #[serde(skip)]
    run_set_by: Option<Box<(String, Option<DateTime<Utc>>)>>,
    /// Who set the resume annotation, by the managedFields (rare: boxed); set by
    /// [`CachedEru::lean`].
    #[serde(skip)]
    resume_set_by: Option<Box<str>>,
}

/// The condition types the operator writes, in the order of [`CachedStatus::conditions`].
const CONDITION_TYPES: [&str; 4] = ["Ready", "ScheduleValid", "TargetFound", "Queued"];

/// An Eru's status as cached: all of it but its conditions' reasons and messages (and any
/// condition of another type than [`CONDITION_TYPES`]), and the digest of all of it.
#[derive(Clone, Debug)]
struct CachedStatus {
    /// [`status_digest`] of the whole status.
    digest: u64,
    phase: Option<Box<str>>,
    /// Per [`CONDITION_TYPES`]: whether it is True, and since when.
    conditions: [Option<(bool, Time)>; CONDITION_TYPES.len()],
    observed_generation: Option<i64>,
    current_slot: Option<DateTime<Utc>>,
    accounted_through: Option<DateTime<Utc>>,
    last_schedule_time: Option<DateTime<Utc>>,
    last_successful_time: Option<DateTime<Utc>>,
    last_failure_time: Option<DateTime<Utc>>,
    next_schedule_time: Option<DateTime<Utc>>,
    last_restart: Option<Box<LastRestart>>,
    missed_slots: i64,
    last_missed_time: Option<DateTime<Utc>>,
    /// Rare (only while a health gate holds a slot): boxed.
    held: Option<Box<HeldSlot>>,
    /// Rare: boxed.
    last_manual_run: Option<Box<LastManualRun>>,
    /// Rare: boxed.
    paused_on_failure: Option<Box<PausedOnFailure>>,
}

impl CachedStatus {
    fn of(status: EruStatus) -> Self {
        let digest = status_digest(&status);
        let mut conditions = [const { None }; CONDITION_TYPES.len()];
        for c in status.conditions {
            if let Some(at) = CONDITION_TYPES.iter().position(|t| *t == c.type_) {
                conditions[at] = Some((c.status == "True", c.last_transition_time));
            }
        }
        Self {
            digest,
            phase: status.phase.map(String::into_boxed_str),
            conditions,
            observed_generation: status.observed_generation,
            current_slot: status.current_slot,
            accounted_through: status.accounted_through,
            last_schedule_time: status.last_schedule_time,
            last_successful_time: status.last_successful_time,
            last_failure_time: status.last_failure_time,
            next_schedule_time: status.next_schedule_time,
            last_restart: status.last_restart.map(Box::new),
            missed_slots: status.missed_slots,
            last_missed_time: status.last_missed_time,
            held: status.held.map(Box::new),
            last_manual_run: status.last_manual_run.map(Box::new),
            paused_on_failure: status.paused_on_failure.map(Box::new),
        }
    }

    /// The status, its conditions with empty reasons and messages.
    fn status(&self) -> EruStatus {
        let conditions = CONDITION_TYPES
            .iter()
            .zip(&self.conditions)
            .filter_map(|(type_, c)| {
                let (status, since) = c.as_ref()?;
                Some(Condition {
                    type_: (*type_).to_string(),
                    status: if *status { "True" } else { "False" }.to_string(),
                    reason: String::new(),
                    message: String::new(),
                    last_transition_time: since.clone(),
                    observed_generation: None,
                })
            })
            .collect();
        EruStatus {
            phase: self.phase.as_deref().map(str::to_string),
            conditions,
            observed_generation: self.observed_generation,
            current_slot: self.current_slot,
            accounted_through: self.accounted_through,
            last_schedule_time: self.last_schedule_time,
            last_successful_time: self.last_successful_time,
            last_failure_time: self.last_failure_time,
            next_schedule_time: self.next_schedule_time,
            last_restart: self.last_restart.as_deref().cloned(),
            missed_slots: self.missed_slots,
            last_missed_time: self.last_missed_time,
            held: self.held.as_deref().cloned(),
            last_manual_run: self.last_manual_run.as_deref().cloned(),
            paused_on_failure: self.paused_on_failure.as_deref().cloned(),
            // not kept in the cache (each pass reads them anew; the digest covers them)
            recent: Vec::new(),
            upcoming: Vec::new(),
        }
    }
}

fn cached_status<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<CachedStatus>, D::Error> {
    Ok(Option::<EruStatus>::deserialize(deserializer)?.map(CachedStatus::of))
}

impl CachedEru {
    /// The status, if it has one, as a pass reads it: its conditions' reasons and messages are
    /// empty (see [`CachedEru::status_digest`] to tell whether a status differs).
    pub fn status(&self) -> Option<EruStatus> {
        self.cached_status.as_ref().map(CachedStatus::status)
    }

    /// The [`status_digest`] of the whole status, if it has one.
    pub fn status_digest(&self) -> Option<u64> {
        self.cached_status.as_ref().map(|s| s.digest)
    }

    /// When the spec was last written ([`writes_spec`]), if the managedFields tell.
    pub fn spec_written_at(&self) -> Option<DateTime<Utc>> {
        self.spec_written_at
            .or_else(|| managed_at(&self.metadata, writes_spec))
    }

    /// The field manager that set the run-now annotation, if the managedFields told.
    pub fn run_requested_by(&self) -> Option<&str> {
        self.run_set_by.as_deref().map(|(by, _)| by.as_str())
    }

    /// The field manager that set the resume annotation, if the managedFields told.
    pub fn resume_requested_by(&self) -> Option<&str> {
        self.resume_set_by.as_deref()
    }

    /// When that manager last wrote the Eru (the API server's clock, seconds).
    pub fn run_set_at(&self) -> Option<DateTime<Utc>> {
        self.run_set_by.as_deref().and_then(|(_, at)| *at)
    }

    /// Makes a freshly received Eru lean: no last-applied annotation, and of the managedFields
    /// only the time of the last spec write and who set the run-now annotation.
    pub fn lean(&mut self) {
        self.run_set_by = set_by(&self.metadata, super::core::run::RUN_ANNOTATION).map(Box::new);
        self.resume_set_by =
            set_by(&self.metadata, super::core::pause::RESUME_ANNOTATION).map(|(by, _)| by.into_boxed_str());
        lean_meta(&mut self.metadata, writes_spec);
        self.spec_written_at = managed_at(&self.metadata, writes_spec);
        self.metadata.managed_fields = None;
    }
}

/// The manager whose managedFields entry owns the annotation `annotation`, and that entry's time.
fn set_by(meta: &ObjectMeta, annotation: &str) -> Option<(String, Option<DateTime<Utc>>)> {
    let key = format!("f:{annotation}");
    meta.managed_fields.iter().flatten().find_map(|entry| {
        let fields = &entry.fields_v1.as_ref()?.0;
        fields.get("f:metadata")?.get("f:annotations")?.get(&key)?;
        let at = entry.time.as_ref().and_then(crate::runtime::time_of);
        Some((entry.manager.clone().unwrap_or_default(), at))
    })
}

impl Resource for CachedEru {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        Eru::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        Eru::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        Eru::version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        Eru::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    /// A cached Eru still tells when its spec was last written, by whom it is not kept.
    #[test]
    fn a_lean_eru_keeps_when_its_spec_was_written() {
        let full: crate::eru::Eru = serde_json::from_value(serde_json::json!({
            "apiVersion": "mtsre.meitu.com/v1", "kind": "Eru",
            "metadata": {"name": "web", "namespace": "shop",
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
                "managedFields": [
                    {"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "mtsre.meitu.com/v1",
                     "time": "2026-11-20T00:00:00Z", "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:metadata": {"f:annotations": {}}, "f:spec": {"f:schedule": {}}}},
                    {"manager": "kubectl-edit", "operation": "Update", "time": "2026-11-21T00:00:00Z",
                     "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {}}}},
                    {"manager": "eru-operator", "operation": "Apply", "subresource": "status",
                     "time": "2026-11-22T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]},
            "spec": {"schedule": "0 3 * * *", "target": {"kind": "Deployment", "name": "web"}}
        }))
        .unwrap();
        let mut lean: CachedEru = serde_json::from_value(serde_json::to_value(&full).unwrap()).unwrap();
        lean.lean();
        let written = crate::runtime::managed_at(&full.metadata, crate::runtime::writes_spec);
        assert_eq!(lean.spec_written_at(), written);
        assert_eq!(
            written,
            Some("2026-11-20T00:00:00Z".parse().unwrap()),
            "the spec write, not the later ones"
        );
        assert!(lean.metadata.managed_fields.is_none(), "only its time is kept");
        assert!(
            lean.metadata.annotations.is_none(),
            "only the last-applied annotation was there"
        );
    }

    use super::*;

    fn full() -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "mtsre.meitu.com/v1", "kind": "Eru",
            "metadata": {"name": "web", "namespace": "shop", "uid": "u1", "generation": 2,
                "managedFields": [
                    {"manager": "kubectl", "operation": "Update", "time": "2026-11-20T00:00:00Z",
                     "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:schedule": {}}}},
                    {"manager": "eru-operator", "operation": "Apply", "subresource": "status",
                     "time": "2026-11-22T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]},
            "spec": {"schedule": "0 3 * * *", "target": {"kind": "Deployment", "name": "web"}},
            "status": {"phase": "Waiting", "accountedThrough": "2026-11-23T03:00:00Z", "missedSlots": 2,
                "conditions": [{"type": "Ready", "status": "True", "reason": "Scheduled",
                    "message": "next restart at 2026-11-24T03:00:00Z",
                    "lastTransitionTime": "2026-11-21T00:00:00Z", "observedGeneration": 2}],
                "lastRestart": {"slot": "2026-11-23T03:00:00Z", "startedAt": "2026-11-23T03:00:00Z",
                    "outcome": "succeeded"}}
        })
    }

    /// A cached Eru reads the same spec, status and spec-write time as the full one.
    #[test]
    fn a_cached_eru_reads_like_the_full_one() {
        let eru: Eru = serde_json::from_value(full()).unwrap();
        let mut cached: CachedEru = serde_json::from_value(full()).unwrap();
        cached.lean();
        assert_eq!(cached.spec, eru.spec);
        let mut read = eru.status.clone().unwrap();
        for c in &mut read.conditions {
            (c.reason, c.message, c.observed_generation) = (String::new(), String::new(), None);
        }
        assert_eq!(
            cached.status(),
            Some(read),
            "all but the conditions' reasons and messages"
        );
        assert_eq!(cached.status_digest(), eru.status.as_ref().map(status_digest));
        assert_ne!(
            cached.status_digest(),
            cached.status().as_ref().map(status_digest),
            "the digest is of the whole status"
        );
        assert_eq!(
            cached.spec_written_at(),
            Some("2026-11-20T00:00:00Z".parse().unwrap())
        );
        assert!(cached.metadata.managed_fields.is_none());
        let bare: CachedEru = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "new"},
            "spec": {"schedule": "0 3 * * *", "target": {"kind": "Deployment", "name": "web"}}
        }))
        .unwrap();
        assert_eq!(bare.status(), None);
        assert_eq!(bare.status_digest(), None);
    }

    #[test]
    fn a_cached_eru_is_the_kind_of_the_full_one() {
        assert_eq!(CachedEru::kind(&()), "Eru");
        assert_eq!(CachedEru::api_version(&()), "mtsre.meitu.com/v1");
        assert_eq!(CachedEru::plural(&()), "erus");
        assert!(std::mem::size_of::<CachedEru>() <= std::mem::size_of::<Eru>());
    }
}
