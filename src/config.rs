//! Flags and environment of `eru-operator run`, read once at start. Bad values are clap errors
//! (a one-line message and exit 2).

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use clap::{Args, ValueEnum};

/// Log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Who may read the HTTP API.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum HttpAuth {
    /// Anyone who reaches the port.
    None,
    /// Bearer tokens, TokenReview and SubjectAccessReview.
    Kubernetes,
}

/// How fast restarts may begin (`--restart-pace`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RestartPace {
    /// As fast as slots come due (only the caps, if set, hold a restart back).
    Unlimited,
    /// At most `--restart-rate` restarts begin per second.
    Fixed,
    /// Slower when the API server slows down or answers 429, faster when it recovers, up to
    /// `--restart-rate` (default 500 a second).
    Adaptive,
}

/// Where the HTTP API's journal queries run (`--http-query-class`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum QueryClass {
    /// `idle` when the operator is its PID namespace's first process (a container's, which has a
    /// CPU cgroup of its own), else `nice`.
    Auto,
    /// Linux `SCHED_IDLE`: only CPU nothing else in the operator's CPU cgroup wants.
    Idle,
    /// Nice 19: a small share of the CPU beside busy threads, five times the idle class's.
    Nice,
}

/// A controller the operator can run (`--controllers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, ValueEnum)]
pub enum Controller {
    /// Erus: scheduled restarts of Deployments, StatefulSets and DaemonSets (and the automatic
    /// Erus of annotated workloads).
    Eru,
    /// PodSets (`k8stest.justin0u0.com`): creates and deletes Pods.
    Podset,
    /// Memcacheds (`cache.example.com`, the operator-sdk tutorial's kind): creates Deployments.
    Memcached,
}

impl Controller {
    pub const ALL: [Controller; 3] = [Controller::Eru, Controller::Podset, Controller::Memcached];

    /// The name `--controllers` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Controller::Eru => "eru",
            Controller::Podset => "podset",
            Controller::Memcached => "memcached",
        }
    }
}

/// Schedule of automatic Erus without a schedule annotation: a stable minute of 03:xx per Eru
/// (`H` is hashed from its namespace/name), so a fleet does not restart in the same second.
pub const DEFAULT_SCHEDULE: &str = "H 3 * * *";

/// Options of `eru-operator run`.
#[derive(Args, Clone, Debug)]
pub struct RunArgs {
    /// Kubeconfig file; without it: $KUBECONFIG, ~/.kube/config, or the in-cluster config.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// Watch only this namespace (default: all namespaces).
    #[arg(short = 'n', long, env = "ERU_NAMESPACE", value_parser = parse_namespace)]
    pub namespace: Option<String>,

