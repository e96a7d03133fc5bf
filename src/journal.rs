//! The journal: SQLite (WAL) holding the history of every transition, evaluated slot, restart and
//! operator run. This is the only module that speaks SQL. Appends are idempotent on unique keys, so
//! a reconcile replayed after a crash writes nothing twice.

use std::{path::Path, str::FromStr, time::Duration};

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use sqlx::{
    FromRow, Row, SqlitePool,
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

/// Which object a journal row is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectKey {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// A state-machine transition to append.
#[derive(Clone, Debug, PartialEq)]
pub struct NewTransition {
    pub object: ObjectKey,
    /// resourceVersion of the observed object: replaying the same observation gives the same key.
    pub observed: String,
    pub from: &'static str,
    pub to: &'static str,
    pub event: &'static str,
    pub at: DateTime<Utc>,
    pub detail: serde_json::Value,
}

/// The result of evaluating a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SlotResult {
    /// Restarted.
    Fired,
    /// The operator could not act (down, or too late).
    Missed,
    /// The operator chose not to (suspended, target paused or unhealthy, ...).
    Skipped,
}

impl SlotResult {
    pub fn as_str(self) -> &'static str {
        match self {
            SlotResult::Fired => "fired",
            SlotResult::Missed => "missed",
            SlotResult::Skipped => "skipped",
        }
    }
}

/// An evaluated slot (or a summarized run of them) to append.
#[derive(Clone, Debug, PartialEq)]
pub struct NewSlot {
    pub object: ObjectKey,
    pub target: String,
    pub slot: DateTime<Utc>,
    pub last_slot: DateTime<Utc>,
    pub slot_count: i64,
    pub result: SlotResult,
    pub reason: &'static str,
    /// The operator downtime window, for `operator_down`.
    pub window: Option<(DateTime<Utc>, DateTime<Utc>)>,
    pub evaluated_at: DateTime<Utc>,
}

/// A restart that began (its patch was decided) for a slot.
#[derive(Clone, Debug, PartialEq)]
pub struct NewRestart {
    pub object: ObjectKey,
    pub target: String,
    pub slot: DateTime<Utc>,
    pub started_at: DateTime<Utc>,
}

/// The end of a restart.
#[derive(Clone, Debug, PartialEq)]
pub struct FinishedRestart {
    pub uid: String,
    pub slot: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub outcome: &'static str,
    pub reason: Option<String>,
}

/// Everything one reconcile pass journals, written in one transaction.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Entry {
    pub transitions: Vec<NewTransition>,
    pub slots: Vec<NewSlot>,
    pub restarts_started: Vec<NewRestart>,
    pub restarts_finished: Vec<FinishedRestart>,
}

impl Entry {
    pub fn is_empty(&self) -> bool {
        self.transitions.is_empty()
            && self.slots.is_empty()
            && self.restarts_started.is_empty()
            && self.restarts_finished.is_empty()
    }
}

/// How many rows an [`Entry`] actually added (replays add none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Appended {
    pub transitions: u64,
    pub slots: u64,
    pub restarts_started: u64,
    pub restarts_finished: u64,
}

/// A journaled transition.
#[derive(Clone, Debug, FromRow, Serialize, PartialEq)]
pub struct TransitionRow {
    pub id: i64,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub from_state: String,
    pub to_state: String,
    pub event: String,
    pub at: String,
    #[sqlx(try_from = "String")]
    pub detail: JsonText,
}

/// A JSON column, parsed.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(transparent)]
pub struct JsonText(pub serde_json::Value);

impl TryFrom<String> for JsonText {
    type Error = serde_json::Error;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        serde_json::from_str(&s).map(JsonText)
    }
}

/// A journaled restart.
#[derive(Clone, Debug, FromRow, Serialize, PartialEq)]
pub struct RestartRow {
    pub id: i64,
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub target: String,
    pub slot: String,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub outcome: String,
    pub reason: Option<String>,
}

/// A journaled missed or skipped slot (or a summarized run of them).
#[derive(Clone, Debug, FromRow, Serialize, PartialEq)]
pub struct SlotRow {
    pub id: i64,
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub target: String,
    pub slot: String,
    pub last_slot: String,
    pub slot_count: i64,
    pub result: String,
    pub reason: Option<String>,
    pub window_start: Option<String>,
    pub window_end: Option<String>,
    pub evaluated_at: String,
}

