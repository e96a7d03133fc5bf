//! PodSet end to end, operator under `deploy/` RBAC: the seed sample, scaling both ways, Pod
//! replacement, adoption and release, quota failures as a condition, deletion, schema validation.

mod common;

use std::time::Duration;

use common::{Operator, TestNamespace, client, kubectl, wait_for};
use eru_operator::podset::PodSet;
use k8s_openapi::api::core::v1::{Pod, ResourceQuota};
use kube::{
    Api, Client, ResourceExt,
    api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams},
};
use serde_json::json;

/// Names of the live Pods of a PodSet, sorted.
async fn pod_names(pods: &Api<Pod>, podset: &str) -> Vec<String> {
    common::live_pod_names(pods, &format!("podset_cr={podset}")).await
}

/// Waits until the PodSet reports `n` Pods and its `podNames` are exactly the live Pods.
async fn settled(podsets: &Api<PodSet>, pods: &Api<Pod>, name: &str, n: usize) -> Vec<String> {
    wait_for(
        &format!("podset {name} at {n} pods"),
        Duration::from_secs(60),
        || async {
            let status = podsets.get(name).await.ok()?.status?;
            let live = pod_names(pods, name).await;
            let ok = status.replicas as usize == n
                && status.ready_replicas as usize == n
                && status.pod_names == live
                && live.len() == n
                && status.phase.as_deref() == Some("Stable");
            ok.then_some(live)
        },
    )
    .await
}

async fn scale(podsets: &Api<PodSet>, name: &str, replicas: i32) {
    podsets
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .unwrap();
}

