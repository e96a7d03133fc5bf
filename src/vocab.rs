//! The ledger's vocabulary, one definition on both sides of the journal: how a slot was evaluated
//! ([`SlotResult`]), why (its [`Reason`]), how a restart went ([`Outcome`]), and which health gate
//! answered ([`GateKind`]). The machine's records, the journal's columns (written and read
//! back, typed: a row holding a value outside this vocabulary fails its read with its id), the
//! HTTP API's pages and filters, the OpenAPI document's enums, the pages and the metrics' labels
//! all use these values; a value's wire name (`as_str`, its serde name, its text in the journal)
//! is its variant's name in snake case. No other module spells these names
//! (`hack/vocabulary.py` checks it).
//!
//! Pure: serde, strum and utoipa's schema derive only (the journal's column types are in
//! `journal/columns.rs`).

use serde::{Deserialize, Serialize};
use strum::{EnumString, IntoStaticStr, VariantArray};
use utoipa::ToSchema;

/// The result of evaluating a slot.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    ToSchema,
    EnumString,
    IntoStaticStr,
    VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum SlotResult {
    /// Restarted.
    Fired,
    /// The operator could not act (down, or too late).
    Missed,
    /// The operator chose not to (suspended, target paused or unhealthy, ...).
    Skipped,
}

/// Why a slot was not restarted; and `scheduled`, the reason column of a slot that fired on its
/// schedule.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    ToSchema,
    EnumString,
    IntoStaticStr,
    VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Reason {
    /// The slot fired: restarted on its schedule (the journal's reason column of a `fired`
    /// record; the HTTP API shows no reason for a fired slot).
    Scheduled,
    /// No operator was running at the slot, or at its starting deadline after one stopped before
    /// restarting it (with the window: the last sign of life before, the next start).
    OperatorDown,
    /// The journal that would hold the slot's record is gone (lost or replaced, or another
    /// replica's), and the slot was not restarted (the target's `restartedAt` is older). The
    /// window runs from the last slot the cluster remembers to this journal's first run.
    JournalLost,
    /// The operator ran, but its journal took no writes (disk full, database down), so it could
    /// not restart the slot (nothing is patched without its record). The window runs from the
    /// last journal write that worked to the first that worked again.
    JournalUnavailable,
    /// Noticed later than `startingDeadlineSeconds`.
    PastDeadline,
    /// The restart was decided but every patch the API server was sent failed until the
    /// deadline (the restart's reason in `/history` has the API's message).
    PatchFailed,
    /// The Eru was suspended.
    Suspended,
    /// The Eru's spec had become invalid before the restart could start.
    SpecInvalid,
    /// The target was paused.
    TargetPaused,
    /// The target was not fully available before the restart.
    TargetUnhealthy,
    /// A newer slot came due while this one could still run: only the newest runs (one restart
    /// covers both).
    Superseded,
    /// The previous restart of this Eru was still rolling out.
    ConcurrentRollout,
    /// The target did not exist.
    TargetMissing,
    /// The Eru was deleted after deciding the restart and before its patch landed.
    EruDeleted,
    /// The restart instant fell in a blackout window (the record names the window).
    Blackout,
    /// The slot waited for a free restart under `--max-concurrent-restarts` (or the namespace
    /// cap) until its starting deadline passed.
    FleetCapacity,
    /// The Eru (or the operator) runs dry: the restart was journaled, not patched.
    DryRun,
    /// The target cannot be rolled by a pod-template change (an `OnDelete` strategy, a
    /// partition): the record says which.
    TargetNotRollable,
    /// A health gate held the slot until its starting deadline: a matching Prometheus alert
    /// fired (the note names the alerts and the hold).
    AlertFiring,
    /// A health gate held the slot until its starting deadline: pods matching the blocking-pod
    /// selector ran (the note names them and the hold).
    BlockingPods,
    /// A health gate held the slot until its starting deadline: a PodDisruptionBudget selecting
    /// the target's pods allowed no disruption (the note names it and the hold).
    PdbBlocked,
    /// A health gate held the slot until its starting deadline because its answer was unknown
    /// (Prometheus unreachable, `onUnknown: Hold`): the note has the error and the hold.
    GateUnknown,
    /// A need condition said the restart would not help (every pod younger than
    /// `minPodAgeSeconds`): the note has the evidence.
    NotNeeded,
    /// The need conditions could not be evaluated and `onUnknown: Skip`: the note has the error.
    NeedUnknown,
    /// The Eru paused itself after `spec.failurePolicy.pauseAfter` restarts in a row ended
    /// `failed` or `abandoned`, and no one has resumed it since (the note names those restarts).
    PausedOnFailure,
}

