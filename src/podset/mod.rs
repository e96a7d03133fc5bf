//! PodSet (`k8stest.justin0u0.com/v1alpha1`): a ReplicaSet-like controller owning `spec.replicas`
//! Pods.

use k8s_openapi::{api::core::v1::PodTemplateSpec, apimachinery::pkg::apis::meta::v1::Condition};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A set of identical Pods.
// kube-derive takes one `printcolumn(...)` per column; clippy reads them as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "k8stest.justin0u0.com",
    version = "v1alpha1",
    kind = "PodSet",
    plural = "podsets",
    namespaced,
    status = "PodSetStatus",
    shortname = "pset",
    category = "eru-operator",
    doc = "A ReplicaSet-like set of identical Pods.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas"
    ),
    printcolumn(name = "Desired", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(name = "Current", type_ = "integer", json_path = ".status.replicas"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct PodSetSpec {
    /// How many Pods to run.
    #[schemars(range(min = 0, max = 10_000))]
    pub replicas: i32,
    /// The Pods' template; without one, a busybox Pod running `sleep 3600`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<PodTemplateSpec>,
}

/// Observed state of a PodSet.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Pods counted as running: not being deleted, phase Pending or Running.
    #[serde(default)]
    pub replicas: i32,
    #[serde(default)]
    pub ready_replicas: i32,
    #[serde(default)]
    pub available_replicas: i32,
    /// Names of the counted Pods, sorted.
    #[serde(default)]
    pub pod_names: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `ReplicaFailure` when creating or deleting Pods fails.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

pub mod machine;
mod pods;
pub mod reconcile;
