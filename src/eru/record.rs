//! Step 3 of the Eru pass: the decision's transitions and records journaled in one transaction,
//! then counted (metrics) and announced (Events) from what was journaled — in this one place, so a
//! replay that journals nothing new counts and announces nothing.

use chrono::{DateTime, Utc};
use kube::runtime::events::EventType;

use super::{
    CachedEru, KIND,
    context::EruContext,
    ledger::{Reason, SlotRecord},
    machine::{EruDecision, EruRecord, RestartOutcome},
};
use crate::{
    Result,
    journal::{
        Appended, Entry, FailedAttempt, FinishedRestart, LedgerSeed, NewEpoch, NewRestart, NewSlot,
        ObjectKey, PatchedRestart, SlotResult,
    },
    runtime::object_key,
};

pub use super::schedule::slot_text;

/// Journals `decision` at `now`, then counts and announces what was new. `patched_at` is when the
/// restart being rolled out landed, for the duration of a finished one.
pub async fn journal(
    context: &EruContext,
    eru: &CachedEru,
    decision: &EruDecision,
    now: DateTime<Utc>,
    patched_at: Option<DateTime<Utc>>,
) -> Result<Appended> {
    let ctx = &context.ctx;
    let appended = ctx
        .journal(
            KIND,
            eru,
            &decision.transitions,
            entry(eru, &decision.records, now),
        )
        .await?;
    let new = appended.slots
        + appended.restarts_decided
        + appended.restarts_patched
        + appended.attempts
        + appended.restarts_finished;
    if new > 0 {
        count(context, eru, &decision.records, now, patched_at);
        announce(context, eru, &decision.records);
    }
    ctx.announce(KIND, eru, &decision.transitions, &appended);
    Ok(appended)
}

fn slot_row(object: &ObjectKey, r: &SlotRecord, now: DateTime<Utc>) -> NewSlot {
    NewSlot {
        object: object.clone(),
        target: r.target.clone(),
        slot: r.first,
        last_slot: r.last,
        slot_count: r.count,
        result: r.reason.result(),
        reason: r.reason.as_str(),
        window: r.window,
        note: r.note.clone(),
        evaluated_at: now,
    }
}

/// The journal rows for `records`.
pub fn entry(eru: &CachedEru, records: &[EruRecord], now: DateTime<Utc>) -> Entry {
    let object = object_key(KIND, eru);
    let uid = &object.uid;
    let mut entry = Entry::default();
    for record in records {
        match record {
            EruRecord::Seed(seed) => {
                entry.seed = Some(LedgerSeed {
                    object: object.clone(),
                    accounted_through: seed.accounted_through,
                    missed_slots: seed.missed_slots,
                    last_missed: seed.last_missed,
                    last_success: seed.last_success,
                    last_failure: seed.last_failure,
                })
            }
            EruRecord::Epoch(epoch) => entry.epochs.push(NewEpoch {
                uid: uid.clone(),
                generation: epoch.generation,
                effective_from: epoch.from,
                observed_at: now,
                spec: serde_json::to_value(&epoch.spec).unwrap_or_default(),
            }),
            EruRecord::Advance(through) => entry.advances.push((object.clone(), *through)),
            EruRecord::Slots(slots) => entry
                .slots
                .extend(slots.iter().map(|r| slot_row(&object, r, now))),
            EruRecord::Decided {
                slot,
                deadline,
                target,
            } => entry.restarts_decided.push(NewRestart {
                object: object.clone(),
                target: target.clone(),
                slot: *slot,
                decided_at: now,
                deadline_at: *deadline,
            }),
            EruRecord::Patched { slot, at, target } => {
                entry.restarts_patched.push(PatchedRestart {
                    uid: uid.clone(),
                    slot: *slot,
                    patched_at: *at,
                });
                entry.slots.push(NewSlot {
                    object: object.clone(),
                    target: target.clone(),
                    slot: *slot,
                    last_slot: *slot,
                    slot_count: 1,
                    result: SlotResult::Fired,
                    reason: "scheduled",
                    window: None,
                    note: None,
                    evaluated_at: now,
                });
            }
            EruRecord::Attempt {
                slot,
                at,
                error,
                retry_at,
            } => entry.attempts.push(FailedAttempt {
                uid: uid.clone(),
                slot: *slot,
                at: *at,
                error: error.clone(),
                next_attempt_at: *retry_at,
            }),
            EruRecord::Finished {
                slot,
                outcome,
                finished_at,
                reason,
            } => entry.restarts_finished.push(FinishedRestart {
                uid: uid.clone(),
                slot: *slot,
                finished_at: finished_at.unwrap_or(now),
                outcome: outcome.as_str(),
                reason: reason.clone(),
            }),
            EruRecord::DryRun {
                slot,
                deadline,
                target,
                patch,
            } => {
                entry.restarts_decided.push(NewRestart {
                    object: object.clone(),
                    target: target.clone(),
                    slot: *slot,
                    decided_at: now,
                    deadline_at: *deadline,
                });
                entry.restarts_finished.push(FinishedRestart {
                    uid: uid.clone(),
                    slot: *slot,
                    finished_at: now,
                    outcome: RestartOutcome::DryRun.as_str(),
                    reason: Some(patch.clone()),
                });
                let record = SlotRecord::one(*slot, Reason::DryRun, None, target).noted(patch.clone());
                entry.slots.push(slot_row(&object, &record, now));
            }
            EruRecord::GaveUp { slot, reason, record } => {
                entry.restarts_finished.push(FinishedRestart {
                    uid: uid.clone(),
                    slot: *slot,
                    finished_at: now,
                    outcome: RestartOutcome::Abandoned.as_str(),
                    reason: Some(reason.clone()),
                });
                entry.slots.push(slot_row(&object, record, now));
            }
        }
    }
    entry
}

