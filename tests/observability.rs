//! Observability with the real pieces, as kube-prometheus-stack users run them: the chart's
//! ServiceMonitor and PrometheusRule, turned into Prometheus configuration by a real
//! prometheus-operator (`hack/prometheus-operator.sh`: built from the Go module proxy, run out of
//! cluster against the local control plane, its CRDs from its own module), and that configuration
//! given, as generated, to a real Prometheus on this machine (`hack/prometheus.sh`: upstream,
//! from the Go module proxy, because Debian's package has no Kubernetes service discovery).
//!
//! The pieces of a Prometheus pod that cannot run on kwok are stood in for, and only those (the
//! substitutions of [`out_of_cluster`]): the config reloader's expansion of `$(POD_NAME)` and
//! `$(SHARD)`, the files the pod mounts (the TLS assets Secret, the rule ConfigMaps) under a
//! local folder instead of /etc/prometheus, and the kubernetes_sd credentials (the Prometheus
//! ServiceAccount's token in a kubeconfig instead of the in-cluster files).
//!
//! The operator runs as processes on this machine, one per Eru namespace (`--namespace`, so the
//! test never acts on anything else of the cluster), listening on its non-loopback address, with
//! `--http-auth kubernetes` and a certificate of the test's CA. The chart's Service, made
//! selector-less, and an Endpoints object pointing at both processes make the ServiceMonitor
//! target them for real: Prometheus discovers them through the API server, scrapes over HTTPS,
//! verifies the certificate as the Service's DNS name against the CA Secret the ServiceMonitor
//! names, and sends the token of the chart's scraper ServiceAccount, granted the release's
//! metrics-reader ClusterRole (`<release>-eru-metrics-reader`), on the Service's port `https`.
//!
//! Then every dashboard query and every alert expression (as the PrometheusRule was generated)
//! must return data, the Erus' series keyed by the Erus' own namespaces and names (`obs-a-…`,
//! `obs-b-…`), never by the Service's namespace (`obs-system-…`). The same ServiceMonitor without
//! `honorLabels` (the chart's before issue 40) is scraped beside it as another job, and the same
//! checks must fail there: Prometheus renames the Erus' namespace to `exported_namespace`.

mod common;

use std::{
    collections::{BTreeMap, BTreeSet},
    io::Write,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use chrono::{DateTime, Timelike, Utc};
use common::{
    ClusterBindings, ClusterRoles, Operator, TestNamespace, client, free_port, host_ip, kubectl,
    ledger::{ON_SCHEDULE, Workload, check, every_since_created},
    wait_for,
};
use eru_operator::eru::{Eru, RESTARTED_AT_ANNOTATION};
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Pod, Secret},
};
use kube::{Api, Client, api::PostParams};
use serde_json::{Value, json};

/// The job the chart's ServiceMonitor gives the operator (the rules' and dashboard's selector),
/// and the job of the same ServiceMonitor without honorLabels.
const JOB: &str = "eru-operator";
const UNHONORED: &str = "eru-operator-unhonored";

/// A process of the test's, killed on drop, its log kept for failure messages.
struct Process {
    child: Child,
    log: PathBuf,
    name: &'static str,
}

impl Process {
    fn spawn(name: &'static str, command: &mut Command, log: PathBuf) -> Self {
        let child = command
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        Self { child, log, name }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- {} log ---\n{}", self.name, self.log_tail());
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Prometheus (`hack/prometheus.sh`), queried through its HTTP API.
struct Prometheus {
    _process: Process,
    port: u16,
}

impl Prometheus {
    fn start(binary: &str, dir: &Path, config: &Path) -> Self {
        let port = free_port();
        let process = Process::spawn(
            "prometheus",
            Command::new(binary)
                .arg(format!("--config.file={}", config.display()))
                .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}")),
            dir.join("prometheus.log"),
        );
        Self {
            _process: process,
            port,
        }
    }

    /// An instant query; returns the result vector or Prometheus's error.
    fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut response = agent
            .get(&format!("http://127.0.0.1:{}/api/v1/query", self.port))
            .query("query", expr)
            .call()
            .map_err(|e| e.to_string())?;
        let body: Value = serde_json::from_str(&response.body_mut().read_to_string().unwrap()).unwrap();
        if body["status"] != "success" {
            return Err(body["error"].to_string());
        }
        Ok(body["data"]["result"].as_array().cloned().unwrap_or_default())
    }
}

/// Prometheus' version (`prometheus, version 3.16.0 …`) as the Prometheus resource's
/// `spec.version`, so prometheus-operator generates a configuration for this binary.
fn prometheus_version(binary: &str) -> String {
    let output = Command::new(binary).arg("--version").output().unwrap();
    let text =
        String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    let version = text
        .split_whitespace()
        .skip_while(|w| *w != "version")
        .nth(1)
        .unwrap_or_else(|| panic!("no version in {text}"));
    format!("v{}", version.split(['+', '-']).next().unwrap())
}

