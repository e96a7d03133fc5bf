//! Heap hygiene for a process that holds tens of thousands of objects: a burst (every cache's
//! initial listing, every Eru's first pass, a fleet's slot) fills tables that then stand nearly
//! empty. Nothing here changes what any code sees.
//!
//! Two allocators share the process: the Rust heap is jemalloc's (`src/main.rs`: one arena, no
//! thread caches, freed pages returned after a second), and SQLite's C code allocates from glibc's
//! malloc (its page cache, statements: 1–2 MB). The glibc knobs below now only concern the latter.

use std::{
    collections::{HashMap, HashSet},
    hash::{BuildHasher, Hash},
    time::Duration,
};

use tokio::sync::watch;

/// A 64-bit hash of `value` for maps that key thousands of objects by hash instead of by string
/// (two of 10,000 keys collide with a chance of about 1 in 10^11). Never stored or sent: it only
/// has to agree within this process, which std's `DefaultHasher` (SipHash with fixed keys) does.
/// Numbers that are part of the product (`H`, jitter) come from [`crate::eru::core::hash`], which is
/// stable across processes and releases.
pub fn key_hash(value: impl Hash) -> u64 {
    use std::hash::{DefaultHasher, Hasher};
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

/// Gives a table back the capacity of a past burst once it holds less than half of it: a
/// hash map never shrinks by itself (10,000 queued status writes kept ~1.8 MB of empty table).
/// Amortized: after a shrink, the table must halve again before the next.
pub fn shrink_after_burst<K: Eq + Hash, V, S: BuildHasher>(map: &mut HashMap<K, V, S>) {
    if map.capacity() > 2 * map.len() + 64 {
        map.shrink_to_fit();
    }
}

/// [`shrink_after_burst`] for a set.
pub fn shrink_set_after_burst<T: Eq + Hash, S: BuildHasher>(set: &mut HashSet<T, S>) {
    if set.capacity() > 2 * set.len() + 64 {
        set.shrink_to_fit();
    }
}

/// glibc gives each thread that contends for its heap an arena of its own (up to eight per core)
/// and keeps in each what a burst freed. When it was the operator's only allocator, one arena
/// instead of two took 10,000 Deployments and 10,000 Erus from 70.2 to 67.4 MB
/// (`hack/memory.sh 10000`); it now serves SQLite's allocations, from several threads.
/// `MALLOC_ARENA_MAX` in the environment still decides. Call before any thread starts.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn one_malloc_arena() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: sets one allocator parameter; called before the runtime starts any thread.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn one_malloc_arena() {}

/// Hands glibc's free pages back to the system (SQLite's part of the heap; jemalloc returns the
/// Rust heap's by itself). When glibc held the whole heap, a trim took an operator on 10,000
/// Deployments and 10,000 Erus from 174 to 147 MB.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn trim_heap() {
    // SAFETY: malloc_trim only releases free memory of the allocator; no pointer is touched.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn trim_heap() {}

/// [`trim_heap`] every `period` until shutdown (a few milliseconds each).
pub async fn trim_heap_every(period: Duration, mut shutdown: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(period) => trim_heap(),
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_gives_back_a_burst_once_drained() {
        let mut map: HashMap<u64, u64> = (0..10_000).map(|i| (i, i)).collect();
        let burst = map.capacity();
        map.retain(|k, _| *k < 10);
        shrink_after_burst(&mut map);
        assert!(
            map.capacity() < 100,
            "capacity {} after a burst of {burst}",
            map.capacity()
        );
        assert_eq!(map.len(), 10);
    }
}
