//! The workloads an Eru can target (Deployment, StatefulSet, DaemonSet): as the Eru and
//! automatic-Eru controllers cache them — what a lean type declares ([`crate::runtime::lean`])
//! and, of the metadata, only what those controllers read — and as the core sees them: each
//! kind's [`TargetView`], judged from its own status by its own `view_*` function.

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, ObjectMeta};

use super::core::run::RUN_ANNOTATION;
use super::{
    RESTART_MANAGER, RESTARTED_AT_ANNOTATION, RUN_MANAGER, TargetKind,
    core::target::{DEFAULT_ROLLOUT_TIMEOUT_SECONDS, TargetView},
};
use crate::runtime::{
    deployment::DeploymentView,
    lean::{self, DaemonSet, Deployment, StatefulSet, Template},
    managed_at, time_of,
    watch::{Watchable, lean_meta},
};

/// What the operator keeps of a workload besides what its lean type declares
/// ([`crate::runtime::lean`]): of the managedFields only the restart manager's entry (when the
/// last restart landed), the `mtsre.meitu.com/` annotations of the object and of its template; no
/// labels or owners. Only the Eru and automatic-Eru controllers read these caches.
pub fn lean_workload(meta: &mut ObjectMeta, template: Option<&mut lean::Template>) {
    // of the other managers, only the newest template writer (who undid a restart, if one did)
    let writer = template_writer(meta);
    lean_meta(meta, |e| {
        matches!(e.manager.as_deref(), Some(RESTART_MANAGER | RUN_MANAGER))
            || writer.as_ref().is_some_and(|w| is_writer(e, w))
    });
    meta.labels = None;
    meta.owner_references = None;
    ours_only(&mut meta.annotations);
    if let Some(template) = template.and_then(|t| t.metadata.as_mut())
        && let Some(annotations) = template.annotations.as_mut()
    {
        annotations.retain(|k| k.starts_with(super::ANNOTATION_PREFIX));
        if annotations.is_empty() {
            template.annotations = None;
        }
    }
    // of our managers' entries only their times are read (when the last restart landed); the
    // template writer's is marked as one
    for entry in meta.managed_fields.iter_mut().flatten() {
        let writer = writer.as_ref().is_some_and(|w| is_writer(entry, w));
        entry.fields_v1 = writer.then(|| FieldsV1(serde_json::json!([TEMPLATE_MARK])));
        entry.operation = None;
    }
}

/// How a lean cache marks the entry of the newest template writer (see [`writes_template`]).
const TEMPLATE_MARK: &str = "f:spec.f:template";

/// Whether a managedFields entry owns fields of the pod template (not through a subresource): as
/// the API server sends it, or as a lean cache marks it.
fn writes_template(entry: &ManagedFieldsEntry) -> bool {
    let fields = entry.fields_v1.as_ref().map(|f| &f.0);
    entry.subresource.as_deref().unwrap_or_default().is_empty()
        && match fields {
            Some(serde_json::Value::Object(o)) => o.get("f:spec").and_then(|s| s.get("f:template")).is_some(),
            Some(serde_json::Value::Array(keys)) => keys.iter().any(|k| k == TEMPLATE_MARK),
            _ => false,
        }
}

/// The newest writer of the pod template other than this operator's managers, and when.
fn template_writer(meta: &ObjectMeta) -> Option<(String, DateTime<Utc>)> {
    (meta.managed_fields.iter().flatten())
        .filter(|e| !matches!(e.manager.as_deref(), Some(RESTART_MANAGER | RUN_MANAGER)))
        .filter(|e| writes_template(e))
        .filter_map(|e| Some((e.manager.clone()?, e.time.as_ref().and_then(time_of)?)))
        .max_by_key(|(_, at)| *at)
}

fn is_writer(entry: &ManagedFieldsEntry, (manager, at): &(String, DateTime<Utc>)) -> bool {
    entry.manager.as_ref() == Some(manager) && entry.time.as_ref().and_then(time_of) == Some(*at)
}

