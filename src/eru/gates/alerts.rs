//! The alert gate: Prometheus's `/api/v1/alerts` (the alerts its rules evaluate now, `firing`
//! ones only), filtered by an Eru's `gates.alerts` (name regexp, labels with `$namespace` and
//! `$target`). An Eru's own gate sees only alerts labelled with its namespace; the cluster-wide
//! gates of the blackouts file see every alert. One request serves every Eru for the cache's
//! lifetime.

use super::*;

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

impl Gatekeeper {
    /// The names of the firing alerts `gate` matches for an Eru in `namespace` targeting
    /// `target`, sorted, each once; with `own_namespace`, only alerts whose `namespace` label is
    /// the Eru's.
    pub(super) async fn firing(
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
    pub(super) async fn alerts(&self) -> Result<Arc<Vec<Alert>>, String> {
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
}
