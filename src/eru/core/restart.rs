//! A restart in flight and its cause: the one place where a slot's restart and a manual run
//! differ.
//!
//! A restart is made for a [`Cause`]: a slot of the schedule, or a manual run
//! (`mtsre.meitu.com/run-now`). Both go through the same states of the machine: asking the fleet
//! for a place, decided with its patch not landed ([`Restart`]), rolling out ([`Rollout`]), and
//! back to waiting when the rollout ends or the restart is given up. What the cause changes is
//! data, all of it here:
//!
//! | | a slot | a manual run |
//! |---|---|---|
//! | its key on the pod template | `restartedAt: <slot>` | `run-now: <eru>:<token>` |
//! | its records | the restart's row, keyed by the slot; a given-up restart's slot record | the run's row, keyed by the token |
//! | its place in the fleet's queue | the slot | when it was asked |
//! | given up for | its slot's reason (`patch_failed`, `operator_down`, `journal_unavailable`, `past_deadline`, a closed gate) | `abandoned`, with what stood in its way |
//! | a newer slot due before the patch landed | supersedes it (given up first) | takes its place, if that slot's restart starts |
//! | a newer slot due during the rollout | `skipped/concurrent_rollout` | the same, with a note naming the run |
//! | a revert seen during the rollout | `failed`, and `reverted` recorded | not looked for (the run's annotation is the operator's own) |
//!
//! The waiting and refusal of a manual run before it starts stay in [`super::run`] and the
//! machine's `start_run`: a slot is skipped at once where a run waits for its deadline.

use chrono::{DateTime, SecondsFormat, Utc};

use super::{
    ledger::{self, Due, Reason, SlotRecord, Window},
    messages::{EruAction, EruEvent, EruRecord, Pending},
    run::{ManualRun, RunRecord, template_value},
    schedule::slot_text as text,
    target::{TargetView, Verdict},
};
use crate::vocab::{Outcome, RunOutcome};

/// What a restart is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cause {
    /// The slot of the schedule it restarts.
    Slot(DateTime<Utc>),
    /// The manual run it carries out.
    Run(RunAsk),
}

/// Who asked for a manual run, when, and with which token (its idempotency key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunAsk {
    pub token: String,
    pub requested_by: Option<String>,
    pub requested_at: DateTime<Utc>,
}

impl RunAsk {
    /// What it is called in records and Events.
    pub fn name(&self) -> String {
        format!("manual run {:?}", self.token)
    }
}

/// A restart decided, its patch not landed yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restart {
    pub cause: Cause,
    /// The journal key of the workload it restarts.
    pub target: String,
    /// Never patched after this instant.
    pub deadline: DateTime<Utc>,
    /// Failed patches so far, and the API's message of the last one.
    pub attempts: u32,
    pub last_error: Option<String>,
    /// When the next patch is due after a failed one.
    pub next_attempt_at: Option<DateTime<Utc>>,
}

/// A restart whose patch landed: the target rolls it out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rollout {
    pub cause: Cause,
    /// The journal key of the workload rolling it out.
    pub target: String,
    pub patched_at: DateTime<Utc>,
    /// The target's generation once the patch had landed, when known: a template without the
    /// slot at a later generation was written after the patch (a revert, proven).
    pub landed_generation: Option<i64>,
}

/// How a rollout ended, as the machine saw it.
pub struct End {
    pub outcome: Outcome,
    /// When, if the machine knows (else when it is journaled).
    pub at: Option<DateTime<Utc>>,
    pub reason: Option<String>,
}

impl Cause {
    /// The slot, if it restarts one.
    pub fn slot(&self) -> Option<DateTime<Utc>> {
        match self {
            Cause::Slot(slot) => Some(*slot),
            Cause::Run(_) => None,
        }
    }

    /// The manual run, if it carries one out.
    pub fn run(&self) -> Option<&RunAsk> {
        match self {
            Cause::Slot(_) => None,
            Cause::Run(ask) => Some(ask),
        }
    }

    /// Its place in the fleet's queue: the slot, or when the run was asked.
    pub fn queued_at(&self) -> DateTime<Utc> {
        match self {
            Cause::Slot(slot) => *slot,
            Cause::Run(ask) => ask.requested_at,
        }
    }

    /// When its patch landed, if the target's template carries its key (`eru`: the Eru's seed,
    /// `namespace/name`, which a run's key names).
    pub fn landed_in(&self, view: &TargetView, eru: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Cause::Slot(slot) => view.landed_at(*slot, now),
            Cause::Run(ask) => view.run_landed_at(&template_value(eru, &ask.token), ask.requested_at, now),
        }
    }
}

impl Restart {
    /// The restart of the due slot, as it is decided.
    pub fn decided(due: &Due) -> Self {
        Self::new(Cause::Slot(due.slot), &due.target, due.deadline)
    }

    /// A manual run's restart, as the journal (or the run's request) holds it.
    pub fn of_run(run: &ManualRun) -> Self {
        let ask = RunAsk {
            token: run.token.clone(),
            requested_by: run.requested_by.clone(),
            requested_at: run.requested_at,
        };
        Self {
            attempts: run.attempts,
            last_error: run.last_error.clone(),
            next_attempt_at: run.next_attempt_at,
            ..Self::new(Cause::Run(ask), &run.target, run.deadline)
        }
    }

