//! Health gates, the shell: whether a due slot may start. Three gates, asked only when a slot may
//! be due (see [`super::pass::observe`]):
//! - **PodDisruptionBudgets** (opt in): the budgets of the target's namespace whose selector
//!   matches the target's pod template labels, closed while one allows no disruption;
//! - **blocking pods**: pods matching an Eru's `gates.blockingPodSelector` in its namespace that
//!   have not finished (phase not `Succeeded`/`Failed`), listed from the API server;
//! - **alerts**: Prometheus's `/api/v1/alerts` (alerts the rules evaluate now, `firing` ones
//!   only), filtered by the Eru's `gates.alerts` (name regexp, labels with `$namespace` and
//!   `$target`). An Eru's own gate sees only alerts labelled with its namespace (a tenant's gate
//!   never learns, nor journals, another namespace's alert names); the cluster-wide gates of the
//!   blackouts file see every alert. One request serves every Eru for the cache's lifetime.
//!
//! Answers are cached for `--gate-cache-ttl` (default 5 s): a burst of due slots asks each source
//! once, and a held slot's pass (every `--gate-poll-interval`) never hot-loops a source. The
//! decision with the answers is pure ([`super::core::hold`]). What no schema can check of a
//! gate (its regexp) is checked here too ([`check_gates`]).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration as StdDuration, Instant},
};

use k8s_openapi::api::{core::v1::Pod, policy::v1::PodDisruptionBudget};
use kube::{
    Api, Client,
    api::ListParams,
    core::{Selector, SelectorExt},
};
use prometheus::IntCounterVec;
use regex::Regex;
use serde::Deserialize;

use super::{
    AlertGate, Gates, NeedConditions, NeedOnUnknown, OnUnknown, TargetKind,
    core::{
        hold::{self, Answer},
        need::{self, Need},
    },
    promql,
};
use strum::VariantArray;

use crate::metrics::{Metrics, register};
use crate::outbound::{agent, redact_url};
use crate::runtime::time_of;
use crate::vocab::{GateKind, Reason};

/// Pods or alerts a note names at most.
const NAMED: usize = 5;
/// Longest a Prometheus request may take.
const PROMETHEUS_TIMEOUT: StdDuration = StdDuration::from_secs(5);
/// The largest answer of a need query read, in bytes. A need query answers one figure per
/// target (its `max`, a few pods' values): a few KiB. 1 MiB leaves room for a query over a
/// large namespace while four answers at once (below) stay a few MiB of the chart's 256 Mi;
/// Prometheus's own cap is far larger, and a tenant writes the query.
pub const NEED_ANSWER_BYTES: u64 = 1024 * 1024;
/// The most samples of a need query's answer kept; more is an unknown answer. Small samples
/// (`{"metric":{},"value":[0,"1"]}`) fit 30,000 in [`NEED_ANSWER_BYTES`]: this caps them too.
pub const NEED_ANSWER_SERIES: usize = 10_000;
/// Requests to Prometheus (alert gates and need queries) in flight at once in the whole
/// process: a burst of due slots (64 passes at once) holds at most this many answers in memory,
/// and Prometheus sees a few requests, not a storm.
const PROMETHEUS_REQUESTS: usize = 4;

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
            poll: StdDuration::from_secs(hold::DEFAULT_POLL_SECONDS as u64),
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

/// Answers kept for `--gate-cache-ttl`: a burst of due slots asks each source once; expired
/// answers go when a new one is kept, so the map holds only what the last TTL asked.
struct Answers<K, T>(Mutex<HashMap<K, Cached<T>>>);

impl<K: std::hash::Hash + Eq, T: Clone> Answers<K, T> {
    fn new() -> Self {
        Self(Mutex::default())
    }

    /// The answer for `key` kept less than `ttl` ago.
    fn get<Q>(&self, key: &Q, ttl: StdDuration) -> Option<Result<T, String>>
    where
        K: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ?Sized,
    {
        let answers = self.0.lock().expect("gate cache");
        let (at, answer) = answers.get(key)?;
        (at.elapsed() < ttl).then(|| answer.clone())
    }

