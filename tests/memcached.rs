//! Memcached end to end, operator under `deploy/` RBAC: the seed sample, `status.nodes`, scaling,
//! drift reverted, finalizer cleanup on deletion, schema validation.

mod common;

use std::time::Duration;

use common::{Operator, TestNamespace, client, get_json, kubectl, wait_for};
use eru::memcached::Memcached;
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod, events::v1::Event};
use kube::{
    Api, ResourceExt,
    api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams},
};
use serde_json::json;

/// Names of the live Pods of a Memcached, sorted.
async fn pod_names(pods: &Api<Pod>, name: &str) -> Vec<String> {
    common::live_pod_names(pods, &format!("app.kubernetes.io/instance={name}")).await
}

/// Waits until the Memcached is Available at `size` with `status.nodes` equal to its live Pods.
async fn available(memcacheds: &Api<Memcached>, pods: &Api<Pod>, name: &str, size: usize) -> Vec<String> {
    wait_for(
        &format!("memcached {name} available at {size}"),
        Duration::from_secs(90),
        || async {
            let status = memcacheds.get(name).await.ok()?.status?;
            let live = pod_names(pods, name).await;
            let ok = status.phase.as_deref() == Some("Available")
                && status.nodes == live
                && live.len() == size
                && status
                    .conditions
                    .iter()
                    .any(|c| c.type_ == "Available" && c.status == "True");
            ok.then_some(live)
        },
    )
    .await
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn sample_scales_reverts_drift_and_cleans_up() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "memcached").await;
    let operator = Operator::start(&client, &ns.name, &[]).await;
    let memcacheds: Api<Memcached> = Api::namespaced(client.clone(), &ns.name);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    kubectl(&["apply", "-n", &ns.name, "-f", "deploy/samples/memcached.yaml"]);

    available(&memcacheds, &pods, "memcached-sample", 3).await;
    let d = deployments.get("memcached-sample").await.unwrap();
    let container = &d
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0];
    assert_eq!(
        container.command.clone().unwrap(),
        ["memcached", "-m=64", "-o", "modern", "-v"]
    );
    assert_eq!(container.ports.as_ref().unwrap()[0].container_port, 11211);
    assert_eq!(d.owner_references()[0].kind, "Memcached");
    let m = memcacheds.get("memcached-sample").await.unwrap();
    assert!(
        m.finalizers()
            .contains(&"cache.example.com/finalizer".to_string())
    );

    // scale up and down
    for size in [5, 2] {
        memcacheds
            .patch(
                "memcached-sample",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"size": size}})),
            )
            .await
            .unwrap();
        available(&memcacheds, &pods, "memcached-sample", size as usize).await;
    }

    // manual drift of managed fields is reverted
    let drift = json!({"spec": {"replicas": 6, "template": {"spec": {"containers": [{"name": "memcached", "image": "memcached:drifted"}]}}}});
    deployments
        .patch(
            "memcached-sample",
            &PatchParams::default(),
            &Patch::Strategic(drift),
        )
        .await
        .unwrap();
    wait_for("drift to be reverted", Duration::from_secs(60), || async {
        let d = deployments.get("memcached-sample").await.ok()?;
        let spec = d.spec?;
        let image = spec.template.spec?.containers[0].image.clone()?;
        (spec.replicas == Some(2) && image != "memcached:drifted").then_some(())
    })
    .await;
    available(&memcacheds, &pods, "memcached-sample", 2).await;
    let drifted = get_json(&operator.url("/transitions?kind=Memcached"))["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["event"] == "DeploymentDrifted");
    assert!(drifted, "the drift is journaled");

    // deletion: the finalizer's cleanup Event, then the children go
    memcacheds
        .delete("memcached-sample", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the Memcached to be gone", Duration::from_secs(30), || async {
        memcacheds
            .get_opt("memcached-sample")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    wait_for(
        "the Deployment and Pods to be garbage-collected",
        Duration::from_secs(60),
        || async {
            let gone = deployments.get_opt("memcached-sample").await.ok()?.is_none();
            (gone && pod_names(&pods, "memcached-sample").await.is_empty()).then_some(())
        },
    )
    .await;
    let events: Api<Event> = Api::namespaced(client.clone(), &ns.name);
    let cleanup = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .any(|e| {
            e.reason.as_deref() == Some("Deleting")
                && e.regarding.and_then(|r| r.name).as_deref() == Some("memcached-sample")
        });
    assert!(cleanup, "a cleanup Event was emitted");
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn negative_size_is_refused_by_the_api_server() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "memcached-bad").await;
    let resource = ApiResource::erase::<Memcached>(&());
    let raw: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &resource);
    for spec in [
        json!({"size": -1}),
        json!({"size": 1, "containerPort": 70000}),
        json!({}),
    ] {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "metadata": {"name": "bad"}, "spec": spec
        }))
        .unwrap();
        let refused = raw.create(&PostParams::default(), &object).await;
        assert!(
            matches!(refused, Err(kube::Error::Api(ref s)) if s.code == 422),
            "{spec}: {refused:?}"
        );
    }
}