/// The path a script of `hack/` prints (building its tool first if need be).
fn hack(script: &str, args: &[&str]) -> String {
    let output = Command::new(common::repo().join("hack").join(script))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("hack/{script}: {e}"));
    assert!(
        output.status.success(),
        "hack/{script} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// `kubectl apply` of YAML text (server-side: prometheus-operator's CRDs are too large for the
/// last-applied annotation).
fn apply(yaml: &str) {
    let mut child = Command::new("kubectl")
        .args(["apply", "--server-side", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl on PATH");
    child.stdin.take().unwrap().write_all(yaml.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "kubectl apply: {}\n{yaml}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A CA, and a certificate it signs for `dns`: (CA PEM, certificate PEM, key PEM).
fn certificates(dns: &str) -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "eru observability test CA");
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec![dns.to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    (ca_pem, cert.pem(), key.serialize_pem())
}

/// The generated configuration, with only what a Prometheus outside the cluster needs changed:
/// the config reloader's `$(POD_NAME)`/`$(SHARD)` expansion, the pod's mounts (/etc/prometheus/
/// certs and rules) under `dir`, and each kubernetes_sd_config's credentials (`kubeconfig`, the
/// Prometheus ServiceAccount's token, instead of the in-cluster files).
fn out_of_cluster(generated: &str, pod: &str, dir: &Path, kubeconfig: &Path) -> String {
    let text = generated
        .replace("$(POD_NAME)", pod)
        .replace("$(SHARD)", "0")
        .replace("/etc/prometheus/certs/", &format!("{}/certs/", dir.display()))
        .replace("/etc/prometheus/rules/", &format!("{}/rules/", dir.display()));
    let mut config: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    for job in config["scrape_configs"].as_sequence_mut().unwrap() {
        for sd in job["kubernetes_sd_configs"]
            .as_sequence_mut()
            .into_iter()
            .flatten()
        {
            sd["kubeconfig_file"] = kubeconfig.display().to_string().into();
        }
    }
    serde_yaml::to_string(&config).unwrap()
}

/// `$job`, `$namespace` and `$eru` as the dashboard's variables set them (the two Eru namespaces
/// selected, all Erus), and Grafana's intervals.
fn with_variables(expr: &str, job: &str, namespaces: &str) -> String {
    expr.replace("$__rate_interval", "30s")
        .replace("$__interval", "5s")
        .replace("$__range", "5m")
        .replace("$job", job)
        .replace("$namespace", namespaces)
        .replace("$eru", ".*")
}

/// An alert's expression without its threshold: what it compares (`X > 1500` → `X`; `up == 0 or
/// absent(up)` → `up`), so that it returns series whether or not the alert fires.
fn compared(expr: &str) -> String {
    let re = regex::Regex::new(r"(?s)^(.*?)\s+(?:>|==)\s+[0-9.]+(?:\s+or\s+.*)?$").unwrap();
    re.captures(expr)
        .unwrap_or_else(|| panic!("no threshold in {expr}"))[1]
        .to_string()
}

/// What is wrong with the series `expr` returns: none, no data, a label Prometheus renamed
/// (`exported_*`), and for a query of the Erus' series (`per_eru`): a namespace that is not an
/// Eru's (the operator's own series carry the Service's), or a (namespace, name) that is not one
/// of `erus`. Records the Eru namespaces seen in `seen`.
fn keyed_by_erus(
    prometheus: &Prometheus,
    expr: &str,
    per_eru: bool,
    erus: &BTreeSet<(String, String)>,
    seen: &mut BTreeSet<String>,
) -> Result<usize, String> {
    let result = prometheus
        .query(expr)
        .map_err(|e| format!("does not parse: {e}"))?;
    if result.is_empty() {
        return Err("no data".into());
    }
    let namespaces: BTreeSet<&String> = erus.iter().map(|(ns, _)| ns).collect();
    for series in &result {
        let labels = series["metric"].as_object().unwrap();
        if let Some(renamed) = labels.keys().find(|k| k.starts_with("exported_")) {
            return Err(format!("a renamed label {renamed}: {labels:?}"));
        }
        let Some(ns) = labels
            .get("namespace")
            .and_then(Value::as_str)
            .filter(|_| per_eru)
        else {
            continue;
        };
        if !namespaces.contains(&ns.to_string()) {
            return Err(format!("namespace {ns} is no Eru's: {labels:?}"));
        }
        seen.insert(ns.to_string());
        if let Some(name) = labels.get("name").and_then(Value::as_str)
            && !erus.contains(&(ns.to_string(), name.to_string()))
        {
            return Err(format!("{ns}/{name} is no Eru: {labels:?}"));
        }
    }
    Ok(result.len())
}

async fn deployment(client: &Client, ns: &str, name: &str, extra: Value) {
    let mut body = json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": 2,
            // every rollout's ReplicaSet is kept, so the ledger check can count them
            "revisionHistoryLimit": 1000,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}
            }
        }
    });
    if let (Some(spec), Some(more)) = (body["spec"].as_object_mut(), extra.as_object()) {
        spec.extend(more.clone());
    }
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    api.create(&PostParams::default(), &serde_json::from_value(body).unwrap())
        .await
        .unwrap();
    wait_for(
        &format!("{ns}/{name} available"),
        Duration::from_secs(60),
        || async {
            let s = api.get(name).await.ok()?.status?;
            (s.available_replicas == Some(2)).then_some(())
        },
    )
    .await;
}

