//! Step 1 of the Eru pass: what the cluster (watch caches) and the journal say about one Eru.
//! Reads only, each bounded by what happened since the Eru's cursor; everything after this step
//! decides from the returned [`Observed`].

use std::{collections::HashMap, sync::Arc};

use chrono::{DateTime, Utc};
use kube::{Resource, ResourceExt};

use super::{
    Blackout, CachedEru, EruStatus,
    blackout::Blackouts,
    context::EruContext,
    events::Restart,
    ledger::{Epoch, EpochSpec, Window},
    schedule::Schedule,
    target::TargetView,
};
use crate::{
    Result,
    journal::{LedgerRow, RestartRow},
    machine::status_digest,
    runtime::time_of,
};

/// A restart the journal holds in progress.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenRestart {
    pub restart: Restart,
    pub decided_at: DateTime<Utc>,
    /// When its patch landed, if it did.
    pub patched_at: Option<DateTime<Utc>>,
}

impl OpenRestart {
    fn of(row: &RestartRow) -> Self {
        let slot = *row.slot;
        Self {
            restart: Restart {
                slot,
                target: row.target.clone(),
                // journaled before deadlines were kept: the default starting deadline
                deadline: row.deadline_at.map_or(
                    slot + chrono::Duration::seconds(super::DEFAULT_STARTING_DEADLINE_SECONDS),
                    |at| *at,
                ),
                attempts: row.attempts.max(0) as u32,
                last_error: row.last_error.clone(),
                next_attempt_at: row.next_attempt_at.map(|at| *at),
            },
            decided_at: *row.decided_at,
            patched_at: row.patched_at.map(|at| *at),
        }
    }
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
    /// The Eru's uid (its jitter) and `namespace/name` (`H` in its schedules).
    pub uid: String,
    pub seed: String,
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
    /// The freshest status this operator knows (its own last write, if the cache lags).
    pub known: Option<EruStatus>,
    /// The [`status_digest`] of the whole known status (a cached one lacks its conditions'
    /// reasons and messages): a pass writes its status only when it differs.
    pub known_digest: Option<u64>,
    /// The targets the pass may need (the spec's, the restart's, the epochs'), as cached, by
    /// their journal key ([`super::Target::key`]); absent ones do not exist.
    pub targets: HashMap<String, TargetView>,
}

/// What the journal holds of the Eru, from its cursor on.
#[derive(Clone, Debug, Default)]
pub struct Journaled {
    /// The ledger row; `None` if the journal has never accounted the Eru.
    pub ledger: Option<LedgerRow>,
    /// Epochs from the one in force at the cursor on, oldest first.
    pub epochs: Vec<Epoch>,
    /// The restart held in progress, if any.
    pub open_restart: Option<OpenRestart>,
    /// Operator runs `(started, last heartbeat)` since the cursor (and the one before), oldest
    /// first.
    pub runs: Vec<(DateTime<Utc>, DateTime<Utc>)>,
    /// When the journal took no writes although the operator ran, ending after the cursor, oldest
    /// first: the journaled outages and the one still open.
    pub outages: Vec<Window>,
}

/// What the operator itself brings: its cluster-wide blackouts, its dry run, its fleet queue.
#[derive(Clone, Debug, Default)]
pub struct Operator {
    pub cluster_blackouts: Arc<Vec<Blackout>>,
    /// `--dry-run`.
    pub dry_run_all: bool,
    /// The slot this Eru waits with for a place in the fleet, if it waits.
    pub queued: Option<DateTime<Utc>>,
}

impl Observed {
    /// The spec's target, if it exists.
    pub fn target(&self) -> Option<&TargetView> {
        self.cluster.targets.get(&self.cluster.spec.target)
    }

    /// The journal's cursor, if it accounted the Eru.
    pub fn journal_cursor(&self) -> Option<DateTime<Utc>> {
        self.journal
            .ledger
            .as_ref()
            .and_then(|l| l.accounted_through)
            .map(|at| *at)
    }
}