    /// The controllers to run, comma-separated: `eru` (restarts; the default), `podset`,
    /// `memcached`. Each needs its CRD and ClusterRole (deploy/rbac.yaml for `eru`,
    /// deploy/podset/ and deploy/memcached/ for the others); the operator waits only for the
    /// CRDs of the controllers it runs.
    #[arg(
        long,
        env = "ERU_CONTROLLERS",
        value_enum,
        value_delimiter = ',',
        num_args = 1..,
        default_value = "eru"
    )]
    pub controllers: Vec<Controller>,

    /// The journal: a SQLite file (created if missing; one operator process per file), or a
    /// `postgres://USER:PASSWORD@HOST:PORT/DATABASE?sslmode=verify-full` URL shared by replicas
    /// (use with `--leader-elect`). The password never appears in logs, errors or this help
    /// (the environment's value is not shown).
    #[arg(
        long,
        env = "ERU_DATABASE",
        default_value = "./eru.db",
        value_name = "PATH|URL",
        hide_env_values = true
    )]
    pub database: String,

    /// Address of the HTTP API: the journal's listings and audit (/history, /missed, /slots,
    /// /transitions, /audit, the /ui pages), /metrics, the probes /healthz and /readyz, and
    /// /openapi.json.
    #[arg(long, env = "ERU_HTTP_ADDRESS", default_value = "0.0.0.0:8080")]
    pub http_address: SocketAddr,

    /// Address of a listener of its own for the probes alone (/healthz, /readyz; plain HTTP, no
    /// token, a few connections): the kubelet's probes then never wait behind the API's callers
    /// or its connection cap. The probes stay on --http-address too. Without it, no such
    /// listener (local runs start several operators on one host); deploy/ and the chart use
    /// 0.0.0.0:8081.
    #[arg(long, env = "ERU_PROBE_ADDRESS", value_name = "ADDR")]
    pub probe_address: Option<SocketAddr>,

    /// Who may read the HTTP API: `none` (anyone who reaches the port: local runs, the demo), or
    /// `kubernetes` (a bearer token checked with a TokenReview, each endpoint authorised with a
    /// SubjectAccessReview: docs/api.md, Access). The installs in deploy/ and the chart use
    /// `kubernetes`.
    #[arg(long, env = "ERU_HTTP_AUTH", value_enum, default_value_t = HttpAuth::None)]
    pub http_auth: HttpAuth,

    /// Serve HTTPS with this certificate (PEM, the chain first), read again when it changes.
    /// Without it: plain HTTP, or with `--http-auth kubernetes` a self-signed certificate.
    #[arg(
        long,
        env = "ERU_TLS_CERT_FILE",
        value_name = "PATH",
        requires = "tls_key_file"
    )]
    pub tls_cert_file: Option<PathBuf>,

    /// The private key of `--tls-cert-file` (PEM).
    #[arg(
        long,
        env = "ERU_TLS_KEY_FILE",
        value_name = "PATH",
        requires = "tls_cert_file"
    )]
    pub tls_key_file: Option<PathBuf>,

    /// Journal queries of the HTTP API running at once, each on a journal connection of its own
    /// beside the operator's (on PostgreSQL, count them with its 8 per replica against the
    /// server's max_connections); more wait a second for a place, then get a 503 with
    /// `Retry-After`.
    #[arg(long, env = "ERU_HTTP_MAX_QUERIES", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub http_max_queries: u16,

    /// Access reviews the HTTP API has in flight at once, of each kind (`--http-auth
    /// kubernetes`): TokenReviews of tokens never accepted, TokenReviews of tokens accepted
    /// within the last hour, SubjectAccessReviews and the namespace list. A request that needs
    /// another one gets a 503 with `Retry-After` at once. Bounds what unauthenticated callers
    /// cost the API server (each new token is one TokenReview), and a flood of made-up tokens
    /// cannot take the places of returning callers.
    #[arg(long, env = "ERU_HTTP_MAX_REVIEWS", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub http_max_reviews: u16,

    /// SubjectAccessReviews one caller (a user name) may cause per 20 s (`--http-auth
    /// kubernetes`); answers cached cost nothing. Past it a 429 with `Retry-After`; a listing
    /// without `namespace=` by a caller without a cluster-wide grant needs one per namespace of
    /// the cluster, and gets a 403 asking for a namespace when that is more than this. Bounds
    /// what one identity with no grants costs the API server and the other callers.
    #[arg(long, env = "ERU_HTTP_CALLER_REVIEWS", default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub http_caller_reviews: u32,

    /// The audiences a bearer token must be issued for (comma-separated; `--http-auth
    /// kubernetes`): sent as the TokenReview's `spec.audiences` and checked in its status. Mint
    /// one with `kubectl create token NAME --audience AUDIENCE`. Empty: the API server's own
    /// audiences (any ServiceAccount token of the cluster).
    #[arg(long, env = "ERU_HTTP_TOKEN_AUDIENCES", value_delimiter = ',', value_parser = parse_audience)]
    pub http_token_audiences: Vec<String>,

    /// Open connections of the HTTP API at most; at the cap new connections wait in the
    /// kernel's accept queue until one closes.
    #[arg(long, env = "ERU_HTTP_MAX_CONNECTIONS", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub http_max_connections: u32,

    /// The scheduling class of the HTTP API's journal queries. `idle` (Linux SCHED_IDLE): they
    /// take only the CPU nothing else in the operator's CPU cgroup wants, so a crowd of readers
    /// never delays a restart; right in a container of its own. `nice` (nice 19): a small share
    /// beside busy threads (five times the idle class's), for an operator run as a plain process
    /// beside busy ones, where idle queries may not finish before the request timeout. `auto`:
    /// `idle` when the operator is its PID namespace's first process (a container's), else
    /// `nice`; behind an init process in its container, say `idle`.
    #[arg(long, env = "ERU_HTTP_QUERY_CLASS", value_enum, default_value_t = QueryClass::Auto)]
    pub http_query_class: QueryClass,

    /// Longest an HTTP request may take before its 503 (`30s`, `2m`).
    #[arg(long, env = "ERU_HTTP_REQUEST_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub http_request_timeout: Duration,

    /// Log filter, e.g. `info` or `eru_operator=debug,kube=info`.
    #[arg(long, env = "ERU_LOG_LEVEL", default_value = "info", value_parser = parse_log_filter)]
    pub log_level: String,

    /// Log format.
    #[arg(long, env = "ERU_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Schedule of Erus created from the `mtsre.meitu.com/eru` annotation without a schedule.
    /// `H` is hashed from each Eru's namespace/name: `H 3 * * *` spreads them over 03:00-03:59.
    #[arg(long, env = "ERU_DEFAULT_SCHEDULE", default_value = DEFAULT_SCHEDULE, value_parser = parse_schedule)]
    pub default_schedule: String,

    /// Image of the memcached Deployments.
    #[arg(long, env = "MEMCACHED_IMAGE", default_value = crate::memcached::reconcile::DEFAULT_IMAGE)]
    pub memcached_image: String,

    /// Seconds between journal heartbeats (bounds how precisely downtime and journal outages are
    /// known).
    #[arg(long, env = "ERU_HEARTBEAT_SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub heartbeat_seconds: u64,

    /// Eru passes that run at once (a burst of due slots is worked through this many at a time;
    /// a pass waits on the journal and the API server most of its time, so more passes than the
    /// API server's seats keep it busy).
    #[arg(long, env = "ERU_CONCURRENCY", default_value_t = 128, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub concurrency: u16,

    /// How long journal rows are kept (`90d`, `12h`, `30m`, `600s`; `0` keeps them forever).
    /// Per-Eru totals (status.missedSlots, the counters) are kept whatever is pruned.
    #[arg(long, env = "ERU_RETENTION", default_value = "90d", value_parser = parse_retention)]
    pub retention: Retention,

    /// This instance's name in Events and the journal (default: $POD_NAME or the host name).
    #[arg(long, env = "POD_NAME")]
    pub instance: Option<String>,

    /// Elect a leader through a Lease: only its holder acts, other replicas stand by with warm
    /// caches and serve the read API (`--leader-elect`, `--leader-elect=false`).
    #[arg(long, env = "ERU_LEADER_ELECT", default_value_t = false, num_args = 0..=1, default_missing_value = "true")]
    pub leader_elect: bool,

    /// Name of the leader Lease.
    #[arg(long, env = "ERU_LEADER_ELECT_LEASE_NAME", default_value = "eru-operator", value_parser = parse_name)]
    pub leader_elect_lease_name: String,

    /// Namespace of the leader Lease (in a pod: its own namespace, from the downward API).
    #[arg(long, env = "ERU_LEADER_ELECT_NAMESPACE", default_value = "eru-system", value_parser = parse_namespace)]
    pub leader_elect_namespace: String,

    /// How long a standby waits, from the last change of the Lease it saw, before taking it over.
    #[arg(long, env = "ERU_LEADER_ELECT_LEASE_DURATION", default_value = "15s", value_parser = parse_duration)]
    pub leader_elect_lease_duration: Duration,

    /// How long the leader keeps trying to renew before it gives up and exits (less than the
    /// lease duration: it stops acting before anyone can take over).
    #[arg(long, env = "ERU_LEADER_ELECT_RENEW_DEADLINE", default_value = "10s", value_parser = parse_duration)]
    pub leader_elect_renew_deadline: Duration,

    /// Time between tries to take or renew the Lease.
    #[arg(long, env = "ERU_LEADER_ELECT_RETRY_PERIOD", default_value = "2s", value_parser = parse_duration)]
    pub leader_elect_retry_period: Duration,

    /// Most restarts in flight at once across all Erus (decided, or rolling out); a due slot
    /// without a place waits in slot order, and is recorded skipped/fleet_capacity if its
    /// starting deadline passes first. Default: unlimited.
    #[arg(long, env = "ERU_MAX_CONCURRENT_RESTARTS", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_concurrent_restarts: Option<u32>,

    /// The same cap for each namespace. Default: unlimited.
    #[arg(long, env = "ERU_MAX_CONCURRENT_RESTARTS_PER_NAMESPACE", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_concurrent_restarts_per_namespace: Option<u32>,

    /// How fast restarts may begin across all Erus. A due slot the pace holds waits in the same
    /// queue as one without a place under the caps, and is recorded skipped/fleet_capacity if its
    /// starting deadline passes first. Default: fixed when --restart-rate is set, else unlimited.
    #[arg(long, env = "ERU_RESTART_PACE", value_enum)]
    pub restart_pace: Option<RestartPace>,

    /// Most restarts begun per second (--restart-pace fixed), or the adaptive pace's ceiling
    /// (default 500).
    #[arg(long, env = "ERU_RESTART_RATE", value_name = "PER_SECOND", value_parser = parse_rate)]
    pub restart_rate: Option<f64>,

    /// Patch nothing: every Eru's slots are journaled as dry_run with the patch that would have
    /// been sent (`--dry-run`, `--dry-run=false`). Erus are still created and their status written.
    #[arg(long, env = "ERU_DRY_RUN", default_value_t = false, num_args = 0..=1, default_missing_value = "true")]
    pub dry_run: bool,

    /// Cluster-wide blackouts and health gates: a YAML list of windows shaped like an Eru's
    /// spec.blackouts, or a mapping `{blackouts: [...], gates: {...}}` whose gates are shaped like
    /// an Eru's spec.gates (a ConfigMap mounted as a file works: it is re-read every 10 s). A slot
    /// of any Eru inside a blackout is recorded skipped/blackout; the gates hold every Eru's due
    /// slots as its own gates do.
    #[arg(long, env = "ERU_BLACKOUTS_FILE", value_name = "PATH")]
    pub blackouts_file: Option<PathBuf>,

    /// The Prometheus whose alerts the alert gates (an Eru's spec.gates.alerts) read, e.g.
    /// `http://prometheus.monitoring:9090` (its /api/v1/alerts). Without it an alert gate's
    /// answer is unknown (held, or treated as open with onUnknown: Proceed).
    #[arg(long, env = "ERU_PROMETHEUS_URL", value_name = "URL", value_parser = parse_http_url, hide_env_values = true)]
    pub prometheus_url: Option<String>,

    /// The Alertmanager an Eru's spec.silence creates its silences in while it restarts, e.g.
    /// `http://alertmanager.monitoring:9093` (its /api/v2). Without it an Eru with spec.silence
    /// follows its silence.onUnknown (Hold: the restart waits; Proceed: it restarts unsilenced).
    #[arg(long, env = "ERU_ALERTMANAGER_URL", value_name = "URL", value_parser = parse_http_url, hide_env_values = true)]
    pub alertmanager_url: Option<String>,

    /// How soon the gates of a held slot are asked again.
    #[arg(long, env = "ERU_GATE_POLL_INTERVAL", default_value = "15s", value_parser = parse_duration)]
    pub gate_poll_interval: Duration,

    /// How long a gate's answer (the blocking pods of a selector, Prometheus's alerts) is reused.
    #[arg(long, env = "ERU_GATE_CACHE_TTL", default_value = "5s", value_parser = parse_duration)]
    pub gate_cache_ttl: Duration,

    /// Notifications: a YAML file of sinks (webhook or slack, each with its url and a webhook's
    /// optional hmacSecret) and routes (events, reasons, namespaces and an Eru label selector per
    /// sink); mount it from a Secret. Read at start: a bad file stops the operator with the reason.
    /// Without it nothing is sent and no outbox row is written (docs/operations.md,
    /// "Notifications").
    #[arg(long, env = "ERU_NOTIFICATIONS_FILE", value_name = "PATH")]
    pub notifications_file: Option<PathBuf>,

    /// How long a notification is tried before it is dropped (reason expired); settled ones are
    /// deleted from the outbox after as long.
    #[arg(long, env = "ERU_NOTIFICATION_MAX_AGE", default_value = "24h", value_parser = parse_max_age)]
    pub notification_max_age: Duration,

    /// The longest wait between two tries of a notification: the first retry waits 1 s, each
    /// further one twice as long, up to this.
    #[arg(long, env = "ERU_NOTIFICATION_BACKOFF_MAX", default_value = "5m", value_parser = parse_duration)]
    pub notification_backoff_max: Duration,

    /// The most notifications the outbox keeps pending; beyond it the oldest are dropped (reason
    /// outbox_full).
    #[arg(long, env = "ERU_NOTIFICATION_OUTBOX_MAX", default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub notification_outbox_max: u32,
}

