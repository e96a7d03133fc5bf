//! Journal retention (`--retention`): the leader prunes old rows in small batches.

use std::time::Duration;

use chrono::Utc;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::{
    config::Retention,
    journal::Journal,
    runtime::{leader::Leadership, shutdown_requested},
};

/// Prunes journal rows older than `retention` (the leader only), a minute after it leads and then every ten minutes,
/// in batches of 500 rows per table with a pause between them (appends are never held up long).
pub(super) async fn retention(
    journal: Journal,
    leadership: Leadership,
    retention: Retention,
    stop: watch::Receiver<bool>,
) {
    let Retention(Some(keep)) = retention else { return };
    tokio::select! {
        _ = leadership.acquired() => {}
        _ = shutdown_requested(stop.clone()) => return,
    }
    let mut first = true;
    loop {
        let wait = Duration::from_secs(if first { 60 } else { 600 });
        first = false;
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown_requested(stop.clone()) => return,
        }
        let cutoff = Utc::now() - keep;
        let mut total = 0;
        loop {
            match journal.prune(cutoff, 500).await {
                Ok(pruned) if pruned.total() > 0 => total += pruned.total(),
                Ok(_) => break,
                Err(e) => {
                    warn!(error = %e, "journal retention failed; retried in ten minutes");
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if total > 0 {
            info!(rows = total, cutoff = %cutoff, "journal rows past the retention pruned");
        }
    }
}
