//! Step 3 of the Eru pass: what the plan decided, journaled in one transaction, then counted
//! (metrics) and announced (Events) from what was journaled — in this one place, so a replay that
//! journals nothing new counts and announces nothing. Deleted Erus' records take the same path
//! ([`commit_records`]).

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::{Resource, runtime::events::EventType};

use super::context::EruContext;
use crate::eru::{
    CachedEru, Eru, KIND,
    core::{
        hold::Held,
        ledger::{Reason, SlotRecord},
        messages::{EruAction, EruDecision, EruRecord},
        pause::RESUME_ANNOTATION,
        run::RunRecord,
    },
};
use crate::vocab::{Outcome, RunOutcome};
use crate::{
    Result,
    journal::{
        Appended, Entry, FailedAttempt, FinishedRestart, LedgerSeed, NewEpoch, NewRestart, NewSlot,
        ObjectKey, PatchedRestart, PauseChange, RevertedRestart, RunChange, SilenceChange,
    },
    runtime::object_key,
};

pub use crate::eru::core::schedule::slot_text;

/// Journals the transitions and records of `decision` for `eru` at `now`, then counts and
/// announces what was new.
pub async fn commit(
    context: &EruContext,
    eru: &CachedEru,
    decision: &EruDecision,
    now: DateTime<Utc>,
) -> Result<Appended> {
    let ctx = &context.ctx;
    let object = object_key(KIND, eru);
    let mut entry = entry(&object, &decision.records, now);
    // an Eru without labels has none (not the deleted Eru's unknown ones), and no copy per pass
    static NO_LABELS: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
    let labels = eru.metadata.labels.as_ref().unwrap_or(&NO_LABELS);
    let held = decision.actions.iter().find_map(|a| match a {
        EruAction::Hold(held) => Some(held),
        _ => None,
    });
    let of = (decision.records.as_slice(), held);
    notices(context, &mut entry, &object, Some(labels), of, now);
    gap_notices(context, &mut entry, &object, labels, &decision.actions, now);
    let notifies = !entry.notices.is_empty();
    let appended = ctx.journal(KIND, eru, &decision.transitions, entry).await?;
    if notifies {
        wake_delivery(context);
    }
    if appended.records() > 0 {
        count(context, &object, &decision.records, now);
        announce(context, eru.object_ref(&()), &decision.records);
    }
    ctx.announce(KIND, eru, &decision.transitions, &appended);
    Ok(appended)
}

/// Journals `records` of the Eru `object` — one that left the cache (deleted) — then counts and
/// announces what was new, like [`commit`].
pub async fn commit_records(
    context: &EruContext,
    object: &ObjectKey,
    records: &[EruRecord],
    now: DateTime<Utc>,
) -> Result<Appended> {
    let mut entry = entry(object, records, now);
    notices(context, &mut entry, object, None, (records, None), now);
    let appended = context.ctx.append(&entry).await?;
    if !entry.notices.is_empty() {
        wake_delivery(context);
    }
    if appended.records() > 0 {
        count(context, object, records, now);
        let reference = ObjectReference {
            api_version: Some(Eru::api_version(&()).into_owned()),
            kind: Some(KIND.into()),
            namespace: Some(object.namespace.clone()),
            name: Some(object.name.clone()),
            uid: Some(object.uid.clone()),
            ..ObjectReference::default()
        };
        announce(context, reference, records);
    }
    Ok(appended)
}

/// The notifications the routes pick for `records` (none without `--notifications-file`): into the
/// outbox with the records, each only if its record is new.
fn notices(
    context: &EruContext,
    entry: &mut Entry,
    object: &ObjectKey,
    labels: Option<&std::collections::BTreeMap<String, String>>,
    of: (&[EruRecord], Option<&Held>),
    now: DateTime<Utc>,
) {
    if let Some(n) = &context.options.notifications {
        entry.notices = n.notifier.notices(object, labels, of, now);
    }
}

/// The notifications of a window whose slots cannot be accounted (the ledger gap the plan
/// reports), if the routes pick one.
fn gap_notices(
    context: &EruContext,
    entry: &mut Entry,
    object: &ObjectKey,
    labels: &std::collections::BTreeMap<String, String>,
    actions: &[EruAction],
    now: DateTime<Utc>,
) {
    let Some(n) = &context.options.notifications else {
        return;
    };
    for action in actions {
        if let EruAction::ReportGap { from, to } = action {
            let note = super::act::gap_note(*from, *to);
            (entry.notices).extend(
                n.notifier
                    .gap_notices(object, Some(labels), (*from, *to), &note, now),
            );
        }
    }
}

