//! The Eru install's least privilege, end to end: a ServiceAccount bound to exactly what
//! `deploy/rbac.yaml` binds the operator's (its ClusterRoleBindings and RoleBindings, re-pointed:
//! other tests of this cluster add the optional controllers' roles to `eru-system/eru-operator`
//! itself) may not create Pods, create or delete Deployments, nor do anything to Pods but list
//! them, as `kubectl auth can-i` asks the API server; and the operator running as it, with its
//! default controllers, restarts a Deployment on schedule with a blocking-pod health gate asked on
//! every slot (the gate's pod list is the one thing it may do with Pods), every slot accounted
//! exactly once.

mod common;

use std::time::Duration;

use common::{
    ClusterBindings, Operator, TestNamespace, client,
    eru::{create_eru, deployment, items, settle, wait_ready},
    kubectl,
    ledger::{Workload, check_every},
    repo, wait_for,
};
use eru_operator::eru::Eru;
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use serde::Deserialize;
use serde_json::{Value, json};

/// `kubectl auth can-i VERB RESOURCE [-n NS] --as USER`: yes or no (it exits 1 on no).
fn can_i(user: &str, verb: &str, resource: &str, namespace: Option<&str>) -> bool {
    let mut args = vec!["auth", "can-i", verb, resource, "--as", user];
    match namespace {
        Some(ns) => args.extend(["-n", ns]),
        None => args.push("-A"),
    }
    let output = std::process::Command::new("kubectl")
        .args(&args)
        .output()
        .expect("kubectl on PATH");
    let answer = String::from_utf8_lossy(&output.stdout).trim().to_string();
    assert!(
        answer == "yes" || answer == "no",
        "kubectl {}: {answer}",
        args.join(" ")
    );
    answer == "yes"
}

