//! Pause on failure (`spec.failurePolicy`), pure: when restarts hurt, the Eru stops restarting
//! until a person resumes it.
//!
//! A restart *hurts* when its patch landed and its rollout ended `failed` or `abandoned`. After
//! `pauseAfter` of them in a row (counted since the last resume; a restart that succeeded starts
//! the row again; a restart given up before its patch landed, a dry run and a manual run neither
//! count nor break it), the plan trips a [`Pause`]: the machine journals it and moves to
//! `PausedOnFailure`, where every due slot is skipped `paused_on_failure` with the pause's note
//! and every manual run is refused. The journal keeps the pause (and the status shows it), so a
//! restarted operator, another replica or a journal seeded from the status stays paused.
//!
//! Only a person resumes it: the annotation [`RESUME_ANNOTATION`] set to the pause's `since`
//! (`kubectl eru resume` does this). A value naming another instant (an earlier pause's) resumes
//! nothing, so a stale annotation never lifts a new pause. No spec edit lifts it either.

use chrono::{DateTime, SubsecRound, Utc};

use crate::vocab::Outcome;

/// The annotation that resumes a pause: its value is the pause's `since` (RFC 3339).
pub const RESUME_ANNOTATION: &str = "mtsre.meitu.com/resume";

/// Restarts a pause's note names at most (the newest; the count is complete).
const NAMED: usize = 5;

/// A pause on failure: since when (whole seconds, as the status shows it) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pause {
    pub since: DateTime<Utc>,
    /// The restarts that tripped it, and how each ended.
    pub why: String,
}

/// A restart of a slot whose patch landed, ended: how, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ended {
    pub slot: DateTime<Utc>,
    pub outcome: Outcome,
    pub reason: Option<String>,
}

impl Ended {
    /// Whether it hurt: its rollout failed, or was abandoned once its patch had landed.
    pub fn hurt(&self) -> bool {
        matches!(self.outcome, Outcome::Failed | Outcome::Abandoned)
    }
}

/// What the journal says of an Eru's pauses, read by the pass when the Eru has a failure policy
/// or its status shows a pause.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pauses {
    /// The latest pause the journal holds, and when it was resumed, if it was.
    pub latest: Option<(Pause, Option<DateTime<Utc>>)>,
    /// The restarts ended since the latest resume, newest first: as many as the policy counts
    /// (read only when no pause is in force and a row may have begun).
    pub ended: Vec<Ended>,
}

/// A resume the Eru's annotation asks for: its value and who set it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resume {
    pub value: String,
    pub by: Option<String>,
}

impl Resume {
    /// Whether it resumes `pause`: its value is the pause's `since`, to the second.
    pub fn resumes(&self, pause: &Pause) -> bool {
        DateTime::parse_from_rfc3339(self.value.trim())
            .is_ok_and(|at| at.with_timezone(&Utc).trunc_subsecs(0) == pause.since)
    }
}

/// The restarts that ended in this pass (`now`, newest first) and before it (`before`, newest
/// first), newest first, up to the first that did not hurt: the row a pause counts.
pub fn row(now: impl IntoIterator<Item = Ended>, before: &[Ended]) -> Vec<Ended> {
    now.into_iter()
        .chain(before.iter().cloned())
        .take_while(Ended::hurt)
        .collect()
}

/// The pause `row` (newest first) trips at `now`, if it holds `pause_after` restarts or more.
pub fn trip(row: &[Ended], pause_after: u32, now: DateTime<Utc>) -> Option<Pause> {
    let n = usize::try_from(pause_after).ok().filter(|n| *n >= 1)?;
    if row.len() < n {
        return None;
    }
    let named: Vec<String> = row[..n]
        .iter()
        .take(NAMED)
        .map(|e| {
            let why = e.reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default();
            format!(
                "slot {} {}{why}",
                super::schedule::slot_text(e.slot),
                e.outcome.as_str()
            )
        })
        .collect();
    let more = match n.saturating_sub(NAMED) {
        0 => String::new(),
        more => format!("; and {more} earlier"),
    };
    Some(Pause {
        since: now.trunc_subsecs(0),
        why: format!(
            "{n} restarts in a row ended failed or abandoned (failurePolicy.pauseAfter {pause_after}), newest first: {}{more}",
            named.join("; ")
        ),
    })
}

/// The note of a slot skipped or a manual run refused while `pause` holds.
pub fn note(pause: &Pause) -> String {
    format!(
        "paused on failure since {}: {}; resume: kubectl eru resume (sets {RESUME_ANNOTATION})",
        super::schedule::slot_text(pause.since),
        pause.why
    )
}

#[cfg(test)]
mod tests;
