//! Shared helpers of the end-to-end tests: a client for the local cluster (`KUBECONFIG`), one
//! namespace per test, polling with a deadline, and the operator started as a real process under
//! the ServiceAccount and RBAC of `deploy/` (not as cluster admin).
//!
//! The e2e tests are `#[ignore]`d so a plain `cargo test` needs no cluster; `hack/test.sh` brings
//! the cluster up and runs them with `--include-ignored`.
#![allow(dead_code)]

pub mod eru;
pub mod ledger;
pub mod receiver;

use std::{
    future::Future,
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::OnceLock,
    time::{Duration, Instant},
};

use k8s_openapi::api::{
    authentication::v1::{TokenRequest, TokenRequestSpec},
    core::v1::{Namespace, ServiceAccount},
};
use kube::{Api, Client, api::PostParams, config::Kubeconfig};

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A client for the cluster named by `KUBECONFIG`.
pub async fn client() -> Client {
    assert!(
        std::env::var_os("KUBECONFIG").is_some(),
        "e2e tests need a cluster: run hack/test.sh, or set KUBECONFIG (see README)"
    );
    Client::try_default().await.expect("a client for $KUBECONFIG")
}

/// One request the API server's audit log recorded.
#[derive(Clone, Debug)]
pub struct Audited {
    pub received: chrono::DateTime<chrono::Utc>,
    pub user: String,
    /// The request's `fieldManager`, if it named one (the restart patch's is `eru-operator-restart`).
    pub field_manager: Option<String>,
    pub code: u16,
}

/// The PATCH requests of the workload `kind`/`name` in `ns` (`deployments`, `statefulsets`,
/// `daemonsets`) the API server received, whether or not they changed it (a restart patch that
/// sets the slot the template already carries changes nothing but is still a patch), from the
/// audit log `hack/cluster.sh` keeps beside the kubeconfig (`logs/audit.log`). `None` when the
/// cluster keeps no such log (an existing cluster).
pub fn workload_patches(kind: &str, ns: &str, name: &str) -> Option<Vec<Audited>> {
    let kubeconfig = PathBuf::from(std::env::var_os("KUBECONFIG")?);
    let text = std::fs::read_to_string(kubeconfig.parent()?.join("logs/audit.log")).ok()?;
    let mut patches = Vec::new();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let object = &event["objectRef"];
        if event["verb"] != "patch"
            || event["stage"] != "ResponseComplete"
            || object["resource"] != kind
            || object["namespace"] != ns
            || object["name"] != name
            || !object["subresource"].is_null()
        {
            continue;
        }
        let uri = event["requestURI"].as_str().unwrap_or_default();
        patches.push(Audited {
            received: event["requestReceivedTimestamp"]
                .as_str()
                .and_then(|t| t.parse().ok())
                .expect("an audit event's requestReceivedTimestamp"),
            user: event["user"]["username"].as_str().unwrap_or_default().to_string(),
            field_manager: uri
                .split(['?', '&'])
                .find_map(|p| p.strip_prefix("fieldManager="))
                .map(str::to_string),
            code: event["responseStatus"]["code"].as_u64().unwrap_or(0) as u16,
        });
    }
    Some(patches)
}

/// Runs kubectl against `KUBECONFIG`; panics with its stderr if it fails.
pub fn kubectl(args: &[&str]) -> String {
    kubectl_at(None, args)
}

/// A kubectl command against the cluster of `kubeconfig` (else `KUBECONFIG`).
fn kubectl_command(kubeconfig: Option<&Path>) -> Command {
    let mut kubectl = Command::new("kubectl");
    if let Some(path) = kubeconfig {
        kubectl.env("KUBECONFIG", path);
    }
    kubectl
}

