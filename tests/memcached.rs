//! Memcached end to end, operator under `deploy/` RBAC: the seed sample, `status.nodes`, scaling,
//! drift reverted to exactly the spec, finalizer cleanup on deletion (also when the Memcached was
//! deleted while the operator was down), schema validation.

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
async fn sample_scales_and_cleans_up() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "memcached").await;
    common::install_controller("memcached");
    let _operator = Operator::start(&client, &ns.name, &["--controllers", "memcached"]).await;
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

    // (drift of the Deployment: drift_is_reverted_to_exactly_the_spec)

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
        Duration::from_secs(120),
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
            // action Finalize: the transition Event to the phase Deleting has the same reason
            e.reason.as_deref() == Some("Deleting")
                && e.action.as_deref() == Some("Finalize")
                && e.regarding.and_then(|r| r.name).as_deref() == Some("memcached-sample")
        });
    assert!(cleanup, "the finalizer's cleanup Event was emitted");
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
    let resized = chrono::Utc::now();
    memcacheds
        .patch(
            "cache",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap();
    available(&memcacheds, &pods, "cache", 2).await;
    let scaled = chrono::Utc::now();
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
    // (while the second replica starts, the Deployment is not fully available: a slot then is
    // rightly skipped `target_unhealthy`; on a loaded machine one was, and the operator's watch
    // may see the Deployment available a step or two after the Memcached said so)
    use common::ledger::{ON_SCHEDULE, Workload};
    let until = chrono::Utc::now();
    let ledger = common::ledger::every_since_created(
        &client,
        &ns.name,
        "cache",
        Workload::Deployment("cache"),
        3,
        until,
    )
    .await
    .expect(
        resized,
        scaled + chrono::Duration::seconds(6),
        &[ON_SCHEDULE, &["target_unhealthy"]].concat(),
    );
    common::ledger::check(&client, &ns.name, &operator, &ledger).await;
}

/// The image the operator runs memcached with: its default, unless this test run set
/// `MEMCACHED_IMAGE` (which the operator process inherits).
fn expected_image() -> String {
    std::env::var("MEMCACHED_IMAGE").unwrap_or_else(|_| "memcached:1.6.39-alpine".into())
}

/// The parts of a Deployment the operator manages, as stored (server defaults included): the
/// replica count, the selector, the pod template's labels, the Pod's security context, and every
/// container and init container whole.
fn managed(d: &Deployment) -> serde_json::Value {
    let d = serde_json::to_value(d).unwrap();
    let spec = &d["spec"];
    let pod = &spec["template"]["spec"];
    json!({
        "replicas": spec["replicas"],
        "selector": spec["selector"],
        "templateLabels": spec["template"]["metadata"]["labels"],
        "securityContext": pod["securityContext"],
        "initContainers": pod["initContainers"],
        "containers": pod["containers"],
    })
}

/// [`managed`] of the Deployment of the Memcached `name` of `size` (default port), written out:
/// the operator-sdk sample's Deployment, and what the API server defaults in a container.
fn expected_managed(name: &str, size: i32) -> serde_json::Value {
    let labels = json!({
        "app.kubernetes.io/name": "memcached",
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/managed-by": "eru-operator",
    });
    json!({
        "replicas": size,
        "selector": {"matchLabels": labels},
        "templateLabels": labels,
        "securityContext": {
            "runAsNonRoot": true, "runAsUser": 1001, "seccompProfile": {"type": "RuntimeDefault"}
        },
        "initContainers": null,
        "containers": [{
            "name": "memcached",
            "image": expected_image(),
            "imagePullPolicy": "IfNotPresent",
            "command": ["memcached", "-m=64", "-o", "modern", "-v"],
            "ports": [{"containerPort": 11211, "name": "memcached", "protocol": "TCP"}],
            "securityContext": {
                "runAsNonRoot": true, "runAsUser": 1001, "allowPrivilegeEscalation": false,
                "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]}
            },
            // the API server's defaults
            "resources": {},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
        }],
    })
}