impl Reason {
    /// Every reason a slot may not be restarted for (all but [`Reason::Scheduled`]).
    pub fn not_restarted() -> impl Iterator<Item = Reason> {
        Reason::VARIANTS
            .iter()
            .copied()
            .filter(|r| *r != Reason::Scheduled)
    }

    /// The reason every surface shows for a slot recorded for this one (status, `/slots`,
    /// `/audit`, the CLI, the pages, the notifications): none for a fired slot, whose journaled
    /// `scheduled` is not a reason a slot was not restarted.
    pub fn shown(self) -> Option<Self> {
        (self != Reason::Scheduled).then_some(self)
    }

    /// Fired for `scheduled`; else missed (the operator could not act) or skipped (it chose not
    /// to).
    pub fn result(self) -> SlotResult {
        match self {
            Reason::Scheduled => SlotResult::Fired,
            Reason::OperatorDown
            | Reason::JournalLost
            | Reason::JournalUnavailable
            | Reason::PastDeadline
            | Reason::PatchFailed => SlotResult::Missed,
            _ => SlotResult::Skipped,
        }
    }
}

/// How a restart went: in progress, or how it ended.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    ToSchema,
    EnumString,
    IntoStaticStr,
    VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Outcome {
    /// Decided, its patch sent or not yet; its rollout not ended.
    InProgress,
    Succeeded,
    Failed,
    Abandoned,
    /// Journaled by a dry run: nothing was patched.
    DryRun,
}

impl Outcome {
    /// How a restart may end (all but in progress).
    pub const ENDED: [Outcome; 4] = [
        Outcome::Succeeded,
        Outcome::Failed,
        Outcome::Abandoned,
        Outcome::DryRun,
    ];
}

/// How a manual run (`mtsre.meitu.com/run-now`) stands or ended.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    ToSchema,
    EnumString,
    IntoStaticStr,
    VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum RunOutcome {
    /// Seen, not started: something stands in its way until its deadline (the reason says what).
    Waiting,
    /// Decided, its patch sent or not yet; its rollout not ended.
    InProgress,
    Succeeded,
    Failed,
    /// Decided, but its patch never landed.
    Abandoned,
    /// Never started: the Eru was suspended, invalid or without target, or the run could not
    /// start by its deadline.
    Refused,
    /// Journaled by a dry run: nothing was patched.
    DryRun,
}

impl RunOutcome {
    /// Whether the run ended (it is never started again).
    pub fn ended(self) -> bool {
        !matches!(self, RunOutcome::Waiting | RunOutcome::InProgress)
    }
}

/// A health gate, as its evaluations are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, EnumString, IntoStaticStr, VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum GateKind {
    /// `gates.blockingPodSelector`.
    BlockingPods,
    /// `gates.alerts`.
    Alerts,
    /// `gates.podDisruptionBudgets`.
    PodDisruptionBudgets,
}

/// What a notification reports: a restart's end, or a slot not restarted (with its reason).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    ToSchema,
    EnumString,
    IntoStaticStr,
    VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum NoticeEvent {
    RestartSucceeded,
    RestartFailed,
    RestartAbandoned,
    /// A slot record `missed`, with its reason.
    SlotMissed,
    /// A slot record `skipped`, with its reason.
    SlotSkipped,
    /// A due slot a health gate has held longer than a route's `heldLongerThan` (not a record:
    /// the slot is recorded when it runs or its deadline passes).
    SlotHeld,
    /// A window whose slots the ledger cannot account (the journal holds no record of the Eru
    /// before its end and the spec changed since the last slot the cluster remembers): an audit
    /// of it cannot say every slot was accounted once.
    WindowUnaccounted,
    /// A manual run (`run-now`) whose rollout succeeded.
    RunSucceeded,
    /// A manual run whose rollout failed.
    RunFailed,
    /// A manual run whose patch never landed.
    RunAbandoned,
    /// A manual run that never started (the reason says why).
    RunRefused,
    /// The Eru paused itself: `spec.failurePolicy.pauseAfter` restarts in a row ended `failed` or
    /// `abandoned` (the note names them); its slots are skipped until someone resumes it.
    PausedOnFailure,
}

