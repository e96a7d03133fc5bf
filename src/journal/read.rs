//! The journal's queries: what a reconcile reads (cursor, open restart, summary) and the listings
//! of the HTTP API and `eru-operator history`.

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::*;

impl Journal {
    /// The latest slot of this object that the journal has accounted for (restarted, missed or
    /// skipped), if any.
    pub async fn last_accounted_slot(&self, uid: &str) -> Result<Option<DateTime<Utc>>> {
        let row = sqlx::query(
            "SELECT max(s) FROM (
               SELECT max(slot) AS s FROM restarts WHERE uid = ?1
               UNION ALL SELECT max(last_slot) AS s FROM slots WHERE uid = ?1)",
        )
        .bind(uid)
        .fetch_one(&self.pool)
        .await?;
        let latest: Option<String> = row.try_get(0)?;
        Ok(latest.as_deref().and_then(parse_ts))
    }

    /// The restart recorded for this object's slot, if any.
    pub async fn restart(&self, uid: &str, slot: DateTime<Utc>) -> Result<Option<RestartRow>> {
        Ok(
            sqlx::query_as("SELECT * FROM restarts WHERE uid = ? AND slot = ?")
                .bind(uid)
                .bind(ts(slot))
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// This object's restart still in progress, if any.
    pub async fn open_restart(&self, uid: &str) -> Result<Option<RestartRow>> {
        Ok(sqlx::query_as(
            "SELECT * FROM restarts WHERE uid = ? AND outcome = 'in_progress' ORDER BY slot DESC LIMIT 1",
        )
        .bind(uid)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Every restart still in progress (of the objects in `namespace`, or of all).
    pub async fn open_restarts(&self, namespace: Option<&str>) -> Result<Vec<RestartRow>> {
        Ok(sqlx::query_as(
            "SELECT * FROM restarts WHERE outcome = 'in_progress' AND (?1 IS NULL OR namespace = ?1)
             ORDER BY id",
        )
        .bind(namespace)
        .fetch_all(&self.pool)
        .await?)
    }

    /// What an Eru's status shows of its history.
    pub async fn eru_summary(&self, uid: &str) -> Result<EruSummary> {
        let row = sqlx::query(
            "SELECT
               (SELECT coalesce(sum(slot_count), 0) FROM slots WHERE uid = ?1 AND result != 'fired'),
               (SELECT max(last_slot) FROM slots WHERE uid = ?1 AND result != 'fired'),
               (SELECT max(finished_at) FROM restarts WHERE uid = ?1 AND outcome = 'succeeded'),
               (SELECT max(finished_at) FROM restarts WHERE uid = ?1 AND outcome = 'failed')",
        )
        .bind(uid)
        .fetch_one(&self.pool)
        .await?;
        let time = |i: usize| -> Result<Option<DateTime<Utc>>> {
            Ok(row.try_get::<Option<String>, _>(i)?.as_deref().and_then(parse_ts))
        };
        let last_restart = sqlx::query_as("SELECT * FROM restarts WHERE uid = ? ORDER BY slot DESC LIMIT 1")
            .bind(uid)
            .fetch_optional(&self.pool)
            .await?;
        Ok(EruSummary {
            missed_slots: row.try_get(0)?,
            last_missed: time(1)?,
            last_success: time(2)?,
            last_failure: time(3)?,
            last_restart,
        })
    }

    /// Journaled transitions, newest first (by id), `limit + 1` rows at most.
    pub async fn transitions(&self, f: &Filter) -> Result<Vec<TransitionRow>> {
        Ok(sqlx::query_as(
            "SELECT id, kind, namespace, name, uid, from_state, to_state, event, at, detail FROM transitions
             WHERE (?1 IS NULL OR kind = ?1) AND (?2 IS NULL OR namespace = ?2) AND (?3 IS NULL OR name = ?3)
               AND (?4 IS NULL OR at >= ?4) AND (?5 IS NULL OR at < ?5) AND id < coalesce(?6, 9223372036854775807)
             ORDER BY id DESC LIMIT ?7",
        )
        .bind(&f.kind)
        .bind(&f.namespace)
        .bind(&f.name)
        .bind(&f.since)
        .bind(&f.until)
        .bind(f.before)
        .bind(f.limit + 1)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Journaled restarts, newest first (by id), `limit + 1` rows at most; time bounds apply to
    /// `started_at`.
    pub async fn restarts(&self, f: &Filter) -> Result<Vec<RestartRow>> {
        Ok(sqlx::query_as(
            "SELECT * FROM restarts
             WHERE (?1 IS NULL OR namespace = ?1) AND (?2 IS NULL OR name = ?2) AND (?3 IS NULL OR target = ?3)
               AND (?4 IS NULL OR outcome = ?4) AND (?5 IS NULL OR started_at >= ?5)
               AND (?6 IS NULL OR started_at < ?6) AND id < coalesce(?7, 9223372036854775807)
             ORDER BY id DESC LIMIT ?8",
        )
        .bind(&f.namespace)
        .bind(&f.name)
        .bind(&f.target)
        .bind(&f.outcome)
        .bind(&f.since)
        .bind(&f.until)
        .bind(f.before)
        .bind(f.limit + 1)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Journaled missed and skipped slots, newest first (by id), `limit + 1` rows at most; time
    /// bounds apply to the slots a row stands for.
    pub async fn missed(&self, f: &Filter) -> Result<Vec<SlotRow>> {
        Ok(sqlx::query_as(
            "SELECT * FROM slots
             WHERE result != 'fired'
               AND (?1 IS NULL OR namespace = ?1) AND (?2 IS NULL OR name = ?2) AND (?3 IS NULL OR target = ?3)
               AND (?4 IS NULL OR reason = ?4) AND (?5 IS NULL OR last_slot >= ?5)
               AND (?6 IS NULL OR slot < ?6) AND id < coalesce(?7, 9223372036854775807)
             ORDER BY id DESC LIMIT ?8",
        )
        .bind(&f.namespace)
        .bind(&f.name)
        .bind(&f.target)
        .bind(&f.reason)
        .bind(&f.since)
        .bind(&f.until)
        .bind(f.before)
        .bind(f.limit + 1)
        .fetch_all(&self.pool)
        .await?)
    }
}
