//! Step 1 of the Eru pass: what the cluster (watch caches) and the journal say about one Eru.
//! Reads only, each bounded by what happened since the Eru's cursor; everything after this step
//! decides from the returned [`Observed`].

use chrono::{DateTime, Utc};
use kube::{Resource, ResourceExt};

use super::context::EruContext;
pub use crate::eru::core::observed::*;
use crate::eru::{
    CachedEru, EruSpec, EruStatus, HeldSlot,
    core::{
        blackout::{Blackout, Blackouts},
        hold::{self, Answer, Held},
        ledger::{Epoch, EpochSpec, Window},
        messages::Remembered,
        need::Need,
        pause::{Ended, Pause, Pauses, RESUME_ANNOTATION, Resume},
        restart::{Cause, Restart},
        run::{Asked, ManualRun, RUN_ANNOTATION},
        schedule::{Schedule, eru_seed},
    },
    gates::check_gates,
    promql::need_query,
};
use crate::{
    Result,
    journal::{EpochRow, EruSummary, Reader, RestartRow, RunRow},
    runtime::{status::status_digest, time_of},
    vocab::RunOutcome,
};

/// A restart the journal holds in progress, from its row.
fn open_restart_of(row: &RestartRow) -> OpenRestart {
    let slot = *row.slot;
    OpenRestart {
        restart: Restart {
            cause: Cause::Slot(slot),
            target: row.target.clone(),
            // journaled before deadlines were kept: the default starting deadline
            deadline: row.deadline_at.map_or(
                slot + chrono::Duration::seconds(crate::eru::DEFAULT_STARTING_DEADLINE_SECONDS),
                |at| *at,
            ),
            attempts: row.attempts.max(0) as u32,
            last_error: row.last_error.clone(),
            next_attempt_at: row.next_attempt_at.map(|at| *at),
        },
        decided_at: *row.decided_at,
        patched_at: row.patched_at.map(|at| *at),
        landed_generation: row.landed_generation,
        silence: row
            .silence_id
            .clone()
            .filter(|_| row.silence_expired_at.is_none()),
    }
}

/// A manual run as the journal holds it.
fn manual_run(row: &RunRow) -> ManualRun {
    ManualRun {
        token: row.token.clone(),
        requested_by: row.requested_by.clone(),
        requested_at: *row.requested_at,
        deadline: *row.deadline_at,
        target: row.target.clone(),
        attempts: row.attempts.max(0) as u32,
        last_error: row.last_error.clone(),
        next_attempt_at: row.next_attempt_at.map(|at| *at),
    }
}

