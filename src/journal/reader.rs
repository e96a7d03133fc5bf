//! A pass's reads on one connection. Each read through the pool acquires a connection and
//! returns it; on SQLite, every connection is a thread of its own, and its return costs a
//! round trip to that thread (sqlx checks it on release), so a read took two thread hand-offs
//! besides its own. A pass that reads several times in a row holds one [`Reader`] instead: its
//! reads take one hand-off each, plus one for the connection's return (issue 57: at 10,000 Erus
//! due together those hand-offs were the largest share of the operator's CPU).
//!
//! A reader takes its connection at its first read, so a pass whose reads are all answered
//! without SQL (the downtime kept between passes, the term's first reads) takes none. Hold a
//! reader for reads in a row only, never across a wait on anything else: the pool has few
//! connections, and the writer task takes its own from it.

use chrono::{DateTime, Utc};
use sqlx::{Any, pool::PoolConnection};

use super::{read::SLOT_RECORDS, *};

/// One connection of the journal's pool, for several reads in a row.
pub struct Reader<'j> {
    journal: &'j Journal,
    conn: Option<PoolConnection<Any>>,
}

impl Journal {
    /// A connection for several reads in a row, taken at the first read (see the module's
    /// documentation).
    pub fn reader(&self) -> Reader<'_> {
        Reader {
            journal: self,
            conn: None,
        }
    }
}

impl<'j> Reader<'j> {
    /// The journal, and the reader's connection: taken from the pool at the first read. One that
    /// cannot be had opens an outage as a failed read does.
    async fn conn(&mut self) -> Result<(&'j Journal, &mut PoolConnection<Any>)> {
        let journal = self.journal;
        if self.conn.is_none() {
            self.conn = Some(journal.reached(journal.pool.acquire()).await?);
        }
        Ok((journal, self.conn.as_mut().expect("taken above")))
    }

    /// This Eru's ledger row (cursor and counters), if the journal has one.
    pub async fn ledger(&mut self, uid: &str) -> Result<Option<LedgerRow>> {
        read_made();
        let (journal, conn) = self.conn().await?;
        journal
            .reached(
                sqlx::query_as("SELECT * FROM eru_ledger WHERE uid = $1")
                    .bind(uid)
                    .fetch_optional(&mut **conn),
            )
            .await
            .map(Keyed::one)
    }

