//! Step 5 of the Eru pass, pure: the status, a projection of the machine, the observation and the
//! journal.

use chrono::{DateTime, Utc};

use super::{Eru, EruStatus, LastRestart, machine::State, observe::Observed, record::slot_text};
use crate::{
    conditions::condition,
    journal::{EruSummary, parse_ts},
    machine::Phase,
};

/// The status to write: phase and slot from the machine, conditions from what was observed and
/// the restart patch's result, history fields from the journal's summary.
pub fn status(
    eru: &Eru,
    observed: &Observed,
    state: &State,
    next: Option<DateTime<Utc>>,
    summary: &EruSummary,
    patch_error: Option<String>,
) -> EruStatus {
    let previous = observed
        .known
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let target_found = observed.target.is_some();
    let (valid, schedule_message) = match &observed.schedule {
        Ok(_) => (true, format!("schedule '{}' is valid", eru.spec.schedule)),
        Err(e) => (false, e.to_string()),
    };
    let target_message = format!("{} {}", eru.spec.target.kind.as_str(), eru.spec.target.name);
    let (ready, ready_reason, ready_message) = if !valid {
        (false, "InvalidSpec", schedule_message.clone())
    } else if !target_found {
        (false, "TargetMissing", format!("{target_message} not found"))
    } else if let Some(error) = patch_error {
        (false, "RestartPatchFailed", error)
    } else if eru.spec.suspend {
        (
            true,
            "Suspended",
            "suspended: slots are recorded as skipped".to_string(),
        )
    } else {
        (
            true,
            "Scheduled",
            next.map_or("no further slots".into(), |n| {
                format!("next restart at {}", slot_text(n))
            }),
        )
    };
    let conditions = vec![
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
    let last_restart = summary.last_restart.as_ref().and_then(|r| {
        let slot = parse_ts(&r.slot)?;
        let started_at = parse_ts(&r.started_at)?;
        let finished_at = r.finished_at.as_deref().and_then(parse_ts);
        Some(LastRestart {
            slot,
            started_at,
            finished_at,
            outcome: r.outcome.clone(),
            duration_seconds: finished_at.map(|f| (f - started_at).as_seconds_f64()),
        })
    });
    EruStatus {
        phase: Some(state.phase().to_string()),
        conditions,
        observed_generation: eru.metadata.generation,
        current_slot: state.slot(),
        last_schedule_time: last_restart.as_ref().map(|r| r.slot),
        last_successful_time: summary.last_success,
        last_failure_time: summary.last_failure,
        next_schedule_time: next,
        last_restart,
        missed_slots: summary.missed_slots,
        last_missed_time: summary.last_missed,
    }
}