async fn eru(client: &Client, ns: &str, name: &str, spec: Value) {
    let api: Api<Eru> = Api::namespaced(client.clone(), ns);
    let eru: Eru = serde_json::from_value(json!({
        "apiVersion": "mtsre.meitu.com/v1", "kind": "Eru", "metadata": {"name": name}, "spec": spec
    }))
    .unwrap();
    api.create(&PostParams::default(), &eru).await.unwrap();
}

/// GET `/metrics` of `operator` with `token`: the status and the text.
fn scrape(operator: &Operator, token: Option<&str>) -> (u16, String) {
    let url = operator.url("/metrics");
    let mut request = common::agent(None).get(&url);
    if let Some(token) = token {
        request = request.header("Authorization", &format!("Bearer {token}"));
    }
    let mut response = request.call().unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = response.status().as_u16();
    (status, response.body_mut().read_to_string().unwrap_or_default())
}

fn time(value: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(value.as_str().unwrap())
        .unwrap()
        .with_timezone(&Utc)
}

/// A Secret's key, decoded.
async fn secret_key(client: &Client, ns: &str, name: &str, key: &str) -> Option<Vec<u8>> {
    let secret = Api::<Secret>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .ok()??;
    Some(secret.data?.get(key)?.0.clone())
}

fn gunzip(bytes: &[u8]) -> String {
    let mut child = Command::new("gzip")
        .arg("-dc")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("gzip on PATH");
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn the_charts_service_monitor_through_prometheus_operator_keys_every_query_by_the_erus() {
    let started = Instant::now();
    let client = client().await;
    // the operator's namespace (Service, ServiceMonitor, its token), Prometheus', and the Erus'
    let system = TestNamespace::create(&client, "obs-system").await;
    let monitoring = TestNamespace::create(&client, "obs-monitoring").await;
    let a = TestNamespace::create(&client, "obs-a").await;
    let b = TestNamespace::create(&client, "obs-b").await;
    let dir = tempfile::tempdir().unwrap();
    // a release name holding the chart's: its objects are named after the release alone
    let release = format!("{}-eru-operator", system.name);
    let fullname = release.clone();
    let bindings = ClusterBindings(vec![format!("{fullname}-metrics-scraper")]);
    // the release's own role the scraper is bound to (not deploy/'s eru-metrics-reader)
    let reader = format!("{}-eru-metrics-reader", system.name);
    let _roles = ClusterRoles(vec![reader.clone()]);

    // prometheus-operator's CRDs, from its module (unless the cluster has them already)
    let prometheus_operator = hack("prometheus-operator.sh", &[]);
    let prometheus_binary = hack("prometheus.sh", &[]);
    if Command::new("kubectl")
        .args(["get", "crd", "servicemonitors.monitoring.coreos.com"])
        .output()
        .is_ok_and(|o| !o.status.success())
    {
        let crds = hack("prometheus-operator.sh", &["crds"]);
        kubectl(&["apply", "--server-side", "-f", &crds]);
        kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "-f",
            &crds,
        ]);
    }

    // the operator's certificate, of the test's CA, for the Service's DNS name
    let dns = format!("{fullname}.{}.svc", system.name);
    let (ca, cert, key) = certificates(&dns);
    for (file, text) in [("ca.crt", &ca), ("tls.crt", &cert), ("tls.key", &key)] {
        std::fs::write(dir.path().join(file), text).unwrap();
    }
    let tls = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("eru-operator-tls".into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        string_data: Some(
            [("ca.crt", &ca), ("tls.crt", &cert), ("tls.key", &key)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        ),
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), &system.name)
        .create(&PostParams::default(), &tls)
        .await
        .unwrap();

    // the chart's monitoring objects as a kube-prometheus-stack user installs them: the
    // ServiceMonitor (verifying the operator with the CA of http.tls.secretName), the scraper
    // ServiceAccount, its token Secret and binding, the PrometheusRule; and its Service
    let helm = hack("helm.sh", &[]);
    let rendered = Command::new(&helm)
        .current_dir(common::repo())
        .args([
            "template",
            &release,
            "charts/eru-operator",
            "--namespace",
            &system.name,
        ])
        .args(["--set", "serviceMonitor.enabled=true,serviceMonitor.interval=1s"])
        .args([
            "--set",
            "serviceMonitor.labels.release=eru-e2e,prometheusRule.labels.release=eru-e2e",
        ])
        .args([
            "--set",
            "http.tls.secretName=eru-operator-tls,http.tls.caKey=ca.crt",
        ])
        .args(["--set", "prometheusRule.enabled=true"])
        .args(["--show-only", "templates/servicemonitor.yaml"])
        .args(["--show-only", "templates/metrics-readers.yaml"])
        .args(["--show-only", "templates/user-roles.yaml"])
        .args(["--show-only", "templates/prometheusrule.yaml"])
        .args(["--show-only", "templates/service.yaml"])
        .output()
        .unwrap();
    assert!(
        rendered.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let mut objects: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_slice(&rendered.stdout)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .filter(|o: &serde_yaml::Value| !o.is_null())
        .collect();
    // of the release's user roles, the one the scraper is bound to
    objects.retain(|o| o["kind"] != "ClusterRole" || o["metadata"]["name"] == reader.as_str());
    assert_eq!(
        objects.iter().filter(|o| o["kind"] == "ClusterRole").count(),
        1,
        "the chart renders no ClusterRole {reader}"
    );
    let mut unhonored = None;
    for object in &mut objects {
        if object["kind"] == "Service" {
            // the operator is a process on this machine: no pods to select, an Endpoints instead
            object["spec"].as_mapping_mut().unwrap().remove("selector");
        }
        if object["kind"] == "ServiceMonitor" {
            let endpoint = &object["spec"]["endpoints"][0];
            assert_eq!(endpoint["honorLabels"], true);
            assert!(endpoint.get("bearerTokenFile").is_none());
            assert!(endpoint["tlsConfig"].get("insecureSkipVerify").is_none());
            // the negative control: the same ServiceMonitor without honorLabels, as another job
            let mut copy = object.clone();
            copy["metadata"]["name"] = format!("{fullname}-unhonored").into();
            let endpoint = &mut copy["spec"]["endpoints"][0];
            endpoint.as_mapping_mut().unwrap().remove("honorLabels");
            endpoint["relabelings"][0]["replacement"] = UNHONORED.into();
            unhonored = Some(copy);
        }
    }
    objects.extend(unhonored);
    let manifest: String = objects
        .iter()
        .map(|o| format!("---\n{}", serde_yaml::to_string(o).unwrap()))
        .collect();
    apply(&manifest);

    // Prometheus: its ServiceAccount may discover the Service's endpoints (as
    // kube-prometheus-stack's Prometheus role does), and the resource prometheus-operator renders
    kubectl(&["create", "serviceaccount", "prometheus", "-n", &monitoring.name]);
    kubectl(&[
        "create",
        "role",
        "prometheus-discovery",
        "-n",
        &system.name,
        "--verb=get,list,watch",
        "--resource=services,endpoints,pods,endpointslices.discovery.k8s.io",
    ]);
    kubectl(&[
        "create",
        "rolebinding",
        "prometheus-discovery",
        "-n",
        &system.name,
        "--role=prometheus-discovery",
        &format!("--serviceaccount={}:prometheus", monitoring.name),
    ]);
    let controller = format!("eru-e2e-{}", monitoring.name);
    apply(
        &json!({
            "apiVersion": "monitoring.coreos.com/v1", "kind": "Prometheus",
            "metadata": {
                "name": "eru", "namespace": monitoring.name,
                // only the test's prometheus-operator takes it (a cluster's own ignores it)
                "annotations": {"operator.prometheus.io/controller-id": controller}
            },
            "spec": {
                "version": prometheus_version(&prometheus_binary),
                "serviceAccountName": "prometheus",
                "scrapeInterval": "1s",
                "evaluationInterval": "1s",
                "serviceMonitorSelector": {"matchLabels": {"release": "eru-e2e"}},
                "serviceMonitorNamespaceSelector": {},
                "ruleSelector": {"matchLabels": {"release": "eru-e2e"}},
                "ruleNamespaceSelector": {}
            }
        })
        .to_string(),
    );
    let _prometheus_operator = Process::spawn(
        "prometheus-operator",
        Command::new(&prometheus_operator)
            .env("KUBECONFIG", std::env::var("KUBECONFIG").unwrap())
            .arg(format!("--web.listen-address=127.0.0.1:{}", free_port()))
            .arg(format!("--namespaces={},{}", monitoring.name, system.name))
            .arg(format!("--controller-id={controller}"))
            .arg("--log-level=warn"),
        dir.path().join("prometheus-operator.log"),
    );

    // what it generated: the configuration Secret (both ServiceMonitors' jobs, the token of the
    // chart's scraper Secret in it), the TLS assets (the CA), the rule files
    let token_secret = format!("{fullname}-metrics-scraper-token");
    let token = wait_for(
        "Kubernetes to write the scraper's token Secret",
        Duration::from_secs(30),
        || secret_key(&client, &system.name, &token_secret, "token"),
    )
    .await;
    let token = String::from_utf8(token).unwrap();
    let jobs = [
        format!("serviceMonitor/{}/{fullname}/0", system.name),
        format!("serviceMonitor/{}/{fullname}-unhonored/0", system.name),
    ];
    let generated = wait_for(
        "prometheus-operator to write the configuration of both ServiceMonitors",
        Duration::from_secs(60),
        || async {
            let gz = secret_key(&client, &monitoring.name, "prometheus-eru", "prometheus.yaml.gz").await?;
            let text = gunzip(&gz);
            jobs.iter().all(|j| text.contains(j.as_str())).then_some(text)
        },
    )
    .await;
    let config: serde_yaml::Value = serde_yaml::from_str(&generated).unwrap();
    let job = config["scrape_configs"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|j| j["job_name"] == jobs[0].as_str())
        .unwrap();
    assert_eq!(job["honor_labels"], true, "{generated}");
    assert_eq!(
        job["authorization"]["credentials"],
        token.as_str(),
        "the scraper's token"
    );
    assert_eq!(job["tls_config"]["server_name"], dns.as_str());
    assert!(job["tls_config"].get("insecure_skip_verify").is_none());
    let ca_file = job["tls_config"]["ca_file"].as_str().unwrap().to_string();
    // written after the configuration, in a reconcile of its own (on a loaded machine, seconds
    // after it: a read right after the configuration's was once a 404)
    let secrets = Api::<Secret>::namespaced(client.clone(), &monitoring.name);
    let assets = wait_for(
        "prometheus-operator to write the TLS assets",
        Duration::from_secs(60),
        || async {
            let secret = secrets.get_opt("prometheus-eru-tls-assets-0").await.ok()??;
            secret.data.filter(|data| !data.is_empty())
        },
    )
    .await;
    std::fs::create_dir_all(dir.path().join("certs")).unwrap();
    for (file, data) in assets {
        std::fs::write(dir.path().join("certs").join(&file), &data.0).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("certs").join(ca_file.rsplit('/').next().unwrap())).unwrap(),
        ca,
        "the CA of http.tls.secretName, as {ca_file}"
    );
    let rule_files = wait_for(
        "prometheus-operator to write the PrometheusRule's rule file",
        Duration::from_secs(60),
        || async {
            let map = Api::<ConfigMap>::namespaced(client.clone(), &monitoring.name)
                .get_opt("prometheus-eru-rulefiles-0")
                .await
                .ok()??;
            map.data.filter(|d| !d.is_empty())
        },
    )
    .await;
    std::fs::create_dir_all(dir.path().join("rules/prometheus-eru-rulefiles-0")).unwrap();
    let mut rules = Vec::new();
    for (file, text) in &rule_files {
        std::fs::write(
            dir.path().join("rules/prometheus-eru-rulefiles-0").join(file),
            text,
        )
        .unwrap();
        let parsed: serde_yaml::Value = serde_yaml::from_str(text).unwrap();
        for group in parsed["groups"].as_sequence().unwrap() {
            for rule in group["rules"].as_sequence().unwrap() {
                rules.push((
                    rule["alert"].as_str().unwrap().to_string(),
                    rule["expr"].as_str().unwrap().to_string(),
                ));
            }
        }
    }
    // every rule of deploy/alerts/, as the chart renders them
    let shipped =
        std::fs::read_to_string(common::repo().join("deploy/alerts/eru-operator.rules.yaml")).unwrap();
    let shipped = shipped.matches("\n      - alert: ").count();
    assert!(
        shipped >= 10,
        "{shipped} alerts read from deploy/alerts/eru-operator.rules.yaml"
    );
    assert_eq!(rules.len(), shipped, "{rule_files:?}");

    // the operators, one per Eru namespace, on this machine's address, with the CA's certificate
    let host = host_ip();
    let mut operators = Vec::new();
    // notifications to a receiver that takes them all: the delivery series have data
    let receiver = common::receiver::Receiver::start(common::free_port(), &[]);
    let notifications = dir.path().join("notifications.yaml");
    std::fs::write(
        &notifications,
        format!(
            "sinks: [{{name: hook, type: webhook, url: 'http://127.0.0.1:{}/'}}]\nroutes: [{{sink: hook}}]\n",
            receiver.port
        ),
    )
    .unwrap();
    let notifications = notifications.display().to_string();
    for ns in [&a.name, &b.name] {
        let cert = dir.path().join("tls.crt").display().to_string();
        let key = dir.path().join("tls.key").display().to_string();
        let args = [
            "--http-auth",
            "kubernetes",
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--gate-poll-interval",
            "1s",
            "--gate-cache-ttl",
            "1s",
            "--notifications-file",
            &notifications,
        ];
        let mut operator = Operator::prepare(&client, ns, &args, &[], None).await;
        operator.host = host.clone();
        operator.spawn().await;
        operators.push(operator);
    }
    // the chart's Service reaches them: an Endpoints object (what a Service's selector would make)
    let subsets: Vec<Value> = operators
        .iter()
        .map(|o| json!({"addresses": [{"ip": host}], "ports": [{"name": "https", "port": o.port, "protocol": "TCP"}]}))
        .collect();
    apply(
        &json!({
            "apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": fullname, "namespace": system.name},
            "subsets": subsets
        })
        .to_string(),
    );

    // the scraper's token may get /metrics (the release's metrics-reader), nothing without a token
    wait_for(
        "the scraper's grant to be in force",
        Duration::from_secs(60),
        || async { (operators.iter().all(|o| scrape(o, Some(&token)).0 == 200)).then_some(()) },
    )
    .await;
    assert_eq!(scrape(&operators[0], None).0, 401);

    // Prometheus, with the generated configuration
    let kubeconfig = dir.path().join("sd-kubeconfig");
    let sd_token = kubectl(&[
        "create",
        "token",
        "prometheus",
        "-n",
        &monitoring.name,
        "--duration",
        "1h",
    ]);
    {
        let admin = kube::config::Kubeconfig::read().unwrap();
        let cluster = admin.clusters[0].cluster.clone().unwrap();
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"{}\", certificate-authority: \"{}\"}}}}]\n\
                 users: [{{name: prometheus, user: {{token: \"{}\"}}}}]\n\
                 contexts: [{{name: c, context: {{cluster: c, user: prometheus}}}}]\ncurrent-context: c\n",
                cluster.server.unwrap(),
                cluster.certificate_authority.unwrap(),
                sd_token.trim()
            ),
        )
        .unwrap();
    }
    let config = dir.path().join("prometheus.yaml");
    std::fs::write(
        &config,
        out_of_cluster(&generated, "prometheus-eru-0", dir.path(), &kubeconfig),
    )
    .unwrap();
    let prometheus = Prometheus::start(&prometheus_binary, dir.path(), &config);
    let prometheus_started = Instant::now();

    // history readers of both namespaces, for the journal checks below
    kubectl(&["create", "serviceaccount", "reader", "-n", &a.name]);
    for ns in [&a.name, &b.name] {
        kubectl(&[
            "create",
            "rolebinding",
            "reader-history",
            "-n",
            ns,
            "--clusterrole",
            "eru-history-reader",
            "--serviceaccount",
            &format!("{}:reader", a.name),
        ]);
    }
    let reader = kubectl(&["create", "token", "reader", "-n", &a.name, "--duration", "1h"]);
    for operator in &mut operators {
        operator.token = Some(reader.trim().to_string());
    }

    // the Erus. A: `web` restarts every 5 s. B: `stuck` rolls out and does not finish, and
    // `slow` fails (its rollout times out after 2 s): a ResourceQuota of B's pods as they are
    // leaves no room for a new pod; `held` is held by a blocking pod (a migration).
    let target = |name: &str| json!({"kind": "Deployment", "name": name});
    deployment(&client, &a.name, "web", json!({})).await;
    for name in ["stuck", "slow", "held"] {
        deployment(&client, &b.name, name, json!({})).await;
    }
    let blocker: Pod = serde_json::from_value(json!({
        "metadata": {"name": "migration", "labels": {"job": "migration"}},
        "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}
    }))
    .unwrap();
    Api::<Pod>::namespaced(client.clone(), &b.name)
        .create(&PostParams::default(), &blocker)
        .await
        .unwrap();
    apply(
        &json!({
            "apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "no-room", "namespace": b.name},
            "spec": {"hard": {"pods": "7"}}
        })
        .to_string(),
    );
    wait_for(
        "the quota to count B's 7 pods",
        Duration::from_secs(60),
        || async {
            let quota = kubectl(&[
                "get",
                "resourcequota",
                "no-room",
                "-n",
                &b.name,
                "-o",
                "jsonpath={.status.used.pods}",
            ]);
            (quota.trim() == "7").then_some(())
        },
    )
    .await;
    let soon = Utc::now() + chrono::Duration::seconds(5);
    eru(
        &client,
        &a.name,
        "web",
        json!({"schedule": "*/5 * * * * *", "target": target("web")}),
    )
    .await;
    eru(
        &client,
        &b.name,
        "stuck",
        json!({"schedule": "*/5 * * * * *", "target": target("stuck"), "rolloutTimeoutSeconds": 3600}),
    )
    .await;
    eru(
        &client,
        &b.name,
        "slow",
        // suspended until Prometheus scrapes: its one failure must come between two scrapes
        // (`increase` sees nothing in a first sample, and the slots after a failed rollout are
        // concurrent_rollout, never a second failure)
        json!({"schedule": "*/30 * * * * *", "target": target("slow"), "rolloutTimeoutSeconds": 2, "suspend": true}),
    )
    .await;
    eru(
        &client,
        &b.name,
        "held",
        json!({
            "schedule": format!("{} {} {} * * *", soon.second(), soon.minute(), soon.hour()),
            "startingDeadlineSeconds": 3600, "target": target("held"),
            "gates": {"blockingPodSelector": {"matchLabels": {"job": "migration"}}}
        }),
    )
    .await;
    let erus: BTreeSet<(String, String)> = [
        (&a.name, "web"),
        (&b.name, "stuck"),
        (&b.name, "slow"),
        (&b.name, "held"),
    ]
    .into_iter()
    .map(|(ns, n)| (ns.clone(), n.to_string()))
    .collect();

    // restarts that succeed, a rollout in progress, a held slot
    wait_for(
        "restarts in both namespaces",
        Duration::from_secs(120),
        || async {
            let items = |o: &Operator| o.get_json("/history?limit=1000")["items"].as_array().cloned();
            let (in_a, in_b) = (items(&operators[0])?, items(&operators[1])?);
            let ok = in_a
                .iter()
                .filter(|r| r["name"] == "web" && r["outcome"] == "succeeded")
                .count()
                >= 2;
            let rolling = in_b
                .iter()
                .any(|r| r["name"] == "stuck" && r["outcome"] == "in_progress");
            (ok && rolling).then_some(())
        },
    )
    .await;
    wait_for("the held slot", Duration::from_secs(60), || async {
        let eru = Api::<Eru>::namespaced(client.clone(), &b.name)
            .get("held")
            .await
            .ok()?;
        eru.status?.held.map(|_| ())
    })
    .await;
    // Prometheus discovered both operators through the API server and scrapes them with the
    // token and the CA (up is 1 only if TLS verified and the token was let in), for a while
    wait_for(
        "Prometheus to scrape both operators as both jobs",
        Duration::from_secs(90),
        || async {
            let up = prometheus.query("sum by (job) (min_over_time(up[20s]))").ok()?;
            let jobs: BTreeMap<&str, f64> = up
                .iter()
                .filter_map(|s| {
                    Some((
                        s["metric"]["job"].as_str()?,
                        s["value"][1].as_str()?.parse().ok()?,
                    ))
                })
                .collect();
            let ready = jobs.get(JOB) == Some(&2.0) && jobs.get(UNHONORED) == Some(&2.0);
            let data = prometheus
                .query(&format!(
                    r#"eru_rollout_started_timestamp_seconds{{job="{JOB}"}}"#
                ))
                .ok()?;
            let held = prometheus
                .query(&format!(r#"eru_held_since_timestamp_seconds{{job="{JOB}"}}"#))
                .ok()?;
            (ready && !data.is_empty() && !held.is_empty()).then_some(())
        },
    )
    .await;
    println!(
        "Prometheus scraped both operators as both jobs, and the rollout and the hold, {:?} after it started",
        prometheus_started.elapsed()
    );

    // every dashboard query and every alert expression: data keyed by the Erus' namespaces and
    // names; and the same, as the job without honorLabels, must fail
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(common::repo().join("dashboards/eru-operator.json")).unwrap(),
    )
    .unwrap();
    let selected = format!("{}|{}", a.name, b.name);
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap();
            queries.push((
                format!("panel {title}"),
                target["expr"].as_str().unwrap().to_string(),
                true,
            ));
        }
    }
    for (alert, expr) in &rules {
        // as generated (it must parse), then what it compares
        prometheus
            .query(expr)
            .unwrap_or_else(|e| panic!("alert {alert} does not parse: {e}: {expr}"));
        queries.push((format!("alert {alert}"), compared(expr), false));
    }
    let mut failures = Vec::new();
    let mut seen = BTreeSet::new();
    let mut control = (0, 0); // (per-Eru queries as the job without honorLabels, of them failing)
    for (what, expr, dashboard) in &queries {
        let honored = if *dashboard {
            with_variables(expr, JOB, &selected)
        } else {
            expr.clone()
        };
        // a query of the Erus' series selects or groups by namespace
        let per_eru = expr.contains("namespace");
        if let Err(e) = keyed_by_erus(&prometheus, &honored, per_eru, &erus, &mut seen) {
            failures.push(format!("{what}: {e}: {honored}"));
        }
        if per_eru {
            let plain = if *dashboard {
                with_variables(expr, UNHONORED, &selected)
            } else {
                expr.replace(&format!(r#"job="{JOB}""#), &format!(r#"job="{UNHONORED}""#))
            };
            control.0 += 1;
            match keyed_by_erus(&prometheus, &plain, true, &erus, &mut BTreeSet::new()) {
                Err(_) => control.1 += 1,
                Ok(n) => failures.push(format!(
                    "{what}: {n} series keyed by the Erus without honorLabels: {plain}"
                )),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(seen, BTreeSet::from([a.name.clone(), b.name.clone()]));
    println!(
        "{} dashboard queries and {} alert expressions keyed by the Erus; without honorLabels, {} of {} per-Eru ones fail",
        queries.iter().filter(|q| q.2).count(),
        rules.len(),
        control.1,
        control.0
    );
    assert!(control.0 >= 15 && control.1 == control.0);
    // without honorLabels, every Eru series says the operator's namespace
    let renamed = prometheus
        .query(&format!(
            r#"count by (namespace, exported_namespace) (eru_restarts_total{{job="{UNHONORED}"}})"#
        ))
        .unwrap();
    let pairs: BTreeSet<(String, String)> = renamed
        .iter()
        .map(|s| {
            let label = |k: &str| s["metric"][k].as_str().unwrap_or_default().to_string();
            (label("namespace"), label("exported_namespace"))
        })
        .collect();
    assert_eq!(
        pairs,
        BTreeSet::from([
            (system.name.clone(), a.name.clone()),
            (system.name.clone(), b.name.clone())
        ])
    );

    // Prometheus loaded the generated rule file: the failed restart's alert, in the Eru's namespace.
    // `slow` resumes now that Prometheus scrapes its operator: its next slot (30 s at most) fails
    // 2 s later, between two scrapes
    let resumed = Utc::now();
    let resume = kube::api::Patch::Merge(json!({"spec": {"suspend": false}}));
    (Api::<Eru>::namespaced(client.clone(), &b.name))
        .patch("slow", &kube::api::PatchParams::default(), &resume)
        .await
        .unwrap();
    wait_for(
        "EruRestartFailed pending or firing",
        Duration::from_secs(75),
        || async {
            let expr = format!(
                r#"ALERTS{{alertname="EruRestartFailed", namespace="{}", name="slow"}}"#,
                b.name
            );
            (!prometheus.query(&expr).ok()?.is_empty()).then_some(())
        },
    )
    .await;

    // the journal agrees with the cluster, and every slot is accounted once
    for (operator, ns, name, step) in [
        (&operators[0], &a.name, "web", 5),
        (&operators[1], &b.name, "slow", 30),
    ] {
        let latest = &operator.get_json(&format!("/history?name={name}&limit=1000"))["items"][0];
        let d = Api::<Deployment>::namespaced(client.clone(), ns)
            .get(name)
            .await
            .unwrap();
        let annotation =
            d.spec.unwrap().template.metadata.unwrap().annotations.unwrap()[RESTARTED_AT_ANNOTATION].clone();
        assert_eq!(
            time(&latest["slot"]),
            time(&json!(annotation)),
            "{name}: the newest restart is the template's"
        );
        let expected =
            every_since_created(&client, ns, name, Workload::Deployment(name), step, Utc::now()).await;
        // "slow" is suspended, then never becomes available: its rollout fails (EruRestartFailed
        // above), and the slots after it find that rollout still going
        let expected = match name {
            "slow" => {
                let (from, to) = expected.window;
                expected
                    .expect(from, to, &[&["suspended"], ON_SCHEDULE].concat())
                    .require(
                        resumed + chrono::Duration::seconds(1),
                        to,
                        "fired_failed",
                        ON_SCHEDULE,
                    )
            }
            _ => expected,
        };
        check(&client, ns, operator, &expected).await;
    }
    drop(bindings);
    println!("observability test: {:?} in all", started.elapsed());
}