/// Tells the delivery task a commit may have added notifications (they are due now; one that
/// was not new wakes a lane that finds nothing to send).
fn wake_delivery(context: &EruContext) {
    if let Some(n) = &context.options.notifications {
        n.wake.notify_one();
    }
}

fn slot_row(object: &ObjectKey, r: &SlotRecord, now: DateTime<Utc>) -> NewSlot {
    NewSlot {
        object: object.clone(),
        target: r.target.clone(),
        slot: r.first,
        last_slot: r.last,
        slot_count: r.count,
        result: r.reason.result(),
        reason: r.reason,
        window: r.window,
        note: r.note.clone(),
        evaluated_at: now,
    }
}

/// The journal rows for `records` of the Eru `object`.
pub fn entry(object: &ObjectKey, records: &[EruRecord], now: DateTime<Utc>) -> Entry {
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
                uid: object.uid.clone(),
                generation: epoch.generation,
                effective_from: epoch.from,
                observed_at: now,
                spec: serde_json::to_value(&epoch.spec).unwrap_or_default(),
            }),
            EruRecord::Advance(through) => entry.advances.push((object.clone(), *through)),
            EruRecord::Slots(slots) => entry.slots.extend(slots.iter().map(|r| slot_row(object, r, now))),
            EruRecord::Paused(pause) => entry.pauses.push(PauseChange::Paused {
                object: object.clone(),
                since: pause.since,
                why: pause.why.clone(),
            }),
            EruRecord::Resumed { since, at, by } => entry.pauses.push(PauseChange::Resumed {
                uid: object.uid.clone(),
                since: *since,
                at: *at,
                by: by.clone(),
            }),
            EruRecord::Run(_)
            | EruRecord::Silenced { .. }
            | EruRecord::SilenceExpired { .. }
            | EruRecord::Reverted { .. } => add_aside(&mut entry, object, record, now),
            restart => add_restart(&mut entry, object, restart, now),
        }
    }
    entry
}