fn apis(client: &Client, ns: &str) -> (Api<PodSet>, Api<Pod>) {
    (
        Api::namespaced(client.clone(), ns),
        Api::namespaced(client.clone(), ns),
    )
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn sample_scales_replaces_and_is_garbage_collected() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "podset").await;
    common::install_controller("podset");
    let operator = Operator::start(&client, &ns.name, &["--controllers", "podset"]).await;
    let (podsets, pods) = apis(&client, &ns.name);
    kubectl(&["apply", "-n", &ns.name, "-f", "deploy/samples/podset.yaml"]);

    // the seed: 2 busybox Pods, labelled and owned
    let names = settled(&podsets, &pods, "podset-sample", 2).await;
    let pod = pods.get(&names[0]).await.unwrap();
    assert_eq!(pod.labels()["app"], "podset");
    assert_eq!(pod.owner_references()[0].kind, "PodSet");
    assert_eq!(
        pod.spec.unwrap().containers[0].command.clone().unwrap(),
        ["sleep", "3600"]
    );

    scale(&podsets, "podset-sample", 7).await;
    settled(&podsets, &pods, "podset-sample", 7).await;
    scale(&podsets, "podset-sample", 3).await;
    let names = settled(&podsets, &pods, "podset-sample", 3).await;

    // a deleted Pod is replaced
    pods.delete(&names[1], &DeleteParams::default()).await.unwrap();
    let after = settled(&podsets, &pods, "podset-sample", 3).await;
    assert!(!after.contains(&names[1]), "{after:?}");

    // the journal saw the scaling: up to 7, down to 3, and back to Stable each time
    let phase = kubectl(&[
        "get",
        "podset",
        "podset-sample",
        "-n",
        &ns.name,
        "-o",
        "jsonpath={.status.phase}",
    ]);
    assert_eq!(phase, "Stable");
    // the journal saw the scaling: up to 7, down to 3, the replacement, each time back to Stable
    // (through Progressing while new Pods are not ready yet), every transition once
    let transitions = operator.chained_transitions("PodSet", "podset-sample");
    let path: Vec<&str> = transitions.iter().filter_map(|t| t["to"].as_str()).collect();
    let expected = [
        "Stable",
        "ScalingUp",
        "Stable",
        "ScalingDown",
        "Stable",
        "ScalingUp",
        "Stable",
    ];
    let mut rest = path.iter();
    for state in expected {
        assert!(
            rest.any(|s| *s == state),
            "the journal's path {path:?} does not pass through {expected:?} in order"
        );
    }

    // counted in eru_objects while it exists; a PodSet has no finalizer, and its deletion (seen
    // on the watch) must take it out of the count
    let counted = || {
        common::get(&operator.url("/metrics"))
            .1
            .lines()
            .filter(|l| l.starts_with("eru_objects{kind=\"PodSet\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    assert_eq!(counted(), 1.0);
    podsets
        .delete("podset-sample", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        "the PodSet's Pods to be garbage-collected",
        Duration::from_secs(60),
        || async { pod_names(&pods, "podset-sample").await.is_empty().then_some(()) },
    )
    .await;
    wait_for(
        "the deleted PodSet uncounted",
        Duration::from_secs(30),
        || async { (counted() == 0.0).then_some(()) },
    )
    .await;
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn orphans_are_adopted_and_relabelled_pods_released() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "podset-adopt").await;
    common::install_controller("podset");
    let (podsets, pods) = apis(&client, &ns.name);
    // an orphan that matches, before the PodSet exists
    let orphan: Pod = serde_json::from_value(json!({
        "metadata": {"name": "orphan", "labels": {"podset_cr": "adopter", "app": "podset"}},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &orphan).await.unwrap();
    let _operator = Operator::start(&client, &ns.name, &["--controllers", "podset"]).await;
    let podset: PodSet = serde_json::from_value(json!({
        "apiVersion": "k8stest.justin0u0.com/v1alpha1", "kind": "PodSet",
        "metadata": {"name": "adopter"}, "spec": {"replicas": 2}
    }))
    .unwrap();
    podsets.create(&PostParams::default(), &podset).await.unwrap();
    let names = settled(&podsets, &pods, "adopter", 2).await;
    assert!(
        names.contains(&"orphan".to_string()),
        "the orphan counts: {names:?}"
    );
    let adopted = pods.get("orphan").await.unwrap();
    assert_eq!(adopted.owner_references()[0].name, "adopter");

    // relabelling a Pod releases it and a replacement is made
    let relabel = json!({"metadata": {"labels": {"podset_cr": "elsewhere"}}});
    pods.patch("orphan", &PatchParams::default(), &Patch::Merge(relabel))
        .await
        .unwrap();
    let after = settled(&podsets, &pods, "adopter", 2).await;
    assert!(!after.contains(&"orphan".to_string()));
    wait_for(
        "the relabelled Pod to be released",
        Duration::from_secs(30),
        || async {
            pods.get("orphan")
                .await
                .ok()?
                .owner_references()
                .is_empty()
                .then_some(())
        },
    )
    .await;
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn quota_failure_is_a_condition_and_negative_replicas_are_refused() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "podset-quota").await;
    common::install_controller("podset");
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), &ns.name);
    let quota: ResourceQuota =
        serde_json::from_value(json!({"metadata": {"name": "pods"}, "spec": {"hard": {"pods": "1"}}}))
            .unwrap();
    quotas.create(&PostParams::default(), &quota).await.unwrap();
    wait_for("the quota to be counted", Duration::from_secs(30), || async {
        quotas.get("pods").await.ok()?.status?.hard.map(|_| ())
    })
    .await;
    let _operator = Operator::start(&client, &ns.name, &["--controllers", "podset"]).await;
    let (podsets, _pods) = apis(&client, &ns.name);
    let podset: PodSet = serde_json::from_value(json!({
        "apiVersion": "k8stest.justin0u0.com/v1alpha1", "kind": "PodSet",
        "metadata": {"name": "capped"}, "spec": {"replicas": 3}
    }))
    .unwrap();
    podsets.create(&PostParams::default(), &podset).await.unwrap();
    let message = wait_for("a ReplicaFailure condition", Duration::from_secs(60), || async {
        let status = podsets.get("capped").await.ok()?.status?;
        let c = status
            .conditions
            .into_iter()
            .find(|c| c.type_ == "ReplicaFailure" && c.status == "True")?;
        (status.phase.as_deref() == Some("Degraded")).then_some(c.message)
    })
    .await;
    assert!(message.contains("exceeded quota"), "the API's message: {message}");

    // the API server refuses a negative count
    let resource = ApiResource::erase::<PodSet>(&());
    let raw: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &resource);
    let negative: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "k8stest.justin0u0.com/v1alpha1", "kind": "PodSet",
        "metadata": {"name": "negative"}, "spec": {"replicas": -1}
    }))
    .unwrap();
    let refused = raw.create(&PostParams::default(), &negative).await;
    assert!(
        matches!(refused, Err(kube::Error::Api(ref s)) if s.code == 422),
        "{refused:?}"
    );
    // a malformed template is refused by the schema too (containers must be a list of objects)
    let malformed: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "k8stest.justin0u0.com/v1alpha1", "kind": "PodSet",
        "metadata": {"name": "malformed"}, "spec": {"replicas": 1, "template": {"spec": {"containers": "busybox"}}}
    }))
    .unwrap();
    let refused = raw.create(&PostParams::default(), &malformed).await;
    assert!(
        matches!(refused, Err(kube::Error::Api(ref s)) if s.code == 422),
        "{refused:?}"
    );
}
