//! The install path for real: the operator's image, built from `./Dockerfile` by `hack/image.sh`,
//! installed by the chart exactly as the README's Install says, as a Pod on the real node of
//! `hack/cluster.sh up --real-node` (a kubelet, containerd, runc), restarting workloads whose Pods
//! really start, probe and serve. `hack/real-node-e2e.sh` builds the images, brings the cluster
//! up, loads the images into the node and runs this file:
//!
//! - the Pod runs the image as 65532 on a read-only root file system, Ready through its HTTPS
//!   probes, its journal on a PersistentVolume;
//! - a graceful restart of a real workload: ready replicas sampled every 100 ms never fall below
//!   `replicas - maxUnavailable`, the ledger says fired/succeeded, `/audit` read through a
//!   port-forward with a token granted `erus/history`;
//! - the operator's Pod deleted between slots: the next Pod resumes on the same journal and
//!   records the gap as `operator_down`, nothing is restarted twice.
//!
//! Environment: `ERU_IMAGE` (repository:tag of the operator's image on the node),
//! `ERU_WEB_IMAGE` (the workload's image, Debian's static busybox: `hack/image.sh web`).

mod common;

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::{
        Arc, OnceLock,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use chrono::{DateTime, Timelike, Utc};
use common::{
    ClusterBindings, Operator, TestNamespace, client,
    eru::{create_eru, created, deployment, settle, status, time, wait_ready},
    kubectl,
    ledger::{Ledger, ON_SCHEDULE, check, every},
    repo, wait_for,
};
use eru_operator::eru::Eru;
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{Node, PersistentVolumeClaim, Pod},
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{Api, Client, ResourceExt, api::ListParams};
use serde_json::{Value, json};

/// The real node's label and taint (hack/cluster.sh).
const NODE_LABEL: &str = "eru-operator/real-node";
/// The README's namespace and release.
const NS: &str = "eru-system";
const RELEASE: &str = "eru-operator";
const SELECTOR: &str = "app.kubernetes.io/name=eru-operator";
const SECOND: chrono::Duration = chrono::Duration::seconds(1);

fn image() -> (String, String) {
    let image = std::env::var("ERU_IMAGE").expect("ERU_IMAGE (repository:tag): run hack/real-node-e2e.sh");
    let (repository, tag) = image.rsplit_once(':').expect("ERU_IMAGE is repository:tag");
    (repository.to_string(), tag.to_string())
}

fn web_image() -> String {
    std::env::var("ERU_WEB_IMAGE").expect("ERU_WEB_IMAGE: run hack/real-node-e2e.sh")
}

fn run(program: &str, args: &[&str]) -> String {
    let output = Command::new(program)
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        output.status.success(),
        "{program} {} failed: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The chart installed once per test binary, as the README's Install says (the namespace, then
/// `helm install` with the image's repository and tag), with `pullPolicy: Never` (the image was
/// imported into the node, there is no registry) and the real node's placement.
fn install() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        kubectl(&["apply", "-f", "deploy/namespace.yaml"]);
        let started = Instant::now();
        helm_to("charts/eru-operator", &[]);
        println!(
            "helm install to a Ready operator Pod: {:.1} s",
            started.elapsed().as_secs_f64()
        );
    });
}

/// `helm upgrade --install` of the release to `chart` with this run's values (the image, the real
/// node's placement) and `extra` flags, then the operator's rollout waited for.
fn helm_to(chart: &str, extra: &[&str]) {
    let helm = run("hack/helm.sh", &[]).trim().to_string();
    let (repository, tag) = image();
    let placement = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        placement.path(),
        format!(
            "nodeSelector: {{{NODE_LABEL}: \"true\"}}\n\
             tolerations: [{{key: {NODE_LABEL}, operator: Exists, effect: NoSchedule}}]\n"
        ),
    )
    .unwrap();
    let (repository, tag, placement_file) = (
        format!("image.repository={repository}"),
        format!("image.tag={tag}"),
        placement.path().display().to_string(),
    );
    let mut args = vec!["upgrade", "--install", RELEASE, chart, "-n", NS];
    args.extend([
        "--set",
        &repository,
        "--set",
        &tag,
        "--set",
        "image.pullPolicy=Never",
    ]);
    args.extend(["-f", &placement_file]);
    args.extend(extra);
    run(&helm, &args);
    kubectl(&[
        "-n",
        NS,
        "rollout",
        "status",
        &format!("deployment/{RELEASE}"),
        "--timeout=180s",
    ]);
}

