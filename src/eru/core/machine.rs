//! The Eru state machine. Pure: handlers decide, the reconciler journals and acts.
//!
//! ```text
//!           SlotsDue (gate open)             RestartPatched                 RolloutDone / RolloutFailed
//!  Waiting ──────────────────▶ Restarting{restart} ──────────▶ RollingOut{slot} ────────────────────────▶ Waiting
//!   ▲  │                         │ RestartPending: patch (backoff), or give up   │ SlotsDue: concurrent_rollout
//!   │  ▼ SpecReady{suspend}      │ (deadline, closed gate) ──▶ Waiting            │ TargetGone: abandoned
//!  Suspended   Invalid   TargetMissing      SlotsDue (newer slot): superseded
//! ```
//! A restart is *decided* (journaled with its deadline) before its patch is sent; the slot is
//! recorded `fired` only once the patch landed. A patch that does not land is retried with
//! backoff while the gates stay open, and given up at the slot's deadline, at a closed gate, or
//! when a newer slot supersedes it: the restart ends `abandoned` and its slot is recorded with the
//! reason (`patch_failed`, `suspended`, `target_paused`, ...). It is never patched afterwards.
//! The idle states follow the spec; a slot due while one of them holds is skipped with its reason.

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use statig::prelude::*;

use super::{
    hold::{Answer, Held},
    ledger::{self, Due, Reason, SlotRecord, Window},
    messages::{EruAction, EruDecision, EruEvent, EruRecord, Pending, Restart, Rollout, SlotsDue},
    run::{ManualRun, RunDue, RunRecord, RunRollout},
    schedule::slot_text as text,
};
use crate::{machine::Phase, vocab, vocab::RunOutcome};

/// The Eru machine.
#[derive(Default)]
pub struct EruMachine;

/// How long to wait after the `failures`-th failed patch: 1 s, doubling, at most a minute.
pub fn retry_delay(failures: u32) -> chrono::Duration {
    chrono::Duration::seconds(1i64 << failures.saturating_sub(1).min(6)).min(chrono::Duration::seconds(60))
}

#[state_machine(
    initial = "State::waiting()",
    state(derive(Debug, Clone, PartialEq, Eq)),
    after_transition = "Self::after_transition"
)]
impl EruMachine {
    /// Waiting for the next slot.
    #[state(superstate = "idle")]
    fn waiting(event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        match event {
            EruEvent::SpecReady { suspend: true } => Transition(State::suspended()),
            EruEvent::SlotsDue(slots) => {
                record_slots(context, &slots.records);
                match &slots.due {
                    Some(due) => start(context, due, slots, false),
                    None => Handled,
                }
            }
            EruEvent::RunDue(due) => start_run(context, due),
            _ => Super,
        }
    }

    #[state(superstate = "idle")]
    fn suspended(event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        match event {
            EruEvent::SpecReady { suspend: false } => Transition(State::waiting()),
            EruEvent::SlotsDue(slots) => skip_all(context, slots, Reason::Suspended),
            EruEvent::RunDue(due) => refuse_run(context, due, Reason::Suspended),
            _ => Super,
        }
    }

    #[state(superstate = "idle")]
    fn invalid(event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        match event {
            EruEvent::SpecInvalid { .. } => Handled,
            EruEvent::SpecReady { suspend: false } => Transition(State::waiting()),
            EruEvent::SpecReady { suspend: true } => Transition(State::suspended()),
            EruEvent::SlotsDue(slots) => skip_all(context, slots, Reason::SpecInvalid),
            EruEvent::RunDue(due) => refuse_run(context, due, Reason::SpecInvalid),
            _ => Super,
        }
    }

    #[state(superstate = "idle")]
    fn target_missing(event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        match event {
            EruEvent::TargetMissing => Handled,
            EruEvent::SpecReady { suspend: false } => Transition(State::waiting()),
            EruEvent::SpecReady { suspend: true } => Transition(State::suspended()),
            EruEvent::SlotsDue(slots) => skip_all(context, slots, Reason::TargetMissing),
            EruEvent::RunDue(due) => refuse_run(context, due, Reason::TargetMissing),
            _ => Super,
        }
    }

