//! Observability with real parts: Debian's `prometheus` on loopback scrapes the operator while
//! Erus restart Deployments on the local cluster. The operator runs as installed, with
//! `--http-auth kubernetes` (HTTPS with its self-signed certificate): Prometheus scrapes with the
//! token of a ServiceAccount granted `eru-metrics-reader`, as deploy/'s ServiceMonitor does, and
//! the test reads the journal with a token granted `eru-history-reader` in its namespace. Through Prometheus's HTTP API, every PromQL
//! expression of `dashboards/*.json` and the alert rules must parse, and every dashboard panel
//! must return data. `/history` and `/missed` must agree with the cluster: the restartedAt
//! annotations on the Deployments and the Eru statuses.

mod common;

use std::{
    process::{Child, Command, Stdio},
    time::Duration,
};

use chrono::{DateTime, Utc};
use common::{
    ClusterBindings, Operator, TestNamespace, client, free_port, kubectl,
    ledger::{Workload, check_every},
    wait_for,
};
use eru_operator::eru::{Eru, RESTARTED_AT_ANNOTATION};
use k8s_openapi::api::apps::v1::Deployment;
use kube::{
    Api, Client,
    api::{PostParams, ResourceExt},
};
use serde_json::{Value, json};

/// A Prometheus server of its own, killed on drop.
struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Scrapes `127.0.0.1:target_port` over HTTPS (any certificate: the operator's is
    /// self-signed) with `token`, read from a file as a ServiceAccount's mounted token would be.
    fn start(target_port: u16, token: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, token).unwrap();
        let config = format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
             rule_files: [{rules}]\n\
             scrape_configs:\n  - job_name: eru-operator\n    scheme: https\n\
             \x20   authorization: {{credentials_file: '{token}'}}\n\
             \x20   tls_config: {{insecure_skip_verify: true}}\n\
             \x20   static_configs: [{{targets: ['127.0.0.1:{target_port}']}}]\n",
            rules = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/deploy/alerts/eru-operator.rules.yaml"
            ),
            token = token_file.display(),
        );
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        let port = free_port();
        let child = Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.path().join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
            .spawn()
            .expect("prometheus on PATH (Debian package prometheus; hack/deps.sh installs it)");
        Self {
            child,
            port,
            _dir: dir,
        }
    }

    /// An instant query; returns Prometheus's `data` or its error.
    fn query(&self, expr: &str) -> Result<Value, String> {
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
        if body["status"] == "success" {
            Ok(body["data"].clone())
        } else {
            Err(body["error"].to_string())
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Grafana's interval variables, as Prometheus needs them.
fn grafana_to_promql(expr: &str) -> String {
    expr.replace("$__rate_interval", "30s")
        .replace("$__interval", "5s")
        .replace("$__range", "5m")
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
    if extra["paused"] == true {
        return; // a Deployment created paused makes no Pods
    }
    wait_for(&format!("{name} available"), Duration::from_secs(60), || async {
        let s = api.get(name).await.ok()?.status?;
        (s.available_replicas == Some(2)).then_some(())
    })
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
fn scrape(operator: &Operator, token: &str) -> (u16, String) {
    let url = operator.url("/metrics");
    let mut response = common::agent(None)
        .get(&url)
        .header("Authorization", &format!("Bearer {token}"))
        .call()
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = response.status().as_u16();
    (status, response.body_mut().read_to_string().unwrap_or_default())
}

fn time(value: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(value.as_str().unwrap())
        .unwrap()
        .with_timezone(&Utc)
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn every_dashboard_and_alert_expression_works_against_a_real_prometheus() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "observability").await;
    let mut operator = Operator::start(&client, &ns.name, &["--http-auth", "kubernetes"]).await;
    assert!(operator.url("/").starts_with("https://"));

    // Prometheus' ServiceAccount may get /metrics (eru-metrics-reader, cluster-wide as deploy/
    // binds it); the test's reader may read the namespace's history (eru-history-reader)
    for account in ["prometheus", "reader"] {
        kubectl(&["create", "serviceaccount", account, "-n", &ns.name]);
    }
    let bindings = ClusterBindings(vec![format!("{}-prometheus", ns.name)]);
    kubectl(&[
        "create",
        "clusterrolebinding",
        &bindings.0[0],
        "--clusterrole",
        "eru-metrics-reader",
        "--serviceaccount",
        &format!("{}:prometheus", ns.name),
    ]);
    kubectl(&[
        "create",
        "rolebinding",
        "reader-history",
        "-n",
        &ns.name,
        "--clusterrole",
        "eru-history-reader",
        "--serviceaccount",
        &format!("{}:reader", ns.name),
    ]);
    let token = |account: &str| {
        kubectl(&["create", "token", account, "-n", &ns.name, "--duration", "1h"])
            .trim()
            .to_string()
    };
    let scraper = token("prometheus");
    operator.token = Some(token("reader"));
    // the grants in force (RBAC applies them asynchronously; a refusal is cached 20 s)
    wait_for("the grants to be in force", Duration::from_secs(60), || async {
        let history = operator.get(&format!("/history?namespace={}", ns.name)).0;
        let metrics = scrape(&operator, &scraper).0;
        (history == 200 && metrics == 200).then_some(())
    })
    .await;
    // and /metrics refused to the history reader, and to no token
    let reader = operator.token.clone().unwrap_or_default();
    assert_eq!(scrape(&operator, &reader).0, 403);
    assert_eq!(common::get(&operator.url("/metrics")).0, 401);
    let prometheus = Prometheus::start(operator.port, &scraper);

    // restarts that succeed, one that fails (new Pods need 8 s to be available, the timeout is
    // 2 s), and skipped slots
    deployment(&client, &ns.name, "web", json!({})).await;
    deployment(&client, &ns.name, "slow", json!({"minReadySeconds": 8})).await;
    deployment(&client, &ns.name, "paused", json!({"paused": true})).await;
    let target = |name: &str| json!({"kind": "Deployment", "name": name});
    eru(
        &client,
        &ns.name,
        "web",
        json!({"schedule": "*/5 * * * * *", "target": target("web")}),
    )
    .await;
    eru(
        &client,
        &ns.name,
        "slow",
        json!({"schedule": "*/30 * * * * *", "target": target("slow"), "rolloutTimeoutSeconds": 2}),
    )
    .await;
    eru(
        &client,
        &ns.name,
        "paused",
        json!({"schedule": "*/5 * * * * *", "target": target("paused")}),
    )
    .await;

    wait_for(
        "successful and failed restarts",
        Duration::from_secs(90),
        || async {
            let history = operator.get_json("/history?limit=1000");
            let items = history["items"].as_array()?.clone();
            let ok = items.iter().filter(|r| r["outcome"] == "succeeded").count() >= 2;
            let failed = items.iter().any(|r| r["outcome"] == "failed");
            (ok && failed).then_some(())
        },
    )
    .await;

    // Prometheus has scraped the operator for a while
    wait_for(
        "Prometheus to scrape the operator",
        Duration::from_secs(60),
        || async {
            let data = prometheus.query("count_over_time(eru_build_info[1m])").ok()?;
            let samples = data["result"][0]["value"][1].as_str()?.parse::<f64>().ok()?;
            (samples >= 15.0).then_some(())
        },
    )
    .await;
    let (status, metrics) = scrape(&operator, &scraper);
    assert_eq!(status, 200);
    assert!(
        metrics.contains("eru_restarts_total{name=\"slow\",namespace=")
            && metrics.contains("outcome=\"failed\"} 1")
    );

    // every dashboard panel parses and has data
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/dashboards/eru-operator.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let mut failures = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = grafana_to_promql(target["expr"].as_str().unwrap());
            match prometheus.query(&expr) {
                Err(e) => failures.push(format!("{}: does not parse: {e}: {expr}", panel["title"])),
                Ok(data) if data["result"].as_array().is_none_or(|r| r.is_empty()) => {
                    failures.push(format!("{}: no data: {expr}", panel["title"]))
                }
                Ok(_) => {}
            }
        }
    }
    // every alert expression parses
    let rules: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/deploy/alerts/eru-operator.rules.yaml"
        ))
        .unwrap(),
    )
    .unwrap();
    let mut alerts = 0;
    for group in rules["groups"].as_sequence().unwrap() {
        for rule in group["rules"].as_sequence().unwrap() {
            let expr = rule["expr"].as_str().unwrap();
            alerts += 1;
            if let Err(e) = prometheus.query(expr) {
                failures.push(format!(
                    "alert {}: does not parse: {e}",
                    rule["alert"].as_str().unwrap()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(alerts, 8);
    // Prometheus loaded the rules and the failed restart fires its alert
    wait_for(
        "EruRestartFailed to fire in Prometheus",
        Duration::from_secs(30),
        || async {
            let data = prometheus
                .query(r#"ALERTS{alertname="EruRestartFailed", name="slow"}"#)
                .ok()?;
            (!data["result"].as_array()?.is_empty()).then_some(())
        },
    )
    .await;

    // /history and /missed agree with the cluster
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    for name in ["web", "slow"] {
        let history = operator.get_json(&format!("/history?name={name}&limit=1000"));
        let latest = &history["items"][0];
        let d = deployments.get(name).await.unwrap();
        let annotation =
            d.spec.unwrap().template.metadata.unwrap().annotations.unwrap()[RESTARTED_AT_ANNOTATION].clone();
        assert_eq!(
            time(&latest["slot"]),
            time(&json!(annotation)),
            "{name}: the newest restart is the template's"
        );
        let status = erus.get(name).await.unwrap().status.unwrap();
        let last = status.last_restart.unwrap();
        // the status may trail the journal by one pass: it names the newest or the one before
        let recent: Vec<DateTime<Utc>> = history["items"]
            .as_array()
            .unwrap()
            .iter()
            .take(2)
            .map(|r| time(&r["slot"]))
            .collect();
        assert!(
            recent.contains(&last.slot),
            "{name}: status {} vs journal {recent:?}",
            last.slot
        );
    }
    let missed = operator.get_json("/missed?name=paused&limit=1000");
    let items = missed["items"].as_array().unwrap();
    assert!(
        !items.is_empty()
            && items
                .iter()
                .all(|m| m["reason"] == "target_paused" && m["result"] == "skipped")
    );
    let journaled: i64 = items.iter().map(|m| m["slot_count"].as_i64().unwrap()).sum();
    wait_for(
        "status.missedSlots to match the journal",
        Duration::from_secs(15),
        || async {
            let status = erus.get("paused").await.ok()?.status?;
            let d = deployments.get("paused").await.ok()?;
            let never_restarted = d
                .spec?
                .template
                .metadata
                .and_then(|m| m.annotations)
                .is_none_or(|a| !a.contains_key(RESTARTED_AT_ANNOTATION));
            (status.missed_slots >= journaled && never_restarted).then_some(())
        },
    )
    .await;
    assert!(
        operator.get_json("/history?name=paused")["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let _ = erus.get("web").await.unwrap().name_any();
    // every slot of the three Erus one record, each fired one rolled once, nothing else rolled
    for (name, step) in [("web", 5), ("slow", 30), ("paused", 5)] {
        check_every(
            &client,
            &ns.name,
            &operator,
            name,
            Workload::Deployment(name),
            step,
            Utc::now(),
        )
        .await;
    }
    drop(bindings);
}
