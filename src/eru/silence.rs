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

use super::{EruSpec, SilenceMatcher, TargetKind, gates};

/// How long one request to Alertmanager may take.
const TIMEOUT: StdDuration = StdDuration::from_secs(5);

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
            agent: gates::agent(TIMEOUT),
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
            let shown = gates::redact_url(&endpoint);
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
    let shown = gates::redact_url(endpoint);
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

/// The matchers of an Eru's silence: its own, else `namespace` equal to the Eru's and `pod`
/// matching the names the target's controller gives its pods: a Deployment's
/// `<name>-<template hash>-<5 characters>`, a StatefulSet's `<name>-<ordinal>`, a DaemonSet's
/// `<name>-<5 characters>` (a sibling workload whose name extends the target's by one such part
/// can still match: give matchers of your own then).
pub fn matchers(spec: &EruSpec, namespace: &str) -> Vec<SilenceMatcher> {
    match spec.silence.as_deref() {
        Some(s) if !s.matchers.is_empty() => s.matchers.clone(),
        _ => {
            let name = regex_escape(&spec.target.name);
            let pods = match spec.target.kind {
                TargetKind::Deployment => format!("{name}-[a-z0-9]+-[a-z0-9]{{5}}"),
                TargetKind::StatefulSet => format!("{name}-[0-9]+"),
                TargetKind::DaemonSet => format!("{name}-[a-z0-9]{{5}}"),
            };
            vec![
                SilenceMatcher {
                    name: "namespace".into(),
                    value: namespace.into(),
                    regex: false,
                },
                SilenceMatcher {
                    name: "pod".into(),
                    value: pods,
                    regex: true,
                },
            ]
        }
    }
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
            (m[0].name.as_str(), m[0].value.as_str(), m[0].regex),
            ("namespace", "shop", false)
        );
        assert_eq!(
            (m[1].name.as_str(), m[1].value.as_str(), m[1].regex),
            ("pod", "db\\.v2-[0-9]+", true)
        );
        let own: EruSpec = serde_json::from_value(json!({
            "schedule": "0 3 * * *", "target": {"kind": "Deployment", "name": "web"},
            "silence": {"matchers": [{"name": "service", "value": "web"}], "onUnknown": "Proceed"}
        }))
        .unwrap();
        assert_eq!(matchers(&own, "shop").len(), 1);
    }
}
