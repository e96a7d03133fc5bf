//! What this process remembers of each Eru's journal between its passes, so that a pass reads
//! only what may have changed (issue 57: the journal reads of a pass, counted in
//! `eru_pass_journal_reads`).
//!
//! Only an Eru's own passes write its journal rows (and its deletion, which forgets it here): a
//! pass that commits nothing leaves them as the previous pass saw them. So, as long as no pass
//! of the Eru committed since:
//!
//! - **the status's journal fields** (`recent`, the last restart, the last times, the missed
//!   count, the last manual run) are those of the status this process computed last, if that is
//!   the status the pass starts from (same digest): the pass keeps them and reads no summary;
//! - **no manual run is in flight** if the last pass read none, so a pass that is not asked for
//!   a run reads none.
//!
//! A pass that commits anything forgets what was remembered first (before its status is
//! computed, and before an error could end it), so the next pass reads everything again; so
//! does the first pass of each Eru in a process (a new leader starts empty: a leader that loses
//! its Lease exits). What retention prunes is not seen until the Eru's next commit: a status
//! may show a recent record a little longer than the journal keeps it.

use std::{collections::HashMap, sync::Mutex};

use crate::memory::key_hash;

#[derive(Clone, Copy, Debug, Default)]
struct Memo {
    /// The digest of the status computed last from the journal as it is.
    status: Option<u64>,
    /// The last pass read the open manual run, and there was none.
    no_open_run: bool,
}

/// uid (hashed) → what its last pass saw of its journal.
#[derive(Debug, Default)]
pub struct JournalMemo(Mutex<HashMap<u64, Memo>>);

impl JournalMemo {
    fn get(&self, uid: &str) -> Memo {
        let memos = self.0.lock().expect("journal memo lock");
        memos.get(&key_hash(uid)).copied().unwrap_or_default()
    }

    /// Whether the Eru `uid` has no manual run in flight, as far as this process knows.
    pub fn no_open_run(&self, uid: &str) -> bool {
        self.get(uid).no_open_run
    }

    /// Whether the status of digest `known` carries the Eru's journal fields as the journal has
    /// them now.
    pub fn current(&self, uid: &str, known: Option<u64>) -> bool {
        known.is_some() && self.get(uid).status == known
    }

    /// A pass computed the status of digest `status` from the journal as it is; `no_open_run`:
    /// it read no manual run in flight, and committed nothing.
    pub fn remember(&self, uid: &str, status: u64, no_open_run: bool) {
        let memo = Memo {
            status: Some(status),
            no_open_run,
        };
        self.0
            .lock()
            .expect("journal memo lock")
            .insert(key_hash(uid), memo);
    }

    /// A pass of `uid` committed to the journal, or the Eru is gone: nothing is remembered.
    pub fn forget(&self, uid: &str) {
        let mut memos = self.0.lock().expect("journal memo lock");
        memos.remove(&key_hash(uid));
        crate::memory::shrink_after_burst(&mut *memos);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_until_a_commit_and_only_the_status_it_computed() {
        let memo = JournalMemo::default();
        // a first pass knows nothing
        assert!(!memo.current("u", Some(7)));
        assert!(!memo.no_open_run("u"));
        memo.remember("u", 7, true);
        assert!(memo.current("u", Some(7)));
        assert!(memo.no_open_run("u"));
        // another status (someone wrote it, or it was never written): read again
        assert!(!memo.current("u", Some(8)));
        assert!(!memo.current("u", None));
        // a commit forgets
        memo.forget("u");
        assert!(!memo.current("u", Some(7)));
        assert!(!memo.no_open_run("u"));
        // one Eru's memo is not another's
        memo.remember("u", 7, false);
        assert!(!memo.current("v", Some(7)));
        assert!(!memo.no_open_run("u"));
    }
}
