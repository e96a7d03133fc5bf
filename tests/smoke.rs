//! Smoke test of the local control plane itself: scheduling, kwok readiness, Deployment rollouts
//! and garbage collection behave as on a real cluster.

mod common;

use std::time::Duration;

use common::{TestNamespace, client, wait_for};
use k8s_openapi::api::{
    apps::v1::{Deployment, ReplicaSet},
    core::v1::Pod,
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn deployment_rolls_out_and_is_garbage_collected() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "smoke").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let replicasets: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns.name);
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "smoke"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "smoke"}},
            "template": {
                "metadata": {"labels": {"app": "smoke"}},
                "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}
            }
        }
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let selector = ListParams::default().labels("app=smoke");

    // 3 Pods scheduled on kwok nodes and Ready
    wait_for("3 Ready pods", Duration::from_secs(60), || async {
        let list = pods.list(&selector).await.ok()?;
        (list.items.iter().filter(|p| ready(p)).count() == 3).then_some(())
    })
    .await;

    // a pod-template annotation starts a rollout to a new ReplicaSet
    let first_rs = replicasets.list(&selector).await.unwrap().items;
    assert_eq!(first_rs.len(), 1);
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {"smoke/restartedAt": "now"}}}}});
    let patched = deployments
        .patch("smoke", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
    let generation = patched.metadata.generation.unwrap();
    wait_for("the rollout to complete", Duration::from_secs(90), || async {
        let d = deployments.get("smoke").await.ok()?;
        let s = d.status?;
        let done = s.observed_generation? >= generation
            && s.updated_replicas == Some(3)
            && s.ready_replicas == Some(3)
            && s.available_replicas == Some(3)
            && s.replicas == Some(3);
        done.then_some(())
    })
    .await;
    let sets = replicasets.list(&selector).await.unwrap().items;
    assert_eq!(sets.len(), 2, "old and new ReplicaSet");
    let new_rs = sets.iter().find(|rs| rs.uid() != first_rs[0].uid()).unwrap();
    assert_eq!(new_rs.status.as_ref().unwrap().ready_replicas, Some(3));
    let old_rs = sets.iter().find(|rs| rs.uid() == first_rs[0].uid()).unwrap();
    assert_eq!(old_rs.spec.as_ref().unwrap().replicas, Some(0));

    // deleting the Deployment garbage-collects its ReplicaSets and Pods
    deployments
        .delete("smoke", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        "ReplicaSets and Pods to be garbage-collected",
        Duration::from_secs(120),
        || async {
            let rs = replicasets.list(&selector).await.ok()?.items.len();
            let p = pods.list(&selector).await.ok()?.items.len();
            (rs == 0 && p == 0).then_some(())
        },
    )
    .await;
}
