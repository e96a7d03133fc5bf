//! The journal: the history of every transition, evaluated slot, restart, spec epoch, operator
//! run and journal outage, and each Eru's ledger row (cursor and counters), kept in SQLite (WAL, the
//! embedded default) or PostgreSQL, picked at runtime ([`Journal::connect`]). This is the only
//! module that speaks SQL, and it speaks it once for both: `$N` placeholders, `ON CONFLICT`,
//! `RETURNING`, only integer and text columns, and times as fixed-width text, so text order is
//! time order on either. Appends are idempotent on unique keys, so a reconcile replayed after a
//! crash writes nothing twice.

use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use sqlx::{AnyPool, Row};

use crate::Result;

/// Formats a time the way the journal stores it: RFC 3339, UTC, milliseconds, `Z` (fixed width,
/// so text order is time order).
pub fn ts(t: DateTime<Utc>) -> String {
    let mut text = String::with_capacity(24);
    let _ = write_ts(&mut text, t);
    text
}

/// [`ts`] into `out` without chrono's general formatter (an audit page writes ~70,000 times).
fn write_ts(out: &mut impl std::fmt::Write, t: DateTime<Utc>) -> std::fmt::Result {
    use chrono::{Datelike, Timelike};
    let millis = t.nanosecond() / 1_000_000;
    if !(0..=9999).contains(&t.year()) || millis >= 1000 {
        // years RFC 3339 cannot write in four digits, and leap seconds: chrono's own way
        return out.write_str(&t.to_rfc3339_opts(SecondsFormat::Millis, true));
    }
    write!(
        out,
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        t.year(),
        t.month(),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// Parses a time stored by [`ts`].
pub fn parse_ts(s: &str) -> Option<DateTime<Utc>> {
    fast_ts(s).or_else(|| {
        DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    })
}

/// [`ts`]'s own shape, `YYYY-MM-DDTHH:MM:SS.mmmZ`, without chrono's general RFC 3339 parser (an
/// audit's window reads ~150,000 times); anything else (`None`) goes to that parser.
fn fast_ts(s: &str) -> Option<DateTime<Utc>> {
    let b = s.as_bytes();
    let shape = b.len() == 24
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'.'
        && b[23] == b'Z';
    if !shape {
        return None;
    }
    let n = |at: std::ops::Range<usize>| -> Option<u32> {
        (b[at].iter()).try_fold(0u32, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
        })
    };
    let date = chrono::NaiveDate::from_ymd_opt(n(0..4)? as i32, n(5..7)?, n(8..10)?)?;
    let time = date.and_hms_milli_opt(n(11..13)?, n(14..16)?, n(17..19)?, n(20..23)?)?;
    Some(time.and_utc())
}

/// A time column as read: parsed once, here at the journal's edge. A column that does not parse
/// fails the read (naming the column and its text); no row is silently dropped. Serialized as the
/// journal stores it ([`ts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ts(pub DateTime<Utc>);

impl sqlx::Type<sqlx::Any> for Ts {
    fn type_info() -> sqlx::any::AnyTypeInfo {
        <String as sqlx::Type<sqlx::Any>>::type_info()
    }
}

impl<'r> sqlx::Decode<'r, sqlx::Any> for Ts {
    fn decode(value: sqlx::any::AnyValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        let text = <&str as sqlx::Decode<sqlx::Any>>::decode(value)?;
        parse_ts(text)
            .map(Ts)
            .ok_or_else(|| format!("not a journal time: {text:?}").into())
    }
}

impl sqlx::Encode<'_, sqlx::Any> for Ts {
    fn encode_by_ref(
        &self,
        buf: &mut <sqlx::Any as sqlx::Database>::ArgumentBuffer,
    ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
        <String as sqlx::Encode<sqlx::Any>>::encode(ts(self.0), buf)
    }
}

impl serde::Serialize for Ts {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(&ts(self.0))
    }
}

/// Read back from what [`Ts`] serializes (or any RFC 3339 time): the CLI reads a running
/// operator's answers into the types the server wrote them from.
impl<'de> serde::Deserialize<'de> for Ts {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        parse_ts(&text)
            .map(Ts)
            .ok_or_else(|| serde::de::Error::custom(format!("not an RFC 3339 time: {text:?}")))
    }
}

impl std::ops::Deref for Ts {
    type Target = DateTime<Utc>;
    fn deref(&self) -> &DateTime<Utc> {
        &self.0
    }
}

impl std::fmt::Display for Ts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write_ts(f, self.0)
    }
}

impl PartialEq<&str> for Ts {
    fn eq(&self, other: &&str) -> bool {
        parse_ts(other) == Some(self.0)
    }
}

mod columns;
mod connect;
mod downtime;
mod fence;
mod first;
pub use first::FirstRead;
mod lock;
mod notices;
mod outage;
mod outbox;
mod pauses;
pub use outbox::PendingOf;
pub use pauses::{EndedRow, PauseChange, PauseRow};
mod read;
mod reader;
pub use reader::Reader;
mod retention;
mod rows;
mod runs;
mod terms;
#[cfg(test)]
pub(crate) mod tests;
mod window;
mod write;
mod writer;

pub use connect::{Backend, is_postgres_url, redact};
pub use fence::WriteGuard;
pub use lock::{ActorLock, WriterLock};
pub use retention::Pruned;
pub use rows::*;
pub use runs::{RunChange, RunRow};
pub use writer::BatchObserver;