    /// A due slot whose gate is open, asking the fleet for a place: granted, its restart is
    /// decided; refused, it waits (unaccounted) for a place or its deadline. Lives within one
    /// pass (between the plan and the fleet's answer): never restored.
    #[state]
    fn starting(
        due: &Due,
        superseding: &bool,
        event: &EruEvent,
        context: &mut EruDecision,
    ) -> Outcome<State> {
        let _ = superseding; // only the phase shown while it asks (see `Phase`)
        match event {
            EruEvent::Place { granted: true } => {
                context.record(EruRecord::Decided {
                    slot: due.slot,
                    deadline: due.deadline,
                    target: due.target.clone(),
                });
                Transition(State::restarting(Restart::decided(due)))
            }
            EruEvent::Place { granted: false } => Transition(State::waiting()),
            EruEvent::SilenceExpired { slot, at } => expired(context, *slot, *at),
            _ => Handled,
        }
    }

    /// The restart is decided and journaled; its patch has not landed yet.
    #[state(superstate = "busy")]
    fn restarting(restart: &Restart, event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        match event {
            EruEvent::RestartPatched { at, generation } => {
                context.record(EruRecord::Patched {
                    slot: restart.slot,
                    at: *at,
                    target: restart.target.clone(),
                    generation: *generation,
                });
                Transition(State::rolling_out(Rollout {
                    slot: restart.slot,
                    target: restart.target.clone(),
                    patched_at: *at,
                    landed_generation: *generation,
                }))
            }
            EruEvent::PatchFailed {
                message,
                at,
                retry_at,
            } => {
                context.record(EruRecord::Attempt {
                    slot: restart.slot,
                    at: *at,
                    error: message.clone(),
                    retry_at: *retry_at,
                });
                Transition(State::restarting(Restart {
                    attempts: restart.attempts + 1,
                    last_error: Some(message.clone()),
                    next_attempt_at: Some(*retry_at),
                    ..restart.clone()
                }))
            }
            EruEvent::RestartPending(pending) => go_on_or_give_up(context, restart, pending),
            EruEvent::Silenced { id, until } => {
                context.record(EruRecord::Silenced {
                    slot: restart.slot,
                    id: id.clone(),
                    until: *until,
                });
                Handled
            }
            EruEvent::SlotsDue(slots) => {
                record_slots(context, &slots.records);
                match &slots.due {
                    Some(due) if due.slot > restart.slot => supersede(context, restart, due, slots),
                    _ => Handled,
                }
            }
            _ => Super,
        }
    }

    /// The target rolls out the restart of `rollout.slot`.
    #[state(superstate = "busy")]
    fn rolling_out(rollout: &Rollout, event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        let slot = &rollout.slot;
        let finish = |context: &mut EruDecision, outcome, finished_at, reason| {
            context.record(EruRecord::Finished {
                slot: *slot,
                patched_at: rollout.patched_at,
                outcome,
                finished_at,
                reason,
            });
            Transition(State::waiting())
        };
        match event {
            EruEvent::RolloutProgressed => Handled,
            EruEvent::RolloutDone { finished_at } => {
                finish(context, vocab::Outcome::Succeeded, Some(*finished_at), None)
            }
            EruEvent::RolloutFailed { finished_at, reason } => finish(
                context,
                vocab::Outcome::Failed,
                Some(*finished_at),
                Some(reason.clone()),
            ),
            EruEvent::TargetGone => finish(
                context,
                vocab::Outcome::Abandoned,
                None,
                Some("the target disappeared during the rollout".into()),
            ),
            EruEvent::RolloutReverted { revert, at } => {
                // the pods roll again, to the template without the restart: it did not happen
                let outcome = finish(
                    context,
                    vocab::Outcome::Failed,
                    Some(*at),
                    Some(revert.text(*slot)),
                );
                context.record(EruRecord::Reverted {
                    slot: *slot,
                    revert: revert.clone(),
                    at: *at,
                });
                outcome
            }
            EruEvent::SlotsDue(slots) => {
                record_slots(context, &slots.records);
                if let Some(due) = slots.due.as_ref().filter(|d| d.slot != *slot) {
                    context.record(EruRecord::Slots(vec![SlotRecord::one(
                        due.slot,
                        Reason::ConcurrentRollout,
                        None,
                        &due.target,
                    )]));
                }
                Handled
            }
            _ => Super,
        }
    }