/// Keeps only the `mtsre.meitu.com/` annotations; none is `None` (an emptied map may keep its
/// node, ~600 bytes).
fn ours_only(annotations: &mut Option<std::collections::BTreeMap<String, String>>) {
    if let Some(map) = annotations.as_mut() {
        map.retain(|k, _| k.starts_with(super::ANNOTATION_PREFIX));
        if map.is_empty() {
            *annotations = None;
        }
    }
}

/// A Deployment as cached ([`lean_workload`]; its type keeps replicas, paused, the progress
/// deadline, the status counts and what `Progressing` says).
pub fn lean_deployment(deployment: &mut lean::Deployment) {
    lean_workload(
        &mut deployment.metadata,
        deployment.spec.as_mut().map(|s| &mut s.template),
    );
}

/// A StatefulSet as cached ([`lean_workload`]): replicas, the update strategy (type, partition),
/// the first ordinal and the status counts and revisions.
pub fn lean_statefulset(statefulset: &mut lean::StatefulSet) {
    lean_workload(
        &mut statefulset.metadata,
        statefulset.spec.as_mut().map(|s| &mut s.template),
    );
    if let Some(status) = statefulset.status.as_mut() {
        status.conditions = None;
    }
}

/// A DaemonSet as cached ([`lean_workload`]): the update strategy and the status counts.
pub fn lean_daemonset(daemonset: &mut lean::DaemonSet) {
    lean_workload(
        &mut daemonset.metadata,
        daemonset.spec.as_mut().map(|s| &mut s.template),
    );
    if let Some(status) = daemonset.status.as_mut() {
        status.conditions = None;
    }
}

/// A kind an Eru can target: its objects as a [`TargetView`].
pub trait Workload: Watchable {
    const KIND: TargetKind;

    /// The view of this object.
    fn view(&self) -> TargetView;

    /// Whether its controller has yet to see the latest spec (and it is not being deleted).
    fn awaits_controller(&self) -> bool;
}

/// Whether a workload controller has yet to observe the spec generation of `meta`, which is not
/// being deleted. A new object (never observed) is not behind: an Eru may be waiting for it.
fn behind(meta: &ObjectMeta, observed: Option<i64>) -> bool {
    matches!((observed, meta.generation), (Some(o), Some(g)) if o < g) && meta.deletion_timestamp.is_none()
}

impl Workload for Deployment {
    const KIND: TargetKind = TargetKind::Deployment;

    fn view(&self) -> TargetView {
        view_deployment(self)
    }

    fn awaits_controller(&self) -> bool {
        behind(
            &self.metadata,
            self.status.as_ref().and_then(|s| s.observed_generation),
        )
    }
}

impl Workload for StatefulSet {
    const KIND: TargetKind = TargetKind::StatefulSet;

    fn view(&self) -> TargetView {
        view_statefulset(self)
    }

    fn awaits_controller(&self) -> bool {
        behind(
            &self.metadata,
            self.status.as_ref().and_then(|s| s.observed_generation),
        )
    }
}

impl Workload for DaemonSet {
    const KIND: TargetKind = TargetKind::DaemonSet;

    fn view(&self) -> TargetView {
        view_daemonset(self)
    }

    fn awaits_controller(&self) -> bool {
        behind(
            &self.metadata,
            self.status.as_ref().and_then(|s| s.observed_generation),
        )
    }
}

