//! Memcached (`cache.example.com/v1alpha1`): the operator-sdk tutorial's operator. `spec.size`
//! becomes an owned memcached Deployment; `status.nodes` lists its Pods.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Default memcached port.
pub const DEFAULT_PORT: i32 = 11211;

fn default_port() -> i32 {
    DEFAULT_PORT
}

/// A memcached Deployment of `size` replicas.
// kube-derive takes one `printcolumn(...)` per column; clippy reads them as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "cache.example.com",
    version = "v1alpha1",
    kind = "Memcached",
    plural = "memcacheds",
    namespaced,
    status = "MemcachedStatus",
    shortname = "mc",
    category = "eru-operator",
    doc = "A memcached Deployment managed by the operator.",
    printcolumn(name = "Size", type_ = "integer", json_path = ".spec.size"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas"),
    printcolumn(
        name = "Available",
        type_ = "integer",
        json_path = ".status.availableReplicas"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct MemcachedSpec {
    /// Number of memcached Pods.
    #[schemars(range(min = 0, max = 1_000))]
    pub size: i32,
    /// Port memcached listens on.
    #[serde(default = "default_port")]
    #[schemars(range(min = 1, max = 65_535))]
    pub container_port: i32,
}

/// Observed state of a Memcached.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemcachedStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Names of the memcached Pods, sorted.
    #[serde(default)]
    pub nodes: Vec<String>,
    #[serde(default)]
    pub ready_replicas: i32,
    #[serde(default)]
    pub available_replicas: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Available`, `Progressing`, `Degraded`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

pub mod machine;
pub mod reconcile;