/// The manual run the Eru's annotation asks for, or why its value is no token.
fn asked(eru: &CachedEru) -> Option<Result<Asked, String>> {
    let value = eru.metadata.annotations.as_ref()?.get(RUN_ANNOTATION)?;
    Some(Asked::token(value).map(|token| Asked {
        token,
        requested_by: eru.run_requested_by().map(str::to_string),
        set_at: eru.run_set_at(),
    }))
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

/// The status this pass starts from, as the status step needs it whole: the freshest this
/// operator knows (its own last write, until the cache shows it) and its [`status_digest`] (a
/// cached one lacks its conditions' reasons and messages): a pass writes its status only when
/// the new one differs.
#[derive(Clone, Debug, Default)]
pub struct Known {
    pub status: Option<EruStatus>,
    pub digest: Option<u64>,
    /// On the Eru's first pass of the term: the status's summary as the term's first reads found
    /// it, less the recent records (the status step reads only those if the pass commits nothing).
    pub first: Option<EruSummary>,
}

/// The slot-deciding fields of `spec`, as the ledger journals them with each epoch.
pub fn epoch_spec(spec: &EruSpec) -> EpochSpec {
    EpochSpec {
        schedule: spec.schedule.clone(),
        time_zone: spec.time_zone.clone(),
        suspend: spec.suspend,
        // a note changes no slot, but its epoch keeps it for the records of a suspension
        suspend_note: spec.suspend.then(|| spec.suspend_note.clone()).flatten(),
        starting_deadline_seconds: spec.starting_deadline_seconds,
        target: spec.target.key(),
        jitter_seconds: spec.jitter_seconds.unwrap_or(0),
        blackouts: spec.blackouts.clone(),
        dry_run: spec.dry_run,
    }
}

/// What the core reads of a status ([`Shown`]).
pub fn shown(status: &EruStatus) -> Shown {
    Shown {
        phase: status.phase.clone(),
        ledger: Remembered {
            accounted_through: status.accounted_through,
            missed_slots: status.missed_slots,
            last_missed: status.last_missed_time,
            last_success: status.last_successful_time,
            last_failure: status.last_failure_time,
        },
        last_restart: status.last_restart.as_ref().map(|r| ShownRestart {
            slot: r.slot,
            patched_at: r.patched_at,
            in_progress: r.outcome == crate::vocab::Outcome::InProgress.as_str(),
            target: r.target.clone(),
            reverted: r.reverted_at.is_some(),
        }),
        waiting_run: (status.last_manual_run.as_ref())
            .filter(|r| r.outcome == RunOutcome::Waiting.as_str())
            .map(|r| r.token.clone()),
        paused: (status.paused_on_failure.as_ref()).map(|p| Pause {
            since: p.since,
            why: p.why.clone(),
        }),
    }
}

/// A hold as the status shows it (an operator restarted during a hold keeps its start and
/// reason); `None` if its reason is not one this operator knows.
pub fn held_from_status(held: &HeldSlot) -> Option<Held> {
    Some(Held {
        slot: held.slot,
        since: held.since,
        checked_at: held.checked_at,
        deadline: held.deadline,
        reason: crate::vocab::Reason::parse(&held.reason)?,
        note: held.note.clone(),
    })
}

/// Observes `eru` at `now`: what the core decides from, and the status it starts from.
pub async fn observe(context: &EruContext, eru: &CachedEru, now: DateTime<Utc>) -> Result<(Observed, Known)> {
    let known = known(context, eru);
    let created = eru
        .meta()
        .creation_timestamp
        .as_ref()
        .and_then(time_of)
        .unwrap_or(now);
    let (journal, first) = journaled(context, eru, known.status.as_ref(), created, now).await?;
    let known = Known { first, ..known };
    // read once: the current spec's blackouts are compiled with these, and the ledger reads them
    let cluster_blackouts = context.options.blackouts.current();
    let cluster = cluster(context, eru, &known, &journal, (created, &cluster_blackouts));
    // every slot at or before this instant is accounted (the journal's cursor, the status's, or
    // the Eru's creation)
    let since = (journal.ledger.as_ref().and_then(|l| l.accounted_through))
        .or(known.status.as_ref().and_then(|s| s.accounted_through))
        .unwrap_or(created);
    let mut operator = operator(context, eru, &known, &cluster, &journal, (since, now)).await;
    operator.cluster_blackouts = cluster_blackouts;
    let observed = Observed {
        now,
        cluster,
        journal,
        operator,
    };
    Ok((observed, known))
}

/// The status written last, until the cache shows it; else the cached one.
fn known(context: &EruContext, eru: &CachedEru) -> Known {
    let uid = eru.uid().unwrap_or_default();
    match context.ctx.statuses.written::<EruStatus>(
        &uid,
        &eru.resource_version().unwrap_or_default(),
        eru.status_digest(),
    ) {
        Some(written) => Known {
            digest: Some(status_digest(&written)),
            status: Some(written),
            first: None,
        },
        None => Known {
            status: eru.status(),
            digest: eru.status_digest(),
            first: None,
        },
    }
}

/// What the journal holds of the Eru from its cursor (else the status's, else its creation) on:
/// its ledger, epochs, restart in flight, the operator's runs and journal outages. Each read is
/// bounded by what happened since that cursor. On the Eru's first pass of the term, also the
/// rows of its status's summary but the recent records, from the term's first reads.
async fn journaled(
    context: &EruContext,
    eru: &CachedEru,
    known: Option<&EruStatus>,
    created: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<(Journaled, Option<EruSummary>)> {
    let journal = &context.ctx.journal;
    let uid = eru.uid().unwrap_or_default();
    // the open outage before the journaled ones (see `Journal::outage_now`)
    let open_outage = journal.outage_now(now);
    // every read of the pass on one connection (`Reader`), taken at its first read
    let mut reads = journal.reader();
    // on the Eru's first pass of the term, its rows as the term's first reads found them
    let mut first = context.journal_memo.take_first_read(&uid);
    let ledger_row = match &first {
        Some(first) => Some(first.ledger.clone()),
        None => reads.ledger(&uid).await?,
    };
    let ledger = ledger_row.as_ref().map(|row| Ledger {
        accounted_through: row.accounted_through.map(|at| *at),
    });
    let since = (ledger.as_ref().and_then(|l| l.accounted_through))
        .or(known.and_then(|s| s.accounted_through))
        .unwrap_or(created);
    // read from the ledger's cursor, which is `since` when the first read has them
    let epoch_rows = match first.as_mut().and_then(|f| f.take_epochs()) {
        Some(rows) => rows?,
        None => reads.epochs(&uid, since).await?,
    };
    let epochs = epochs_of(epoch_rows)?;
    let open_restart = match &mut first {
        Some(first) => first.open_restart.take().map(|r| *r),
        None => reads.open_restart(&uid).await?,
    };
    let open_restart = open_restart.as_ref().map(open_restart_of);
    let first_open_run = first.as_mut().map(|f| f.open_run.take().map(|r| *r));
    let (run, open_run) = manual_runs(context, eru, &mut reads, first_open_run).await?;
    let pauses = pauses(&mut reads, eru, known, &uid).await?;
    let runs = (reads.runs_since(since).await?.iter())
        .map(|r| (*r.started_at, *r.heartbeat_at))
        .collect();
    let mut outages: Vec<Window> = (reads.outages_since(since).await?.iter())
        .map(|o| (*o.started_at, *o.ended_at))
        .collect();
    // an outage that ended between the two reads is in both: its journaled window, which ends
    // when writes worked again, is the one
    if let Some(open) = open_outage.filter(|o| outages.iter().all(|j| j.0 != o.0)) {
        outages.push(open);
    }
    let journaled = Journaled {
        ledger,
        epochs,
        open_restart,
        open_run,
        run,
        runs,
        outages,
        pauses,
    };
    // what the status step reads of the journal, but the recent records, if the pass commits
    // nothing
    let summary = first.map(|first| EruSummary {
        ledger: ledger_row,
        last_restart: first.last_restart.map(|r| *r),
        recent: Vec::new(),
        last_run: first.last_run.map(|r| *r),
    });
    Ok((journaled, summary))
}

/// The epochs as the core reads them; a spec that does not parse fails the read with its row.
fn epochs_of(rows: Vec<EpochRow>) -> Result<Vec<Epoch>> {
    (rows.into_iter())
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
        .collect()
}

/// The manual run the Eru's annotation asks for, as journaled, and the run in flight: from the
/// term's first read if the pass has it (`first`), else read.
async fn manual_runs(
    context: &EruContext,
    eru: &CachedEru,
    reads: &mut Reader<'_>,
    first: Option<Option<RunRow>>,
) -> Result<(Option<RunSeen>, Option<OpenRun>)> {
    let uid = eru.uid().unwrap_or_default();
    // a run is read only when the Eru asks for one or its status shows one in flight
    let asked = asked(eru).and_then(Result::ok);
    let run = match &asked {
        Some(asked) => (reads.manual_run(&uid, &asked.token).await?).map(|row| match row.outcome {
            RunOutcome::Waiting => RunSeen::Waiting {
                run: manual_run(&row),
                waited: row.reason.clone(),
            },
            _ => RunSeen::Started,
        }),
        None => None,
    };
    // a run in flight is tracked to its end whatever the annotation says now (one indexed read:
    // the partial index of runs in progress), unless this process knows there is none: its last
    // pass read none and no pass committed since (`journal_memo`)
    let open_run = match first {
        Some(open_run) => open_run,
        None if asked.is_none() && context.journal_memo.no_open_run(&uid) => None,
        None => reads.open_manual_run(&uid).await?,
    };
    let open_run = open_run.map(|row| OpenRun {
        run: manual_run(&row),
        patched_at: row.patched_at.map(|at| *at),
    });
    Ok((run, open_run))
}

/// The Eru's pauses on failure, read only for an Eru with a failure policy or a status that
/// shows a pause (no other can hold one); and, when a pause may trip (a policy, none holding),
/// the restarts ended since the latest resume (one indexed read of at most `pauseAfter` rows).
async fn pauses(
    reads: &mut Reader<'_>,
    eru: &CachedEru,
    known: Option<&EruStatus>,
    uid: &str,
) -> Result<Pauses> {
    let shown = known.and_then(|s| s.paused_on_failure.as_ref());
    let policy = eru.spec.failure_policy.as_ref();
    if policy.is_none() && shown.is_none() {
        return Ok(Pauses::default());
    }
    let latest = (reads.latest_pause(uid).await?).map(|row| {
        let pause = Pause {
            since: *row.since,
            why: row.why,
        };
        (pause, row.resumed_at.map(|at| *at))
    });
    let holds = shown.is_some() || latest.as_ref().is_some_and(|(_, resumed)| resumed.is_none());
    let ended = match policy {
        Some(p) if !holds => {
            let after = latest.as_ref().and_then(|(_, resumed)| *resumed);
            (reads
                .ended_restarts(uid, after, i64::from(p.pause_after))
                .await?
                .into_iter())
            .map(|row| Ended {
                slot: *row.slot,
                outcome: row.outcome,
                reason: row.reason,
            })
            .collect()
        }
        _ => Vec::new(),
    };
    Ok(Pauses { latest, ended })
}

/// What the cluster says: the Eru's spec (as an epoch, its schedule or why it cannot be used),
/// what its status shows, and the targets the pass may need (the spec's, the restart's, the
/// epochs'), as cached.
fn cluster(
    context: &EruContext,
    eru: &CachedEru,
    known: &Known,
    journal: &Journaled,
    (created, cluster_blackouts): (DateTime<Utc>, &[Blackout]),
) -> Cluster {
    let namespace = eru.namespace().unwrap_or_default();
    let spec = epoch_spec(&eru.spec);
    let mut keys: Vec<&str> = vec![&spec.target];
    keys.extend(journal.open_restart.iter().map(|o| o.restart.target.as_str()));
    keys.extend(journal.open_run.iter().map(|o| o.run.target.as_str()));
    keys.extend(journal.epochs.iter().map(|e| e.spec.target.as_str()));
    let targets = keys
        .into_iter()
        .filter_map(|key| Some((key.to_string(), context.targets.view(&namespace, key)?)))
        .collect();
    let h_key = eru_seed(&namespace, &eru.name_any());
    let tz = eru.spec.time_zone.as_deref();
    let (schedule, blackouts) = match Schedule::parse_for(&eru.spec.schedule, tz, &h_key) {
        Ok(schedule) => match Blackouts::for_spec(&eru.spec.blackouts, cluster_blackouts, tz, &h_key) {
            Ok(blackouts) => (Ok(schedule), blackouts),
            Err(e) => (Err(e.to_string()), Blackouts::default()),
        },
        Err(e) => (Err(e.to_string()), Blackouts::default()),
    };
    Cluster {
        uid: eru.uid().unwrap_or_default(),
        h_key,
        generation: eru.meta().generation.unwrap_or(1),
        created,
        spec_written_at: eru.spec_written_at(),
        spec,
        rollout_timeout_seconds: eru.spec.rollout_timeout_seconds,
        schedule,
        blackouts,
        invalid: spec_checks(eru, &namespace).err(),
        shown: known.status.as_ref().map(shown),
        targets,
        run: asked(eru),
        pause_after: eru.spec.failure_policy.as_ref().map(|p| p.pause_after),
        resume: (eru.metadata.annotations.as_ref())
            .and_then(|a| a.get(RESUME_ANNOTATION))
            .map(|value| Resume {
                value: value.clone(),
                by: eru.resume_requested_by().map(str::to_string),
            }),
    }
}

/// What CEL cannot check of an Eru in `namespace` (the Eru is Invalid, with an Event): the alert
/// gate's regexp; a silence's namespace matcher (a silence stays in the Eru's namespace); a need
/// query that cannot be confined to the Eru's namespace (never sent).
fn spec_checks(eru: &CachedEru, namespace: &str) -> Result<(), String> {
    if let Some(gates) = &eru.spec.gates {
        check_gates(gates)?;
    }
    crate::eru::silence::check(&eru.spec, namespace)?;
    if let Some(query) = eru.spec.need.as_ref().and_then(|n| n.query.as_deref()) {
        need_query(query, namespace, &eru.spec.target.name)?;
    }
    Ok(())
}

/// What the operator brings: its cluster-wide blackouts and dry run, the Eru's place in the
/// fleet's queue, the slot a gate held before (this process's memory, else the status's: a
/// restarted operator keeps the hold's start and reason), and the gates' answer, asked only when
/// a slot may be due in `(since, now]`.
async fn operator(
    context: &EruContext,
    eru: &CachedEru,
    known: &Known,
    cluster: &Cluster,
    journal: &Journaled,
    (since, now): (DateTime<Utc>, DateTime<Utc>),
) -> Operator {
    let held = context.holds.get(&cluster.uid).or_else(|| {
        (known.status.as_ref())
            .and_then(|s| s.held.as_ref())
            .and_then(held_from_status)
    });
    // the Eru's own gates and the operator's cluster-wide ones (--blackouts-file), then its need
    // conditions once the gates are open: asked only when a slot may be due
    let cluster_gates = context.options.blackouts.gates();
    let asks = eru.spec.gates.is_some() || cluster_gates.is_some() || eru.spec.need.is_some();
    let slot_due = may_be_due(&cluster.schedule, &journal.epochs, &cluster.h_key, since, now);
    // a manual run not started asks the gates too (not the need conditions: it was asked for)
    let run_due = matches!(&cluster.run, Some(Ok(_))) && !matches!(journal.run, Some(RunSeen::Started));
    // an Invalid Eru asks nothing (its slots are skipped spec_invalid)
    let due = asks && cluster.invalid.is_none() && (slot_due || run_due);
    let namespace = eru.namespace().unwrap_or_default();
    let target = (eru.spec.target.kind, eru.spec.target.name.as_str());
    let (own_gates, gatekeeper) = (eru.spec.gates.as_deref(), &context.gatekeeper);
    let gate = match due && (own_gates.is_some() || cluster_gates.is_some()) {
        true => (gatekeeper.check(&namespace, target, own_gates, cluster_gates.as_deref())).await,
        false => Answer::Open,
    };
    let need = match eru.spec.need.as_deref() {
        Some(need) if asks && slot_due && gate == Answer::Open => {
            gatekeeper.need(&namespace, target, need, now).await
        }
        _ => Need::Needed,
    };
    Operator {
        cluster_blackouts: Default::default(),
        dry_run_all: context.options.dry_run,
        queued: context.fleet.waiting(&cluster.uid),
        gate,
        held,
        need,
        gate_poll: chrono::Duration::from_std(context.options.gates.poll)
            .unwrap_or_else(|_| chrono::Duration::seconds(hold::DEFAULT_POLL_SECONDS)),
    }
}