    /// Keeps `answer` for `key` (and drops what is older than `ttl`); returns it.
    fn keep(&self, key: K, answer: Result<T, String>, ttl: StdDuration) -> Result<T, String> {
        let mut answers = self.0.lock().expect("gate cache");
        answers.retain(|_, (at, _)| at.elapsed() < ttl);
        answers.insert(key, (Instant::now(), answer.clone()));
        answer
    }
}

/// Asks the gates, through a short-lived cache.
pub struct Gatekeeper {
    client: Client,
    /// `--namespace`: where a cluster-wide blocking-pod selector looks (all namespaces: `None`).
    watched: Option<String>,
    options: GateOptions,
    agent: Option<ureq::Agent>,
    /// (namespace, or empty for every namespace; selector) → the unfinished pods it matched.
    pods: Answers<(String, String), Vec<String>>,
    /// (namespace, target kind, name) → the PodDisruptionBudgets selecting its pods that allow
    /// no disruption now, as a note names them.
    budgets: Answers<(String, TargetKind, String), Vec<String>>,
    /// need.query (as sent: substituted and confined to the Eru's namespace) → the values of
    /// its samples.
    queries: Answers<String, Vec<f64>>,
    /// Permits for a request to Prometheus ([`PROMETHEUS_REQUESTS`]).
    prometheus: tokio::sync::Semaphore,
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
        for gate in GateKind::VARIANTS {
            for result in ["open", "closed", "unknown"] {
                evaluations.with_label_values(&[gate.as_str(), result]);
            }
        }
        let agent = options.prometheus_url.as_ref().map(|_| agent(PROMETHEUS_TIMEOUT));
        Self {
            client,
            watched,
            options,
            agent,
            pods: Answers::new(),
            budgets: Answers::new(),
            queries: Answers::new(),
            prometheus: tokio::sync::Semaphore::new(PROMETHEUS_REQUESTS),
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
        (kind, target): (TargetKind, &str),
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
            // a closed gate answers at once; an unknown one only if none is closed
            let pods = match &gates.blocking_pod_selector {
                Some(selector) => self.pod_gate(selector, pods_in).await,
                None => Ok(None),
            };
            let budgets = match gates.pod_disruption_budgets && !matches!(pods, Ok(Some(_))) {
                true => (self.budget_gate(namespace, (kind, target), pods_in.is_none())).await,
                false => Ok(None),
            };
            for answer in [pods, budgets] {
                match answer {
                    Ok(Some(closed)) => return closed,
                    Ok(None) => {}
                    Err(error) => {
                        unknown.get_or_insert(error);
                    }
                }
            }
            if let Some(gate) = &gates.alerts {
                // an Eru's own gate: only its namespace's alerts; the cluster's: every alert
                let answer = self.firing(namespace, target, gate, pods_in.is_some()).await;
                self.count(GateKind::Alerts, answer.as_ref().map(|names| !names.is_empty()));
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

    /// The blocking-pod gate of `selector`, in `pods_in` (a cluster-wide gate: `None`, the
    /// namespaces the operator watches): closed with the pods named, open (`None`), or unknown
    /// (the API server did not answer: a pod gate has no proceed option).
    async fn pod_gate(
        &self,
        selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
        pods_in: Option<&str>,
    ) -> Result<Option<Answer>, String> {
        let scope = pods_in.or(self.watched.as_deref());
        let answer = self.blocking_pods(scope, selector).await;
        self.count(
            GateKind::BlockingPods,
            answer.as_ref().map(|pods| !pods.is_empty()),
        );
        let pods = answer.map_err(|error| format!("listing blocking pods failed: {error}"))?;
        if pods.is_empty() {
            return Ok(None);
        }
        let place = match (pods_in, scope) {
            (Some(_), Some(ns)) => format!("in {ns}"),
            (None, Some(ns)) => format!("in {ns} (cluster-wide gate)"),
            (_, None) => "in the cluster (cluster-wide gate)".to_string(),
        };
        Ok(Some(Answer::Closed {
            reason: Reason::BlockingPods,
            note: format!("blocking pods running {place}: {}", some_of(&pods, NAMED)),
        }))
    }

    /// The PodDisruptionBudget gate of the target (`kind`, `name`) in `namespace`: closed with
    /// the budgets at zero named, open (`None`), or unknown.
    async fn budget_gate(
        &self,
        namespace: &str,
        (kind, name): (TargetKind, &str),
        cluster_wide: bool,
    ) -> Result<Option<Answer>, String> {
        let answer = self.budgets_at_zero(namespace, kind, name).await;
        self.count(
            GateKind::PodDisruptionBudgets,
            answer.as_ref().map(|b| !b.is_empty()),
        );
        let budgets = answer.map_err(|error| format!("reading PodDisruptionBudgets failed: {error}"))?;
        if budgets.is_empty() {
            return Ok(None);
        }
        let scope = if cluster_wide { " (cluster-wide gate)" } else { "" };
        Ok(Some(Answer::Closed {
            reason: Reason::PdbBlocked,
            note: format!(
                "PodDisruptionBudgets allowing no disruption{scope}: {}",
                some_of(&budgets, NAMED)
            ),
        }))
    }

    /// Counts one evaluation of `gate`: closed, open, or unknown.
    fn count<E>(&self, gate: GateKind, closed: Result<bool, E>) {
        let result = match closed {
            Ok(true) => "closed",
            Ok(false) => "open",
            Err(_) => "unknown",
        };
        self.evaluations.with_label_values(&[gate.as_str(), result]).inc();
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
        let ttl = self.options.cache_ttl;
        if let Some(answer) = self.pods.get(&key, ttl) {
            return answer;
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
        self.pods.keep(key, answer, ttl)
    }

    /// The PodDisruptionBudgets of `namespace` selecting the pods of the target (`kind`, `name`:
    /// its pod template's labels) that allow no disruption now, each as `name (H healthy, D
    /// desired)`. A budget its controller has not counted since its last change is an unknown
    /// answer, not an open one.
    async fn budgets_at_zero(
        &self,
        namespace: &str,
        kind: TargetKind,
        name: &str,
    ) -> Result<Vec<String>, String> {
        let key = (namespace.to_string(), kind, name.to_string());
        let ttl = self.options.cache_ttl;
        if let Some(answer) = self.budgets.get(&key, ttl) {
            return answer;
        }
        let answer = self.read_budgets(namespace, kind, name).await;
        self.budgets.keep(key, answer, ttl)
    }

    async fn read_budgets(
        &self,
        namespace: &str,
        kind: TargetKind,
        name: &str,
    ) -> Result<Vec<String>, String> {
        let labels = self.template_labels(namespace, kind, name).await?;
        let api: Api<PodDisruptionBudget> = Api::namespaced(self.client.clone(), namespace);
        let budgets = api
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let mut at_zero = Vec::new();
        for budget in budgets.items {
            let Some(selector) = budget.spec.as_ref().and_then(|s| s.selector.clone()) else {
                continue; // a budget without a selector selects no pod
            };
            let selector = Selector::try_from(selector).map_err(|e| e.to_string())?;
            if !selector.matches(&labels) {
                continue;
            }
            let budget_name = budget.metadata.name.clone().unwrap_or_default();
            let status = budget.status.as_ref();
            let counted =
                status.and_then(|s| s.observed_generation) >= budget.metadata.generation && status.is_some();
            let Some(status) = status.filter(|_| counted) else {
                return Err(format!("PodDisruptionBudget {budget_name} is not counted yet"));
            };
            if status.disruptions_allowed.unwrap_or(0) <= 0 {
                at_zero.push(format!(
                    "{budget_name} ({} healthy, {} desired)",
                    status.current_healthy.unwrap_or(0),
                    status.desired_healthy.unwrap_or(0)
                ));
            }
        }
        at_zero.sort();
        Ok(at_zero)
    }

    /// The need conditions' answer for the target (`kind`, `name`) of an Eru in `namespace` at
    /// `now`: `minPodAgeSeconds` against its running pods' start times.
    pub async fn need(
        &self,
        namespace: &str,
        (kind, name): (TargetKind, &str),
        conditions: &NeedConditions,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Need {
        let target = format!("{kind:?}/{name}");
        let mut answers = Vec::new();
        if let Some(seconds) = conditions.min_pod_age_seconds {
            answers.push(match self.pod_starts(namespace, kind, name).await {
                Ok(pods) => need::by_pod_age(&pods, chrono::Duration::seconds(seconds), now, &target),
                Err(error) => Need::Unknown(format!("reading the pods of {target} failed: {error}")),
            });
        }
        if let (Some(query), Some(threshold)) = (&conditions.query, &conditions.threshold) {
            // the spec's validation refuses what cannot be confined; this never sends it either
            answers.push(match promql::need_query(query, namespace, name) {
                Ok(query) => match (threshold.parse::<f64>(), self.samples(&query).await) {
                    (Ok(threshold), Ok(samples)) => need::by_query(&samples, threshold, &query),
                    (Err(_), _) => Need::Unknown(format!("need.threshold {threshold:?} is not a number")),
                    (_, Err(error)) => Need::Unknown(error),
                },
                Err(error) => Need::Unknown(error),
            });
        }
        let skip = conditions.on_unknown == NeedOnUnknown::Skip;
        let answer = need::all(&answers, skip);
        if let (Need::Needed, Some(Need::Unknown(note))) =
            (&answer, answers.iter().find(|a| matches!(a, Need::Unknown(_))))
        {
            tracing::warn!(namespace, %target, %note, "need condition unknown; onUnknown: Restart restarts");
        }
        answer
    }

    /// The values of the samples `query` answers now (a vector's, or a scalar), from the cache or
    /// a request to `--prometheus-url`.
    async fn samples(&self, query: &str) -> Result<Vec<f64>, String> {
        let (Some(url), Some(agent)) = (&self.options.prometheus_url, &self.agent) else {
            return Err("no --prometheus-url: the need query cannot be asked".into());
        };
        let ttl = self.options.cache_ttl;
        if let Some(answer) = self.queries.get(query, ttl) {
            return answer;
        }
        let _permit = self.prometheus.acquire().await.map_err(|e| e.to_string())?;
        // another pass may have asked the same query while this one waited for its permit
        if let Some(answer) = self.queries.get(query, ttl) {
            return answer;
        }
        let endpoint = format!("{}/api/v1/query", url.trim_end_matches('/'));
        let (agent, sent) = (agent.clone(), query.to_string());
        let answer = tokio::task::spawn_blocking(move || fetch_samples(&agent, &endpoint, &sent))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r);
        self.queries.keep(query.to_string(), answer, ttl)
    }

    /// The running pods of the target (`kind`, `name`) in `namespace` (those its pod template's
    /// labels select, not finished, not being deleted) and when each was created.
    async fn pod_starts(
        &self,
        namespace: &str,
        kind: TargetKind,
        name: &str,
    ) -> Result<Vec<(String, chrono::DateTime<chrono::Utc>)>, String> {
        let labels = self.template_labels(namespace, kind, name).await?;
        if labels.is_empty() {
            return Err(format!(
                "the pod template of {kind:?}/{name} has no labels to find its pods by"
            ));
        }
        let selector: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let params = ListParams::default()
            .labels(&selector.join(","))
            .fields("status.phase!=Succeeded,status.phase!=Failed");
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let pods = api.list_metadata(&params).await.map_err(|e| e.to_string())?;
        Ok((pods.items.into_iter())
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| {
                Some((
                    p.metadata.name?,
                    time_of(p.metadata.creation_timestamp.as_ref()?)?,
                ))
            })
            .collect())
    }

    /// The pod template's labels of the workload `kind`/`name` in `namespace` (what a budget's
    /// selector is matched against: the labels its pods carry).
    async fn template_labels(
        &self,
        namespace: &str,
        kind: TargetKind,
        name: &str,
    ) -> Result<std::collections::BTreeMap<String, String>, String> {
        use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
        let client = self.client.clone();
        let template = match kind {
            TargetKind::Deployment => (Api::<Deployment>::namespaced(client, namespace).get(name).await)
                .map(|d| d.spec.map(|s| s.template)),
            TargetKind::StatefulSet => (Api::<StatefulSet>::namespaced(client, namespace).get(name).await)
                .map(|d| d.spec.map(|s| s.template)),
            TargetKind::DaemonSet => (Api::<DaemonSet>::namespaced(client, namespace).get(name).await)
                .map(|d| d.spec.map(|s| s.template)),
        }
        .map_err(|e| e.to_string())?;
        Ok(template.and_then(|t| t.metadata?.labels).unwrap_or_default())
    }

    /// The names of the firing alerts `gate` matches for an Eru in `namespace` targeting
    /// `target`, sorted, each once; with `own_namespace`, only alerts whose `namespace` label is
    /// the Eru's.
    async fn firing(
        &self,
        namespace: &str,
        target: &str,
        gate: &AlertGate,
        own_namespace: bool,
    ) -> Result<Vec<String>, String> {
        let alerts = self.alerts().await?;
        let name = match &gate.name {
            Some(pattern) => Some(alert_name(pattern)?),
            None => None,
        };
        let mut names: Vec<String> = alerts
            .iter()
            .filter(|a| a.state == "firing")
            .filter(|a| !own_namespace || in_namespace(a, namespace))
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
        let _permit = self.prometheus.acquire().await.map_err(|e| e.to_string())?;
        let fetched = tokio::task::spawn_blocking(move || fetch(&agent, &endpoint))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r)
            .map(Arc::new);
        *cached = Some((Instant::now(), fetched.clone()));
        fetched
    }
}

/// GET Prometheus's `/api/v1/alerts`. Its errors name the URL without credentials or query
/// (they reach logs, the status and the journal's notes).
fn fetch(agent: &ureq::Agent, endpoint: &str) -> Result<Vec<Alert>, String> {
    let refuse = |e: &dyn std::fmt::Display| {
        let shown = redact_url(endpoint);
        let text = format!("asking Prometheus at {shown} failed: {e}");
        // the error's own text may quote the URL whole
        text.replace(endpoint, &shown)
    };
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

/// GET Prometheus's `/api/v1/query` for `query`: the values of the vector's samples (or the
/// scalar). Errors name the URL without credentials or query string, as [`fetch`]'s. The answer
/// is read up to [`NEED_ANSWER_BYTES`] and parsed into [`Samples`], never into a whole JSON tree.
fn fetch_samples(agent: &ureq::Agent, endpoint: &str, query: &str) -> Result<Vec<f64>, String> {
    let refuse = |e: &dyn std::fmt::Display| {
        let shown = redact_url(endpoint);
        format!("asking Prometheus at {shown} failed: {e}").replace(endpoint, &shown)
    };
    let mut response = (agent.get(endpoint).query("query", query).call()).map_err(|e| refuse(&e))?;
    let body = response
        .body_mut()
        .with_config()
        .limit(NEED_ANSWER_BYTES)
        .read_to_vec()
        .map_err(|e| match e {
            ureq::Error::BodyExceedsLimit(_) => format!(
                "the need query answered more than {} KiB; narrow it (an aggregation such as max)",
                NEED_ANSWER_BYTES / 1024
            ),
            e => refuse(&e),
        })?;
    samples_of(&body).map_err(|e| e.unwrap_or_else(|e| refuse(&e)))
}

/// The values of a `/api/v1/query` answer: `Err(Ok(why))` for an answer read whole that is not
/// a vector or a scalar, or holds more than [`NEED_ANSWER_SERIES`] samples; `Err(Err(e))` for
/// one that is not Prometheus's JSON.
fn samples_of(body: &[u8]) -> Result<Vec<f64>, Result<String, serde_json::Error>> {
    let answer: QueryAnswer = serde_json::from_slice(body).map_err(|e| match e.is_data() {
        true if e.to_string().starts_with(TOO_MANY) => Ok(format!(
            "the need query answered more than {NEED_ANSWER_SERIES} series; narrow it (an aggregation such as max)"
        )),
        _ => Err(e),
    })?;
    match answer.data {
        Some(QueryData::Vector(Samples(values))) => Ok(values),
        Some(QueryData::Scalar((_, value))) => Ok(value.parse::<f64>().into_iter().collect()),
        other => Err(Ok(format!(
            "the need query answered {}, not a vector or a scalar{}",
            match other {
                Some(QueryData::Matrix(_)) => "a range vector",
                Some(QueryData::String(_)) => "a string",
                _ => "nothing",
            },
            answer.error.map(|e| format!(": {e}")).unwrap_or_default()
        ))),
    }
}

/// A `/api/v1/query` answer, as far as a need query reads it.
#[derive(Deserialize)]
struct QueryAnswer {
    #[serde(default)]
    data: Option<QueryData>,
    #[serde(default)]
    error: Option<String>,
}

/// Its `data`: a vector's samples, a scalar, or a kind a need query has no use for (skipped
/// unread).
#[derive(Deserialize)]
#[serde(tag = "resultType", content = "result", rename_all = "lowercase")]
enum QueryData {
    Vector(Samples),
    Scalar((serde::de::IgnoredAny, String)),
    Matrix(serde::de::IgnoredAny),
    String(serde::de::IgnoredAny),
}

/// One sample of a vector: its value only (its labels are skipped unread).
#[derive(Deserialize)]
struct Sample {
    value: (serde::de::IgnoredAny, String),
}

/// The text a too-long vector fails with (how [`samples_of`] tells it from a malformed answer).
const TOO_MANY: &str = "too many series";

/// A vector's sample values: at most [`NEED_ANSWER_SERIES`], else an error (the whole answer is
/// never held as a list).
struct Samples(Vec<f64>);

impl<'de> Deserialize<'de> for Samples {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Samples;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of samples")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Samples, A::Error> {
                let (mut values, mut series) = (Vec::new(), 0);
                while let Some(sample) = seq.next_element::<Sample>()? {
                    series += 1;
                    if series > NEED_ANSWER_SERIES {
                        return Err(serde::de::Error::custom(TOO_MANY));
                    }
                    // a value Prometheus writes as text: "NaN", "+Inf", "0.5"
                    values.extend(sample.value.1.parse::<f64>().ok());
                }
                Ok(Samples(values))
            }
        }
        deserializer.deserialize_seq(Visit)
    }
}