/// Someone edits the Deployment a Memcached owns behind the operator's back — more replicas,
/// another image, an extra container argument — and the operator puts back exactly its spec:
/// the whole container compared, not just the replica count. The revert is journaled and is the
/// operator's own apply (its field manager, per the API server's audit log).
#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn drift_is_reverted_to_exactly_the_spec() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "memcached-drift").await;
    common::install_controller("memcached");
    let operator = Operator::start(&client, &ns.name, &["--controllers", "memcached"]).await;
    let memcacheds: Api<Memcached> = Api::namespaced(client.clone(), &ns.name);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let memcached: Memcached = serde_json::from_value(json!({
        "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "drifted"}, "spec": {"size": 2}
    }))
    .unwrap();
    memcacheds
        .create(&PostParams::default(), &memcached)
        .await
        .unwrap();
    available(&memcacheds, &pods, "drifted", 2).await;
    let expected = expected_managed("drifted", 2);
    assert_eq!(
        managed(&deployments.get("drifted").await.unwrap()),
        expected,
        "the Deployment as first applied"
    );

    let drift_at = chrono::Utc::now();
    // an extra argument both ways: appended to the command, and as the container's `args`
    // (which the container runtime appends to the command: memcached ... -v -c 4096)
    let drift = json!({"spec": {"replicas": 6, "template": {"spec": {"containers": [{
        "name": "memcached", "image": "memcached:drifted",
        "command": ["memcached", "-m=64", "-o", "modern", "-v", "-vv"], "args": ["-c", "4096"]
    }]}}}});
    let edited = deployments
        .patch("drifted", &PatchParams::default(), &Patch::Strategic(drift))
        .await
        .unwrap();
    let edited = managed(&edited);
    assert_eq!(
        (
            &edited["replicas"],
            &edited["containers"][0]["image"],
            &edited["containers"][0]["command"][5],
            &edited["containers"][0]["args"]
        ),
        (
            &json!(6),
            &json!("memcached:drifted"),
            &json!("-vv"),
            &json!(["-c", "4096"])
        ),
        "the edit landed"
    );

    // the revert: first the fields the operator compares (replicas, image, command) come back,
    // then the whole of it must be its spec again
    let started = std::time::Instant::now();
    wait_for(
        "the operator to put back replicas 2, its image and its command",
        Duration::from_secs(30),
        || async {
            let (m, e) = (managed(&deployments.get("drifted").await.ok()?), &expected);
            let back = m["replicas"] == e["replicas"]
                && m["containers"][0]["image"] == e["containers"][0]["image"]
                && m["containers"][0]["command"] == e["containers"][0]["command"];
            back.then_some(())
        },
    )
    .await;
    let reverted_in = started.elapsed();
    // wait_for with a deadline, written out to keep the last sight for the failure's diff:
    // the whole of the managed fields to be exactly the spec again
    let mut last = json!(null);
    let exact = std::time::Instant::now() + Duration::from_secs(15);
    while std::time::Instant::now() < exact {
        last = managed(&deployments.get("drifted").await.unwrap());
        if last == expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!("replicas, image and command reverted in {reverted_in:?}");
    let owners: Vec<String> = if last == expected {
        Vec::new()
    } else {
        let d = deployments.get("drifted").await.unwrap();
        (d.managed_fields().iter())
            .map(|m| {
                let fields = m.fields_v1.as_ref().map(|f| f.0.to_string()).unwrap_or_default();
                let args = fields.contains("\"f:args\"");
                format!("{:?} ({:?}) owns args: {args}", m.manager, m.operation)
            })
            .collect()
    };
    assert_eq!(
        last, expected,
        "15 s after the operator reverted replicas, image and command, the Deployment is not its spec; \
         field managers: {owners:#?}"
    );
    available(&memcacheds, &pods, "drifted", 2).await;

    let drifted = operator.get_json("/transitions?kind=Memcached&name=drifted")["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["event"] == "DeploymentDrifted");
    assert!(drifted, "the drift is journaled");
    if let Some(patches) = common::workload_patches("deployments", &ns.name, "drifted") {
        let reverts = patches
            .iter()
            .filter(|p| p.received >= drift_at && p.code == 200)
            .filter(|p| p.field_manager.as_deref() == Some("eru-operator-memcached"))
            .filter(|p| p.user == "system:serviceaccount:eru-system:eru-operator")
            .count();
        assert!(reverts >= 1, "the revert is the operator's apply: {patches:?}");
    }
}

/// The user agents that deleted the Deployment `name` in `ns`, per the API server's audit log
/// (`None` when the cluster keeps none; `common::workload_patches` reads only patches). The local
/// cluster's controller-manager authenticates as `admin`, like the tests: its user agent names
/// the controller (`.../generic-garbage-collector`).
fn deployment_deleters(ns: &str, name: &str) -> Option<Vec<String>> {
    let kubeconfig = std::path::PathBuf::from(std::env::var_os("KUBECONFIG")?);
    let text = std::fs::read_to_string(kubeconfig.parent()?.join("logs/audit.log")).ok()?;
    let deleters = text
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|e| {
            let o = &e["objectRef"];
            e["verb"] == "delete"
                && e["stage"] == "ResponseComplete"
                && o["resource"] == "deployments"
                && o["namespace"] == ns
                && o["name"] == name
        })
        .map(|e| e["userAgent"].as_str().unwrap_or_default().to_string())
        .collect();
    Some(deleters)
}