/// Runs kubectl against the cluster of `kubeconfig` (else `KUBECONFIG`); panics with its stderr
/// if it fails.
fn kubectl_at(kubeconfig: Option<&Path>, args: &[&str]) -> String {
    let output = kubectl_command(kubeconfig)
        .args(args)
        .current_dir(repo())
        .output()
        .expect("kubectl on PATH");
    assert!(
        output.status.success(),
        "kubectl {} failed{}: {}",
        args.join(" "),
        kubeconfig
            .map(|p| format!(" (KUBECONFIG={})", p.display()))
            .unwrap_or_default(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Applies `crds/` and `deploy/` (Namespace, RBAC, the operator's Deployment), once per test
/// binary. The in-cluster operator Deployment is inert on kwok's fake nodes; the tests run the
/// operator as a process with the same ServiceAccount.
pub fn install() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        // exactly the README's install command (client-side apply, as most users run it)
        apply_beside_others(&["apply", "-f", "crds/", "-f", "deploy/"], None);
        // (`kubectl wait -f` reads folders recursively, `apply -f` does not: the Eru's CRD alone)
        wait_established("crds/eru.yaml", None);
    });
}

/// `kubectl apply` of objects other test binaries apply at the same moment (hack/suites.sh runs
/// three at once). A client-side apply reads, then creates what it did not find: two binaries
/// that both found nothing both create, and one is answered AlreadyExists (or, on an update,
/// Conflict). The loser applies again, and then finds the object; any other failure panics.
fn apply_beside_others(args: &[&str], kubeconfig: Option<&Path>) {
    for attempt in 1.. {
        let output = kubectl_command(kubeconfig)
            .args(args)
            .current_dir(repo())
            .output()
            .expect("kubectl on PATH");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let raced = stderr.contains("(AlreadyExists)") || stderr.contains("(Conflict)");
        if output.status.success() || !raced || attempt == 5 {
            assert!(
                output.status.success(),
                "kubectl {} failed: {stderr}",
                args.join(" ")
            );
            return;
        }
        std::thread::sleep(Duration::from_millis(200 * attempt));
    }
}

/// Applies an optional controller's CRD and RBAC (`crds/NAME/`, `deploy/NAME/`: `podset`,
/// `memcached`), once per test binary and controller; its operator runs with `--controllers`
/// naming it.
pub fn install_controller(name: &str) {
    static INSTALLED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    install();
    let mut installed = INSTALLED.lock().unwrap();
    if installed.iter().any(|n| n == name) {
        return;
    }
    let (crd, rbac) = (format!("crds/{name}/"), format!("deploy/{name}/"));
    apply_beside_others(&["apply", "-f", &crd, "-f", &rbac], None);
    wait_established(&crd, None);
    installed.push(name.to_string());
}

/// Waits until the CRDs of `path` are Established. `kubectl wait` fails at once, rather than
/// waiting, on a CRD the API server has not given its first conditions yet ("status.conditions
/// accessor error: <nil>"), as happens right after its create: that one answer is asked again.
fn wait_established(path: &str, kubeconfig: Option<&Path>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let output = kubectl_command(kubeconfig)
            .args(["wait", "--for=condition=Established", "--timeout=60s", "-f", path])
            .current_dir(repo())
            .output()
            .expect("kubectl on PATH");
        let stderr = String::from_utf8_lossy(&output.stderr);
        if output.status.success() {
            return;
        }
        assert!(
            stderr.contains("accessor error") && Instant::now() < deadline,
            "kubectl wait for the CRDs of {path} failed: {stderr}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A control plane of its own (`hack/cluster.sh up --name NAME`: etcd, an API server, kwok), for
/// a test of two clusters; its CRDs and `deploy/` applied; taken down when dropped.
pub struct OtherCluster {
    pub name: String,
    /// Its admin kubeconfig.
    pub kubeconfig: PathBuf,
    pub client: Client,
}

impl OtherCluster {
    pub async fn up(name: &str) -> Self {
        // taken down also if a step below panics
        struct Down<'a>(&'a str);
        impl Drop for Down<'_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    let _ = Command::new(repo().join("hack/cluster.sh"))
                        .args(["down", "--name", self.0])
                        .output();
                }
            }
        }
        let _down = Down(name);
        let cluster_sh = repo().join("hack/cluster.sh");
        let up = Command::new(&cluster_sh)
            .args(["up", "--name", name])
            .output()
            .expect("hack/cluster.sh");
        assert!(
            up.status.success(),
            "hack/cluster.sh up --name {name}: {}{}",
            String::from_utf8_lossy(&up.stdout),
            String::from_utf8_lossy(&up.stderr)
        );
        // `export KUBECONFIG=…` (hack/cluster.sh env)
        let env = Command::new(&cluster_sh)
            .args(["env", "--name", name])
            .output()
            .expect("hack/cluster.sh");
        let kubeconfig = (String::from_utf8_lossy(&env.stdout).lines())
            .find_map(|l| l.strip_prefix("export KUBECONFIG="))
            .map(|v| PathBuf::from(v.trim_matches(['"', '\''])))
            .unwrap_or_else(|| panic!("hack/cluster.sh env --name {name} names no KUBECONFIG"));
        let cluster = Self {
            name: name.to_string(),
            client: Client::try_from(
                kube::Config::from_custom_kubeconfig(
                    Kubeconfig::read_from(&kubeconfig).expect("its kubeconfig"),
                    &Default::default(),
                )
                .await
                .expect("a config for its kubeconfig"),
            )
            .expect("a client for its kubeconfig"),
            kubeconfig,
        };
        apply_beside_others(
            &["apply", "-f", "crds/", "-f", "deploy/"],
            Some(&cluster.kubeconfig),
        );
        wait_established("crds/eru.yaml", Some(&cluster.kubeconfig));
        cluster
    }

    /// kubectl against this cluster; panics with its stderr if it fails.
    pub fn kubectl(&self, args: &[&str]) -> String {
        kubectl_at(Some(&self.kubeconfig), args)
    }
}