/// The journal handle; cheap to clone. Appends and heartbeats go through one writer task (group
/// commit), which also keeps track of journal outages; reads use the pool.
#[derive(Clone, Debug)]
pub struct Journal {
    pool: AnyPool,
    writer: writer::Writer,
    outages: Arc<outage::Outages>,
    /// The leader epoch this process writes under, and its write guard.
    fence: Arc<fence::Fence>,
    /// The operator runs and journal outages read last, until this process commits again.
    downtime: Arc<downtime::Downtime>,
    backend: Backend,
    /// The database's connection options, for [`Journal::with_own_readers`] (none in memory).
    options: Option<sqlx::any::AnyConnectOptions>,
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

    /// Asks `guard` immediately before every write commits (the writer's batches of appends and
    /// heartbeats, and the writes outside it: settles, prunes, retention, the run's stop); a write
    /// it refuses is not committed, and its callers get the error.
    pub fn guard_writes(&self, guard: WriteGuard) {
        self.fence.guard(guard);
    }

    /// Tells `observer` the size and duration of every group commit.
    pub fn observe_batches(&self, observer: BatchObserver) {
        self.writer.observe(observer);
    }

    /// Records the start of an operator process; returns its run id (which the journal outages
    /// this process sees are recorded under).
    pub async fn start_run(&self, version: &str, instance: &str, at: DateTime<Utc>) -> Result<i64> {
        const STARTING: &str = "the run's start";
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query(
            "INSERT INTO operator_runs (started_at, heartbeat_at, version, instance)
             VALUES ($1, $2, $3, $4) RETURNING id",
        )
        .bind(ts(at))
        .bind(ts(at))
        .bind(version)
        .bind(instance)
        .fetch_one(&mut *tx)
        .await?;
        let run = row.try_get(0)?;
        // before this process leads: its epoch, not the leadership deadline, says it may
        self.commit_in_term(tx, STARTING).await?;
        self.outages.started(run, at);
        Ok(run)
    }

    /// Proves the run is still alive at `at` (written by the writer task, with the appends: a
    /// heartbeat that works after an outage journals the outage's window too).
    pub async fn heartbeat(&self, run: i64, at: DateTime<Utc>) -> Result<()> {
        self.writer.heartbeat(run, at).await
    }

    /// The journal outage this process is in at `now`, without I/O: from the last write that
    /// worked before writes began to fail, to `now`; `None` while writes work. An outage that
    /// has ended is in [`Journal::outages_since`] (the write that ended it journaled it).
    ///
    /// Read this before the journaled ones: an outage that ends between the two reads is then
    /// seen in one or the other, never in neither.
    pub fn outage_now(&self, now: DateTime<Utc>) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        self.outages.at(now)
    }

    /// Records a clean stop.
    pub async fn stop_run(&self, run: i64, at: DateTime<Utc>) -> Result<()> {
        const STOPPING: &str = "the run's stop";
        let mut tx = self.begin_fenced(STOPPING).await?;
        sqlx::query("UPDATE operator_runs SET heartbeat_at = $1, stopped_at = $1 WHERE id = $2")
            .bind(ts(at))
            .bind(run)
            .execute(&mut *tx)
            .await?;
        self.commit_fenced(tx, STOPPING).await
    }

    /// [`Reader::runs_since`] on a connection of its own.
    pub async fn runs_since(&self, since: DateTime<Utc>) -> Result<Vec<OperatorRun>> {
        self.reader().runs_since(since).await
    }

    /// Runs one of a reconcile's reads. One that cannot reach the database (down, unreachable, no
    /// connection within the pool's timeout) opens an outage as a failed write does: a pass that
    /// cannot read cannot journal either, and an outage shorter than the heartbeat that no write
    /// happened to hit would otherwise go unnoticed (its slots blamed on lateness).
    async fn reached<T>(&self, read: impl Future<Output = sqlx::Result<T>>) -> Result<T> {
        let attempted = Utc::now();
        let result = read.await;
        if let Err(e) = &result
            && unreachable(e)
            && let Some(since) = self.outages.failed(attempted)
        {
            tracing::warn!(since = %ts(since), error = %e, "journal unreachable");
        }
        Ok(result?)
    }
}

/// Whether `e` says the database could not be reached at all (rather than refusing a statement).
/// A closed pool is not one: that is this process shutting down.
fn unreachable(e: &sqlx::Error) -> bool {
    matches!(
        e,
        sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::WorkerCrashed
    )
}

tokio::task_local! {
    /// The journal reads of the task that counts them ([`counting_reads`]).
    static READS: std::cell::Cell<u32>;
}

/// Runs `f` and counts the journal reads it made (each query of a read method counts once;
/// writes go through the writer task and are not counted): what `eru_pass_journal_reads`
/// observes of an Eru pass.
pub async fn counting_reads<F: std::future::Future>(f: F) -> (F::Output, u32) {
    READS
        .scope(std::cell::Cell::new(0), async {
            let output = f.await;
            (output, READS.with(std::cell::Cell::get))
        })
        .await
}

/// One read query, counted if the task counts them.
pub(crate) fn read_made() {
    let _ = READS.try_with(|c| c.set(c.get() + 1));
}
