//! The operator runs and journal outages, kept between passes. Every Eru pass reads both (its
//! downtime windows come from them) and they are the same for every Eru: at 10,000 Erus due
//! together they were two of a pass's ten queries, and a first pass's too (issue 57).
//!
//! Only the leader writes them, through this process's commits (a stale leader's commit is
//! refused by the fence, fence.rs), so what a pass read stays true until this process commits
//! again. Every commit, written or failed, moves [`Downtime::writes`] on before its callers hear
//! back, and a kept read serves only while that count is the one taken before the read: a pass
//! that starts after a commit answered never sees what was read before it.
//!
//! A read is kept with the cursor it was made from and serves every later cursor: the rows the
//! query returns from a later cursor on are among them, and are filtered here as the query
//! filters ([`runs_from`], [`outages_from`]). A first pass of each Eru in a new process reads.

use std::sync::{
    Mutex,
    atomic::{AtomicU64, Ordering},
};

use chrono::{DateTime, SubsecRound, Utc};

use super::{OperatorRun, OutageRow};

/// One read kept: its rows, the cursor it was made from, and the commit count before it.
#[derive(Debug)]
struct Kept<T> {
    writes: u64,
    since: DateTime<Utc>,
    rows: Vec<T>,
}

/// The last read of the operator runs and of the journal outages, while no commit followed.
#[derive(Debug, Default)]
pub(super) struct Downtime {
    /// This process's commits so far.
    writes: AtomicU64,
    runs: Mutex<Option<Kept<OperatorRun>>>,
    outages: Mutex<Option<Kept<OutageRow>>>,
}

impl Downtime {
    /// This process committed, or tried to: nothing read before counts any more.
    pub(super) fn written(&self) {
        self.writes.fetch_add(1, Ordering::SeqCst);
    }

    /// The commit count, taken before a read and handed to `keep_*` with its rows.
    pub(super) fn writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }

    /// What [`Reader::runs_since`](super::Reader::runs_since) would read, if a read that
    /// serves `since` is kept.
    pub(super) fn runs_since(&self, since: DateTime<Utc>) -> Option<Vec<OperatorRun>> {
        served(&self.runs, self.writes(), since, runs_from)
    }

    /// What [`Reader::outages_since`](super::Reader::outages_since) would read, if a read that
    /// serves `since` is kept.
    pub(super) fn outages_since(&self, since: DateTime<Utc>) -> Option<Vec<OutageRow>> {
        served(&self.outages, self.writes(), since, outages_from)
    }

    /// Keeps the runs read from `since` with the commit count `writes` taken before the read.
    pub(super) fn keep_runs(&self, writes: u64, since: DateTime<Utc>, rows: &[OperatorRun]) {
        keep(
            &self.runs,
            self.writes(),
            Kept {
                writes,
                since: millis(since),
                rows: rows.to_vec(),
            },
        );
    }

    /// Keeps the outages read from `since` with the commit count `writes` taken before the read.
    pub(super) fn keep_outages(&self, writes: u64, since: DateTime<Utc>, rows: &[OutageRow]) {
        keep(
            &self.outages,
            self.writes(),
            Kept {
                writes,
                since: millis(since),
                rows: rows.to_vec(),
            },
        );
    }
}

/// What the read kept in `slot` gives for `since` through `from`, if no commit came since it
/// (`now`: the count now) and it was made from `since` or earlier.
fn served<T>(
    slot: &Mutex<Option<Kept<T>>>,
    now: u64,
    since: DateTime<Utc>,
    from: fn(&[T], DateTime<Utc>) -> Vec<T>,
) -> Option<Vec<T>> {
    let since = millis(since);
    let kept = slot.lock().expect("kept read lock");
    let kept = kept.as_ref().filter(|k| k.writes == now && k.since <= since)?;
    Some(from(&kept.rows, since))
}

/// Keeps `read` unless a commit came since it began (`now`: the count now), or a read as fresh
/// from an earlier cursor is kept (it serves more cursors).
fn keep<T>(slot: &Mutex<Option<Kept<T>>>, now: u64, read: Kept<T>) {
    let mut kept = slot.lock().expect("kept read lock");
    let serves_more = kept
        .as_ref()
        .is_some_and(|k| k.writes == read.writes && k.since <= read.since);
    if read.writes == now && !serves_more {
        *kept = Some(read);
    }
}

/// The journal keeps instants to the millisecond, and compares a cursor as it is written.
fn millis(t: DateTime<Utc>) -> DateTime<Utc> {
    t.trunc_subsecs(3)
}

/// The runs the query returns from `since`, out of those it returned from an earlier cursor:
/// the last whose heartbeat is before `since` (a downtime starts there) and every later one,
/// oldest start first.
fn runs_from(rows: &[OperatorRun], since: DateTime<Utc>) -> Vec<OperatorRun> {
    let before = (rows.iter())
        .filter(|r| *r.heartbeat_at < since)
        .max_by_key(|r| (*r.heartbeat_at, r.id));
    let mut runs: Vec<OperatorRun> = (before.into_iter())
        .chain(rows.iter().filter(|r| *r.heartbeat_at >= since))
        .cloned()
        .collect();
    runs.sort_by(|a, b| (&a.started_at, a.id).cmp(&(&b.started_at, b.id)));
    runs
}

/// The outages the query returns from `since` (those that ended after it), out of those it
/// returned from an earlier cursor, in their order.
fn outages_from(rows: &[OutageRow], since: DateTime<Utc>) -> Vec<OutageRow> {
    rows.iter().filter(|o| *o.ended_at > since).cloned().collect()
}
