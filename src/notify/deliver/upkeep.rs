//! The upkeep of the outbox, beside the lanes: the cap (`outbox_full`), the rows of sinks that
//! left the file (`unknown_sink`), the per-sink gauges, and the prune of settled rows.

use std::{collections::BTreeMap, sync::Arc};

use chrono::{DateTime, Utc};
use tokio::sync::watch;
use tracing::{info, warn};

use super::{CHUNK, Delivery, Dropped, PRUNE_EVERY, UPKEEP, pause};
use crate::{journal::PendingOf, runtime::shutdown_requested};

/// The upkeep's `sink` label on the journal-statement counter (never a sink's: a sink's name has
/// no `_`).
pub(super) const LABEL: &str = "_upkeep";

/// Keeps the outbox every [`UPKEEP`] while this process leads, until `stop`.
pub(super) async fn run(delivery: Arc<Delivery>, stop: watch::Receiver<bool>) {
    let mut last_prune = None;
    loop {
        tokio::select! {
            _ = delivery.leadership.acquired() => {}
            _ = shutdown_requested(stop.clone()) => return,
        }
        if let Err(e) = keep(&delivery, Utc::now(), &mut last_prune).await {
            warn!(error = %e, "the notification outbox's upkeep failed; tried again shortly");
        }
        if pause(Utc::now() + UPKEEP, None, &stop).await {
            return;
        }
    }
}

/// One upkeep at `now`; prunes when the last prune is older than [`PRUNE_EVERY`].
pub(super) async fn keep(
    delivery: &Delivery,
    now: DateTime<Utc>,
    last_prune: &mut Option<DateTime<Utc>>,
) -> crate::Result<()> {
    over_cap(delivery).await?;
    unknown_sinks(delivery).await?;
    measure(delivery, now).await?;
    if last_prune.is_none_or(|at| now - at >= PRUNE_EVERY) {
        prune(delivery, now).await?;
        *last_prune = Some(now);
    }
    Ok(())
}

/// Drops the oldest pending rows beyond `--notification-outbox-max`, in chunks; how many.
pub(super) async fn over_cap(delivery: &Delivery) -> crate::Result<u64> {
    let pending = delivery.journal.pending_count().await?;
    delivery.queried(LABEL, 1);
    let mut left = u64::try_from(pending - i64::from(delivery.outbox_max)).unwrap_or(0);
    let mut dropped: BTreeMap<String, u64> = BTreeMap::new();
    while left > 0 {
        let limit = left.min(u64::from(CHUNK)) as u32;
        let rows = delivery.journal.oldest_pending(PendingOf::All, limit).await?;
        delivery.queried(LABEL, 1);
        if rows.is_empty() {
            break;
        }
        left = left.saturating_sub(rows.len() as u64);
        for (sink, ids) in by_sink(rows) {
            delivery.drop_rows(&sink, &ids, Dropped::OutboxFull).await?;
            *dropped.entry(sink).or_default() += ids.len() as u64;
        }
    }
    for (sink, events) in &dropped {
        warn!(
            sink,
            events,
            reason = "outbox_full",
            cap = delivery.outbox_max,
            "notifications dropped: more than --notification-outbox-max were pending, the oldest went"
        );
    }
    Ok(dropped.values().sum())
}

/// Drops the pending rows of sinks no longer in the file, in chunks.
pub(super) async fn unknown_sinks(delivery: &Delivery) -> crate::Result<()> {
    let sinks = delivery.journal.pending_sinks().await?;
    delivery.queried(LABEL, 1);
    for sink in sinks.iter().filter(|s| delivery.notifier.sink(s).is_none()) {
        let dropped = (delivery.drop_all(sink, PendingOf::Sink(sink), Dropped::UnknownSink)).await?;
        warn!(
            sink,
            events = dropped,
            reason = "unknown_sink",
            "notifications dropped: their sink is no longer in the notifications file"
        );
    }
    Ok(())
}

/// Sets each sink's gauges: its pending rows, and how long the oldest has waited at `now`.
async fn measure(delivery: &Delivery, now: DateTime<Utc>) -> crate::Result<()> {
    let backlog = delivery.journal.pending_by_sink().await?;
    delivery.queried(LABEL, 1);
    let backlog: BTreeMap<String, (i64, Option<DateTime<Utc>>)> = (backlog.into_iter())
        .map(|(sink, n, oldest)| (sink, (n, oldest)))
        .collect();
    for sink in delivery.notifier.sink_names() {
        let (pending, oldest) = backlog.get(sink).copied().unwrap_or((0, None));
        let age = oldest.map_or(0, |at| (now - at).num_seconds().max(0));
        delivery.metrics.pending.with_label_values(&[sink]).set(pending);
        delivery.metrics.oldest.with_label_values(&[sink]).set(age);
    }
    Ok(())
}

/// Deletes every settled row settled longer than `--notification-max-age` before `now`, in
/// batches (each its own transaction, so the journal's writers are never held up for long);
/// how many.
pub(super) async fn prune(delivery: &Delivery, now: DateTime<Utc>) -> crate::Result<u64> {
    let cutoff = now - delivery.max_age();
    let mut pruned = 0;
    loop {
        let batch = delivery.journal.prune_notices(cutoff, CHUNK).await?;
        delivery.queried(LABEL, 1);
        pruned += batch;
        if batch < u64::from(CHUNK) {
            break;
        }
        tokio::task::yield_now().await;
    }
    if pruned > 0 {
        info!(
            rows = pruned,
            "settled notifications past the maximum age deleted"
        );
    }
    Ok(pruned)
}

/// Ids grouped by sink.
fn by_sink(rows: Vec<(i64, String)>) -> BTreeMap<String, Vec<i64>> {
    let mut sinks: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (id, sink) in rows {
        sinks.entry(sink).or_default().push(id);
    }
    sinks
}
