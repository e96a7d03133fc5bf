//! Alertmanager silences an Eru holds while it restarts (`spec.silence`, `--alertmanager-url`):
//! created just before the restart patch, expired when the rollout ends, and bounded by their
//! own end (the rollout's timeout) so one the operator never expires (it died) lapses by itself.
//! Alertmanager's API v2: `POST /api/v2/silences` answers `{"silenceID": ...}`, `DELETE
//! /api/v2/silence/{id}` expires one (200 for one already expired). Requests are blocking
//! (ureq), run on tokio's blocking pool, bounded by a timeout; errors name the URL without
//! credentials.

use std::time::Duration as StdDuration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::json;

use super::{EruSpec, SilenceMatcher, TargetKind};

/// How long one request to Alertmanager may take.
const TIMEOUT: StdDuration = StdDuration::from_secs(5);

/// The longest a silence lasts: a rollout's timeout may be set up to a day; an Alertmanager
/// silence left by an operator that died lapses within this.
pub const MAX_SILENCE: chrono::Duration = chrono::Duration::hours(6);

/// The label a silence is confined by.
const NAMESPACE: &str = "namespace";

/// Who the silences say created them.
pub const CREATED_BY: &str = "eru-operator";

/// The Alertmanager of `--alertmanager-url`, if one is configured.
#[derive(Clone, Debug)]
pub struct Silencer {
    url: Option<String>,
    agent: ureq::Agent,
}

impl Silencer {
    pub fn new(url: Option<String>) -> Self {
        Self {
            url,
            agent: crate::outbound::agent(TIMEOUT),
        }
    }

    /// Creates a silence of `matchers` from now to `until`; its id.
    pub async fn create(
        &self,
        matchers: &[SilenceMatcher],
        until: DateTime<Utc>,
        comment: String,
    ) -> Result<String, String> {
        let Some(url) = &self.url else {
            return Err("no --alertmanager-url: the silence cannot be created".into());
        };
        let endpoint = format!("{}/api/v2/silences", url.trim_end_matches('/'));
        let body = json!({
            "matchers": matchers.iter().map(|m| json!({
                "name": m.name, "value": m.value, "isRegex": m.regex, "isEqual": true
            })).collect::<Vec<_>>(),
            "startsAt": Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true),
            "endsAt": until.to_rfc3339_opts(SecondsFormat::Millis, true),
            "createdBy": CREATED_BY,
            "comment": comment,
        })
        .to_string();
        let agent = self.agent.clone();
        let answer = tokio::task::spawn_blocking(move || post(&agent, &endpoint, &body))
            .await
            .map_err(|e| e.to_string())??;
        let id = serde_json::from_str::<serde_json::Value>(&answer)
            .ok()
            .and_then(|v| v["silenceID"].as_str().map(str::to_string));
        id.ok_or_else(|| {
            format!(
                "Alertmanager answered no silenceID: {}",
                answer.chars().take(200).collect::<String>()
            )
        })
    }

    /// Expires the silence `id` (one already expired is fine).
    pub async fn expire(&self, id: &str) -> Result<(), String> {
        let Some(url) = &self.url else {
            return Err("no --alertmanager-url: the silence cannot be expired".into());
        };
        let endpoint = format!("{}/api/v2/silence/{id}", url.trim_end_matches('/'));
        let agent = self.agent.clone();
        tokio::task::spawn_blocking(move || {
            let shown = crate::outbound::redact_url(&endpoint);
            match agent.delete(&endpoint).call() {
                Ok(_) => Ok(()),
                Err(e) => {
                    Err(format!("expiring the silence at {shown} failed: {e}").replace(&endpoint, &shown))
                }
            }
        })
        .await
        .map_err(|e| e.to_string())?
    }
}

/// POSTs `body` to `endpoint`; the answer's body, or why not (Alertmanager's own message when it
/// refuses).
fn post(agent: &ureq::Agent, endpoint: &str, body: &str) -> Result<String, String> {
    let shown = crate::outbound::redact_url(endpoint);
    let refuse = |e: &dyn std::fmt::Display| {
        format!("creating a silence at {shown} failed: {e}").replace(endpoint, &shown)
    };
    let response = agent
        .post(endpoint)
        .config()
        .http_status_as_error(false)
        .build()
        .header("Content-Type", "application/json")
        .send(body);
    let mut response = response.map_err(|e| refuse(&e))?;
    let status = response.status().as_u16();
    let text = (response
        .body_mut()
        .with_config()
        .limit(64 * 1024)
        .read_to_string())
    .map_err(|e| refuse(&e))?;
    if (200..300).contains(&status) {
        Ok(text)
    } else {
        let said: String = text.trim().chars().take(300).collect();
        Err(refuse(&format!("HTTP {status}: {said}")))
    }
}