fn ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The operator's one Ready, live Pod.
async fn operator_pod(client: &Client) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    wait_for("a Ready operator Pod", Duration::from_secs(180), || async {
        let list = pods.list(&ListParams::default().labels(SELECTOR)).await.ok()?;
        let live: Vec<Pod> = list
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        match live.as_slice() {
            [pod] if ready(pod) => Some(pod.clone()),
            _ => None,
        }
    })
    .await
}

async fn real_node(client: &Client) -> String {
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes
        .list(&ListParams::default().labels(&format!("{NODE_LABEL}=true")))
        .await
        .unwrap();
    let [node] = list.items.as_slice() else {
        panic!(
            "one real node expected (hack/cluster.sh up --real-node), found {}",
            list.items.len()
        )
    };
    node.name_any()
}

/// `kubectl port-forward` to a Pod of the operator, on a free local port.
struct PortForward {
    child: Child,
    port: u16,
}

impl PortForward {
    fn to(pod: &str) -> Self {
        let mut child = Command::new("kubectl")
            .args(["port-forward", "-n", NS, &format!("pod/{pod}"), ":8080"])
            .args(["--address", "127.0.0.1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("kubectl on PATH");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        // "Forwarding from 127.0.0.1:PORT -> 8080"
        let port = first
            .strip_prefix("Forwarding from 127.0.0.1:")
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("kubectl port-forward to {pod} said: {first:?}"));
        // it writes a line per connection: keep reading, or it would die on a full pipe
        std::thread::spawn(move || lines.for_each(drop));
        Self { child, port }
    }
}

impl Drop for PortForward {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A token of a ServiceAccount of `ns` granted `get` on `erus/history` in every namespace (the
/// ledger check reads `/slots` by name, across namespaces), through the chart's ClusterRole.
fn history_token(ns: &str, bindings: &mut ClusterBindings) -> String {
    kubectl(&["-n", ns, "create", "serviceaccount", "ledger-reader"]);
    let binding = format!("{ns}-ledger-reader");
    kubectl(&[
        "create",
        "clusterrolebinding",
        &binding,
        "--clusterrole=eru-history-reader",
        &format!("--serviceaccount={ns}:ledger-reader"),
    ]);
    bindings.0.push(binding);
    kubectl(&["-n", ns, "create", "token", "ledger-reader", "--duration", "1h"])
        .trim()
        .to_string()
}

/// A Deployment of the busybox httpd image on the real node: each Pod sleeps `start_seconds`, then
/// serves; Ready once `GET /` answers (probed every second). Rolled with maxUnavailable 1 and
/// maxSurge 1.
async fn web(client: &Client, ns: &str, name: &str, replicas: i32, start_seconds: u32) {
    let extra = json!({"spec": {
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}},
        "template": {"spec": {
            "nodeSelector": {NODE_LABEL: "true"},
            "tolerations": [{"key": NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
            "terminationGracePeriodSeconds": 2,
            "containers": [{
                "name": "web",
                "image": web_image(),
                "imagePullPolicy": "Never",
                "command": ["/bin/sh", "-c", format!("sleep {start_seconds}; exec httpd -f -p 8080 -h /www")],
                "ports": [{"containerPort": 8080}],
                "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1},
                "securityContext": {"runAsNonRoot": true, "allowPrivilegeEscalation": false,
                                    "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]}}
            }]
        }}
    }});
    deployment(client, ns, name, replicas, extra).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    wait_ready(&deployments, name, replicas).await;
}

/// The process of the container: the one whose command line starts with the image's binary.
fn operator_processes() -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if cmdline.starts_with(b"/usr/local/bin/eru-operator\0") {
            found.push(pid);
        }
    }
    found
}

#[tokio::test]
#[ignore = "needs the real node: hack/real-node-e2e.sh"]
async fn the_chart_runs_the_image_on_the_real_node() {
    install();
    let client = client().await;
    let node = real_node(&client).await;
    let pod = operator_pod(&client).await;
    let spec = pod.spec.clone().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some(node.as_str()));
    let (repository, tag) = image();
    let container = &spec.containers[0];
    assert_eq!(
        container.image.as_deref(),
        Some(format!("{repository}:{tag}").as_str())
    );
    // Ready through its probes, which the kubelet ran against the Pod's own address: plain HTTP
    // on the probes' own port, apart from the API's (HTTPS, capped connections)
    for probe in [&container.readiness_probe, &container.liveness_probe] {
        let get = probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .expect("an HTTP probe");
        assert_eq!(
            (get.scheme.as_deref(), &get.port),
            (Some("HTTP"), &IntOrString::String("probes".into())),
            "{container:?}"
        );
    }
    let status = pod.status.clone().unwrap();
    let pod_ip = status.pod_ip.clone().expect("a Pod address from the CNI bridge");
    assert!(pod_ip.starts_with("10.87.0."), "{pod_ip}");
    let started = &status.container_statuses.as_ref().unwrap()[0];
    assert!(started.ready, "{started:?}");
    assert_eq!(started.restart_count, 0, "{started:?}");
    // the journal on a PersistentVolume, bound
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    let claim = claims.get("eru-journal").await.unwrap();
    assert_eq!(claim.status.and_then(|s| s.phase).as_deref(), Some("Bound"));
    // what the runtime made of the securityContext: the process runs as 65532 on a read-only root
    let pids = operator_processes();
    let [pid] = pids.as_slice() else {
        panic!("one operator process in a container expected, found {pids:?}")
    };
    let proc_status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let uid = proc_status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert_eq!(
        uid.split_whitespace().skip(1).collect::<Vec<_>>(),
        ["65532"; 4],
        "{uid}"
    );
    let mounts = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
    let root = mounts
        .lines()
        .find(|l| l.split_whitespace().nth(4) == Some("/"))
        .expect("the container's root mount");
    let options = root.split_whitespace().nth(5).unwrap();
    assert!(
        options.split(',').any(|o| o == "ro"),
        "root mounted {options}: {root}"
    );
    // the container's first process: its HTTP queries in the idle class, which yields only to the
    // operator's own work in the container's CPU cgroup
    // (the policy only: the nice value is what the runtime started it with, 10 under hack/test.sh)
    assert_eq!(
        common::thread_class(*pid, common::QUERY_THREAD).map(|(policy, _)| policy),
        Some(libc::SCHED_IDLE)
    );
    // the HTTP API needs a token: the kubelet's probes are the only anonymous callers
    let forward = PortForward::to(&pod.name_any());
    let (status, body) = common::get(&format!("https://127.0.0.1:{}/audit", forward.port));
    assert_eq!(status, 401, "{body}");
    let (status, body) = common::get(&format!("https://127.0.0.1:{}/readyz", forward.port));
    assert_eq!(status, 200, "{body}");
    println!("operator Pod {} on {node} at {pod_ip}, pid {pid}", pod.name_any());
    connection_flood_leaves_the_probes_answering(&client, &pod, &pod_ip).await;
}

/// 1,000 idle connections tried on the API port (its cap is 512) and held for 40 s, longer than
/// the liveness probe's three failures (10 s apart): the kubelet keeps the Pod Ready and never
/// restarts it, as its probes reach the probes' own port; `/readyz` there answers meanwhile.
async fn connection_flood_leaves_the_probes_answering(client: &Client, pod: &Pod, pod_ip: &str) {
    let ports = (pod.spec.as_ref().unwrap().containers[0].ports.clone()).unwrap_or_default();
    let port = |probes: bool| {
        let found = ports
            .iter()
            .find(|p| (p.name.as_deref() == Some("probes")) == probes);
        found.expect("the container's ports").container_port
    };
    let (api, probes) = (port(false), port(true));
    let tries = (0..1000).map(|_| {
        let to = format!("{pod_ip}:{api}");
        tokio::spawn(async move {
            tokio::time::timeout(Duration::from_secs(3), tokio::net::TcpStream::connect(to))
                .await
                .ok()?
                .ok()
        })
    });
    let mut held = Vec::new();
    for attempt in tries.collect::<Vec<_>>() {
        held.extend(attempt.await.unwrap());
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let (started, mut answered, mut asked) = (Instant::now(), 0, 0);
    while started.elapsed() < Duration::from_secs(40) {
        let now = pods.get(&pod.name_any()).await.unwrap();
        let container = &now.status.as_ref().unwrap().container_statuses.as_ref().unwrap()[0];
        assert!(
            ready(&now) && container.restart_count == 0,
            "the flood made the Pod unready or restarted it: {container:?}"
        );
        asked += 1;
        let agent = common::agent(Some(Duration::from_secs(2)));
        if let Ok(response) = agent.get(&format!("http://{pod_ip}:{probes}/readyz")).call() {
            answered += usize::from(response.status() == 200);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    println!(
        "{} idle connections held on the API port for 40 s: the Pod stayed Ready, /readyz on the probes' port answered {answered} of {asked}",
        held.len()
    );
    assert!(held.len() >= 512, "only {} connections opened", held.len());
    assert_eq!(answered, asked, "/readyz on the probes' port went unanswered");
}

/// One sample of the workload's Pods.
struct Sample {
    at: Instant,
    /// Ready and not terminating.
    ready: usize,
    /// Not terminating.
    live: usize,
}

#[tokio::test]
#[ignore = "needs the real node: hack/real-node-e2e.sh"]
async fn a_real_workload_restarts_gracefully_and_the_audit_shows_it() {
    install();
    let client = client().await;
    let ns = TestNamespace::create(&client, "real-graceful").await;
    let mut bindings = ClusterBindings(Vec::new());
    let (replicas, max_unavailable) = (3, 1);
    web(&client, &ns.name, "web", replicas, 3).await;
    let pod = operator_pod(&client).await;
    let forward = PortForward::to(&pod.name_any());
    let operator = Operator::remote(forward.port, &history_token(&ns.name, &mut bindings));
    // the journal outlives the namespaces (and a rerun on the same cluster): a name of this run's
    let eru = ns.name.as_str();

    // one slot, 20 s from now (a daily schedule on the second: nothing else falls in the test)
    let slot = (Utc::now() + chrono::Duration::seconds(20))
        .with_nanosecond(0)
        .unwrap();
    let schedule = format!("{} {} {} * * *", slot.second(), slot.minute(), slot.hour());
    create_eru(
        &client,
        &ns.name,
        eru,
        json!({"schedule": schedule, "target": {"kind": "Deployment", "name": "web"}}),
    )
    .await
    .unwrap();

    // sample the Pods every 100 ms from now until the restart has succeeded
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
        let done = done.clone();
        tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            while !done.load(Ordering::SeqCst) {
                tick.tick().await;
                let list = pods.list(&ListParams::default().labels("app=web")).await.unwrap();
                let live = list
                    .items
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none());
                samples.push(Sample {
                    at: Instant::now(),
                    ready: live.clone().filter(|p| ready(p)).count(),
                    live: live.count(),
                });
            }
            samples
        })
    };
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let restart = wait_for(
        "the slot's restart to succeed",
        Duration::from_secs(180),
        || async {
            let last = status(&erus, eru).await?.last_restart?;
            (last.slot == slot && last.outcome == "succeeded").then_some(last)
        },
    )
    .await;
    wait_for("the rollout complete", Duration::from_secs(60), || async {
        let d = deployments.get("web").await.ok()?;
        let s = d.status?;
        (s.observed_generation == d.metadata.generation
            && s.updated_replicas == Some(replicas)
            && s.ready_replicas == Some(replicas)
            && s.replicas == Some(replicas))
        .then_some(())
    })
    .await;
    done.store(true, Ordering::SeqCst);
    let samples = sampler.await.unwrap();

