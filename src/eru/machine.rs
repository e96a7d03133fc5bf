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

use chrono::{DateTime, Utc};
use statig::prelude::*;

use super::ledger::{self, Due, Epoch, Reason, SlotRecord, Window};
use super::schedule::slot_text as text;
use crate::machine::{Decision, EventName, Phase};

/// Whether the target may be restarted now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    Open,
    Paused,
    Unhealthy,
    Missing,
    /// A pod-template change would not roll every pod (an `OnDelete` strategy, a partition); why
    /// travels beside the gate as a note.
    NotRollable,
}

impl Gate {
    /// Why a closed gate holds a restart back.
    pub fn reason(self) -> Option<Reason> {
        match self {
            Gate::Open => None,
            Gate::Paused => Some(Reason::TargetPaused),
            Gate::Unhealthy => Some(Reason::TargetUnhealthy),
            Gate::Missing => Some(Reason::TargetMissing),
            Gate::NotRollable => Some(Reason::TargetNotRollable),
        }
    }
}

/// The slot a target's pod template carries, and when that patch landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Template {
    pub slot: DateTime<Utc>,
    pub landed_at: DateTime<Utc>,
}

/// Slots that came due since the cursor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotsDue {
    /// Missed or skipped slots (accounted, not restartable).
    pub records: Vec<SlotRecord>,
    /// The slot to restart now, if any.
    pub due: Option<Due>,
    /// The gate of the due slot's target.
    pub gate: Gate,
    /// What a closed gate's reason alone does not say (why the target is not rollable): the
    /// skipped slot's note.
    pub gate_note: Option<String>,
    /// What the due slot's target template carries (a restart that landed earlier).
    pub template: Option<Template>,
    /// The fleet has room for one more restart (`--max-concurrent-restarts`): without it the due
    /// slot waits, unaccounted, until a restart ends or its deadline passes.
    pub capacity: bool,
    /// When the journal took no writes although the operator ran (since the cursor): a restart
    /// in flight that a journal outage kept from landing is not `superseded` by the due slot.
    pub journal_outages: Vec<Window>,
}

/// A decided restart whose patch has not landed yet, as the journal holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restart {
    pub slot: DateTime<Utc>,
    pub target: String,
    /// Never patched after this instant.
    pub deadline: DateTime<Utc>,
    /// Failed patches so far, and the API's message of the last one.
    pub attempts: u32,
    pub last_error: Option<String>,
}

impl Restart {
    fn decided(due: &Due) -> Self {
        Self {
            slot: due.slot,
            target: due.target.clone(),
            deadline: due.deadline,
            attempts: 0,
            last_error: None,
        }
    }

    /// The restart's reason when given up for `reason`: the reason's name, what happened, and the
    /// last API message if patches failed.
    fn give_up_text(&self, reason: Reason, what: &str) -> String {
        let mut text = format!("{}: {what}", reason.as_str());
        if let Some(error) = &self.last_error {
            let n = self.attempts;
            text.push_str(&format!(
                "; last error ({n} failed patch{}): {error}",
                if n == 1 { "" } else { "es" }
            ));
        }
        text
    }
}

/// What a restart that has not landed must do now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    pub now: DateTime<Utc>,
    /// Why it may not go on (the Eru suspended or invalid, the target paused, unhealthy, not
    /// rollable or gone).
    pub blocked: Option<Reason>,
    /// What that reason alone does not say (why the target is not rollable).
    pub note: Option<String>,
    /// The backoff since the last failed patch is over (or there was none).
    pub retry_due: bool,
    /// An operator downtime since the restart was decided, if any.
    pub downtime: Option<Window>,
    /// A journal outage between the restart's slot and its deadline, if any: the operator ran
    /// but could journal nothing (not even a failed patch), so it could not go on with it.
    pub journal_outage: Option<Window>,
}

/// Events of an Eru, derived by the reconciler from what it observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EruEvent {
    /// The schedule or time zone does not parse.
    SpecInvalid {
        reason: String,
    },
    /// The spec's target does not exist.
    TargetMissing,
    /// The spec is valid and the target exists.
    SpecReady {
        suspend: bool,
    },
    SlotsDue(SlotsDue),
    /// A decided restart has not landed: patch it, wait for the backoff, or give it up.
    RestartPending(Pending),
    /// The target's template carries the slot being restarted.
    RestartPatched {
        at: DateTime<Utc>,
    },
    /// The restart patch failed; the next try is due at `retry_at`.
    PatchFailed {
        message: String,
        at: DateTime<Utc>,
        retry_at: DateTime<Utc>,
    },
    RolloutProgressed,
    RolloutDone {
        finished_at: DateTime<Utc>,
    },
    RolloutFailed {
        finished_at: DateTime<Utc>,
        reason: String,
    },
    /// The target being rolled out disappeared.
    TargetGone,
}

