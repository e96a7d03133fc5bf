//! Health gates, the shell: whether a due slot may start. Two gates, asked only when a slot may
//! be due (see [`super::observe`]):
//! - **blocking pods**: pods matching an Eru's `gates.blockingPodSelector` in its namespace that
//!   have not finished (phase not `Succeeded`/`Failed`), listed from the API server;
//! - **alerts**: Prometheus's `/api/v1/alerts` (alerts the rules evaluate now, `firing` ones
//!   only), filtered by the Eru's `gates.alerts` (name regexp, labels with `$namespace` and
//!   `$target`). One request serves every Eru for the cache's lifetime.
//!
//! Answers are cached for `--gate-cache-ttl` (default 5 s): a burst of due slots asks each source
//! once, and a held slot's pass (every `--gate-poll-interval`) never hot-loops a source. The
//! decision with the answers is pure ([`super::hold`]).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration as StdDuration, Instant},
};

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client, api::ListParams, core::Selector};
use prometheus::IntCounterVec;
use regex::Regex;
use serde::Deserialize;

use super::{
    AlertGate, Gates, OnUnknown,
    hold::{Answer, alert_name, some_of},
    ledger::Reason,
};
use crate::metrics::{Metrics, register};

/// Pods or alerts a note names at most.
const NAMED: usize = 5;
/// Longest a Prometheus request may take.
const PROMETHEUS_TIMEOUT: StdDuration = StdDuration::from_secs(5);

/// Operator-wide options of the gates.
#[derive(Clone, Debug)]
pub struct GateOptions {
    /// `--prometheus-url`: the Prometheus whose alerts the alert gates read.
    pub prometheus_url: Option<String>,
    /// `--gate-poll-interval`: how soon a held slot's gates are asked again.
    pub poll: StdDuration,
    /// `--gate-cache-ttl`: how long an answer is reused.
    pub cache_ttl: StdDuration,
}

impl Default for GateOptions {
    fn default() -> Self {
        Self {
            prometheus_url: None,
            poll: StdDuration::from_secs(super::hold::DEFAULT_POLL_SECONDS as u64),
            cache_ttl: StdDuration::from_secs(5),
        }
    }
}

/// An alert Prometheus evaluates now.
#[derive(Clone, Debug, Deserialize)]
pub struct Alert {
    #[serde(default)]
    pub labels: HashMap<String, String>,
    #[serde(default)]
    pub state: String,
}

#[derive(Deserialize)]
struct AlertsResponse {
    data: AlertsData,
}

#[derive(Deserialize)]
struct AlertsData {
    alerts: Vec<Alert>,
}

type Cached<T> = (Instant, Result<T, String>);
/// (namespace, or empty for every namespace; selector) → the unfinished pods it matched.
type PodAnswers = HashMap<(String, String), Cached<Vec<String>>>;

/// Asks the gates, through a short-lived cache.
pub struct Gatekeeper {
    client: Client,
    /// `--namespace`: where a cluster-wide blocking-pod selector looks (all namespaces: `None`).
    watched: Option<String>,
    options: GateOptions,
    agent: Option<ureq::Agent>,
    pods: Mutex<PodAnswers>,
    /// The firing alerts; an async lock so concurrent passes wait for one request.
    alerts: tokio::sync::Mutex<Option<Cached<Arc<Vec<Alert>>>>>,
    /// `eru_gate_evaluations_total{gate, result}`: one per gate asked for a due slot.
    evaluations: IntCounterVec,
}

impl Gatekeeper {
    pub fn new(client: Client, watched: Option<String>, options: GateOptions, metrics: &Metrics) -> Self {
        let evaluations = register(
            metrics.registry(),
            IntCounterVec::new(
                prometheus::Opts::new(
                    "eru_gate_evaluations_total",
                    "Health gate evaluations for a due slot (an Eru's own and the cluster-wide gates, each asked once per pass; cached answers included) by gate and result.",
                ),
                &["gate", "result"],
            )
            .expect("a valid counter"),
        );
        for gate in ["blocking_pods", "alerts"] {
            for result in ["open", "closed", "unknown"] {
                evaluations.with_label_values(&[gate, result]);
            }
        }
        let agent = options.prometheus_url.as_ref().map(|_| agent());
        Self {
            client,
            watched,
            options,
            agent,
            pods: Mutex::default(),
            alerts: tokio::sync::Mutex::new(None),
            evaluations,
        }
    }

    pub fn options(&self) -> &GateOptions {
        &self.options
    }