/// The matchers of an Eru's silence, always confined to its namespace: first `namespace` equal to
/// the Eru's (Alertmanager silences an alert only when every matcher matches, so whatever follows
/// can only narrow it), then the Eru's own matchers, else `pod` matching the names the target's
/// controller gives its pods: a Deployment's `<name>-<template hash>-<5 characters>`, a
/// StatefulSet's `<name>-<ordinal>`, a DaemonSet's `<name>-<5 characters>` (a sibling workload
/// whose name extends the target's by one such part can still match: give matchers of your own
/// then). An own matcher that is the namespace matcher itself is not repeated.
pub fn matchers(spec: &EruSpec, namespace: &str) -> Vec<SilenceMatcher> {
    let confined = SilenceMatcher {
        name: NAMESPACE.into(),
        value: namespace.into(),
        regex: false,
    };
    let narrowing = match spec.silence.as_deref() {
        Some(s) if !s.matchers.is_empty() => s.matchers.clone(),
        _ => {
            let name = regex_escape(&spec.target.name);
            let pods = match spec.target.kind {
                TargetKind::Deployment => format!("{name}-[a-z0-9]+-[a-z0-9]{{5}}"),
                TargetKind::StatefulSet => format!("{name}-[0-9]+"),
                TargetKind::DaemonSet => format!("{name}-[a-z0-9]{{5}}"),
            };
            vec![SilenceMatcher {
                name: "pod".into(),
                value: pods,
                regex: true,
            }]
        }
    };
    std::iter::once(confined.clone())
        .chain(narrowing.into_iter().filter(|m| *m != confined))
        .collect()
}

/// What CEL cannot check of `spec.silence` for an Eru in `namespace`: an own `namespace` matcher
/// that cannot match the Eru's namespace (another namespace, or a regular expression that does
/// not match it, or one that is not a valid one) would leave a silence that silences nothing — or,
/// read as the author meant it, another namespace's alerts, which an Eru may never silence. The
/// Eru is then Invalid, with an Event saying why.
pub fn check(spec: &EruSpec, namespace: &str) -> Result<(), String> {
    let Some(silence) = spec.silence.as_deref() else {
        return Ok(());
    };
    for m in silence.matchers.iter().filter(|m| m.name == NAMESPACE) {
        let matches = if m.regex {
            // Alertmanager anchors its regular expressions
            let anchored = format!("^(?:{})$", m.value);
            regex::Regex::new(&anchored)
                .map_err(|e| {
                    format!(
                        "spec.silence.matchers: namespace=~{:?} is not a regular expression: {e}",
                        m.value
                    )
                })?
                .is_match(namespace)
        } else {
            m.value == namespace
        };
        if !matches {
            let op = if m.regex { "=~" } else { "=" };
            return Err(format!(
                "spec.silence.matchers: namespace{op}{:?} does not match the Eru's namespace {namespace:?}; \
                 a silence is confined to its Eru's namespace (cluster-wide silences come only from \
                 the operator's own configuration)",
                m.value
            ));
        }
    }
    Ok(())
}

/// The end of a silence created at `now` for a restart whose rollout may take `timeout_seconds`:
/// as long as that rollout may last and a minute, [`MAX_SILENCE`] at most — never the slot's
/// deadline, which may be a year away. A patch tried again later, past this end, gets a new
/// silence ([`still_holds`]), so a silence is a short lease kept while needed, never one left
/// far ahead for an operator that dies.
pub fn end(now: DateTime<Utc>, timeout_seconds: i64) -> DateTime<Utc> {
    let lasts = chrono::Duration::seconds(timeout_seconds.max(0) + 60);
    now + lasts.min(MAX_SILENCE)
}

/// Whether a silence lasting `until` still covers a rollout starting at `now` that may take
/// `timeout_seconds` (capped as [`end`] caps it): if not, a new one is created before the patch.
pub fn still_holds(until: DateTime<Utc>, now: DateTime<Utc>, timeout_seconds: i64) -> bool {
    until >= end(now, timeout_seconds)
}

