//! What the operator reads of a Deployment, as plain data: Memcached judges its owned Deployment
//! with it, an Eru its target. Pure.

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::Deployment;

use super::lean;

use super::time_of;

/// Default `progressDeadlineSeconds` of a Deployment.
pub const DEFAULT_PROGRESS_DEADLINE_SECONDS: i32 = 600;

/// A Deployment's rollout state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeploymentView {
    pub paused: bool,
    /// `spec.replicas` (default 1).
    pub desired: i32,
    pub replicas: i32,
    pub updated: i32,
    pub ready: i32,
    pub available: i32,
    /// The Deployment controller has seen the latest spec.
    pub caught_up: bool,
    /// `Progressing` is False with reason `ProgressDeadlineExceeded`.
    pub deadline_exceeded: bool,
    pub progress_deadline_seconds: i32,
    /// When `Progressing` last turned `NewReplicaSetAvailable` (a rollout completed), if it is so.
    pub available_since: Option<DateTime<Utc>>,
}

impl DeploymentView {
    /// The view of `deployment`.
    pub fn of(deployment: &Deployment) -> Self {
        let spec = deployment.spec.as_ref();
        Self::from_parts(
            deployment.metadata.generation,
            spec.map(|s| (s.paused, s.replicas, s.progress_deadline_seconds)),
            deployment
                .status
                .as_ref()
                .map(lean::DeploymentStatus::from)
                .as_ref(),
        )
    }

    /// The view of a cached `deployment`.
    pub fn of_cached(deployment: &lean::Deployment) -> Self {
        let spec = deployment.spec.as_ref();
        Self::from_parts(
            deployment.metadata.generation,
            spec.map(|s| (s.paused, s.replicas, s.progress_deadline_seconds)),
            deployment.status.as_ref(),
        )
    }

    /// The view from the generation, the spec's `(paused, replicas, progressDeadlineSeconds)` and
    /// the status.
    fn from_parts(
        generation: Option<i64>,
        spec: Option<(Option<bool>, Option<i32>, Option<i32>)>,
        status: Option<&lean::DeploymentStatus>,
    ) -> Self {
        let (paused, replicas, progress_deadline_seconds) = spec.unwrap_or_default();
        let status = status.cloned().unwrap_or_default();
        DeploymentView {
            paused: paused.unwrap_or(false),
            desired: replicas.unwrap_or(1),
            replicas: status.replicas.unwrap_or(0),
            updated: status.updated_replicas.unwrap_or(0),
            ready: status.ready_replicas.unwrap_or(0),
            available: status.available_replicas.unwrap_or(0),
            caught_up: status.observed_generation >= generation,
            deadline_exceeded: status.progressing.deadline_exceeded,
            progress_deadline_seconds: progress_deadline_seconds.unwrap_or(DEFAULT_PROGRESS_DEADLINE_SECONDS),
            available_since: status.progressing.available_since.as_ref().and_then(time_of),
        }
    }

    /// `size` replicas, all updated, ready and available, no old one left, and the controller
    /// caught up with the spec.
    pub fn settled_at(&self, size: i32) -> bool {
        self.caught_up
            && self.updated == size
            && self.ready == size
            && self.available == size
            && self.replicas == size
    }
}
