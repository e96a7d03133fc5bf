//! What an Eru sees of its target, kind-agnostic, pure: the gate before a restart and the verdict
//! on a rollout, from a [`TargetView`] (each kind's view is built from its own status by
//! [`crate::eru::workloads`]; the restart patch is the same pod-template annotation for all).

use chrono::{DateTime, Duration, Utc};

use super::messages::{Gate, Revert};

/// How long a rollout may take when neither the Eru (`rolloutTimeoutSeconds`) nor the kind (a
/// Deployment's `progressDeadlineSeconds`) says.
pub const DEFAULT_ROLLOUT_TIMEOUT_SECONDS: i64 = 600;

/// A workload's rollout state and the slot its pod template carries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetView {
    /// Its controller has seen the latest spec, and every desired pod is updated, ready and
    /// available with no old one left (each kind by its own status fields).
    pub settled: bool,
    /// A Deployment's `spec.paused`.
    pub paused: bool,
    /// Why a pod-template change would not roll every pod (an `OnDelete` strategy, a
    /// StatefulSet's partition), if it would not.
    pub not_rollable: Option<String>,
    /// A Deployment's `Progressing` condition is False with reason `ProgressDeadlineExceeded`.
    pub deadline_exceeded: bool,
    /// How long a rollout may take unless the Eru says: a Deployment's
    /// `progressDeadlineSeconds`, else [`DEFAULT_ROLLOUT_TIMEOUT_SECONDS`].
    pub rollout_timeout_seconds: i64,
    /// When the last rollout completed, if the kind records it (a Deployment's `Progressing`
    /// condition turning `NewReplicaSetAvailable`).
    pub completed_at: Option<DateTime<Utc>>,
    /// The slot the pod template carries (the last restart patched).
    pub template_slot: Option<DateTime<Utc>>,
    /// When the restart manager last changed the template (the API server's clock, seconds).
    pub restart_applied_at: Option<DateTime<Utc>>,
    /// The manual run's token the pod template carries (the last run patched).
    pub template_run: Option<String>,
    /// When the run manager last changed the template (the API server's clock, seconds).
    pub run_applied_at: Option<DateTime<Utc>>,
    /// The newest writer of the pod template other than this operator's managers (a field
    /// manager that owns fields under `spec.template`), and when it wrote, if the managedFields
    /// name one.
    pub template_writer: Option<(String, DateTime<Utc>)>,
    /// The workload's `metadata.generation` as cached (the API server raises it at every change
    /// of the spec, the pod template's annotations included).
    pub generation: Option<i64>,
}

/// How a rollout stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Done,
    Failed(String),
    Progressing,
}

impl TargetView {
    /// Whether a restart may start now.
    pub fn gate(&self) -> Gate {
        if self.paused {
            Gate::Paused
        } else if self.not_rollable.is_some() {
            Gate::NotRollable
        } else if !self.settled {
            Gate::Unhealthy
        } else {
            Gate::Open
        }
    }

    /// What the gate's reason alone does not say: why the target is not rollable.
    pub fn gate_note(&self) -> Option<String> {
        (self.gate() == Gate::NotRollable)
            .then(|| self.not_rollable.clone())
            .flatten()
    }

    /// When the restart of `slot` landed, if the template carries it: the restart manager's
    /// time on the target when it is not before the slot (after a crash, or a replica's patch),
    /// else `now`.
    pub fn landed_at(&self, slot: DateTime<Utc>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        (self.template_slot == Some(slot)).then(|| {
            self.restart_applied_at
                .filter(|at| *at + Duration::seconds(1) > slot && *at <= now)
                .unwrap_or(now)
        })
    }

    /// When the manual run `token` landed, if the template carries it: the run manager's time on
    /// the target when it is not before `asked` (when the run was asked) and not after `now`,
    /// else `now`.
    pub fn run_landed_at(
        &self,
        token: &str,
        asked: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        (self.template_run.as_deref() == Some(token)).then(|| {
            self.run_applied_at
                .filter(|at| *at + Duration::seconds(1) > asked && *at <= now)
                .unwrap_or(now)
        })
    }

