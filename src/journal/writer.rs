//! Group commit: one task writes every entry and heartbeat. Writes that queue up while a
//! transaction commits go into the next transaction together (a failing entry fails alone: see
//! [`commit`]), so a burst of N concurrent reconciles costs a few fsyncs instead of N. A caller
//! gets its answer only once its batch is durable: nothing is acted on before its record is on
//! disk.
//!
//! Being the only writer, the task also knows when the journal stops taking writes: a transaction
//! that fails opens an outage ([`Outages`]), and the first one that commits afterwards records the
//! outage's window in itself, before any caller of that batch hears back.

use std::{
    sync::{Arc, OnceLock},
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use sqlx::{AnyConnection, AnyPool, Connection};
use tokio::sync::{mpsc, oneshot};
use tracing::{info, warn};

use super::{
    Appended, Backend, Entry,
    downtime::Downtime,
    fence::Fence,
    outage::{Open, Outages},
    ts, write,
};
use crate::{Error, Result};

/// Entries per transaction at most.
const MAX_BATCH: usize = 512;

/// Called after every commit of appends with how many it held and how long it took.
pub type BatchObserver = Box<dyn Fn(usize, Duration) + Send + Sync>;

/// What a job writes.
enum Work {
    /// One reconcile's records (boxed: a heartbeat is a few bytes).
    Entry(Box<Entry>),
    /// The operator run `run` is alive at `at`.
    Heartbeat { run: i64, at: DateTime<Utc> },
}

struct Job {
    work: Work,
    reply: oneshot::Sender<Result<Appended>>,
}

impl Job {
    /// Writes the job on `conn` (inside the batch's transaction).
    async fn write_on(&self, conn: &mut AnyConnection) -> Result<Appended> {
        match &self.work {
            Work::Entry(entry) => write::append_on(conn, entry).await,
            Work::Heartbeat { run, at } => {
                write::heartbeat_on(conn, *run, *at).await?;
                Ok(Appended::default())
            }
        }
    }
}

/// The handle of the writer task; cheap to clone.
#[derive(Clone)]
pub(super) struct Writer {
    jobs: mpsc::UnboundedSender<Job>,
    observer: Arc<OnceLock<BatchObserver>>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Writer")
    }
}

impl Writer {
    /// Starts the writer task on `pool`; it keeps `outages` up to date, commits under `fence`,
    /// and tells `downtime` of each commit.
    pub(super) fn spawn(
        pool: AnyPool,
        backend: Backend,
        outages: Arc<Outages>,
        (fence, downtime): (Arc<Fence>, Arc<Downtime>),
    ) -> Self {
        let (jobs, rx) = mpsc::unbounded_channel();
        let observer = Arc::new(OnceLock::new());
        let db = Db {
            pool,
            backend,
            fence,
            downtime,
        };
        tokio::spawn(run(db, rx, observer.clone(), outages));
        Self { jobs, observer }
    }

    /// Sets what is told about each batch (once).
    pub(super) fn observe(&self, observer: BatchObserver) {
        let _ = self.observer.set(observer);
    }

    /// Writes `entry` in the next batch; returns once that batch committed.
    pub(super) async fn append(&self, entry: Entry) -> Result<Appended> {
        self.write(Work::Entry(Box::new(entry))).await
    }

    /// Writes the heartbeat of `run` at `at` in the next batch; returns once that batch committed.
    pub(super) async fn heartbeat(&self, run: i64, at: DateTime<Utc>) -> Result<()> {
        self.write(Work::Heartbeat { run, at }).await.map(|_| ())
    }

