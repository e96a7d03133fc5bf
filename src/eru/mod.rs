//! Eru (`mtsre.meitu.com/v1`): Elegant Rolling Updates. An Eru binds a workload to a cron schedule;
//! at every slot the workload gets a graceful rolling restart (the pod-template annotation that
//! `kubectl rollout restart` sets), and every slot ends restarted once, or missed/skipped with a
//! reason in the journal.

//! The code, by what it is ([`docs/architecture.md`](../../docs/architecture.md)):
//!
//! - [`crd`]: the custom resource (spec, status, schema);
//! - [`core`]: the pure core, decided from plain data: schedules, the slot ledger, health-gate
//!   holds, the state machine and its messages, what a pass observed, and the plan;
//! - [`pass`]: one reconcile pass in the cluster and the journal, step by step (reconcile →
//!   observe → plan → commit → act → status), and deletions;
//! - around them, what the pass uses: the lean Eru cache ([`cached`]), the workloads as cached
//!   and judged ([`workloads`]), the target → Erus index ([`index`]), the fleet cap
//!   ([`fleet`]), the health gates' questions to the cluster and Prometheus ([`gates`]), the
//!   operator's cluster-wide blackouts file ([`cluster_blackouts`]), the per-Eru metrics
//!   ([`metrics`]); and the automatic-Eru controller ([`auto`]).

pub mod auto;
pub mod cached;
pub mod cluster_blackouts;
pub mod core;
pub mod crd;
pub mod fleet;
pub mod gates;
pub mod index;
pub mod metrics;
pub mod pace;
pub mod pass;
pub mod promql;
pub mod silence;
pub mod workloads;

pub use cached::CachedEru;
pub use crd::*;

/// The kind's name in the journal, metrics and Events.
pub const KIND: &str = "Eru";
