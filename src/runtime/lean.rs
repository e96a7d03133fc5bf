//! Workloads as the watch caches keep them: the metadata, the few spec fields a controller reads,
//! the pod template's metadata (not its pod spec) and the status, deserialized straight from the
//! watch. A `k8s_openapi` `Deployment` is 2,448 bytes before any of its strings, most of it the
//! inline `PodSpec` of its template that no cached reader looks at; these are a fifth of that.
//!
//! The field names are `k8s_openapi`'s, so code reading a cached object reads it the same way.
//! Anything not declared here is dropped by the deserializer; writes go through the full types.

use k8s_openapi::{
    api::apps::v1 as apps,
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time},
};
use serde::{Deserialize, Deserializer, Serialize};

/// The pod template: its annotations only.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct Template {
    pub metadata: Option<TemplateMeta>,
}

/// The pod template's metadata: its annotations only.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct TemplateMeta {
    pub annotations: Option<Annotations>,
}

/// Annotations as a list of pairs: a cache keeps one or two per object, and a `BTreeMap` with
/// one entry takes a whole B-tree node (~600 bytes; 6 MB over 10,000 restarted Deployments).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Annotations(Vec<(Box<str>, Box<str>)>);

impl Annotations {
    /// The value of annotation `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| &**k == key).map(|(_, v)| &**v)
    }

    /// Keeps the annotations whose key `keep` accepts, and gives the rest's room back.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.0.retain(|(k, _)| keep(k));
        self.0.shrink_to_fit();
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'de> Deserialize<'de> for Annotations {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Pairs;
        impl<'de> serde::de::Visitor<'de> for Pairs {
            type Value = Annotations;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of annotations")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Annotations, A::Error> {
                let mut pairs = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, String>()? {
                    pairs.push((k.into_boxed_str(), v.into_boxed_str()));
                }
                Ok(Annotations(pairs))
            }
        }
        deserializer.deserialize_map(Pairs)
    }
}

impl Serialize for Annotations {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(k, v)| (&**k, &**v)))
    }
}

/// Implements the `k8s_openapi` traits (and so `kube::Resource`) for a lean type with the
/// constants of its full type.
macro_rules! lean_resource {
    ($lean:ident, $full:ty) => {
        impl k8s_openapi::Resource for $lean {
            const API_VERSION: &'static str = <$full as k8s_openapi::Resource>::API_VERSION;
            const GROUP: &'static str = <$full as k8s_openapi::Resource>::GROUP;
            const KIND: &'static str = <$full as k8s_openapi::Resource>::KIND;
            const VERSION: &'static str = <$full as k8s_openapi::Resource>::VERSION;
            const URL_PATH_SEGMENT: &'static str = <$full as k8s_openapi::Resource>::URL_PATH_SEGMENT;
            type Scope = <$full as k8s_openapi::Resource>::Scope;
        }

        impl k8s_openapi::Metadata for $lean {
            type Ty = ObjectMeta;

            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }

            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

/// A Deployment as cached.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct Deployment {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: Option<DeploymentSpec>,
    pub status: Option<DeploymentStatus>,
}

/// What is read of a Deployment's status: the counts, the observed generation, and of its
/// conditions only what `Progressing` says (the full conditions were ~250 bytes a Deployment in
/// six allocations).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStatus {
    pub available_replicas: Option<i32>,
    pub observed_generation: Option<i64>,
    pub ready_replicas: Option<i32>,
    pub replicas: Option<i32>,
    pub updated_replicas: Option<i32>,
    #[serde(default, rename = "conditions", deserialize_with = "progressing")]
    pub progressing: Progressing,
}

/// What a Deployment's `Progressing` condition says.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Progressing {
    /// False with reason `ProgressDeadlineExceeded`: the rollout is stuck.
    pub deadline_exceeded: bool,
    /// True with reason `NewReplicaSetAvailable` (a rollout completed): its last update.
    pub available_since: Option<Time>,
}

