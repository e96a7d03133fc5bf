//! The journal's writes: one reconcile's [`Entry`] in one transaction. Rows are keyed so a replay
//! adds nothing ([`Appended`] counts what was new), and each Eru's ledger row (cursor and
//! counters) changes by exactly what was added, in the same transaction.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::{columns::free_text, notices, *};
use crate::vocab::Outcome;

/// How one Eru's ledger row changes with what an entry added.
#[derive(Debug, Default)]
struct Delta {
    /// Namespace and name, when the entry knows them (a new row needs them).
    key: Option<(String, String)>,
    through: Option<DateTime<Utc>>,
    missed_slots: i64,
    last_missed: Option<DateTime<Utc>>,
    fired_slots: i64,
    succeeded: i64,
    failed: i64,
    abandoned: i64,
    last_success: Option<DateTime<Utc>>,
    last_failure: Option<DateTime<Utc>>,
    last_restart_slot: Option<DateTime<Utc>>,
    deleted_at: Option<DateTime<Utc>>,
}

fn later(a: Option<DateTime<Utc>>, b: DateTime<Utc>) -> Option<DateTime<Utc>> {
    Some(a.map_or(b, |a| a.max(b)))
}

/// The deltas of an entry, by uid.
#[derive(Debug, Default)]
struct Deltas(BTreeMap<String, Delta>);

impl Deltas {
    fn of(&mut self, uid: &str) -> &mut Delta {
        self.0.entry(uid.to_string()).or_default()
    }

    fn keyed(&mut self, object: &ObjectKey) -> &mut Delta {
        let delta = self.of(&object.uid);
        delta.key = Some((object.namespace.clone(), object.name.clone()));
        delta
    }
}

/// `a > b` for optional fixed-width time texts, portable SQL: the larger of the row's column and
/// the new value (NULL when both are).
const LATER: &str = "CASE WHEN eru_ledger.{c} IS NULL OR excluded.{c} > eru_ledger.{c} \
                     THEN coalesce(excluded.{c}, eru_ledger.{c}) ELSE eru_ledger.{c} END";

fn later_sql(column: &str) -> String {
    format!("{column} = {}", LATER.replace("{c}", column))
}

/// The ledger upsert: counters add up, times only move forward.
fn upsert_sql() -> String {
    let times = [
        "accounted_through",
        "last_missed",
        "last_success",
        "last_failure",
        "last_restart_slot",
        "deleted_at",
    ]
    .map(later_sql)
    .join(",\n  ");
    format!(
        "INSERT INTO eru_ledger (uid, namespace, name, accounted_through, missed_slots, last_missed,
           fired_slots, succeeded, failed, abandoned, last_success, last_failure, last_restart_slot, deleted_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
         ON CONFLICT (uid) DO UPDATE SET
           missed_slots = eru_ledger.missed_slots + excluded.missed_slots,
           fired_slots = eru_ledger.fired_slots + excluded.fired_slots,
           succeeded = eru_ledger.succeeded + excluded.succeeded,
           failed = eru_ledger.failed + excluded.failed,
           abandoned = eru_ledger.abandoned + excluded.abandoned,
           {times}"
    )
}

/// The same, for a row that must already exist (the entry knows only the uid): `$1` the uid,
/// the other values numbered as the upsert's less namespace and name.
fn update_sql() -> String {
    let time = |(column, n): (&str, u8)| {
        format!(
            "{column} = CASE WHEN {column} IS NULL OR ${n} > {column} THEN coalesce(${n}, {column}) ELSE {column} END"
        )
    };
    let times = [
        ("accounted_through", 2),
        ("last_missed", 4),
        ("last_success", 9),
        ("last_failure", 10),
        ("last_restart_slot", 11),
        ("deleted_at", 12),
    ]
    .map(time)
    .join(",\n  ");
    format!(
        "UPDATE eru_ledger SET
           missed_slots = missed_slots + $3, fired_slots = fired_slots + $5, succeeded = succeeded + $6,
           failed = failed + $7, abandoned = abandoned + $8,
           {times}
         WHERE uid = $1"
    )
}

