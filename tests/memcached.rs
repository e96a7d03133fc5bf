//! Memcached end to end, operator under `deploy/` RBAC: the seed sample, `status.nodes`, scaling,
//! drift reverted, finalizer cleanup on deletion, schema validation.

mod common;

use std::time::Duration;

use common::{Operator, TestNamespace, client, get_json, kubectl, wait_for};
use eru_operator::memcached::Memcached;
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
    common::install_controller("memcached");
    let operator = Operator::start(&client, &ns.name, &["--controllers", "memcached"]).await;
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
    common::install_controller("memcached");
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

/// An Eru can restart the Deployment a Memcached owns: the restart apply and the Memcached apply
/// have field managers of their own, so neither drops the other's fields. (With one shared
/// manager the annotation-only restart apply tried to remove the selector and containers: 422,
/// forever.)
#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn an_eru_restarts_a_memcached_deployment_and_neither_apply_undoes_the_other() {
    use eru_operator::eru::{Eru, RESTARTED_AT_ANNOTATION};
    let client = client().await;
    let ns = TestNamespace::create(&client, "memcached-eru").await;
    common::install_controller("memcached");
    let operator = Operator::start(&client, &ns.name, &["--controllers", "eru,memcached"]).await;
    let memcacheds: Api<Memcached> = Api::namespaced(client.clone(), &ns.name);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let memcached: Memcached = serde_json::from_value(json!({
        "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "cache"}, "spec": {"size": 1}
    }))
    .unwrap();
    memcacheds
        .create(&PostParams::default(), &memcached)
        .await
        .unwrap();
    available(&memcacheds, &pods, "cache", 1).await;
    let eru: Eru = serde_json::from_value(json!({
        "apiVersion": "mtsre.meitu.com/v1", "kind": "Eru", "metadata": {"name": "cache"},
        "spec": {"schedule": "*/3 * * * * *", "target": {"kind": "Deployment", "name": "cache"}}
    }))
    .unwrap();
    Api::<Eru>::namespaced(client.clone(), &ns.name)
        .create(&PostParams::default(), &eru)
        .await
        .unwrap();

    let restarted = |d: &Deployment| {
        d.spec
            .as_ref()?
            .template
            .metadata
            .as_ref()?
            .annotations
            .as_ref()?
            .get(RESTARTED_AT_ANNOTATION)
            .cloned()
    };
    let slot = wait_for(
        "a succeeded restart of the Memcached's Deployment",
        Duration::from_secs(60),
        || async {
            let history = get_json(&operator.url("/history?name=cache&outcome=succeeded&limit=1"));
            history["items"][0]["slot"].as_str().map(String::from)
        },
    )
    .await;
    let d = deployments.get("cache").await.unwrap();
    assert!(
        restarted(&d).is_some(),
        "the annotation landed on the pod template"
    );
    let managers: Vec<String> = d
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(
        managers.contains(&"eru-operator-restart".to_string()),
        "{managers:?}"
    );
    assert!(
        managers.contains(&"eru-operator-memcached".to_string()),
        "{managers:?}"
    );
    let failed = get_json(&operator.url("/history?name=cache&outcome=failed"));
    assert_eq!(
        failed["items"],
        json!([]),
        "no failed restart (the old 422), first success at {slot}"
    );

    // The Memcached's next apply (a resize) keeps the restart annotation and its own fields.
    memcacheds
        .patch(
            "cache",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap();
    available(&memcacheds, &pods, "cache", 2).await;
    let d = deployments.get("cache").await.unwrap();
    assert!(
        restarted(&d).is_some(),
        "the Memcached apply left the restart annotation alone"
    );
    let spec = d.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(2));
    assert_eq!(
        spec.template.spec.as_ref().unwrap().containers[0].name,
        "memcached"
    );
    let m = memcacheds.get("cache").await.unwrap();
    assert!(
        !m.status
            .unwrap()
            .conditions
            .iter()
            .any(|c| c.type_ == "Degraded" && c.status == "True"),
        "the Memcached never went Degraded"
    );
    // every slot from the Eru's creation on exactly once, each fired one rolled once — although
    // the Deployment keeps only its last ReplicaSets and two field managers apply it
    let until = chrono::Utc::now();
    common::ledger::check_every(
        &client,
        &ns.name,
        &operator,
        "cache",
        common::ledger::Workload::Deployment("cache"),
        3,
        until,
    )
    .await;
}
