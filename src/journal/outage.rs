//! Journal outages: when this process's journal took no writes (disk full, database down), kept
//! in memory from how the writer task's transactions go (appends and heartbeats alike are written
//! by it), and from a pass's reads that cannot reach the database at all. After such a failure,
//! the journal is failing since the last write that worked; the first transaction that commits
//! again writes the window `(that last write, this one]` into `journal_outages` itself, so the
//! window is journaled by the very write that ends it: no pass can record a slot of the window
//! before the window is recorded, and no window is only in memory once the journal takes writes
//! again. A pass reads the open window without I/O
//! ([`Journal::outage_now`](super::Journal::outage_now)) and the closed ones from the table.
//!
//! A process that dies during an outage loses the open window: its slots then fall in the gap
//! between its run's last heartbeat and the next run's start (`operator_down`); none is invented.

use std::sync::Mutex;

use chrono::{DateTime, Utc};

/// Whether the journal takes writes, as this process's writes found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Writes {
    /// Writes work; the last one at this instant (none yet: the journal was only opened).
    Healthy { last: Option<DateTime<Utc>> },
    /// A write failed, and none has worked since `since`, the last one that did.
    Failing { since: DateTime<Utc> },
}

/// An outage not journaled yet: what the next write that works records with itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Open {
    pub since: DateTime<Utc>,
    /// The operator run that saw it, if one has started.
    pub run: Option<i64>,
}

/// The outage state of one journal handle (shared by its clones and its writer task).
#[derive(Debug)]
pub(super) struct Outages {
    writes: Mutex<Writes>,
    run: Mutex<Option<i64>>,
}

impl Default for Outages {
    fn default() -> Self {
        Self {
            writes: Mutex::new(Writes::Healthy { last: None }),
            run: Mutex::new(None),
        }
    }
}

impl Outages {
    fn writes(&self) -> std::sync::MutexGuard<'_, Writes> {
        // the state is two instants, consistent after any panic: a poisoned lock is still usable
        self.writes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This process journaled the start of `run` at `at` (a write that worked). An outage is not
    /// ended by it: only a write that records the window ends one.
    pub(super) fn started(&self, run: i64, at: DateTime<Utc>) {
        *self.run.lock().unwrap_or_else(|e| e.into_inner()) = Some(run);
        let mut writes = self.writes();
        if let Writes::Healthy { last } = *writes {
            *writes = Writes::Healthy {
                last: Some(last.map_or(at, |l| l.max(at))),
            };
        }
    }

    /// The run this process journaled the start of, if it has.
    pub(super) fn run(&self) -> Option<i64> {
        *self.run.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The outage the next transaction must record, if a write failed since the last that worked.
    pub(super) fn open(&self) -> Option<Open> {
        match *self.writes() {
            Writes::Healthy { .. } => None,
            Writes::Failing { since } => Some(Open {
                since,
                run: *self.run.lock().unwrap_or_else(|e| e.into_inner()),
            }),
        }
    }

    /// A transaction committed at `at`, with the outage [`open`](Self::open) returned before it,
    /// if any: the journal is healthy again.
    pub(super) fn wrote(&self, at: DateTime<Utc>) {
        let mut writes = self.writes();
        let last = match *writes {
            Writes::Healthy { last: Some(last) } => last.max(at),
            _ => at,
        };
        *writes = Writes::Healthy { last: Some(last) };
    }

    /// A transaction (or a read that could not reach the database) begun at `attempted` failed.
    /// The first failure opens an outage from the last write that worked (or, if none has in this
    /// process, from this attempt: the start is never put earlier than what is known). Returns the
    /// outage's start when this failure opened it.
    pub(super) fn failed(&self, attempted: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut writes = self.writes();
        match *writes {
            Writes::Failing { .. } => None,
            Writes::Healthy { last } => {
                let since = last.unwrap_or(attempted);
                *writes = Writes::Failing { since };
                Some(since)
            }
        }
    }

    /// The outage as of `now`: `(since, now)` while writes fail; none while they work (a closed
    /// outage is journaled by the write that closed it).
    pub(super) fn at(&self, now: DateTime<Utc>) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        match *self.writes() {
            Writes::Failing { since } if since < now => Some((since, now)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::{Duration, TimeZone};

    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, 3, 0, 0).unwrap() + Duration::seconds(s)
    }

    #[test]
    fn an_outage_runs_from_the_last_write_that_worked_until_one_works_again() {
        let outages = Outages::default();
        assert_eq!((outages.open(), outages.at(t(1))), (None, None));
        outages.started(7, t(0));
        outages.wrote(t(2));
        assert_eq!(outages.failed(t(5)), Some(t(2)), "opened from the last write");
        assert_eq!(outages.failed(t(9)), None, "already open");
        outages.started(8, t(10));
        assert_eq!(
            outages.open(),
            Some(Open {
                since: t(2),
                run: Some(8)
            }),
            "a run's start does not end it: it records no window"
        );
        assert_eq!(outages.at(t(12)), Some((t(2), t(12))));
        assert_eq!(outages.at(t(1)), None, "nothing before it began");
        outages.wrote(t(14));
        assert_eq!((outages.open(), outages.at(t(15))), (None, None));
        assert_eq!(outages.failed(t(20)), Some(t(14)), "the next one starts afresh");
    }

    #[test]
    fn without_any_write_that_worked_an_outage_starts_at_the_failed_attempt() {
        let outages = Outages::default();
        assert_eq!(outages.failed(t(3)), Some(t(3)));
        assert_eq!(
            outages.open(),
            Some(Open {
                since: t(3),
                run: None
            })
        );
    }
}