    let floor = (replicas - max_unavailable) as usize;
    let lowest = samples.iter().map(|s| s.ready).min().unwrap();
    let surged = samples.iter().filter(|s| s.live > replicas as usize).count();
    let below: Vec<_> = samples.iter().filter(|s| s.ready < floor).collect();
    let first = samples[0].at;
    println!(
        "{} samples over {:.1} s: ready replicas at least {lowest} (floor {floor}), {surged} samples with a surge Pod; \
         restart decided {} patched {:?} finished {:?}",
        samples.len(),
        samples.last().unwrap().at.duration_since(first).as_secs_f64(),
        restart.started_at,
        restart.patched_at,
        restart.finished_at
    );
    assert!(
        below.is_empty(),
        "ready replicas fell below {floor} at {:?}",
        below
            .iter()
            .map(|s| (s.at.duration_since(first), s.ready, s.live))
            .collect::<Vec<_>>()
    );
    // the samples saw the rollout in flight: a surge Pod not yet Ready while its image started
    assert!(
        samples.iter().any(|s| s.live > s.ready),
        "no sample saw a starting Pod: the rollout was not observed"
    );
    let settled = settle(&erus, &operator, eru).await;
    let born = created(&erus, eru).await;
    let records = check(
        &client,
        &ns.name,
        &operator,
        &Ledger::deployment(eru, "web", (born + SECOND, settled), vec![slot]).require(
            slot,
            slot,
            "fired",
            &[],
        ),
    )
    .await;
    let record = records.iter().find(|r| r.covers(slot)).unwrap();
    assert!(record.fired(), "{record:?}");
    assert_eq!(record.outcome(), Some("succeeded"), "{record:?}");