/// Writes `entry` on `conn` (inside the caller's transaction); returns what was new. Each kind
/// of row is keyed, so what a replay writes again is not new; each Eru's ledger row then changes
/// by exactly what was.
pub(super) async fn append_on(conn: &mut sqlx::AnyConnection, entry: &Entry) -> Result<Appended> {
    let mut done = Appended::default();
    let mut deltas = Deltas::default();
    seed_on(conn, entry).await?;
    history_on(conn, entry, &mut done).await?;
    restarts_on(conn, entry, &mut done, &mut deltas).await?;
    finished_on(conn, entry, &mut done, &mut deltas).await?;
    slots_on(conn, entry, &mut done, &mut deltas).await?;
    done.runs = super::runs::runs_on(conn, entry).await?;
    done.pauses = super::pauses::pauses_on(conn, entry).await?;
    for s in &entry.silences {
        let query = match s {
            SilenceChange::Created { uid, slot, id, until } => sqlx::query(
                "UPDATE restarts SET silence_id = $3, silence_until = $4, silence_expired_at = NULL
                 WHERE uid = $1 AND slot = $2 AND (silence_id IS NULL OR silence_id <> $3)",
            )
            .bind(uid)
            .bind(ts(*slot))
            .bind(id)
            .bind(ts(*until)),
            SilenceChange::Expired { uid, slot, at } => sqlx::query(
                "UPDATE restarts SET silence_expired_at = $3
                 WHERE uid = $1 AND slot = $2 AND silence_id IS NOT NULL AND silence_expired_at IS NULL",
            )
            .bind(uid)
            .bind(ts(*slot))
            .bind(ts(*at)),
        };
        query.execute(&mut *conn).await?;
    }
    for r in &entry.reverts {
        done.reverts += sqlx::query(
            "UPDATE restarts SET reverted_by = $3, reverted_at = $4
             WHERE uid = $1 AND slot = $2 AND reverted_at IS NULL",
        )
        .bind(&r.uid)
        .bind(ts(r.slot))
        .bind(r.by.as_deref().map(free_text))
        .bind(ts(r.at))
        .execute(&mut *conn)
        .await?
        .rows_affected();
    }
    notices::unrecorded_on(conn, entry).await?;
    for (object, through) in &entry.advances {
        let delta = deltas.keyed(object);
        delta.through = later(delta.through, *through);
    }
    for (uid, at) in &entry.deleted {
        deltas.of(uid).deleted_at = Some(*at);
    }
    ledger_on(conn, deltas).await?;
    Ok(done)
}

