//! Step 3 of the Eru pass: the decision's transitions and records journaled in one transaction,
//! then counted (metrics) and announced (Events) from what was journaled — in this one place, so a
//! replay that journals nothing new counts and announces nothing.

use chrono::{DateTime, SecondsFormat, Utc};
use kube::runtime::events::EventType;

use super::{
    Eru, KIND,
    context::EruContext,
    machine::{EruDecision, EruRecord, RestartOutcome},
};
use crate::{
    Result,
    journal::{Entry, FinishedRestart, NewRestart, NewSlot, SlotResult},
    runtime::object_key,
};

/// A slot as users read it (RFC 3339, UTC, seconds).
pub fn slot_text(slot: DateTime<Utc>) -> String {
    slot.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Journals `decision` at `now`, then counts and announces what was new. `started_at` is when the
/// restart in flight (if any) started, for the duration of a finished one.
pub async fn journal(
    context: &EruContext,
    eru: &Eru,
    decision: &EruDecision,
    now: DateTime<Utc>,
    started_at: DateTime<Utc>,
) -> Result<()> {
    let ctx = &context.ctx;
    let appended = ctx
        .journal(
            KIND,
            eru,
            &decision.transitions,
            entry(eru, &decision.records, now),
        )
        .await?;
    if appended.slots > 0 || appended.restarts_finished > 0 {
        count(context, eru, &decision.records, now, started_at);
    }
    if appended.restarts_finished > 0 {
        announce_finished(context, eru, &decision.records).await;
    }
    ctx.announce(KIND, eru, &decision.transitions, &appended).await;
    Ok(())
}

/// The journal rows for `records`.
pub fn entry(eru: &Eru, records: &[EruRecord], now: DateTime<Utc>) -> Entry {
    let object = object_key(KIND, eru);
    let target = eru.spec.target.name.clone();
    let mut entry = Entry::default();
    for record in records {
        match record {
            EruRecord::Slots(slots) => entry.slots.extend(slots.iter().map(|r| NewSlot {
                object: object.clone(),
                target: target.clone(),
                slot: r.first,
                last_slot: r.last,
                slot_count: r.count,
                result: r.reason.result(),
                reason: r.reason.as_str(),
                window: r.window,
                evaluated_at: now,
            })),
            EruRecord::Fired { slot } => {
                entry.slots.push(NewSlot {
                    object: object.clone(),
                    target: target.clone(),
                    slot: *slot,
                    last_slot: *slot,
                    slot_count: 1,
                    result: SlotResult::Fired,
                    reason: "scheduled",
                    window: None,
                    evaluated_at: now,
                });
                entry.restarts_started.push(NewRestart {
                    object: object.clone(),
                    target: target.clone(),
                    slot: *slot,
                    started_at: now,
                });
            }
            EruRecord::Finished {
                slot,
                outcome,
                finished_at,
                reason,
            } => entry.restarts_finished.push(FinishedRestart {
                uid: object.uid.clone(),
                slot: *slot,
                finished_at: finished_at.unwrap_or(now),
                outcome: outcome.as_str(),
                reason: reason.clone(),
            }),
        }
    }
    entry
}

/// Counts journaled slots and finished restarts.
fn count(
    context: &EruContext,
    eru: &Eru,
    records: &[EruRecord],
    now: DateTime<Utc>,
    started_at: DateTime<Utc>,
) {
    let metrics = &context.metrics;
    let namespace = eru.metadata.namespace.as_deref().unwrap_or_default();
    let name = eru.metadata.name.as_deref().unwrap_or_default();
    for record in records {
        match record {
            EruRecord::Slots(slots) => {
                for r in slots {
                    let labels = [namespace, name, r.reason.result().as_str(), r.reason.as_str()];
                    metrics.slots.with_label_values(&labels).inc_by(r.count as u64);
                }
            }
            EruRecord::Fired { .. } => {
                metrics
                    .slots
                    .with_label_values(&[namespace, name, "fired", "scheduled"])
                    .inc();
            }
            EruRecord::Finished {
                outcome, finished_at, ..
            } => {
                metrics
                    .restarts
                    .with_label_values(&[namespace, name, outcome.as_str()])
                    .inc();
                if *outcome != RestartOutcome::Abandoned {
                    let seconds = (finished_at.unwrap_or(now) - started_at).as_seconds_f64();
                    metrics.restart_duration.observe(seconds.max(0.0));
                }
            }
        }
    }
}

/// Tells the user how journaled restarts ended (an Event each).
async fn announce_finished(context: &EruContext, eru: &Eru, records: &[EruRecord]) {
    for record in records {
        let EruRecord::Finished {
            slot,
            outcome,
            reason,
            ..
        } = record
        else {
            continue;
        };
        let (type_, why) = match outcome {
            RestartOutcome::Succeeded => (EventType::Normal, "RestartSucceeded"),
            RestartOutcome::Failed => (EventType::Warning, "RestartFailed"),
            RestartOutcome::Abandoned => (EventType::Warning, "RestartAbandoned"),
        };
        let mut note = format!("restart of slot {} {}", slot_text(*slot), outcome.as_str());
        if let Some(reason) = reason {
            note.push_str(&format!(": {reason}"));
        }
        context.ctx.publish(eru, type_, why, "Restart", Some(note)).await
    }
}
