//! The Eru machine's vocabulary: the events a pass derives from what it observed, the records
//! the machine hands the journal and the actions it hands the reconciler. Pure data.

use chrono::{DateTime, Utc};

use super::{
    hold::{Answer, Held},
    ledger::{Due, Epoch, Reason, SlotRecord, Window},
    pause::Pause,
    run::{RunDue, RunRecord},
};
use crate::machine::{Decision, EventName};
use crate::vocab::Outcome;

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

/// A restart another field manager undid: the template no longer carries its slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Revert {
    /// The manager that wrote the template after the patch, if the managedFields name one.
    pub by: Option<String>,
    /// When it wrote (the API server's clock, seconds), if known.
    pub at: Option<DateTime<Utc>>,
    /// The slot the template carries now, if any (none: the annotation was removed).
    pub carries: Option<DateTime<Utc>>,
}

impl Revert {
    /// The revert in words, for a reason, a note and an Event.
    pub fn text(&self, slot: DateTime<Utc>) -> String {
        let what = match self.carries {
            Some(other) => format!("replaced by {}", super::schedule::slot_text(other)),
            None => "removed".to_string(),
        };
        let who = match (&self.by, self.at) {
            (Some(by), Some(at)) => format!(" by {by} at {}", super::schedule::slot_text(at)),
            (Some(by), None) => format!(" by {by}"),
            _ => " (the managedFields name no writer of it)".to_string(),
        };
        format!(
            "reverted: the pod template's {} ({}) was {what}{who}",
            super::RESTARTED_AT_ANNOTATION,
            super::schedule::slot_text(slot)
        )
    }
}

/// The slot a target's pod template carries, and when that patch landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Template {
    pub slot: DateTime<Utc>,
    pub landed_at: DateTime<Utc>,
    /// The target's generation as seen carrying it.
    pub generation: Option<i64>,
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
    /// When the journal took no writes although the operator ran (since the cursor): a restart
    /// in flight that a journal outage kept from landing is not `superseded` by the due slot.
    pub journal_outages: Vec<Window>,
    /// What the health gates answered (asked only when a slot may be due).
    pub health: Answer,
    /// The hold of an earlier pass, if a gate held a slot (its start is kept for the same slot).
    pub earlier_hold: Option<Held>,
    /// What the need conditions answered (asked only when a slot may be due); boxed, as rare.
    pub need: Box<super::need::Need>,
    /// The note of the pause on failure in force, if one is: a due slot is skipped with it.
    pub paused: Option<String>,
    /// When this pass observed.
    pub now: DateTime<Utc>,
}

/// The fleet's answer for a due slot (see [`crate::eru::fleet`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grant {
    Granted,
    /// It waits; `ahead` slots wait before it, `in_flight` restarts hold the places; `paced`: a
    /// place was free, the restart pace (`--restart-rate`) held it.
    Queued {
        ahead: usize,
        in_flight: usize,
        paced: bool,
    },
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
// `SlotsDue` is the large one: an event lives on one pass's stack and is fed by reference, never
// kept in a collection, so boxing it would only add an allocation per pass
#[allow(clippy::large_enum_variant)]
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
    /// A pause on failure is in force; `new`: tripped now (or shown by the status and missing
    /// from the journal), so it is journaled and told.
    Paused {
        pause: Pause,
        new: bool,
    },
    /// The Eru's resume annotation names the pause in force (`journaled`: the journal holds it):
    /// resumed at `at`, by the annotation's field manager.
    Resumed {
        pause: Pause,
        journaled: bool,
        at: DateTime<Utc>,
        by: Option<String>,
    },
    SlotsDue(SlotsDue),
    /// The rest of a due slot whose gate is open: whether the fleet gave it a place
    /// (`--max-concurrent-restarts`). Without one the slot waits, unaccounted, until a place
    /// frees up or its deadline passes.
    Place {
        granted: bool,
    },
    /// A decided restart has not landed: patch it, wait for the backoff, or give it up.
    RestartPending(Pending),
    /// The target's template carries the slot being restarted (at `generation`, when known).
    RestartPatched {
        at: DateTime<Utc>,
        generation: Option<i64>,
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
    /// Another field manager undid the restart being rolled out (its slot left the template).
    RolloutReverted {
        revert: Revert,
        at: DateTime<Utc>,
    },
    /// Another field manager undid the latest restart after its rollout ended.
    Reverted {
        slot: DateTime<Utc>,
        revert: Revert,
        at: DateTime<Utc>,
    },
    /// A restart the status shows rolling out and the target carries, whose journal is gone: the
    /// pass takes it over (decided and patched, as the cluster shows), so its end is recorded.
    Adopt {
        slot: DateTime<Utc>,
        target: String,
        /// When its patch landed (as the status says, else first seen), and the target's
        /// generation then.
        patched_at: DateTime<Utc>,
        generation: Option<i64>,
        deadline: DateTime<Utc>,
    },
    /// The Eru asks for a manual run the journal has not started or ended (boxed: rare).
    RunDue(Box<RunDue>),
    /// The manual run `token` waits, but the Eru no longer asks for it (`now`: the token it asks
    /// for instead, if any).
    RunWithdrawn {
        token: String,
        now: Option<String>,
    },
    /// An Alertmanager silence was created for the restart about to be patched.
    Silenced {
        id: String,
        until: DateTime<Utc>,
    },
    /// The silence of the restart of `slot` was expired (its rollout ended).
    SilenceExpired {
        slot: DateTime<Utc>,
        at: DateTime<Utc>,
    },
}