/// A view with the restart marks of `meta` and `template` (the slot the template carries, when
/// the restart manager last wrote it) and nothing else yet.
fn marked(meta: &ObjectMeta, template: Option<&Template>) -> TargetView {
    let annotations = template
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.annotations.as_ref());
    TargetView {
        rollout_timeout_seconds: DEFAULT_ROLLOUT_TIMEOUT_SECONDS,
        template_slot: annotations
            .and_then(|a| a.get(RESTARTED_AT_ANNOTATION))
            .and_then(|v| DateTime::parse_from_rfc3339(v).ok())
            .map(|t| t.with_timezone(&Utc)),
        restart_applied_at: managed_at(meta, |e| e.manager.as_deref() == Some(RESTART_MANAGER)),
        template_run: annotations
            .and_then(|a| a.get(RUN_ANNOTATION))
            .map(str::to_string),
        run_applied_at: managed_at(meta, |e| e.manager.as_deref() == Some(RUN_MANAGER)),
        template_writer: template_writer(meta),
        generation: meta.generation,
        ..TargetView::default()
    }
}

/// Whether the controller of an object of `generation` has observed it.
fn caught_up(observed: Option<i64>, generation: Option<i64>) -> bool {
    observed >= generation
}

/// The view of a Deployment: settled when `observedGeneration` caught up and updated, ready and
/// available replicas equal `spec.replicas` with no old replica left; failed early on
/// `ProgressDeadlineExceeded`; the rollout may take `progressDeadlineSeconds`.
pub fn view_deployment(deployment: &Deployment) -> TargetView {
    let rollout = DeploymentView::of_cached(deployment);
    TargetView {
        settled: rollout.settled_at(rollout.desired),
        paused: rollout.paused,
        deadline_exceeded: rollout.deadline_exceeded,
        rollout_timeout_seconds: rollout.progress_deadline_seconds.into(),
        completed_at: rollout.available_since,
        ..marked(
            &deployment.metadata,
            deployment.spec.as_ref().map(|s| &s.template),
        )
    }
}

/// The view of a StatefulSet: settled when `observedGeneration` caught up, `updateRevision` equals
/// `currentRevision` (when both are set), and its replicas, updated, ready and available replicas
/// all equal `spec.replicas`. Not rollable with `updateStrategy` `OnDelete`, or a rolling-update
/// `partition` above its first ordinal (the pods below it would keep their old template).
pub fn view_statefulset(statefulset: &StatefulSet) -> TargetView {
    let name = statefulset.metadata.name.as_deref().unwrap_or_default();
    let spec = statefulset.spec.as_ref();
    let desired = spec.and_then(|s| s.replicas).unwrap_or(1);
    let settled = statefulset.status.as_ref().is_some_and(|s| {
        let same_revision = match (&s.update_revision, &s.current_revision) {
            (Some(update), Some(current)) => update == current,
            _ => true,
        };
        caught_up(s.observed_generation, statefulset.metadata.generation)
            && same_revision
            && s.replicas == desired
            && s.updated_replicas.unwrap_or(0) == desired
            && s.ready_replicas.unwrap_or(0) == desired
            && s.available_replicas.unwrap_or(0) == desired
    });
    let strategy = spec.and_then(|s| s.update_strategy.as_ref());
    let partition = strategy
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|r| r.partition)
        .unwrap_or(0);
    let first_ordinal = spec
        .and_then(|s| s.ordinals.as_ref())
        .and_then(|o| o.start)
        .unwrap_or(0);
    let not_rollable = if strategy.and_then(|s| s.type_.as_deref()) == Some("OnDelete") {
        Some(format!(
            "StatefulSet {name} uses updateStrategy OnDelete: a pod-template change rolls no pod"
        ))
    } else if partition > first_ordinal {
        Some(format!(
            "StatefulSet {name} uses updateStrategy RollingUpdate with partition {partition}: \
             pods below ordinal {partition} would not be restarted"
        ))
    } else {
        None
    };
    TargetView {
        settled,
        not_rollable,
        ..marked(&statefulset.metadata, spec.map(|s| &s.template))
    }
}

