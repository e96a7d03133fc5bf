//! Slot accounting, pure: every slot between the last accounted one and now ends up either due
//! (to restart now), or recorded as missed/skipped with a reason. Work per pass is bounded: at most
//! [`SLOT_BUDGET`] slots are enumerated and at most [`RECORD_CAP`] get a record of their own; the
//! rest are summarized (one record with a count per reason and window), and a backlog larger than
//! the budget continues in the next pass from where this one stopped.

use chrono::{DateTime, Duration, Utc};

use super::schedule::Schedule;
use crate::journal::SlotResult;

/// Slots enumerated per pass at most.
pub const SLOT_BUDGET: usize = 20_000;
/// Individual slot records per pass at most; the rest are summarized.
pub const RECORD_CAP: usize = 50;

/// Why a slot was not restarted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The operator was not running at the slot (with the downtime window).
    OperatorDown,
    /// The Eru was suspended.
    Suspended,
    /// Noticed later than `startingDeadlineSeconds`.
    PastDeadline,
    /// The Deployment was paused.
    TargetPaused,
    /// The Deployment was not fully available before the restart.
    TargetUnhealthy,
    /// The previous restart of this target was still rolling out.
    ConcurrentRollout,
    /// The Deployment did not exist.
    TargetMissing,
}

impl Reason {
    /// Every reason.
    pub const ALL: [Reason; 7] = [
        Reason::OperatorDown,
        Reason::Suspended,
        Reason::PastDeadline,
        Reason::TargetPaused,
        Reason::TargetUnhealthy,
        Reason::ConcurrentRollout,
        Reason::TargetMissing,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::OperatorDown => "operator_down",
            Reason::Suspended => "suspended",
            Reason::PastDeadline => "past_deadline",
            Reason::TargetPaused => "target_paused",
            Reason::TargetUnhealthy => "target_unhealthy",
            Reason::ConcurrentRollout => "concurrent_rollout",
            Reason::TargetMissing => "target_missing",
        }
    }

    /// [`Reason::result`] as its label value.
    pub fn reason_result(self) -> &'static str {
        self.result().as_str()
    }

    /// Missed: the operator could not act. Skipped: it chose not to.
    pub fn result(self) -> SlotResult {
        match self {
            Reason::OperatorDown | Reason::PastDeadline => SlotResult::Missed,
            _ => SlotResult::Skipped,
        }
    }
}

/// A time window during which the operator was not running.
pub type Window = (DateTime<Utc>, DateTime<Utc>);

/// One record: a single slot (`count == 1`) or a summarized run of slots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotRecord {
    pub first: DateTime<Utc>,
    pub last: DateTime<Utc>,
    pub count: i64,
    pub reason: Reason,
    pub window: Option<Window>,
}

/// The outcome of accounting `(after, now]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Accounting {
    /// The latest slot, still within the starting deadline: to restart now (or to gate).
    pub due: Option<DateTime<Utc>>,
    /// Slots not restarted, oldest first.
    pub records: Vec<SlotRecord>,
    /// The backlog was larger than the budget: account again right away.
    pub more: bool,
}

impl Accounting {
    /// How many slots the records stand for.
    pub fn slot_count(&self) -> i64 {
        self.records.iter().map(|r| r.count).sum()
    }
}

/// Inputs of [`account`] besides the schedule.
#[derive(Clone, Debug)]
pub struct Span<'a> {
    /// The last accounted slot (exclusive start).
    pub after: DateTime<Utc>,
    pub now: DateTime<Utc>,
    pub starting_deadline: Duration,
    pub suspended: bool,
    /// Windows when the operator was down, oldest first.
    pub downtime: &'a [Window],
}