/// The roles `deploy/rbac.yaml` binds the ServiceAccount eru-system/eru-operator to: (kind of
/// binding, namespace of a RoleBinding, the roleRef).
fn operator_bindings() -> Vec<(String, Option<String>, Value)> {
    let text = std::fs::read_to_string(repo().join("deploy/rbac.yaml")).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap())
        .filter(|o| o["kind"] == "ClusterRoleBinding" || o["kind"] == "RoleBinding")
        .filter(|o| {
            o["subjects"].as_array().into_iter().flatten().any(|s| {
                s["kind"] == "ServiceAccount" && s["name"] == "eru-operator" && s["namespace"] == "eru-system"
            })
        })
        .map(|o| {
            let namespace = o["metadata"]["namespace"].as_str().map(String::from);
            (
                o["kind"].as_str().unwrap().to_string(),
                namespace,
                o["roleRef"].clone(),
            )
        })
        .collect()
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn an_eru_install_may_restart_workloads_and_nothing_more() {
    let client = client().await;
    common::install();
    let ns = TestNamespace::create(&client, "least").await;
    let user = format!("system:serviceaccount:{}:operator", ns.name);
    kubectl(&["create", "serviceaccount", "operator", "-n", &ns.name]);

    // deploy/rbac.yaml's bindings, for this ServiceAccount
    let mut cluster_bindings = ClusterBindings(Vec::new());
    let bindings = operator_bindings();
    assert!(
        bindings.iter().any(|(_, _, r)| r["name"] == "eru-operator"),
        "deploy/rbac.yaml binds the ClusterRole eru-operator: {bindings:?}"
    );
    for (kind, namespace, role) in &bindings {
        let name = format!("{}-{}", ns.name, role["name"].as_str().unwrap());
        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": name},
            "roleRef": role,
            "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": ns.name}],
        });
        // a RoleBinding of eru-system (the leader Lease) binds here, in the operator's namespace
        let mut binding = binding;
        if kind == "RoleBinding" {
            assert_eq!(namespace.as_deref(), Some("eru-system"));
            binding["metadata"]["namespace"] = json!(ns.name);
        } else {
            cluster_bindings.0.push(name);
        }
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), binding.to_string()).unwrap();
        kubectl(&["apply", "-f", file.path().to_str().unwrap()]);
    }
    wait_for(
        "the API server to grant the bindings",
        Duration::from_secs(60),
        || async { can_i(&user, "patch", "deployments.apps", None).then_some(()) },
    )
    .await;

    // what restarts need
    for (verb, resource) in [
        ("patch", "deployments.apps"),
        ("patch", "statefulsets.apps"),
        ("patch", "daemonsets.apps"),
        ("watch", "deployments.apps"),
        ("list", "pods"),
        ("list", "poddisruptionbudgets.policy"),
        ("patch", "erus.mtsre.meitu.com"),
        ("create", "tokenreviews.authentication.k8s.io"),
    ] {
        assert!(
            can_i(&user, verb, resource, None),
            "{user} may not {verb} {resource}"
        );
    }
    // and nothing that runs a Pod, as anyone, anywhere
    for (verb, resource, namespace) in [
        ("create", "pods", None),
        ("create", "pods", Some("kube-system")),
        ("delete", "pods", None),
        ("patch", "pods", None),
        ("get", "pods", None),
        ("create", "pods/exec", None),
        ("create", "deployments.apps", None),
        ("delete", "deployments.apps", None),
        ("update", "deployments.apps", None),
        ("create", "statefulsets.apps", None),
        ("create", "daemonsets.apps", None),
        ("create", "jobs.batch", None),
        ("get", "secrets", None),
        ("create", "podsets.k8stest.justin0u0.com", None),
        ("create", "serviceaccounts/token", None),
    ] {
        assert!(
            !can_i(&user, verb, resource, namespace),
            "{user} may {verb} {resource} in {namespace:?}"
        );
    }
    // the whole list, as docs/operations.md shows it
    let list = kubectl(&["auth", "can-i", "--list", "--as", &user, "-n", &ns.name]);
    println!("kubectl auth can-i --list --as {user} -n {}:\n{list}", ns.name);
    let pods: Vec<&str> = list.lines().filter(|l| l.starts_with("pods ")).collect();
    assert_eq!(pods.len(), 1, "{list}");
    assert!(
        pods[0].trim_end().ends_with("[list]"),
        "pods: list only: {}",
        pods[0]
    );

    // the operator as this ServiceAccount: a restart every 5 s, a blocking-pod gate on each slot
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 2, json!({})).await;
    wait_ready(&deployments, "web", 2).await;
    let mut operator =
        Operator::prepare_as(&client, &ns.name, &[], &[], None, (ns.name.as_str(), "operator")).await;
    operator.spawn().await;
    create_eru(
        &client,
        &ns.name,
        "web",
        json!({
            "schedule": "*/5 * * * * *",
            "target": {"kind": "Deployment", "name": "web"},
            "gates": {"blockingPodSelector": {"matchLabels": {"blocks-restarts": "true"}}},
        }),
    )
    .await
    .unwrap();
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    wait_for("two succeeded restarts", Duration::from_secs(90), || async {
        (items(&operator, "/history?name=web&outcome=succeeded").len() >= 2).then_some(())
    })
    .await;
    // the gate was asked and answered (its pod list is allowed): open, never unknown
    let (code, metrics) = operator.get("/metrics");
    assert_eq!(code, 200);
    let evaluations = |result: &str| -> f64 {
        let series = format!(r#"eru_gate_evaluations_total{{gate="blocking_pods",result="{result}"}} "#);
        (metrics.lines())
            .find_map(|l| l.strip_prefix(&series))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {series} in /metrics"))
    };
    assert!(evaluations("open") >= 2.0, "the gate was asked on each slot");
    assert_eq!(evaluations("unknown"), 0.0, "the gate's pod list was refused");
    let settled = settle(&erus, &operator, "web").await;
    check_every(
        &client,
        &ns.name,
        &operator,
        "web",
        Workload::Deployment("web"),
        5,
        settled,
    )
    .await;
    operator.stop();
    drop(cluster_bindings);
}