/// An Eru's history as its status shows it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EruSummary {
    /// Slots missed or skipped (summaries count every slot they stand for).
    pub missed_slots: i64,
    pub last_missed: Option<DateTime<Utc>>,
    pub last_success: Option<DateTime<Utc>>,
    pub last_failure: Option<DateTime<Utc>>,
    pub last_restart: Option<RestartRow>,
}

/// One operator process, as journaled.
#[derive(Clone, Debug, FromRow, Serialize, PartialEq)]
pub struct OperatorRun {
    pub id: i64,
    pub started_at: String,
    pub heartbeat_at: String,
    pub stopped_at: Option<String>,
    pub version: String,
    pub instance: String,
}

/// Filters shared by the journal queries (all optional).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filter {
    pub kind: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub target: Option<String>,
    pub outcome: Option<String>,
    pub reason: Option<String>,
    /// Journal time bounds, as [`ts`] strings: at or after `since`, before `until`.
    pub since: Option<String>,
    pub until: Option<String>,
    /// Rows with an id below this one (the page cursor).
    pub before: Option<i64>,
    /// Page size; one row more is fetched to tell whether another page follows.
    pub limit: u32,
}

/// The journal handle; cheap to clone.
#[derive(Clone, Debug)]
pub struct Journal {
    pool: SqlitePool,
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
            .synchronous(SqliteSynchronous::Normal)
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
        sqlx::migrate!("./migrations").run(&pool).await?;
        Ok(Self { pool })
    }

    /// Closes the pool, checkpointing the WAL.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Appends one reconcile's records in a single transaction. Rows already present (same unique
    /// key) are left as they are; a finished restart is finished only once.
    pub async fn append(&self, entry: &Entry) -> Result<Appended> {
        let mut done = Appended::default();
        if entry.is_empty() {
            return Ok(done);
        }
        let mut tx = self.pool.begin().await?;
        for t in &entry.transitions {
            done.transitions += sqlx::query(
                "INSERT OR IGNORE INTO transitions
                   (kind, namespace, name, uid, observed, from_state, to_state, event, at, detail)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(t.object.kind)
            .bind(&t.object.namespace)
            .bind(&t.object.name)
            .bind(&t.object.uid)
            .bind(&t.observed)
            .bind(t.from)
            .bind(t.to)
            .bind(t.event)
            .bind(ts(t.at))
            .bind(t.detail.to_string())
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        for s in &entry.slots {
            done.slots += sqlx::query(
                "INSERT OR IGNORE INTO slots
                   (uid, namespace, name, target, slot, last_slot, slot_count, result, reason,
                    window_start, window_end, evaluated_at)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(&s.object.uid)
            .bind(&s.object.namespace)
            .bind(&s.object.name)
            .bind(&s.target)
            .bind(ts(s.slot))
            .bind(ts(s.last_slot))
            .bind(s.slot_count)
            .bind(s.result.as_str())
            .bind(s.reason)
            .bind(s.window.map(|w| ts(w.0)))
            .bind(s.window.map(|w| ts(w.1)))
            .bind(ts(s.evaluated_at))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        for r in &entry.restarts_started {
            done.restarts_started += sqlx::query(
                "INSERT OR IGNORE INTO restarts (uid, namespace, name, target, slot, started_at)
                 VALUES (?, ?, ?, ?, ?, ?)",
            )
            .bind(&r.object.uid)
            .bind(&r.object.namespace)
            .bind(&r.object.name)
            .bind(&r.target)
            .bind(ts(r.slot))
            .bind(ts(r.started_at))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        for f in &entry.restarts_finished {
            done.restarts_finished += sqlx::query(
                "UPDATE restarts SET finished_at = ?, outcome = ?, reason = ?
                 WHERE uid = ? AND slot = ? AND finished_at IS NULL",
            )
            .bind(ts(f.finished_at))
            .bind(f.outcome)
            .bind(&f.reason)
            .bind(&f.uid)
            .bind(ts(f.slot))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        tx.commit().await?;
        Ok(done)
    }

    /// Records the start of an operator process; returns its run id.
    pub async fn start_run(&self, version: &str, instance: &str, at: DateTime<Utc>) -> Result<i64> {
        let row = sqlx::query(
            "INSERT INTO operator_runs (started_at, heartbeat_at, version, instance)
             VALUES (?, ?, ?, ?) RETURNING id",
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
        sqlx::query("UPDATE operator_runs SET heartbeat_at = ? WHERE id = ?")
            .bind(ts(at))
            .bind(run)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Records a clean stop.
    pub async fn stop_run(&self, run: i64, at: DateTime<Utc>) -> Result<()> {
        sqlx::query("UPDATE operator_runs SET heartbeat_at = ?, stopped_at = ? WHERE id = ?")
            .bind(ts(at))
            .bind(ts(at))
            .bind(run)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// All operator runs, oldest first.
    pub async fn runs(&self) -> Result<Vec<OperatorRun>> {
        Ok(sqlx::query_as("SELECT * FROM operator_runs ORDER BY id")
            .fetch_all(&self.pool)
            .await?)
    }

    /// The latest slot of this object that the journal has accounted for (restarted, missed or
    /// skipped), if any.
    pub async fn last_accounted_slot(&self, uid: &str) -> Result<Option<DateTime<Utc>>> {
        let row = sqlx::query(
            "SELECT max(s) FROM (
               SELECT max(slot) AS s FROM restarts WHERE uid = ?1
               UNION ALL SELECT max(last_slot) AS s FROM slots WHERE uid = ?1)",
        )
        .bind(uid)
        .fetch_one(&self.pool)
        .await?;
        let latest: Option<String> = row.try_get(0)?;
        Ok(latest.as_deref().and_then(parse_ts))
    }

    /// The restart recorded for this object's slot, if any.
    pub async fn restart(&self, uid: &str, slot: DateTime<Utc>) -> Result<Option<RestartRow>> {
        Ok(
            sqlx::query_as("SELECT * FROM restarts WHERE uid = ? AND slot = ?")
                .bind(uid)
                .bind(ts(slot))
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// This object's restart still in progress, if any.
    pub async fn open_restart(&self, uid: &str) -> Result<Option<RestartRow>> {
        Ok(sqlx::query_as(
            "SELECT * FROM restarts WHERE uid = ? AND outcome = 'in_progress' ORDER BY slot DESC LIMIT 1",
        )
        .bind(uid)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// What an Eru's status shows of its history.
    pub async fn eru_summary(&self, uid: &str) -> Result<EruSummary> {
        let row = sqlx::query(
            "SELECT
               (SELECT coalesce(sum(slot_count), 0) FROM slots WHERE uid = ?1 AND result != 'fired'),
               (SELECT max(last_slot) FROM slots WHERE uid = ?1 AND result != 'fired'),
               (SELECT max(finished_at) FROM restarts WHERE uid = ?1 AND outcome = 'succeeded'),
               (SELECT max(finished_at) FROM restarts WHERE uid = ?1 AND outcome = 'failed')",
        )
        .bind(uid)
        .fetch_one(&self.pool)
        .await?;
        let time = |i: usize| -> Result<Option<DateTime<Utc>>> {
            Ok(row.try_get::<Option<String>, _>(i)?.as_deref().and_then(parse_ts))
        };
        let last_restart = sqlx::query_as("SELECT * FROM restarts WHERE uid = ? ORDER BY slot DESC LIMIT 1")
            .bind(uid)
            .fetch_optional(&self.pool)
            .await?;
        Ok(EruSummary {
            missed_slots: row.try_get(0)?,
            last_missed: time(1)?,
            last_success: time(2)?,
            last_failure: time(3)?,
            last_restart,
        })
    }

    /// Journaled transitions, newest first (by id), `limit + 1` rows at most.
    pub async fn transitions(&self, f: &Filter) -> Result<Vec<TransitionRow>> {
        Ok(sqlx::query_as(
            "SELECT id, kind, namespace, name, uid, from_state, to_state, event, at, detail FROM transitions
             WHERE (?1 IS NULL OR kind = ?1) AND (?2 IS NULL OR namespace = ?2) AND (?3 IS NULL OR name = ?3)
               AND (?4 IS NULL OR at >= ?4) AND (?5 IS NULL OR at < ?5) AND id < coalesce(?6, 9223372036854775807)
             ORDER BY id DESC LIMIT ?7",
        )
        .bind(&f.kind)
        .bind(&f.namespace)
        .bind(&f.name)
        .bind(&f.since)
        .bind(&f.until)
        .bind(f.before)
        .bind(f.limit + 1)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Journaled restarts, newest first (by id), `limit + 1` rows at most; time bounds apply to
    /// `started_at`.
    pub async fn restarts(&self, f: &Filter) -> Result<Vec<RestartRow>> {
        Ok(sqlx::query_as(
            "SELECT * FROM restarts
             WHERE (?1 IS NULL OR namespace = ?1) AND (?2 IS NULL OR name = ?2) AND (?3 IS NULL OR target = ?3)
               AND (?4 IS NULL OR outcome = ?4) AND (?5 IS NULL OR started_at >= ?5)
               AND (?6 IS NULL OR started_at < ?6) AND id < coalesce(?7, 9223372036854775807)
             ORDER BY id DESC LIMIT ?8",
        )
        .bind(&f.namespace)
        .bind(&f.name)
        .bind(&f.target)
        .bind(&f.outcome)
        .bind(&f.since)
        .bind(&f.until)
        .bind(f.before)
        .bind(f.limit + 1)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Journaled missed and skipped slots, newest first (by id), `limit + 1` rows at most; time
    /// bounds apply to the slots a row stands for.
    pub async fn missed(&self, f: &Filter) -> Result<Vec<SlotRow>> {
        Ok(sqlx::query_as(
            "SELECT * FROM slots
             WHERE result != 'fired'
               AND (?1 IS NULL OR namespace = ?1) AND (?2 IS NULL OR name = ?2) AND (?3 IS NULL OR target = ?3)
               AND (?4 IS NULL OR reason = ?4) AND (?5 IS NULL OR last_slot >= ?5)
               AND (?6 IS NULL OR slot < ?6) AND id < coalesce(?7, 9223372036854775807)
             ORDER BY id DESC LIMIT ?8",
        )
        .bind(&f.namespace)
        .bind(&f.name)
        .bind(&f.target)
        .bind(&f.reason)
        .bind(&f.since)
        .bind(&f.until)
        .bind(f.before)
        .bind(f.limit + 1)
        .fetch_all(&self.pool)
        .await?)
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

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn object() -> ObjectKey {
        ObjectKey {
            kind: "Eru",
            namespace: "ns".into(),
            name: "web".into(),
            uid: "u1".into(),
        }
    }

    fn at(min: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, 3, min, 0).unwrap()
    }

    fn entry() -> Entry {
        Entry {
            transitions: vec![NewTransition {
                object: object(),
                observed: "42".into(),
                from: "Waiting",
                to: "RollingOut",
                event: "SlotDue",
                at: at(0),
                detail: serde_json::json!({"slot": ts(at(0))}),
            }],
            slots: vec![NewSlot {
                object: object(),
                target: "web".into(),
                slot: at(1),
                last_slot: at(1),
                slot_count: 1,
                result: SlotResult::Skipped,
                reason: "target_paused",
                window: None,
                evaluated_at: at(1),
            }],
            restarts_started: vec![NewRestart {
                object: object(),
                target: "web".into(),
                slot: at(0),
                started_at: at(0),
            }],
            restarts_finished: vec![],
        }
    }

    #[tokio::test]
    async fn migrations_create_every_table() {
        let journal = Journal::open_in_memory().await.unwrap();
        let tables: Vec<String> =
            sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
                .fetch_all(&journal.pool)
                .await
                .unwrap();
        for t in ["operator_runs", "restarts", "slots", "transitions"] {
            assert!(tables.iter().any(|n| n == t), "missing table {t}: {tables:?}");
        }
    }

    #[tokio::test]
    async fn append_is_idempotent() {
        let journal = Journal::open_in_memory().await.unwrap();
        let first = journal.append(&entry()).await.unwrap();
        assert_eq!(
            first,
            Appended {
                transitions: 1,
                slots: 1,
                restarts_started: 1,
                restarts_finished: 0
            }
        );
        let replay = journal.append(&entry()).await.unwrap();
        assert_eq!(replay, Appended::default(), "a replay must write nothing");

        let finish = FinishedRestart {
            uid: "u1".into(),
            slot: at(0),
            finished_at: at(2),
            outcome: "succeeded",
            reason: None,
        };
        let done = Entry {
            restarts_finished: vec![finish.clone()],
            ..Entry::default()
        };
        assert_eq!(journal.append(&done).await.unwrap().restarts_finished, 1);
        // a second finish (replay, or a late failure) does not overwrite the first outcome
        let late = Entry {
            restarts_finished: vec![FinishedRestart {
                outcome: "failed",
                finished_at: at(5),
                ..finish
            }],
            ..Entry::default()
        };
        assert_eq!(journal.append(&late).await.unwrap().restarts_finished, 0);
        let row = journal.restart("u1", at(0)).await.unwrap().unwrap();
        assert_eq!(row.outcome, "succeeded");
        assert_eq!(row.finished_at.as_deref(), Some("2026-11-22T03:02:00.000Z"));

        let filter = Filter {
            limit: 10,
            ..Filter::default()
        };
        assert_eq!(journal.transitions(&filter).await.unwrap().len(), 1);
        assert_eq!(journal.missed(&filter).await.unwrap().len(), 1);
        assert_eq!(journal.last_accounted_slot("u1").await.unwrap(), Some(at(1)));
        assert_eq!(journal.last_accounted_slot("other").await.unwrap(), None);
    }

    #[tokio::test]
    async fn eru_summary_counts_summarized_slots() {
        let journal = Journal::open_in_memory().await.unwrap();
        journal.append(&entry()).await.unwrap();
        let summary_row = NewSlot {
            slot: at(10),
            last_slot: at(20),
            slot_count: 11,
            result: SlotResult::Missed,
            reason: "operator_down",
            ..entry().slots[0].clone()
        };
        let fired = NewSlot {
            slot: at(0),
            last_slot: at(0),
            result: SlotResult::Fired,
            reason: "scheduled",
            ..entry().slots[0].clone()
        };
        journal
            .append(&Entry {
                slots: vec![summary_row, fired],
                ..Entry::default()
            })
            .await
            .unwrap();
        let summary = journal.eru_summary("u1").await.unwrap();
        assert_eq!(
            summary.missed_slots, 12,
            "1 skipped + 11 summarized, fired excluded"
        );
        assert_eq!(summary.last_missed, Some(at(20)));
        assert_eq!(
            summary.last_restart.as_ref().map(|r| r.slot.as_str()),
            Some("2026-11-22T03:00:00.000Z")
        );
        assert_eq!(
            journal.open_restart("u1").await.unwrap().map(|r| r.outcome),
            Some("in_progress".into())
        );
        assert_eq!(summary.last_success, None);
    }

    #[tokio::test]
    async fn transition_detail_round_trips() {
        let journal = Journal::open_in_memory().await.unwrap();
        journal.append(&entry()).await.unwrap();
        let rows = journal
            .transitions(&Filter {
                limit: 1,
                ..Filter::default()
            })
            .await
            .unwrap();
        assert_eq!(rows[0].detail.0["slot"], "2026-11-22T03:00:00.000Z");
        assert_eq!(
            (rows[0].from_state.as_str(), rows[0].to_state.as_str()),
            ("Waiting", "RollingOut")
        );
    }

    #[tokio::test]
    async fn runs_record_start_heartbeat_and_stop() {
        let journal = Journal::open_in_memory().await.unwrap();
        let run = journal.start_run("0.1.0", "test", at(0)).await.unwrap();
        journal.heartbeat(run, at(1)).await.unwrap();
        let runs = journal.runs().await.unwrap();
        assert_eq!(runs[0].heartbeat_at, ts(at(1)));
        assert_eq!(runs[0].stopped_at, None);
        journal.stop_run(run, at(3)).await.unwrap();
        assert_eq!(journal.runs().await.unwrap()[0].stopped_at, Some(ts(at(3))));
    }

    #[tokio::test]
    async fn file_journal_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("eru.db");
        let journal = Journal::open(&path).await.unwrap();
        journal.append(&entry()).await.unwrap();
        journal.close().await;
        let again = Journal::open(&path).await.unwrap();
        assert_eq!(
            again
                .restarts(&Filter {
                    limit: 5,
                    ..Filter::default()
                })
                .await
                .unwrap()
                .len(),
            1
        );
    }

    #[tokio::test]
    async fn corrupt_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("eru.db");
        std::fs::write(&path, vec![0x42u8; 8192]).unwrap();
        let err = Journal::open(&path).await.unwrap_err();
        assert_eq!(err.category(), "journal");
        let text = err.to_string();
        assert!(
            text.contains("eru.db") && text.contains("corrupt"),
            "unclear error: {text}"
        );
    }

    #[tokio::test]
    async fn missing_directory_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no/such/dir/eru.db");
        let text = Journal::open(&path).await.unwrap_err().to_string();
        assert!(
            text.contains("no/such/dir/eru.db") && text.contains("cannot open"),
            "unclear error: {text}"
        );
    }
}
