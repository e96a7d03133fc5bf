//! The status each object was last written with, until the watch cache shows that write (see
//! [`StatusMemo`]), and the digest that tells two statuses apart.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use serde::{Serialize, de::DeserializeOwned};

use crate::memory::{key_hash, shrink_after_burst};

/// A digest of a status as this operator serializes it: two statuses with the same digest are the
/// same (a cache may keep the digest of a status instead of all of it).
pub fn status_digest<S: Serialize>(status: &S) -> u64 {
    key_hash(serde_json::to_string(status).unwrap_or_default())
}

/// The status each object was last written with, until the watch cache shows that write.
///
/// Statuses are written off the pass ([`crate::runtime::StatusWriter`]), so for a while after a
/// pass the watch cache holds an older status; restoring the machine from that stale
/// `status.phase` would replay a transition and journal it twice. Until the cache shows the last
/// write, passes use the status remembered here.
///
/// When the cache shows it is told by the resourceVersion the write produced, not by the cache
/// merely moving: an earlier write landing (or a spec edit) moves the cache to a version that
/// still lacks the newest status. An entry ends when the cache holds the version its write
/// produced, or (should the cache skip that version, as after a relist) a later one with the
/// same status; so the memo holds only writes the caches have yet to show, each as its JSON text
/// (a `serde_json::Value` tree takes several times its size). A write that never lands (the
/// server refuses it for good) stays remembered: the journal already holds its transitions.
#[derive(Debug, Default)]
pub struct StatusMemo {
    written: Mutex<Written>,
}

#[derive(Debug, Default)]
struct Written {
    /// The number of the last write remembered, of any object.
    last: u64,
    by_uid: HashMap<String, Write>,
}

/// One object's last status write.
#[derive(Debug)]
struct Write {
    /// Its number: a write that lands reports it, so an earlier write landing is told apart.
    number: u64,
    /// Its JSON text, shared with the status writer's queue (one copy while both hold it).
    status: Arc<str>,
    digest: u64,
    /// The resourceVersion the write produced, once it landed.
    landed: Option<String>,
    /// The version the cache held when last looked at (a watch event can beat the write's
    /// response).
    seen: Option<String>,
}

impl Write {
    /// Whether a cache at `resource_version`, holding a status of digest `cached`, shows this write.
    fn shown(&self, resource_version: &str, cached: Option<u64>) -> bool {
        self.landed
            .as_deref()
            .is_some_and(|landed| landed == resource_version || cached == Some(self.digest))
    }
}

impl StatusMemo {
    /// The freshest known status of object `uid`, cached at `resource_version` as `cached`.
    pub fn current<S: Serialize + DeserializeOwned + Clone>(
        &self,
        uid: &str,
        resource_version: &str,
        cached: Option<&S>,
    ) -> Option<S> {
        self.written(uid, resource_version, cached.map(status_digest))
            .or_else(|| cached.cloned())
    }

    /// The status last written for object `uid`, while its cache (at `resource_version`, holding
    /// a status of digest `cached`) does not show it yet.
    pub fn written<S: DeserializeOwned>(
        &self,
        uid: &str,
        resource_version: &str,
        cached: Option<u64>,
    ) -> Option<S> {
        let mut written = self.written.lock().expect("status memo lock");
        let write = written.by_uid.get_mut(uid)?;
        if write.shown(resource_version, cached) {
            written.by_uid.remove(uid);
            return None;
        }
        write.seen = Some(resource_version.to_string());
        serde_json::from_str(&write.status).ok()
    }

    /// Remembers that `status` is being written for object `uid`; returns the write's number
    /// (for [`StatusMemo::landed`]) and the status as JSON text, for the writer to send.
    pub fn remember<S: Serialize>(&self, uid: &str, status: &S) -> (u64, Arc<str>) {
        let text: Arc<str> = serde_json::to_string(status).unwrap_or_default().into();
        let mut written = self.written.lock().expect("status memo lock");
        written.last += 1;
        let number = written.last;
        let write = Write {
            number,
            digest: key_hash(&*text),
            status: text.clone(),
            landed: None,
            seen: None,
        };
        written.by_uid.insert(uid.to_string(), write);
        (number, text)
    }

    /// Write `number` of object `uid` landed as `resource_version`: once the cache holds that
    /// version, the write is shown. A write that a newer one replaced changes nothing.
    pub fn landed(&self, uid: &str, number: u64, resource_version: &str) {
        let mut written = self.written.lock().expect("status memo lock");
        let Some(write) = written.by_uid.get_mut(uid) else {
            return;
        };
        if write.number != number {
            return;
        }
        if write.seen.as_deref() == Some(resource_version) {
            // the watch event came before the response
            written.by_uid.remove(uid);
            shrink_after_burst(&mut written.by_uid);
        } else {
            write.landed = Some(resource_version.to_string());
        }
    }

