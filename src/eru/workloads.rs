//! The workloads as the Eru and automatic-Eru controllers cache them: what a lean type declares
//! ([`crate::runtime::lean`]) and, of the metadata, only what those controllers read.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::runtime::{lean, watch::lean_meta};

/// What the operator keeps of a workload besides what its lean type declares
/// ([`crate::runtime::lean`]): of the managedFields only the restart manager's entry (when the
/// last restart landed), the `mtsre.meitu.com/` annotations of the object and of its template; no
/// labels or owners. Only the Eru and automatic-Eru controllers read these caches.
pub fn lean_workload(meta: &mut ObjectMeta, template: Option<&mut lean::Template>) {
    lean_meta(meta, |e| e.manager.as_deref() == Some(super::RESTART_MANAGER));
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
    // of the restart manager's entry only its time is read (when the last restart landed)
    for entry in meta.managed_fields.iter_mut().flatten() {
        entry.fields_v1 = None;
        entry.operation = None;
    }
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
        assert_eq!(
            eru::target::view_deployment(&lean),
            eru::target::view_deployment(&full)
        );
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
            assert_eq!(
                eru::target::view_statefulset(&lean),
                eru::target::view_statefulset(&full)
            );
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
            assert_eq!(
                eru::target::view_daemonset(&lean),
                eru::target::view_daemonset(&full)
            );
            let desired = |d: &lean::DaemonSet| {
                serde_json::to_value(eru::auto::desired(d, "web", "0 3 * * *")).unwrap()
            };
            assert_eq!(desired(&lean), desired(&full));
            assert_eq!(lean.metadata.managed_fields.as_ref().map(Vec::len), Some(1));
        }
    }
}
