//! The leader's delivery of the outbox: every [`POLL`] (or as soon as a pass journals new
//! notifications), each Eru with a due row gets one message per sink, carrying all its pending
//! events (an outage's records arrive together, not as a flood); a message that fails is
//! tried again after a backoff that doubles up to `--notification-backoff-max`. A row is dropped, with the
//! reason, when it is older than `--notification-max-age` (`expired`), beyond the newest
//! `--notification-outbox-max` pending ones (`outbox_full`), or its sink left the file
//! (`unknown_sink`). Delivery is at least once: a message sent before a crash (or by a deposed
//! leader) and not yet marked is sent again, with the same keys.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use prometheus::{IntCounterVec, IntGauge, Registry};
use strum::{IntoStaticStr, VariantArray};
use tokio::sync::{Notify, watch};
use tracing::{info, warn};

use super::{Notifier, message};
use crate::{
    journal::{Journal, NoticeRow},
    metrics::{counter, register},
    runtime::{leader::Leadership, shutdown_requested},
};

/// How often the outbox is looked at without a new notification (retries come due, a new leader
/// takes over the last one's rows).
const POLL: Duration = Duration::from_secs(2);
/// Messages (an Eru and a sink each) per round.
const ROUND: u32 = 100;
/// Events per message at most: an Eru's pending events go in one message, due or not.
const PER_MESSAGE: u32 = 100;
/// The first retry's wait; each further one doubles, up to `--notification-backoff-max`.
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

/// The outbox's series.
#[derive(Clone)]
pub struct NotifyMetrics {
    delivered: IntCounterVec,
    retried: IntCounterVec,
    dropped: IntCounterVec,
    pending: IntGauge,
}

impl NotifyMetrics {
    /// Registers the series, each sink's (and reason's) at zero.
    pub fn new(registry: &Registry, notifier: &Notifier) -> Self {
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
            dropped: counter(
                registry,
                "eru_notifications_dropped_total",
                "Notification events given up, by sink and reason (expired, outbox_full, unknown_sink).",
                &["sink", "reason"],
            ),
            pending: register(
                registry,
                IntGauge::new(
                    "eru_notifications_pending",
                    "Notification events in the outbox not delivered yet (the leader's count).",
                )
                .expect("valid metric"),
            ),
        };
        for sink in notifier.sink_names() {
            metrics.delivered.with_label_values(&[sink]);
            metrics.retried.with_label_values(&[sink]);
            for reason in Dropped::VARIANTS {
                metrics.dropped.with_label_values(&[sink, (*reason).into()]);
            }
        }
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

/// Delivers the outbox while this process leads, until `stop`.
pub async fn deliver(delivery: Delivery, stop: watch::Receiver<bool>) {
    let agent = crate::eru::gates::agent(message::SEND_TIMEOUT);
    let mut last_prune = None;
    loop {
        tokio::select! {
            _ = delivery.leadership.acquired() => {}
            _ = shutdown_requested(stop.clone()) => return,
        }
        let more = match delivery.round(&agent, Utc::now(), &mut last_prune).await {
            Ok(more) => more,
            Err(e) => {
                warn!(error = %e, "notification delivery failed; tried again shortly");
                false
            }
        };
        if more {
            continue;
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = delivery.wake.notified() => {}
            _ = shutdown_requested(stop.clone()) => return,
        }
    }
}

impl Delivery {
    /// One round at `now`: drops what must go, sends what is due; `true` when more rows are due.
    async fn round(
        &self,
        agent: &ureq::Agent,
        now: DateTime<Utc>,
        last_prune: &mut Option<DateTime<Utc>>,
    ) -> crate::Result<bool> {
        let (pending, over) = self.journal.notices_over(self.outbox_max).await?;
        self.metrics.pending.set(pending - over.len() as i64);
        for (sink, ids) in by_sink(over.into_iter()) {
            self.drop_rows(&sink, &ids, now, Dropped::OutboxFull).await?;
        }
        let due = self.journal.due_notices(now, ROUND).await?;
        let more = due.len() == ROUND as usize;
        let max_age = chrono::Duration::from_std(self.max_age).unwrap_or(chrono::Duration::MAX);
        // a sink that failed once this round waits for the next: one receiver that does not
        // answer (10 s a message) never holds the other sinks' messages back for long
        let mut failing = std::collections::BTreeSet::new();
        for (sink, uid) in due {
            if failing.contains(&sink) {
                continue;
            }
            let rows = (self.journal.pending_notices(&sink, &uid, PER_MESSAGE)).await?;
            let unknown = self.notifier.sink(&sink).is_none();
            let (gone, kept): (Vec<NoticeRow>, Vec<NoticeRow>) =
                (rows.into_iter()).partition(|r| unknown || r.created_at.0 + max_age < now);
            if !gone.is_empty() {
                let ids: Vec<i64> = gone.iter().map(|r| r.id).collect();
                let why = if unknown {
                    Dropped::UnknownSink
                } else {
                    Dropped::Expired
                };
                self.drop_rows(&sink, &ids, now, why).await?;
            }
            if !kept.is_empty() && !self.send(agent, &sink, &kept, now).await? {
                failing.insert(sink);
            }
        }
        if last_prune.is_none_or(|at| now - at > chrono::Duration::minutes(10)) {
            *last_prune = Some(now);
            let pruned = self.journal.prune_notices(now - max_age, 1000).await?;
            if pruned > 0 {
                info!(
                    rows = pruned,
                    "settled notifications past the maximum age deleted"
                );
            }
        }
        Ok(more)
    }

