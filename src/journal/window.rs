//! The slot records of an audit's window, read as one JSON document that the database builds
//! (`json_group_array` in SQLite, `json_agg` in PostgreSQL) instead of one row per record. sqlx's
//! SQLite driver hands every row from its worker thread to the reader through a 50-row channel,
//! copying each value twice on the way: at 24,000 records (a day of 1,000 hourly Erus) that was
//! most of an audit's time, where SQLite itself needs ~60 ms. The records are typed here, at the
//! journal's edge, as every other row is; one that does not read fails the read with its id.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::*;
use crate::{
    Error,
    vocab::{Outcome, Reason, SlotResult},
};

/// The record columns, in the order of [`Record`]'s fields.
const COLUMNS: &str = "id, uid, namespace, name, target, slot, last_slot, slot_count, result, reason, \
     window_start, window_end, evaluated_at, note, restart_decided_at, restart_patched_at, \
     restart_finished_at, restart_outcome, restart_reason, restart_attempts, restart_reverted_at";

/// One record as the database writes it into the array: [`COLUMNS`], in order. Times are
/// borrowed from the document (they never need unescaping), not copied into a `String` each.
#[derive(Deserialize)]
struct Record<'a>(
    i64,
    String,
    String,
    String,
    String,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    i64,
    String,
    Option<String>,
    #[serde(borrow)] Option<Cow<'a, str>>,
    #[serde(borrow)] Option<Cow<'a, str>>,
    #[serde(borrow)] Cow<'a, str>,
    Option<String>,
    #[serde(borrow)] Option<Cow<'a, str>>,
    #[serde(borrow)] Option<Cow<'a, str>>,
    #[serde(borrow)] Option<Cow<'a, str>>,
    Option<String>,
    Option<String>,
    Option<i64>,
    #[serde(borrow)] Option<Cow<'a, str>>,
);

/// The window's filter: `[since, until)`, an Eru's namespace and name, a target, and how many
/// records to read at most.
pub(super) struct WindowFilter<'a> {
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
    pub namespace: Option<&'a str>,
    pub name: Option<&'a str>,
    pub target: Option<&'a str>,
    pub limit: usize,
}

/// The window's records, each with its slot's restart: `$1`..`$6` are [`WindowFilter`]'s.
// no ORDER BY: it would steer the planner to an index giving that order (a scan of the whole
// journal) instead of the window's range of `slots_by_last_slot`
const WINDOW: &str = "SELECT s.*, r.decided_at AS restart_decided_at, r.patched_at AS restart_patched_at,
            r.finished_at AS restart_finished_at, r.outcome AS restart_outcome,
            r.reason AS restart_reason, r.attempts AS restart_attempts,
            r.reverted_at AS restart_reverted_at
     FROM slots s LEFT JOIN restarts r ON r.uid = s.uid AND r.slot = s.slot
     WHERE s.last_slot >= $1 AND s.slot < $2 AND ($3 IS NULL OR s.namespace = $3)
       AND ($4 IS NULL OR s.name = $4) AND ($5 IS NULL OR s.target = $5)
     LIMIT $6";

/// The backend's aggregate of `columns` into one JSON array (the SQL is fixed text).
fn json_array_of(backend: Backend, columns: &str) -> String {
    match backend {
        Backend::Sqlite => format!("json_group_array(json_array({columns}))"),
        Backend::Postgres => format!("COALESCE(json_agg(json_build_array({columns})), '[]')::text"),
    }
}

/// Runs `sql` with the window's filter bound.
fn bound<'q, O>(
    query: sqlx::query::QueryAs<'q, sqlx::Any, O, sqlx::any::AnyArguments>,
    f: &'q WindowFilter<'_>,
) -> sqlx::query::QueryAs<'q, sqlx::Any, O, sqlx::any::AnyArguments> {
    query
        .bind(ts(f.since))
        .bind(ts(f.until))
        .bind(f.namespace)
        .bind(f.name)
        .bind(f.target)
        .bind(f.limit as i64)
}

fn unreadable(e: serde_json::Error) -> Error {
    Error::JournalRow {
        row: "slots (an audit's window)".into(),
        reason: e.to_string(),
    }
}

/// The records of the window (each with its slot's restart, if any), in no particular order.
pub(super) async fn records(
    tx: &mut sqlx::AnyConnection,
    backend: Backend,
    f: &WindowFilter<'_>,
) -> Result<Vec<SlotRecordRow>> {
    let sql = format!("SELECT {} FROM ({WINDOW}) AS w", json_array_of(backend, COLUMNS));
    let (text,): (String,) = bound(sqlx::query_as(sqlx::AssertSqlSafe(sql)), f)
        .fetch_one(tx)
        .await?;
    let records: Vec<Record> = serde_json::from_str(&text).map_err(unreadable)?;
    records.into_iter().map(typed).collect()
}