/// Observes `eru` at `now`.
pub async fn observe(context: &EruContext, eru: &CachedEru, now: DateTime<Utc>) -> Result<Observed> {
    let journal = &context.ctx.journal;
    let uid = eru.uid().unwrap_or_default();
    let namespace = eru.namespace().unwrap_or_default();
    // the status written last, until the cache shows it; else the cached one
    let (known, known_digest) = match context
        .ctx
        .statuses
        .written::<EruStatus>(&uid, &eru.resource_version().unwrap_or_default())
    {
        Some(written) => {
            let digest = status_digest(&written);
            (Some(written), Some(digest))
        }
        None => (eru.status(), eru.status_digest()),
    };
    let meta = eru.meta();
    let created = meta.creation_timestamp.as_ref().and_then(time_of).unwrap_or(now);
    // the open outage before the journaled ones (see `Journal::outage_now`)
    let open_outage = journal.outage_now(now);
    let ledger = journal.ledger(&uid).await?;
    let since = ledger
        .as_ref()
        .and_then(|l| l.accounted_through.map(|at| *at))
        .or(known.as_ref().and_then(|s| s.accounted_through))
        .unwrap_or(created);
    let epochs = journal
        .epochs(&uid, since)
        .await?
        .into_iter()
        .map(|row| {
            let spec = serde_json::from_value(row.spec.0).map_err(|e| crate::Error::JournalRow {
                row: format!("spec_epochs (uid {}, generation {})", row.uid, row.generation),
                reason: e.to_string(),
            })?;
            Ok(Epoch {
                generation: row.generation,
                from: *row.effective_from,
                spec,
            })
        })
        .collect::<Result<Vec<Epoch>>>()?;
    let open_restart = journal.open_restart(&uid).await?.as_ref().map(OpenRestart::of);
    let runs = (journal.runs_since(since).await?.iter())
        .map(|r| (*r.started_at, *r.heartbeat_at))
        .collect();
    let mut journal_outages: Vec<Window> = (journal.outages_since(since).await?.iter())
        .map(|o| (*o.started_at, *o.ended_at))
        .collect();
    // an outage that ended between the two reads is in both: its journaled window, which ends
    // when writes worked again, is the one
    if let Some(open) = open_outage.filter(|o| journal_outages.iter().all(|j| j.0 != o.0)) {
        journal_outages.push(open);
    }

    let spec = EpochSpec::of(&eru.spec);
    let mut keys: Vec<&str> = vec![&spec.target];
    keys.extend(open_restart.iter().map(|o| o.restart.target.as_str()));
    keys.extend(epochs.iter().map(|e| e.spec.target.as_str()));
    let targets = keys
        .into_iter()
        .filter_map(|key| Some((key.to_string(), context.targets.view(&namespace, key)?)))
        .collect();
    let seed = super::schedule::eru_seed(&namespace, &eru.name_any());
    let tz = eru.spec.time_zone.as_deref();
    let schedule = Schedule::parse_for(&eru.spec.schedule, tz, &seed)
        .map_err(|e| e.to_string())
        .and_then(|s| {
            Blackouts::compile(&eru.spec.blackouts, &[], tz, &seed).map_err(|e| e.to_string())?;
            Ok(s)
        });
    let queued = context.fleet.waiting(&uid);
    Ok(Observed {
        now,
        cluster: Cluster {
            uid,
            seed,
            generation: meta.generation.unwrap_or(1),
            created,
            spec_written_at: eru.spec_written_at(),
            spec,
            rollout_timeout_seconds: eru.spec.rollout_timeout_seconds,
            schedule,
            known,
            known_digest,
            targets,
        },
        journal: Journaled {
            ledger,
            epochs,
            open_restart,
            runs,
            outages: journal_outages,
        },
        operator: Operator {
            cluster_blackouts: context.options.blackouts.current(),
            dry_run_all: context.options.dry_run,
            queued,
        },
    })
}
