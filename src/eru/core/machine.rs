//! The Eru state machine. Pure: handlers decide, the reconciler journals and acts.
//!
//! ```text
//!           SlotsDue / RunDue (gates open)  Place{granted}          RestartPatched                RolloutDone / RolloutFailed
//!  Waiting ─────────────────▶ Starting{restart} ───────▶ Restarting{restart} ─────────▶ RollingOut{rollout} ──────────────────────▶ Waiting
//!   ▲  │                          │ refused: Waiting        │ RestartPending: patch (backoff), or give up    │ SlotsDue: concurrent_rollout
//!   │  ▼ SpecReady{suspend}       │                         │ (deadline, closed gate) ──▶ Waiting            │ TargetGone: abandoned
//!  Suspended   Invalid   TargetMissing                      SlotsDue (newer slot): superseded
//!
//!  any idle state ── Paused ──▶ PausedOnFailure ── Resumed ──▶ Waiting
//! ```
//! A pause on failure ([`super::pause`]) holds until a person resumes it: no spec event moves
//! the machine out of `PausedOnFailure` while it holds.
//! One restart goes through these states whatever its [`Cause`]: a slot of the schedule or a
//! manual run. What the cause changes (the records, the patch, the words of a give-up, what a
//! newer slot does to it) is data, in [`super::restart`]; the waiting and refusal of a manual run
//! before it starts are `start_run` and `refuse_run` here.
//!
//! A restart is *decided* (journaled with its deadline) before its patch is sent; the slot is
//! recorded `fired` only once the patch landed. A patch that does not land is retried with
//! backoff while the gates stay open, and given up at the slot's deadline, at a closed gate, or
//! when a newer slot supersedes it: the restart ends `abandoned` and its slot is recorded with the
//! reason (`patch_failed`, `suspended`, `target_paused`, ...). It is never patched afterwards.
//! The idle states follow the spec; a slot due while one of them holds is skipped with its reason.

use chrono::{DateTime, Duration, Utc};
use statig::prelude::*;

