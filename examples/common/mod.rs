//! What the measurement programs (`scale`, `http_load`) share: the operator as a child process,
//! a plain HTTP GET, percentiles, RSS, namespaces and Deployments to restart. (A directory without
//! a `main.rs`: Cargo does not take it for an example of its own.)

#![allow(dead_code)] // each program uses part of it

use std::{
    net::TcpListener,
    path::PathBuf,
    process::{Child, Command},
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use futures::{StreamExt, stream};
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Namespace};
use kube::{
    Api, Client,
    api::{ListParams, PostParams},
};
use serde_json::{Value, json};

pub type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// A progress line on stderr, with the program's name and the time.
pub fn say(program: &str, what: impl AsRef<str>) {
    eprintln!(
        "[{program} {}] {}",
        Utc::now().format("%H:%M:%S%.3f"),
        what.as_ref()
    );
}

/// p50, p99 and max of `values` (seconds); NaN for none.
pub fn percentiles(mut values: Vec<f64>) -> (f64, f64, f64) {
    if values.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((values.len() as f64 * q).ceil() as usize).clamp(1, values.len()) - 1];
    (at(0.50), at(0.99), *values.last().unwrap_or(&f64::NAN))
}

/// Seconds as "850 ms" or "1.25 s".
pub fn fmt_s(s: f64) -> String {
    if s < 1.0 {
        format!("{:.0} ms", s * 1000.0)
    } else {
        format!("{s:.2} s")
    }
}

/// The resident set of process `pid`, in MB.
pub fn rss_mb(pid: u32) -> f64 {
    status_mb(pid, "VmRSS:")
}

/// The anonymous part of the resident set of process `pid` (its heap and stacks, without the
/// pages of mapped files such as the journal the HTTP API's readers map), in MB.
pub fn rss_anon_mb(pid: u32) -> f64 {
    status_mb(pid, "RssAnon:")
}

fn status_mb(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// An RFC 3339 time out of a JSON value.
pub fn time(v: &Value) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(v.as_str()?)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// An HTTP client that takes any status as an answer, and HTTPS with any certificate: the
/// operator's self-signed one under `--http-auth kubernetes`, on loopback.
pub fn agent(timeout: Duration) -> ureq::Agent {
    let tls = ureq::tls::TlsConfig::builder()
        .provider(ureq::tls::TlsProvider::Rustls)
        .unversioned_rustls_crypto_provider(std::sync::Arc::new(
            tokio_rustls::rustls::crypto::ring::default_provider(),
        ))
        .disable_verification(true)
        .build();
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .tls_config(tls)
        .build()
        .into()
}

/// The body of a 200 answer to GET `url`, or `None`.
pub fn get(url: &str) -> Option<String> {
    let mut response = agent(Duration::from_secs(30)).get(url).call().ok()?;
    // /metrics of 10,000 Erus is larger than ureq's default 10 MB body limit
    let body = response.body_mut().with_config().limit(u64::MAX).read_to_string();
    (response.status() == 200).then(|| body.ok())?
}

/// The operator as a child process (`run` on one namespace, plain HTTP on a free loopback port).
pub struct Operator {
    child: Option<Child>,
    pub binary: PathBuf,
    pub database: PathBuf,
    pub log: PathBuf,
    pub namespace: String,
    pub port: u16,
    /// Who it runs as (`--kubeconfig`); `None`: $KUBECONFIG's user.
    pub kubeconfig: Option<PathBuf>,
    /// More arguments of `run`.
    pub extra: Vec<String>,
}

impl Operator {
    /// An operator that is not started yet, its journal and log in `dir`.
    pub fn new(binary: PathBuf, dir: &std::path::Path, namespace: &str) -> Res<Self> {
        Ok(Self {
            child: None,
            binary,
            database: dir.join("eru.db"),
            log: dir.join("operator.log"),
            namespace: namespace.to_string(),
            port: TcpListener::bind("127.0.0.1:0")?.local_addr()?.port(),
            kubeconfig: None,
            extra: Vec::new(),
        })
    }

    /// Starts the process; when it was started.
    pub fn start(&mut self) -> Instant {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let started = Instant::now();
        self.child = Some(
            Command::new(&self.binary)
                .args(["run", "--namespace", &self.namespace, "--log-level"])
                .arg(std::env::var("SCALE_LOG_LEVEL").unwrap_or_else(|_| "warn".into()))
                .arg("--database")
                .arg(&self.database)
                .args(["--http-address", &format!("127.0.0.1:{}", self.port)])
                // the queries' class in the operator's container (PID 1 there), measured as shipped
                .args(["--http-query-class", "idle"])
                .args(
                    self.kubeconfig
                        .iter()
                        .flat_map(|k| [std::ffi::OsStr::new("--kubeconfig"), k.as_os_str()]),
                )
                .args(&self.extra)
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("start the operator"),
        );
        started
    }

    /// `http://127.0.0.1:PORT/path`, or `https://` under `--http-auth kubernetes`.
    pub fn url(&self, path: &str) -> String {
        let scheme = if self.extra.windows(2).any(|w| w == ["--http-auth", "kubernetes"]) {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://127.0.0.1:{}{path}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    pub async fn wait_ready(&self) {
        while get(&self.url("/readyz")).is_none() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Its journal file, read-only (WAL: beside the operator's writes): progress and lateness
    /// without loading the HTTP API that is measured.
    pub async fn journal(&self) -> Res<sqlx::SqlitePool> {
        let file = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&self.database)
            .read_only(true);
        Ok(sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(file)
            .await?)
    }

    /// SIGTERM, then waits for the process to end.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
        }
    }
}

/// A new namespace named `prefix-<hex>`.
pub async fn namespace(client: &Client, prefix: &str) -> Res<String> {
    let name = format!("{prefix}-{:x}", Utc::now().timestamp_subsec_nanos());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    Ok(name)
}

/// Runs `f` over `0..n` with at most `concurrency` at once; panics on an error.
pub async fn each<F, Fut>(n: usize, concurrency: usize, f: F)
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Res<()>>,
{
    let results: Vec<Res<()>> = stream::iter(0..n)
        .map(f)
        .buffer_unordered(concurrency)
        .collect()
        .await;
    if let Some(Err(e)) = results.into_iter().find(Result::is_err) {
        panic!("{e}");
    }
}

/// A Deployment of no replicas: a restart of it is a rollout with nothing to wait for.
pub fn deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}}}
    }))
    .unwrap()
}

