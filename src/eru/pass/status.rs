//! Step 5 of the Eru pass, pure: the status, a projection of the machine, the observation and the
//! journal. The ledger's cursor and totals never go backwards: what the status already shows is
//! kept where the journal knows less (a lost or replaced journal).

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;

use super::observe::Known;
use crate::eru::{
    CachedEru, EruStatus, HeldSlot, LastManualRun, LastRestart, PausedOnFailure, RecentSlot, UpcomingSlot,
    core::{hold::Held, machine::State, plan::Plan, schedule::slot_text},
};
use crate::{
    conditions::condition,
    journal::{EruSummary, RestartRow, RunRow, SlotRecordRow, Ts},
    machine::Phase,
};

/// How many slots to come the status shows (`status.upcoming`).
const UPCOMING: usize = 5;

/// The status to write: phase and slot from the machine, conditions from what was observed and
/// the restart patch's result, history fields from the journal's summary (`None`: the journal's
/// rows of the Eru are as the known status shows them, see `journal_memo`).
pub fn status(
    eru: &CachedEru,
    plan: &Plan,
    known: &Known,
    summary: Option<&EruSummary>,
    capped: bool,
) -> EruStatus {
    static UNCHANGED: EruSummary = EruSummary {
        ledger: None,
        last_restart: None,
        recent: Vec::new(),
        last_run: None,
    };
    let recent = match summary {
        Some(summary) => summary.recent.iter().map(recent_slot).collect(),
        None => (known.status.as_ref()).map_or_else(Vec::new, |s| s.recent.clone()),
    };
    let summary = summary.unwrap_or(&UNCHANGED);
    let known = known.status.as_ref();
    let journaled = summary.last_restart.as_ref().map(last_restart);
    let last_restart = newest(journaled, known.and_then(|s| s.last_restart.clone()), |r| r.slot);
    let ledger = summary.ledger.as_ref();
    let time = |column: Option<&Ts>| column.map(|at| at.0);
    let latest = |journal: Option<DateTime<Utc>>, shown: Option<DateTime<Utc>>| journal.max(shown);
    EruStatus {
        phase: Some(plan.state.phase().to_string()),
        conditions: conditions(eru, plan, known, capped),
        observed_generation: eru.metadata.generation,
        current_slot: plan.state.slot(),
        accounted_through: latest(
            time(ledger.and_then(|l| l.accounted_through.as_ref())),
            known.and_then(|s| s.accounted_through),
        ),
        last_schedule_time: last_restart.as_ref().map(|r| r.slot),
        last_successful_time: latest(
            time(ledger.and_then(|l| l.last_success.as_ref())),
            known.and_then(|s| s.last_successful_time),
        ),
        last_failure_time: latest(
            time(ledger.and_then(|l| l.last_failure.as_ref())),
            known.and_then(|s| s.last_failure_time),
        ),
        next_schedule_time: plan.next_restart(),
        last_restart,
        missed_slots: ledger
            .map_or(0, |l| l.missed_slots)
            .max(known.map_or(0, |s| s.missed_slots)),
        last_missed_time: latest(
            time(ledger.and_then(|l| l.last_missed.as_ref())),
            known.and_then(|s| s.last_missed_time),
        ),
        held: plan.held.as_ref().map(held_status),
        recent,
        upcoming: plan
            .upcoming(UPCOMING)
            .into_iter()
            .map(|u| UpcomingSlot {
                slot: u.slot,
                restart_at: u.restart_at,
                blackout: u.blackout,
            })
            .collect(),
        // the journal's, else (a replaced journal) what the status showed
        last_manual_run: (summary.last_run.as_ref().map(last_manual_run))
            .or_else(|| known.and_then(|s| s.last_manual_run.clone())),
        paused_on_failure: plan.paused().map(|p| PausedOnFailure {
            since: p.since,
            why: p.why.clone(),
        }),
    }
}

/// A journaled manual run as the status shows it.
fn last_manual_run(row: &RunRow) -> LastManualRun {
    LastManualRun {
        token: row.token.clone(),
        requested_by: row.requested_by.clone(),
        requested_at: *row.requested_at,
        outcome: row.outcome.as_str().to_string(),
        patched_at: row.patched_at.as_ref().map(|at| at.0),
        finished_at: row.finished_at.as_ref().map(|at| at.0),
        reason: row.reason.clone(),
    }
}

