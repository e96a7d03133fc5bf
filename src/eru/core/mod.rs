//! The Eru's pure core: everything an Eru pass decides, from plain data and without I/O. No kube
//! client, k8s_openapi type, tokio, sqlx, runtime module or journal row is named here or in
//! anything it imports (hack/imports.py checks it, transitively); the pass ([`super::pass`])
//! translates the cluster and the journal into [`observed::Observed`] and carries out what the
//! [`plan::Plan`] decided.
//!
//! - [`schedule`] and [`hash`]: cron schedules with time zones and `H`, and the stable hashes;
//! - [`blackout`]: blackout windows; [`target`]: a workload's gate and rollout verdict;
//! - [`ledger`]: the slot ledger (every slot due, or recorded with its reason);
//! - [`hold`]: slots a health gate holds; [`need`]: whether a due slot's restart would help;
//! - [`messages`]: what the state machine hears (events) and says (records, actions);
//! - [`restart`]: a restart in flight and its cause (a slot, or a manual run): where the two differ;
//! - [`run`]: manual runs (`mtsre.meitu.com/run-now`) before they start;
//! - [`pause`]: pause on failure (`spec.failurePolicy`) and its resume;
//! - [`machine`]: the Eru's statig state machine;
//! - [`observed`]: what a pass decides from; [`plan`]: one pass's plan.

/// Pod-template annotation carrying the slot of the last restart (the idempotency key): the
/// value that joins the cluster to the ledger.
pub const RESTARTED_AT_ANNOTATION: &str = "mtsre.meitu.com/restartedAt";

pub mod blackout;
pub mod hash;
pub mod hold;
pub mod ledger;
pub mod machine;
pub mod messages;
pub mod need;
pub mod observed;
pub mod pause;
pub mod plan;
pub mod restart;
pub mod run;
pub mod schedule;
pub mod target;