    /// A manual run whose gates are open, asking the fleet for a place: granted, it is decided;
    /// refused, it waits (journaled `waiting`) for a place or its deadline. Lives within one pass.
    #[state]
    fn run_starting(run: &ManualRun, event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        match event {
            EruEvent::Place { granted: true } => {
                context.record(EruRecord::Run(RunRecord::Decided {
                    token: run.token.clone(),
                }));
                Transition(State::run_restarting(run.clone()))
            }
            EruEvent::Place { granted: false } => Transition(State::waiting()),
            EruEvent::SilenceExpired { slot, at } => expired(context, *slot, *at),
            _ => Handled,
        }
    }

    /// A manual run is decided and journaled; its patch has not landed yet.
    #[state(superstate = "busy")]
    fn run_restarting(run: &ManualRun, event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        match event {
            EruEvent::RestartPatched { at, .. } => {
                context.record(EruRecord::Run(RunRecord::Patched {
                    token: run.token.clone(),
                    at: *at,
                }));
                Transition(State::run_rolling_out(RunRollout {
                    run: run.clone(),
                    patched_at: *at,
                }))
            }
            EruEvent::PatchFailed {
                message,
                at,
                retry_at,
            } => {
                context.record(EruRecord::Run(RunRecord::Attempt {
                    token: run.token.clone(),
                    at: *at,
                    error: message.clone(),
                    retry_at: *retry_at,
                }));
                Transition(State::run_restarting(ManualRun {
                    attempts: run.attempts + 1,
                    last_error: Some(message.clone()),
                    next_attempt_at: Some(*retry_at),
                    ..run.clone()
                }))
            }
            EruEvent::RestartPending(pending) => go_on_or_give_up_run(context, run, pending),
            EruEvent::SlotsDue(slots) => {
                record_slots(context, &slots.records);
                match &slots.due {
                    // the slot's restart does what the run asked: the run is given up for it,
                    // if it starts (a slot skipped, held or run dry leaves the run going on)
                    Some(due) => match start(context, due, slots, false) {
                        Handled => Handled,
                        started => {
                            let why =
                                format!("superseded by slot {} before the patch landed", text(due.slot));
                            context.record(EruRecord::Run(give_up_run(run, &why)));
                            started
                        }
                    },
                    None => Handled,
                }
            }
            _ => Super,
        }
    }

    /// The target rolls out a manual run.
    #[state(superstate = "busy")]
    fn run_rolling_out(rollout: &RunRollout, event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        let run = &rollout.run;
        let finish = |context: &mut EruDecision, outcome, at, reason: String| {
            context.record(EruRecord::Run(RunRecord::ended(run, outcome, at, reason)));
            Transition(State::waiting())
        };
        match event {
            EruEvent::RolloutProgressed => Handled,
            EruEvent::RolloutDone { finished_at } => finish(
                context,
                RunOutcome::Succeeded,
                Some(*finished_at),
                "the rollout finished".into(),
            ),
            EruEvent::RolloutFailed { finished_at, reason } => {
                finish(context, RunOutcome::Failed, Some(*finished_at), reason.clone())
            }
            EruEvent::TargetGone => finish(
                context,
                RunOutcome::Abandoned,
                None,
                "the target disappeared during the rollout".into(),
            ),
            EruEvent::SlotsDue(slots) => {
                record_slots(context, &slots.records);
                if let Some(due) = slots.due.as_ref() {
                    let note = format!("{} was rolling out", run.name());
                    let record = SlotRecord::one(due.slot, Reason::ConcurrentRollout, None, &due.target);
                    context.record(EruRecord::Slots(vec![record.noted(note)]));
                }
                Handled
            }
            _ => Super,
        }
    }

    /// Not restarting: spec and target problems move between these states.
    #[superstate]
    fn idle(event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        match event {
            EruEvent::SpecInvalid { reason } => {
                context.act(EruAction::ReportInvalid {
                    reason: reason.clone(),
                });
                Transition(State::invalid())
            }
            EruEvent::TargetMissing => {
                context.act(EruAction::ReportTargetMissing);
                Transition(State::target_missing())
            }
            EruEvent::SilenceExpired { slot, at } => expired(context, *slot, *at),
            EruEvent::RunWithdrawn { token, now } => withdrawn(context, token, now.as_deref()),
            EruEvent::Reverted { slot, revert, at } => {
                context.record(EruRecord::Reverted {
                    slot: *slot,
                    revert: revert.clone(),
                    at: *at,
                });
                Handled
            }
            EruEvent::Adopt { rollout, deadline } => {
                context.record(EruRecord::Decided {
                    slot: rollout.slot,
                    deadline: *deadline,
                    target: rollout.target.clone(),
                });
                context.record(EruRecord::Patched {
                    slot: rollout.slot,
                    at: rollout.patched_at,
                    target: rollout.target.clone(),
                    generation: rollout.landed_generation,
                });
                Transition(State::rolling_out(rollout.clone()))
            }
            _ => Handled,
        }
    }

