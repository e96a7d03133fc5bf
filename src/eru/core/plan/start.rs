//! Where the ledger starts a pass: a lost journal's ledger seeded from the status, the current
//! generation's epoch, the cursor (moved past a stretch whose spec is unknown, which is
//! reported), and the operator's downtime since it.

use chrono::{DateTime, Duration, Utc};

use crate::eru::core::{
    ledger::{self, Epoch, Window, effective_from},
    messages::{EruAction, EruDecision, EruRecord, Remembered},
    observed::Observed,
};

/// Where the ledger starts this pass: the seed of a lost journal's ledger from the status, the
/// current generation's epoch if new, the cursor (past a stretch whose spec is unknown, which is
/// reported), and the operator's downtime since it. Returns the cursor, the downtime, a lost
/// journal's unrecorded window and the epochs to account under.
pub(super) fn ledger_start(
    observed: &Observed,
    decision: &mut EruDecision,
) -> (DateTime<Utc>, Vec<Window>, Option<Window>, Vec<Epoch>) {
    // the journal's ledger, or what the cluster remembers of a lost one
    let remembered = observed.cluster.shown.as_ref().filter(|s| s.cursor().is_some());
    if observed.journal.ledger.is_none()
        && let Some(shown) = remembered
    {
        decision.record(EruRecord::Seed(Remembered {
            accounted_through: shown.cursor(),
            ..shown.ledger.clone()
        }));
    }
    let (epochs, new_epoch) = epochs(observed);
    if let Some(epoch) = new_epoch {
        decision.record(EruRecord::Epoch(epoch));
    }
    let mut cursor = cursor(observed);
    // slots before the first epoch this journal knows have no known spec: report, move past
    if let Some(from) = epochs.first().map(|e| e.from).filter(|from| *from > cursor) {
        decision.act(EruAction::ReportGap {
            from: cursor,
            to: from,
        });
        cursor = from;
    }
    if observed.journal_cursor().is_none_or(|j| cursor > j) {
        decision.record(EruRecord::Advance(cursor));
    }
    let (mut downtime, before_first) = ledger::downtime(&observed.journal.runs, cursor);
    let unrecorded = match before_first {
        // the Eru was accounted before, by a journal this operator cannot read
        Some(window) if observed.journal.ledger.is_none() && remembered.is_some() => Some(window),
        Some(window) => {
            downtime.insert(0, window);
            None
        }
        None => None,
    };
    (cursor, downtime, unrecorded, epochs)
}

/// Where accounting resumes: after the latest of the journal's cursor, the status's cursor and —
/// when the journal knows nothing of this Eru — the slot the target's template carries, if it is
/// one of this schedule's (it was restarted, by an operator whose journal is gone). A new Eru
/// starts at its creation.
fn cursor(observed: &Observed) -> DateTime<Utc> {
    let status = observed.cluster.shown.as_ref().and_then(|s| s.cursor());
    let template = observed
        .journal
        .ledger
        .is_none()
        .then(|| observed.target()?.template_slot)
        .flatten()
        .filter(|slot| *slot <= observed.now)
        .filter(|slot| {
            let schedule = observed.cluster.schedule.as_ref().ok();
            schedule.and_then(|s| s.next_after(*slot - Duration::seconds(1))) == Some(*slot)
        });
    [observed.journal_cursor(), status, template]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(observed.cluster.created)
}

/// The epochs to account under, oldest first, and the current generation's if it is new. A new
/// generation takes effect when the API server recorded its spec write (clamped between the
/// previous epoch and now); generation 1 at the Eru's creation; the first epoch of an Eru the
/// journal accounted before epochs were kept, at its cursor.
fn epochs(observed: &Observed) -> (Vec<Epoch>, Option<Epoch>) {
    let cluster = &observed.cluster;
    let mut epochs = observed.journal.epochs.clone();
    let latest = epochs.iter().map(|e| e.generation).max();
    if latest.is_some_and(|g| g >= cluster.generation) {
        // known (or the cache lags behind a generation already journaled)
        return (epochs, None);
    }
    let from = if cluster.generation <= 1 {
        cluster.created
    } else if let Some(last) = epochs.last() {
        effective_from(cluster.spec_written_at, Some(last.from), observed.now)
    } else if let Some(cursor) = observed.journal_cursor() {
        effective_from(cluster.spec_written_at, None, observed.now).min(cursor)
    } else {
        effective_from(cluster.spec_written_at, None, observed.now)
    };
    let epoch = Epoch {
        generation: cluster.generation,
        from,
        spec: cluster.spec.clone(),
    };
    epochs.push(epoch.clone());
    (epochs, Some(epoch))
}