    /// Whether another field manager undid the restart of `slot` patched at `patched_at`, and
    /// who: the template does not carry the slot, and the annotation is not this operator's
    /// restart manager's any more (a slot it still owns is another Eru's, or a cache that has not
    /// seen the patch: a manager that replaces or removes the annotation takes it from the
    /// restart manager, whose entry then goes, as it owns nothing else).
    ///
    /// A template without the slot is a revert only once the cache is proven past the patch:
    /// its generation is later than `landed` (the workload's generation once the patch had
    /// landed), or the rollout `ended` (the cache has seen the patch). Before, it may be a cache
    /// that has not seen the patch yet — and managedFields times, whole seconds on the API
    /// server's clock, cannot tell a write just before the patch from one just after. The writer
    /// is named when the managedFields name one from the patch's second on, else unnamed (a
    /// removal by an update leaves no managedFields entry).
    pub fn reverted(
        &self,
        slot: DateTime<Utc>,
        patched_at: DateTime<Utc>,
        landed: Option<i64>,
        ended: bool,
    ) -> Option<Revert> {
        if self.template_slot == Some(slot) {
            return None;
        }
        if self.template_slot.is_some() && self.restart_applied_at.is_some() {
            return None; // a slot the restart manager owns: another Eru's, or an older one
        }
        let written_after = matches!((self.generation, landed), (Some(now), Some(landed)) if now > landed);
        if !written_after && !ended {
            return None;
        }
        let since = patched_at - Duration::seconds(1);
        let writer = self.template_writer.as_ref().filter(|(_, at)| *at >= since);
        Some(Revert {
            by: writer.map(|(by, _)| by.clone()),
            at: writer.map(|(_, at)| *at),
            carries: self.template_slot,
        })
    }

    /// When a finished rollout really finished: when the kind records it (a Deployment's
    /// `Progressing` condition turned `NewReplicaSetAvailable`; second precision) and that is
    /// well before `now` (the operator was not watching), that instant, else `now`. Never before
    /// `patched_at`.
    pub fn finished_at(&self, patched_at: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
        match self.completed_at {
            Some(at) if at + Duration::seconds(2) < now => at.max(patched_at),
            _ => now,
        }
    }

    /// The rollout of the restart of `slot`, patched at `patched_at`, as of `now`.
    pub fn verdict(
        &self,
        slot: DateTime<Utc>,
        patched_at: DateTime<Utc>,
        now: DateTime<Utc>,
        timeout: Duration,
    ) -> Verdict {
        self.judge(self.template_slot == Some(slot), patched_at, now, timeout)
    }

    /// The rollout of the manual run `token`, patched at `patched_at`, as of `now`.
    pub fn run_verdict(
        &self,
        token: &str,
        patched_at: DateTime<Utc>,
        now: DateTime<Utc>,
        timeout: Duration,
    ) -> Verdict {
        self.judge(
            self.template_run.as_deref() == Some(token),
            patched_at,
            now,
            timeout,
        )
    }

    /// A rollout's verdict, `ours` when the template still carries what was patched.
    fn judge(&self, ours: bool, patched_at: DateTime<Utc>, now: DateTime<Utc>, timeout: Duration) -> Verdict {
        if ours && self.settled {
            Verdict::Done
        } else if ours && self.deadline_exceeded {
            Verdict::Failed(
                "ProgressDeadlineExceeded: the Deployment made no progress within its deadline".into(),
            )
        } else if let Some(note) = self.not_rollable.as_ref().filter(|_| ours) {
            // its strategy changed during the rollout: the pods left will not roll
            Verdict::Failed(format!("the rollout cannot finish: {note}"))
        } else if now - patched_at > timeout {
            Verdict::Failed(format!(
                "the rollout did not finish within {} s",
                timeout.num_seconds()
            ))
        } else {
            Verdict::Progressing
        }
    }
}