/// `text` with the regular expression metacharacters a Kubernetes name can hold (`.`) escaped.
fn regex_escape(text: &str) -> String {
    text.replace('.', "\\.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_matchers_are_the_namespace_and_the_targets_pods() {
        let spec: EruSpec = serde_json::from_value(json!({
            "schedule": "0 3 * * *", "target": {"kind": "StatefulSet", "name": "db.v2"}, "silence": {}
        }))
        .unwrap();
        let m = matchers(&spec, "shop");
        assert_eq!(
            shown(&m),
            [("namespace", "shop", false), ("pod", "db\\.v2-[0-9]+", true)]
        );
        let own = with_matchers(json!([{"name": "service", "value": "web"}]));
        assert_eq!(
            shown(&matchers(&own, "shop")),
            [("namespace", "shop", false), ("service", "web", false)]
        );
    }

    fn with_matchers(matchers: serde_json::Value) -> EruSpec {
        serde_json::from_value(json!({
            "schedule": "0 3 * * *", "target": {"kind": "Deployment", "name": "web"},
            "silence": {"matchers": matchers, "onUnknown": "Proceed"}
        }))
        .unwrap()
    }

    fn shown(m: &[SilenceMatcher]) -> Vec<(&str, &str, bool)> {
        m.iter()
            .map(|m| (m.name.as_str(), m.value.as_str(), m.regex))
            .collect()
    }

    #[test]
    fn own_matchers_only_narrow_the_erus_namespace() {
        // every alert of the cluster, as written: confined to the Eru's namespace all the same
        let all = with_matchers(json!([{"name": "alertname", "value": ".+", "regex": true}]));
        assert_eq!(check(&all, "shop"), Ok(()));
        assert_eq!(
            shown(&matchers(&all, "shop")),
            [("namespace", "shop", false), ("alertname", ".+", true)]
        );
        // its own namespace, said again: once
        let same = with_matchers(json!([{"name": "namespace", "value": "shop"}]));
        assert_eq!(check(&same, "shop"), Ok(()));
        assert_eq!(shown(&matchers(&same, "shop")), [("namespace", "shop", false)]);
        // a regular expression that matches it narrows nothing away; it is kept
        let regex = with_matchers(json!([{"name": "namespace", "value": "sh.p|web", "regex": true}]));
        assert_eq!(check(&regex, "shop"), Ok(()));
        assert_eq!(matchers(&regex, "shop").len(), 2);
    }

    #[test]
    fn a_namespace_matcher_outside_the_erus_namespace_is_refused() {
        for (matcher, said) in [
            (
                json!({"name": "namespace", "value": "payments"}),
                "namespace=\"payments\"",
            ),
            (
                json!({"name": "namespace", "value": ".+", "regex": false}),
                "namespace=\".+\"",
            ),
            (
                json!({"name": "namespace", "value": "pay.*", "regex": true}),
                "namespace=~\"pay.*\"",
            ),
            // anchored as Alertmanager anchors it: "sho" does not match "shop"
            (
                json!({"name": "namespace", "value": "sho", "regex": true}),
                "namespace=~\"sho\"",
            ),
        ] {
            let refused = check(&with_matchers(json!([matcher])), "shop").unwrap_err();
            assert!(
                refused.contains(said) && refused.contains("confined"),
                "{refused}"
            );
        }
        let broken = with_matchers(json!([{"name": "namespace", "value": "(", "regex": true}]));
        assert!(
            check(&broken, "shop")
                .unwrap_err()
                .contains("not a regular expression")
        );
    }

    #[test]
    fn a_silence_lasts_as_long_as_its_rollout_may_and_six_hours_at_most() {
        let now = Utc::now();
        assert_eq!(end(now, 600), now + chrono::Duration::seconds(660));
        assert_eq!(end(now, 86_400), now + MAX_SILENCE);
        assert_eq!(end(now, -5), now + chrono::Duration::seconds(60));
        // a silence created for an earlier try still holds while it covers the rollout
        let created = end(now, 600);
        assert!(still_holds(created, now + chrono::Duration::seconds(0), 600));
        assert!(!still_holds(created, now + chrono::Duration::seconds(1), 600));
    }
}