/// Creates Deployments `web-0` … `web-{n-1}`, then waits until the Deployment controller has
/// observed them all (or a slot would find them not available: `target_unhealthy`, rightly).
/// How long the creates took, in seconds.
pub async fn create_deployments(deployments: &Api<Deployment>, n: usize) -> Res<f64> {
    let t = Instant::now();
    each(n, 32, |i| {
        let api = deployments.clone();
        async move {
            api.create(&PostParams::default(), &deployment(&format!("web-{i}")))
                .await?;
            Ok(())
        }
    })
    .await;
    let created = t.elapsed().as_secs_f64();
    loop {
        let list = deployments.list(&ListParams::default()).await?;
        let observed = list
            .items
            .iter()
            .filter(|d| d.status.as_ref().and_then(|s| s.observed_generation) == d.metadata.generation)
            .count();
        if observed == n {
            return Ok(created);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Creates Erus `web-0` … `web-{n-1}` on the Deployments of the same names, all on `schedule`,
/// then waits until every one is `Waiting` (its first pass done); how long the creates took.
pub async fn create_erus(erus: &Api<eru_operator::eru::Eru>, n: usize, schedule: &str) -> Res<f64> {
    let t = Instant::now();
    each(n, 32, |i| {
        let api = erus.clone();
        async move {
            let eru = serde_json::from_value(json!({
                "apiVersion": "mtsre.meitu.com/v1", "kind": "Eru", "metadata": {"name": format!("web-{i}")},
                "spec": {"schedule": schedule, "target": {"kind": "Deployment", "name": format!("web-{i}")}}
            }))?;
            api.create(&PostParams::default(), &eru).await?;
            Ok(())
        }
    })
    .await;
    let created = t.elapsed().as_secs_f64();
    loop {
        let list = erus.list(&ListParams::default()).await?;
        let waiting = (list.items.iter())
            .filter(|e| e.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Waiting"))
            .count();
        if waiting == n {
            return Ok(created);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
