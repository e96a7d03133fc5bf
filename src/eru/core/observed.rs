//! What one Eru pass decides from, as plain data in three parts (cluster, journal, operator):
//! the plan's only input. [`crate::eru::pass::observe`] fills it.

use std::{collections::HashMap, sync::Arc};

use chrono::{DateTime, Utc};

use super::{
    blackout::{Blackout, Blackouts},
    hold::{Answer, Held},
    ledger::{Epoch, EpochSpec, Window},
    messages::Remembered,
    pause::{Pause, Pauses, Resume},
    restart::Restart,
    run::{Asked, ManualRun},
    schedule::Schedule,
    target::TargetView,
};

/// A restart the journal holds in progress.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenRestart {
    pub restart: Restart,
    pub decided_at: DateTime<Utc>,
    /// When its patch landed, if it did.
    pub patched_at: Option<DateTime<Utc>>,
    /// The target's generation once its patch had landed, when journaled.
    pub landed_generation: Option<i64>,
    /// The Alertmanager silence held for it and not expired yet, if any.
    pub silence: Option<String>,
}

/// A manual run the journal holds in progress.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenRun {
    pub run: ManualRun,
    /// When its patch landed, if it did.
    pub patched_at: Option<DateTime<Utc>>,
}

/// What the journal holds of the run the Eru's annotation asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum RunSeen {
    /// Journaled, not started: why it waited, if it did.
    Waiting { run: ManualRun, waited: Option<String> },
    /// Started (in flight: see [`Journaled::open_run`]) or ended: never started again.
    Started,
}

/// Everything one pass decides from, in three parts by where it comes from.
#[derive(Clone, Debug)]
pub struct Observed {
    pub now: DateTime<Utc>,
    pub cluster: Cluster,
    pub journal: Journaled,
    pub operator: Operator,
}

/// What the cluster says: the Eru (from the watch cache, or the status this operator wrote last)
/// and the workloads it targets.
#[derive(Clone, Debug)]
pub struct Cluster {
    /// The Eru's uid (its jitter).
    pub uid: String,
    /// `namespace/name`: what `H` in its schedules hashes.
    pub h_key: String,
    pub generation: i64,
    pub created: DateTime<Utc>,
    /// When the API server recorded the last write of the spec (managedFields).
    pub spec_written_at: Option<DateTime<Utc>>,
    /// The current generation as an epoch (its `from` not yet decided: see the plan).
    pub spec: EpochSpec,
    /// `spec.rolloutTimeoutSeconds`, if set.
    pub rollout_timeout_seconds: Option<i64>,
    /// The current spec's schedule, or why the spec (its schedule, time zone or blackouts)
    /// cannot be used.
    pub schedule: Result<Schedule, String>,
    /// The current spec's blackouts and the operator's cluster-wide ones, compiled once for the
    /// pass (none when the spec cannot be used): the ledger, the upcoming slots and a manual run
    /// read these.
    pub blackouts: Blackouts,
    /// Why the spec is invalid though its schedule is not (what CEL cannot check: an alert
    /// gate's regexp, a silence's namespace, a need query that cannot be confined): its slots
    /// are known, and each is skipped `spec_invalid` when due, not found past its deadline once
    /// the spec is fixed.
    pub invalid: Option<String>,
    /// What the freshest status this operator knows shows (its own last write, if the cache
    /// lags).
    pub shown: Option<Shown>,
    /// The targets the pass may need (the spec's, the restart's, the epochs'), as cached, by
    /// their journal key ([`crate::eru::Target::key`]); absent ones do not exist.
    pub targets: HashMap<String, TargetView>,
    /// The manual run the Eru's `mtsre.meitu.com/run-now` asks for, or why its value is no token.
    pub run: Option<Result<Asked, String>>,
    /// `spec.failurePolicy.pauseAfter`, if set.
    pub pause_after: Option<u32>,
    /// The resume the Eru's `mtsre.meitu.com/resume` annotation asks for, if it has one.
    pub resume: Option<Resume>,
}