/// A journaled slot record as the status shows it.
fn recent_slot(row: &SlotRecordRow) -> RecentSlot {
    let r = &row.record;
    RecentSlot {
        slot: *r.slot,
        last_slot: (r.slot_count > 1).then_some(*r.last_slot),
        slots: r.slot_count,
        result: r.result.as_str().to_string(),
        reason: (r.reason.and_then(crate::vocab::Reason::shown)).map(|reason| reason.as_str().to_string()),
        outcome: row.restart_outcome.map(|o| o.as_str().to_string()),
        recorded_at: *r.evaluated_at,
        finished_at: row.restart_finished_at.as_ref().map(|at| at.0),
        note: r.note.clone(),
    }
}

/// `Ready`, `ScheduleValid`, `TargetFound`, and `Queued` when the fleet is capped, each keeping
/// its last transition time from `known`'s.
fn conditions(eru: &CachedEru, plan: &Plan, known: Option<&EruStatus>, capped: bool) -> Vec<Condition> {
    let observed = plan.observed();
    let previous = known.map(|s| s.conditions.as_slice()).unwrap_or_default();
    let target_found = observed.target().is_some();
    let (valid, schedule_message) = match (&observed.cluster.schedule, &observed.cluster.invalid) {
        (Err(e), _) | (Ok(_), Some(e)) => (false, e.clone()),
        (Ok(_), None) => (true, format!("schedule '{}' is valid", eru.spec.schedule)),
    };
    let target_message = format!("{} {}", eru.spec.target.kind.as_str(), eru.spec.target.name);
    let (ready, ready_reason, ready_message) = ready(eru, plan, valid, &schedule_message, &target_message);
    let mut conditions = vec![
        condition(previous, "Ready", ready, ready_reason, &ready_message, eru),
        condition(
            previous,
            "ScheduleValid",
            valid,
            if valid { "Parsed" } else { "InvalidSchedule" },
            &schedule_message,
            eru,
        ),
        condition(
            previous,
            "TargetFound",
            target_found,
            if target_found { "Found" } else { "NotFound" },
            &format!(
                "{target_message} {}",
                if target_found { "exists" } else { "not found" }
            ),
            eru,
        ),
    ];
    if capped {
        let queued = plan.queued.as_ref();
        conditions.push(condition(
            previous,
            "Queued",
            queued.is_some(),
            if queued.is_some() {
                "FleetCapacity"
            } else {
                "NotQueued"
            },
            &queued.map_or("no slot waits for a restart place".to_string(), |q| {
                format!("{} waits for {}", q.what(), q.waits_for())
            }),
            eru,
        ));
    }
    conditions
}

/// The `Ready` condition: whether the Eru can restart at its next slot, its reason and message.
fn ready(
    eru: &CachedEru,
    plan: &Plan,
    valid: bool,
    schedule_message: &str,
    target_message: &str,
) -> (bool, &'static str, String) {
    let (observed, state, next) = (plan.observed(), &plan.state, plan.next_restart());
    let pending_error = match state {
        State::Restarting { restart } => plan.patch_error.clone().or_else(|| restart.last_error.clone()),
        _ => plan.patch_error.clone(),
    };
    if !valid {
        (false, "InvalidSpec", schedule_message.to_string())
    } else if observed.target().is_none() {
        (false, "TargetMissing", format!("{target_message} not found"))
    } else if let Some(error) = pending_error {
        (false, "RestartPatchFailed", error)
    } else if let Some(why) = observed.target().and_then(|t| t.not_rollable.clone()) {
        // every slot is skipped (target_not_rollable) until its strategy changes
        (false, "TargetNotRollable", why)
    } else if let Some(pause) = plan.paused() {
        let (namespace, name) = (
            eru.metadata.namespace.as_deref().unwrap_or_default(),
            eru.name_any(),
        );
        (
            false,
            "PausedOnFailure",
            format!(
                "paused on failure since {}: {}; slots are recorded as skipped until someone resumes it: \
                 kubectl eru resume {namespace}/{name}",
                slot_text(pause.since),
                pause.why
            ),
        )
    } else if eru.spec.suspend {
        let why = eru
            .spec
            .suspend_note
            .as_ref()
            .map_or(String::new(), |n| format!(" ({n})"));
        (
            true,
            "Suspended",
            format!("suspended{why}: slots are recorded as skipped"),
        )
    } else if let Some(h) = &plan.held {
        (true, "Held", held_message(h))
    } else if let Some(q) = plan.queued.as_ref() {
        (
            true,
            "Queued",
            format!(
                "{} waits for {}: {} restarts in flight, {} slots ahead; {} if not started by {}",
                q.what(),
                q.waits_for(),
                q.in_flight,
                q.ahead,
                if q.run.is_some() {
                    crate::vocab::RunOutcome::Refused.as_str()
                } else {
                    "skipped (fleet_capacity)"
                },
                slot_text(q.deadline)
            ),
        )
    } else if eru.spec.dry_run || observed.operator.dry_run_all {
        let message = next.map_or("dry run: no further slots".into(), |n| {
            format!("dry run: next slot at {}, journaled, not patched", slot_text(n))
        });
        (true, "DryRun", message)
    } else {
        let message = next.map_or("no further slots".into(), |n| {
            format!("next restart at {}", slot_text(n))
        });
        (true, "Scheduled", message)
    }
}