    // /audit through the port-forward, with a token granted erus/history in this namespace only
    kubectl(&["-n", &ns.name, "create", "serviceaccount", "auditor"]);
    kubectl(&[
        "-n",
        &ns.name,
        "create",
        "rolebinding",
        "auditor",
        "--clusterrole=eru-history-reader",
        &format!("--serviceaccount={}:auditor", ns.name),
    ]);
    let token = kubectl(&["-n", &ns.name, "create", "token", "auditor", "--duration", "1h"]);
    let auditor = Operator::remote(forward.port, token.trim());
    let audit: Value = wait_for(
        "the auditor's grant in force",
        Duration::from_secs(30),
        || async {
            let (status, body) = auditor.get(&format!("/audit?namespace={}", ns.name));
            (status == 200).then(|| serde_json::from_str(&body).unwrap())
        },
    )
    .await;
    let erus_seen = audit["erus"].as_array().cloned().unwrap_or_default();
    let ours = erus_seen
        .iter()
        .find(|e| e["name"] == eru)
        .unwrap_or_else(|| panic!("the Eru in /audit: {audit}"));
    assert_eq!(ours["namespace"], ns.name.as_str(), "{ours}");
    assert!(ours.to_string().contains("succeeded"), "{ours}");
    // the grant is this namespace's: the cluster-wide audit is refused
    let (status, body) = auditor.get("/audit");
    assert_eq!(status, 403, "{body}");
}