/// The rows of a record about a restart: decided, patched (its slot fired), a failed patch, its
/// end, a dry run's, a restart given up.
fn add_restart(entry: &mut Entry, object: &ObjectKey, record: &EruRecord, now: DateTime<Utc>) {
    let decided = |slot: DateTime<Utc>, deadline: DateTime<Utc>, target: &str| NewRestart {
        object: object.clone(),
        target: target.to_string(),
        slot,
        decided_at: now,
        deadline_at: deadline,
    };
    let finished =
        |slot: DateTime<Utc>, at: DateTime<Utc>, outcome: Outcome, reason: Option<String>| FinishedRestart {
            uid: object.uid.clone(),
            slot,
            finished_at: at,
            outcome,
            reason,
        };
    match record {
        EruRecord::Decided {
            slot,
            deadline,
            target,
        } => entry.restarts_decided.push(decided(*slot, *deadline, target)),
        EruRecord::Patched {
            slot,
            at,
            target,
            generation,
        } => {
            entry.restarts_patched.push(PatchedRestart {
                uid: object.uid.clone(),
                slot: *slot,
                patched_at: *at,
                landed_generation: *generation,
            });
            let fired = SlotRecord::one(*slot, Reason::Scheduled, None, target);
            entry.slots.push(slot_row(object, &fired, now));
        }
        EruRecord::Attempt {
            slot,
            at,
            error,
            retry_at,
        } => entry.attempts.push(FailedAttempt {
            uid: object.uid.clone(),
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
            ..
        } => (entry.restarts_finished).push(finished(
            *slot,
            finished_at.unwrap_or(now),
            *outcome,
            reason.clone(),
        )),
        EruRecord::DryRun {
            slot,
            deadline,
            target,
            patch,
        } => {
            entry.restarts_decided.push(decided(*slot, *deadline, target));
            (entry.restarts_finished).push(finished(*slot, now, Outcome::DryRun, Some(patch.clone())));
            let record = SlotRecord::one(*slot, Reason::DryRun, None, target).noted(patch.clone());
            entry.slots.push(slot_row(object, &record, now));
        }
        EruRecord::GaveUp { slot, reason, record } => {
            (entry.restarts_finished).push(finished(*slot, now, Outcome::Abandoned, Some(reason.clone())));
            entry.slots.push(slot_row(object, record, now));
        }
        _ => {}
    }
}

/// The rows of a record beside a restart's own: a manual run's, a silence's, a revert's.
fn add_aside(entry: &mut Entry, object: &ObjectKey, record: &EruRecord, now: DateTime<Utc>) {
    match record {
        EruRecord::Run(run) => entry.runs.push(run_change(object, run, now)),
        EruRecord::Silenced { slot, id, until } => entry.silences.push(SilenceChange::Created {
            uid: object.uid.clone(),
            slot: *slot,
            id: id.clone(),
            until: *until,
        }),
        EruRecord::SilenceExpired { slot, at } => entry.silences.push(SilenceChange::Expired {
            uid: object.uid.clone(),
            slot: *slot,
            at: *at,
        }),
        EruRecord::Reverted { slot, revert, at } => entry.reverts.push(RevertedRestart {
            uid: object.uid.clone(),
            slot: *slot,
            by: revert.by.clone(),
            at: *at,
        }),
        _ => {}
    }
}

/// The journal's change for a manual run's record.
fn run_change(object: &ObjectKey, record: &RunRecord, now: DateTime<Utc>) -> RunChange {
    match record {
        RunRecord::Requested { run, waits } => RunChange::Requested {
            object: object.clone(),
            target: run.target.clone(),
            token: run.token.clone(),
            requested_by: run.requested_by.clone(),
            requested_at: run.requested_at,
            deadline_at: run.deadline,
            reason: waits.clone(),
        },
        RunRecord::Decided { token } => RunChange::Decided {
            uid: object.uid.clone(),
            token: token.clone(),
            at: now,
        },
        RunRecord::Patched { token, at } => RunChange::Patched {
            uid: object.uid.clone(),
            token: token.clone(),
            at: *at,
        },
        RunRecord::Attempt {
            token,
            at,
            error,
            retry_at,
        } => RunChange::Attempt {
            uid: object.uid.clone(),
            token: token.clone(),
            at: *at,
            error: error.clone(),
            next_attempt_at: *retry_at,
        },
        RunRecord::Withdrawn { token, reason } => RunChange::Withdrawn {
            uid: object.uid.clone(),
            token: token.clone(),
            at: now,
            reason: reason.clone(),
        },
        RunRecord::Ended {
            token,
            outcome,
            at,
            reason,
        } => RunChange::Ended {
            uid: object.uid.clone(),
            token: token.clone(),
            at: at.unwrap_or(now),
            outcome: *outcome,
            reason: reason.clone(),
        },
    }
}

/// Counts journaled slots, landed patches and finished restarts.
fn count(context: &EruContext, object: &ObjectKey, records: &[EruRecord], now: DateTime<Utc>) {
    let metrics = &context.metrics;
    let (namespace, name) = (object.namespace.as_str(), object.name.as_str());
    let slots = |r: &SlotRecord| metrics.add_slots(namespace, name, r.reason, r.count as u64);
    let restarts = |outcome: Outcome| metrics.add_restart(namespace, name, outcome);
    for record in records {
        match record {
            EruRecord::Slots(records) => records.iter().for_each(slots),
            EruRecord::Patched { slot, at, .. } => {
                metrics.add_slots(namespace, name, Reason::Scheduled, 1);
                metrics
                    .fire_lateness
                    .observe((*at - *slot).as_seconds_f64().max(0.0));
            }
            EruRecord::Finished {
                outcome,
                finished_at,
                patched_at,
                ..
            } => {
                restarts(*outcome);
                if *outcome != Outcome::Abandoned {
                    let seconds = (finished_at.unwrap_or(now) - *patched_at).as_seconds_f64();
                    metrics.restart_duration.observe(seconds.max(0.0));
                }
            }
            EruRecord::GaveUp { record, .. } => {
                restarts(Outcome::Abandoned);
                slots(record);
            }
            EruRecord::DryRun { .. } => {
                restarts(Outcome::DryRun);
                metrics.add_slots(namespace, name, Reason::DryRun, 1);
            }
            EruRecord::Run(RunRecord::Ended { outcome, .. }) => metrics.add_manual_run(*outcome),
            EruRecord::Run(RunRecord::Withdrawn { .. }) => metrics.add_manual_run(RunOutcome::Refused),
            EruRecord::Reverted { .. } => metrics.reverted.inc(),
            _ => {}
        }
    }
}

/// Where the Event of a reverted restart sends the reader: the Argo CD and Flux settings that
/// stop it.
const GITOPS_DOC: &str = "https://github.com/meitu/eru-operator/blob/main/docs/gitops.md";

/// The Event of a manual run's record: when it waits, and how it ended.
fn run_event(record: &RunRecord) -> Option<(EventType, &'static str, &'static str, String)> {
    Some(match record {
        RunRecord::Requested {
            run,
            waits: Some(why),
        } => (
            EventType::Normal,
            "ManualRunWaiting",
            "Restart",
            format!("{} waits until {}: {why}", run.name(), slot_text(run.deadline)),
        ),
        RunRecord::Ended {
            token,
            outcome,
            reason,
            ..
        } => {
            let (type_, why) = match outcome {
                RunOutcome::Succeeded => (EventType::Normal, "ManualRunSucceeded"),
                RunOutcome::DryRun => (EventType::Normal, "DryRun"),
                RunOutcome::Failed => (EventType::Warning, "ManualRunFailed"),
                RunOutcome::Abandoned => (EventType::Warning, "ManualRunAbandoned"),
                _ => (EventType::Warning, "ManualRunRefused"),
            };
            let reason = reason.as_deref().map_or(String::new(), |r| format!(": {r}"));
            let note = format!("manual run {token:?} {}{reason}", outcome.as_str());
            (type_, why, "Restart", note)
        }
        RunRecord::Withdrawn { token, reason } => (
            EventType::Normal,
            "ManualRunRefused",
            "Restart",
            format!("manual run {token:?} {}: {reason}", RunOutcome::Refused.as_str()),
        ),
        _ => return None,
    })
}

/// The Event of a pause on failure, or of its resume.
fn pause_event(record: &EruRecord) -> Option<(EventType, &'static str, &'static str, String)> {
    Some(match record {
        EruRecord::Paused(pause) => (
            EventType::Warning,
            "PausedOnFailure",
            "Pause",
            format!(
                "paused on failure: {}. Its slots are skipped until someone resumes it: kubectl eru resume \
                 (sets {RESUME_ANNOTATION} to {})",
                pause.why,
                slot_text(pause.since)
            ),
        ),
        EruRecord::Resumed { since, by, .. } => (
            EventType::Normal,
            "Resumed",
            "Resume",
            format!(
                "the pause on failure since {} was resumed{}",
                slot_text(*since),
                by.as_deref().map(|b| format!(" by {b}")).unwrap_or_default()
            ),
        ),
        _ => return None,
    })
}

/// Tells the user how journaled restarts went (an Event each about the Eru `reference` names).
fn announce(context: &EruContext, reference: ObjectReference, records: &[EruRecord]) {
    for record in records {
        let (type_, why, action, note) = match record {
            EruRecord::Finished {
                slot,
                outcome,
                reason,
                ..
            } => {
                let (type_, why) = match outcome {
                    Outcome::Succeeded => (EventType::Normal, "RestartSucceeded"),
                    Outcome::Failed => (EventType::Warning, "RestartFailed"),
                    Outcome::Abandoned => (EventType::Warning, "RestartAbandoned"),
                    Outcome::DryRun => (EventType::Normal, "DryRun"),
                    // never finished in progress
                    Outcome::InProgress => (EventType::Normal, "RestartInProgress"),
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
            EruRecord::Reverted { slot, revert, .. } => (
                EventType::Warning,
                "RestartReverted",
                "Restart",
                format!(
                    "{}; the pods rolled again. To keep a GitOps tool from undoing restarts, see {GITOPS_DOC}",
                    revert.text(*slot)
                ),
            ),
            EruRecord::Run(run) => match run_event(run) {
                Some(event) => event,
                None => continue,
            },
            EruRecord::Paused(..) | EruRecord::Resumed { .. } => match pause_event(record) {
                Some(event) => event,
                None => continue,
            },
            _ => continue,
        };
        context
            .ctx
            .publish_to(reference.clone(), type_, why, action, Some(note))
    }
}