impl RunArgs {
    /// Whether `--controllers` names `controller`.
    pub fn runs(&self, controller: Controller) -> bool {
        self.controllers.contains(&controller)
    }

    /// Checks what clap cannot: client-go's ordering of the three leader-election durations.
    pub fn validate(&self) -> Result<(), String> {
        let (lease, renew, retry) = (
            self.leader_elect_lease_duration,
            self.leader_elect_renew_deadline,
            self.leader_elect_retry_period,
        );
        if renew >= lease {
            return Err(format!(
                "--leader-elect-renew-deadline ({renew:?}) must be less than --leader-elect-lease-duration ({lease:?})"
            ));
        }
        if retry >= renew {
            return Err(format!(
                "--leader-elect-retry-period ({retry:?}) must be less than --leader-elect-renew-deadline ({renew:?})"
            ));
        }
        Ok(())
    }
}

/// A duration like `15s`, `500ms` or `1m` (from 100 ms to an hour).
/// A restart rate: a number of restarts per second from 0.01 to 100,000.
fn parse_rate(value: &str) -> Result<f64, String> {
    let rate: f64 = value
        .trim()
        .parse()
        .map_err(|_| format!("{value:?} is not a number of restarts per second"))?;
    if !(0.01..=100_000.0).contains(&rate) {
        return Err(format!("{value}: from 0.01 to 100000 restarts per second"));
    }
    Ok(rate)
}

