//! The notification outbox: rows written with the ledger records they report
//! ([`super::Entry::notices`]), read and settled here by the leader's delivery task
//! (`src/notify/deliver.rs`). A row is pending until it is delivered or dropped; settled rows are
//! deleted once older than the outbox's maximum age.

use chrono::{DateTime, Utc};

use super::*;

/// `$first, $first+1, …` for `n` values.
fn placeholders(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

const PENDING: &str = "delivered_at IS NULL AND dropped_at IS NULL";

/// Which pending notifications [`Journal::oldest_pending`] reads.
#[derive(Clone, Copy, Debug)]
pub enum PendingOf<'a> {
    All,
    /// Those of this sink.
    Sink(&'a str),
    /// Those of this sink written before this instant.
    WrittenBefore(&'a str, DateTime<Utc>),
}

/// What a refused settle says it was.
const SETTLING: &str = "settling notifications";

/// Notification ids per statement of a settle.
const SETTLE_CHUNK: usize = 1000;

impl Journal {
    /// The Erus (uid) with a notification for `sink` due at `now`, at most `limit`, the one due
    /// the longest first: one turn of the sink's lane. It reads at most ten rows per Eru asked
    /// for, in the order of the index by sink and due time, however long the sink's backlog.
    pub async fn due_for(&self, sink: &str, now: DateTime<Utc>, limit: u32) -> Result<Vec<String>> {
        let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT uid FROM notifications WHERE {PENDING} AND sink = $1 AND next_attempt_at <= $2
             ORDER BY next_attempt_at, id LIMIT $3"
        )))
        .bind(sink)
        .bind(ts(now))
        .bind(i64::from(limit).saturating_mul(10))
        .fetch_all(&self.pool)
        .await?;
        let mut seen = std::collections::HashSet::new();
        let mut uids: Vec<String> = rows.into_iter().filter(|uid| seen.insert(uid.clone())).collect();
        uids.truncate(limit as usize);
        Ok(uids)
    }

    /// When the next pending notification for `sink` is due (none pending: `None`).
    pub async fn next_due(&self, sink: &str) -> Result<Option<DateTime<Utc>>> {
        let next: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT min(next_attempt_at) FROM notifications WHERE {PENDING} AND sink = $1"
        )))
        .bind(sink)
        .fetch_one(&self.pool)
        .await?;
        Ok(next.as_deref().and_then(parse_ts))
    }

    /// The pending notifications of the Eru `uid` for `sink`, due or not (one message carries
    /// them all), oldest first, at most `limit`.
    pub async fn pending_notices(&self, sink: &str, uid: &str, limit: u32) -> Result<Vec<NoticeRow>> {
        let rows = sqlx::query_as::<_, Keyed<NoticeRow>>(sqlx::AssertSqlSafe(format!(
            "SELECT id, sink, key, uid, namespace, name, event, slot, last_slot, slot_count, reason, note,
               created_at, attempts, next_attempt_at, last_error
             FROM notifications WHERE {PENDING} AND sink = $1 AND uid = $2 ORDER BY id LIMIT $3"
        )))
        .bind(sink)
        .bind(uid)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(Keyed::all(rows))
    }

    /// Marks the notifications `ids` delivered at `at`.
    pub async fn notices_delivered(&self, ids: &[i64], at: DateTime<Utc>) -> Result<()> {
        self.settle(ids, "delivered_at = $1", &[ts(at)]).await
    }

    /// Marks the notifications `ids` failed at `at`: tried again at `next`, `error` kept.
    pub async fn notices_failed(&self, ids: &[i64], next: DateTime<Utc>, error: &str) -> Result<()> {
        let error = error.replace('\0', "\u{FFFD}");
        (self.settle(
            ids,
            "attempts = attempts + 1, next_attempt_at = $1, last_error = $2",
            &[ts(next), error],
        ))
        .await
    }

    /// Marks the notifications `ids` dropped at `at` for `reason` (never sent again).
    pub async fn notices_dropped(&self, ids: &[i64], at: DateTime<Utc>, reason: &str) -> Result<()> {
        (self.settle(
            ids,
            "dropped_at = $1, drop_reason = $2",
            &[ts(at), reason.to_string()],
        ))
        .await
    }

    /// Sets `set` (whose values are `values`, `$1…`) on the pending rows `ids`, in one fenced
    /// transaction of statements of [`SETTLE_CHUNK`] ids at most (far below either backend's
    /// limit of bound parameters: 32,766 on SQLite, 65,535 on PostgreSQL).
    async fn settle(&self, ids: &[i64], set: &str, values: &[String]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin_fenced(SETTLING).await?;
        for chunk in ids.chunks(SETTLE_CHUNK) {
            let sql = format!(
                "UPDATE notifications SET {set} WHERE {PENDING} AND id IN ({})",
                placeholders(values.len() + 1, chunk.len())
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for value in values {
                query = query.bind(value);
            }
            for id in chunk {
                query = query.bind(*id);
            }
            query.execute(&mut *tx).await?;
        }
        self.commit_fenced(tx, SETTLING).await
    }

    /// How many notifications are pending.
    pub async fn pending_count(&self) -> Result<i64> {
        Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT count(*) FROM notifications WHERE {PENDING}"
        )))
        .fetch_one(&self.pool)
        .await?)
    }

    /// The oldest pending notifications (id and sink) that `which` picks, at most `limit`.
    pub async fn oldest_pending(&self, which: PendingOf<'_>, limit: u32) -> Result<Vec<(i64, String)>> {
        let filter = match which {
            PendingOf::All => "",
            PendingOf::Sink(_) => "AND sink = $2",
            PendingOf::WrittenBefore(..) => "AND sink = $2 AND created_at < $3",
        };
        let sql = format!("SELECT id, sink FROM notifications WHERE {PENDING} {filter} ORDER BY id LIMIT $1");
        let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(i64::from(limit));
        match which {
            PendingOf::All => {}
            PendingOf::Sink(sink) => query = query.bind(sink),
            PendingOf::WrittenBefore(sink, at) => query = query.bind(sink).bind(ts(at)),
        }
        Ok(query.fetch_all(&self.pool).await?)
    }

    /// The sinks with a pending notification.
    pub async fn pending_sinks(&self) -> Result<Vec<String>> {
        Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT DISTINCT sink FROM notifications WHERE {PENDING}"
        )))
        .fetch_all(&self.pool)
        .await?)
    }

    /// Each sink's pending notifications: how many, and when the oldest was written.
    pub async fn pending_by_sink(&self) -> Result<Vec<(String, i64, Option<DateTime<Utc>>)>> {
        let rows: Vec<(String, i64, Option<String>)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT sink, count(*), min(created_at) FROM notifications WHERE {PENDING} GROUP BY sink"
        )))
        .fetch_all(&self.pool)
        .await?;
        Ok((rows.into_iter())
            .map(|(sink, n, oldest)| (sink, n, oldest.as_deref().and_then(parse_ts)))
            .collect())
    }

    /// Deletes at most `batch` settled notifications settled before `cutoff`; returns how many.
    pub async fn prune_notices(&self, cutoff: DateTime<Utc>, batch: u32) -> Result<u64> {
        const PRUNING: &str = "pruning delivered notifications";
        let mut tx = self.begin_fenced(PRUNING).await?;
        // on the index of coalesce(delivered_at, dropped_at): the expression is the index's
        let pruned = sqlx::query(
            "DELETE FROM notifications WHERE id IN (SELECT id FROM notifications
               WHERE coalesce(delivered_at, dropped_at) < $1 LIMIT $2)",
        )
        .bind(ts(cutoff))
        .bind(i64::from(batch))
        .execute(&mut *tx)
        .await?
        .rows_affected();
        self.commit_fenced(tx, PRUNING).await?;
        Ok(pruned)
    }

    /// The outbox at a glance, in `namespace` (all when `None`).
    pub async fn outbox_facts(&self, namespace: Option<&str>) -> Result<OutboxFacts> {
        let mut conn = self.pool.acquire().await?;
        outbox_facts_on(&mut conn, namespace).await
    }
}