    /// A restart for `cause` of `target`, never patched after `deadline`, not tried yet.
    pub fn new(cause: Cause, target: &str, deadline: DateTime<Utc>) -> Self {
        Self {
            cause,
            target: target.to_string(),
            deadline,
            attempts: 0,
            last_error: None,
            next_attempt_at: None,
        }
    }

    pub fn slot(&self) -> Option<DateTime<Utc>> {
        self.cause.slot()
    }

    /// When the restart needs its next look: its next try after a backoff, or its deadline (to
    /// give it up), whichever comes first.
    pub fn wake(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        self.next_attempt_at
            .filter(|at| *at > now)
            .map_or(self.deadline, |at| at.min(self.deadline))
            + chrono::Duration::milliseconds(1)
    }

    /// Its rollout, once its patch landed at `at` (the target at `generation`, when known).
    pub fn landed(&self, at: DateTime<Utc>, generation: Option<i64>) -> Rollout {
        Rollout {
            cause: self.cause.clone(),
            target: self.target.clone(),
            patched_at: at,
            landed_generation: generation,
        }
    }

    /// The fleet is asked a place for it.
    pub fn ask_place(&self) -> EruAction {
        EruAction::AskPlace {
            slot: self.cause.queued_at(),
            deadline: self.deadline,
        }
    }

    /// Its patch, to send.
    pub fn patch(&self) -> EruAction {
        match &self.cause {
            Cause::Slot(slot) => EruAction::PatchRestart {
                slot: *slot,
                target: self.target.clone(),
            },
            Cause::Run(ask) => EruAction::PatchRun {
                token: ask.token.clone(),
                target: self.target.clone(),
            },
        }
    }

    /// The record of its decision (before the patch is sent).
    pub fn decided_record(&self) -> EruRecord {
        match &self.cause {
            Cause::Slot(slot) => EruRecord::Decided {
                slot: *slot,
                deadline: self.deadline,
                target: self.target.clone(),
            },
            Cause::Run(ask) => EruRecord::Run(RunRecord::Decided {
                token: ask.token.clone(),
            }),
        }
    }

    /// The record of its landed patch (`rollout`).
    pub fn patched_record(&self, rollout: &Rollout) -> EruRecord {
        let at = rollout.patched_at;
        match &self.cause {
            Cause::Slot(slot) => EruRecord::Patched {
                slot: *slot,
                at,
                target: self.target.clone(),
                generation: rollout.landed_generation,
            },
            Cause::Run(ask) => EruRecord::Run(RunRecord::Patched {
                token: ask.token.clone(),
                at,
            }),
        }
    }

    /// A failed patch: its record, and the restart that tries again at `retry_at`.
    pub fn failed(&self, error: &str, at: DateTime<Utc>, retry_at: DateTime<Utc>) -> (EruRecord, Restart) {
        let error = error.to_string();
        let record = match &self.cause {
            Cause::Slot(slot) => EruRecord::Attempt {
                slot: *slot,
                at,
                error: error.clone(),
                retry_at,
            },
            Cause::Run(ask) => EruRecord::Run(RunRecord::Attempt {
                token: ask.token.clone(),
                at,
                error: error.clone(),
                retry_at,
            }),
        };
        let next = Restart {
            attempts: self.attempts + 1,
            last_error: Some(error),
            next_attempt_at: Some(retry_at),
            ..self.clone()
        };
        (record, next)
    }

    /// The record that gives it up as this pass finds it (`pending`): something blocks it (the
    /// Eru suspended or invalid, the target's gate closed) or its deadline passed. `None`: it goes
    /// on.
    pub fn give_up(&self, pending: &Pending) -> Option<EruRecord> {
        match &self.cause {
            Cause::Slot(slot) => self.give_up_slot(*slot, pending),
            Cause::Run(_) => self.give_up_run(pending),
        }
    }