impl Drop for OtherCluster {
    fn drop(&mut self) {
        let _ = Command::new(repo().join("hack/cluster.sh"))
            .args(["down", "--name", &self.name])
            .output();
    }
}

/// Polls `check` every 200 ms until it returns `Some`, or panics after `timeout` naming `what`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A namespace of its own for one test; deleted (without waiting) when dropped.
pub struct TestNamespace {
    pub name: String,
}

impl TestNamespace {
    pub async fn create(client: &Client, prefix: &str) -> Self {
        let suffix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!("{prefix}-{suffix:x}");
        let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("create namespace");
        // Pods need the namespace's default ServiceAccount.
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &name);
        wait_for("default ServiceAccount", Duration::from_secs(30), || async {
            accounts.get_opt("default").await.ok().flatten()
        })
        .await;
        Self { name }
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let _ = Command::new("kubectl")
            .args([
                "delete",
                "namespace",
                &self.name,
                "--wait=false",
                "--ignore-not-found",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// This machine's address on its default route (not loopback): where a process of the tests
/// listens for the cluster (an Endpoints object pointing at it). No packet is sent: connecting a
/// UDP socket only picks the source address. `ERU_TEST_HOST_IP` overrides it.
pub fn host_ip() -> String {
    if let Ok(ip) = std::env::var("ERU_TEST_HOST_IP") {
        return ip;
    }
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    socket
        .connect("203.0.113.1:9")
        .expect("a default route (or set ERU_TEST_HOST_IP to a non-loopback address of this machine)");
    let ip = socket.local_addr().unwrap().ip();
    assert!(!ip.is_loopback(), "{ip}: set ERU_TEST_HOST_IP");
    ip.to_string()
}

/// A free loopback port.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An HTTP client that takes any status as an answer, and HTTPS with any certificate (the
/// operator's self-signed one under `--http-auth kubernetes`).
pub fn agent(timeout: Option<Duration>) -> ureq::Agent {
    let tls = ureq::tls::TlsConfig::builder()
        .provider(ureq::tls::TlsProvider::Rustls)
        .unversioned_rustls_crypto_provider(std::sync::Arc::new(
            tokio_rustls::rustls::crypto::ring::default_provider(),
        ))
        .disable_verification(true)
        .build();
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(timeout)
        .tls_config(tls)
        .build()
        .into()
}

/// GET `url`; returns the status and body (any status; panics only if nothing answers).
pub fn get(url: &str) -> (u16, String) {
    let mut response = (agent(None).get(url).call()).unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = response.status().as_u16();
    (status, response.body_mut().read_to_string().unwrap_or_default())
}

/// The name the kernel keeps of the HTTP API's query thread (`eru-http-queries`, cut to 15 bytes).
pub const QUERY_THREAD: &str = "eru-http-querie";

/// The scheduling policy and nice value of the thread named `comm` of the process `pid`, as
/// `/proc/PID/task/TID/stat` tells them (`None`: no such thread).
pub fn thread_class(pid: u32, comm: &str) -> Option<(i32, i32)> {
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        if head.split_once('(').map(|(_, name)| name) != Some(comm) {
            continue;
        }
        // after the name: the state is field 3, the nice value 19 and the policy 41 (proc(5))
        let fields: Vec<&str> = rest.split_whitespace().collect();
        return Some((fields.get(38)?.parse().ok()?, fields.get(16)?.parse().ok()?));
    }
    None
}

/// GET `url` as JSON, expecting 200.
pub fn get_json(url: &str) -> serde_json::Value {
    let (status, body) = get(url);
    assert_eq!(status, 200, "GET {url}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {url}: not JSON ({e}): {body}"))
}

/// The ServiceAccount the e2e operators run as unless a test picks one: deploy/'s.
pub const OPERATOR_ACCOUNT: (&str, &str) = ("eru-system", "eru-operator");

/// A kubeconfig that authenticates as the ServiceAccount `(namespace, name)` with a fresh token,
/// so the operator runs with exactly its RBAC (`eru-system/eru-operator`: `deploy/rbac.yaml`'s,
/// and the optional controllers' a test installed).
async fn service_account_kubeconfig(
    client: &Client,
    path: &Path,
    (namespace, name): (&str, &str),
    admin: Option<&Path>,
) {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600 * 2),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let token = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .expect("a token for the operator's ServiceAccount")
        .status
        .expect("token status")
        .token
        .expect("a token in the TokenRequest status");
    let admin = match admin {
        Some(path) => Kubeconfig::read_from(path).expect("read the cluster's kubeconfig"),
        None => Kubeconfig::read().expect("read $KUBECONFIG"),
    };
    let cluster = admin.clusters[0].cluster.clone().expect("cluster entry");
    let server = cluster.server.expect("server");
    let ca = cluster.certificate_authority.expect("certificate-authority file");
    let config = format!(
        "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"{server}\", certificate-authority: \"{ca}\"}}}}]\n\
         users: [{{name: eru-operator, user: {{token: \"{token}\"}}}}]\n\
         contexts: [{{name: c, context: {{cluster: c, user: eru-operator}}}}]\ncurrent-context: c\n"
    );
    std::fs::write(path, config).unwrap();
}

