//! Retention: rows older than a cutoff are pruned in small batches (each its own short
//! transaction, so appends are never held up for long). Totals do not change: each Eru's counters
//! live in its ledger row, which only goes once its Eru has been deleted for longer than the
//! retention. Nothing accounting still needs is pruned: restarts in progress, the spec epoch in
//! force at an Eru's cursor, the operator runs and journal outages since the oldest cursor, a
//! live Eru's manual runs, and a pause on failure not resumed.

use chrono::{DateTime, Utc};

use super::*;

/// Rows pruned, by table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    pub transitions: u64,
    pub slots: u64,
    pub restarts: u64,
    pub epochs: u64,
    pub runs: u64,
    pub outages: u64,
    pub ledgers: u64,
    pub manual_runs: u64,
    /// Rows of `slot_totals` whose Eru's ledger and rows are all gone.
    pub slot_totals: u64,
    /// Pauses on failure resumed before the cutoff, or of an Eru deleted before it.
    pub pauses: u64,
}

impl Pruned {
    pub fn total(&self) -> u64 {
        self.transitions
            + self.slots
            + self.restarts
            + self.epochs
            + self.runs
            + self.outages
            + self.ledgers
            + self.manual_runs
            + self.slot_totals
            + self.pauses
    }
}

/// A pruning statement and the count it adds to.
type Statement = (fn(&mut Pruned) -> &mut u64, &'static str);

/// Each statement deletes at most `$2` rows older than `$1`, by primary key.
const STATEMENTS: [Statement; 10] = [
    (
        |p| &mut p.transitions,
        "DELETE FROM transitions WHERE id IN (SELECT id FROM transitions WHERE at < $1 LIMIT $2)",
    ),
    (
        |p| &mut p.slots,
        "DELETE FROM slots WHERE id IN (SELECT id FROM slots WHERE last_slot < $1 LIMIT $2)",
    ),
    (
        |p| &mut p.restarts,
        "DELETE FROM restarts WHERE id IN (SELECT id FROM restarts
           WHERE decided_at < $1 AND outcome != 'in_progress' LIMIT $2)",
    ),
    // an epoch superseded by a later one that took effect before the cutoff and before the
    // Eru's cursor is never read again; a deleted Eru's epochs go with its ledger row
    (
        |p| &mut p.epochs,
        "DELETE FROM spec_epochs WHERE (uid, generation) IN (
           SELECT e.uid, e.generation FROM spec_epochs AS e JOIN eru_ledger AS g ON g.uid = e.uid
           WHERE (g.deleted_at IS NOT NULL AND g.deleted_at < $1)
              OR (e.effective_from < $1 AND EXISTS (
                    SELECT 1 FROM spec_epochs AS later
                    WHERE later.uid = e.uid AND later.effective_from > e.effective_from
                      AND later.effective_from <= $1 AND later.effective_from <= g.accounted_through))
           LIMIT $2)",
    ),
    // runs before the oldest live cursor, but the last of them (its heartbeat starts a downtime)
    (
        |p| &mut p.runs,
        "DELETE FROM operator_runs WHERE id IN (SELECT id FROM operator_runs
           WHERE heartbeat_at < $1
             AND heartbeat_at < (SELECT coalesce(min(accounted_through), $1) FROM eru_ledger
                                 WHERE deleted_at IS NULL)
             AND id != (SELECT coalesce(max(id), 0) FROM operator_runs
                        WHERE heartbeat_at < (SELECT coalesce(min(accounted_through), $1) FROM eru_ledger
                                              WHERE deleted_at IS NULL))
           LIMIT $2)",
    ),
    // outages that ended before the oldest live cursor: accounting reads only those ending after
    // an Eru's cursor
    (
        |p| &mut p.outages,
        "DELETE FROM journal_outages WHERE id IN (SELECT id FROM journal_outages
           WHERE ended_at < $1
             AND ended_at < (SELECT coalesce(min(accounted_through), $1) FROM eru_ledger
                             WHERE deleted_at IS NULL)
           LIMIT $2)",
    ),
    // a manual run stays while its Eru lives (the Eru may still carry its token: a pruned run
    // would be seen as new); it goes with a deleted Eru's ledger
    (
        |p| &mut p.manual_runs,
        "DELETE FROM manual_runs WHERE id IN (SELECT r.id FROM manual_runs AS r
           LEFT JOIN eru_ledger AS g ON g.uid = r.uid
           WHERE r.requested_at < $1 AND r.outcome NOT IN ('waiting', 'in_progress')
             AND (g.uid IS NULL OR (g.deleted_at IS NOT NULL AND g.deleted_at < $1))
           LIMIT $2)",
    ),
    // a pause resumed before the cutoff is over, but an Eru's latest (its resume is where the
    // next row of failed restarts starts counting); a deleted Eru's go with it
    (
        |p| &mut p.pauses,
        "DELETE FROM failure_pauses WHERE id IN (SELECT p.id FROM failure_pauses AS p
           LEFT JOIN eru_ledger AS g ON g.uid = p.uid
           WHERE (p.resumed_at IS NOT NULL AND p.resumed_at < $1
                  AND p.since < (SELECT max(l.since) FROM failure_pauses AS l WHERE l.uid = p.uid))
              OR (g.uid IS NULL AND p.since < $1)
              OR (g.deleted_at IS NOT NULL AND g.deleted_at < $1)
           LIMIT $2)",
    ),
    (
        |p| &mut p.ledgers,
        "DELETE FROM eru_ledger WHERE uid IN (SELECT uid FROM eru_ledger
           WHERE deleted_at IS NOT NULL AND deleted_at < $1
             AND NOT EXISTS (SELECT 1 FROM spec_epochs WHERE spec_epochs.uid = eru_ledger.uid)
           LIMIT $2)",
    ),
    // an Eru's row sums go once its ledger has gone and its rows with it (they sum to nothing)
    (
        |p| &mut p.slot_totals,
        "DELETE FROM slot_totals WHERE uid IN (SELECT t.uid FROM slot_totals AS t
           WHERE t.fired = 0 AND t.not_fired = 0 AND $1 IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM eru_ledger AS g WHERE g.uid = t.uid)
           LIMIT $2)",
    ),
];

impl Journal {
    /// Deletes at most `batch` rows of each table older than `cutoff`; returns how many went. Call
    /// it again until it prunes nothing.
    pub async fn prune(&self, cutoff: DateTime<Utc>, batch: u32) -> Result<Pruned> {
        const RETENTION: &str = "retention's prune";
        let mut pruned = Pruned::default();
        let cutoff = ts(cutoff);
        let mut tx = self.begin_fenced(RETENTION).await?;
        if self.backend == Backend::Postgres {
            // the slots' deletes update their Erus' row sums (migration 0014's trigger), as the
            // writer's appends do, each in its own order: taken whole first, the sums cannot
            // deadlock the two (an append waits for this short batch; SQLite has one writer)
            sqlx::query("LOCK TABLE slot_totals IN SHARE ROW EXCLUSIVE MODE")
                .execute(&mut *tx)
                .await?;
        }
        for (count, sql) in STATEMENTS {
            *count(&mut pruned) += sqlx::query(sql)
                .bind(&cutoff)
                .bind(i64::from(batch))
                .execute(&mut *tx)
                .await?
                .rows_affected();
        }
        self.commit_fenced(tx, RETENTION).await?;
        Ok(pruned)
    }
}