/// Accounts for the slots of `schedule` in `(span.after, span.now]`.
pub fn account(schedule: &Schedule, span: &Span<'_>) -> Accounting {
    let mut accounting = Accounting::default();
    let mut slots = schedule.slots_between(span.after, span.now);
    let mut pending: Vec<DateTime<Utc>> = Vec::new();
    for slot in slots.by_ref().take(SLOT_BUDGET) {
        pending.push(slot);
    }
    accounting.more = slots.next().is_some();
    // The newest slot may still run, if it is within the deadline and this pass reached `now`.
    if !accounting.more
        && !span.suspended
        && let Some(&latest) = pending.last()
        && span.now - latest <= span.starting_deadline
    {
        accounting.due = Some(latest);
        pending.pop();
    }
    for slot in pending {
        let (reason, window) = if span.suspended {
            (Reason::Suspended, None)
        } else if let Some(window) = span
            .downtime
            .iter()
            .find(|(start, end)| *start < slot && slot <= *end)
        {
            (Reason::OperatorDown, Some(*window))
        } else {
            (Reason::PastDeadline, None)
        };
        push(&mut accounting.records, slot, reason, window);
    }
    accounting
}

/// Appends a slot: a record of its own while under the cap; past the cap, merged into the last
/// record when it has the same reason and window (one summary per consecutive group).
fn push(records: &mut Vec<SlotRecord>, slot: DateTime<Utc>, reason: Reason, window: Option<Window>) {
    if records.len() > RECORD_CAP
        && let Some(last) = records.last_mut()
        && last.reason == reason
        && last.window == window
    {
        last.last = slot;
        last.count += 1;
        return;
    }
    records.push(SlotRecord {
        first: slot,
        last: slot,
        count: 1,
        reason,
        window,
    });
}

