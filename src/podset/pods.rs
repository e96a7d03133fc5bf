//! The Pods a PodSet writes: what it creates, and its controller reference on those it adopts
//! or releases.

use std::collections::BTreeMap;

use futures::future::join_all;
use k8s_openapi::{
    api::core::v1::{Container, Pod, PodSpec, PodTemplateSpec},
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
};
use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::json;
use tracing::info;

use super::{
    PodSet,
    machine::{Expected, slow_start_batches},
};

/// Label tying a Pod to its PodSet (the seed's label); it is also the PodSet's selector.
pub const POD_LABEL: &str = "podset_cr";
use crate::runtime::api_message;

/// Labels every Pod of `podset` carries.
pub(super) fn pod_labels(podset: &PodSet) -> BTreeMap<String, String> {
    let mut labels = podset
        .spec
        .template
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_else(|| BTreeMap::from([("app".to_string(), "podset".to_string())]));
    labels.insert(POD_LABEL.into(), podset.name_any());
    labels
}

/// The Pod the PodSet creates: its template, or the seed's busybox `sleep 3600`.
pub fn pod_for(podset: &PodSet) -> Pod {
    let template = podset.spec.template.clone().unwrap_or_else(|| PodTemplateSpec {
        metadata: None,
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "busybox".into(),
                image: Some("busybox:1.36".into()),
                command: Some(vec!["sleep".into(), "3600".into()]),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
    });
    let template_meta = template.metadata.unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", podset.name_any())),
            namespace: podset.namespace(),
            labels: Some(pod_labels(podset)),
            annotations: template_meta.annotations,
            owner_references: podset.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: template.spec,
        status: None,
    }
}

pub(super) fn is_controller_ref(owner: &OwnerReference, podset: &PodSet) -> bool {
    owner.controller == Some(true) && Some(&owner.uid) == podset.meta().uid.as_ref()
}

/// Creates `count` Pods in slow-start batches, stopping at the first failing batch.
pub(super) async fn create_pods(
    api: &Api<Pod>,
    podset: &PodSet,
    count: usize,
    expected: &mut Expected,
    failures: &mut Vec<String>,
) {
    let pod = pod_for(podset);
    let params = PostParams::default();
    for batch in slow_start_batches(count) {
        let results = join_all((0..batch).map(|_| api.create(&params, &pod))).await;
        let mut failed = false;
        for result in results {
            match result {
                Ok(created) => {
                    expected.creates.insert(created.name_any());
                }
                Err(e) => {
                    failed = true;
                    failures.push(format!("creating pod: {}", api_message(&e)));
                }
            }
        }
        if failed {
            break;
        }
    }
    if !expected.creates.is_empty() {
        info!(podset = %podset.name_any(), created = expected.creates.len(), "created pods");
    }
}

/// Adds (or removes) this PodSet's controller reference on a Pod, guarded by its resourceVersion.
pub(super) async fn set_controller(
    api: &Api<Pod>,
    podset: &PodSet,
    name: &str,
    adopt: bool,
) -> kube::Result<()> {
    let pod = api.get(name).await?;
    let mut owners: Vec<OwnerReference> = pod
        .owner_references()
        .iter()
        .filter(|o| !is_controller_ref(o, podset))
        .cloned()
        .collect();
    if adopt {
        if pod.owner_references().iter().any(|o| o.controller == Some(true)) {
            return Ok(()); // someone else adopted it meanwhile
        }
        owners.extend(podset.controller_owner_ref(&()));
    }
    let patch = json!({"metadata": {"resourceVersion": pod.resource_version(), "ownerReferences": owners}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}
