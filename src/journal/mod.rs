//! The journal: the history of every transition, evaluated slot, restart, spec epoch and
//! operator run, and each Eru's ledger row (cursor and counters), kept in SQLite (WAL, the
//! embedded default) or PostgreSQL, picked at runtime ([`Journal::connect`]). This is the only
//! module that speaks SQL, and it speaks it once for both: `$N` placeholders, `ON CONFLICT`,
//! `RETURNING`, only integer and text columns, and times as fixed-width text, so text order is
//! time order on either. Appends are idempotent on unique keys, so a reconcile replayed after a
//! crash writes nothing twice.

use chrono::{DateTime, SecondsFormat, Utc};
use sqlx::{AnyPool, Row};

use crate::Result;

/// Formats a time the way the journal stores it: RFC 3339, UTC, milliseconds, `Z` (fixed width,
/// so text order is time order).
pub fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Parses a time stored by [`ts`].
pub fn parse_ts(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

mod connect;
mod lock;
mod read;
mod retention;
mod rows;
mod terms;
#[cfg(test)]
mod tests;
mod write;
mod writer;

pub use connect::{Backend, is_postgres_url, redact};
pub use lock::WriterLock;
pub use retention::Pruned;
pub use rows::*;
pub use writer::BatchObserver;

/// The journal handle; cheap to clone. Appends go through one writer task (group commit); reads
/// use the pool.
#[derive(Clone, Debug)]
pub struct Journal {
    pool: AnyPool,
    writer: writer::Writer,
    backend: Backend,
}

impl Journal {
    /// Closes the pool (on SQLite, checkpointing the WAL).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Appends one reconcile's records in a single transaction. Rows already present (same unique
    /// key) are left as they are; a finished restart is finished only once; each Eru's ledger
    /// row changes by exactly what was added.
    ///
    /// Concurrent appends share a transaction (group commit); each returns once its transaction
    /// is durable (WAL, `synchronous=FULL`).
    pub async fn append(&self, entry: &Entry) -> Result<Appended> {
        if entry.is_empty() {
            return Ok(Appended::default());
        }
        self.writer.append(entry.clone()).await
    }

    /// Tells `observer` the size and duration of every group commit.
    pub fn observe_batches(&self, observer: BatchObserver) {
        self.writer.observe(observer);
    }

    /// Records the start of an operator process; returns its run id.
    pub async fn start_run(&self, version: &str, instance: &str, at: DateTime<Utc>) -> Result<i64> {
        let row = sqlx::query(
            "INSERT INTO operator_runs (started_at, heartbeat_at, version, instance)
             VALUES ($1, $2, $3, $4) RETURNING id",
        )
        .bind(ts(at))
        .bind(ts(at))
        .bind(version)
        .bind(instance)
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get(0)?)
    }

    /// Proves the run is still alive at `at`.
    pub async fn heartbeat(&self, run: i64, at: DateTime<Utc>) -> Result<()> {
        sqlx::query("UPDATE operator_runs SET heartbeat_at = $1 WHERE id = $2")
            .bind(ts(at))
            .bind(run)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Records a clean stop.
    pub async fn stop_run(&self, run: i64, at: DateTime<Utc>) -> Result<()> {
        sqlx::query("UPDATE operator_runs SET heartbeat_at = $1, stopped_at = $1 WHERE id = $2")
            .bind(ts(at))
            .bind(run)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The operator runs that were alive at or after `since`, and the last one before it (whose
    /// heartbeat starts a downtime), oldest first. Bounded by what happened since `since`.
    pub async fn runs_since(&self, since: DateTime<Utc>) -> Result<Vec<OperatorRun>> {
        let mut runs: Vec<OperatorRun> = sqlx::query_as(
            "SELECT * FROM (SELECT * FROM operator_runs WHERE heartbeat_at < $1
                            ORDER BY heartbeat_at DESC LIMIT 1) AS before
             UNION ALL SELECT * FROM operator_runs WHERE heartbeat_at >= $1",
        )
        .bind(ts(since))
        .fetch_all(&self.pool)
        .await?;
        runs.sort_by(|a, b| (&a.started_at, a.id).cmp(&(&b.started_at, b.id)));
        Ok(runs)
    }
}