    /// A restart is in flight: it finishes (or is given up) on its own terms; the spec's state
    /// applies once it has ended.
    #[superstate]
    fn busy(event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        if let EruEvent::SilenceExpired { slot, at } = event {
            // an earlier restart's silence, expired once a newer restart had started
            return expired(context, *slot, *at);
        }
        if let EruEvent::RunWithdrawn { token, now } = event {
            return withdrawn(context, token, now.as_deref());
        }
        if let EruEvent::RunDue(due) = event
            && due.new
        {
            // journaled now, so its wait is seen; it starts once the restart in flight ended
            context.record(EruRecord::Run(RunRecord::Requested {
                run: due.run.clone(),
                waits: Some("a restart is in flight".into()),
            }));
        }
        Handled
    }

    fn after_transition(&mut self, from: &State, to: &State, context: &mut EruDecision) {
        context.transition(from, to);
    }
}

/// Refuses the waiting run `token`, no longer asked for (`now`: the token asked for instead).
fn withdrawn(context: &mut EruDecision, token: &str, now: Option<&str>) -> Outcome<State> {
    let reason = match now {
        Some(now) => format!("replaced by token {now:?} before it started"),
        None => format!("{} was removed before it started", super::run::RUN_ANNOTATION),
    };
    context.record(EruRecord::Run(RunRecord::Withdrawn {
        token: token.to_string(),
        reason,
    }));
    Handled
}

/// Records that the silence of the restart of `slot` was expired at `at`.
fn expired(context: &mut EruDecision, slot: DateTime<Utc>, at: DateTime<Utc>) -> Outcome<State> {
    context.record(EruRecord::SilenceExpired { slot, at });
    Handled
}

/// Records `records`, if any.
fn record_slots(context: &mut EruDecision, records: &[SlotRecord]) {
    if !records.is_empty() {
        context.record(EruRecord::Slots(records.to_vec()));
    }
}

/// A restart that has not landed, as this pass finds it (`pending`): given up if something
/// blocks it (the Eru suspended or invalid, the target's gate closed) or its deadline passed; else
/// patched again once its backoff is over.
fn go_on_or_give_up(context: &mut EruDecision, restart: &Restart, pending: &Pending) -> Outcome<State> {
    if let Some(reason) = pending.blocked {
        let what = match reason {
            Reason::Suspended => "the Eru was suspended before the patch landed",
            Reason::SpecInvalid => "the Eru's spec became invalid before the patch landed",
            Reason::TargetPaused => "the target was paused before the patch landed",
            Reason::TargetMissing => "the target disappeared before the patch landed",
            Reason::TargetNotRollable => "the target became not rollable before the patch landed",
            _ => "the target was not fully available before the patch landed",
        };
        let what = match &pending.note {
            Some(note) => format!("{what} ({note})"),
            None => what.to_string(),
        };
        give_up(context, restart, reason, None, &what, pending.note.as_ref());
        return Transition(State::waiting());
    }
    if pending.now > restart.deadline {
        let (reason, window) = if restart.attempts > 0 {
            (Reason::PatchFailed, None)
        } else if pending.downtime.is_some() {
            (Reason::OperatorDown, pending.downtime)
        } else if pending.journal_outage.is_some() {
            (Reason::JournalUnavailable, pending.journal_outage)
        } else {
            (Reason::PastDeadline, None)
        };
        let what = format!(
            "{}the restart patch did not land by {} (startingDeadlineSeconds)",
            outage_text(reason, window),
            text(restart.deadline)
        );
        give_up(context, restart, reason, window, &what, None);
        return Transition(State::waiting());
    }
    if pending.retry_due {
        context.act(EruAction::PatchRestart {
            slot: restart.slot,
            target: restart.target.clone(),
        });
    }
    Handled
}