/// What an audit counts of each record, [`TALLY_COLUMNS`] in order.
#[derive(Deserialize)]
struct Counted<'a>(
    i64,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    i64,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Option<Cow<'a, str>>,
    #[serde(borrow)] Option<Cow<'a, str>>,
    #[serde(borrow)] Option<Cow<'a, str>>,
    Option<String>,
    #[serde(borrow)] Option<Cow<'a, str>>,
    i64,
);

/// The columns of [`Counted`]: about half of the record's text (no names, no restart times).
const TALLY_COLUMNS: &str = "id, slot, last_slot, slot_count, result, reason, window_start, window_end, \
     note, restart_outcome, CASE WHEN restart_reverted_at IS NULL THEN 0 ELSE 1 END";

/// What an audit counts of the window's records, by Eru (uid; each Eru's in no particular
/// order): one JSON array per Eru, so no record carries its Eru's names.
pub(super) async fn tallies(
    tx: &mut sqlx::AnyConnection,
    backend: Backend,
    f: &WindowFilter<'_>,
) -> Result<Vec<(String, Vec<TallyRow>)>> {
    let sql = format!(
        "SELECT uid, {} FROM ({WINDOW}) AS w GROUP BY uid",
        json_array_of(backend, TALLY_COLUMNS)
    );
    let groups: Vec<(String, String)> = bound(sqlx::query_as(sqlx::AssertSqlSafe(sql)), f)
        .fetch_all(tx)
        .await?;
    (groups.into_iter())
        .map(|(uid, text)| {
            let rows: Vec<Counted> = serde_json::from_str(&text).map_err(unreadable)?;
            let rows = rows.into_iter().map(tallied).collect::<Result<_>>()?;
            Ok((uid, rows))
        })
        .collect()
}

fn tallied(t: Counted<'_>) -> Result<TallyRow> {
    let id = t.0;
    let time = |column: &str, text: Cow<'_, str>| journal_time(id, column, text);
    let maybe = |column: &str, text: Option<Cow<'_, str>>| text.map(|t| time(column, t)).transpose();
    Ok(TallyRow {
        id,
        slot: time("slot", t.1)?,
        last_slot: time("last_slot", t.2)?,
        slot_count: t.3,
        result: word(id, "result", &t.4, SlotResult::parse)?,
        reason: (t.5.as_deref())
            .map(|text| word(id, "reason", text, Reason::parse))
            .transpose()?,
        window_start: maybe("window_start", t.6)?,
        window_end: maybe("window_end", t.7)?,
        note: t.8,
        restart_outcome: (t.9.as_deref())
            .map(|text| word(id, "restart outcome", text, Outcome::parse))
            .transpose()?,
        reverted: t.10 != 0,
    })
}

/// A journal time of the row `id`'s `column`, or why the read fails.
fn journal_time(id: i64, column: &str, text: Cow<'_, str>) -> Result<Ts> {
    parse_ts(&text).map(Ts).ok_or_else(|| Error::JournalRow {
        row: format!("slots id {id}"),
        reason: format!("{column} is not a journal time: {text:?}"),
    })
}

/// A column of the journal's vocabulary, typed: a name outside it fails the read with the row's id.
fn word<T>(id: i64, column: &str, text: &str, parse: fn(&str) -> Option<T>) -> Result<T> {
    parse(text).ok_or_else(|| Error::JournalRow {
        row: format!("slots id {id}"),
        reason: format!("{column} {text:?} is not in the journal's vocabulary"),
    })
}

fn typed(r: Record<'_>) -> Result<SlotRecordRow> {
    let id = r.0;
    let time = |column: &str, text: Cow<'_, str>| journal_time(id, column, text);
    let maybe = |column: &str, text: Option<Cow<'_, str>>| text.map(|t| time(column, t)).transpose();
    Ok(SlotRecordRow {
        record: SlotRow {
            id,
            uid: r.1,
            namespace: r.2,
            name: r.3,
            target: r.4,
            slot: time("slot", r.5)?,
            last_slot: time("last_slot", r.6)?,
            slot_count: r.7,
            result: word(id, "result", &r.8, SlotResult::parse)?,
            reason: (r.9.as_deref())
                .map(|text| word(id, "reason", text, Reason::parse))
                .transpose()?,
            window_start: maybe("window_start", r.10)?,
            window_end: maybe("window_end", r.11)?,
            evaluated_at: time("evaluated_at", r.12)?,
            note: r.13,
        },
        restart_decided_at: maybe("restart_decided_at", r.14)?,
        restart_patched_at: maybe("restart_patched_at", r.15)?,
        restart_finished_at: maybe("restart_finished_at", r.16)?,
        restart_outcome: (r.17.as_deref())
            .map(|text| word(id, "restart outcome", text, Outcome::parse))
            .transpose()?,
        restart_reason: r.18,
        restart_attempts: r.19,
        restart_reverted_at: maybe("restart_reverted_at", r.20)?,
    })
}
