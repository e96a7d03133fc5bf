//! Step 2 of the Eru pass, pure: the observation as events, fed through the machine restored from
//! status and journal. The result is the new state and a [`Decision`](crate::machine::Decision):
//! transitions, records for the journal, actions for the cluster.

use chrono::{DateTime, Duration, Utc};
use tracing::debug;

use super::{
    Eru,
    accounting::{Span, account},
    machine::{EruDecision, EruEvent, EruMachine, Gate, SlotsDue, State, restore},
    observe::Observed,
    target::{TargetView, Verdict},
};
use crate::machine::{EventName, Phase, step};

/// What one pass decided.
#[derive(Debug)]
pub struct Pass {
    pub state: State,
    pub decision: EruDecision,
    /// More slots are due than one pass accounts for: come back at once.
    pub backlog: bool,
    /// How long the rollout of a restart may take.
    pub rollout_timeout: Duration,
}

/// Decides one pass for `eru` from what was observed.
pub fn decide(eru: &Eru, observed: &Observed) -> Pass {
    let name = eru.metadata.name.as_deref().unwrap_or_default();
    let known = observed.known.as_ref();
    let mut state = restore(
        known.and_then(|s| s.phase.as_deref()),
        known.and_then(|s| s.current_slot),
        observed.open_restart.map(|(slot, _)| slot),
    );
    let mut decision = EruDecision::default();
    let feed = |state: State, event: &EruEvent, decision: &mut EruDecision| {
        let from = state.phase();
        let to = step(EruMachine, state, event, decision);
        debug!(eru = %name, event = event.name(), from, to = to.phase(), slot = ?to.slot(), "dispatched");
        to
    };

    // the spec and the target
    let spec_event = match (&observed.schedule, &observed.target) {
        (Err(e), _) => EruEvent::SpecInvalid {
            reason: e.to_string(),
        },
        (Ok(_), None) => EruEvent::TargetMissing,
        (Ok(_), Some(_)) => EruEvent::SpecReady {
            suspend: eru.spec.suspend,
        },
    };
    state = feed(state, &spec_event, &mut decision);

    // the restart in flight: Restarting may become RollingOut and be judged in the same pass
    let rollout_timeout = Duration::seconds(eru.spec.rollout_timeout_seconds.unwrap_or_else(|| {
        observed
            .target
            .as_ref()
            .map_or(600, |t| t.rollout.progress_deadline_seconds.into())
    }));
    if let Some(target) = &observed.target {
        for _ in 0..2 {
            let Some(event) = tracking_event(
                &state,
                target,
                observed.started_at(),
                observed.now,
                rollout_timeout,
            ) else {
                break;
            };
            let settled = matches!(event, EruEvent::RestartPending | EruEvent::RolloutProgressed);
            state = feed(state, &event, &mut decision);
            if settled || state.slot().is_none() {
                break;
            }
        }
    }

    // the slots since the cursor
    let mut backlog = false;
    if let Ok(schedule) = &observed.schedule {
        let span = Span {
            after: observed.accounted_until,
            now: observed.now,
            starting_deadline: Duration::seconds(eru.spec.starting_deadline_seconds),
            suspended: eru.spec.suspend,
            downtime: &observed.downtime,
        };
        let accounting = account(schedule, &span);
        backlog = accounting.more;
        if !accounting.records.is_empty() || accounting.due.is_some() {
            let target = observed.target.as_ref();
            let due = SlotsDue {
                records: accounting.records,
                due: accounting.due,
                gate: target.map_or(Gate::Missing, TargetView::gate),
                template_slot: target.and_then(|t| t.template_slot),
            };
            state = feed(state, &EruEvent::SlotsDue(due), &mut decision);
        }
    }
    Pass {
        state,
        decision,
        backlog,
        rollout_timeout,
    }
}

/// The event for a restart in flight, from the target as observed.
fn tracking_event(
    state: &State,
    target: &TargetView,
    started_at: DateTime<Utc>,
    now: DateTime<Utc>,
    timeout: Duration,
) -> Option<EruEvent> {
    match state {
        State::Restarting { slot } if target.template_slot == Some(*slot) => Some(EruEvent::RestartPatched),
        State::Restarting { .. } => Some(EruEvent::RestartPending),
        State::RollingOut { slot } => Some(match target.verdict(*slot, started_at, now, timeout) {
            Verdict::Done => EruEvent::RolloutDone { finished_at: now },
            Verdict::Failed(reason) => EruEvent::RolloutFailed {
                finished_at: now,
                reason,
            },
            Verdict::Progressing => EruEvent::RolloutProgressed,
        }),
        _ => None,
    }
}
