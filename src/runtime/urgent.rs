//! Which cluster writes go first. Restart patches are urgent (a slot's lateness is counted until
//! its patch lands); status writes and Events are not (a status is a projection, an Event best
//! effort). While any urgent write is in flight, the status writer and the Event queue wait, for
//! at most [`MAX_HOLD`] at a time so that a long burst never starves them: a burst of due slots
//! then has the API server's whole capacity for its patches. The HTTP API's journal queries wait
//! for the end of a burst ([`Urgent::quiet`]), bounded by their request's timeout.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use tokio::{sync::Notify, time::Instant};

/// The longest a deferrable write waits for urgent ones.
pub const MAX_HOLD: Duration = Duration::from_secs(2);

/// Urgent writes in flight; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Urgent(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    in_flight: AtomicUsize,
    idle: Notify,
    /// When the last urgent write began, in milliseconds after `origin` (0: none yet).
    last_begun: AtomicU64,
    origin: Instant,
}

impl Default for Inner {
    fn default() -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            idle: Notify::new(),
            last_begun: AtomicU64::new(0),
            origin: Instant::now(),
        }
    }
}

impl Inner {
    /// Milliseconds after `origin`, at least 1.
    fn now(&self) -> u64 {
        (self.origin.elapsed().as_millis() as u64).max(1)
    }
}

/// Held while an urgent write is in flight.
pub struct InFlight(Arc<Inner>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Urgent {
    /// Marks an urgent write in flight until the guard drops.
    pub fn begin(&self) -> InFlight {
        self.0.in_flight.fetch_add(1, Ordering::AcqRel);
        self.0.last_begun.store(self.0.now(), Ordering::Release);
        InFlight(self.0.clone())
    }

    /// Waits until no urgent write is in flight, or [`MAX_HOLD`] passed.
    pub async fn yield_to(&self) {
        let _ = tokio::time::timeout(MAX_HOLD, self.idle()).await;
    }

    /// Waits until no urgent write is in flight and none began for `quiet_for`: the end of a burst,
    /// not a gap between two of its patches. Without a bound: the caller has its own.
    pub async fn quiet(&self, quiet_for: Duration) {
        let quiet_ms = quiet_for.as_millis() as u64;
        loop {
            self.idle().await;
            let last = self.0.last_begun.load(Ordering::Acquire);
            let since = self.0.now().saturating_sub(last);
            if last == 0 || since >= quiet_ms {
                if self.0.in_flight.load(Ordering::Acquire) == 0 {
                    return;
                }
                continue;
            }
            tokio::time::sleep(Duration::from_millis(quiet_ms - since)).await;
        }
    }

    async fn idle(&self) {
        loop {
            let idle = self.0.idle.notified();
            if self.0.in_flight.load(Ordering::Acquire) == 0 {
                return;
            }
            idle.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn deferrable_writes_wait_for_urgent_ones_but_not_forever() {
        let urgent = Urgent::default();
        // nothing urgent: no wait
        let start = tokio::time::Instant::now();
        urgent.yield_to().await;
        assert_eq!(start.elapsed(), Duration::ZERO);
        // released when the urgent write ends
        let guard = urgent.begin();
        let waiter = tokio::spawn({
            let urgent = urgent.clone();
            async move {
                let start = tokio::time::Instant::now();
                urgent.yield_to().await;
                start.elapsed()
            }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(guard);
        assert_eq!(waiter.await.unwrap(), Duration::from_millis(300));
        // an urgent write that never ends holds others for MAX_HOLD at most
        let _stuck = urgent.begin();
        let start = tokio::time::Instant::now();
        urgent.yield_to().await;
        assert_eq!(start.elapsed(), MAX_HOLD);
    }

    #[tokio::test(start_paused = true)]
    async fn queries_wait_for_the_end_of_a_burst_not_a_gap_in_it() {
        let quiet_for = Duration::from_millis(250);
        let urgent = Urgent::default();
        // nothing urgent, ever: no wait
        let start = tokio::time::Instant::now();
        urgent.quiet(quiet_for).await;
        assert_eq!(start.elapsed(), Duration::ZERO);
        // a burst: patches one after the other with gaps shorter than `quiet_for`
        let burst = tokio::spawn({
            let urgent = urgent.clone();
            async move {
                for _ in 0..5 {
                    let patch = urgent.begin();
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    drop(patch);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        });
        tokio::task::yield_now().await;
        let start = tokio::time::Instant::now();
        urgent.quiet(quiet_for).await;
        // the last patch began at 600 ms: quiet 250 ms after it, not in the first 50 ms gap
        assert_eq!(start.elapsed(), Duration::from_millis(850));
        burst.await.unwrap();
        // long after: at once again
        tokio::time::sleep(Duration::from_secs(1)).await;
        let start = tokio::time::Instant::now();
        urgent.quiet(quiet_for).await;
        assert_eq!(start.elapsed(), Duration::ZERO);
    }
}