/// A fresh database on the test PostgreSQL server (`ERU_TEST_POSTGRES_URL`, which
/// `hack/test.sh` starts with `hack/postgres.sh`); returns its URL.
pub fn fresh_database(prefix: &str) -> String {
    let server = std::env::var("ERU_TEST_POSTGRES_URL").expect(
        "ERU_TEST_POSTGRES_URL is not set: run hack/test.sh (it starts PostgreSQL with hack/postgres.sh)",
    );
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let name = format!("{prefix}_{nanos:x}");
    let created = Command::new("psql")
        .args([
            server.as_str(),
            "-v",
            "ON_ERROR_STOP=1",
            "-qc",
            &format!("CREATE DATABASE {name}"),
        ])
        .output()
        .expect("psql (Debian package postgresql-client, installed by hack/deps.sh)");
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let (base, _) = server.rsplit_once('/').expect("a URL ending in /DATABASE");
    format!("{base}/{name}")
}

/// The journal the e2e operators use unless a test picks one: `ERU_E2E_JOURNAL=postgres` gives
/// each a fresh PostgreSQL database (hack/test.sh runs tests/eru.rs so, too), else a SQLite file.
fn default_database_url() -> Option<String> {
    (std::env::var("ERU_E2E_JOURNAL").as_deref() == Ok("postgres")).then(|| fresh_database("e2e"))
}

/// The operator binary running as a child process, scoped to one namespace.
pub struct Operator {
    child: Option<Child>,
    pub port: u16,
    pub database: PathBuf,
    /// A journal URL (`postgres://…`) used instead of the SQLite file `database`.
    pub database_url: Option<String>,
    pub log: PathBuf,
    kubeconfig: PathBuf,
    namespace: String,
    extra: Vec<String>,
    /// Extra environment of the process (e.g. a failpoint); `restart` keeps what is set here.
    pub env: Vec<(String, String)>,
    /// The bearer token [`Operator::get`] sends (under `--http-auth kubernetes`).
    pub token: Option<String>,
    /// The address it listens on: loopback, unless a test needs the cluster to reach it (an
    /// Endpoints object may not point at loopback).
    pub host: String,
    _dir: std::sync::Arc<tempfile::TempDir>,
}

impl Operator {
    /// Starts the operator for `namespace` with a fresh journal and waits until `/readyz` is 200.
    pub async fn start(client: &Client, namespace: &str, extra: &[&str]) -> Self {
        Self::start_with_env(client, namespace, extra, &[]).await
    }

    /// [`Operator::start`] with extra environment variables.
    pub async fn start_with_env(
        client: &Client,
        namespace: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        Self::start_on(client, namespace, extra, env, None).await
    }

