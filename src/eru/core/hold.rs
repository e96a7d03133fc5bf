//! Health gates, pure: a due slot that a closed gate holds. A held slot waits unaccounted (the
//! cursor stays before it, it takes no fleet place) and runs once every gate is open, if before
//! its starting deadline; a slot whose deadline passes while held is recorded skipped with the
//! gate's reason and a note naming what held it and for how long. The answers come from the
//! pass ([`crate::eru::gates`]); this module only decides with them.

use chrono::{DateTime, Duration, Utc};

use super::schedule::slot_text;
use crate::vocab::Reason;

/// How often a held slot's gates are asked again by default (`--gate-poll-interval`).
pub const DEFAULT_POLL_SECONDS: i64 = 15;

/// What the gates answered in one pass: open, or closed with why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Answer {
    /// Every gate is open (or the Eru has none, or no slot was due).
    #[default]
    Open,
    /// A gate holds the slot: `blocking_pods`, `pdb_blocked`, `alert_firing` or `gate_unknown`, and what holds it
    /// (the pods, the alerts, the error asking Prometheus).
    Closed { reason: Reason, note: String },
}

/// A due slot a closed gate holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    pub slot: DateTime<Utc>,
    /// The first pass that held it.
    pub since: DateTime<Utc>,
    /// The latest pass that found a gate closed.
    pub checked_at: DateTime<Utc>,
    /// Never started after this instant.
    pub deadline: DateTime<Utc>,
    pub reason: Reason,
    pub note: String,
}

impl Held {
    /// Holds `slot` (never started after `deadline`) at `now` for `reason`/`note`; a hold of the
    /// same slot before (`earlier`) keeps its start.
    pub fn new(
        slot: DateTime<Utc>,
        deadline: DateTime<Utc>,
        now: DateTime<Utc>,
        (reason, note): (Reason, &str),
        earlier: Option<&Held>,
    ) -> Self {
        let since = earlier.filter(|h| h.slot == slot).map_or(now, |h| h.since);
        Self {
            slot,
            since,
            checked_at: now,
            deadline,
            reason,
            note: note.to_string(),
        }
    }

    /// The note of the slot's record when its deadline passed while held: what held it, and the
    /// hold's window.
    pub fn record_note(&self) -> String {
        format!(
            "{}; held from {} until its starting deadline {} (gates last checked at {})",
            self.note,
            slot_text(self.since),
            slot_text(self.deadline),
            slot_text(self.checked_at)
        )
    }

    /// When to ask the gates again: after `poll`, or just after the deadline to record the slot.
    pub fn wake(&self, now: DateTime<Utc>, poll: Duration) -> DateTime<Utc> {
        (now + poll).min(self.deadline + Duration::milliseconds(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
    }

    #[test]
    fn a_hold_keeps_its_start_across_passes_of_the_same_slot_only() {
        let first = Held::new(t(0), t(300), t(1), (Reason::AlertFiring, "a"), None);
        let again = Held::new(t(0), t(300), t(20), (Reason::BlockingPods, "b"), Some(&first));
        assert_eq!(
            (again.since, again.checked_at, again.reason),
            (t(1), t(20), Reason::BlockingPods)
        );
        let newer = Held::new(t(60), t(360), t(61), (Reason::AlertFiring, "a"), Some(&first));
        assert_eq!(newer.since, t(61));
    }

    #[test]
    fn it_wakes_at_the_poll_interval_or_just_past_the_deadline() {
        let held = Held::new(t(0), t(30), t(1), (Reason::AlertFiring, "a"), None);
        assert_eq!(held.wake(t(1), Duration::seconds(15)), t(16));
        assert_eq!(
            held.wake(t(20), Duration::seconds(15)),
            t(30) + Duration::milliseconds(1)
        );
    }

    #[test]
    fn the_note_names_what_held_it_and_the_window() {
        let held = Held::new(
            t(0),
            t(300),
            t(1),
            (Reason::GateUnknown, "connection refused"),
            None,
        );
        let note = held.record_note();
        assert!(note.starts_with("connection refused; held from "), "{note}");
        assert!(note.contains(&slot_text(t(300))), "{note}");
    }
}
