//! The leader's delivery of the outbox. Each sink delivers on its own **lane** ([`lane`]): its own
//! queue (its due rows, the longest waiting Eru first), its own backoff and at most [`IN_FLIGHT`]
//! messages at once, so a receiver that times out or refuses delays only its own notifications.
//! One message carries an Eru's pending events for the sink (an outage's records arrive together,
//! not as a flood). A message that fails is tried again after a jittered backoff counted from the
//! end of the attempt, doubling up to `--notification-backoff-max`; its lane pauses as long, and
//! an idle lane sleeps until its next row is due (or a pass journals a new one).
//!
//! The **upkeep** ([`upkeep`]) drops what must go, each drop counted by sink and reason
//! ([`Dropped`]): the oldest pending beyond `--notification-outbox-max` (`outbox_full`), and the
//! rows of a sink that left the file (`unknown_sink`); a lane drops its own rows older than
//! `--notification-max-age` (`expired`) before it sends. The upkeep also keeps the per-sink
//! gauges and deletes settled rows past the maximum age, in batches until none is left. Every
//! statement is bounded (a settle or drop in chunks of 1,000 ids).
//!
//! Delivery is at least once: a message sent before a crash (or by a deposed leader) and not yet
//! marked is sent again, with the same keys.

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use prometheus::{IntCounterVec, IntGaugeVec, Opts, Registry};
use strum::{IntoStaticStr, VariantArray};
use tokio::sync::{Notify, watch};

use super::Notifier;
use crate::{
    journal::Journal,
    metrics::{counter, register},
    runtime::{leader::Leadership, shutdown_requested},
};

mod lane;
mod upkeep;

/// The longest an idle lane sleeps before it looks at its rows again (a new leader takes over the
/// last one's rows; the clock may have jumped).
const IDLE_MAX: Duration = Duration::from_secs(30);
/// How often the upkeep runs (the cap, unknown sinks, the gauges).
const UPKEEP: Duration = Duration::from_secs(2);
/// How often settled rows past the maximum age are deleted.
const PRUNE_EVERY: chrono::Duration = chrono::Duration::minutes(10);
/// Erus a lane looks up per turn.
const TURN: u32 = 100;
/// Events per message at most: an Eru's pending events go in one message, due or not.
const PER_MESSAGE: u32 = 100;
/// Messages a lane has in flight at most.
const IN_FLIGHT: usize = 4;
/// Rows per drop or prune statement: far below either backend's limit of bound parameters.
const CHUNK: u32 = 1000;
/// The first retry's wait, and the shortest wait of any retry.
const BACKOFF_FIRST: Duration = Duration::from_secs(1);

/// Why a notification was dropped (the metric's `reason`, the row's `drop_reason`).
#[derive(Clone, Copy, Debug, IntoStaticStr, VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum Dropped {
    /// Not delivered within `--notification-max-age`.
    Expired,
    /// More than `--notification-outbox-max` pending: the oldest go.
    OutboxFull,
    /// Its sink is no longer in the notifications file.
    UnknownSink,
}

/// The outbox's series, by sink (the file's sinks: a bounded set, fixed while the process runs).
#[derive(Clone)]
pub struct NotifyMetrics {
    delivered: IntCounterVec,
    retried: IntCounterVec,
    failed: IntCounterVec,
    dropped: IntCounterVec,
    pending: IntGaugeVec,
    oldest: IntGaugeVec,
    queries: IntCounterVec,
}

impl NotifyMetrics {
    /// Registers the series, each sink's (and reason's) at zero.
    pub fn new(registry: &Registry, notifier: &Notifier) -> Self {
        let gauge = |name: &str, help: &str| {
            let gauge = IntGaugeVec::new(Opts::new(name, help), &["sink"]).expect("valid metric");
            register(registry, gauge)
        };
        let metrics = Self {
            delivered: counter(
                registry,
                "eru_notifications_delivered_total",
                "Notification events delivered (a receiver answered 2xx), by sink.",
                &["sink"],
            ),
            retried: counter(
                registry,
                "eru_notifications_retried_total",
                "Notification events whose delivery failed and will be tried again, by sink.",
                &["sink"],
            ),
            failed: counter(
                registry,
                "eru_notifications_failed_attempts_total",
                "Messages a receiver did not take (no answer in time, refused, not 2xx), by sink.",
                &["sink"],
            ),
            dropped: counter(
                registry,
                "eru_notifications_dropped_total",
                "Notification events given up, by sink and reason (expired, outbox_full, unknown_sink).",
                &["sink", "reason"],
            ),
            pending: gauge(
                "eru_notifications_pending",
                "Notification events in the outbox not delivered yet, by sink (the leader's count).",
            ),
            oldest: gauge(
                "eru_notifications_oldest_pending_age_seconds",
                "How long the oldest undelivered notification event of a sink has waited (0: none).",
            ),
            queries: counter(
                registry,
                "eru_notifications_journal_queries_total",
                "Journal statements the notification delivery ran, by sink (upkeep: the upkeep's).",
                &["sink"],
            ),
        };
        for sink in notifier.sink_names() {
            for series in [
                &metrics.delivered,
                &metrics.retried,
                &metrics.failed,
                &metrics.queries,
            ] {
                series.with_label_values(&[sink]);
            }
            metrics.pending.with_label_values(&[sink]);
            metrics.oldest.with_label_values(&[sink]);
            for reason in Dropped::VARIANTS {
                metrics.dropped.with_label_values(&[sink, (*reason).into()]);
            }
        }
        metrics.queries.with_label_values(&[upkeep::LABEL]);
        metrics
    }
}