    async fn write(&self, work: Work) -> Result<Appended> {
        let (reply, answer) = oneshot::channel();
        let stopped = || Error::JournalWrite("the journal writer has stopped".into());
        self.jobs.send(Job { work, reply }).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// Where the writer commits: the pool, its backend, the fence every commit goes through, and
/// what is kept of the runs and outages until a commit.
struct Db {
    pool: AnyPool,
    backend: Backend,
    fence: Arc<Fence>,
    downtime: Arc<Downtime>,
}

async fn run(
    db: Db,
    mut rx: mpsc::UnboundedReceiver<Job>,
    observer: Arc<OnceLock<BatchObserver>>,
    outages: Arc<Outages>,
) {
    let mut jobs = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut jobs, MAX_BATCH).await > 0 {
        // asked here too (not only before the commit): a standby's batch costs no connection
        if db.fence.allowed(WHAT).is_err() {
            refuse(&mut jobs, WHAT);
            continue;
        }
        let started = Instant::now();
        let attempted = Utc::now();
        let close = Close {
            open: outages.open(),
            // a batch of records is a sign of life of the run that wrote it
            alive: outages
                .run()
                .filter(|_| jobs.iter().any(|j| matches!(j.work, Work::Entry(_)))),
        };
        let open = close.open;
        // the outage state changes before any caller hears back: a pass that learns its batch
        // failed (or worked) then reads the state that batch left
        let results = match commit(&db, &jobs, close).await {
            Ok((results, at)) => {
                outages.wrote(at);
                if let Some(open) = open {
                    info!(since = %ts(open.since), until = %ts(at), "journal writable again; its outage is journaled");
                }
                results
            }
            Err(Error::NotLeader(why)) => {
                // not a journal failure: no outage; nothing of the batch was written
                refuse(&mut jobs, &why);
                continue;
            }
            Err(e) => {
                let message = e.to_string();
                if let Some(since) = outages.failed(attempted) {
                    warn!(since = %ts(since), error = %message, "journal writes fail");
                }
                jobs.iter()
                    .map(|_| Err(Error::JournalWrite(message.clone())))
                    .collect()
            }
        };
        // the batch's appends (a heartbeat is no reconcile's record)
        let appends = jobs.iter().filter(|j| matches!(j.work, Work::Entry(_))).count();
        if let Some(observe) = observer.get()
            && appends > 0
        {
            observe(appends, started.elapsed());
        }
        for (job, result) in jobs.drain(..).zip(results) {
            let _ = job.reply.send(result);
        }
    }
}

/// What the writer's refusals say is refused.
const WHAT: &str = "a journal write";

/// Answers every job of `jobs` that `what` was refused (this process does not lead, or no
/// more): nothing of them was written.
fn refuse(jobs: &mut Vec<Job>, what: &str) {
    warn!(jobs = jobs.len(), refused = %what, "journal writes refused: this process does not lead");
    for job in jobs.drain(..) {
        let _ = job.reply.send(Err(Error::NotLeader(what.to_string())));
    }
}

/// What a batch's jobs got, and the instant its transaction was about to commit.
type Committed<T> = Result<(Vec<T>, DateTime<Utc>)>;

/// What a batch's transaction writes besides its jobs, just before it commits.
#[derive(Clone, Copy)]
struct Close {
    /// The outage this batch ends, if one is open (its window ends now: this is the first write
    /// that works again).
    open: Option<Open>,
    /// The run whose last sign of life moves to this commit (a batch holding records).
    alive: Option<i64>,
}

/// Writes `jobs` in one transaction, with what `close` adds. Most often every entry writes, and the batch goes
/// in as it is; when one fails, the transaction is rolled back and the batch written again with
/// each entry under a savepoint of its own, so it fails alone (three statements more per entry,
/// paid only then).
async fn commit(db: &Db, jobs: &[Job], close: Close) -> Committed<Result<Appended>> {
    let mut conn = db.pool.acquire().await?;
    let results = match commit_all(&mut conn, db, jobs, close).await {
        Ok((appended, at)) => Ok((appended.into_iter().map(Ok).collect(), at)),
        Err(refused @ Error::NotLeader(_)) => Err(refused),
        Err(_) => commit_each(&mut conn, db, jobs, close).await,
    };
    // before any caller hears back (downtime.rs)
    db.downtime.written();
    if results.is_err() {
        // SQLite keeps a transaction whose COMMIT failed (disk full) open, holding the write
        // lock, and sqlx's rollback on drop does not end it: every later write would find the
        // database locked. Closing the connection ends it; the pool opens a fresh one.
        conn.close_on_drop();
    }
    results
}

async fn commit_all(conn: &mut AnyConnection, db: &Db, jobs: &[Job], close: Close) -> Committed<Appended> {
    let mut tx = conn.begin().await?;
    let mut appended = Vec::with_capacity(jobs.len());
    for job in jobs {
        appended.push(job.write_on(&mut tx).await?);
    }
    let at = finish(&mut tx, db, jobs, close).await?;
    tx.commit().await?;
    Ok((appended, at))
}

async fn commit_each(
    conn: &mut AnyConnection,
    db: &Db,
    jobs: &[Job],
    close: Close,
) -> Committed<Result<Appended>> {
    let mut tx = conn.begin().await?;
    let mut results = Vec::with_capacity(jobs.len());
    for job in jobs {
        let mut savepoint = tx.begin().await?;
        match job.write_on(&mut savepoint).await {
            Ok(appended) => {
                savepoint.commit().await?;
                results.push(Ok(appended));
            }
            Err(e) => {
                savepoint.rollback().await?;
                results.push(Err(e));
            }
        }
    }
    let at = finish(&mut tx, db, jobs, close).await?;
    tx.commit().await?;
    Ok((results, at))
}

/// The last statements of the batch of `jobs` on `conn`, immediately before it commits; the
/// instant of the commit. The write guard (the leadership deadline) is asked first. The open
/// outage's window, ending then, goes into the same transaction (the outage ends with this write,
/// and is journaled by it), and so does the writing run's sign of life; the fence is read last.
async fn finish(conn: &mut AnyConnection, db: &Db, jobs: &[Job], close: Close) -> Result<DateTime<Utc>> {
    db.fence.allowed(WHAT)?;
    if jobs.iter().any(|j| matches!(j.work, Work::Entry(_))) {
        crate::failpoint::stop_once(crate::failpoint::STOP_BEFORE_JOURNAL_COMMIT);
    }
    let at = Utc::now();
    if let Some(open) = close.open {
        write::outage_on(conn, open.run, open.since, at).await?;
    }
    if let Some(run) = close.alive {
        write::alive_on(conn, run, at).await?;
    }
    db.fence.check(conn, db.backend, WHAT).await?;
    Ok(at)
}