    /// [`Operator::start_with_env`] on the journal at `database_url` (`postgres://…`) when given.
    pub async fn start_on(
        client: &Client,
        namespace: &str,
        extra: &[&str],
        env: &[(&str, &str)],
        database_url: Option<&str>,
    ) -> Self {
        let mut operator = Self::prepare(client, namespace, extra, env, database_url).await;
        operator.spawn().await;
        operator
    }

    /// [`Operator::start`] on another cluster than `KUBECONFIG`'s (its CRDs and RBAC installed).
    pub async fn start_in(cluster: &OtherCluster, namespace: &str, extra: &[&str]) -> Self {
        let mut operator = Self::prepare_in(
            &cluster.client,
            Some(&cluster.kubeconfig),
            namespace,
            extra,
            OPERATOR_ACCOUNT,
        )
        .await;
        operator.spawn().await;
        operator
    }

    /// The operator of [`Operator::start_on`], not started yet.
    pub async fn prepare(
        client: &Client,
        namespace: &str,
        extra: &[&str],
        env: &[(&str, &str)],
        database_url: Option<&str>,
    ) -> Self {
        Self::prepare_as(client, namespace, extra, env, database_url, OPERATOR_ACCOUNT).await
    }

    /// [`Operator::prepare`] authenticated as the ServiceAccount `account` (namespace, name).
    pub async fn prepare_as(
        client: &Client,
        namespace: &str,
        extra: &[&str],
        env: &[(&str, &str)],
        database_url: Option<&str>,
        account: (&str, &str),
    ) -> Self {
        install();
        let mut operator = Self::prepare_in(client, None, namespace, extra, account).await;
        operator.env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        operator.database_url = database_url.map(str::to_string).or_else(default_database_url);
        operator
    }

