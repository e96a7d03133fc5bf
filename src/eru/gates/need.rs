//! The need conditions: whether a due slot's restart is needed at all (`minPodAgeSeconds`
//! against the target's running pods, a PromQL query confined to the Eru's namespace against a
//! threshold). The decision with the answers is pure ([`crate::eru::core::need`]).

use super::*;

impl Gatekeeper {
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
                Ok(pods) => core_need::by_pod_age(&pods, chrono::Duration::seconds(seconds), now, &target),
                Err(error) => Need::Unknown(format!("reading the pods of {target} failed: {error}")),
            });
        }
        if let (Some(query), Some(threshold)) = (&conditions.query, &conditions.threshold) {
            // the spec's validation refuses what cannot be confined; this never sends it either
            answers.push(match promql::need_query(query, namespace, name) {
                Ok(query) => match (threshold.parse::<f64>(), self.samples(&query).await) {
                    (Ok(threshold), Ok(samples)) => core_need::by_query(&samples, threshold, &query),
                    (Err(_), _) => Need::Unknown(format!("need.threshold {threshold:?} is not a number")),
                    (_, Err(error)) => Need::Unknown(error),
                },
                Err(error) => Need::Unknown(error),
            });
        }
        let skip = conditions.on_unknown == NeedOnUnknown::Skip;
        let answer = core_need::all(&answers, skip);
        if let (Need::Needed, Some(Need::Unknown(note))) =
            (&answer, answers.iter().find(|a| matches!(a, Need::Unknown(_))))
        {
            tracing::warn!(namespace, %target, %note, "need condition unknown; onUnknown: Restart restarts");
        }
        answer
    }
}