/// A lost journal's ledger row, seeded from what the cluster remembers (once).
async fn seed_on(conn: &mut sqlx::AnyConnection, entry: &Entry) -> Result<()> {
    if let Some(seed) = &entry.seed {
        sqlx::query(
            "INSERT INTO eru_ledger (uid, namespace, name, accounted_through, missed_slots, last_missed,
               last_success, last_failure)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (uid) DO NOTHING",
        )
        .bind(&seed.object.uid)
        .bind(&seed.object.namespace)
        .bind(&seed.object.name)
        .bind(seed.accounted_through.map(ts))
        .bind(seed.missed_slots)
        .bind(seed.last_missed.map(ts))
        .bind(seed.last_success.map(ts))
        .bind(seed.last_failure.map(ts))
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// The transitions and spec epochs.
async fn history_on(conn: &mut sqlx::AnyConnection, entry: &Entry, done: &mut Appended) -> Result<()> {
    for t in &entry.transitions {
        done.transitions += sqlx::query(
            "INSERT INTO transitions (kind, namespace, name, uid, observed, from_state, to_state, event, at, detail)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
             ON CONFLICT (uid, observed, from_state, to_state, event) DO NOTHING",
        )
        .bind(t.object.kind)
        .bind(&t.object.namespace)
        .bind(&t.object.name)
        .bind(&t.object.uid)
        .bind(&t.observed)
        .bind(t.from)
        .bind(t.to)
        .bind(t.event)
        .bind(ts(t.at))
        .bind(t.detail.to_string())
        .execute(&mut *conn)
        .await?
        .rows_affected();
    }
    for e in &entry.epochs {
        done.epochs += sqlx::query(
            "INSERT INTO spec_epochs (uid, generation, effective_from, observed_at, spec)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (uid, generation) DO NOTHING",
        )
        .bind(&e.uid)
        .bind(e.generation)
        .bind(ts(e.effective_from))
        .bind(ts(e.observed_at))
        .bind(e.spec.to_string())
        .execute(&mut *conn)
        .await?
        .rows_affected();
    }
    Ok(())
}

/// The restarts decided, patched, and their failed attempts.
async fn restarts_on(
    conn: &mut sqlx::AnyConnection,
    entry: &Entry,
    done: &mut Appended,
    deltas: &mut Deltas,
) -> Result<()> {
    for r in &entry.restarts_decided {
        let added = sqlx::query(
            "INSERT INTO restarts (uid, namespace, name, target, slot, decided_at, deadline_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (uid, slot) DO NOTHING",
        )
        .bind(&r.object.uid)
        .bind(&r.object.namespace)
        .bind(&r.object.name)
        .bind(&r.target)
        .bind(ts(r.slot))
        .bind(ts(r.decided_at))
        .bind(ts(r.deadline_at))
        .execute(&mut *conn)
        .await?
        .rows_affected();
        done.restarts_decided += added;
        if added > 0 {
            let delta = deltas.keyed(&r.object);
            delta.through = later(delta.through, r.slot);
            delta.last_restart_slot = later(delta.last_restart_slot, r.slot);
        }
    }
    for p in &entry.restarts_patched {
        done.restarts_patched += sqlx::query(
            "UPDATE restarts SET patched_at = $3, landed_generation = $4
             WHERE uid = $1 AND slot = $2 AND patched_at IS NULL",
        )
        .bind(&p.uid)
        .bind(ts(p.slot))
        .bind(ts(p.patched_at))
        .bind(p.landed_generation)
        .execute(&mut *conn)
        .await?
        .rows_affected();
    }
    for a in &entry.attempts {
        // keyed by the attempt's time: a replayed attempt is not counted twice
        done.attempts += sqlx::query(
            "UPDATE restarts SET attempts = attempts + 1, last_error = $3, last_attempt_at = $4,
               next_attempt_at = $5
             WHERE uid = $1 AND slot = $2 AND outcome = 'in_progress'
               AND (last_attempt_at IS NULL OR last_attempt_at < $4)",
        )
        .bind(&a.uid)
        .bind(ts(a.slot))
        .bind(free_text(&a.error))
        .bind(ts(a.at))
        .bind(ts(a.next_attempt_at))
        .execute(&mut *conn)
        .await?
        .rows_affected();
    }
    Ok(())
}

/// The restarts' ends: how each went, counted once.
async fn finished_on(
    conn: &mut sqlx::AnyConnection,
    entry: &Entry,
    done: &mut Appended,
    deltas: &mut Deltas,
) -> Result<()> {
    for f in &entry.restarts_finished {
        let added = sqlx::query(
            "UPDATE restarts SET finished_at = $3, outcome = $4, reason = $5
             WHERE uid = $1 AND slot = $2 AND finished_at IS NULL",
        )
        .bind(&f.uid)
        .bind(ts(f.slot))
        .bind(ts(f.finished_at))
        .bind(f.outcome.as_str())
        .bind(f.reason.as_deref().map(free_text))
        .execute(&mut *conn)
        .await?
        .rows_affected();
        done.restarts_finished += added;
        if added > 0 {
            notices::finished_on(conn, entry, &f.uid, f.slot).await?;
            let delta = deltas.of(&f.uid);
            match f.outcome {
                Outcome::Succeeded => {
                    delta.succeeded += 1;
                    delta.last_success = later(delta.last_success, f.finished_at);
                }
                Outcome::Failed => {
                    delta.failed += 1;
                    delta.last_failure = later(delta.last_failure, f.finished_at);
                }
                Outcome::Abandoned => delta.abandoned += 1,
                // a dry run's restart: its slot is counted (skipped), nothing else; a restart
                // is never finished in progress
                Outcome::DryRun | Outcome::InProgress => {}
            }
        }
    }
    Ok(())
}

/// The slot records.
async fn slots_on(
    conn: &mut sqlx::AnyConnection,
    entry: &Entry,
    done: &mut Appended,
    deltas: &mut Deltas,
) -> Result<()> {
    for s in &entry.slots {
        let added = sqlx::query(
            "INSERT INTO slots (uid, namespace, name, target, slot, last_slot, slot_count, result, reason,
               window_start, window_end, evaluated_at, note)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (uid, slot) DO NOTHING",
        )
        .bind(&s.object.uid)
        .bind(&s.object.namespace)
        .bind(&s.object.name)
        .bind(&s.target)
        .bind(ts(s.slot))
        .bind(ts(s.last_slot))
        .bind(s.slot_count)
        .bind(s.result.as_str())
        .bind(s.reason)
        .bind(s.window.map(|w| ts(w.0)))
        .bind(s.window.map(|w| ts(w.1)))
        .bind(ts(s.evaluated_at))
        .bind(s.note.as_deref().map(free_text))
        .execute(&mut *conn)
        .await?
        .rows_affected();
        done.slots += added;
        if added > 0 {
            notices::slot_on(conn, entry, &s.object.uid, s.slot).await?;
            let delta = deltas.keyed(&s.object);
            delta.through = later(delta.through, s.last_slot);
            if s.result == SlotResult::Fired {
                delta.fired_slots += s.slot_count;
            } else {
                delta.missed_slots += s.slot_count;
                delta.last_missed = later(delta.last_missed, s.last_slot);
            }
        }
    }
    Ok(())
}