/// Keeps the real node cordoned while it lives.
struct Cordon(String);

impl Cordon {
    fn new(node: &str) -> Self {
        kubectl(&["cordon", node]);
        Self(node.to_string())
    }
}

impl Drop for Cordon {
    fn drop(&mut self) {
        let _ = Command::new("kubectl").args(["uncordon", &self.0]).output();
    }
}

#[tokio::test]
#[ignore = "needs the real node: hack/real-node-e2e.sh"]
async fn the_operator_pod_deleted_between_slots_resumes_on_its_journal() {
    install();
    let client = client().await;
    let ns = TestNamespace::create(&client, "real-resume").await;
    let mut bindings = ClusterBindings(Vec::new());
    web(&client, &ns.name, "web", 1, 1).await;
    let node = real_node(&client).await;
    let old = operator_pod(&client).await;
    let token = history_token(&ns.name, &mut bindings);
    let forward = PortForward::to(&old.name_any());
    let mut operator = Operator::remote(forward.port, &token);
    let eru = ns.name.as_str();
    let erus = every_10s_restarted_once(&client, &ns.name, eru).await;

    // The node cordoned, so the Deployment's new Pod waits (Pending) while slots pass; then the
    // Pod deleted (SIGTERM: a clean stop), and the node opened again after 25 s.
    let deleting;
    let stopped;
    let restarted;
    {
        let _cordon = Cordon::new(&node);
        drop(forward);
        deleting = Utc::now();
        kubectl(&["-n", NS, "delete", "pod", &old.name_any(), "--wait=true"]);
        stopped = Utc::now();
        tokio::time::sleep(Duration::from_secs(25)).await;
        restarted = Utc::now();
    }
    let new = operator_pod(&client).await;
    assert_ne!(new.name_any(), old.name_any());
    println!(
        "operator Pod {} deleted at {stopped}, node opened at {restarted}, {} Ready",
        old.name_any(),
        new.name_any()
    );
    let forward = PortForward::to(&new.name_any());
    operator.port = forward.port;

    wait_for("the gap accounted", Duration::from_secs(90), || async {
        let (status, body) = operator.get(&format!("/missed?name={eru}&reason=operator_down"));
        (status == 200 && body.contains("operator_down")).then_some(())
    })
    .await;
    let settled = settle(&erus, &operator, eru).await;
    let born = created(&erus, eru).await;
    let window = (born + SECOND, settled);
    // the new Pod serves the whole ledger, the slots before the deletion included: one journal
    let records = check(
        &client,
        &ns.name,
        &operator,
        // the gap, from the deletion to the new Pod's first pass (its container starts a while
        // after the node opened): operator_down, but the newest slot at that pass
        &Ledger::deployment(eru, "web", window, every(10, window.0, window.1))
            .expect(
                deleting,
                restarted + chrono::Duration::seconds(90),
                &[ON_SCHEDULE, &["operator_down"]].concat(),
            )
            .require_some(stopped, restarted, "operator_down"),
    )
    .await;
    let record = |slot: DateTime<Utc>| {
        records
            .iter()
            .find(|r| r.covers(slot))
            .unwrap_or_else(|| panic!("slot {slot}: {records:?}"))
    };
    // (a slot while the old Pod stopped may have fired or not: the shared check covers it)
    let before = every(10, window.0, deleting - SECOND);
    assert!(
        before.iter().any(|s| record(*s).fired()),
        "a slot fired before the deletion: {records:?}"
    );
    for slot in &before {
        assert!(
            record(*slot).fired(),
            "slot {slot} before the deletion: {:?}",
            record(*slot)
        );
    }
    let down: Vec<_> = records
        .iter()
        .filter(|r| r.reason.as_deref() == Some("operator_down"))
        .collect();
    assert!(!down.is_empty(), "{records:?}");
    let (start, end) = down[0].window.expect("operator_down names its window");
    assert!(
        start <= stopped,
        "window start {start} after the deletion {stopped}"
    );
    assert!(
        end >= restarted,
        "window end {end} before the node opened {restarted}"
    );
    // the slots of the gap: the newest at the new Pod's first pass runs (the catch-up), every
    // older one is operator_down
    let accounted_at = down.iter().map(|r| r.evaluated_at).min().unwrap();
    let catch_up = *every(10, stopped, accounted_at)
        .last()
        .expect("a slot between the deletion and the first pass");
    assert!(
        record(catch_up).fired(),
        "the catch-up {catch_up}: {:?}",
        record(catch_up)
    );
    for slot in every(10, stopped, restarted) {
        if slot != catch_up {
            assert_eq!(
                record(slot).reason.as_deref(),
                Some("operator_down"),
                "slot {slot} of the gap: {:?}",
                record(slot)
            );
        }
    }
    // the same volume: the claim the new Pod mounts is the old one's
    let claim = |pod: &Pod| {
        pod.spec
            .as_ref()
            .unwrap()
            .volumes
            .as_ref()
            .unwrap()
            .iter()
            .find_map(|v| v.persistent_volume_claim.as_ref().map(|c| c.claim_name.clone()))
    };
    assert_eq!(claim(&new), claim(&old));
    assert!(claim(&new).is_some());
}