    /// An operator of the cluster of `client` (whose admin kubeconfig is `admin`, else
    /// `KUBECONFIG`), not started yet: its SQLite journal, no extra environment.
    async fn prepare_in(
        client: &Client,
        admin: Option<&Path>,
        namespace: &str,
        extra: &[&str],
        account: (&str, &str),
    ) -> Self {
        let dir = std::sync::Arc::new(tempfile::tempdir().unwrap());
        let kubeconfig = dir.path().join("kubeconfig");
        service_account_kubeconfig(client, &kubeconfig, account, admin).await;
        Self {
            child: None,
            port: free_port(),
            database: dir.path().join("eru.db"),
            database_url: None,
            log: dir.path().join("operator.log"),
            kubeconfig,
            namespace: namespace.to_string(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
            token: None,
            host: "127.0.0.1".to_string(),
            _dir: dir,
        }
    }

    /// An operator this test did not start: a Pod (tests/real_node.rs) reached through a
    /// port-forward on 127.0.0.1:`port`, serving HTTPS under `--http-auth kubernetes`, read with
    /// `token`. Its journal is the Pod's: only the HTTP API reads it.
    pub fn remote(port: u16, token: &str) -> Self {
        let dir = std::sync::Arc::new(tempfile::tempdir().unwrap());
        Self {
            child: None,
            port,
            database: dir.path().join("in-the-pod"),
            database_url: None,
            log: dir.path().join("operator.log"),
            kubeconfig: dir.path().join("kubeconfig"),
            namespace: String::new(),
            extra: vec!["--http-auth".into(), "kubernetes".into()],
            env: Vec::new(),
            token: Some(token.to_string()),
            host: "127.0.0.1".to_string(),
            _dir: dir,
        }
    }

    /// Starts the process and waits until it is ready. A port another process took between
    /// [`free_port`] and the bind is given up for a new one (tests call [`Operator::url`] after a
    /// start, never a URL kept from before).
    pub async fn spawn(&mut self) {
        for _ in 0..3 {
            let logged = std::fs::metadata(&self.log).map_or(0, |m| m.len() as usize);
            self.spawn_process();
            if !self.lost_its_port(logged).await {
                return self.wait_ready().await;
            }
            self.port = free_port();
        }
        panic!("three ports taken by others in a row:\n{}", self.log_tail());
    }

    /// Waits until the process answers or exits; whether it exited because its port was taken
    /// (as its log says after byte `logged`).
    async fn lost_its_port(&mut self, logged: usize) -> bool {
        let deadline = Instant::now() + Duration::from_secs(90);
        while Instant::now() < deadline {
            if self.child.as_mut().unwrap().try_wait().unwrap().is_some() {
                let log = std::fs::read(&self.log).unwrap_or_default();
                if String::from_utf8_lossy(log.get(logged..).unwrap_or_default())
                    .contains("Address already in use")
                {
                    self.child = None;
                    return true;
                }
                return false; // wait_ready tells why
            }
            if agent(None).get(&self.url("/healthz")).call().is_ok() {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    fn spawn_process(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_eru-operator"))
            .arg("run")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--namespace", &self.namespace])
            .arg("--database")
            .arg(
                self.database_url
                    .clone()
                    .unwrap_or_else(|| self.database.display().to_string()),
            )
            .args(["--http-address", &format!("{}:{}", self.host, self.port)])
            .args([
                "--heartbeat-seconds",
                "1",
                "--log-level",
                "info,eru_operator=debug",
            ])
            .args(&self.extra)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start eru-operator");
        self.child = Some(child);
    }

    /// Starts the process and waits up to `within` for it to exit on its own; its exit status, or
    /// `None` if it still runs.
    pub async fn spawn_expecting_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        self.spawn_process();
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        None
    }

    /// Waits until `/readyz` answers 200.
    pub async fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("operator exited with {status}:\n{}", self.log_tail());
            }
            if let Ok(response) = agent(None).get(&self.url("/readyz")).call()
                && response.status() == 200
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "operator not ready after 90s:\n{}",
                self.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// What `/readyz` says this process is: `leader` or `standby` (`None` if it does not answer).
    pub fn role(&self) -> Option<String> {
        let text = agent(Some(Duration::from_secs(2)))
            .get(&self.url("/readyz"))
            .call()
            .ok()?
            .body_mut()
            .read_to_string()
            .ok()?;
        let body: serde_json::Value = serde_json::from_str(&text).ok()?;
        body["role"].as_str().map(str::to_string)
    }

    /// `http://<host>:<port><path>` (host 127.0.0.1 unless set), or `https://` when the operator
    /// serves HTTPS (`--http-auth kubernetes`, `--tls-cert-file`).
    pub fn url(&self, path: &str) -> String {
        let tls = self.extra.iter().any(|a| a == "--tls-cert-file")
            || (self.extra.windows(2)).any(|w| w[0] == "--http-auth" && w[1] == "kubernetes");
        let scheme = if tls { "https" } else { "http" };
        format!("{scheme}://{}:{}{path}", self.host, self.port)
    }

    /// GET `path`, with [`Operator::token`] as a bearer token if set: the status and body (any
    /// status; panics only if nothing answers).
    pub fn get(&self, path: &str) -> (u16, String) {
        let url = self.url(path);
        let mut request = agent(None).get(&url);
        if let Some(token) = &self.token {
            request = request.header("Authorization", &format!("Bearer {token}"));
        }
        let mut response = request.call().unwrap_or_else(|e| panic!("GET {url}: {e}"));
        let status = response.status().as_u16();
        (status, response.body_mut().read_to_string().unwrap_or_default())
    }

    /// [`Operator::get`] as JSON, expecting 200.
    pub fn get_json(&self, path: &str) -> serde_json::Value {
        let (status, body) = self.get(path);
        assert_eq!(status, 200, "GET {path}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: not JSON ({e}): {body}"))
    }

    /// The journaled transitions of the `kind` object `name`, oldest first (`/transitions` lists
    /// the newest first); asserts that they chain: each starts in the state the one before ended
    /// in. A machine restored from a status the watch cache had not caught up with replays a
    /// transition, which shows here as a break (this operator process was not restarted).
    pub fn chained_transitions(&self, kind: &str, name: &str) -> Vec<serde_json::Value> {
        let page = self.get_json(&format!("/transitions?kind={kind}&name={name}&limit=1000"));
        let mut transitions = page["items"].as_array().cloned().unwrap_or_default();
        transitions.reverse();
        for pair in transitions.windows(2) {
            assert_eq!(
                pair[0]["to"], pair[1]["from"],
                "{kind} {name}: a transition starts where the one before did not end: {pair:#?}\nall: {transitions:#?}"
            );
        }
        transitions
    }

    /// The last lines of the operator's log, for failure messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Replaces the extra flags the next [`Operator::restart`] starts with.
    pub fn set_flags(&mut self, extra: &[&str]) {
        self.extra = extra.iter().map(|s| s.to_string()).collect();
    }

    /// SIGKILL: no clean stop is journaled.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and wait for a clean exit.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let status = child.wait().unwrap();
            assert!(
                status.success(),
                "operator did not stop cleanly ({status}):\n{}",
                self.log_tail()
            );
        }
    }

    /// Whether the process has exited (as a supervisor sees it); its status if so.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        let status = self.child.as_mut()?.try_wait().unwrap()?;
        self.child = None;
        Some(status)
    }

    /// Starts the process again, as a supervisor (kubelet) would, without waiting for it.
    pub fn respawn(&mut self) {
        assert!(self.child.is_none(), "the operator still runs");
        self.spawn_process();
    }

    /// Starts the process again on the same journal, port and namespace.
    pub async fn restart(&mut self) {
        assert!(self.child.is_none(), "stop or kill the operator first");
        self.spawn().await;
    }
}

