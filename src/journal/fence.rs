//! The leadership fence: what stops a leader that lost its lease (in a freeze, a GC pause, a
//! stalled VM) from committing anything once a newer leader took the journal, checked by the
//! database itself rather than by the stale process's clock (Kleppmann's fencing token).
//!
//! - A process takes the next epoch of the journal's `leader_fence` row when it starts to write
//!   ([`Journal::take_fence`]): on PostgreSQL that `UPDATE` waits for every transaction that read
//!   the old epoch to end.
//! - Every write transaction, the writer task's batches and the background writes alike
//!   ([`Journal::commit_fenced`]: settles, prunes, retention, the run's start and stop), asks the
//!   write guard (the leadership deadline) and then reads the fence row last, immediately before
//!   its commit (`FOR SHARE` on PostgreSQL), and is rolled back when the epoch is no longer its
//!   own: [`Error::NotLeader`].
//! - A process that never took an epoch (tests, previews, the offline commands, which never
//!   write) is not fenced.
//!
//! The deadline check alone is not enough: it runs in the stale process, which may be frozen
//! between the check and the commit. PostgreSQL's `idle_in_transaction_session_timeout` (set on
//! every connection, `connect.rs`) ends a transaction frozen after it read the fence, so a new
//! leader's epoch waits for it at most that long.

use std::sync::{
    OnceLock,
    atomic::{AtomicI64, Ordering},
};

use sqlx::{Any, AnyConnection, Transaction};
use tracing::warn;

use super::{Backend, Journal};
use crate::{Error, Result};

/// Asked immediately before every commit: `false` refuses it (this process must not write now:
/// it does not lead).
pub type WriteGuard = Box<dyn Fn() -> bool + Send + Sync>;

/// The epoch this process writes under and its write guard; shared by the journal's handles and
/// its writer task.
#[derive(Default)]
pub(super) struct Fence {
    /// 0 until [`Journal::take_fence`]: not fenced.
    epoch: AtomicI64,
    guard: OnceLock<WriteGuard>,
}

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Fence(epoch {})", self.epoch.load(Ordering::SeqCst))
    }
}

impl Fence {
    /// Sets the write guard (once).
    pub(super) fn guard(&self, guard: WriteGuard) {
        let _ = self.guard.set(guard);
    }

    /// `Ok` while the write guard allows writing now (always, without a guard).
    pub(super) fn allowed(&self, what: &str) -> Result<()> {
        if self.guard.get().is_some_and(|may_write| !may_write()) {
            return Err(Error::NotLeader(what.to_string()));
        }
        Ok(())
    }

    /// The last statement of a write transaction on `conn`: `Ok` when the journal's epoch is
    /// still this process's (or it never took one). On PostgreSQL the row is read `FOR SHARE`: a
    /// newer leader's epoch waits until this transaction ends.
    pub(super) async fn check(&self, conn: &mut AnyConnection, backend: Backend, what: &str) -> Result<()> {
        let mine = self.epoch.load(Ordering::SeqCst);
        if mine == 0 {
            return Ok(());
        }
        let sql = match backend {
            Backend::Postgres => "SELECT epoch FROM leader_fence WHERE id = 1 FOR SHARE",
            // one writer at a time: the transaction already holds the database's write lock
            Backend::Sqlite => "SELECT epoch FROM leader_fence WHERE id = 1",
        };
        let current: i64 = sqlx::query_scalar(sql).fetch_one(&mut *conn).await?;
        if current == mine {
            Ok(())
        } else {
            warn!(
                epoch = mine,
                newer = current,
                "journal write refused by the fence: a newer leader took the journal"
            );
            Err(Error::NotLeader(format!(
                "{what} (the journal's leader epoch is {current}, this process's {mine}: a newer leader took it)"
            )))
        }
    }
}

impl Journal {
    /// Takes the next leader epoch of the journal: from now on, every write of a process holding
    /// an older one is refused by the database. Call it once this process may write (it holds the
    /// journal's lock, or leads), before its first write; the epoch taken.
    pub async fn take_fence(&self) -> Result<i64> {
        let epoch: i64 =
            sqlx::query_scalar("UPDATE leader_fence SET epoch = epoch + 1 WHERE id = 1 RETURNING epoch")
                .fetch_one(&self.pool)
                .await?;
        self.fence.epoch.store(epoch, Ordering::SeqCst);
        Ok(epoch)
    }

    /// The epoch this process writes under (0: it took none).
    pub fn fence_epoch(&self) -> i64 {
        self.fence.epoch.load(Ordering::SeqCst)
    }

    /// A transaction for a write outside the writer task, refused at once when the write guard
    /// says this process does not lead; commit it with [`Journal::commit_fenced`].
    pub(super) async fn begin_fenced(&self, what: &str) -> Result<Transaction<'static, Any>> {
        self.fence.allowed(what)?;
        Ok(self.pool.begin().await?)
    }

    /// Commits `tx` only if this process may still write: the write guard, then the fence, both
    /// immediately before the commit.
    pub(super) async fn commit_fenced(&self, mut tx: Transaction<'static, Any>, what: &str) -> Result<()> {
        self.fence.allowed(what)?;
        self.fence.check(&mut tx, self.backend, what).await?;
        let committed = tx.commit().await;
        self.downtime.written();
        Ok(committed?)
    }

    /// Commits `tx` if this process's epoch still holds, without asking the write guard: for the
    /// writes that start a term, before the leadership deadline says it leads.
    pub(super) async fn commit_in_term(&self, mut tx: Transaction<'static, Any>, what: &str) -> Result<()> {
        self.fence.check(&mut tx, self.backend, what).await?;
        let committed = tx.commit().await;
        self.downtime.written();
        Ok(committed?)
    }
}