    /// The answer of the Eru's own gates (`own`) and the cluster-wide ones (`cluster`) for an
    /// Eru in `namespace` targeting `target` (a workload's name). A closed gate wins over an
    /// unknown one; blocking pods are named before alerts, the Eru's own before the cluster's.
    pub async fn check(
        &self,
        namespace: &str,
        target: &str,
        own: Option<&Gates>,
        cluster: Option<&Gates>,
    ) -> Answer {
        let mut unknown = None;
        let scopes = [
            (own, Some(namespace)),
            // cluster-wide pods: across the namespaces the operator watches
            (cluster, None),
        ];
        for (gates, pods_in) in scopes {
            let Some(gates) = gates else { continue };
            if let Some(selector) = &gates.blocking_pod_selector {
                let scope = pods_in.or(self.watched.as_deref());
                let answer = self.blocking_pods(scope, selector).await;
                self.count("blocking_pods", answer.as_ref().map(|pods| !pods.is_empty()));
                match answer {
                    Ok(pods) if pods.is_empty() => {}
                    Ok(pods) => {
                        let place = match (pods_in, scope) {
                            (Some(_), Some(ns)) => format!("in {ns}"),
                            (None, Some(ns)) => format!("in {ns} (cluster-wide gate)"),
                            (_, None) => "in the cluster (cluster-wide gate)".to_string(),
                        };
                        return Answer::Closed {
                            reason: Reason::BlockingPods,
                            note: format!("blocking pods running {place}: {}", some_of(&pods, NAMED)),
                        };
                    }
                    // the API server did not answer: hold (a pod gate has no proceed option)
                    Err(error) => {
                        unknown.get_or_insert(format!("listing blocking pods failed: {error}"));
                    }
                }
            }
            if let Some(gate) = &gates.alerts {
                let answer = self.firing(namespace, target, gate).await;
                self.count("alerts", answer.as_ref().map(|names| !names.is_empty()));
                match answer {
                    Ok(names) if names.is_empty() => {}
                    Ok(names) => {
                        let scope = if pods_in.is_some() {
                            ""
                        } else {
                            " (cluster-wide gate)"
                        };
                        return Answer::Closed {
                            reason: Reason::AlertFiring,
                            note: format!("alerts firing{scope}: {}", some_of(&names, NAMED)),
                        };
                    }
                    Err(error) if gate.on_unknown == OnUnknown::Proceed => {
                        tracing::warn!(namespace, target, %error, "alert gate unknown; onUnknown: Proceed treats it as open");
                    }
                    Err(error) => {
                        unknown.get_or_insert(error);
                    }
                }
            }
        }
        match unknown {
            Some(note) => Answer::Closed {
                reason: Reason::GateUnknown,
                note,
            },
            None => Answer::Open,
        }
    }

    /// Counts one evaluation of `gate`: closed, open, or unknown.
    fn count<E>(&self, gate: &str, closed: Result<bool, E>) {
        let result = match closed {
            Ok(true) => "closed",
            Ok(false) => "open",
            Err(_) => "unknown",
        };
        self.evaluations.with_label_values(&[gate, result]).inc();
    }

    /// The unfinished pods in `namespace` (every namespace: `None`) matching `selector`, by name
    /// (`namespace/name` across namespaces).
    async fn blocking_pods(
        &self,
        namespace: Option<&str>,
        selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    ) -> Result<Vec<String>, String> {
        let selector = Selector::try_from(selector.clone()).map_err(|e| e.to_string())?;
        let key = (namespace.unwrap_or_default().to_string(), selector.to_string());
        if let Some((at, answer)) = self.pods.lock().expect("gate cache").get(&key)
            && at.elapsed() < self.options.cache_ttl
        {
            return answer.clone();
        }
        let api: Api<Pod> = match namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        };
        let params = ListParams::default()
            .labels_from(&selector)
            .fields("status.phase!=Succeeded,status.phase!=Failed")
            .limit(50);
        let answer = match api.list_metadata(&params).await {
            Ok(list) => Ok(list
                .items
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter_map(|p| match namespace {
                    Some(_) => p.metadata.name,
                    None => Some(format!("{}/{}", p.metadata.namespace?, p.metadata.name?)),
                })
                .collect::<Vec<_>>()),
            Err(e) => Err(e.to_string()),
        };
        let mut cache = self.pods.lock().expect("gate cache");
        cache.retain(|_, (at, _)| at.elapsed() < self.options.cache_ttl);
        cache.insert(key, (Instant::now(), answer.clone()));
        answer
    }

    /// The names of the firing alerts `gate` matches for an Eru in `namespace` targeting
    /// `target`, sorted, each once.
    async fn firing(&self, namespace: &str, target: &str, gate: &AlertGate) -> Result<Vec<String>, String> {
        let alerts = self.alerts().await?;
        let name = match &gate.name {
            Some(pattern) => Some(alert_name(pattern)?),
            None => None,
        };
        let mut names: Vec<String> = alerts
            .iter()
            .filter(|a| a.state == "firing")
            .filter(|a| matches(a, name.as_ref(), &gate.labels, namespace, target))
            .map(|a| a.labels.get("alertname").cloned().unwrap_or_default())
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// Prometheus's alerts, from the cache or a request.
    async fn alerts(&self) -> Result<Arc<Vec<Alert>>, String> {
        let (Some(url), Some(agent)) = (&self.options.prometheus_url, &self.agent) else {
            return Err("no --prometheus-url: the alert gate cannot be asked".into());
        };
        let mut cached = self.alerts.lock().await;
        if let Some((at, answer)) = cached.as_ref()
            && at.elapsed() < self.options.cache_ttl
        {
            return answer.clone();
        }
        let endpoint = format!("{}/api/v1/alerts", url.trim_end_matches('/'));
        let agent = agent.clone();
        let fetched = tokio::task::spawn_blocking(move || fetch(&agent, &endpoint))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r)
            .map(Arc::new);
        *cached = Some((Instant::now(), fetched.clone()));
        fetched
    }
}