impl EventName for EruEvent {
    fn name(&self) -> &'static str {
        match self {
            EruEvent::SpecInvalid { .. } => "SpecInvalid",
            EruEvent::TargetMissing => "TargetMissing",
            EruEvent::SpecReady { .. } => "SpecReady",
            EruEvent::Paused { .. } => "PausedOnFailure",
            EruEvent::Resumed { .. } => "Resumed",
            // the second half of one decision: the transition it causes is the slot's
            EruEvent::SlotsDue(_) | EruEvent::Place { .. } => "SlotDue",
            EruEvent::RestartPending(_) => "RestartPending",
            EruEvent::RestartPatched { .. } => "RestartPatched",
            EruEvent::PatchFailed { .. } => "PatchFailed",
            EruEvent::RolloutProgressed => "RolloutProgressed",
            EruEvent::RolloutDone { .. } => "RolloutDone",
            EruEvent::RolloutFailed { .. } => "RolloutFailed",
            EruEvent::TargetGone => "TargetGone",
            EruEvent::RolloutReverted { .. } | EruEvent::Reverted { .. } => "Reverted",
            EruEvent::Adopt { .. } => "Adopt",
            EruEvent::RunDue(_) => "RunRequested",
            EruEvent::Silenced { .. } => "Silenced",
            EruEvent::RunWithdrawn { .. } => "RunWithdrawn",
            EruEvent::SilenceExpired { .. } => "SilenceExpired",
        }
    }
}

/// What the cluster remembers of an Eru's ledger (its status) when the journal has none of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Remembered {
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
    Seed(Remembered),
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
        /// The target's generation once it had landed, when known.
        generation: Option<i64>,
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
        /// When its patch landed (the restart's duration runs from here).
        patched_at: DateTime<Utc>,
        outcome: Outcome,
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
    /// A manual run's record (kept apart from the slots and restarts).
    Run(RunRecord),
    /// The restart of `slot` holds the Alertmanager silence `id` (until `until`).
    Silenced {
        slot: DateTime<Utc>,
        id: String,
        until: DateTime<Utc>,
    },
    /// The restart of `slot`'s silence was expired at `at`.
    SilenceExpired { slot: DateTime<Utc>, at: DateTime<Utc> },
    /// Another field manager undid the restart of `slot` (seen at `at`); its outcome and its
    /// slot's record stay (the slot is still accounted once).
    Reverted {
        slot: DateTime<Utc>,
        revert: Revert,
        at: DateTime<Utc>,
    },
    /// The Eru paused itself on failure (told, once journaled, by an Event and the
    /// notifications).
    Paused(Pause),
    /// The pause on failure of `since` was resumed at `at` (by the annotation's field manager).
    Resumed {
        since: DateTime<Utc>,
        at: DateTime<Utc>,
        by: Option<String>,
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
    /// Tell the user that the slots of this window cannot be accounted (an Event): the journal
    /// holds no record of the Eru before its end and the spec changed since the last slot the
    /// cluster remembers.
    ReportGap { from: DateTime<Utc>, to: DateTime<Utc> },
    /// A health gate holds the due slot: it waits, unaccounted (no record, no fleet place), and
    /// the user is told (an Event) on the first pass that holds it.
    Hold(Held),
    /// Ask the fleet for a place for the due slot (`--max-concurrent-restarts`); the answer is fed
    /// back ([`EruEvent::Place`]).
    AskPlace {
        slot: DateTime<Utc>,
        deadline: DateTime<Utc>,
    },
    /// Set a manual run's token on the target's pod template (idempotent: keyed by the token).
    PatchRun { token: String, target: String },
    /// Tell the user the run-now annotation cannot be used (an Event).
    ReportBadRun { reason: String },
    /// Expire the Alertmanager silence `id` of the restart of `slot` (its rollout ended).
    ExpireSilence { slot: DateTime<Utc>, id: String },
}

/// What one Eru pass decided.
pub type EruDecision = Decision<EruAction, EruRecord>;