impl Progressing {
    /// What the `Progressing` condition among `conditions` says.
    pub fn of(conditions: &[apps::DeploymentCondition]) -> Self {
        let Some(c) = conditions.iter().find(|c| c.type_ == "Progressing") else {
            return Self::default();
        };
        let reason = c.reason.as_deref();
        Self {
            deadline_exceeded: reason == Some("ProgressDeadlineExceeded"),
            available_since: (c.status == "True" && reason == Some("NewReplicaSetAvailable"))
                .then(|| c.last_update_time.clone())
                .flatten(),
        }
    }
}

fn progressing<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Progressing, D::Error> {
    let conditions = Option::<Vec<apps::DeploymentCondition>>::deserialize(deserializer)?;
    Ok(Progressing::of(conditions.as_deref().unwrap_or_default()))
}

impl From<&apps::DeploymentStatus> for DeploymentStatus {
    fn from(status: &apps::DeploymentStatus) -> Self {
        Self {
            available_replicas: status.available_replicas,
            observed_generation: status.observed_generation,
            ready_replicas: status.ready_replicas,
            replicas: status.replicas,
            updated_replicas: status.updated_replicas,
            progressing: Progressing::of(status.conditions.as_deref().unwrap_or_default()),
        }
    }
}

/// What is read of a Deployment's spec.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentSpec {
    pub paused: Option<bool>,
    pub progress_deadline_seconds: Option<i32>,
    pub replicas: Option<i32>,
    #[serde(default)]
    pub template: Template,
}

lean_resource!(Deployment, apps::Deployment);

/// A StatefulSet as cached.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct StatefulSet {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: Option<StatefulSetSpec>,
    pub status: Option<apps::StatefulSetStatus>,
}

/// What is read of a StatefulSet's spec.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetSpec {
    pub ordinals: Option<apps::StatefulSetOrdinals>,
    pub replicas: Option<i32>,
    #[serde(default)]
    pub template: Template,
    pub update_strategy: Option<apps::StatefulSetUpdateStrategy>,
}

lean_resource!(StatefulSet, apps::StatefulSet);

/// A DaemonSet as cached.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct DaemonSet {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: Option<DaemonSetSpec>,
    pub status: Option<apps::DaemonSetStatus>,
}

/// What is read of a DaemonSet's spec.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetSpec {
    #[serde(default)]
    pub template: Template,
    pub update_strategy: Option<apps::DaemonSetUpdateStrategy>,
}

lean_resource!(DaemonSet, apps::DaemonSet);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lean_workload_is_a_fraction_of_the_full_one() {
        use std::mem::size_of;
        assert!(size_of::<Deployment>() * 4 < size_of::<apps::Deployment>());
        assert!(size_of::<StatefulSet>() * 4 < size_of::<apps::StatefulSet>());
        assert!(size_of::<DaemonSet>() * 4 < size_of::<apps::DaemonSet>());
    }

    /// Annotations read, filtered and written back as the map the API server sends.
    #[test]
    fn annotations_are_a_map_on_the_wire() {
        let json = serde_json::json!({"b": "2", "mtsre.meitu.com/restartedAt": "2026-11-22T03:00:10Z"});
        let mut annotations: Annotations = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(annotations.get("b"), Some("2"));
        assert_eq!(serde_json::to_value(&annotations).unwrap(), json);
        annotations.retain(|k| k.starts_with("mtsre.meitu.com/"));
        assert_eq!(annotations.len(), 1);
        assert_eq!(annotations.get("b"), None);
        assert_eq!(
            annotations.get("mtsre.meitu.com/restartedAt"),
            Some("2026-11-22T03:00:10Z")
        );
        assert!(serde_json::from_value::<Annotations>(serde_json::json!(["a"])).is_err());
    }

    #[test]
    fn a_lean_workload_has_the_kind_of_the_full_one() {
        use kube::Resource;
        assert_eq!(Deployment::kind(&()), "Deployment");
        assert_eq!(StatefulSet::api_version(&()), "apps/v1");
        assert_eq!(DaemonSet::plural(&()), "daemonsets");
    }
}