/// Counts journaled slots, landed patches and finished restarts.
fn count(
    context: &EruContext,
    eru: &CachedEru,
    records: &[EruRecord],
    now: DateTime<Utc>,
    patched_at: Option<DateTime<Utc>>,
) {
    let metrics = &context.metrics;
    let namespace = eru.metadata.namespace.as_deref().unwrap_or_default();
    let name = eru.metadata.name.as_deref().unwrap_or_default();
    let slots = |r: &SlotRecord| {
        let (result, reason) = (r.reason.result().as_str(), r.reason.as_str());
        metrics.add_slots(namespace, name, result, reason, r.count as u64);
    };
    let restarts = |outcome: RestartOutcome| metrics.add_restart(namespace, name, outcome);
    for record in records {
        match record {
            EruRecord::Slots(records) => records.iter().for_each(slots),
            EruRecord::Patched { slot, at, .. } => {
                metrics.add_slots(namespace, name, "fired", "scheduled", 1);
                metrics
                    .fire_lateness
                    .observe((*at - *slot).as_seconds_f64().max(0.0));
            }
            EruRecord::Finished {
                outcome, finished_at, ..
            } => {
                restarts(*outcome);
                if *outcome != RestartOutcome::Abandoned
                    && let Some(patched_at) = patched_at
                {
                    let seconds = (finished_at.unwrap_or(now) - patched_at).as_seconds_f64();
                    metrics.restart_duration.observe(seconds.max(0.0));
                }
            }
            EruRecord::GaveUp { record, .. } => {
                restarts(RestartOutcome::Abandoned);
                slots(record);
            }
            EruRecord::DryRun { .. } => {
                restarts(RestartOutcome::DryRun);
                metrics.add_slots(namespace, name, "skipped", Reason::DryRun.as_str(), 1);
            }
            _ => {}
        }
    }
}

/// Tells the user how journaled restarts went (an Event each).
fn announce(context: &EruContext, eru: &CachedEru, records: &[EruRecord]) {
    for record in records {
        let (type_, why, action, note) = match record {
            EruRecord::Finished {
                slot,
                outcome,
                reason,
                ..
            } => {
                let (type_, why) = match outcome {
                    RestartOutcome::Succeeded => (EventType::Normal, "RestartSucceeded"),
                    RestartOutcome::Failed => (EventType::Warning, "RestartFailed"),
                    RestartOutcome::Abandoned => (EventType::Warning, "RestartAbandoned"),
                    RestartOutcome::DryRun => (EventType::Normal, "DryRun"),
                };
                let mut note = format!("restart of slot {} {}", slot_text(*slot), outcome.as_str());
                if let Some(reason) = reason {
                    note.push_str(&format!(": {reason}"));
                }
                (type_, why, "Restart", note)
            }
            EruRecord::DryRun { slot, patch, .. } => (
                EventType::Normal,
                "DryRun",
                "Restart",
                format!("slot {}: {patch}", slot_text(*slot)),
            ),
            EruRecord::GaveUp { slot, reason, .. } => (
                EventType::Warning,
                "RestartAbandoned",
                "Restart",
                format!("restart of slot {} abandoned: {reason}", slot_text(*slot)),
            ),
            // the same note for every try of a slot: the recorder counts them as one series
            EruRecord::Attempt { slot, error, .. } => (
                EventType::Warning,
                "RestartPatchFailed",
                "Restart",
                format!("restart patch of slot {} failed: {error}", slot_text(*slot)),
            ),
            _ => continue,
        };
        context.ctx.publish(eru, type_, why, action, Some(note))
    }
}
