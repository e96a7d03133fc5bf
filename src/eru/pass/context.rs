//! What every step of the Eru pass shares: the runtime's context, the Eru's own metric series, the
//! workload caches its targets are read from, and the fleet-wide options (cap, dry run,
//! cluster-wide blackouts).

use std::sync::Arc;

use crate::runtime::{
    cache::Cache,
    lean::{DaemonSet, Deployment, StatefulSet},
};

use crate::eru::{
    CachedEru, Target, TargetKind,
    cluster_blackouts::ClusterBlackouts,
    core::{hold::Held, target::TargetView},
    fleet::Fleet,
    metrics::EruMetrics,
    workloads::Workload,
};
use crate::runtime::{
    Context,
    wakes::Wakes,
    watch::{Shared, Synced},
};

/// Operator-wide options of the Eru controller.
#[derive(Clone)]
pub struct Options {
    /// `--max-concurrent-restarts` and the per-namespace cap.
    pub limits: crate::eru::fleet::Limits,
    /// `--dry-run`: every Eru runs dry.
    pub dry_run: bool,
    /// `--blackouts-file`.
    pub blackouts: Arc<ClusterBlackouts>,
    /// `--prometheus-url`, the gates' poll interval and cache.
    pub gates: crate::eru::gates::GateOptions,
    /// `--notifications-file`: the routes that pick the events a commit writes to the outbox,
    /// and the delivery task to wake.
    pub notifications: Option<Notifications>,
    /// `--alertmanager-url`: where an Eru's spec.silence is created.
    pub silencer: Arc<crate::eru::silence::Silencer>,
}

/// The notifications' routes and the delivery task's wake-up.
#[derive(Clone, Debug)]
pub struct Notifications {
    pub notifier: Arc<crate::notify::Notifier>,
    pub wake: Arc<tokio::sync::Notify>,
}

/// The slots health gates hold now, by Eru uid (with the Eru's namespace and name): the
/// reconciles keep it, `/audit` and the page show it. A hold is journaled only when its slot is
/// accounted (run, or skipped at its deadline); until then this and the Eru's status have it.
#[derive(Clone, Debug, Default)]
pub struct Holds(Arc<std::sync::Mutex<std::collections::HashMap<String, Held>>>);

impl Holds {
    /// Remembers (or, with `None`, forgets) the slot a gate holds of the Eru `uid`; how many
    /// slots are held in all.
    pub fn set(&self, uid: &str, held: Option<&Held>) -> usize {
        let mut holds = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match held {
            Some(held) => {
                holds.insert(uid.to_string(), held.clone());
            }
            None => {
                holds.remove(uid);
            }
        }
        holds.len()
    }

    /// The slot held of the Eru `uid`, if one is.
    pub fn get(&self, uid: &str) -> Option<Held> {
        let holds = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        holds.get(uid).cloned()
    }

    /// The held slots now, by uid.
    pub fn snapshot(&self) -> std::collections::HashMap<String, Held> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// The shared caches of the workloads Erus target (the Eru and automatic-Eru controllers
/// subscribe to them).
#[derive(Clone, Copy)]
pub struct Workloads<'a> {
    pub deployments: &'a Shared<Deployment>,
    pub statefulsets: &'a Shared<StatefulSet>,
    pub daemonsets: &'a Shared<DaemonSet>,
}

/// The stores of the workload caches, one per kind, as the Eru pass reads its targets.
#[derive(Clone)]
pub struct TargetCaches {
    pub deployments: Cache<Deployment>,
    pub statefulsets: Cache<StatefulSet>,
    pub daemonsets: Cache<DaemonSet>,
    synced: [Synced; 3],
}

impl TargetCaches {
    /// The stores of the shared caches.
    pub fn of(workloads: &Workloads<'_>) -> Self {
        let Workloads {
            deployments,
            statefulsets,
            daemonsets,
        } = *workloads;
        Self {
            deployments: deployments.store.clone(),
            statefulsets: statefulsets.store.clone(),
            daemonsets: daemonsets.store.clone(),
            synced: [
                deployments.synced.clone(),
                statefulsets.synced.clone(),
                daemonsets.synced.clone(),
            ],
        }
    }

    /// Waits until every cache holds its initial listing.
    pub async fn synced(&self) {
        let [a, b, c] = &self.synced;
        futures::join!(a.wait(), b.wait(), c.wait());
    }

    /// The view of the workload a journal key ([`Target::key`]) names in `namespace`, if it is
    /// cached (else it does not exist).
    pub fn view(&self, namespace: &str, key: &str) -> Option<TargetView> {
        fn get<K: Workload>(store: &Cache<K>, namespace: &str, name: &str) -> Option<TargetView> {
            store.find(namespace, name).map(|k| k.view())
        }
        let Target { kind, name } = Target::from_key(key)?;
        match kind {
            TargetKind::Deployment => get(&self.deployments, namespace, &name),
            TargetKind::StatefulSet => get(&self.statefulsets, namespace, &name),
            TargetKind::DaemonSet => get(&self.daemonsets, namespace, &name),
        }
    }
}

/// The Eru controller's state besides the shared context.
pub struct EruContext {
    pub ctx: Arc<Context>,
    pub metrics: EruMetrics,
    /// The Erus' own cache (a reconcile checks its Eru is still there before it keeps series).
    pub erus: Cache<CachedEru>,
    pub targets: TargetCaches,
    pub options: Options,
    /// Restart places and the queue for them.
    pub fleet: Fleet,
    /// Set once the restarts in flight were counted from the journal.
    pub fleet_loaded: tokio::sync::OnceCell<()>,
    /// Set once the term's first reads were read, or failed (`read_first`).
    pub first_read: tokio::sync::OnceCell<()>,
    /// Each Eru's next wake-up (most wait for their next slot).
    pub wakes: Wakes,
    /// Asks the health gates.
    pub gatekeeper: crate::eru::gates::Gatekeeper,
    /// uid → the slot a health gate holds (the status has it too, for a restarted operator).
    pub holds: Holds,
    /// What the last pass of each Eru saw of its journal.
    pub journal_memo: super::journal_memo::JournalMemo,
}
