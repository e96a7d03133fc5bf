//! One writer per journal file. SQLite lets any number of processes open the same file, so two
//! operators on one volume (a scaled-up Deployment, a second install, a local run beside the demo)
//! would both act and both invent history. `eru-operator run` therefore holds an exclusive advisory
//! lock on `<journal>.lock` for its lifetime; the kernel releases it when the process dies, so a
//! crash never leaves it behind. Readers (`eru-operator history`) take no lock.

use std::{
    fs::{File, OpenOptions},
    io::{Read, Seek, Write},
    path::{Path, PathBuf},
};

use crate::{Error, Result};

/// The held lock; released on drop (or when the process exits, however it exits).
#[derive(Debug)]
pub struct WriterLock {
    _file: File,
    pub path: PathBuf,
}

impl WriterLock {
    /// Takes the lock of the journal at `journal`, or says which process holds it.
    pub fn acquire(journal: &Path) -> Result<Self> {
        let mut name = journal.as_os_str().to_owned();
        name.push(".lock");
        let path = PathBuf::from(name);
        let refused = |reason: String| Error::JournalFile {
            path: journal.display().to_string(),
            reason,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| refused(format!("cannot open its lock file {}: {e}", path.display())))?;
        if let Err(e) = file.try_lock() {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            return Err(refused(match e {
                std::fs::TryLockError::WouldBlock => format!(
                    "another eru-operator process is using it ({}); one journal file takes one \
                     operator process",
                    if holder.is_empty() {
                        "pid unknown".into()
                    } else {
                        format!("pid {holder}")
                    }
                ),
                std::fs::TryLockError::Error(e) => format!("cannot lock {}: {e}", path.display()),
            }));
        }
        // who holds it, for the message above (best effort)
        let _ = file.set_len(0);
        let _ = file.rewind();
        let _ = write!(file, "{}", std::process::id());
        let _ = file.flush();
        Ok(Self { _file: file, path })
    }
}

/// One acting operator per PostgreSQL journal when leader election is off: a session-level
/// advisory lock, held on a connection of its own for the process's lifetime. PostgreSQL releases
/// it when that session ends (the process dies, or its connection breaks), so a crash never
/// leaves it behind. With `--leader-elect` the Lease keeps replicas apart instead.
#[derive(Debug)]
pub struct ActorLock {
    _session: sqlx::AnyConnection,
}

/// The advisory lock's key: "eru-op" in ASCII.
const ACTOR_LOCK_KEY: i64 = 0x6572_752d_6f70;

impl super::Journal {
    /// Takes the acting operator's advisory lock of a PostgreSQL journal, or says that another
    /// process holds it.
    pub async fn lock_actor(&self) -> Result<ActorLock> {
        use sqlx::Acquire;
        let mut session = self.pool.acquire().await?.detach();
        let taken: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
            .bind(ACTOR_LOCK_KEY)
            .fetch_one(session.acquire().await?)
            .await?;
        if !taken {
            return Err(Error::JournalFile {
                path: "the PostgreSQL journal".into(),
                reason:
                    "another eru-operator process without --leader-elect acts on it (it holds the journal's \
                         advisory lock); run one replica, or all of them with --leader-elect"
                        .into(),
            });
        }
        Ok(ActorLock { _session: session })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("eru.db");
        let first = WriterLock::acquire(&journal).unwrap();
        let refused = WriterLock::acquire(&journal).unwrap_err().to_string();
        assert!(
            refused.contains("another eru-operator process is using it")
                && refused.contains(&format!("pid {}", std::process::id())),
            "{refused}"
        );
        drop(first);
        WriterLock::acquire(&journal).unwrap();
    }
}