/// Downtime windows from journaled operator runs `(started_at, last heartbeat)`, oldest first:
/// the gap between one run's last heartbeat and the next run's start, and, when the journal's
/// first run started after `since`, the time before it (no operator was known to run).
pub fn downtime(runs: &[(DateTime<Utc>, DateTime<Utc>)], since: DateTime<Utc>) -> Vec<Window> {
    let before_first = runs
        .first()
        .filter(|first| first.0 > since)
        .map(|first| (since, first.0));
    before_first
        .into_iter()
        .chain(runs.windows(2).map(|pair| (pair[0].1, pair[1].0)))
        .filter(|(a, b)| a < b)
        .collect()
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn t(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, h, m, s).unwrap()
    }

    fn every_minute() -> Schedule {
        Schedule::parse("* * * * *", None).unwrap()
    }

    fn span(after: DateTime<Utc>, now: DateTime<Utc>, downtime: &[Window]) -> Span<'_> {
        Span {
            after,
            now,
            starting_deadline: Duration::seconds(300),
            suspended: false,
            downtime,
        }
    }

    #[test]
    fn on_time_slot_is_due_and_nothing_missed() {
        let a = account(
            &every_minute(),
            &span(t(3, 0, 0), t(3, 1, 0) + Duration::milliseconds(100), &[]),
        );
        assert_eq!(a.due, Some(t(3, 1, 0)));
        assert!(a.records.is_empty() && !a.more);
    }

    #[test]
    fn downtime_slots_are_operator_down_and_latest_catches_up() {
        // operator down from 03:00:30 to 03:10:05; slots 03:01..03:10; deadline 5 min
        let window = (t(3, 0, 30), t(3, 10, 5));
        let a = account(&every_minute(), &span(t(3, 0, 0), t(3, 10, 5), &[window]));
        assert_eq!(
            a.due,
            Some(t(3, 10, 0)),
            "the latest slot within the deadline runs once"
        );
        assert_eq!(a.records.len(), 9);
        assert!(
            a.records
                .iter()
                .all(|r| r.reason == Reason::OperatorDown && r.window == Some(window))
        );
        assert_eq!(a.records[0].first, t(3, 1, 0));
        assert_eq!(a.records[8].first, t(3, 9, 0));
    }

    #[test]
    fn latest_past_deadline_is_missed_too() {
        let mut late = span(t(3, 0, 0), t(3, 10, 40), &[]);
        late.starting_deadline = Duration::seconds(30);
        let a = account(&every_minute(), &late);
        assert_eq!(a.due, None, "03:10 is 40 s old with a 30 s deadline");
        assert_eq!(a.records.len(), 10);
        assert!(a.records.iter().all(|r| r.reason == Reason::PastDeadline));
    }

    #[test]
    fn suspended_slots_are_skipped_and_none_due() {
        let mut s = span(t(3, 0, 0), t(3, 3, 0), &[]);
        s.suspended = true;
        let a = account(&every_minute(), &s);
        assert_eq!(a.due, None);
        assert_eq!(a.slot_count(), 3);
        assert!(
            a.records
                .iter()
                .all(|r| r.reason == Reason::Suspended && r.reason.result() == SlotResult::Skipped)
        );
    }

    #[test]
    fn a_month_of_seconds_is_bounded_per_pass() {
        let schedule = Schedule::parse("* * * * * *", None).unwrap();
        let start = t(0, 0, 0);
        let now = start + Duration::days(30);
        let window = (start, now);
        let a = account(&schedule, &span(start, now, &[window]));
        assert!(a.more, "the backlog continues in the next pass");
        assert_eq!(a.due, None, "nothing runs until the backlog reaches now");
        assert_eq!(
            a.slot_count(),
            SLOT_BUDGET as i64,
            "every enumerated slot is accounted"
        );
        assert_eq!(a.records.len(), RECORD_CAP + 1, "the cap plus one summary");
        let summary = a.records.last().unwrap();
        assert_eq!(summary.count, (SLOT_BUDGET - RECORD_CAP) as i64);
        assert_eq!(summary.first, start + Duration::seconds(RECORD_CAP as i64 + 1));
        assert_eq!(summary.last, start + Duration::seconds(SLOT_BUDGET as i64));

        // passes resume from the last accounted slot until they reach now
        let mut after = summary.last;
        let mut passes = 1;
        let mut total = a.slot_count();
        loop {
            let next = account(&schedule, &span(after, now, &[window]));
            total += next.slot_count() + next.due.map_or(0, |_| 1);
            passes += 1;
            if !next.more {
                assert_eq!(next.due, Some(now), "the final pass reaches the latest slot");
                break;
            }
            after = next.records.last().unwrap().last;
        }
        assert_eq!(total, 30 * 86_400, "every slot accounted exactly once");
        assert_eq!(passes, (30 * 86_400usize).div_ceil(SLOT_BUDGET));
    }

    #[test]
    fn summaries_split_by_reason_and_window() {
        let schedule = Schedule::parse("* * * * * *", None).unwrap();
        let w1 = (t(3, 0, 0), t(3, 1, 0));
        let w2 = (t(3, 2, 0), t(3, 3, 0));
        let now = t(3, 3, 0) + Duration::seconds(400);
        let a = account(&schedule, &span(t(3, 0, 0), now, &[w1, w2]));
        assert_eq!(a.due, Some(now));
        assert_eq!(a.slot_count() + 1, 180 + 400);
        let reasons: Vec<_> = a.records[RECORD_CAP..]
            .iter()
            .map(|r| (r.reason, r.window))
            .collect();
        assert_eq!(
            reasons,
            [
                (Reason::OperatorDown, Some(w1)),
                (Reason::PastDeadline, None),
                (Reason::OperatorDown, Some(w2)),
                (Reason::PastDeadline, None)
            ]
        );
    }

    #[test]
    fn downtime_from_runs() {
        let runs = [
            (t(1, 0, 0), t(2, 0, 0)),
            (t(3, 0, 0), t(3, 30, 0)),
            (t(3, 30, 0), t(4, 0, 0)),
        ];
        assert_eq!(downtime(&runs, t(1, 0, 0)), [(t(2, 0, 0), t(3, 0, 0))]);
        assert_eq!(
            downtime(&runs, t(0, 30, 0)),
            [(t(0, 30, 0), t(1, 0, 0)), (t(2, 0, 0), t(3, 0, 0))]
        );
    }
}