    /// This Eru's spec epochs that matter from `since` on: the one in force at `since` and every
    /// later one, oldest first.
    pub async fn epochs(&mut self, uid: &str, since: DateTime<Utc>) -> Result<Vec<EpochRow>> {
        read_made();
        let (journal, conn) = self.conn().await?;
        let mut rows: Vec<EpochRow> = journal
            .reached(
                sqlx::query_as::<_, Keyed<EpochRow>>(
                    "SELECT * FROM (SELECT * FROM spec_epochs WHERE uid = $1 AND effective_from <= $2
                                    ORDER BY effective_from DESC, generation DESC LIMIT 1) AS in_force
                     UNION ALL SELECT * FROM spec_epochs WHERE uid = $1 AND effective_from > $2",
                )
                .bind(uid)
                .bind(ts(since))
                .fetch_all(&mut **conn),
            )
            .await
            .map(Keyed::all)?;
        rows.sort_by(|a, b| (&a.effective_from, a.generation).cmp(&(&b.effective_from, b.generation)));
        Ok(rows)
    }

    /// This object's restart still in progress, if any.
    pub async fn open_restart(&mut self, uid: &str) -> Result<Option<RestartRow>> {
        read_made();
        let (journal, conn) = self.conn().await?;
        journal.reached(
            sqlx::query_as(
                "SELECT * FROM restarts WHERE uid = $1 AND outcome = 'in_progress' ORDER BY slot DESC LIMIT 1",
            )
            .bind(uid)
            .fetch_optional(&mut **conn),
        )
        .await
        .map(Keyed::one)
    }

    /// The restart recorded for this object's slot, if any.
    pub async fn restart(&mut self, uid: &str, slot: DateTime<Utc>) -> Result<Option<RestartRow>> {
        read_made();
        let (journal, conn) = self.conn().await?;
        journal
            .reached(
                sqlx::query_as("SELECT * FROM restarts WHERE uid = $1 AND slot = $2")
                    .bind(uid)
                    .bind(ts(slot))
                    .fetch_optional(&mut **conn),
            )
            .await
            .map(Keyed::one)
    }

    /// The manual run of this Eru's `token`, if the journal has it.
    pub async fn manual_run(&mut self, uid: &str, token: &str) -> Result<Option<RunRow>> {
        read_made();
        let (journal, conn) = self.conn().await?;
        journal
            .reached(
                sqlx::query_as("SELECT * FROM manual_runs WHERE uid = $1 AND token = $2")
                    .bind(uid)
                    .bind(token)
                    .fetch_optional(&mut **conn),
            )
            .await
            .map(Keyed::one)
    }

    /// This Eru's manual run in progress, if any (at most one: a run starts only when none is).
    pub async fn open_manual_run(&mut self, uid: &str) -> Result<Option<RunRow>> {
        read_made();
        let (journal, conn) = self.conn().await?;
        journal.reached(
            sqlx::query_as(
                "SELECT * FROM manual_runs WHERE uid = $1 AND outcome = 'in_progress' ORDER BY id DESC LIMIT 1",
            )
            .bind(uid)
            .fetch_optional(&mut **conn),
        )
        .await
        .map(Keyed::one)
    }

    /// This Eru's latest pause on failure, if it ever paused.
    pub async fn latest_pause(&mut self, uid: &str) -> Result<Option<PauseRow>> {
        read_made();
        let (journal, conn) = self.conn().await?;
        journal
            .reached(
                sqlx::query_as("SELECT * FROM failure_pauses WHERE uid = $1 ORDER BY since DESC LIMIT 1")
                    .bind(uid)
                    .fetch_optional(&mut **conn),
            )
            .await
            .map(Keyed::one)
    }

    /// This Eru's latest `limit` restarts whose patch landed and that ended (succeeded, failed or
    /// abandoned), decided at or after `after` if given (a resume: a restart decided in the pass
    /// that resumed counts), newest first.
    pub async fn ended_restarts(
        &mut self,
        uid: &str,
        after: Option<DateTime<Utc>>,
        limit: i64,
    ) -> Result<Vec<EndedRow>> {
        read_made();
        let (journal, conn) = self.conn().await?;
        let rows = journal
            .reached(
                sqlx::query_as(
                    "SELECT slot, outcome, reason FROM restarts
                     WHERE uid = $1 AND patched_at IS NOT NULL
                       AND outcome IN ('succeeded', 'failed', 'abandoned')
                       AND ($2 IS NULL OR decided_at >= $2)
                     ORDER BY slot DESC LIMIT $3",
                )
                .bind(uid)
                .bind(after.map(ts))
                .bind(limit)
                .fetch_all(&mut **conn),
            )
            .await?;
        Ok(Keyed::all(rows))
    }

    /// The operator runs that were alive at or after `since`, and the last one before it (whose
    /// heartbeat starts a downtime), oldest first. Bounded by what happened since `since`.
    /// Kept between passes until this process commits ([`downtime`](super::downtime)).
    pub async fn runs_since(&mut self, since: DateTime<Utc>) -> Result<Vec<OperatorRun>> {
        let kept = &self.journal.downtime;
        if let Some(runs) = kept.runs_since(since) {
            return Ok(runs);
        }
        let writes = kept.writes();
        read_made();
        let (journal, conn) = self.conn().await?;
        let mut runs: Vec<OperatorRun> = journal
            .reached(
                sqlx::query_as::<_, Keyed<OperatorRun>>(
                    "SELECT * FROM (SELECT * FROM operator_runs WHERE heartbeat_at < $1
                                    ORDER BY heartbeat_at DESC, id DESC LIMIT 1) AS before
                     UNION ALL SELECT * FROM operator_runs WHERE heartbeat_at >= $1",
                )
                .bind(ts(since))
                .fetch_all(&mut **conn),
            )
            .await
            .map(Keyed::all)?;
        runs.sort_by(|a, b| (&a.started_at, a.id).cmp(&(&b.started_at, b.id)));
        kept.keep_runs(writes, since, &runs);
        Ok(runs)
    }

    /// The journal outages that ended after `since` (those that can hold a slot after it), oldest
    /// first. Bounded by what happened since `since`.
    /// Kept between passes until this process commits ([`downtime`](super::downtime)).
    pub async fn outages_since(&mut self, since: DateTime<Utc>) -> Result<Vec<OutageRow>> {
        let kept = &self.journal.downtime;
        if let Some(outages) = kept.outages_since(since) {
            return Ok(outages);
        }
        let writes = kept.writes();
        read_made();
        let (journal, conn) = self.conn().await?;
        let outages = journal
            .reached(
                sqlx::query_as("SELECT * FROM journal_outages WHERE ended_at > $1 ORDER BY started_at, id")
                    .bind(ts(since))
                    .fetch_all(&mut **conn),
            )
            .await
            .map(Keyed::all)?;
        kept.keep_outages(writes, since, &outages);
        Ok(outages)
    }

    /// What an Eru's status shows of its history: its ledger row, latest restart and latest slot
    /// records.
    pub async fn eru_summary(&mut self, uid: &str) -> Result<EruSummary> {
        let ledger = self.ledger(uid).await?;
        let last_slot = ledger.as_ref().and_then(|l| l.last_restart_slot);
        let last_restart = match last_slot {
            Some(slot) => self.restart(uid, *slot).await?,
            None => None,
        };
        let recent = self.recent(uid).await?;
        let last_run = self.last_manual_run(uid).await?;
        Ok(EruSummary {
            ledger,
            last_restart,
            recent,
            last_run,
        })
    }

    /// This Eru's latest slot records, newest slot first, at most [`RECENT`]: a range of the
    /// (uid, last_slot) index, so a pass never sorts an Eru's whole history (a 5-second schedule
    /// journals 17,280 records a day).
    pub async fn recent(&mut self, uid: &str) -> Result<Vec<SlotRecordRow>> {
        read_made();
        let (journal, conn) = self.conn().await?;
        journal
            .reached(
                sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "{SLOT_RECORDS} AND s.uid = $1 ORDER BY s.last_slot DESC, s.slot DESC LIMIT {RECENT}"
                )))
                .bind(uid)
                .fetch_all(&mut **conn),
            )
            .await
            .map(Keyed::all)
    }

    /// This Eru's latest manual run, if any.
    pub async fn last_manual_run(&mut self, uid: &str) -> Result<Option<RunRow>> {
        read_made();
        let (journal, conn) = self.conn().await?;
        journal
            .reached(
                sqlx::query_as("SELECT * FROM manual_runs WHERE uid = $1 ORDER BY id DESC LIMIT 1")
                    .bind(uid)
                    .fetch_optional(&mut **conn),
            )
            .await
            .map(Keyed::one)
    }
}