/// The chart upgraded from its previous version while an Eru restarts every 10 s, as
/// docs/operations.md says: the Eru CRD applied server-side, then `helm upgrade
/// --reset-then-reuse-values`. The release is first taken back to the previous chart
/// (`hack/testdata/charts/`, as released) with this image: what the upgrade changes is the
/// chart (its Deployment, RBAC, Service, probes), on the same journal volume. Every slot across
/// it is accounted (the gap `operator_down`, its newest slot caught up), and `/audit` over the
/// window shows the handover as two runs: the previous chart's Pod, stopped, then this one's.
#[tokio::test]
#[ignore = "needs the real-node cluster and the images: hack/real-node-e2e.sh"]
async fn the_chart_upgraded_from_its_previous_version_with_an_eru_running_accounts_every_slot() {
    install();
    let previous = tempfile::tempdir().unwrap();
    let package = previous_chart_package();
    run(
        "tar",
        &["-xzf", &package, "-C", &previous.path().display().to_string()],
    );
    let previous_chart = previous.path().join("eru-operator").display().to_string();
    helm_to(&previous_chart, &["--reset-values"]);
    let client = client().await;
    let ns = TestNamespace::create(&client, "real-upgrade").await;
    let mut bindings = ClusterBindings(Vec::new());
    web(&client, &ns.name, "web", 1, 1).await;
    let old = operator_pod(&client).await;
    let eru = ns.name.as_str();
    // a first restart by the previous chart's Pod
    let erus = every_10s_restarted_once(&client, &ns.name, eru).await;

    // the upgrade, as docs/operations.md says, begun 3 s before a slot: the old Pod stops first
    // (Recreate, for the SQLite journal's volume), about 2.3 s after `helm upgrade` begins, and
    // the new one is Ready about 1.3 s later (measured here), so the slot should fall in the
    // handover; if it comes on either side, it is an ordinary slot of one of the two runs
    let now = Utc::now();
    let slot = every(
        10,
        now + chrono::Duration::seconds(4),
        now + chrono::Duration::seconds(14),
    )[0];
    tokio::time::sleep(
        ((slot - chrono::Duration::seconds(3)) - Utc::now())
            .to_std()
            .unwrap_or_default(),
    )
    .await;
    let began = Utc::now();
    let helm = run("hack/helm.sh", &[]).trim().to_string();
    let crds = run(&helm, &["show", "crds", "charts/eru-operator"]);
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), crds).unwrap();
    let file = file.path().display().to_string();
    kubectl(&["apply", "--server-side", "--force-conflicts", "-f", &file]);
    helm_to("charts/eru-operator", &["--reset-then-reuse-values"]);
    let upgraded = Utc::now();
    let new = operator_pod(&client).await;
    assert_ne!(new.name_any(), old.name_any(), "the upgrade replaced the Pod");
    println!(
        "helm upgrade from {package}: began {began}, {} Ready at {upgraded} ({:.1} s)",
        new.name_any(),
        (upgraded - began).num_milliseconds() as f64 / 1000.0
    );
    let forward = PortForward::to(&new.name_any());
    let operator = Operator::remote(forward.port, &history_token(&ns.name, &mut bindings));
    wait_for(
        "a slot after the upgrade restarted",
        Duration::from_secs(60),
        || async {
            let (status, body) = operator.get(&format!("/slots?name={eru}&result=fired"));
            let page: Value = serde_json::from_str(&body).ok()?;
            let items = page["items"].as_array()?;
            (status == 200 && items.iter().any(|r| time(&r["slot"]) > upgraded)).then_some(())
        },
    )
    .await;
    let settled = settle(&erus, &operator, eru).await;
    let born = created(&erus, eru).await;
    let window = (born + SECOND, settled);
    let records = check(
        &client,
        &ns.name,
        &operator,
        &Ledger::deployment(eru, "web", window, every(10, window.0, window.1)).expect(
            began,
            upgraded + chrono::Duration::seconds(90),
            &[ON_SCHEDULE, &["operator_down"]].concat(),
        ),
    )
    .await;
    assert!(
        records.iter().any(|r| r.fired() && r.slot < began),
        "a slot fired before the upgrade: {records:?}"
    );
    assert!(
        records.iter().any(|r| r.fired() && r.slot > upgraded),
        "a slot fired after the upgrade: {records:?}"
    );
    println!(
        "the slots of the handover: {:?}",
        (records.iter())
            .filter(|r| r.slot >= began - SECOND && r.slot <= upgraded)
            .map(|r| (r.slot, r.result.clone(), r.reason.clone()))
            .collect::<Vec<_>>()
    );

    // the audit of the window: every slot accounted, the handover as two runs
    // to the millisecond: cut to its second, the window's end could fall before the new Pod's run
    // began (it ends moments after the first slot the new Pod fired)
    let audit = operator.get_json(&format!(
        "/audit?namespace={}&since={}&until={}",
        ns.name,
        window.0.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        window.1.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    ));
    let verdict = &audit["verdict"];
    assert_eq!(verdict["accounted"], true, "{verdict}");
    for count in ["unaccounted", "duplicated", "outside_schedule", "invalid"] {
        assert_eq!(verdict[count], 0, "{count}: {verdict}");
    }
    let runs = audit["operator"]["runs"].as_array().cloned().unwrap_or_default();
    let instances: Vec<&str> = runs.iter().filter_map(|r| r["instance"].as_str()).collect();
    println!("/audit: {}; runs {instances:?}", verdict["summary"]);
    // (a run's instance is its Pod's name and a suffix of its own: POD_HEX)
    let run_of = |pod: &Pod| {
        let prefix = format!("{}_", pod.name_any());
        runs.iter()
            .find(|r| r["instance"].as_str().is_some_and(|i| i.starts_with(&prefix)))
            .unwrap_or_else(|| panic!("no run of {} in /audit of {window:?}: {runs:?}", pod.name_any()))
    };
    assert!(
        !run_of(&old)["stopped_at"].is_null(),
        "the previous chart's run stopped: {runs:?}"
    );
    assert!(
        run_of(&new)["stopped_at"].is_null(),
        "this chart's run is the live one: {runs:?}"
    );
    assert!(
        time(&run_of(&new)["started_at"]) >= began,
        "this chart's run began with the upgrade: {runs:?}"
    );
}