/// The view of a DaemonSet: settled when `observedGeneration` caught up and updated, available and
/// ready pods all equal `desiredNumberScheduled`, none unavailable. Not rollable with
/// `updateStrategy` `OnDelete`.
pub fn view_daemonset(daemonset: &DaemonSet) -> TargetView {
    let name = daemonset.metadata.name.as_deref().unwrap_or_default();
    let spec = daemonset.spec.as_ref();
    let settled = daemonset.status.as_ref().is_some_and(|s| {
        let desired = s.desired_number_scheduled;
        caught_up(s.observed_generation, daemonset.metadata.generation)
            && s.updated_number_scheduled.unwrap_or(0) == desired
            && s.number_available.unwrap_or(0) == desired
            && s.number_ready == desired
            && s.number_unavailable.unwrap_or(0) == 0
    });
    let on_delete = spec
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        == Some("OnDelete");
    TargetView {
        settled,
        not_rollable: on_delete.then(|| {
            format!("DaemonSet {name} uses updateStrategy OnDelete: a pod-template change rolls no pod")
        }),
        ..marked(&daemonset.metadata, spec.map(|s| &s.template))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eru;

    /// Leaning a Deployment never changes what a controller reads of it.
    #[test]
    fn a_lean_deployment_reads_the_same() {
        let json = serde_json::json!({
            "metadata": {"name": "web", "namespace": "shop", "generation": 4,
                "labels": {"app": "web", "team": "a"},
                "annotations": {"mtsre.meitu.com/eru": "true", "mtsre.meitu.com/eru-schedule": "H 3 * * *",
                                "deployment.kubernetes.io/revision": "3",
                                "kubectl.kubernetes.io/last-applied-configuration": "{...}"},
                "managedFields": [
                    {"manager": "eru-operator-restart", "operation": "Apply", "time": "2026-11-23T03:00:00Z",
                     "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:template": {}}}},
                    {"manager": "kubectl", "operation": "Update", "time": "2026-11-22T03:00:00Z"}]},
            "spec": {"replicas": 3, "paused": false, "progressDeadlineSeconds": 120,
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"type": "RollingUpdate"},
                "template": {"metadata": {"labels": {"app": "web"},
                                          "annotations": {"mtsre.meitu.com/restartedAt": "2026-11-23T03:00:00Z",
                                                          "prometheus.io/scrape": "true"}},
                             "spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
            "status": {"observedGeneration": 4, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3,
                "availableReplicas": 3, "conditions": [
                    {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                     "message": "Deployment has minimum availability."},
                    {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                     "message": "ReplicaSet \"web-5d4f\" has successfully progressed.",
                     "lastUpdateTime": "2026-11-23T03:00:04Z"}]}
        });
        let full: lean::Deployment = serde_json::from_value(json.clone()).unwrap();
        let api: k8s_openapi::api::apps::v1::Deployment = serde_json::from_value(json).unwrap();
        let mut lean = full.clone();
        lean_deployment(&mut lean);
        let view = crate::runtime::deployment::DeploymentView::of_cached(&lean);
        assert_eq!(view, crate::runtime::deployment::DeploymentView::of(&api));
        assert!(
            view.available_since.is_some(),
            "the last completed rollout is kept"
        );
        assert_eq!(super::view_deployment(&lean), super::view_deployment(&full));
        let desired =
            |d: &lean::Deployment| serde_json::to_value(eru::auto::desired(d, "web", "0 3 * * *")).unwrap();
        assert_eq!(desired(&lean), desired(&full));
        assert!(lean.metadata.labels.is_none());
        assert_eq!(lean.metadata.annotations.as_ref().map(|a| a.len()), Some(2));
        assert_eq!(lean.metadata.managed_fields.as_ref().map(Vec::len), Some(1));
        let template = lean.spec.as_ref().unwrap().template.clone();
        assert_eq!(template.metadata.unwrap().annotations.map(|a| a.len()), Some(1));
        let entry = &lean.metadata.managed_fields.as_ref().unwrap()[0];
        assert!(entry.fields_v1.is_none() && entry.time.is_some());
    }

    /// The managedFields and annotations of a workload as the API server sends them.
    fn workload_meta() -> serde_json::Value {
        serde_json::json!({"name": "web", "namespace": "shop", "uid": "u1", "generation": 4,
            "labels": {"app": "web"},
            "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "App", "name": "web", "uid": "o1"}],
            "annotations": {"mtsre.meitu.com/eru": "true", "mtsre.meitu.com/eru-schedule": "H 3 * * *",
                            "kubectl.kubernetes.io/last-applied-configuration": "{...}"},
            "managedFields": [
                {"manager": "eru-operator-restart", "operation": "Apply", "time": "2026-11-23T03:00:00Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:template": {}}}},
                {"manager": "kubectl", "operation": "Update", "time": "2026-11-22T03:00:00Z"}]})
    }

    fn template() -> serde_json::Value {
        serde_json::json!({"metadata": {"labels": {"app": "web"},
                                        "annotations": {"mtsre.meitu.com/restartedAt": "2026-11-23T03:00:00Z",
                                                        "prometheus.io/scrape": "true"}},
                           "spec": {"containers": [{"name": "web", "image": "nginx"}]}})
    }

    /// Leaning a StatefulSet never changes what a controller reads of it.
    #[test]
    fn a_lean_statefulset_reads_the_same() {
        for strategy in [
            serde_json::json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}),
            serde_json::json!({"type": "OnDelete"}),
            serde_json::json!({"type": "RollingUpdate"}),
        ] {
            let full: lean::StatefulSet = serde_json::from_value(serde_json::json!({
                "metadata": workload_meta(),
                "spec": {"replicas": 2, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
                    "updateStrategy": strategy, "template": template(),
                    "volumeClaimTemplates": [{"metadata": {"name": "data"}}]},
                "status": {"observedGeneration": 4, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2,
                    "availableReplicas": 2, "currentReplicas": 2, "currentRevision": "web-1",
                    "updateRevision": "web-1",
                    "conditions": [{"type": "Example", "status": "True", "message": "a long text"}]}
            }))
            .unwrap();
            let mut lean = full.clone();
            lean_statefulset(&mut lean);
            assert_eq!(super::view_statefulset(&lean), super::view_statefulset(&full));
            let desired = |s: &lean::StatefulSet| {
                serde_json::to_value(eru::auto::desired(s, "web", "0 3 * * *")).unwrap()
            };
            assert_eq!(desired(&lean), desired(&full));
            assert!(lean.metadata.labels.is_none() && lean.metadata.owner_references.is_none());
            assert_eq!(lean.metadata.annotations.as_ref().map(|a| a.len()), Some(2));
            assert_eq!(lean.metadata.managed_fields.as_ref().map(Vec::len), Some(1));
        }
    }

    /// Leaning a DaemonSet never changes what a controller reads of it.
    #[test]
    fn a_lean_daemonset_reads_the_same() {
        for strategy in [
            serde_json::json!({"type": "OnDelete"}),
            serde_json::json!({"type": "RollingUpdate"}),
        ] {
            let full: lean::DaemonSet = serde_json::from_value(serde_json::json!({
                "metadata": workload_meta(),
                "spec": {"selector": {"matchLabels": {"app": "web"}}, "updateStrategy": strategy,
                    "template": template()},
                "status": {"observedGeneration": 4, "desiredNumberScheduled": 3, "currentNumberScheduled": 3,
                    "updatedNumberScheduled": 3, "numberAvailable": 3, "numberReady": 3,
                    "numberMisscheduled": 0}
            }))
            .unwrap();
            let mut lean = full.clone();
            lean_daemonset(&mut lean);
            assert_eq!(super::view_daemonset(&lean), super::view_daemonset(&full));
            let desired = |d: &lean::DaemonSet| {
                serde_json::to_value(eru::auto::desired(d, "web", "0 3 * * *")).unwrap()
            };
            assert_eq!(desired(&lean), desired(&full));
            assert_eq!(lean.metadata.managed_fields.as_ref().map(Vec::len), Some(1));
        }
    }
}

#[cfg(test)]
mod view_tests;
