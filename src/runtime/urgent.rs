//! Which cluster writes go first. Restart patches are urgent (a slot's lateness is counted until
//! its patch lands); status writes and Events are not (a status is a projection, an Event best
//! effort). While any urgent write is in flight, the status writer and the Event queue wait, for
//! at most [`MAX_HOLD`] at a time so that a long burst never starves them: a burst of due slots
//! then has the API server's whole capacity for its patches.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use tokio::sync::Notify;

/// The longest a deferrable write waits for urgent ones.
pub const MAX_HOLD: Duration = Duration::from_secs(2);

/// Urgent writes in flight; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Urgent(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    in_flight: AtomicUsize,
    idle: Notify,
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
        InFlight(self.0.clone())
    }

    /// Waits until no urgent write is in flight, or [`MAX_HOLD`] passed.
    pub async fn yield_to(&self) {
        let wait = async {
            loop {
                let idle = self.0.idle.notified();
                if self.0.in_flight.load(Ordering::Acquire) == 0 {
                    return;
                }
                idle.await;
            }
        };
        let _ = tokio::time::timeout(MAX_HOLD, wait).await;
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
}
