//! The journal's queries: what a reconcile reads (cursor, open restart, summary) and the listings
//! of the HTTP API and `eru-operator history`.

use chrono::{DateTime, Utc};
use sqlx::{AnyPool, Arguments, any::AnyArguments};

use super::*;

impl Journal {
    /// [`Reader::ledger`] on a connection of its own.
    pub async fn ledger(&self, uid: &str) -> Result<Option<LedgerRow>> {
        self.reader().ledger(uid).await
    }

    /// [`Reader::epochs`] on a connection of its own.
    pub async fn epochs(&self, uid: &str, since: DateTime<Utc>) -> Result<Vec<EpochRow>> {
        self.reader().epochs(uid, since).await
    }

    /// [`Reader::outages_since`] on a connection of its own.
    pub async fn outages_since(&self, since: DateTime<Utc>) -> Result<Vec<OutageRow>> {
        self.reader().outages_since(since).await
    }

    /// [`Reader::restart`] on a connection of its own.
    pub async fn restart(&self, uid: &str, slot: DateTime<Utc>) -> Result<Option<RestartRow>> {
        self.reader().restart(uid, slot).await
    }

    /// [`Reader::open_restart`] on a connection of its own.
    pub async fn open_restart(&self, uid: &str) -> Result<Option<RestartRow>> {
        self.reader().open_restart(uid).await
    }

    /// Every restart still in progress (of the objects in `namespace`, or of all).
    pub async fn open_restarts(&self, namespace: Option<&str>) -> Result<Vec<RestartRow>> {
        Ok(Keyed::all(
            sqlx::query_as(
                "SELECT * FROM restarts WHERE outcome = 'in_progress' AND ($1 IS NULL OR namespace = $1)
                 ORDER BY id",
            )
            .bind(namespace)
            .fetch_all(&self.pool)
            .await?,
        ))
    }

    /// [`Reader::eru_summary`] on a connection of its own.
    pub async fn eru_summary(&self, uid: &str) -> Result<EruSummary> {
        self.reader().eru_summary(uid).await
    }

    /// [`Reader::recent`] on a connection of its own.
    pub async fn recent(&self, uid: &str) -> Result<Vec<SlotRecordRow>> {
        self.reader().recent(uid).await
    }

    /// Journaled transitions, newest first (by id), `limit + 1` rows at most.
    pub async fn transitions(&self, f: &Filter) -> Result<Vec<TransitionRow>> {
        let conditions = [
            ("kind = ", &f.kind),
            ("namespace = ", &f.namespace),
            ("name = ", &f.name),
            ("at >= ", &f.since),
            ("at < ", &f.until),
        ];
        let columns = "SELECT id, kind, namespace, name, uid, from_state, to_state, event, at, detail \
                       FROM transitions WHERE true";
        page(&self.pool, columns, &conditions, f).await
    }

    /// Journaled restarts, newest first (by id), `limit + 1` rows at most; time bounds apply to
    /// `decided_at`.
    pub async fn restarts(&self, f: &Filter) -> Result<Vec<RestartRow>> {
        let conditions = [
            ("namespace = ", &f.namespace),
            ("name = ", &f.name),
            ("uid = ", &f.uid),
            ("target = ", &f.target),
            ("outcome = ", &f.outcome),
            ("decided_at >= ", &f.since),
            ("decided_at < ", &f.until),
        ];
        page(&self.pool, "SELECT * FROM restarts WHERE true", &conditions, f).await
    }

    /// Journaled missed and skipped slots, newest first (by id), `limit + 1` rows at most; time
    /// bounds apply to the slots a row stands for.
    pub async fn missed(&self, f: &Filter) -> Result<Vec<SlotRow>> {
        let conditions = [
            ("namespace = ", &f.namespace),
            ("name = ", &f.name),
            ("uid = ", &f.uid),
            ("target = ", &f.target),
            ("reason = ", &f.reason),
            ("last_slot >= ", &f.since),
            ("slot < ", &f.until),
        ];
        page(
            &self.pool,
            "SELECT * FROM slots WHERE result != 'fired'",
            &conditions,
            f,
        )
        .await
    }
}