/// The HTTP client of the Prometheus requests: rustls with ring (already built for kube), the
/// system's root certificates for an `https://` URL.
fn agent() -> ureq::Agent {
    let roots: Vec<ureq::tls::Certificate<'static>> = rustls_native_certs::load_native_certs()
        .certs
        .iter()
        .map(|der| ureq::tls::Certificate::from_der(der.as_ref()).to_owned())
        .collect();
    let tls = ureq::tls::TlsConfig::builder()
        .root_certs(ureq::tls::RootCerts::new_with_certs(&roots))
        .provider(ureq::tls::TlsProvider::Rustls)
        .unversioned_rustls_crypto_provider(Arc::new(tokio_rustls::rustls::crypto::ring::default_provider()))
        .build();
    ureq::Agent::config_builder()
        .timeout_global(Some(PROMETHEUS_TIMEOUT))
        .tls_config(tls)
        .build()
        .into()
}

/// GET Prometheus's `/api/v1/alerts`.
fn fetch(agent: &ureq::Agent, endpoint: &str) -> Result<Vec<Alert>, String> {
    let refuse = |e: &dyn std::fmt::Display| format!("asking Prometheus at {endpoint} failed: {e}");
    let mut response = agent.get(endpoint).call().map_err(|e| refuse(&e))?;
    let body = response
        .body_mut()
        .with_config()
        .limit(16 * 1024 * 1024)
        .read_to_string()
        .map_err(|e| refuse(&e))?;
    let parsed: AlertsResponse = serde_json::from_str(&body).map_err(|e| refuse(&e))?;
    Ok(parsed.data.alerts)
}

/// Whether `alert` matches the name regexp and every label (`$namespace`, `$target` replaced).
fn matches(
    alert: &Alert,
    name: Option<&Regex>,
    labels: &std::collections::BTreeMap<String, String>,
    namespace: &str,
    target: &str,
) -> bool {
    let alertname = alert
        .labels
        .get("alertname")
        .map(String::as_str)
        .unwrap_or_default();
    name.is_none_or(|re| re.is_match(alertname))
        && labels.iter().all(|(key, value)| {
            let value = value.replace("$namespace", namespace).replace("$target", target);
            alert.labels.get(key) == Some(&value)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(name: &str, labels: &[(&str, &str)]) -> Alert {
        let mut map: HashMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        map.insert("alertname".into(), name.into());
        Alert {
            labels: map,
            state: "firing".into(),
        }
    }

    #[test]
    fn an_alert_matches_by_anchored_name_and_substituted_labels() {
        let re = alert_name("HighErrorRate|Node.*").unwrap();
        let labels = [
            ("namespace".to_string(), "$namespace".to_string()),
            ("deployment".to_string(), "$target".to_string()),
        ]
        .into();
        let ours = alert("HighErrorRate", &[("namespace", "shop"), ("deployment", "web")]);
        assert!(matches(&ours, Some(&re), &labels, "shop", "web"));
        assert!(
            !matches(&ours, Some(&re), &labels, "shop", "api"),
            "another target"
        );
        let prefix = alert(
            "HighErrorRateBudget",
            &[("namespace", "shop"), ("deployment", "web")],
        );
        assert!(!matches(&prefix, Some(&re), &labels, "shop", "web"), "anchored");
        let node = alert("NodeDown", &[]);
        assert!(matches(&node, Some(&re), &Default::default(), "shop", "web"));
        assert!(
            matches(&node, None, &Default::default(), "shop", "web"),
            "no name: every alert"
        );
    }
}