/// [`Journal::outbox_facts`] on `conn` (the pool's, or the audit's read transaction).
pub(super) async fn outbox_facts_on(
    conn: &mut sqlx::AnyConnection,
    namespace: Option<&str>,
) -> Result<OutboxFacts> {
    let (pending, oldest, delivered, dropped): (i64, Option<String>, i64, i64) =
        sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT coalesce(sum(CASE WHEN {PENDING} THEN 1 ELSE 0 END), 0),
                min(CASE WHEN {PENDING} THEN created_at END),
                coalesce(sum(CASE WHEN delivered_at IS NOT NULL THEN 1 ELSE 0 END), 0),
                coalesce(sum(CASE WHEN dropped_at IS NOT NULL THEN 1 ELSE 0 END), 0)
         FROM notifications WHERE ($1 IS NULL OR namespace = $1)"
        )))
        .bind(namespace)
        .fetch_one(&mut *conn)
        .await?;
    let drops: Vec<(String, Option<String>, i64, Ts)> = sqlx::query_as(
        "SELECT sink, drop_reason, count(*), max(dropped_at) FROM notifications
         WHERE dropped_at IS NOT NULL AND ($1 IS NULL OR namespace = $1)
         GROUP BY sink, drop_reason ORDER BY count(*) DESC, sink, drop_reason",
    )
    .bind(namespace)
    .fetch_all(&mut *conn)
    .await?;
    let drops = (drops.into_iter())
        .map(|(sink, reason, count, last)| OutboxDrops {
            sink,
            reason: reason.unwrap_or_default(),
            count,
            last,
        })
        .collect();
    Ok(OutboxFacts {
        pending,
        oldest_pending: oldest.as_deref().and_then(parse_ts).map(Ts),
        delivered,
        dropped,
        drops,
    })
}
