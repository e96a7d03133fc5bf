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
//! computed, and before an error could end it), so the next pass reads everything again. A new
//! leader starts empty (a leader that loses its Lease exits), and its first passes take what the
//! term's first reads found instead (below). What retention prunes is not seen until the Eru's next commit: a status
//! may show a recent record a little longer than the journal keeps it.
//!
//! Those first passes read less too: the term's first pass reads every Eru's rows at once
//! ([`Journal::first_reads`](crate::journal::Journal::first_reads)), and each Eru's first pass
//! takes its own here. No pass has committed before they are read, and only an Eru's own
//! passes write its rows, so they are as its first pass would read them.

use std::{collections::HashMap, sync::Mutex};

use crate::{journal::FirstRead, memory::key_hash};

#[derive(Clone, Copy, Debug, Default)]
struct Memo {
    /// The digest of the status computed last from the journal as it is.
    status: Option<u64>,
    /// The last pass read the open manual run, and there was none.
    no_open_run: bool,
}

/// What this process remembers of each Eru's journal.
#[derive(Debug, Default)]
pub struct JournalMemo {
    /// uid (hashed) → what its last pass saw of its journal.
    memos: Mutex<HashMap<u64, Memo>>,
    /// uid → its rows as the term's first reads found them, until its first pass takes them.
    first: Mutex<HashMap<String, FirstRead>>,
}

impl JournalMemo {
    fn get(&self, uid: &str) -> Memo {
        let memos = self.memos.lock().expect("journal memo lock");
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
        self.memos
            .lock()
            .expect("journal memo lock")
            .insert(key_hash(uid), memo);
    }

    /// A pass of `uid` committed to the journal, or the Eru is gone: nothing is remembered.
    pub fn forget(&self, uid: &str) {
        let mut memos = self.memos.lock().expect("journal memo lock");
        memos.remove(&key_hash(uid));
        crate::memory::shrink_after_burst(&mut *memos);
        drop(memos);
        self.take_first_read(uid);
    }

    /// Keeps the term's first reads (read before any pass of the term committed) of the Erus
    /// still `cached`, and says how many. Checked under the lock a deletion's [`forget`] takes
    /// after its Eru left the cache: a read is either dropped here or by that `forget`.
    ///
    /// [`forget`]: JournalMemo::forget
    pub fn keep_first_reads(
        &self,
        mut reads: HashMap<String, FirstRead>,
        cached: impl Fn(&crate::journal::LedgerRow) -> bool,
    ) -> usize {
        let mut first = self.first.lock().expect("journal memo lock");
        reads.retain(|_, read| cached(&read.ledger));
        *first = reads;
        first.len()
    }

    /// The Eru's rows as the term's first reads found them, once: for its first pass.
    pub fn take_first_read(&self, uid: &str) -> Option<FirstRead> {
        let mut first = self.first.lock().expect("journal memo lock");
        let read = first.remove(uid);
        crate::memory::shrink_after_burst(&mut *first);
        read
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

    /// The term's first reads (mutations: a read taken twice, a deleted Eru's read kept): each
    /// Eru's own, once, and none once the Eru is forgotten.
    #[test]
    fn a_first_read_is_taken_once_by_its_own_eru() {
        let read = |uid: &str| {
            FirstRead::new(crate::journal::LedgerRow {
                uid: uid.into(),
                namespace: "ns".into(),
                name: uid.into(),
                accounted_through: None,
                missed_slots: 0,
                last_missed: None,
                fired_slots: 0,
                succeeded: 0,
                failed: 0,
                abandoned: 0,
                last_success: None,
                last_failure: None,
                last_restart_slot: None,
                deleted_at: None,
            })
        };
        let memo = JournalMemo::default();
        let reads = ["u", "v", "w", "gone"].map(|uid| (uid.to_string(), read(uid)));
        let kept = memo.keep_first_reads(reads.into(), |ledger| ledger.uid != "gone");
        assert_eq!(kept, 3, "an Eru no longer cached is not kept");
        assert_eq!(memo.take_first_read("gone"), None);
        assert_eq!(memo.take_first_read("u"), Some(read("u")));
        assert_eq!(memo.take_first_read("u"), None, "taken once");
        memo.forget("v");
        assert_eq!(
            memo.take_first_read("v"),
            None,
            "a forgotten Eru's read is dropped"
        );
        assert_eq!(memo.take_first_read("w"), Some(read("w")));
    }
}