    fn give_up_slot(&self, slot: DateTime<Utc>, pending: &Pending) -> Option<EruRecord> {
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
            return Some(self.gave_up(slot, (reason, None), &what, pending.note.as_ref()));
        }
        if pending.now <= self.deadline {
            return None;
        }
        let (reason, window) = if self.attempts > 0 {
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
            text(self.deadline)
        );
        Some(self.gave_up(slot, (reason, window), &what, None))
    }

    fn give_up_run(&self, pending: &Pending) -> Option<EruRecord> {
        let why = if let Some(reason) = pending.blocked {
            let note = pending.note.as_ref().map_or(String::new(), |n| format!(" ({n})"));
            format!("{} before the patch landed{note}", reason.as_str())
        } else if pending.now > self.deadline {
            format!("the patch did not land by its deadline {}", text(self.deadline))
        } else {
            return None;
        };
        Some(self.run_gave_up(&why))
    }

    /// The record of a slot's restart superseded by the newer due slot `by` before its patch
    /// landed: given up for the patches that failed, the journal outage that kept it from
    /// landing, or as superseded.
    pub fn superseded(&self, by: DateTime<Utc>, journal_outages: &[Window]) -> Option<EruRecord> {
        let slot = self.slot()?;
        let outage = ledger::overlapping(journal_outages, slot, by);
        let (reason, window) = if self.attempts > 0 {
            (Reason::PatchFailed, None)
        } else if outage.is_some() {
            (Reason::JournalUnavailable, outage)
        } else {
            (Reason::Superseded, None)
        };
        let what = format!(
            "{}superseded by slot {} before the patch landed",
            outage_text(reason, window),
            text(by)
        );
        Some(self.gave_up(slot, (reason, window), &what, None))
    }

    /// The record of a manual run given up for the slot `by`, whose restart does what it asked.
    pub fn run_superseded(&self, by: DateTime<Utc>) -> EruRecord {
        self.run_gave_up(&format!(
            "superseded by slot {} before the patch landed",
            text(by)
        ))
    }

    /// A slot's restart given up: abandoned, its slot recorded for `reason` (with `note`).
    fn gave_up(
        &self,
        slot: DateTime<Utc>,
        (reason, window): (Reason, Option<Window>),
        what: &str,
        note: Option<&String>,
    ) -> EruRecord {
        let record = SlotRecord::one(slot, reason, window, &self.target);
        let last = last_error_note(self.attempts, self.last_error.as_deref());
        EruRecord::GaveUp {
            slot,
            reason: format!("{}: {what}{last}", reason.as_str()),
            record: match note {
                Some(note) => record.noted(note.clone()),
                None => record,
            },
        }
    }

    /// A manual run given up before its patch landed, with the last API message.
    fn run_gave_up(&self, why: &str) -> EruRecord {
        let last = last_error_note(self.attempts, self.last_error.as_deref());
        let token = self.cause.run().map(|a| a.token.clone()).unwrap_or_default();
        EruRecord::Run(RunRecord::Ended {
            token,
            outcome: RunOutcome::Abandoned,
            at: None,
            reason: Some(format!("{why}{last}")),
        })
    }
}

impl Rollout {
    pub fn slot(&self) -> Option<DateTime<Utc>> {
        self.cause.slot()
    }

    /// What the target shows of it now (`eru`: the Eru's seed, which a run's key names):
    /// progressing, done, failed, reverted (a slot's), or gone.
    pub fn seen(
        &self,
        view: Option<&TargetView>,
        eru: &str,
        now: DateTime<Utc>,
        timeout: chrono::Duration,
    ) -> EruEvent {
        let Some(view) = view else {
            return EruEvent::TargetGone;
        };
        let verdict = match &self.cause {
            Cause::Slot(slot) => {
                if let Some(revert) = view.reverted(*slot, self.patched_at, self.landed_generation, false) {
                    return EruEvent::RolloutReverted { revert, at: now };
                }
                view.verdict(*slot, self.patched_at, now, timeout)
            }
            Cause::Run(ask) => {
                let mark = template_value(eru, &ask.token);
                view.run_verdict(&mark, self.patched_at, now, timeout)
            }
        };
        match verdict {
            Verdict::Done => EruEvent::RolloutDone {
                finished_at: view.finished_at(self.patched_at, now),
            },
            Verdict::Failed(reason) => EruEvent::RolloutFailed {
                finished_at: now,
                reason,
            },
            Verdict::Progressing => EruEvent::RolloutProgressed,
        }
    }

    /// The record of its end.
    pub fn ended(&self, end: End) -> EruRecord {
        match &self.cause {
            Cause::Slot(slot) => EruRecord::Finished {
                slot: *slot,
                patched_at: self.patched_at,
                outcome: end.outcome,
                finished_at: end.at,
                reason: end.reason,
            },
            Cause::Run(ask) => {
                let (outcome, reason) = match end.outcome {
                    Outcome::Succeeded => (RunOutcome::Succeeded, Some("the rollout finished".into())),
                    Outcome::Failed => (RunOutcome::Failed, end.reason),
                    _ => (RunOutcome::Abandoned, end.reason),
                };
                EruRecord::Run(RunRecord::Ended {
                    token: ask.token.clone(),
                    outcome,
                    at: end.at,
                    reason,
                })
            }
        }
    }

    /// The record of `due`, a slot due while it rolls out: skipped (`concurrent_rollout`),
    /// unless it is the slot being rolled out.
    pub fn concurrent(&self, due: &Due) -> Option<SlotRecord> {
        let record = SlotRecord::one(due.slot, Reason::ConcurrentRollout, None, &due.target);
        match &self.cause {
            Cause::Slot(slot) if *slot == due.slot => None,
            Cause::Slot(_) => Some(record),
            Cause::Run(ask) => Some(record.noted(format!("{} was rolling out", ask.name()))),
        }
    }
}

/// `; last error (N failed patches): <message>` after `attempts` failed patches, if one failed.
pub fn last_error_note(attempts: u32, last_error: Option<&str>) -> String {
    match last_error {
        Some(error) => format!(
            "; last error ({attempts} failed patch{}): {error}",
            if attempts == 1 { "" } else { "es" }
        ),
        None => String::new(),
    }
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
