//! Group commit: one task writes every entry. Entries that queue up while a transaction commits
//! go into the next transaction together (a failing entry fails alone: see [`commit`]), so a
//! burst of N concurrent reconciles costs a few fsyncs instead of N. A caller gets its answer only
//! once its batch is durable: nothing is acted on before its record is on disk.

use std::{
    sync::{Arc, OnceLock},
    time::{Duration, Instant},
};

use sqlx::{AnyConnection, AnyPool, Connection};
use tokio::sync::{mpsc, oneshot};

use super::{Appended, Entry, write};
use crate::{Error, Result};

/// Entries per transaction at most.
const MAX_BATCH: usize = 512;

/// Called after every commit with the batch's size and how long it took.
pub type BatchObserver = Box<dyn Fn(usize, Duration) + Send + Sync>;

struct Job {
    entry: Entry,
    reply: oneshot::Sender<Result<Appended>>,
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
    /// Starts the writer task on `pool`.
    pub(super) fn spawn(pool: AnyPool) -> Self {
        let (jobs, rx) = mpsc::unbounded_channel();
        let observer = Arc::new(OnceLock::new());
        tokio::spawn(run(pool, rx, observer.clone()));
        Self { jobs, observer }
    }

    /// Sets what is told about each batch (once).
    pub(super) fn observe(&self, observer: BatchObserver) {
        let _ = self.observer.set(observer);
    }

    /// Writes `entry` in the next batch; returns once that batch committed.
    pub(super) async fn append(&self, entry: Entry) -> Result<Appended> {
        let (reply, answer) = oneshot::channel();
        let stopped = || Error::JournalWrite("the journal writer has stopped".into());
        self.jobs.send(Job { entry, reply }).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

async fn run(pool: AnyPool, mut rx: mpsc::UnboundedReceiver<Job>, observer: Arc<OnceLock<BatchObserver>>) {
    let mut jobs = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut jobs, MAX_BATCH).await > 0 {
        let started = Instant::now();
        let results = match commit(&pool, &jobs).await {
            Ok(results) => results,
            Err(e) => {
                let message = e.to_string();
                jobs.iter()
                    .map(|_| Err(Error::JournalWrite(message.clone())))
                    .collect()
            }
        };
        if let Some(observe) = observer.get() {
            observe(jobs.len(), started.elapsed());
        }
        for (job, result) in jobs.drain(..).zip(results) {
            let _ = job.reply.send(result);
        }
    }
}

/// Writes `jobs` in one transaction. Most often every entry writes, and the batch goes in as it
/// is; when one fails, the transaction is rolled back and the batch written again with each entry
/// under a savepoint of its own, so it fails alone (three statements more per entry, paid only
/// then).
async fn commit(pool: &AnyPool, jobs: &[Job]) -> Result<Vec<Result<Appended>>> {
    let mut conn = pool.acquire().await?;
    let results = match commit_all(&mut conn, jobs).await {
        Ok(appended) => Ok(appended.into_iter().map(Ok).collect()),
        Err(_) => commit_each(&mut conn, jobs).await,
    };
    if results.is_err() {
        // SQLite keeps a transaction whose COMMIT failed (disk full) open, holding the write
        // lock, and sqlx's rollback on drop does not end it: every later write would find the
        // database locked. Closing the connection ends it; the pool opens a fresh one.
        conn.close_on_drop();
    }
    results
}

async fn commit_all(conn: &mut AnyConnection, jobs: &[Job]) -> Result<Vec<Appended>> {
    let mut tx = conn.begin().await?;
    let mut appended = Vec::with_capacity(jobs.len());
    for job in jobs {
        appended.push(write::append_on(&mut tx, &job.entry).await?);
    }
    tx.commit().await?;
    Ok(appended)
}

async fn commit_each(conn: &mut AnyConnection, jobs: &[Job]) -> Result<Vec<Result<Appended>>> {
    let mut tx = conn.begin().await?;
    let mut results = Vec::with_capacity(jobs.len());
    for job in jobs {
        let mut savepoint = tx.begin().await?;
        match write::append_on(&mut savepoint, &job.entry).await {
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
    tx.commit().await?;
    Ok(results)
}
