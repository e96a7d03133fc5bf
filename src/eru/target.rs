//! What an Eru sees of its target, kind-agnostic: a Deployment, StatefulSet or DaemonSet, each
//! judged from its own status by its own `view_*` function (the restart patch is the same
//! pod-template annotation for all three). Pure: the gate before a restart and the verdict on a
//! rollout.

use chrono::{DateTime, Duration, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{RESTART_MANAGER, RESTARTED_AT_ANNOTATION, TargetKind, events::Gate};
use crate::runtime::{
    deployment::DeploymentView,
    lean::{DaemonSet, Deployment, StatefulSet, Template},
    managed_at,
    watch::Watchable,
};

/// How long a rollout may take when neither the Eru (`rolloutTimeoutSeconds`) nor the kind (a
/// Deployment's `progressDeadlineSeconds`) says.
pub const DEFAULT_ROLLOUT_TIMEOUT_SECONDS: i64 = 600;

/// A workload's rollout state and the slot its pod template carries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetView {
    /// Its controller has seen the latest spec, and every desired pod is updated, ready and
    /// available with no old one left (each kind by its own status fields).
    pub settled: bool,
    /// A Deployment's `spec.paused`.
    pub paused: bool,
    /// Why a pod-template change would not roll every pod (an `OnDelete` strategy, a
    /// StatefulSet's partition), if it would not.
    pub not_rollable: Option<String>,
    /// A Deployment's `Progressing` condition is False with reason `ProgressDeadlineExceeded`.
    pub deadline_exceeded: bool,
    /// How long a rollout may take unless the Eru says: a Deployment's
    /// `progressDeadlineSeconds`, else [`DEFAULT_ROLLOUT_TIMEOUT_SECONDS`].
    pub rollout_timeout_seconds: i64,
    /// When the last rollout completed, if the kind records it (a Deployment's `Progressing`
    /// condition turning `NewReplicaSetAvailable`).
    pub completed_at: Option<DateTime<Utc>>,
    /// The slot the pod template carries (the last restart patched).
    pub template_slot: Option<DateTime<Utc>>,
    /// When the restart manager last changed the template (the API server's clock, seconds).
    pub restart_applied_at: Option<DateTime<Utc>>,
}

/// A kind an Eru can target: its objects as a [`TargetView`].
pub trait Workload: Watchable {
    const KIND: TargetKind;

    /// The view of this object.
    fn view(&self) -> TargetView;

    /// Whether its controller has yet to see the latest spec (and it is not being deleted).
    fn awaits_controller(&self) -> bool;
}

/// Whether a workload controller has yet to observe the spec generation of `meta`, which is not
/// being deleted. A new object (never observed) is not behind: an Eru may be waiting for it.
fn behind(meta: &ObjectMeta, observed: Option<i64>) -> bool {
    matches!((observed, meta.generation), (Some(o), Some(g)) if o < g) && meta.deletion_timestamp.is_none()
}

impl Workload for Deployment {
    const KIND: TargetKind = TargetKind::Deployment;

    fn view(&self) -> TargetView {
        view_deployment(self)
    }

    fn awaits_controller(&self) -> bool {
        behind(
            &self.metadata,
            self.status.as_ref().and_then(|s| s.observed_generation),
        )
    }
}

impl Workload for StatefulSet {
    const KIND: TargetKind = TargetKind::StatefulSet;

    fn view(&self) -> TargetView {
        view_statefulset(self)
    }

    fn awaits_controller(&self) -> bool {
        behind(
            &self.metadata,
            self.status.as_ref().and_then(|s| s.observed_generation),
        )
    }
}

impl Workload for DaemonSet {
    const KIND: TargetKind = TargetKind::DaemonSet;

    fn view(&self) -> TargetView {
        view_daemonset(self)
    }

    fn awaits_controller(&self) -> bool {
        behind(
            &self.metadata,
            self.status.as_ref().and_then(|s| s.observed_generation),
        )
    }
}

/// A view with the restart marks of `meta` and `template` (the slot the template carries, when
/// the restart manager last wrote it) and nothing else yet.
fn marked(meta: &ObjectMeta, template: Option<&Template>) -> TargetView {
    TargetView {
        rollout_timeout_seconds: DEFAULT_ROLLOUT_TIMEOUT_SECONDS,
        template_slot: template
            .and_then(|t| t.metadata.as_ref())
            .and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get(RESTARTED_AT_ANNOTATION))
            .and_then(|v| DateTime::parse_from_rfc3339(v).ok())
            .map(|t| t.with_timezone(&Utc)),
        restart_applied_at: managed_at(meta, |e| e.manager.as_deref() == Some(RESTART_MANAGER)),
        ..TargetView::default()
    }
}

/// Whether the controller of an object of `generation` has observed it.
fn caught_up(observed: Option<i64>, generation: Option<i64>) -> bool {
    observed >= generation
}

