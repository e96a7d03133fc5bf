//! What an Eru sees of its target, kind-agnostic: a Deployment today; a StatefulSet or DaemonSet
//! needs only its own `view_*` function (the restart patch is the same pod-template annotation).
//! Pure: the gate before a restart and the verdict on a rollout.

use chrono::{DateTime, Duration, Utc};
use k8s_openapi::api::apps::v1::Deployment;

use super::{RESTART_MANAGER, RESTARTED_AT_ANNOTATION, machine::Gate};
use crate::runtime::{deployment::DeploymentView, managed_at};

/// A workload's rollout state and the slot its pod template carries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetView {
    pub rollout: DeploymentView,
    /// The slot the pod template carries (the last restart patched).
    pub template_slot: Option<DateTime<Utc>>,
    /// When the restart manager last changed the template (the API server's clock, seconds).
    pub restart_applied_at: Option<DateTime<Utc>>,
}

/// The view of a Deployment.
pub fn view_deployment(deployment: &Deployment) -> TargetView {
    TargetView {
        rollout: DeploymentView::of(deployment),
        template_slot: deployment
            .spec
            .as_ref()
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get(RESTARTED_AT_ANNOTATION))
            .and_then(|v| DateTime::parse_from_rfc3339(v).ok())
            .map(|t| t.with_timezone(&Utc)),
        restart_applied_at: managed_at(&deployment.metadata, |e| {
            e.manager.as_deref() == Some(RESTART_MANAGER)
        }),
    }
}

/// How a rollout stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Done,
    Failed(String),
    Progressing,
}

impl TargetView {
    /// Every desired replica is updated, ready and available, and no old one is left.
    pub fn settled(&self) -> bool {
        self.rollout.settled_at(self.rollout.desired)
    }

    /// Whether a restart may start now.
    pub fn gate(&self) -> Gate {
        if self.rollout.paused {
            Gate::Paused
        } else if !self.settled() {
            Gate::Unhealthy
        } else {
            Gate::Open
        }
    }

    /// When the restart of `slot` landed, if the template carries it: the restart manager's
    /// time on the target when it is not before the slot (after a crash, or a replica's patch),
    /// else `now`.
    pub fn landed_at(&self, slot: DateTime<Utc>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        (self.template_slot == Some(slot)).then(|| {
            self.restart_applied_at
                .filter(|at| *at + Duration::seconds(1) > slot && *at <= now)
                .unwrap_or(now)
        })
    }

    /// When a finished rollout really finished: the Deployment's `Progressing` condition turned
    /// `NewReplicaSetAvailable` then (second precision); when that is well before `now` (the
    /// operator was not watching), that instant, else `now`. Never before `patched_at`.
    pub fn finished_at(&self, patched_at: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
        match self.rollout.available_since {
            Some(at) if at + Duration::seconds(2) < now => at.max(patched_at),
            _ => now,
        }
    }

    /// The rollout of the restart of `slot`, patched at `patched_at`, as of `now`.
    pub fn verdict(
        &self,
        slot: DateTime<Utc>,
        patched_at: DateTime<Utc>,
        now: DateTime<Utc>,
        timeout: Duration,
    ) -> Verdict {
        let ours = self.template_slot == Some(slot);
        if ours && self.settled() {
            Verdict::Done
        } else if ours && self.rollout.deadline_exceeded {
            Verdict::Failed(
                "ProgressDeadlineExceeded: the Deployment made no progress within its deadline".into(),
            )
        } else if now - patched_at > timeout {
            Verdict::Failed(format!(
                "the rollout did not finish within {} s",
                timeout.num_seconds()
            ))
        } else {
            Verdict::Progressing
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use serde_json::json;

    use super::*;

    fn t(s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, 3, 0, s).unwrap()
    }

    fn deployment(annotation: Option<&str>, status: serde_json::Value) -> Deployment {
        let annotations = annotation.map(|a| json!({ RESTARTED_AT_ANNOTATION: a }));
        serde_json::from_value(json!({
            "metadata": {"name": "web", "generation": 2},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"annotations": annotations}, "spec": {"containers": []}}
            },
            "status": status
        }))
        .unwrap()
    }

    fn settled() -> serde_json::Value {
        json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3})
    }

    #[test]
    fn settled_deployment_is_open_and_done() {
        let view = view_deployment(&deployment(Some("2026-11-22T03:00:10Z"), settled()));
        assert_eq!(view.template_slot, Some(t(10)));
        assert_eq!(view.gate(), Gate::Open);
        assert_eq!(
            view.verdict(t(10), t(10), t(20), Duration::seconds(600)),
            Verdict::Done
        );
        // the template carries another slot: this restart's rollout has not been seen yet
        assert_eq!(
            view.verdict(t(20), t(20), t(21), Duration::seconds(600)),
            Verdict::Progressing
        );
    }

    #[test]
    fn old_replicas_or_stale_generation_are_not_done() {
        let mut status = settled();
        status["replicas"] = json!(4);
        let view = view_deployment(&deployment(Some("2026-11-22T03:00:10Z"), status));
        assert_eq!(view.gate(), Gate::Unhealthy);
        assert_eq!(
            view.verdict(t(10), t(10), t(20), Duration::seconds(600)),
            Verdict::Progressing
        );
        let mut stale = settled();
        stale["observedGeneration"] = json!(1);
        assert!(!view_deployment(&deployment(Some("2026-11-22T03:00:10Z"), stale)).settled());
    }

    #[test]
    fn deadline_and_timeout_fail() {
        let mut status = settled();
        status["availableReplicas"] = json!(1);
        status["conditions"] =
            json!([{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]);
        let view = view_deployment(&deployment(Some("2026-11-22T03:00:10Z"), status));
        assert!(matches!(
            view.verdict(t(10), t(10), t(20), Duration::seconds(600)),
            Verdict::Failed(_)
        ));
        let slow = view_deployment(&deployment(
            Some("2026-11-22T03:00:10Z"),
            json!({"observedGeneration": 2}),
        ));
        assert_eq!(
            slow.verdict(t(10), t(10), t(15), Duration::seconds(30)),
            Verdict::Progressing
        );
        assert!(matches!(
            slow.verdict(t(10), t(10), t(50), Duration::seconds(30)),
            Verdict::Failed(_)
        ));
    }

    #[test]
    fn paused_is_gated_first() {
        let mut d = deployment(None, settled());
        d.spec.as_mut().unwrap().paused = Some(true);
        assert_eq!(view_deployment(&d).gate(), Gate::Paused);
        assert_eq!(view_deployment(&d).rollout.progress_deadline_seconds, 600);
    }
}