impl EventName for EruEvent {
    fn name(&self) -> &'static str {
        match self {
            EruEvent::SpecInvalid { .. } => "SpecInvalid",
            EruEvent::TargetMissing => "TargetMissing",
            EruEvent::SpecReady { .. } => "SpecReady",
            EruEvent::SlotsDue(_) => "SlotDue",
            EruEvent::RestartPending(_) => "RestartPending",
            EruEvent::RestartPatched { .. } => "RestartPatched",
            EruEvent::PatchFailed { .. } => "PatchFailed",
            EruEvent::RolloutProgressed => "RolloutProgressed",
            EruEvent::RolloutDone { .. } => "RolloutDone",
            EruEvent::RolloutFailed { .. } => "RolloutFailed",
            EruEvent::TargetGone => "TargetGone",
        }
    }
}

/// How a restart ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestartOutcome {
    Succeeded,
    Failed,
    Abandoned,
    /// Journaled by a dry run: nothing was patched.
    DryRun,
}

impl RestartOutcome {
    pub const ALL: [RestartOutcome; 4] = [
        RestartOutcome::Succeeded,
        RestartOutcome::Failed,
        RestartOutcome::Abandoned,
        RestartOutcome::DryRun,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RestartOutcome::Succeeded => "succeeded",
            RestartOutcome::Failed => "failed",
            RestartOutcome::Abandoned => "abandoned",
            RestartOutcome::DryRun => "dry_run",
        }
    }
}

/// What the cluster remembers of an Eru's ledger (its status) when the journal has none of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Seed {
    pub accounted_through: Option<DateTime<Utc>>,
    pub missed_slots: i64,
    pub last_missed: Option<DateTime<Utc>>,
    pub last_success: Option<DateTime<Utc>>,
    pub last_failure: Option<DateTime<Utc>>,
}

/// What the journal gets from a pass, before anything is acted on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EruRecord {
    /// The journal starts this Eru's ledger from what its status remembers.
    Seed(Seed),
    /// A generation's spec took effect.
    Epoch(Epoch),
    /// The cursor moves here: slots up to it are accounted elsewhere (status, the target's
    /// template) or cannot be (their spec is unknown).
    Advance(DateTime<Utc>),
    /// Missed or skipped slots.
    Slots(Vec<SlotRecord>),
    /// A restart of a slot was decided (before its patch is sent).
    Decided {
        slot: DateTime<Utc>,
        deadline: DateTime<Utc>,
        target: String,
    },
    /// The restart's patch landed: the slot fired.
    Patched {
        slot: DateTime<Utc>,
        at: DateTime<Utc>,
        target: String,
    },
    /// A restart patch failed.
    Attempt {
        slot: DateTime<Utc>,
        at: DateTime<Utc>,
        error: String,
        retry_at: DateTime<Utc>,
    },
    /// A restart whose patch landed ended.
    Finished {
        slot: DateTime<Utc>,
        outcome: RestartOutcome,
        /// When it ended, if the machine knows (else: when it was journaled).
        finished_at: Option<DateTime<Utc>>,
        reason: Option<String>,
    },
    /// A dry run's slot: the restart journaled as decided and ended `dry_run` (what would have
    /// been patched in `patch`), its slot recorded `skipped/dry_run`.
    DryRun {
        slot: DateTime<Utc>,
        deadline: DateTime<Utc>,
        target: String,
        patch: String,
    },
    /// A restart whose patch never landed was given up: abandoned, its slot recorded.
    GaveUp {
        slot: DateTime<Utc>,
        reason: String,
        record: SlotRecord,
    },
}

/// What the reconciler does in the cluster once the pass is journaled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EruAction {
    /// Set the slot on the target's pod template (idempotent: keyed by the slot).
    PatchRestart { slot: DateTime<Utc>, target: String },
    /// Tell the user the spec is invalid (an Event).
    ReportInvalid { reason: String },
    /// Tell the user the target does not exist (an Event).
    ReportTargetMissing,
}