/// The view of a Deployment: settled when `observedGeneration` caught up and updated, ready and
/// available replicas equal `spec.replicas` with no old replica left; failed early on
/// `ProgressDeadlineExceeded`; the rollout may take `progressDeadlineSeconds`.
pub fn view_deployment(deployment: &Deployment) -> TargetView {
    let rollout = DeploymentView::of_cached(deployment);
    TargetView {
        settled: rollout.settled_at(rollout.desired),
        paused: rollout.paused,
        deadline_exceeded: rollout.deadline_exceeded,
        rollout_timeout_seconds: rollout.progress_deadline_seconds.into(),
        completed_at: rollout.available_since,
        ..marked(
            &deployment.metadata,
            deployment.spec.as_ref().map(|s| &s.template),
        )
    }
}

/// The view of a StatefulSet: settled when `observedGeneration` caught up, `updateRevision` equals
/// `currentRevision` (when both are set), and its replicas, updated, ready and available replicas
/// all equal `spec.replicas`. Not rollable with `updateStrategy` `OnDelete`, or a rolling-update
/// `partition` above its first ordinal (the pods below it would keep their old template).
pub fn view_statefulset(statefulset: &StatefulSet) -> TargetView {
    let name = statefulset.metadata.name.as_deref().unwrap_or_default();
    let spec = statefulset.spec.as_ref();
    let desired = spec.and_then(|s| s.replicas).unwrap_or(1);
    let settled = statefulset.status.as_ref().is_some_and(|s| {
        let same_revision = match (&s.update_revision, &s.current_revision) {
            (Some(update), Some(current)) => update == current,
            _ => true,
        };
        caught_up(s.observed_generation, statefulset.metadata.generation)
            && same_revision
            && s.replicas == desired
            && s.updated_replicas.unwrap_or(0) == desired
            && s.ready_replicas.unwrap_or(0) == desired
            && s.available_replicas.unwrap_or(0) == desired
    });
    let strategy = spec.and_then(|s| s.update_strategy.as_ref());
    let partition = strategy
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|r| r.partition)
        .unwrap_or(0);
    let first_ordinal = spec
        .and_then(|s| s.ordinals.as_ref())
        .and_then(|o| o.start)
        .unwrap_or(0);
    let not_rollable = if strategy.and_then(|s| s.type_.as_deref()) == Some("OnDelete") {
        Some(format!(
            "StatefulSet {name} uses updateStrategy OnDelete: a pod-template change rolls no pod"
        ))
    } else if partition > first_ordinal {
        Some(format!(
            "StatefulSet {name} uses updateStrategy RollingUpdate with partition {partition}: \
             pods below ordinal {partition} would not be restarted"
        ))
    } else {
        None
    };
    TargetView {
        settled,
        not_rollable,
        ..marked(&statefulset.metadata, spec.map(|s| &s.template))
    }
}

/// The view of a DaemonSet: settled when `observedGeneration` caught up and updated, available and
/// ready pods all equal `desiredNumberScheduled`, none unavailable. Not rollable with
/// `updateStrategy` `OnDelete`.
pub fn view_daemonset(daemonset: &DaemonSet) -> TargetView {
    let name = daemonset.metadata.name.as_deref().unwrap_or_default();
    let spec = daemonset.spec.as_ref();
    let settled = daemonset.status.as_ref().is_some_and(|s| {
        let desired = s.desired_number_scheduled;
        caught_up(s.observed_generation, daemonset.metadata.generation)
            && s.updated_number_scheduled.unwrap_or(0) == desired
            && s.number_available.unwrap_or(0) == desired
            && s.number_ready == desired
            && s.number_unavailable.unwrap_or(0) == 0
    });
    let on_delete = spec
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        == Some("OnDelete");
    TargetView {
        settled,
        not_rollable: on_delete.then(|| {
            format!("DaemonSet {name} uses updateStrategy OnDelete: a pod-template change rolls no pod")
        }),
        ..marked(&daemonset.metadata, spec.map(|s| &s.template))
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
    /// Whether a restart may start now.
    pub fn gate(&self) -> Gate {
        if self.paused {
            Gate::Paused
        } else if self.not_rollable.is_some() {
            Gate::NotRollable
        } else if !self.settled {
            Gate::Unhealthy
        } else {
            Gate::Open
        }
    }

    /// What the gate's reason alone does not say: why the target is not rollable.
    pub fn gate_note(&self) -> Option<String> {
        (self.gate() == Gate::NotRollable)
            .then(|| self.not_rollable.clone())
            .flatten()
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

    /// When a finished rollout really finished: when the kind records it (a Deployment's
    /// `Progressing` condition turned `NewReplicaSetAvailable`; second precision) and that is
    /// well before `now` (the operator was not watching), that instant, else `now`. Never before
    /// `patched_at`.
    pub fn finished_at(&self, patched_at: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
        match self.completed_at {
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
        if ours && self.settled {
            Verdict::Done
        } else if ours && self.deadline_exceeded {
            Verdict::Failed(
                "ProgressDeadlineExceeded: the Deployment made no progress within its deadline".into(),
            )
        } else if let Some(note) = self.not_rollable.as_ref().filter(|_| ours) {
            // its strategy changed during the rollout: the pods left will not roll
            Verdict::Failed(format!("the rollout cannot finish: {note}"))
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
mod tests;