/// What `Ready` says of a held slot.
fn held_message(h: &Held) -> String {
    format!(
        "slot {} is held by a health gate since {} ({}: {}); it runs when the gates open, skipped \
         ({}) if not started by {}",
        slot_text(h.slot),
        slot_text(h.since),
        h.reason.as_str(),
        h.note,
        h.reason.as_str(),
        slot_text(h.deadline)
    )
}

/// A hold as the status shows it.
pub fn held_status(held: &Held) -> HeldSlot {
    HeldSlot {
        slot: held.slot,
        since: held.since,
        checked_at: held.checked_at,
        deadline: held.deadline,
        reason: held.reason.as_str().to_string(),
        note: held.note.clone(),
    }
}

/// The newer of two, by `key`; the first on a tie.
fn newest<T>(a: Option<T>, b: Option<T>, key: impl Fn(&T) -> DateTime<Utc>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) if key(&b) > key(&a) => Some(b),
        (a, b) => a.or(b),
    }
}

/// A journaled restart as the status shows it.
fn last_restart(r: &RestartRow) -> LastRestart {
    let (slot, decided_at) = (*r.slot, *r.decided_at);
    let patched_at = r.patched_at.map(|at| *at);
    let finished_at = r.finished_at.map(|at| *at);
    LastRestart {
        slot,
        started_at: decided_at,
        decided_at: Some(decided_at),
        patched_at,
        finished_at,
        outcome: r.outcome.as_str().to_string(),
        reason: r.reason.clone(),
        duration_seconds: patched_at
            .zip(finished_at)
            .map(|(start, end)| (end - start).as_seconds_f64()),
        target: Some(r.target.clone()),
        reverted_by: r.reverted_by.clone(),
        reverted_at: r.reverted_at.map(|at| *at),
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};
    use strum::VariantArray;

    use super::*;
    use crate::{
        history::pages::{MissedItem, SlotItem},
        journal::{SlotRow, Ts},
        vocab::{Reason, SlotResult},
    };

    /// The status's recent slots, `/slots`, `/missed` and the notifications say the same reason
    /// for the same record, from [`Reason::shown`]: none for a fired slot, the reason for one not
    /// restarted. (`/audit` counts by the same function; the CLI and the pages print what
    /// `/slots` and `/audit` say.)
    #[test]
    fn every_surface_says_the_same_reason_for_a_slot() {
        let at = Ts(Utc.with_ymd_and_hms(2026, 11, 27, 3, 0, 0).unwrap());
        for reason in Reason::VARIANTS {
            let row = SlotRecordRow {
                record: SlotRow {
                    id: 1,
                    uid: "u".into(),
                    namespace: "ns".into(),
                    name: "web".into(),
                    target: "Deployment/web".into(),
                    slot: at,
                    last_slot: at,
                    slot_count: 1,
                    result: reason.result(),
                    reason: Some(*reason),
                    window_start: None,
                    window_end: None,
                    evaluated_at: at,
                    note: None,
                },
                restart_decided_at: None,
                restart_patched_at: None,
                restart_finished_at: None,
                restart_outcome: None,
                restart_reason: None,
                restart_attempts: None,
                restart_reverted_at: None,
            };
            let status = recent_slot(&row).reason;
            let record = crate::eru::core::ledger::SlotRecord::one(at.0, *reason, None, "Deployment/web");
            let notified = crate::notify::slot(&record).and_then(|e| e.why);
            let missed = MissedItem::from(row.record.clone())
                .reason
                .map(|r| r.as_str().to_string());
            let listed = SlotItem::from(row).reason.map(|r| r.as_str().to_string());
            assert_eq!(status, listed, "{reason}");
            assert_eq!(status, notified, "{reason}");
            if reason.result() != SlotResult::Fired {
                assert_eq!(status, missed, "{reason}: /missed lists only slots not restarted");
            }
            assert_eq!(status.is_none(), reason.result() == SlotResult::Fired, "{reason}");
        }
    }
}
