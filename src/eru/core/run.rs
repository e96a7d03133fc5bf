//! Manual runs, pure: `mtsre.meitu.com/run-now: <token>` on an Eru asks for one unscheduled
//! restart per distinct token. A run is not a slot: it is journaled apart (the slot arithmetic
//! stays exact), keyed by its token, and marks the pod template with its own annotation
//! ([`RUN_ANNOTATION`]: the Eru and the token, [`template_value`]), so the slot annotation that joins the cluster to the ledger only ever
//! carries slots. It goes through the fleet cap and the gates like a slot: it waits while a
//! gate, a blackout or a restart in flight stands in its way, up to its deadline (when it was
//! asked plus `startingDeadlineSeconds`), and is refused then; a suspended, invalid or targetless
//! Eru refuses it at once. The need conditions are not asked: whoever asked decided it is needed.

use chrono::{DateTime, Utc};

use super::ledger::Reason;
use crate::vocab::RunOutcome;

/// The annotation an Eru carries to ask for a run, and its pod template carries once the run's
/// patch landed (the run's idempotency key on the workload).
pub const RUN_ANNOTATION: &str = "mtsre.meitu.com/run-now";

/// What a run's patch sets on the pod template: the Eru (`namespace/name`) and the token, so two
/// Erus of one workload given the same token each run once (one never takes the other's run for
/// its own).
pub fn template_value(eru: &str, token: &str) -> String {
    format!("{eru}:{token}")
}

/// The most a token may be: it is a journal key and an annotation value.
pub const MAX_TOKEN_LEN: usize = 63;

/// What the Eru's annotation asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Asked {
    pub token: String,
    /// The field manager that set the annotation, if the managedFields tell.
    pub requested_by: Option<String>,
    /// When that manager last wrote the object (the API server's clock, seconds), if they tell.
    pub set_at: Option<DateTime<Utc>>,
}

impl Asked {
    /// The token of an annotation's value: trimmed; `Err` says why it cannot be one.
    pub fn token(value: &str) -> Result<String, String> {
        let token = value.trim();
        if token.is_empty() {
            Err(format!(
                "{RUN_ANNOTATION} is empty: set it to a new token to ask for a run"
            ))
        } else if token.len() > MAX_TOKEN_LEN {
            Err(format!(
                "{RUN_ANNOTATION} is {} bytes; a token is at most {MAX_TOKEN_LEN}",
                token.len()
            ))
        } else if token.chars().any(char::is_control) {
            Err(format!("{RUN_ANNOTATION} holds a control character"))
        } else {
            Ok(token.to_string())
        }
    }
}

/// A manual run not ended, as it is asked and journaled (in flight, the machine carries it as a
/// [`super::restart::Restart`] of [`super::restart::Cause::Run`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManualRun {
    pub token: String,
    pub requested_by: Option<String>,
    pub requested_at: DateTime<Utc>,
    /// Never started nor patched after this instant.
    pub deadline: DateTime<Utc>,
    /// The journal key of the workload it restarts.
    pub target: String,
    /// Failed patches so far, the API's message of the last one, and when the next is due.
    pub attempts: u32,
    pub last_error: Option<String>,
    pub next_attempt_at: Option<DateTime<Utc>>,
}

impl ManualRun {
    /// What it is called in records and Events.
    pub fn name(&self) -> String {
        format!("manual run {:?}", self.token)
    }
}

/// What stands in a manual run's way: the reason, and what it names.
pub type Blocked = (Reason, String);

/// A run the Eru asks for that the journal has not started or ended, as one pass finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunDue {
    pub run: ManualRun,
    /// Not journaled yet: its row is written first.
    pub new: bool,
    /// When its patch landed, if the target's template carries its token (a crash between the
    /// patch and the journal, or a lost journal): never patched twice.
    pub landed_at: Option<DateTime<Utc>>,
    /// What stands in its way now: a closed target gate, a blackout or a closed health gate.
    pub blocked: Option<Blocked>,
    /// Why it waited, as its row says (the journal's), if it did.
    pub waited: Option<String>,
    /// A dry run (`spec.dryRun` or `--dry-run`): journaled, never patched.
    pub dry_run: bool,
    pub now: DateTime<Utc>,
}

impl RunDue {
    /// Why it waits, as its row says while it does.
    pub fn waits(&self) -> Option<String> {
        (self.blocked.as_ref()).map(|(reason, note)| format!("{}: {note}", reason.as_str()))
    }
}

/// What the journal gets about a manual run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunRecord {
    /// First seen (waiting, and why if something stands in its way).
    Requested { run: ManualRun, waits: Option<String> },
    /// It got a place with its gates open: in progress.
    Decided { token: String },
    /// Its patch landed.
    Patched { token: String, at: DateTime<Utc> },
    /// Its patch failed; the next try is due at `retry_at`.
    Attempt {
        token: String,
        at: DateTime<Utc>,
        error: String,
        retry_at: DateTime<Utc>,
    },
    /// A run that waits is no longer asked for (another token replaced it, or the annotation was
    /// removed): refused, if it still waits.
    Withdrawn { token: String, reason: String },
    /// It ended, or never started (`Refused`), for `reason`.
    Ended {
        token: String,
        outcome: RunOutcome,
        /// When, if the machine knows (else when it is journaled).
        at: Option<DateTime<Utc>>,
        reason: Option<String>,
    },
}

impl RunRecord {
    /// The ended record of `run`.
    pub fn ended(run: &ManualRun, outcome: RunOutcome, at: Option<DateTime<Utc>>, reason: String) -> Self {
        RunRecord::Ended {
            token: run.token.clone(),
            outcome,
            at,
            reason: Some(reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_trimmed_bounded_and_printable() {
        assert_eq!(Asked::token(" deploy-42 \n"), Ok("deploy-42".to_string()));
        assert!(Asked::token("  ").unwrap_err().contains("empty"));
        assert!(Asked::token(&"x".repeat(64)).unwrap_err().contains("at most 63"));
        assert!(Asked::token(&"x".repeat(63)).is_ok());
        assert!(Asked::token("a\u{7}b").unwrap_err().contains("control"));
    }
}