/// Whether `alert` is about `namespace` (its `namespace` label).
fn in_namespace(alert: &Alert, namespace: &str) -> bool {
    alert.labels.get("namespace").map(String::as_str) == Some(namespace)
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

/// An alert gate's name regexp, anchored at both ends.
pub fn alert_name(pattern: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(&format!("^(?:{pattern})$"))
        .map_err(|e| format!("gates.alerts.name '{pattern}' is not a valid regular expression: {e}"))
}

/// What the API server's schema cannot check of `gates` (its regexp), and, for the operator's
/// file (which no schema checks), what it does check: at least one gate, no empty selector.
pub fn check_gates(gates: &Gates) -> Result<(), String> {
    if gates.blocking_pod_selector.is_none() && gates.alerts.is_none() && !gates.pod_disruption_budgets {
        return Err("gates needs blockingPodSelector, alerts or podDisruptionBudgets: true".into());
    }
    if let Some(selector) = &gates.blocking_pod_selector {
        let labels = selector.match_labels.as_ref().is_some_and(|l| !l.is_empty());
        let expressions = selector.match_expressions.as_ref().is_some_and(|e| !e.is_empty());
        if !labels && !expressions {
            return Err(
                "an empty blockingPodSelector would match every pod: give matchLabels or matchExpressions"
                    .into(),
            );
        }
    }
    if let Some(pattern) = gates.alerts.as_ref().and_then(|a| a.name.as_ref()) {
        alert_name(pattern)?;
    }
    Ok(())
}

/// The first few of `names`, comma-separated, and how many more there are (a note stays short).
pub fn some_of(names: &[String], shown: usize) -> String {
    let mut text = names.iter().take(shown).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > shown {
        text.push_str(&format!(" and {} more", names.len() - shown));
    }
    text
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
    fn an_erus_own_gate_sees_only_its_namespaces_alerts() {
        let ours = alert("HighErrorRate", &[("namespace", "shop")]);
        let theirs = alert("HighErrorRate", &[("namespace", "bank")]);
        let cluster = alert("NodeDown", &[]);
        assert!(in_namespace(&ours, "shop"));
        assert!(!in_namespace(&theirs, "shop"), "another tenant's alert");
        assert!(
            !in_namespace(&cluster, "shop"),
            "no namespace label: the cluster-wide gates' business"
        );
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

    #[test]
    fn bad_gates_are_refused_with_why() {
        let gates = |v: serde_json::Value| -> Gates { serde_json::from_value(v).unwrap() };
        assert!(check_gates(&gates(serde_json::json!({}))).is_err());
        assert!(check_gates(&gates(serde_json::json!({"blockingPodSelector": {}}))).is_err());
        let e = check_gates(&gates(serde_json::json!({"alerts": {"name": "(unclosed"}}))).unwrap_err();
        assert!(e.contains("gates.alerts.name"), "{e}");
        assert!(check_gates(&gates(serde_json::json!({"alerts": {"name": "Node.*"}}))).is_ok());
        let re = alert_name("A|B").unwrap();
        assert!(re.is_match("B") && !re.is_match("AB"), "anchored");
    }

    /// A `/api/v1/query` answer of `n` samples, each of value `value`.
    fn vector(n: usize, value: &str) -> Vec<u8> {
        let sample =
            format!(r#"{{"metric":{{"namespace":"shop","pod":"web-0"}},"value":[1700000000.5,"{value}"]}}"#);
        let samples = vec![sample; n].join(",");
        format!(r#"{{"status":"success","data":{{"resultType":"vector","result":[{samples}]}}}}"#)
            .into_bytes()
    }

    #[test]
    fn a_need_answer_is_read_as_values_only() {
        assert_eq!(samples_of(&vector(3, "0.25")).unwrap(), vec![0.25; 3]);
        assert_eq!(samples_of(&vector(0, "1")).unwrap(), Vec::<f64>::new());
        let nan = samples_of(&vector(1, "NaN")).unwrap();
        assert!(
            nan.len() == 1 && nan[0].is_nan(),
            "NaN is a value need::by_query ignores"
        );
        let scalar = br#"{"status":"success","data":{"resultType":"scalar","result":[1700000000,"0.5"]}}"#;
        assert_eq!(samples_of(scalar).unwrap(), vec![0.5]);
        // the order of the fields does not matter
        let reordered = br#"{"data":{"result":[],"resultType":"vector"},"status":"success"}"#;
        assert_eq!(samples_of(reordered).unwrap(), Vec::<f64>::new());
    }

    #[test]
    fn a_need_answer_of_too_many_series_is_refused_with_why() {
        assert_eq!(
            samples_of(&vector(NEED_ANSWER_SERIES, "1")).unwrap().len(),
            NEED_ANSWER_SERIES
        );
        let too_many = samples_of(&vector(NEED_ANSWER_SERIES + 1, "1"))
            .unwrap_err()
            .unwrap();
        assert_eq!(
            too_many,
            "the need query answered more than 10000 series; narrow it (an aggregation such as max)"
        );
    }

    #[test]
    fn a_need_answer_of_another_kind_says_what_it_was() {
        let matrix = br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"]]}]}}"#;
        assert_eq!(
            samples_of(matrix).unwrap_err().unwrap(),
            "the need query answered a range vector, not a vector or a scalar"
        );
        let error = br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#;
        assert_eq!(
            samples_of(error).unwrap_err().unwrap(),
            "the need query answered nothing, not a vector or a scalar: parse error"
        );
        assert!(
            samples_of(b"<html>").unwrap_err().is_err(),
            "not JSON: the caller's error"
        );
    }

    #[test]
    fn long_lists_are_cut() {
        let names: Vec<String> = (0..7).map(|i| format!("p{i}")).collect();
        assert_eq!(some_of(&names, 5), "p0, p1, p2, p3, p4 and 2 more");
        assert_eq!(some_of(&names[..2], 5), "p0, p1");
    }
}
