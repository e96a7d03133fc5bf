//! The journal: SQLite (WAL) holding the history of every transition, evaluated slot, restart,
//! spec epoch and operator run, and each Eru's ledger row (cursor and counters). This is the only
//! module that speaks SQL. Appends are idempotent on unique keys, so a reconcile replayed after a
//! crash writes nothing twice.

use std::{path::Path, str::FromStr, time::Duration};

use chrono::{DateTime, SecondsFormat, Utc};
use sqlx::{
    Row, SqlitePool,
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous},
};

use crate::{Error, Result};

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

mod lock;
mod read;
mod retention;
mod rows;
mod terms;
#[cfg(test)]
mod tests;
mod write;
mod writer;

pub use lock::WriterLock;
pub use retention::Pruned;
pub use rows::*;
pub use writer::BatchObserver;

/// The journal handle; cheap to clone. Appends go through one writer task (group commit); reads
/// use the pool.
#[derive(Clone, Debug)]
pub struct Journal {
    pool: SqlitePool,
    writer: writer::Writer,
}

impl Journal {
    /// Opens (creating if missing) and migrates the journal at `path`. An unwritable, locked or
    /// corrupt file gives [`Error::JournalFile`] naming the path.
    pub async fn open(path: &Path) -> Result<Self> {
        let shown = path.display().to_string();
        let file_error = |e: sqlx::Error| Error::JournalFile {
            path: shown.clone(),
            reason: describe(&e),
        };
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // every commit reaches the disk before anything is acted on; group commit makes it cheap
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(true)
            // temp tables in memory: the container root filesystem is read-only
            .pragma("temp_store", "memory");
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await
            .map_err(file_error)?;
        Self::prepare(pool).await.map_err(|e| match e {
            Error::Journal(e) => file_error(e),
            Error::Migrate(e) => Error::JournalFile {
                path: path.display().to_string(),
                reason: e.to_string(),
            },
            other => other,
        })
    }

    /// An in-memory journal (one connection, so one database), for tests and previews.
    pub async fn open_in_memory() -> Result<Self> {
        let options = SqliteConnectOptions::from_str("sqlite::memory:")?;
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await?;
        Self::prepare(pool).await
    }

    async fn prepare(pool: SqlitePool) -> Result<Self> {
        let check: String = sqlx::query("PRAGMA quick_check")
            .fetch_one(&pool)
            .await?
            .try_get(0)?;
        if check != "ok" {
            return Err(Error::JournalFile {
                path: "journal".into(),
                reason: format!("integrity check: {check}"),
            });
        }
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        let writer = writer::Writer::spawn(pool.clone());
        Ok(Self { pool, writer })
    }

    /// Closes the pool, checkpointing the WAL.
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

/// A one-line reason for a database that cannot be opened.
fn describe(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Database(db) => {
            let msg = db.message();
            if msg.contains("not a database") {
                "the file is not a SQLite database or is corrupt".into()
            } else if msg.contains("locked") || msg.contains("busy") {
                "the database is locked by another process".into()
            } else if msg.contains("unable to open") || msg.contains("readonly") || msg.contains("read-only")
            {
                format!("cannot open or write it ({msg}); check the directory exists and is writable")
            } else {
                msg.to_string()
            }
        }
        other => other.to_string(),
    }
}