/// An Eru `name` of `ns` restarting the Deployment `web` every 10 s, once its first restart
/// succeeded and it waits for the next slot.
async fn every_10s_restarted_once(client: &Client, ns: &str, name: &str) -> Api<Eru> {
    create_eru(
        client,
        ns,
        name,
        json!({"schedule": "*/10 * * * * *", "target": {"kind": "Deployment", "name": "web"}}),
    )
    .await
    .unwrap();
    let erus: Api<Eru> = Api::namespaced(client.clone(), ns);
    wait_for(
        "a first restart, then Waiting",
        Duration::from_secs(90),
        || async {
            let s = status(&erus, name).await?;
            (s.last_restart?.outcome == "succeeded" && s.phase.as_deref() == Some("Waiting")).then_some(())
        },
    )
    .await;
    erus
}

/// The previous chart version's package (hack/testdata/charts/: the newest of another version
/// than Chart.yaml's, as `hack/chart-check.sh` picks it).
fn previous_chart_package() -> String {
    let chart = std::fs::read_to_string(repo().join("charts/eru-operator/Chart.yaml")).unwrap();
    let current = (chart.lines())
        .find_map(|l| l.strip_prefix("version:"))
        .map(|v| v.trim().trim_matches('"').to_string())
        .expect("Chart.yaml's version");
    let mut packages: Vec<String> = std::fs::read_dir(repo().join("hack/testdata/charts"))
        .unwrap()
        .flatten()
        .map(|e| e.path().display().to_string())
        .filter(|p| p.ends_with(".tgz") && !p.ends_with(&format!("eru-operator-{current}.tgz")))
        .collect();
    // by version, as `sort -V` orders them (0.10.0 after 0.9.0)
    let version = |path: &String| -> Vec<u64> {
        let file = path.rsplit('/').next().unwrap_or_default();
        (file
            .trim_start_matches("eru-operator-")
            .trim_end_matches(".tgz")
            .split('.'))
        .map(|n| n.parse().unwrap_or(0))
        .collect()
    };
    packages.sort_by_key(version);
    packages
        .pop()
        .expect("a previous chart package in hack/testdata/charts/")
}