use super::{
    hold::{Answer, Held},
    ledger::{Due, Reason, SlotRecord},
    messages::{EruAction, EruDecision, EruEvent, EruRecord, SlotsDue},
    restart::{Cause, End, Restart, Rollout},
    run::{RunDue, RunRecord},
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

    /// Paused on failure (`spec.failurePolicy`): every due slot is skipped `paused_on_failure`
    /// with the pause's note, every manual run refused, until the pause is resumed. The plan
    /// feeds [`EruEvent::Paused`] while the pause holds and the spec's state only once none does
    /// (a pass that finds it resumed elsewhere catches up here).
    #[state(superstate = "idle")]
    fn paused_on_failure(event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        match event {
            EruEvent::Paused { pause, new } => {
                // a pause the journal lost, restored from the status: journaled again
                paused(context, pause, *new);
                Handled
            }
            EruEvent::Resumed {
                pause,
                journaled,
                at,
                by,
            } => {
                resumed(context, pause, *journaled, *at, by);
                Transition(State::waiting())
            }
            EruEvent::SlotsDue(slots) => {
                skip_all_noted(context, slots, Reason::PausedOnFailure, slots.paused.clone())
            }
            _ => stopped(event, context, Reason::PausedOnFailure),
        }
    }

    /// The spec is invalid: every slot is skipped (`spec_invalid`), every manual run refused.
    #[state(superstate = "idle")]
    fn invalid(event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        match event {
            EruEvent::SpecInvalid { .. } => Handled,
            _ => stopped(event, context, Reason::SpecInvalid),
        }
    }

    /// The target does not exist: every slot is skipped (`target_missing`), every manual run
    /// refused.
    #[state(superstate = "idle")]
    fn target_missing(event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        match event {
            EruEvent::TargetMissing => Handled,
            _ => stopped(event, context, Reason::TargetMissing),
        }
    }

    /// A restart whose gates are open, asking the fleet for a place: granted, it is decided;
    /// refused, it waits (a slot unaccounted, a manual run journaled `waiting`) for a place or
    /// its deadline. Lives within one pass (between the plan and the fleet's answer): never
    /// restored. `superseding`: it replaces a slot's restart that never landed.
    #[state]
    fn starting(
        restart: &Restart,
        superseding: &bool,
        event: &EruEvent,
        context: &mut EruDecision,
    ) -> Outcome<State> {
        let _ = superseding; // only the phase shown while it asks (see `Phase`)
        match event {
            EruEvent::Place { granted: true } => {
                context.record(restart.decided_record());
                Transition(State::restarting(restart.clone()))
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
                let rollout = restart.landed(*at, *generation);
                context.record(restart.patched_record(&rollout));
                Transition(State::rolling_out(rollout))
            }
            EruEvent::PatchFailed {
                message,
                at,
                retry_at,
            } => {
                let (record, next) = restart.failed(message, *at, *retry_at);
                context.record(record);
                Transition(State::restarting(next))
            }
            EruEvent::RestartPending(pending) => match restart.give_up(pending) {
                Some(record) => {
                    context.record(record);
                    Transition(State::waiting())
                }
                None => {
                    if pending.retry_due {
                        context.act(restart.patch());
                    }
                    Handled
                }
            },
            EruEvent::Silenced { id, until } => {
                if let Some(slot) = restart.slot() {
                    let (id, until) = (id.clone(), *until);
                    context.record(EruRecord::Silenced { slot, id, until });
                }
                Handled
            }
            EruEvent::SlotsDue(slots) => {
                record_slots(context, &slots.records);
                match &slots.due {
                    Some(due) => newer_slot(context, restart, due, slots),
                    None => Handled,
                }
            }
            _ => Super,
        }
    }

    /// The target rolls out the restart.
    #[state(superstate = "busy")]
    fn rolling_out(rollout: &Rollout, event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        let finish = |context: &mut EruDecision, outcome, at, reason| {
            context.record(rollout.ended(End { outcome, at, reason }));
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
            EruEvent::RolloutReverted { revert, at } => match rollout.slot() {
                // the pods roll again, to the template without the restart: it did not happen
                Some(slot) => {
                    let reason = Some(revert.text(slot));
                    let outcome = finish(context, vocab::Outcome::Failed, Some(*at), reason);
                    let (revert, at) = (revert.clone(), *at);
                    context.record(EruRecord::Reverted { slot, revert, at });
                    outcome
                }
                None => Handled,
            },
            EruEvent::SlotsDue(slots) => {
                record_slots(context, &slots.records);
                if let Some(record) = slots.due.as_ref().and_then(|due| rollout.concurrent(due)) {
                    context.record(EruRecord::Slots(vec![record]));
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
            EruEvent::Paused { pause, new } => {
                paused(context, pause, *new);
                Transition(State::paused_on_failure())
            }
            EruEvent::Resumed {
                pause,
                journaled,
                at,
                by,
            } => {
                // resumed in the pass that found it (the phase shown was not the pause's)
                resumed(context, pause, *journaled, *at, by);
                Handled
            }
            EruEvent::Reverted { slot, revert, at } => {
                context.record(EruRecord::Reverted {
                    slot: *slot,
                    revert: revert.clone(),
                    at: *at,
                });
                Handled
            }
            EruEvent::Adopt {
                slot,
                target,
                patched_at,
                generation,
                deadline,
            } => {
                let restart = Restart::new(Cause::Slot(*slot), target, *deadline);
                take_over(context, &restart, *patched_at, *generation)
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

/// An Eru that cannot restart for `reason` (its spec invalid, its target missing): a valid spec
/// moves it on; its slots are skipped and its manual runs refused for that reason.
fn stopped(event: &EruEvent, context: &mut EruDecision, reason: Reason) -> Outcome<State> {
    match event {
        EruEvent::SpecReady { suspend: false } => Transition(State::waiting()),
        EruEvent::SpecReady { suspend: true } => Transition(State::suspended()),
        EruEvent::SlotsDue(slots) => skip_all(context, slots, reason),
        EruEvent::RunDue(due) => refuse_run(context, due, reason),
        _ => Super,
    }
}

/// Journals `pause` if it is `new` to the journal.
fn paused(context: &mut EruDecision, pause: &super::pause::Pause, new: bool) {
    if new {
        context.record(EruRecord::Paused(pause.clone()));
    }
}

/// Records the resume of `pause`, journaling the pause first if the journal lacks it.
fn resumed(
    context: &mut EruDecision,
    pause: &super::pause::Pause,
    journaled: bool,
    at: DateTime<Utc>,
    by: &Option<String>,
) {
    if !journaled {
        context.record(EruRecord::Paused(pause.clone()));
    }
    context.record(EruRecord::Resumed {
        since: pause.since,
        at,
        by: by.clone(),
    });
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

/// A slot `due` while `restart` has not landed. A slot's restart is superseded by a newer slot
/// (given up, and the newer slot starts); a manual run is given up for the slot's restart, which
/// does what the run asked, if that restart starts (a slot skipped, held or run dry leaves the run
/// going on).
fn newer_slot(context: &mut EruDecision, restart: &Restart, due: &Due, slots: &SlotsDue) -> Outcome<State> {
    match &restart.cause {
        Cause::Slot(slot) if due.slot > *slot => {
            if let Some(record) = restart.superseded(due.slot, &slots.journal_outages) {
                context.record(record);
            }
            match start(context, due, slots, true) {
                Handled => Transition(State::waiting()),
                started => started,
            }
        }
        Cause::Slot(_) => Handled,
        Cause::Run(_) => match start(context, due, slots, false) {
            Handled => Handled,
            started => {
                context.record(restart.run_superseded(due.slot));
                started
            }
        },
    }
}

/// Takes over a restart whose patch landed at `at` (before a crash, by another replica, or in a
/// lost journal's time): decided and patched as the cluster shows, never patched twice.
fn take_over(
    context: &mut EruDecision,
    restart: &Restart,
    at: DateTime<Utc>,
    generation: Option<i64>,
) -> Outcome<State> {
    let rollout = restart.landed(at, generation);
    context.record(restart.decided_record());
    context.record(restart.patched_record(&rollout));
    Transition(State::rolling_out(rollout))
}

/// Starts the restart of `due` if its gate is open (recording it as landed if the target already
/// carries it), else records it skipped. A closed health gate holds it (unless it supersedes a
/// restart in flight, which keeps its own terms). An open gate asks the fleet for a place first
/// ([`State::Starting`]); `superseding` tells that it replaces a restart that never landed.
fn start(context: &mut EruDecision, due: &Due, slots: &SlotsDue, superseding: bool) -> Outcome<State> {
    if let Some(template) = slots.template.filter(|t| t.slot == due.slot) {
        // landed before a crash, or by another replica
        return take_over(
            context,
            &Restart::decided(due),
            template.landed_at,
            template.generation,
        );
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
                patch: dry_run_text(super::RESTARTED_AT_ANNOTATION, &text(due.slot), &due.target),
            });
            Handled
        }
        None => {
            let restart = Restart::decided(due);
            context.act(restart.ask_place());
            Transition(State::starting(restart, superseding))
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
        return take_over(context, &Restart::of_run(run), at, None);
    }
    let end = |context: &mut EruDecision, outcome, reason| {
        context.record(EruRecord::Run(RunRecord::ended(run, outcome, None, reason)));
        Handled
    };
    if due.now > run.deadline {
        let why = (due.waits().or_else(|| due.waited.clone()))
            .unwrap_or_else(|| Reason::PastDeadline.as_str().to_string());
        let reason = format!("not started by its deadline {} ({why})", text(run.deadline));
        return end(context, RunOutcome::Refused, reason);
    }
    if due.blocked.is_some() {
        return Handled; // it waits; the plan looks again at the gate poll or its deadline
    }
    if due.dry_run {
        let reason = dry_run_text(super::run::RUN_ANNOTATION, &run.token, &run.target);
        return end(context, RunOutcome::DryRun, reason);
    }
    let restart = Restart::of_run(run);
    context.act(restart.ask_place());
    Transition(State::starting(restart, false))
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
        Reason::PausedOnFailure => "the Eru is paused on failure (resume it: kubectl eru resume)",
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

/// What a dry run would have patched: `annotation` set to `value` on `target`'s pod template.
fn dry_run_text(annotation: &str, value: &str, target: &str) -> String {
    format!("dry run: would have set {annotation}={value} on the pod template of {target}")
}

/// Records every slot, the due one skipped for `reason`.
fn skip_all(context: &mut EruDecision, slots: &SlotsDue, reason: Reason) -> Outcome<State> {
    skip_all_noted(context, slots, reason, None)
}

/// [`skip_all`], the due slot's record with `note`.
fn skip_all_noted(
    context: &mut EruDecision,
    slots: &SlotsDue,
    reason: Reason,
    note: Option<String>,
) -> Outcome<State> {
    let mut records = slots.records.clone();
    records.extend(slots.due.iter().map(|d| SlotRecord {
        note: note.clone(),
        ..SlotRecord::one(d.slot, reason, None, &d.target)
    }));
    record_slots(context, &records);
    Handled
}

impl Phase for State {
    fn phase(&self) -> &'static str {
        match self {
            State::Waiting {} => "Waiting",
            State::Suspended {} => "Suspended",
            State::PausedOnFailure {} => "PausedOnFailure",
            State::Invalid {} => "Invalid",
            State::TargetMissing {} => "TargetMissing",
            State::Restarting { .. } => "Restarting",
            State::RollingOut { .. } => "RollingOut",
            // what it showed before it asked: a restart that waits for a place is not a phase
            State::Starting {
                superseding: true, ..
            } => "Restarting",
            State::Starting { .. } => "Waiting",
        }
    }
}

impl State {
    /// The cause of the restart in flight (decided, not ended), if one is.
    pub fn cause(&self) -> Option<&Cause> {
        match self {
            State::Restarting { restart } => Some(&restart.cause),
            State::RollingOut { rollout } => Some(&rollout.cause),
            _ => None,
        }
    }

    /// The slot being restarted, in Restarting and RollingOut.
    pub fn slot(&self) -> Option<DateTime<Utc>> {
        self.cause().and_then(Cause::slot)
    }

    /// The token of the manual run in flight, if one is.
    pub fn token(&self) -> Option<&str> {
        Some(self.cause()?.run()?.token.as_str())
    }

    /// Whether it is idle: no restart asks for a place or is in flight.
    pub fn idle(&self) -> bool {
        matches!(
            self,
            State::Waiting {}
                | State::Suspended {}
                | State::PausedOnFailure {}
                | State::Invalid {}
                | State::TargetMissing {}
        )
    }

    /// Whether a restart or a manual run is in flight (it holds a place in the fleet).
    pub fn in_flight(&self) -> bool {
        self.cause().is_some()
    }

    /// The restart asking the fleet for a place, if one does.
    pub fn asking(&self) -> Option<&Restart> {
        match self {
            State::Starting { restart, .. } => Some(restart),
            _ => None,
        }
    }

    /// The place in the queue (the slot, or when the manual run was asked) and the deadline of
    /// the restart asking the fleet for a place, if one does.
    pub fn asks_place(&self) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        self.asking().map(|r| (r.cause.queued_at(), r.deadline))
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
}

/// Restores the machine: a restart in flight comes from the journal (never from `status.phase`,
/// which may lag it or belong to a lost journal); otherwise the idle phase the status shows.
pub fn restore(phase: Option<&str>, in_flight: Option<InFlight>) -> State {
    match in_flight {
        Some(InFlight::Pending(restart)) => State::Restarting { restart },
        Some(InFlight::Landed(rollout)) => State::RollingOut { rollout },
        None => match phase {
            Some("Suspended") => State::Suspended {},
            Some("PausedOnFailure") => State::PausedOnFailure {},
            Some("Invalid") => State::Invalid {},
            Some("TargetMissing") => State::TargetMissing {},
            _ => State::Waiting {},
        },
    }
}

#[cfg(test)]
mod tests;