/// What the delivery task needs.
pub struct Delivery {
    pub journal: Journal,
    pub notifier: Arc<Notifier>,
    pub leadership: Leadership,
    pub metrics: NotifyMetrics,
    /// Woken when a pass journals notifications.
    pub wake: Arc<Notify>,
    /// `--notification-max-age`.
    pub max_age: Duration,
    /// `--notification-backoff-max`.
    pub backoff_max: Duration,
    /// `--notification-outbox-max`.
    pub outbox_max: u32,
}

impl Delivery {
    /// `--notification-max-age` as a span of the journal's clock.
    fn max_age(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.max_age).unwrap_or(chrono::Duration::MAX)
    }

    /// Counts `n` journal statements run for `sink` (or the upkeep).
    fn queried(&self, sink: &str, n: u64) {
        self.metrics.queries.with_label_values(&[sink]).inc_by(n);
    }
}

/// Delivers the outbox while this process leads, until `stop`: a lane per sink, and the upkeep.
pub async fn deliver(delivery: Delivery, stop: watch::Receiver<bool>) {
    let delivery = Arc::new(delivery);
    // a cap lowered below the backlog applies before any lane sends (else the lanes would send
    // the oldest rows, the very ones beyond the cap)
    tokio::select! {
        _ = delivery.leadership.acquired() => {
            if let Err(e) = upkeep::over_cap(&delivery).await {
                tracing::warn!(error = %e, "the notification outbox's cap was not applied; tried again shortly");
            }
        }
        _ = shutdown_requested(stop.clone()) => return,
    }
    let sinks: Vec<String> = delivery.notifier.sink_names().map(str::to_string).collect();
    let wakes: Vec<Arc<Notify>> = sinks.iter().map(|_| Arc::new(Notify::new())).collect();
    let mut tasks = tokio::task::JoinSet::new();
    for (sink, wake) in sinks.into_iter().zip(&wakes) {
        tasks.spawn(lane::run(delivery.clone(), sink, wake.clone(), stop.clone()));
    }
    tasks.spawn(upkeep::run(delivery.clone(), stop.clone()));
    // a pass's wake reaches every lane (each keeps it until it next looks)
    loop {
        tokio::select! {
            _ = delivery.wake.notified() => wakes.iter().for_each(|w| w.notify_one()),
            _ = shutdown_requested(stop.clone()) => break,
        }
    }
    tasks.join_all().await;
}

/// Sleeps until `until` (a wall-clock instant), or until `wake` when there is one; whether the
/// delivery must stop.
async fn pause(until: DateTime<Utc>, wake: Option<&Notify>, stop: &watch::Receiver<bool>) -> bool {
    let wait = (until - Utc::now()).to_std().unwrap_or_default();
    let woken = async {
        match wake {
            Some(wake) => wake.notified().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::time::sleep(wait) => false,
        _ = woken => false,
        _ = shutdown_requested(stop.clone()) => true,
    }
}

/// The wait before the try after `attempts` failed ones: about 1 s, 2 s, 4 s … at most `max`;
/// each a random point in its upper half (receivers that came back are not hit by every retry at
/// once), never under 1 s.
pub fn backoff(attempts: i64, max: Duration) -> chrono::Duration {
    let ceiling = BACKOFF_FIRST
        .saturating_mul(1 << attempts.clamp(0, 16) as u32)
        .min(max);
    let wait = ceiling.mul_f64(0.5 + 0.5 * unit_random()).max(BACKOFF_FIRST);
    chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX)
}

/// A number in [0, 1) that differs from call to call (the standard library's randomly keyed hash
/// of the clock: enough to spread retries, not for secrets).
fn unit_random() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

impl Delivery {
    /// Drops every pending row of `sink` that `which` picks, for `why`, [`CHUNK`] at a time;
    /// how many (the caller logs).
    async fn drop_all(
        &self,
        sink: &str,
        which: crate::journal::PendingOf<'_>,
        why: Dropped,
    ) -> crate::Result<usize> {
        let label = if self.notifier.sink(sink).is_some() {
            sink
        } else {
            upkeep::LABEL
        };
        let mut dropped = 0;
        loop {
            let rows = self.journal.oldest_pending(which, CHUNK).await?;
            self.queried(label, 1);
            let ids: Vec<i64> = rows.iter().map(|(id, _)| *id).collect();
            self.drop_rows(sink, &ids, why).await?;
            dropped += ids.len();
            if ids.len() < CHUNK as usize {
                return Ok(dropped);
            }
        }
    }

    /// Marks the rows `ids` of `sink` dropped for `why`, and counts them (the caller logs).
    async fn drop_rows(&self, sink: &str, ids: &[i64], why: Dropped) -> crate::Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let reason: &'static str = why.into();
        self.journal.notices_dropped(ids, Utc::now(), reason).await?;
        self.queried(
            if self.notifier.sink(sink).is_some() {
                sink
            } else {
                upkeep::LABEL
            },
            1,
        );
        (self.metrics.dropped)
            .with_label_values(&[sink, reason])
            .inc_by(ids.len() as u64);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