/// What one Eru pass decided.
pub type EruDecision = Decision<EruAction, EruRecord>;

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
                    Some(due) => start(context, due, slots),
                    None => Handled,
                }
            }
            _ => Super,
        }
    }

    #[state(superstate = "idle")]
    fn suspended(event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        match event {
            EruEvent::SpecReady { suspend: false } => Transition(State::waiting()),
            EruEvent::SlotsDue(slots) => skip_all(context, slots, Reason::Suspended),
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
            _ => Super,
        }
    }

    /// The restart is decided and journaled; its patch has not landed yet.
    #[state(superstate = "busy")]
    fn restarting(restart: &Restart, event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        match event {
            EruEvent::RestartPatched { at } => {
                context.record(EruRecord::Patched {
                    slot: restart.slot,
                    at: *at,
                    target: restart.target.clone(),
                });
                Transition(State::rolling_out(restart.slot))
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
                    ..restart.clone()
                }))
            }
            EruEvent::RestartPending(pending) => {
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
                    Transition(State::waiting())
                } else if pending.now > restart.deadline {
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
                    Transition(State::waiting())
                } else {
                    if pending.retry_due {
                        context.act(EruAction::PatchRestart {
                            slot: restart.slot,
                            target: restart.target.clone(),
                        });
                    }
                    Handled
                }
            }
            EruEvent::SlotsDue(slots) => {
                record_slots(context, &slots.records);
                match &slots.due {
                    Some(due) if due.slot > restart.slot => {
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
                        match start(context, due, slots) {
                            Handled => Transition(State::waiting()),
                            started => started,
                        }
                    }
                    _ => Handled,
                }
            }
            _ => Super,
        }
    }

    /// The target rolls out the restart of `slot`.
    #[state(superstate = "busy")]
    fn rolling_out(slot: &DateTime<Utc>, event: &EruEvent, context: &mut EruDecision) -> Outcome<State> {
        let finish = |context: &mut EruDecision, outcome, finished_at, reason| {
            context.record(EruRecord::Finished {
                slot: *slot,
                outcome,
                finished_at,
                reason,
            });
            Transition(State::waiting())
        };
        match event {
            EruEvent::RolloutProgressed => Handled,
            EruEvent::RolloutDone { finished_at } => {
                finish(context, RestartOutcome::Succeeded, Some(*finished_at), None)
            }
            EruEvent::RolloutFailed { finished_at, reason } => finish(
                context,
                RestartOutcome::Failed,
                Some(*finished_at),
                Some(reason.clone()),
            ),
            EruEvent::TargetGone => finish(
                context,
                RestartOutcome::Abandoned,
                None,
                Some("the target disappeared during the rollout".into()),
            ),
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
            _ => Handled,
        }
    }

    /// A restart is in flight: it finishes (or is given up) on its own terms; the spec's state
    /// applies once it has ended.
    #[superstate]
    fn busy() -> Outcome<State> {
        Handled
    }

    fn after_transition(&mut self, from: &State, to: &State, context: &mut EruDecision) {
        context.transition(from, to);
    }
}

/// Records `records`, if any.
fn record_slots(context: &mut EruDecision, records: &[SlotRecord]) {
    if !records.is_empty() {
        context.record(EruRecord::Slots(records.to_vec()));
    }
}

/// Starts the restart of `due` if its gate is open (recording it as landed if the target already
/// carries it), else records it skipped.
fn start(context: &mut EruDecision, due: &Due, slots: &SlotsDue) -> Outcome<State> {
    let decided = EruRecord::Decided {
        slot: due.slot,
        deadline: due.deadline,
        target: due.target.clone(),
    };
    if let Some(template) = slots.template.filter(|t| t.slot == due.slot) {
        // landed before a crash, or by another replica: never patched twice
        context.record(decided);
        context.record(EruRecord::Patched {
            slot: due.slot,
            at: template.landed_at,
            target: due.target.clone(),
        });
        return Transition(State::rolling_out(due.slot));
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
        // queued for fleet capacity: the slot stays unaccounted until it runs or its deadline
        None if !slots.capacity => Handled,
        None => {
            context.record(decided);
            Transition(State::restarting(Restart::decided(due)))
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
            crate::journal::ts(from),
            crate::journal::ts(to)
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
            State::Restarting { .. } => "Restarting",
            State::RollingOut { .. } => "RollingOut",
        }
    }
}

impl State {
    /// The slot being restarted, in Restarting and RollingOut.
    pub fn slot(&self) -> Option<DateTime<Utc>> {
        match self {
            State::Restarting { restart } => Some(restart.slot),
            State::RollingOut { slot } => Some(*slot),
            _ => None,
        }
    }
}

/// A restart in flight, as the journal holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InFlight {
    /// Decided; its patch has not landed.
    Pending(Restart),
    /// Its patch landed at this slot; the rollout is being tracked.
    Landed(DateTime<Utc>),
}

/// Restores the machine: a restart in flight comes from the journal (never from `status.phase`,
/// which may lag it or belong to a lost journal); otherwise the idle phase the status shows.
pub fn restore(phase: Option<&str>, in_flight: Option<InFlight>) -> State {
    match in_flight {
        Some(InFlight::Pending(restart)) => State::Restarting { restart },
        Some(InFlight::Landed(slot)) => State::RollingOut { slot },
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
