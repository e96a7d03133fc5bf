//! Flags and environment of `eru-operator run`, read once at start. Bad values are clap errors
//! (a one-line message and exit 2).

use std::{net::SocketAddr, path::PathBuf};

use clap::{Args, ValueEnum};

/// Log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Options of `eru-operator run`.
#[derive(Args, Clone, Debug)]
pub struct RunArgs {
    /// Kubeconfig file; without it: $KUBECONFIG, ~/.kube/config, or the in-cluster config.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// Watch only this namespace (default: all namespaces).
    #[arg(long, env = "ERU_NAMESPACE", value_parser = parse_namespace)]
    pub namespace: Option<String>,

    /// SQLite journal file (created if missing).
    #[arg(long, env = "ERU_DATABASE", default_value = "./eru.db", value_name = "PATH")]
    pub database: PathBuf,

    /// Address of the HTTP API (/history, /metrics, /healthz, /readyz).
    #[arg(long, env = "ERU_HTTP_ADDRESS", default_value = "0.0.0.0:8080")]
    pub http_address: SocketAddr,

    /// Log filter, e.g. `info` or `eru=debug,kube=info`.
    #[arg(long, env = "ERU_LOG_LEVEL", default_value = "info", value_parser = parse_log_filter)]
    pub log_level: String,

    /// Log format.
    #[arg(long, env = "ERU_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Schedule of Erus created from the `mtsre.meitu.com/eru` annotation without a schedule.
    #[arg(long, env = "ERU_DEFAULT_SCHEDULE", default_value = "0 3 * * *", value_parser = parse_schedule)]
    pub default_schedule: String,

    /// Image of the memcached Deployments.
    #[arg(long, env = "MEMCACHED_IMAGE", default_value = crate::memcached::reconcile::DEFAULT_IMAGE)]
    pub memcached_image: String,

    /// Seconds between journal heartbeats (bounds how precisely downtime is known).
    #[arg(long, env = "ERU_HEARTBEAT_SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub heartbeat_seconds: u64,

    /// This instance's name in Events and the journal (default: $POD_NAME or the host name).
    #[arg(long, env = "POD_NAME")]
    pub instance: Option<String>,
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

fn parse_schedule(value: &str) -> Result<String, String> {
    crate::eru::schedule::Schedule::parse(value, None)
        .map(|_| value.to_string())
        .map_err(|e| e.to_string())
}