/// What an Eru's status shows, as the plan reads it: the phase its machine is restored from, the
/// ledger a lost journal's is seeded from, and the latest restart.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Shown {
    /// The machine's state when the status was written.
    pub phase: Option<String>,
    /// The ledger's cursor and totals as the status keeps them.
    pub ledger: Remembered,
    pub last_restart: Option<ShownRestart>,
    /// The token of the latest manual run, if it is still waiting.
    pub waiting_run: Option<String>,
    /// The pause on failure it shows, if any.
    pub paused: Option<Pause>,
}

/// The latest restart as a status shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShownRestart {
    pub slot: DateTime<Utc>,
    pub patched_at: Option<DateTime<Utc>>,
    /// Its outcome was `in_progress`.
    pub in_progress: bool,
    /// Its target's journal key (a status written before it was kept has none).
    pub target: Option<String>,
    /// It was seen undone by another field manager.
    pub reverted: bool,
}

impl Shown {
    /// The latest instant it says is accounted: its cursor, else (a status written before the
    /// cursor was kept) its latest restart or missed slot.
    pub fn cursor(&self) -> Option<DateTime<Utc>> {
        [
            self.ledger.accounted_through,
            self.last_restart.as_ref().map(|r| r.slot),
            self.ledger.last_missed,
        ]
        .into_iter()
        .flatten()
        .max()
    }
}

/// The journal's ledger of an Eru, as a plan reads it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ledger {
    /// Every slot at or before this instant is restarted or recorded.
    pub accounted_through: Option<DateTime<Utc>>,
}

/// What the journal holds of the Eru, from its cursor on.
#[derive(Clone, Debug, Default)]
pub struct Journaled {
    /// The Eru's ledger; `None` if the journal has never accounted it.
    pub ledger: Option<Ledger>,
    /// Epochs from the one in force at the cursor on, oldest first.
    pub epochs: Vec<Epoch>,
    /// The restart held in progress, if any.
    pub open_restart: Option<OpenRestart>,
    /// The manual run held in progress, if any.
    pub open_run: Option<OpenRun>,
    /// What the journal holds of the run the Eru asks for; `None` if it has none (a new token).
    pub run: Option<RunSeen>,
    /// Operator runs `(started, last heartbeat)` since the cursor (and the one before), oldest
    /// first.
    pub runs: Vec<(DateTime<Utc>, DateTime<Utc>)>,
    /// When the journal took no writes although the operator ran, ending after the cursor, oldest
    /// first: the journaled outages and the one still open.
    pub outages: Vec<Window>,
    /// Its pauses on failure and the restarts since the latest resume (read only for an Eru with
    /// a failure policy or a status that shows a pause).
    pub pauses: Pauses,
}

/// What the operator itself brings: its cluster-wide blackouts, its dry run, its fleet queue.
#[derive(Clone, Debug, Default)]
pub struct Operator {
    pub cluster_blackouts: Arc<Vec<Blackout>>,
    /// `--dry-run`.
    pub dry_run_all: bool,
    /// The slot this Eru waits with for a place in the fleet, if it waits.
    pub queued: Option<DateTime<Utc>>,
    /// What the health gates answered (asked only when a slot may be due).
    pub gate: Answer,
    /// The slot a gate held in an earlier pass, if one did (this process's memory, else the
    /// status's).
    pub held: Option<Held>,
    /// How soon a held slot's gates are asked again (zero: the default).
    pub gate_poll: chrono::Duration,
    /// What the need conditions answered (asked only when a slot may be due).
    pub need: super::need::Need,
}

impl Observed {
    /// The spec's target, if it exists.
    pub fn target(&self) -> Option<&TargetView> {
        self.cluster.targets.get(&self.cluster.spec.target)
    }

    /// The journal's cursor, if it accounted the Eru.
    pub fn journal_cursor(&self) -> Option<DateTime<Utc>> {
        self.journal.ledger.as_ref().and_then(|l| l.accounted_through)
    }
}