/// A newer slot `due` while `restart` has not landed: the restart is given up (superseded, or
/// for the patches that failed or the journal outage that kept it from landing), and the newer
/// slot starts.
fn supersede(context: &mut EruDecision, restart: &Restart, due: &Due, slots: &SlotsDue) -> Outcome<State> {
    let outage = ledger::overlapping(&slots.journal_outages, restart.slot, due.slot);
    let (reason, window) = if restart.attempts > 0 {
        (Reason::PatchFailed, None)
    } else if outage.is_some() {
        (Reason::JournalUnavailable, outage)
    } else {
        (Reason::Superseded, None)
    };
    let what = format!(
        "{}superseded by slot {} before the patch landed",
        outage_text(reason, window),
        text(due.slot)
    );
    give_up(context, restart, reason, window, &what, None);
    match start(context, due, slots, true) {
        Handled => Transition(State::waiting()),
        started => started,
    }
}

/// Starts the restart of `due` if its gate is open (recording it as landed if the target already
/// carries it), else records it skipped. A closed health gate holds it (unless it supersedes a
/// restart in flight, which keeps its own terms). An open gate asks the fleet for a place first
/// ([`State::Starting`]); `superseding` tells that it replaces a restart that never landed.
fn start(context: &mut EruDecision, due: &Due, slots: &SlotsDue, superseding: bool) -> Outcome<State> {
    if let Some(template) = slots.template.filter(|t| t.slot == due.slot) {
        // landed before a crash, or by another replica: never patched twice
        context.record(EruRecord::Decided {
            slot: due.slot,
            deadline: due.deadline,
            target: due.target.clone(),
        });
        context.record(EruRecord::Patched {
            slot: due.slot,
            at: template.landed_at,
            target: due.target.clone(),
            generation: template.generation,
        });
        return Transition(State::rolling_out(Rollout {
            slot: due.slot,
            target: due.target.clone(),
            patched_at: template.landed_at,
            landed_generation: template.generation,
        }));
    }
    if slots.gate.reason().is_none()
        && !superseding
        && let Answer::Closed { reason, note } = &slots.health
    {
        // a dry run is held too: it shows what the gates decide
        let earlier = slots.earlier_hold.as_ref();
        context.act(EruAction::Hold(Held::new(
            due.slot,
            due.deadline,
            slots.now,
            (*reason, note.as_str()),
            earlier,
        )));
        return Handled;
    }
    if slots.gate.reason().is_none()
        && let Some((reason, note)) = slots.need.skip()
    {
        // after every other reason: the gates open, a need condition says it would not help
        let record = SlotRecord::one(due.slot, reason, None, &due.target).noted(note.to_string());
        context.record(EruRecord::Slots(vec![record]));
        return Handled;
    }
    match slots.gate.reason() {
        None if due.dry_run => {
            context.record(EruRecord::DryRun {
                slot: due.slot,
                deadline: due.deadline,
                target: due.target.clone(),
                patch: dry_run_patch(due),
            });
            Handled
        }
        None => {
            context.act(EruAction::AskPlace {
                slot: due.slot,
                deadline: due.deadline,
            });
            Transition(State::starting(due.clone(), superseding))
        }
        Some(reason) => {
            let record = SlotRecord::one(due.slot, reason, None, &due.target);
            let record = match &slots.gate_note {
                Some(note) => record.noted(note.clone()),
                None => record,
            };
            context.record(EruRecord::Slots(vec![record]));
            Handled
        }
    }
}

/// Starts the manual run `due` asks for, in an Eru that waits for its next slot: its patch landed
/// already (taken over, never patched twice), or it is refused past its deadline, waits while
/// something stands in its way, is journaled as a dry run, or asks the fleet for a place.
fn start_run(context: &mut EruDecision, due: &RunDue) -> Outcome<State> {
    let run = &due.run;
    if due.new {
        context.record(EruRecord::Run(RunRecord::Requested {
            run: run.clone(),
            waits: due.waits(),
        }));
    }
    if let Some(at) = due.landed_at {
        let token = run.token.clone();
        context.record(EruRecord::Run(RunRecord::Decided { token: token.clone() }));
        context.record(EruRecord::Run(RunRecord::Patched { token, at }));
        return Transition(State::run_rolling_out(RunRollout {
            run: run.clone(),
            patched_at: at,
        }));
    }
    if due.now > run.deadline {
        let why = (due.waits().or_else(|| due.waited.clone()))
            .unwrap_or_else(|| Reason::PastDeadline.as_str().to_string());
        let reason = format!("not started by its deadline {} ({why})", text(run.deadline));
        context.record(EruRecord::Run(RunRecord::ended(
            run,
            RunOutcome::Refused,
            None,
            reason,
        )));
        return Handled;
    }
    if due.blocked.is_some() {
        return Handled; // it waits; the plan looks again at the gate poll or its deadline
    }
    if due.dry_run {
        let reason = format!(
            "dry run: would have set {}={} on the pod template of {}",
            super::run::RUN_ANNOTATION,
            run.token,
            run.target
        );
        context.record(EruRecord::Run(RunRecord::ended(
            run,
            RunOutcome::DryRun,
            None,
            reason,
        )));
        return Handled;
    }
    context.act(EruAction::AskPlace {
        slot: run.requested_at,
        deadline: run.deadline,
    });
    Transition(State::run_starting(run.clone()))
}