/// The pace `--restart-pace` and `--restart-rate` ask for; an error says why they disagree.
pub fn restart_pace(
    pace: Option<RestartPace>,
    rate: Option<f64>,
) -> Result<Option<crate::eru::pace::PaceConfig>, String> {
    use crate::eru::pace::{ADAPTIVE_CEILING, PaceConfig};
    match (pace, rate) {
        (None | Some(RestartPace::Unlimited), None) => Ok(None),
        (Some(RestartPace::Unlimited), Some(_)) => {
            Err("--restart-rate with --restart-pace unlimited: drop one of them".into())
        }
        (None | Some(RestartPace::Fixed), Some(rate)) => Ok(Some(PaceConfig {
            rate,
            adaptive: false,
        })),
        (Some(RestartPace::Fixed), None) => Err("--restart-pace fixed needs --restart-rate".into()),
        (Some(RestartPace::Adaptive), rate) => Ok(Some(PaceConfig {
            rate: rate.unwrap_or(ADAPTIVE_CEILING),
            adaptive: true,
        })),
    }
}

fn parse_duration(value: &str) -> Result<Duration, String> {
    let refuse = || format!("'{value}' is not a duration like 15s, 500ms or 1m");
    let split = value.find(|c: char| !c.is_ascii_digit()).ok_or_else(refuse)?;
    let (number, unit) = value.split_at(split);
    let n: u64 = number.parse().map_err(|_| refuse())?;
    let duration = match unit {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        _ => return Err(refuse()),
    };
    if !(Duration::from_millis(100)..=Duration::from_secs(3600)).contains(&duration) {
        return Err(format!("'{value}': must be between 100ms and 1h"));
    }
    Ok(duration)
}