impl NoticeEvent {
    /// The event of a restart that ended so (none for a dry run's, whose slot record is one).
    pub fn of_outcome(outcome: Outcome) -> Option<Self> {
        match outcome {
            Outcome::Succeeded => Some(Self::RestartSucceeded),
            Outcome::Failed => Some(Self::RestartFailed),
            Outcome::Abandoned => Some(Self::RestartAbandoned),
            Outcome::DryRun | Outcome::InProgress => None,
        }
    }

    /// The event of a manual run that ended so (none for a dry run's: nothing was patched).
    pub fn of_run(outcome: RunOutcome) -> Option<Self> {
        match outcome {
            RunOutcome::Succeeded => Some(Self::RunSucceeded),
            RunOutcome::Failed => Some(Self::RunFailed),
            RunOutcome::Abandoned => Some(Self::RunAbandoned),
            RunOutcome::Refused => Some(Self::RunRefused),
            RunOutcome::Waiting | RunOutcome::InProgress | RunOutcome::DryRun => None,
        }
    }

    /// Whether it reports a manual run (not a slot).
    pub fn of_a_run(self) -> bool {
        matches!(
            self,
            Self::RunSucceeded | Self::RunFailed | Self::RunAbandoned | Self::RunRefused
        )
    }

    /// The event of a slot record with this result (none for a fired slot: its restart's end is).
    pub fn of_result(result: SlotResult) -> Option<Self> {
        match result {
            SlotResult::Missed => Some(Self::SlotMissed),
            SlotResult::Skipped => Some(Self::SlotSkipped),
            SlotResult::Fired => None,
        }
    }
}

/// The wire name of a value, and the value of a wire name.
macro_rules! wire_names {
    ($($kind:ty),*) => {$(
        impl $kind {
            /// Its wire name: the serde name, the journal's text, the metric label.
            pub fn as_str(self) -> &'static str {
                self.into()
            }

            /// The value whose wire name is `name`.
            pub fn parse(name: &str) -> Option<Self> {
                name.parse().ok()
            }
        }

        impl std::fmt::Display for $kind {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    )*};
}

wire_names!(SlotResult, Reason, Outcome, RunOutcome, GateKind, NoticeEvent);

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(value: impl Serialize) -> String {
        serde_json::to_value(value).unwrap().as_str().unwrap().to_string()
    }

    #[test]
    fn every_value_is_written_read_and_served_by_one_name() {
        for reason in Reason::VARIANTS {
            assert_eq!(wire(reason), reason.as_str());
            assert_eq!(Reason::parse(reason.as_str()), Some(*reason));
        }
        for outcome in Outcome::VARIANTS {
            assert_eq!(wire(outcome), outcome.as_str());
            assert_eq!(Outcome::parse(outcome.as_str()), Some(*outcome));
        }
        for outcome in RunOutcome::VARIANTS {
            assert_eq!(wire(outcome), outcome.as_str());
            assert_eq!(RunOutcome::parse(outcome.as_str()), Some(*outcome));
        }
        for result in SlotResult::VARIANTS {
            assert_eq!(wire(result), result.as_str());
            assert_eq!(SlotResult::parse(result.as_str()), Some(*result));
        }
        assert_eq!(
            (Reason::OperatorDown.as_str(), Outcome::InProgress.as_str()),
            ("operator_down", "in_progress")
        );
        assert_eq!(GateKind::BlockingPods.as_str(), "blocking_pods");
        assert_eq!(Reason::parse("unknown"), None);
        assert_eq!(Reason::not_restarted().count(), Reason::VARIANTS.len() - 1);
        assert!(Reason::not_restarted().all(|r| r.result() != SlotResult::Fired));
    }
}
