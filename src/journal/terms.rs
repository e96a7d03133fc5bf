//! Leadership terms in the operator runs: what the leader Lease proves of the term a new leader
//! took over, so downtime windows know about leadership gaps whatever the journal saw.

use chrono::{DateTime, Utc};

use super::*;

/// The version recorded for a run this journal knows only from the Lease.
pub const FROM_LEASE: &str = "unknown (from the leader Lease)";

impl Journal {
    /// Records that the leader `holder` was alive from `acquired` to `renewed` (its Lease's last
    /// renewal). A shared journal holds that leader's run: its heartbeat moves up to `renewed`. A
    /// journal that never saw that leader (one per replica) gets a run standing for the term.
    pub async fn record_term(
        &self,
        holder: &str,
        acquired: DateTime<Utc>,
        renewed: DateTime<Utc>,
    ) -> Result<()> {
        const RECORDING: &str = "the term taken over";
        let mut tx = self.pool.begin().await?;
        let known: i64 = sqlx::query("SELECT count(*) FROM operator_runs WHERE instance = $1")
            .bind(holder)
            .fetch_one(&mut *tx)
            .await?
            .try_get(0)?;
        if known > 0 {
            sqlx::query(
                "UPDATE operator_runs SET heartbeat_at = $2
                 WHERE id = (SELECT max(id) FROM operator_runs WHERE instance = $1) AND heartbeat_at < $2",
            )
            .bind(holder)
            .bind(ts(renewed))
            .execute(&mut *tx)
            .await?;
        } else {
            sqlx::query(
                "INSERT INTO operator_runs (started_at, heartbeat_at, version, instance) VALUES ($1, $2, $3, $4)",
            )
            .bind(ts(acquired.min(renewed)))
            .bind(ts(renewed))
            .bind(FROM_LEASE)
            .bind(holder)
            .execute(&mut *tx)
            .await?;
        }
        // before this process leads: its epoch, not the leadership deadline, says it may
        self.commit_in_term(tx, RECORDING).await
    }
}
