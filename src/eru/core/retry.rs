//! What a restart and a manual run share while their patch has not landed: when to look again,
//! and the last API message in the reason they are given up with.

use chrono::{DateTime, Utc};

/// When a patch not landed needs its next look: its next try after a backoff, or its deadline
/// (to give it up), whichever comes first.
pub fn next_look(
    next_attempt_at: Option<DateTime<Utc>>,
    deadline: DateTime<Utc>,
    now: DateTime<Utc>,
) -> DateTime<Utc> {
    next_attempt_at
        .filter(|at| *at > now)
        .map_or(deadline, |at| at.min(deadline))
        + chrono::Duration::milliseconds(1)
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