/// Each Eru's ledger row, changed by what the entry added (a new row needs its key).
async fn ledger_on(conn: &mut sqlx::AnyConnection, deltas: Deltas) -> Result<()> {
    let (upsert, update) = (upsert_sql(), update_sql());
    for (uid, d) in deltas.0 {
        let t = |v: Option<DateTime<Utc>>| v.map(ts);
        match d.key {
            Some((namespace, name)) => {
                sqlx::query(sqlx::AssertSqlSafe(upsert.as_str()))
                    .bind(&uid)
                    .bind(namespace)
                    .bind(name)
                    .bind(t(d.through))
                    .bind(d.missed_slots)
                    .bind(t(d.last_missed))
                    .bind(d.fired_slots)
                    .bind(d.succeeded)
                    .bind(d.failed)
                    .bind(d.abandoned)
                    .bind(t(d.last_success))
                    .bind(t(d.last_failure))
                    .bind(t(d.last_restart_slot))
                    .bind(t(d.deleted_at))
                    .execute(&mut *conn)
                    .await?;
            }
            None => {
                sqlx::query(sqlx::AssertSqlSafe(update.as_str()))
                    .bind(&uid)
                    .bind(t(d.through))
                    .bind(d.missed_slots)
                    .bind(t(d.last_missed))
                    .bind(d.fired_slots)
                    .bind(d.succeeded)
                    .bind(d.failed)
                    .bind(d.abandoned)
                    .bind(t(d.last_success))
                    .bind(t(d.last_failure))
                    .bind(t(d.last_restart_slot))
                    .bind(t(d.deleted_at))
                    .execute(&mut *conn)
                    .await?;
            }
        }
    }
    Ok(())
}

/// Moves the heartbeat of `run` to `at` on `conn` (inside the caller's transaction); only forward
/// (a batch of records may have committed after this heartbeat's instant was taken).
pub(super) async fn heartbeat_on(conn: &mut sqlx::AnyConnection, run: i64, at: DateTime<Utc>) -> Result<()> {
    sqlx::query("UPDATE operator_runs SET heartbeat_at = $1 WHERE id = $2 AND heartbeat_at < $1")
        .bind(ts(at))
        .bind(run)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Moves the last sign of life of `run` forward to `at` on `conn`, inside the transaction of a
/// batch of records it wrote: a run is known alive until the latest of its heartbeats and of
/// its commits, so the downtime after a crash starts at the last thing it journaled, never
/// before it (a heartbeat alone is up to an interval old).
pub(super) async fn alive_on(conn: &mut sqlx::AnyConnection, run: i64, at: DateTime<Utc>) -> Result<()> {
    sqlx::query("UPDATE operator_runs SET heartbeat_at = $1 WHERE id = $2 AND heartbeat_at < $1")
        .bind(ts(at))
        .bind(run)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Records on `conn` (inside the transaction of the write that ended it) that the journal took no
/// writes in `(since, until]`, as seen by `run`. Keyed by run and start: written once.
pub(super) async fn outage_on(
    conn: &mut sqlx::AnyConnection,
    run: Option<i64>,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO journal_outages (run_id, started_at, ended_at) VALUES ($1, $2, $3)
         ON CONFLICT (run_id, started_at) DO NOTHING",
    )
    .bind(run)
    .bind(ts(since))
    .bind(ts(until))
    .execute(&mut *conn)
    .await?;
    Ok(())
}