/// An `http://` or `https://` URL.
fn parse_http_url(value: &str) -> Result<String, String> {
    if (value.starts_with("http://") || value.starts_with("https://")) && value.len() > 8 {
        Ok(value.to_string())
    } else {
        Err(format!("'{value}' is not an http:// or https:// URL"))
    }
}

/// A token audience: printable, no comma or space.
fn parse_audience(value: &str) -> Result<String, String> {
    if !value.is_empty() && value.len() <= 253 && value.bytes().all(|b| b.is_ascii_graphic() && b != b',') {
        Ok(value.to_string())
    } else {
        Err(format!("'{value}' is not a token audience"))
    }
}

/// A Kubernetes object name (DNS subdomain).
fn parse_name(value: &str) -> Result<String, String> {
    let valid = !value.is_empty()
        && value.len() <= 253
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && value.starts_with(|c: char| c.is_ascii_alphanumeric())
        && value.ends_with(|c: char| c.is_ascii_alphanumeric());
    if valid {
        Ok(value.to_string())
    } else {
        Err(format!("'{value}' is not a valid object name"))
    }
}

/// How long journal rows are kept; `None` keeps them forever.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention(pub Option<chrono::Duration>);

fn parse_retention(value: &str) -> Result<Retention, String> {
    if value == "0" {
        return Ok(Retention(None));
    }
    let refuse = || format!("'{value}' is not a duration like 90d, 12h, 30m or 600s (0 keeps rows forever)");
    let split = value.find(|c: char| !c.is_ascii_digit()).ok_or_else(refuse)?;
    let (number, unit) = value.split_at(split);
    let n: i64 = number.parse().map_err(|_| refuse())?;
    let seconds = match unit {
        "s" => n,
        "m" => n.saturating_mul(60),
        "h" => n.saturating_mul(3600),
        "d" => n.saturating_mul(86_400),
        _ => return Err(refuse()),
    };
    if !(60..=100 * 365 * 86_400).contains(&seconds) {
        return Err(format!(
            "'{value}': retention must be between a minute and 100 years (or 0)"
        ));
    }
    Ok(Retention(Some(chrono::Duration::seconds(seconds))))
}

/// `--notification-max-age`: a retention's duration (never 0), at least a minute, at most 30 days.
fn parse_max_age(value: &str) -> Result<Duration, String> {
    let refuse = || format!("'{value}': a duration like 24h, 90m or 7d, from 1m to 30d");
    match parse_retention(value) {
        Ok(Retention(Some(age))) if age <= chrono::Duration::days(30) => age.to_std().map_err(|_| refuse()),
        _ => Err(refuse()),
    }
}

fn parse_log_filter(value: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::try_new(value)
        .map(|_| value.to_string())
        .map_err(|e| e.to_string())
}

fn parse_namespace(value: &str) -> Result<String, String> {
    let valid = !value.is_empty()
        && value.len() <= 63
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-');
    if valid {
        Ok(value.to_string())
    } else {
        Err(format!("'{value}' is not a valid namespace name"))
    }
}

/// A schedule valid for any Eru (`H` allowed: it is resolved per Eru).
fn parse_schedule(value: &str) -> Result<String, String> {
    crate::eru::core::schedule::validate(value, None)
        .map(|()| value.to_string())
        .map_err(|e| e.to_string())
}
