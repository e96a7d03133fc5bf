//! What every step of the Eru pass shares: the runtime's context, the Eru's own metric series and
//! the Deployment cache its targets are read from.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use kube::runtime::reflector::Store;

use super::{Eru, metrics::EruMetrics};
use crate::runtime::{Context, watch::Synced};

/// The Eru controller's state besides the shared context.
pub struct EruContext {
    pub ctx: Arc<Context>,
    pub metrics: EruMetrics,
    /// The Erus' own cache (a reconcile checks its Eru is still there before it keeps series).
    pub erus: Store<Eru>,
    pub deployments: Store<Deployment>,
    pub deployments_synced: Synced,
}