/// Refuses the manual run `due` asks for at once: the Eru is suspended, invalid or without target.
fn refuse_run(context: &mut EruDecision, due: &RunDue, reason: Reason) -> Outcome<State> {
    if due.landed_at.is_some() {
        // its patch landed before the Eru changed: taken over and tracked to its end
        return start_run(context, due);
    }
    if due.new {
        context.record(EruRecord::Run(RunRecord::Requested {
            run: due.run.clone(),
            waits: None,
        }));
    }
    let why = match reason {
        Reason::Suspended => "the Eru is suspended",
        Reason::SpecInvalid => "the Eru's spec is invalid",
        _ => "the Eru's target does not exist",
    };
    let reason = format!("{}: {why}", reason.as_str());
    context.record(EruRecord::Run(RunRecord::ended(
        &due.run,
        RunOutcome::Refused,
        None,
        reason,
    )));
    Handled
}

/// A manual run that has not landed, as this pass finds it: given up if something blocks it or
/// its deadline passed; else patched again once its backoff is over.
fn go_on_or_give_up_run(context: &mut EruDecision, run: &ManualRun, pending: &Pending) -> Outcome<State> {
    let why = if let Some(reason) = pending.blocked {
        let note = pending.note.as_ref().map_or(String::new(), |n| format!(" ({n})"));
        Some(format!("{} before the patch landed{note}", reason.as_str()))
    } else if pending.now > run.deadline {
        Some(format!(
            "the patch did not land by its deadline {}",
            text(run.deadline)
        ))
    } else {
        None
    };
    match why {
        Some(why) => {
            context.record(EruRecord::Run(give_up_run(run, &why)));
            Transition(State::waiting())
        }
        None => {
            if pending.retry_due {
                context.act(EruAction::PatchRun {
                    token: run.token.clone(),
                    target: run.target.clone(),
                });
            }
            Handled
        }
    }
}

/// The record of a manual run given up before its patch landed, with the last API message.
fn give_up_run(run: &ManualRun, why: &str) -> RunRecord {
    let last = super::retry::last_error_note(run.attempts, run.last_error.as_deref());
    RunRecord::ended(run, RunOutcome::Abandoned, None, format!("{why}{last}"))
}

/// What a dry run would have patched.
fn dry_run_patch(due: &Due) -> String {
    format!(
        "dry run: would have set {}={} on the pod template of {}",
        super::RESTARTED_AT_ANNOTATION,
        text(due.slot),
        due.target
    )
}

/// Records every slot, the due one skipped for `reason`.
fn skip_all(context: &mut EruDecision, slots: &SlotsDue, reason: Reason) -> Outcome<State> {
    let mut records = slots.records.clone();
    records.extend(
        slots
            .due
            .iter()
            .map(|d| SlotRecord::one(d.slot, reason, None, &d.target)),
    );
    record_slots(context, &records);
    Handled
}

/// What a journal outage adds to a given-up restart's reason: when the journal took no writes.
fn outage_text(reason: Reason, window: Option<Window>) -> String {
    match window {
        Some((from, to)) if reason == Reason::JournalUnavailable => format!(
            "the journal took no writes from {} to {}; ",
            from.to_rfc3339_opts(SecondsFormat::Millis, true),
            to.to_rfc3339_opts(SecondsFormat::Millis, true)
        ),
        _ => String::new(),
    }
}