impl Journal {
    /// The rows an audit of `[since, until)` reads, of the Erus `namespace`/`name` (all if
    /// `None`), of slots on `target` (all if `None`), as `reading` asks — all in one read
    /// transaction, so the operator's writes meanwhile cannot make a slot look unaccounted (its
    /// cursor read before its record was written) or a counter look short of the rows.
    /// (SQLite's WAL reads one snapshot per transaction; PostgreSQL needs REPEATABLE READ for
    /// that.)
    pub async fn audit_rows(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        object: (Option<&str>, Option<&str>),
        target: Option<&str>,
        reading: AuditReading,
    ) -> Result<AuditRows> {
        let AuditReading {
            cap,
            totals,
            records: whole,
        } = reading;
        let (namespace, name) = object;
        let mut tx = self.pool.begin().await?;
        if self.backend == Backend::Postgres {
            sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                .execute(&mut *tx)
                .await?;
        }
        let ledgers = sqlx::query_as::<_, Keyed<LedgerRow>>(
            "SELECT * FROM eru_ledger WHERE ($1 IS NULL OR namespace = $1) AND ($2 IS NULL OR name = $2)
             ORDER BY namespace, name, uid",
        )
        .bind(namespace)
        .bind(name)
        .fetch_all(&mut *tx)
        .await?;
        let epochs = sqlx::query_as::<_, Keyed<EpochRow>>(
            "SELECT * FROM spec_epochs WHERE effective_from < $1 ORDER BY uid, effective_from",
        )
        .bind(ts(until))
        .fetch_all(&mut *tx)
        .await?;
        let filter = window::WindowFilter {
            since,
            until,
            namespace,
            name,
            target,
            limit: cap + 1,
        };
        let (records, tallies, truncated) = window_records(&mut tx, self.backend, &filter, whole).await?;
        let open = sqlx::query_as::<_, Keyed<RestartRow>>(
            "SELECT * FROM restarts WHERE outcome = 'in_progress' AND ($1 IS NULL OR namespace = $1)
             ORDER BY id",
        )
        .bind(namespace)
        .fetch_all(&mut *tx)
        .await?;
        let (runs, outages) = operator_rows(&mut tx, since, until).await?;
        let totals = match totals {
            false => None,
            true => Some(counted_by_eru(&mut tx, namespace, name).await?),
        };
        let outbox = super::outbox::outbox_facts_on(&mut tx, namespace).await?;
        tx.commit().await?;
        Ok(AuditRows {
            ledgers: Keyed::all(ledgers),
            epochs: Keyed::all(epochs),
            records,
            tallies,
            truncated,
            open: Keyed::all(open),
            runs,
            outages,
            totals,
            outbox,
        })
    }

    /// Every slot's ledger record (fired, missed, skipped), newest first (by id), `limit + 1`
    /// rows at most, each with its slot's restart attempt if there was one; time bounds apply to
    /// the slots a row stands for.
    pub async fn slot_records(&self, f: &Filter) -> Result<Vec<SlotRecordRow>> {
        let conditions = [
            ("s.namespace = ", &f.namespace),
            ("s.name = ", &f.name),
            ("s.uid = ", &f.uid),
            ("s.target = ", &f.target),
            ("s.result = ", &f.result),
            ("s.reason = ", &f.reason),
            ("s.last_slot >= ", &f.since),
            ("s.slot < ", &f.until),
        ];
        page_by(&self.pool, SLOT_RECORDS, &conditions, f, "s.id").await
    }
}

/// Slot records with their slot's restart attempt, up to a WHERE clause that takes `AND ...`.
pub(super) const SLOT_RECORDS: &str = "SELECT s.*, r.decided_at AS restart_decided_at, r.patched_at AS restart_patched_at, \
                            r.finished_at AS restart_finished_at, r.outcome AS restart_outcome, \
                            r.reason AS restart_reason, r.attempts AS restart_attempts, \
                            r.reverted_at AS restart_reverted_at \
                            FROM slots s LEFT JOIN restarts r ON r.uid = s.uid AND r.slot = s.slot WHERE true";

/// A newest-first page: `select` (which ends in a WHERE clause), a condition for each filter
/// given, the cursor, the limit. A filter not given is left out of the SQL rather than written
/// `($1 IS NULL OR column = $1)`, which no index can serve: so a listing of one Eru is a range of
/// the `(name, namespace, id)` indexes, not a scan of every row.
///
/// The placeholders are numbered here (`$1`, `$2`, ...): `QueryBuilder<Any>` writes `?`, which
/// SQLite takes and PostgreSQL does not.
async fn page<T>(
    pool: &AnyPool,
    select: &str,
    conditions: &[(&str, &Option<String>)],
    f: &Filter,
) -> Result<Vec<T>>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::any::AnyRow> + Send + Unpin,
{
    page_by(pool, select, conditions, f, "id").await
}

/// [`page`], keyed by the column `id` (qualified in a join).
async fn page_by<T>(
    pool: &AnyPool,
    select: &str,
    conditions: &[(&str, &Option<String>)],
    f: &Filter,
    id: &str,
) -> Result<Vec<T>>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::any::AnyRow> + Send + Unpin,
{
    let mut sql = String::from(select);
    let mut args = AnyArguments::default();
    let mut bind = |sql: &mut String, value: Bound| -> Result<()> {
        match value {
            Bound::Text(text) => args.add(text),
            Bound::Integer(n) => args.add(n),
        }
        .map_err(sqlx::Error::Encode)?;
        sql.push_str(&format!("${}", args.len()));
        Ok(())
    };
    for (condition, value) in conditions {
        if let Some(value) = value {
            sql.push_str(" AND ");
            sql.push_str(condition);
            bind(&mut sql, Bound::Text(value.clone()))?;
        }
    }
    if let Some(namespaces) = &f.namespaces {
        // the same table qualifier as the id column (`s.` in a join)
        let column = format!("{}namespace", id.strip_suffix("id").unwrap_or_default());
        if namespaces.is_empty() {
            sql.push_str(" AND 1 = 0");
        } else {
            sql.push_str(&format!(" AND {column} IN ("));
            for (i, namespace) in namespaces.iter().enumerate() {
                if i > 0 {
                    sql.push_str(", ");
                }
                bind(&mut sql, Bound::Text(namespace.clone()))?;
            }
            sql.push(')');
        }
    }
    if let Some(before) = f.before {
        sql.push_str(&format!(" AND {id} < "));
        bind(&mut sql, Bound::Integer(before))?;
    }
    sql.push_str(&format!(" ORDER BY {id} DESC LIMIT "));
    bind(&mut sql, Bound::Integer(i64::from(f.limit) + 1))?;
    Ok(Keyed::all(
        sqlx::query_as_with::<_, Keyed<T>, _>(sqlx::AssertSqlSafe(sql), args)
            .fetch_all(pool)
            .await?,
    ))
}

