//! What every step of the Eru pass shares: the runtime's context, the Eru's own metric series, the
//! Deployment cache its targets are read from, and the fleet-wide options (cap, dry run,
//! cluster-wide blackouts).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use kube::runtime::reflector::Store;

use super::{Eru, blackout::ClusterBlackouts, fleet::Fleet, metrics::EruMetrics};
use crate::runtime::{Context, watch::Synced};

/// Operator-wide options of the Eru controller.
#[derive(Clone)]
pub struct Options {
    /// `--max-concurrent-restarts` and the per-namespace cap.
    pub limits: super::fleet::Limits,
    /// `--dry-run`: every Eru runs dry.
    pub dry_run: bool,
    /// `--blackouts-file`.
    pub blackouts: Arc<ClusterBlackouts>,
}

/// The Eru controller's state besides the shared context.
pub struct EruContext {
    pub ctx: Arc<Context>,
    pub metrics: EruMetrics,
    /// The Erus' own cache (a reconcile checks its Eru is still there before it keeps series).
    pub erus: Store<Eru>,
    pub deployments: Store<Deployment>,
    pub deployments_synced: Synced,
    pub options: Options,
    /// Restart places and the queue for them.
    pub fleet: Fleet,
    /// Set once the restarts in flight were counted from the journal.
    pub fleet_loaded: tokio::sync::OnceCell<()>,
}
