//! The journal's vocabulary: how a slot was evaluated, why one was not restarted and how a
//! restart ended. One definition, used by the machine (records), the journal (columns) and the
//! HTTP API (its filters and the OpenAPI document's enums): the wire name of each value is its
//! `as_str()`, which is also its serde name.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The result of evaluating a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SlotResult {
    /// Restarted.
    Fired,
    /// The operator could not act (down, or too late).
    Missed,
    /// The operator chose not to (suspended, target paused or unhealthy, ...).
    Skipped,
}

impl SlotResult {
    pub fn as_str(self) -> &'static str {
        match self {
            SlotResult::Fired => "fired",
            SlotResult::Missed => "missed",
            SlotResult::Skipped => "skipped",
        }
    }
}

/// Why a slot was not restarted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// No operator was running at the slot (with the window: last heartbeat, next start).
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
    /// A health gate held the slot until its starting deadline because its answer was unknown
    /// (Prometheus unreachable, `onUnknown: Hold`): the note has the error and the hold.
    GateUnknown,
}

impl Reason {
    /// Every reason.
    pub const ALL: [Reason; 20] = [
        Reason::OperatorDown,
        Reason::JournalLost,
        Reason::JournalUnavailable,
        Reason::PastDeadline,
        Reason::PatchFailed,
        Reason::Suspended,
        Reason::SpecInvalid,
        Reason::TargetPaused,
        Reason::TargetUnhealthy,
        Reason::Superseded,
        Reason::ConcurrentRollout,
        Reason::TargetMissing,
        Reason::EruDeleted,
        Reason::Blackout,
        Reason::FleetCapacity,
        Reason::DryRun,
        Reason::TargetNotRollable,
        Reason::AlertFiring,
        Reason::BlockingPods,
        Reason::GateUnknown,
    ];

    /// The reason whose wire name is `name`.
    pub fn parse(name: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::OperatorDown => "operator_down",
            Reason::JournalLost => "journal_lost",
            Reason::JournalUnavailable => "journal_unavailable",
            Reason::PastDeadline => "past_deadline",
            Reason::PatchFailed => "patch_failed",
            Reason::Suspended => "suspended",
            Reason::SpecInvalid => "spec_invalid",
            Reason::TargetPaused => "target_paused",
            Reason::TargetUnhealthy => "target_unhealthy",
            Reason::Superseded => "superseded",
            Reason::ConcurrentRollout => "concurrent_rollout",
            Reason::TargetMissing => "target_missing",
            Reason::EruDeleted => "eru_deleted",
            Reason::Blackout => "blackout",
            Reason::FleetCapacity => "fleet_capacity",
            Reason::DryRun => "dry_run",
            Reason::TargetNotRollable => "target_not_rollable",
            Reason::AlertFiring => "alert_firing",
            Reason::BlockingPods => "blocking_pods",
            Reason::GateUnknown => "gate_unknown",
        }
    }

    /// [`Reason::result`] as its label value.
    pub fn reason_result(self) -> &'static str {
        self.result().as_str()
    }

    /// Missed: the operator could not act. Skipped: it chose not to.
    pub fn result(self) -> SlotResult {
        match self {
            Reason::OperatorDown
            | Reason::JournalLost
            | Reason::JournalUnavailable
            | Reason::PastDeadline
            | Reason::PatchFailed => SlotResult::Missed,
            _ => SlotResult::Skipped,
        }
    }
}

/// How a restart ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
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

impl From<RestartOutcome> for Outcome {
    fn from(outcome: RestartOutcome) -> Self {
        match outcome {
            RestartOutcome::Succeeded => Outcome::Succeeded,
            RestartOutcome::Failed => Outcome::Failed,
            RestartOutcome::Abandoned => Outcome::Abandoned,
            RestartOutcome::DryRun => Outcome::DryRun,
        }
    }
}

/// A restart's outcome column: how it ended, or that it has not yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    InProgress,
    Succeeded,
    Failed,
    Abandoned,
    DryRun,
}

/// `missed` (the operator could not act) or `skipped` (it chose not to): the results of a slot
/// that was not restarted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SlotOutcome {
    Missed,
    Skipped,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(value: impl Serialize) -> String {
        serde_json::to_value(value).unwrap().as_str().unwrap().to_string()
    }

    #[test]
    fn every_value_is_written_and_served_by_one_name() {
        for reason in Reason::ALL {
            assert_eq!(wire(reason), reason.as_str());
        }
        for outcome in RestartOutcome::ALL {
            assert_eq!(wire(outcome), outcome.as_str());
            assert_eq!(wire(Outcome::from(outcome)), outcome.as_str());
        }
        for result in [SlotResult::Fired, SlotResult::Missed, SlotResult::Skipped] {
            assert_eq!(wire(result), result.as_str());
        }
        assert_eq!(wire(SlotOutcome::Missed), SlotResult::Missed.as_str());
        assert_eq!(wire(SlotOutcome::Skipped), SlotResult::Skipped.as_str());
    }
}