/// The Memcached deleted while the operator is down (SIGTERM): the finalizer holds it, and the
/// Deployment with it (background garbage collection waits for the owner to be gone); once the
/// operator is back, its finalizer runs. What that finalizer does is emit a `Deleting` Event and
/// remove itself — it deletes nothing: the Deployment goes by garbage collection (its
/// ownerReference). So the assertions are: no cleanup Event while the operator was down, then the
/// operator's Event for this Memcached's uid after the restart; the Memcached gone (the test never
/// touches the finalizer); the transition journaled; the restarted operator never re-applied the
/// Deployment of a Memcached being deleted; the Deployment deleted by the garbage collector, not by
/// the operator.
#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn deleted_while_the_operator_is_down_is_finalized_after_restart() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "memcached-down").await;
    common::install_controller("memcached");
    let mut operator = Operator::start(&client, &ns.name, &["--controllers", "memcached"]).await;
    let memcacheds: Api<Memcached> = Api::namespaced(client.clone(), &ns.name);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let events: Api<Event> = Api::namespaced(client.clone(), &ns.name);
    let memcached: Memcached = serde_json::from_value(json!({
        "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "orphaned"}, "spec": {"size": 2}
    }))
    .unwrap();
    memcacheds
        .create(&PostParams::default(), &memcached)
        .await
        .unwrap();
    available(&memcacheds, &pods, "orphaned", 2).await;
    let uid = memcacheds.get("orphaned").await.unwrap().uid().unwrap();
    let cleanup_events = || async {
        let all = events.list(&Default::default()).await.unwrap().items;
        all.into_iter()
            // the finalizer's Event: reason Deleting, action Finalize (the transition to the
            // phase Deleting is announced as an Event with the same reason, action
            // DeletionRequested, by whoever journals it: not the finalizer's work)
            .filter(|e| {
                e.reason.as_deref() == Some("Deleting")
                    && e.action.as_deref() == Some("Finalize")
                    && e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid.as_str())
            })
            .collect::<Vec<_>>()
    };

    operator.stop();
    memcacheds
        .delete("orphaned", &DeleteParams::default())
        .await
        .unwrap();
    // while the operator is down: marked for deletion, held by the finalizer, the Deployment kept
    let held = memcacheds.get("orphaned").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(held.finalizers(), ["cache.example.com/finalizer"]);
    assert!(deployments.get_opt("orphaned").await.unwrap().is_some());
    assert_eq!(pod_names(&pods, "orphaned").await.len(), 2);
    assert!(cleanup_events().await.is_empty(), "no cleanup while down");

    let restarted_at = chrono::Utc::now();
    let started = std::time::Instant::now();
    operator.restart().await;
    wait_for(
        "the Memcached to be gone after the restart",
        Duration::from_secs(30),
        || async { memcacheds.get_opt("orphaned").await.ok()?.is_none().then_some(()) },
    )
    .await;
    let finalized_in = started.elapsed();
    let event = wait_for(
        "the finalizer's Deleting Event",
        Duration::from_secs(30),
        || async { cleanup_events().await.into_iter().next() },
    )
    .await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.action.as_deref(), Some("Finalize"));
    assert_eq!(
        event.note.as_deref(),
        Some(
            format!(
                "Custom Resource orphaned is being deleted from the namespace {}",
                ns.name
            )
            .as_str()
        )
    );
    assert_eq!(event.reporting_controller.as_deref(), Some("eru-operator"));
    let emitted = event.event_time.as_ref().expect("an eventTime").0;
    assert!(
        emitted.as_millisecond() >= restarted_at.timestamp_millis(),
        "emitted by the restarted operator: {emitted} before {restarted_at}"
    );
    assert_eq!(cleanup_events().await.len(), 1, "one cleanup Event");
    // (the controller-manager's garbage collector, deleting the Deployment, then its ReplicaSet,
    // then its Pods: its pace, not the operator's, and slow on a loaded machine)
    wait_for(
        "the Deployment and its Pods to be garbage-collected",
        Duration::from_secs(120),
        || async {
            let gone = deployments.get_opt("orphaned").await.ok()?.is_none();
            (gone && pod_names(&pods, "orphaned").await.is_empty()).then_some(())
        },
    )
    .await;
    eprintln!("finalized {finalized_in:?} after the restart began");

    let transitions = operator.get_json("/transitions?kind=Memcached&name=orphaned")["items"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        transitions
            .iter()
            .any(|t| t["event"] == "DeletionRequested" && t["to"] == "Deleting"),
        "the deletion is journaled: {transitions:#?}"
    );
    if let Some(patches) = common::workload_patches("deployments", &ns.name, "orphaned") {
        let late: Vec<_> = patches.iter().filter(|p| p.received >= restarted_at).collect();
        assert!(
            late.is_empty(),
            "the Deployment re-applied after the restart: {late:?}"
        );
    }
    if let Some(deleters) = deployment_deleters(&ns.name, "orphaned") {
        assert!(
            deleters.len() == 1 && deleters[0].ends_with("/generic-garbage-collector"),
            "garbage collection deletes the Deployment, not the finalizer: {deleters:?}"
        );
    }
}
