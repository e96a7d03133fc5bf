//! Step 1 of the Eru pass: what the cluster (watch caches) and the journal say about one Eru.
//! Reads only, each bounded by what happened since the Eru's cursor; everything after this step
//! decides from the returned [`Observed`].

use chrono::{DateTime, Utc};
use kube::{Resource, ResourceExt};

pub use super::observed::*;
use super::{
    CachedEru, EruStatus,
    blackout::Blackouts,
    context::EruContext,
    events::Restart,
    hold::{Answer, Held},
    ledger::{Epoch, EpochSpec, Window},
    schedule::Schedule,
};
use crate::{Result, journal::RestartRow, machine::status_digest, runtime::time_of};

/// A restart the journal holds in progress, from its row.
fn open_restart(row: &RestartRow) -> OpenRestart {
    let slot = *row.slot;
    OpenRestart {
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

/// Whether a slot may be due in `(since, now]` under the current spec or an epoch's: only then
/// are the gates asked (an over-estimate costs one cached ask; an under-estimate would let a slot
/// start unasked, so every schedule that may produce a slot is checked).
fn may_be_due(
    current: &Result<Schedule, String>,
    epochs: &[Epoch],
    seed: &str,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
) -> bool {
    let due = |s: &Schedule| s.next_after(since).is_some_and(|slot| slot <= now);
    current.as_ref().is_ok_and(due)
        || epochs
            .iter()
            .any(|e| e.spec.schedule(seed).is_some_and(|s| due(&s)))
}

/// Observes `eru` at `now`.
pub async fn observe(context: &EruContext, eru: &CachedEru, now: DateTime<Utc>) -> Result<Observed> {
    let journal = &context.ctx.journal;
    let uid = eru.uid().unwrap_or_default();
    let namespace = eru.namespace().unwrap_or_default();
    // the status written last, until the cache shows it; else the cached one
    let (known, known_digest) = match context.ctx.statuses.written::<EruStatus>(
        &uid,
        &eru.resource_version().unwrap_or_default(),
        eru.status_digest(),
    ) {
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
    let ledger = (journal.ledger(&uid).await?).map(|row| Ledger {
        accounted_through: row.accounted_through.map(|at| *at),
    });
    let since = ledger
        .as_ref()
        .and_then(|l| l.accounted_through)
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
    let open_restart = journal.open_restart(&uid).await?.as_ref().map(open_restart);
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
    let h_key = super::schedule::eru_seed(&namespace, &eru.name_any());
    let tz = eru.spec.time_zone.as_deref();
    let schedule = Schedule::parse_for(&eru.spec.schedule, tz, &h_key)
        .map_err(|e| e.to_string())
        .and_then(|s| {
            Blackouts::compile(&eru.spec.blackouts, &[], tz, &h_key).map_err(|e| e.to_string())?;
            // what CEL cannot check: the alert gate's regexp (the Eru is Invalid, with an Event)
            if let Some(gates) = &eru.spec.gates {
                super::hold::check_gates(gates)?;
            }
            Ok(s)
        });
    let queued = context.fleet.waiting(&uid);
    // the slot a gate held before: this process's memory, else the status's (a restarted
    // operator keeps the hold's start and reason)
    let held = context.holds.get(&uid).or_else(|| {
        known
            .as_ref()
            .and_then(|s| s.held.as_ref())
            .and_then(Held::from_status)
    });
    // the Eru's own gates and the operator's cluster-wide ones (--blackouts-file)
    let cluster_gates = context.options.blackouts.gates();
    let gated = eru.spec.gates.is_some() || cluster_gates.is_some();
    let gate = if gated && may_be_due(&schedule, &epochs, &h_key, since, now) {
        (context.gatekeeper)
            .check(
                &namespace,
                &eru.spec.target.name,
                eru.spec.gates.as_deref(),
                cluster_gates.as_deref(),
            )
            .await
    } else {
        Answer::Open
    };
    Ok(Observed {
        now,
        cluster: Cluster {
            uid,
            h_key,
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
            gate,
            held,
            gate_poll: chrono::Duration::from_std(context.options.gates.poll)
                .unwrap_or_else(|_| chrono::Duration::seconds(super::hold::DEFAULT_POLL_SECONDS)),
        },
    })
}
