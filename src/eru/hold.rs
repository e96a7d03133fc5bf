//! Health gates, pure: a due slot that a closed gate holds. A held slot waits unaccounted (the
//! cursor stays before it, it takes no fleet place) and runs once every gate is open, if before
//! its starting deadline; a slot whose deadline passes while held is recorded skipped with the
//! gate's reason and a note naming what held it and for how long. The answers come from the
//! shell ([`super::gates`]); this module only decides with them.

use chrono::{DateTime, Duration, Utc};

use super::{Gates, HeldSlot, schedule::slot_text};
use crate::journal::vocab::Reason;

/// How often a held slot's gates are asked again by default (`--gate-poll-interval`).
pub const DEFAULT_POLL_SECONDS: i64 = 15;

/// What the gates answered in one pass: open, or closed with why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Answer {
    /// Every gate is open (or the Eru has none, or no slot was due).
    #[default]
    Open,
    /// A gate holds the slot: `blocking_pods`, `alert_firing` or `gate_unknown`, and what holds it
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

    /// As the status shows it.
    pub fn status(&self) -> HeldSlot {
        HeldSlot {
            slot: self.slot,
            since: self.since,
            checked_at: self.checked_at,
            deadline: self.deadline,
            reason: self.reason.as_str().to_string(),
            note: self.note.clone(),
        }
    }

    /// From the status (an operator restarted during a hold keeps its start and reason).
    pub fn from_status(held: &HeldSlot) -> Option<Self> {
        Some(Self {
            slot: held.slot,
            since: held.since,
            checked_at: held.checked_at,
            deadline: held.deadline,
            reason: Reason::parse(&held.reason)?,
            note: held.note.clone(),
        })
    }
}

/// An alert gate's name regexp, anchored at both ends.
pub fn alert_name(pattern: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(&format!("^(?:{pattern})$"))
        .map_err(|e| format!("gates.alerts.name '{pattern}' is not a valid regular expression: {e}"))
}

/// What the API server's schema cannot check of `gates` (its regexp), and, for the operator's
/// file (which no schema checks), what it does check: at least one gate, no empty selector.
pub fn check_gates(gates: &Gates) -> Result<(), String> {
    if gates.blocking_pod_selector.is_none() && gates.alerts.is_none() {
        return Err("gates needs blockingPodSelector or alerts".into());
    }
    if let Some(selector) = &gates.blocking_pod_selector {
        let labels = selector.match_labels.as_ref().is_some_and(|l| !l.is_empty());
        let expressions = selector.match_expressions.as_ref().is_some_and(|e| !e.is_empty());
        if !labels && !expressions {
            return Err(
                "an empty blockingPodSelector would match every pod: give matchLabels or matchExpressions"
                    .into(),
            );
        }
    }
    if let Some(pattern) = gates.alerts.as_ref().and_then(|a| a.name.as_ref()) {
        alert_name(pattern)?;
    }
    Ok(())
}

/// The first few of `names`, comma-separated, and how many more there are (a note stays short).
pub fn some_of(names: &[String], shown: usize) -> String {
    let mut text = names.iter().take(shown).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > shown {
        text.push_str(&format!(" and {} more", names.len() - shown));
    }
    text
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
    fn the_status_round_trips_and_the_note_names_the_window() {
        let held = Held::new(
            t(0),
            t(300),
            t(1),
            (Reason::GateUnknown, "connection refused"),
            None,
        );
        assert_eq!(Held::from_status(&held.status()), Some(held.clone()));
        let note = held.record_note();
        assert!(note.starts_with("connection refused; held from "), "{note}");
        assert!(note.contains(&slot_text(t(300))), "{note}");
    }

    #[test]
    fn bad_gates_are_refused_with_why() {
        let gates = |v: serde_json::Value| -> Gates { serde_json::from_value(v).unwrap() };
        assert!(check_gates(&gates(serde_json::json!({}))).is_err());
        assert!(check_gates(&gates(serde_json::json!({"blockingPodSelector": {}}))).is_err());
        let e = check_gates(&gates(serde_json::json!({"alerts": {"name": "(unclosed"}}))).unwrap_err();
        assert!(e.contains("gates.alerts.name"), "{e}");
        assert!(check_gates(&gates(serde_json::json!({"alerts": {"name": "Node.*"}}))).is_ok());
        let re = alert_name("A|B").unwrap();
        assert!(re.is_match("B") && !re.is_match("AB"), "anchored");
    }

    #[test]
    fn long_lists_are_cut() {
        let names: Vec<String> = (0..7).map(|i| format!("p{i}")).collect();
        assert_eq!(some_of(&names, 5), "p0, p1, p2, p3, p4 and 2 more");
        assert_eq!(some_of(&names[..2], 5), "p0, p1");
    }
}
