//! One sink's lane: its due rows, the longest waiting Eru first, sent a message per Eru with at
//! most [`IN_FLIGHT`] at once; after a failure it starts no more messages and pauses for a
//! backoff of its own, so a receiver that hangs or refuses holds back only its own sink.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use chrono::{DateTime, Utc};
use futures::{StreamExt, stream};
use tokio::sync::{Notify, watch};
use tracing::warn;

use super::{super::message, Delivery, Dropped, IDLE_MAX, IN_FLIGHT, PER_MESSAGE, TURN, backoff, pause};
use crate::{
    journal::{NoticeRow, PendingOf},
    runtime::shutdown_requested,
};

/// How often a lane looks for its expired rows (each look reads the sink's pending rows).
const EXPIRE_EVERY: chrono::Duration = chrono::Duration::seconds(10);

/// What a turn of the lane ended with.
#[derive(Debug, PartialEq)]
pub(super) enum Turn {
    /// It sent what was due: look again at once.
    Sent,
    /// Nothing is due before this instant (or a pass journals a new row).
    Idle(DateTime<Utc>),
    /// A receiver did not take a message: the lane waits until this instant.
    Failed(DateTime<Utc>),
}

/// Delivers `sink`'s rows while this process leads, until `stop`.
pub(super) async fn run(
    delivery: Arc<Delivery>,
    sink: String,
    wake: Arc<Notify>,
    stop: watch::Receiver<bool>,
) {
    let agent = crate::outbound::agent(message::SEND_TIMEOUT);
    let mut lane = Lane {
        sink,
        ..Lane::default()
    };
    loop {
        tokio::select! {
            _ = delivery.leadership.acquired() => {}
            _ = shutdown_requested(stop.clone()) => return,
        }
        let (until, woken) = match lane.turn(&delivery, &agent).await {
            Ok(Turn::Sent) => continue,
            Ok(Turn::Idle(next)) => (next, Some(&*wake)),
            Ok(Turn::Failed(until)) => (until, None),
            Err(e) => {
                let until = Utc::now() + backoff(lane.failures, delivery.backoff_max);
                lane.failures += 1;
                warn!(sink = lane.sink, error = %e, retry_at = %until,
                      "notification delivery failed; tried again shortly");
                (until, None)
            }
        };
        if pause(until, woken, &stop).await {
            return;
        }
    }
}

/// A sink's lane, its failures in a row (its own backoff's count), and when it last dropped its
/// expired rows.
#[derive(Default)]
pub(super) struct Lane {
    pub sink: String,
    pub failures: i64,
    pub expired_at: Option<DateTime<Utc>>,
}

impl Lane {
    /// One turn: drops the lane's expired rows, then sends a message to each Eru with a due row
    /// (at most [`TURN`]).
    pub(super) async fn turn(&mut self, delivery: &Delivery, agent: &ureq::Agent) -> crate::Result<Turn> {
        let sink = self.sink.as_str();
        let now = Utc::now();
        if self.expired_at.is_none_or(|at| now - at >= EXPIRE_EVERY) {
            expire(delivery, sink, now).await?;
            self.expired_at = Some(now);
        }
        let due = delivery.journal.due_for(sink, now, TURN).await?;
        delivery.queried(sink, 1);
        if due.is_empty() {
            let next = delivery.journal.next_due(sink).await?;
            delivery.queried(sink, 1);
            let idle = now + IDLE_MAX;
            return Ok(Turn::Idle(next.map_or(idle, |next| next.min(idle))));
        }
        let failed = AtomicBool::new(false);
        let sent: Vec<crate::Result<Vec<i64>>> = stream::iter(due)
            .map(|uid| message(delivery, agent, sink, uid, &failed))
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        // the turn's deliveries in one transaction (a crash before it: sent again, same keys)
        let delivered: Vec<i64> = sent.into_iter().collect::<crate::Result<Vec<_>>>()?.concat();
        if !delivered.is_empty() {
            delivery.journal.notices_delivered(&delivered, Utc::now()).await?;
            delivery.queried(sink, 1);
            (delivery.metrics.delivered)
                .with_label_values(&[sink])
                .inc_by(delivered.len() as u64);
        }
        if failed.load(Ordering::Relaxed) {
            let until = Utc::now() + backoff(self.failures, delivery.backoff_max);
            self.failures += 1;
            return Ok(Turn::Failed(until));
        }
        self.failures = 0;
        Ok(Turn::Sent)
    }
}

/// Drops `sink`'s pending rows written longer than `--notification-max-age` before `now`.
async fn expire(delivery: &Delivery, sink: &str, now: DateTime<Utc>) -> crate::Result<()> {
    let cutoff = now - delivery.max_age();
    let which = PendingOf::WrittenBefore(sink, cutoff);
    let dropped = delivery.drop_all(sink, which, Dropped::Expired).await?;
    if dropped > 0 {
        warn!(
            sink,
            events = dropped,
            reason = "expired",
            "notifications dropped: undelivered for longer than --notification-max-age"
        );
    }
    Ok(())
}

/// Sends the Eru `uid`'s pending rows for `sink` in one message, unless a message of this turn
/// failed already (`failed`, set when this one fails); returns the ids the receiver took (the
/// turn marks them delivered), or records the failure.
async fn message(
    delivery: &Delivery,
    agent: &ureq::Agent,
    sink: &str,
    uid: String,
    failed: &AtomicBool,
) -> crate::Result<Vec<i64>> {
    if failed.load(Ordering::Relaxed) {
        return Ok(Vec::new());
    }
    let rows = delivery.journal.pending_notices(sink, &uid, PER_MESSAGE).await?;
    delivery.queried(sink, 1);
    let Some(config) = delivery.notifier.sink(sink).cloned() else {
        return Ok(Vec::new());
    };
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let body = message::body(&config, &rows);
    let agent = agent.clone();
    let sent = tokio::task::spawn_blocking(move || message::send(&agent, &config, &body))
        .await
        .unwrap_or_else(|e| Err(format!("the sending task failed: {e}")));
    match sent {
        Ok(()) => Ok(rows.iter().map(|r| r.id).collect()),
        Err(error) => {
            failed.store(true, Ordering::Relaxed);
            retry(delivery, sink, &rows, &error).await?;
            Ok(Vec::new())
        }
    }
}

/// Records that `rows` were not taken by `sink`'s receiver (`error`): tried again after a
/// backoff counted from now, the end of the attempt.
async fn retry(delivery: &Delivery, sink: &str, rows: &[NoticeRow], error: &str) -> crate::Result<()> {
    let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
    let events = rows.len() as u64;
    let attempts = rows.iter().map(|r| r.attempts).max().unwrap_or(0);
    let next = Utc::now() + backoff(attempts, delivery.backoff_max);
    warn!(sink, namespace = %rows[0].namespace, name = %rows[0].name, events, %error,
          retry_at = %next, "a notification was not delivered; it is tried again");
    delivery.journal.notices_failed(&ids, next, error).await?;
    delivery.queried(sink, 1);
    let metrics = &delivery.metrics;
    metrics.retried.with_label_values(&[sink]).inc_by(events);
    metrics.failed.with_label_values(&[sink]).inc();
    Ok(())
}