    /// Sends one message of `rows` (one Eru's, non-empty) to `sink`, and records how it went;
    /// whether the receiver took it.
    async fn send(
        &self,
        agent: &ureq::Agent,
        sink: &str,
        rows: &[NoticeRow],
        now: DateTime<Utc>,
    ) -> crate::Result<bool> {
        let Some(config) = self.notifier.sink(sink).cloned() else {
            return Ok(false);
        };
        let body = message::body(&config, rows);
        let agent = agent.clone();
        let sent = tokio::task::spawn_blocking(move || message::send(&agent, &config, &body))
            .await
            .unwrap_or_else(|e| Err(format!("the sending task failed: {e}")));
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        let events = rows.len() as u64;
        match &sent {
            Ok(()) => {
                self.journal.notices_delivered(&ids, Utc::now()).await?;
                self.metrics.delivered.with_label_values(&[sink]).inc_by(events);
            }
            Err(error) => {
                let attempts = rows.iter().map(|r| r.attempts).max().unwrap_or(0);
                let next = now + backoff(attempts, self.backoff_max);
                warn!(sink, namespace = %rows[0].namespace, name = %rows[0].name, events, %error,
                      retry_at = %next, "a notification was not delivered; it is tried again");
                self.journal.notices_failed(&ids, next, error).await?;
                self.metrics.retried.with_label_values(&[sink]).inc_by(events);
            }
        }
        Ok(sent.is_ok())
    }

    async fn drop_rows(
        &self,
        sink: &str,
        ids: &[i64],
        now: DateTime<Utc>,
        why: Dropped,
    ) -> crate::Result<()> {
        let reason: &'static str = why.into();
        warn!(sink, events = ids.len(), reason, "notifications dropped");
        self.journal.notices_dropped(ids, now, reason).await?;
        self.metrics
            .dropped
            .with_label_values(&[sink, reason])
            .inc_by(ids.len() as u64);
        Ok(())
    }
}

/// The wait before the try after `attempts` failed ones: 1 s, 2 s, 4 s … at most `max`.
pub fn backoff(attempts: i64, max: Duration) -> chrono::Duration {
    let doubled = BACKOFF_FIRST.saturating_mul(1 << attempts.clamp(0, 16) as u32);
    chrono::Duration::from_std(doubled.min(max)).unwrap_or(chrono::Duration::MAX)
}

/// Ids grouped by sink.
fn by_sink(rows: impl Iterator<Item = (i64, String)>) -> BTreeMap<String, Vec<i64>> {
    let mut sinks: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (id, sink) in rows {
        sinks.entry(sink).or_default().push(id);
    }
    sinks
}
