//! # eru-operator
//!
//! One operator, three custom resources, each an explicit state machine journaled to SQLite:
//! - [`eru`]: `Eru` (`mtsre.meitu.com/v1`), graceful rolling restarts of a Deployment on a cron
//!   schedule, every slot accounted for;
//! - [`podset`]: `PodSet` (`k8stest.justin0u0.com/v1alpha1`), a ReplicaSet-like owner of Pods;
//! - [`memcached`]: `Memcached` (`cache.example.com/v1alpha1`), an owned memcached Deployment.
//!
//! A reconcile observes the cluster (the source of truth for desired state), turns what it saw
//! into an event, dispatches it to the object's statig machine restored from `status.phase`
//! ([`machine`]), journals the transitions ([`journal`], the source of truth for history), then
//! acts and writes status. [`http`] serves the journal and [`metrics`].

pub mod app;
pub mod cli;
pub mod conditions;
pub mod config;
pub mod crds;
pub mod error;
pub mod eru;
pub mod failpoint;
pub mod history;
pub mod http;
pub mod journal;
pub mod machine;
pub mod memcached;
pub mod memory;
pub mod metrics;
pub mod notify;
pub mod outbound;
pub mod podset;
pub mod runtime;
pub mod vocab;

pub use error::{Error, Result};