    /// The cache of object `uid` now holds `resource_version`, with a status of digest `cached`:
    /// drops the remembered write if that shows it. Called as the cache applies each watch
    /// event, so an object that is not reconciled again (an Eru waiting months for its next slot)
    /// is not remembered for months.
    pub fn cache_shows(&self, uid: &str, resource_version: &str, cached: Option<u64>) {
        let mut written = self.written.lock().expect("status memo lock");
        let Some(write) = written.by_uid.get_mut(uid) else {
            return;
        };
        if write.shown(resource_version, cached) {
            written.by_uid.remove(uid);
            shrink_after_burst(&mut written.by_uid);
        } else {
            write.seen = Some(resource_version.to_string());
        }
    }

    /// How many writes the caches have yet to show.
    pub fn pending(&self) -> usize {
        self.written.lock().expect("status memo lock").by_uid.len()
    }

    /// Forgets a deleted object.
    pub fn forget(&self, uid: &str) {
        let mut written = self.written.lock().expect("status memo lock");
        written.by_uid.remove(uid);
        shrink_after_burst(&mut written.by_uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_memo_covers_a_stale_cache_until_it_shows_the_write() {
        let memo = StatusMemo::default();
        let cached = "Pending".to_string();
        assert_eq!(memo.current("u", "1", Some(&cached)), Some(cached.clone()));
        let (write, _) = memo.remember("u", &"Stable".to_string());
        assert_eq!(
            memo.current("u", "1", Some(&cached)),
            Some("Stable".into()),
            "cache still at 1"
        );
        assert_eq!(
            memo.current("u", "2", Some(&cached)),
            Some("Stable".into()),
            "the cache moved (a spec edit), but the write has not landed"
        );
        memo.landed("u", write, "3");
        assert_eq!(
            memo.current("u", "2", Some(&cached)),
            Some("Stable".into()),
            "landed as 3, cache at 2"
        );
        assert_eq!(memo.pending(), 1);
        assert_eq!(
            memo.current("u", "3", Some(&"Stable".to_string())),
            Some("Stable".into())
        );
        assert_eq!(
            memo.pending(),
            0,
            "the cache shows the write: nothing left to remember"
        );
        memo.remember("u", &"Stable".to_string());
        memo.forget("u");
        assert_eq!(memo.pending(), 0);
        assert_eq!(memo.current("u", "1", Some(&cached)), Some(cached));
    }

    #[test]
    fn status_memo_is_not_fooled_by_an_earlier_write_landing() {
        // a pass writes S1; the next, on the same cached version, writes S2 while S1 is in flight
        let memo = StatusMemo::default();
        let (s1, _) = memo.remember("u", &"Progressing".to_string());
        let (s2, _) = memo.remember("u", &"Stable".to_string());
        memo.landed("u", s1, "2");
        memo.cache_shows("u", "2", Some(status_digest(&"Progressing".to_string())));
        assert_eq!(
            memo.current("u", "2", Some(&"Progressing".to_string())),
            Some("Stable".to_string()),
            "the cache shows S1, not S2: restoring from it would replay Progressing → Stable"
        );
        memo.landed("u", s2, "3");
        memo.cache_shows("u", "3", Some(status_digest(&"Stable".to_string())));
        assert_eq!(memo.pending(), 0);
    }

    #[test]
    fn status_memo_settles_as_the_cache_shows_the_write() {
        let memo = StatusMemo::default();
        let stable = Some(status_digest(&"Stable".to_string()));
        let (write, _) = memo.remember("u", &"Stable".to_string());
        memo.cache_shows("u", "1", None);
        memo.cache_shows("other", "7", None);
        assert_eq!(
            memo.pending(),
            1,
            "neither the old version nor another object's event settles it"
        );
        memo.landed("u", write, "2");
        memo.cache_shows("u", "2", stable);
        assert_eq!(
            memo.pending(),
            0,
            "the cache holds the version the write produced, without a pass"
        );

        // the watch event comes before the write's response
        let (write, _) = memo.remember("u", &"Stable".to_string());
        memo.cache_shows("u", "5", stable);
        assert_eq!(memo.pending(), 1, "not landed yet: 5 may be an older write");
        memo.landed("u", write, "5");
        assert_eq!(memo.pending(), 0, "the cache already held what it produced");

        // the cache skipped the version (a relist) but shows the same status
        let (write, _) = memo.remember("u", &"Stable".to_string());
        memo.landed("u", write, "8");
        memo.cache_shows("u", "9", stable);
        assert_eq!(memo.pending(), 0);
    }
}
