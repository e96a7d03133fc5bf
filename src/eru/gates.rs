//! Health gates, the shell: whether a due slot may start, asked only when a slot may be due (see
//! [`super::pass::observe`]). [`Gatekeeper::check`] asks an Eru's own gates and the cluster-wide
//! ones, one file each:
//! - `gates/pods.rs`: **blocking pods**, those matching `gates.blockingPodSelector` that have not
//!   finished (and the target's own pods, which the next two read);
//! - `gates/pdb.rs`: **PodDisruptionBudgets** (opt in), closed while a budget selecting the target's
//!   pods allows no disruption;
//! - `gates/alerts.rs`: **alerts** Prometheus fires, filtered by `gates.alerts`;
//! - `gates/need.rs`: the **need conditions** (not a gate: whether the restart is needed at all);
//! - `gates/prometheus.rs`: the Prometheus client the last two share, bounded in time, requests at once
//!   and answer size.
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

use ::prometheus::IntCounterVec;
use k8s_openapi::api::{core::v1::Pod, policy::v1::PodDisruptionBudget};
use kube::{
    Api, Client,
    api::ListParams,
    core::{Selector, SelectorExt},
};
use regex::Regex;
use serde::Deserialize;

use super::{
    AlertGate, Gates, NeedConditions, NeedOnUnknown, OnUnknown, TargetKind,
    core::{
        hold::{self, Answer},
        need::{self as core_need, Need},
    },
    promql,
};
use strum::VariantArray;

use crate::metrics::{Metrics, register};
use crate::outbound::{agent, redact_url};
use crate::runtime::time_of;
use crate::vocab::{GateKind, Reason};

mod alerts;
mod need;
mod pdb;
mod pods;
mod prometheus;

pub use alerts::{Alert, alert_name};
pub use prometheus::{NEED_ANSWER_BYTES, NEED_ANSWER_SERIES};
use prometheus::{PROMETHEUS_REQUESTS, PROMETHEUS_TIMEOUT};

/// Pods or alerts a note names at most.
const NAMED: usize = 5;
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
                ::prometheus::Opts::new(
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

    /// Counts one evaluation of `gate`: closed, open, or unknown.
    fn count<E>(&self, gate: GateKind, closed: Result<bool, E>) {
        let result = match closed {
            Ok(true) => "closed",
            Ok(false) => "open",
            Err(_) => "unknown",
        };
        self.evaluations.with_label_values(&[gate.as_str(), result]).inc();
    }
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

    #[test]
    fn long_lists_are_cut() {
        let names: Vec<String> = (0..7).map(|i| format!("p{i}")).collect();
        assert_eq!(some_of(&names, 5), "p0, p1, p2, p3, p4 and 2 more");
        assert_eq!(some_of(&names[..2], 5), "p0, p1");
    }
}