/// A value bound to a listing's placeholder.
enum Bound {
    Text(String),
    Integer(i64),
}

/// The operator runs of `[since, until)` (and the last one before it) and the journal outages in
/// it, oldest first, in the audit's transaction.
async fn operator_rows(
    tx: &mut sqlx::AnyConnection,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<(Vec<OperatorRun>, Vec<OutageRow>)> {
    let mut runs = sqlx::query_as::<_, Keyed<OperatorRun>>(
        "SELECT * FROM (SELECT * FROM operator_runs WHERE heartbeat_at < $1
                        ORDER BY heartbeat_at DESC, id DESC LIMIT 1) AS before
         UNION ALL SELECT * FROM operator_runs WHERE heartbeat_at >= $1",
    )
    .bind(ts(since))
    .fetch_all(&mut *tx)
    .await
    .map(Keyed::all)?;
    runs.retain(|r| *r.started_at < until);
    runs.sort_by(|a, b| (&a.started_at, a.id).cmp(&(&b.started_at, b.id)));
    let outages = sqlx::query_as::<_, Keyed<OutageRow>>(
        "SELECT * FROM journal_outages WHERE ended_at > $1 AND started_at < $2 ORDER BY started_at, id",
    )
    .bind(ts(since))
    .bind(ts(until))
    .fetch_all(&mut *tx)
    .await?;
    Ok((runs, Keyed::all(outages)))
}

/// Each Eru's slots in its rows over the whole journal: `(uid, fired, not fired)`, to
/// cross-check its running counters. The database keeps these sums as rows come and go
/// (`slot_totals`, migration 0014): one row an Eru, not a read of all of its rows.
async fn counted_by_eru(
    tx: &mut sqlx::AnyConnection,
    namespace: Option<&str>,
    name: Option<&str>,
) -> Result<Vec<(String, i64, i64)>> {
    let rows = sqlx::query(
        "SELECT t.uid, CAST(t.fired AS BIGINT), CAST(t.not_fired AS BIGINT)
         FROM slot_totals AS t JOIN eru_ledger AS g ON g.uid = t.uid
         WHERE ($1 IS NULL OR g.namespace = $1) AND ($2 IS NULL OR g.name = $2)",
    )
    .bind(namespace)
    .bind(name)
    .fetch_all(&mut *tx)
    .await?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
        .collect()
}

/// The window's records (read `filter.limit` = `cap + 1` at most), whole when `whole` (sorted by
/// Eru and slot) or counted by Eru; whether more than `cap` fell in the window.
async fn window_records(
    tx: &mut sqlx::AnyConnection,
    backend: Backend,
    filter: &window::WindowFilter<'_>,
    whole: bool,
) -> Result<(Vec<SlotRecordRow>, Vec<(String, Vec<TallyRow>)>, bool)> {
    let cap = filter.limit - 1;
    if whole {
        let mut records = window::records(tx, backend, filter).await?;
        let truncated = records.len() > cap;
        records.truncate(cap);
        records.sort_by(|a, b| {
            let (a, b) = (&a.record, &b.record);
            (&a.uid, a.slot, a.id).cmp(&(&b.uid, b.slot, b.id))
        });
        Ok((records, Vec::new(), truncated))
    } else {
        let mut tallies = window::tallies(tx, backend, filter).await?;
        let truncated = capped(&mut tallies, cap);
        Ok((Vec::new(), tallies, truncated))
    }
}

/// Keeps at most `cap` of the Erus' tallies (the window's query read `cap + 1` at most, in no
/// particular order), sorts each Eru's by slot and the Erus by uid; whether any was dropped.
fn capped(tallies: &mut Vec<(String, Vec<TallyRow>)>, cap: usize) -> bool {
    let mut left = cap;
    let mut truncated = false;
    for (_, rows) in tallies.iter_mut() {
        truncated |= rows.len() > left;
        rows.truncate(left);
        left -= rows.len();
        rows.sort_by_key(|r| (r.slot, r.id));
    }
    tallies.retain(|(_, rows)| !rows.is_empty());
    tallies.sort_by(|a, b| a.0.cmp(&b.0));
    truncated
}