/// Gives up a restart whose patch never landed; its slot's record carries `note`, if any.
fn give_up(
    context: &mut EruDecision,
    restart: &Restart,
    reason: Reason,
    window: Option<Window>,
    what: &str,
    note: Option<&String>,
) {
    let record = SlotRecord::one(restart.slot, reason, window, &restart.target);
    context.record(EruRecord::GaveUp {
        slot: restart.slot,
        reason: restart.give_up_text(reason, what),
        record: match note {
            Some(note) => record.noted(note.clone()),
            None => record,
        },
    });
}

impl Phase for State {
    fn phase(&self) -> &'static str {
        match self {
            State::Waiting {} => "Waiting",
            State::Suspended {} => "Suspended",
            State::Invalid {} => "Invalid",
            State::TargetMissing {} => "TargetMissing",
            State::Restarting { .. } | State::RunRestarting { .. } => "Restarting",
            State::RollingOut { .. } | State::RunRollingOut { .. } => "RollingOut",
            // what it showed before it asked: a slot that waits for a place is not a phase
            State::Starting {
                superseding: true, ..
            } => "Restarting",
            State::Starting { .. } | State::RunStarting { .. } => "Waiting",
        }
    }
}

impl State {
    /// The slot being restarted, in Restarting and RollingOut.
    pub fn slot(&self) -> Option<DateTime<Utc>> {
        match self {
            State::Restarting { restart } => Some(restart.slot),
            State::RollingOut { rollout } => Some(rollout.slot),
            _ => None,
        }
    }

    /// The manual run in flight (decided, not ended), if any.
    pub fn run(&self) -> Option<&ManualRun> {
        match self {
            State::RunRestarting { run } => Some(run),
            State::RunRollingOut { rollout } => Some(&rollout.run),
            _ => None,
        }
    }

    /// The manual run asking the fleet for a place, if one does.
    pub fn run_asking(&self) -> Option<&ManualRun> {
        match self {
            State::RunStarting { run } => Some(run),
            _ => None,
        }
    }

    /// Whether a restart or a manual run is in flight (it holds a place in the fleet).
    pub fn in_flight(&self) -> bool {
        self.slot().is_some() || self.run().is_some()
    }

    /// The due slot (or the manual run, by when it was asked) asking the fleet for a place, and
    /// its deadline.
    pub fn asks_place(&self) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        match self {
            State::Starting { due, .. } => Some((due.slot, due.deadline)),
            State::RunStarting { run } => Some((run.requested_at, run.deadline)),
            _ => None,
        }
    }

    /// When the restart in flight needs the next look, whatever happens in the cluster: a retry
    /// or its deadline before its patch landed; its rollout's timeout (a stalled rollout sends no
    /// event) after.
    pub fn wake(&self, now: DateTime<Utc>, rollout_timeout: Duration) -> Option<DateTime<Utc>> {
        match self {
            State::Restarting { restart } => Some(restart.wake(now)),
            State::RollingOut { rollout } => {
                Some(rollout.patched_at + rollout_timeout + Duration::seconds(1))
            }
            State::RunRestarting { run } => Some(run.wake(now)),
            State::RunRollingOut { rollout } => {
                Some(rollout.patched_at + rollout_timeout + Duration::seconds(1))
            }
            _ => None,
        }
    }
}

/// A restart in flight, as the journal holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InFlight {
    /// Decided; its patch has not landed.
    Pending(Restart),
    /// Its patch landed; the rollout is being tracked.
    Landed(Rollout),
    /// A manual run decided; its patch has not landed.
    RunPending(ManualRun),
    /// A manual run whose patch landed.
    RunLanded(RunRollout),
}

/// Restores the machine: a restart in flight comes from the journal (never from `status.phase`,
/// which may lag it or belong to a lost journal); otherwise the idle phase the status shows.
pub fn restore(phase: Option<&str>, in_flight: Option<InFlight>) -> State {
    match in_flight {
        Some(InFlight::Pending(restart)) => State::Restarting { restart },
        Some(InFlight::Landed(rollout)) => State::RollingOut { rollout },
        Some(InFlight::RunPending(run)) => State::RunRestarting { run },
        Some(InFlight::RunLanded(rollout)) => State::RunRollingOut { rollout },
        None => match phase {
            Some("Suspended") => State::Suspended {},
            Some("Invalid") => State::Invalid {},
            Some("TargetMissing") => State::TargetMissing {},
            _ => State::Waiting {},
        },
    }
}

#[cfg(test)]
mod tests;