impl Operator {
    /// What a failing test needs beside the log: the newest slot records (each one's result and
    /// reason) and the namespace's workloads, pods and Events as the API server has them. Never
    /// panics (it runs while a test unwinds).
    fn print_state(&self) {
        if !self.namespace.is_empty() {
            let path = format!("/slots?namespace={}&limit=30", self.namespace);
            let mut request = agent(None).get(&self.url(&path));
            if let Some(token) = &self.token {
                request = request.header("Authorization", &format!("Bearer {token}"));
            }
            let body = match request.call() {
                Ok(mut r) => r.body_mut().read_to_string().unwrap_or_default(),
                Err(e) => format!("(GET failed: {e})"),
            };
            eprintln!("--- GET {path} ---\n{body}");
        }
        for what in [
            vec![
                "get",
                "deployments,statefulsets,daemonsets,replicasets,pods",
                "-o",
                "wide",
            ],
            vec!["get", "events", "--sort-by=.lastTimestamp"],
        ] {
            let mut command = Command::new("kubectl");
            command.args(&what);
            if !self.namespace.is_empty() {
                command.args(["-n", &self.namespace]);
            }
            if let Ok(out) = command.output() {
                eprintln!(
                    "--- kubectl {} ---\n{}{}",
                    what.join(" "),
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        // a failing test prints the whole log (the tail only misses what led up to it), at most
        // its last 5,000 lines, before the test's folder and the log in it are deleted
        if std::thread::panicking() {
            const LINES: usize = 5_000;
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let elided = lines.len().saturating_sub(LINES);
            eprintln!(
                "--- operator log ({}, {} lines{}) ---\n{}\n--- end of the operator log ---",
                self.log.display(),
                lines.len(),
                if elided > 0 {
                    format!(", the first {elided} left out")
                } else {
                    String::new()
                },
                lines[elided..].join("\n")
            );
            self.print_state();
        }
        self.kill();
    }
}

/// Cluster-scoped bindings a test made, deleted on drop whatever its outcome.
pub struct ClusterBindings(pub Vec<String>);

impl Drop for ClusterBindings {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = Command::new("kubectl")
                .args(["delete", "clusterrolebinding", name, "--ignore-not-found"])
                .output();
        }
    }
}

/// ClusterRoles a test made, deleted on drop whatever its outcome.
pub struct ClusterRoles(pub Vec<String>);

impl Drop for ClusterRoles {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = Command::new("kubectl")
                .args(["delete", "clusterrole", name, "--ignore-not-found"])
                .output();
        }
    }
}

/// Lets the operator's ServiceAccount hold the leader Lease in `ns` (the RoleBinding
/// `deploy/rbac.yaml` makes in eru-system), so a test elects in a namespace of its own.
pub async fn allow_lease(client: &Client, ns: &str) {
    let binding: k8s_openapi::api::rbac::v1::RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "eru-operator-leader-election"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "eru-operator-leader-election"},
        "subjects": [{"kind": "ServiceAccount", "name": "eru-operator", "namespace": "eru-system"}]
    }))
    .unwrap();
    Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

/// Names of the live (not terminating) Pods matching a label selector, sorted.
pub async fn live_pod_names(pods: &Api<k8s_openapi::api::core::v1::Pod>, selector: &str) -> Vec<String> {
    let list = pods
        .list(&kube::api::ListParams::default().labels(selector))
        .await
        .unwrap();
    let mut names: Vec<String> = list
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect();
    names.sort();
    names
}
