//! Upgrades from every schema: for each of this operator's migrations, on SQLite and on
//! PostgreSQL, a journal at that level holding representative rows of every table it then had
//! (its migrations, then rows written against its own columns) is migrated to the current schema
//! by the operator's own code. Every value it held is kept (the one renamed column named below);
//! every column the newer schema adds is named in [`ADDED`] and holds its default; the derived
//! tables (the ledger of 0003, the row sums of 0014) agree with the rows; and the audit's read of
//! the window returns each slot's record as the rows say.
//!
//! A new migration that adds a column must name it in [`ADDED`], and a new column needs a
//! representative value in [`value`]: the test fails until both are written.

use std::collections::BTreeMap;

use serde_json::Value;
use sqlx::{AnyConnection, Connection, Executor};

use super::*;

/// Columns the migrations add to a table that existed before them, by the version adding them:
/// the only columns a migrated row may have that it did not have before (each holds its default).
const ADDED: &[(i64, &str, &str)] = &[
    (3, "restarts", "patched_at"),
    (3, "restarts", "deadline_at"),
    (3, "restarts", "attempts"),
    (3, "restarts", "last_error"),
    (3, "restarts", "last_attempt_at"),
    (3, "restarts", "next_attempt_at"),
    (5, "slots", "note"),
    (11, "restarts", "reverted_by"),
    (11, "restarts", "reverted_at"),
    (11, "restarts", "silence_id"),
    (11, "restarts", "silence_until"),
    (11, "restarts", "silence_expired_at"),
    (12, "restarts", "landed_generation"),
];

/// A column renamed by a migration: `(version, table, old, new)`.
const RENAMED: &[(i64, &str, &str, &str)] = &[(3, "restarts", "started_at", "decided_at")];

/// Tables the migrations fill themselves (left to them, never written here).
const DERIVED: &[&str] = &["leader_fence", "slot_totals"];

fn time(m: u32, s: u32) -> String {
    format!("'2026-11-22T03:{m:02}:{s:02}.000Z'")
}

/// A representative value of `table.column` in its `row`-th row (SQL text). Row 0 of `slots` is
/// the fired slot 03:01 (its restart succeeded), row 1 the slot 03:02 skipped `suspended`.
fn value(table: &str, column: &str, row: usize) -> String {
    let fired = row == 0;
    let text = |s: &str| format!("'{s}'");
    match (table, column) {
        (_, "uid") => text("u1"),
        (_, "namespace") => text("ns"),
        (_, "name") => text("web"),
        (_, "target") => text("web"),
        ("transitions", "kind") => text("Eru"),
        ("slots", "slot" | "last_slot" | "evaluated_at") => time(1 + row as u32, 0),
        ("slots", "slot_count") => "1".into(),
        ("slots", "result") => text(if fired { "fired" } else { "skipped" }),
        ("slots", "reason") => text(if fired { "scheduled" } else { "suspended" }),
        ("slots", "window_start" | "window_end" | "note") => "NULL".into(),
        ("restarts", "slot" | "started_at" | "decided_at") => time(1, 0),
        ("restarts", "patched_at") => time(1, 1),
        ("restarts", "finished_at") => time(1, 30),
        ("restarts", "deadline_at") => time(6, 0),
        ("restarts", "outcome") => text("succeeded"),
        ("restarts", "attempts") => "0".into(),
        ("restarts", "landed_generation") => "2".into(),
        (
            "restarts",
            "reason" | "last_error" | "last_attempt_at" | "next_attempt_at" | "reverted_by" | "reverted_at"
            | "silence_id" | "silence_until" | "silence_expired_at",
        ) => "NULL".into(),
        ("operator_runs", "started_at") => "'2026-11-22T02:00:00.000Z'".into(),
        ("operator_runs", "heartbeat_at") => time(10, 0),
        ("operator_runs", "stopped_at") => "NULL".into(),
        ("operator_runs", "version") => text("0.1.0"),
        ("operator_runs", "instance") => text("old"),
        ("transitions", "observed") => text("1"),
        ("transitions", "from_state") => text("Waiting"),
        ("transitions", "to_state") => text("Restarting"),
        ("transitions", "event") => text("SlotDue"),
        ("transitions", "at") => time(1, 0),
        ("transitions", "detail") => text(r#"{"slot": "2026-11-22T03:01:00.000Z"}"#),
        ("spec_epochs", "generation") => "1".into(),
        ("spec_epochs", "effective_from" | "observed_at") => time(0, 30),
        ("spec_epochs", "spec") => text(
            r#"{"schedule": "* * * * *", "suspend": false, "startingDeadlineSeconds": 300, "target": "web"}"#,
        ),
        ("eru_ledger", "accounted_through" | "last_missed") => time(2, 0),
        ("eru_ledger", "missed_slots" | "fired_slots" | "succeeded") => "1".into(),
        ("eru_ledger", "failed" | "abandoned") => "0".into(),
        ("eru_ledger", "last_success") => time(1, 30),
        ("eru_ledger", "last_restart_slot") => time(1, 0),
        ("eru_ledger", "last_failure" | "deleted_at") => "NULL".into(),
        ("journal_outages", "run_id") => "1".into(),
        ("journal_outages", "started_at") => "'2026-11-22T02:30:00.000Z'".into(),
        ("journal_outages", "ended_at") => "'2026-11-22T02:30:12.000Z'".into(),
        ("notifications", "sink") => text("hook"),
        ("notifications", "key") => text("ns/web/2026-11-22T03:01:00.000Z/restart_succeeded"),
        ("notifications", "event") => text("restart_succeeded"),
        ("notifications", "slot" | "last_slot") => time(1, 0),
        ("notifications", "slot_count" | "attempts") => "1".into(),
        ("notifications", "created_at" | "next_attempt_at") => time(1, 30),
        ("notifications", "delivered_at") => time(1, 31),
        ("notifications", "reason" | "note" | "last_error" | "dropped_at" | "drop_reason") => "NULL".into(),
        ("manual_runs", "token") => text("fix-1"),
        ("manual_runs", "requested_by") => text("kubectl-eru"),
        ("manual_runs", "requested_at" | "decided_at") => "'2026-11-22T02:50:00.000Z'".into(),
        ("manual_runs", "deadline_at") => "'2026-11-22T02:55:00.000Z'".into(),
        ("manual_runs", "patched_at") => "'2026-11-22T02:50:01.000Z'".into(),
        ("manual_runs", "finished_at") => "'2026-11-22T02:51:00.000Z'".into(),
        ("manual_runs", "outcome") => text("succeeded"),
        ("manual_runs", "attempts") => "0".into(),
        ("manual_runs", "last_error" | "last_attempt_at" | "next_attempt_at" | "reason") => "NULL".into(),
        ("failure_pauses", "since") => time(3, 0),
        ("failure_pauses", "why") => text("2 restarts in a row ended failed"),
        ("failure_pauses", "resumed_at") => time(4, 0),
        ("failure_pauses", "resumed_by") => text("kubectl-eru"),
        _ => panic!("no representative value for {table}.{column}: add one to the upgrade test"),
    }
}

/// How many representative rows a table gets.
fn rows_of(table: &str) -> usize {
    if table == "slots" { 2 } else { 1 }
}

async fn tables(conn: &mut AnyConnection, backend: Backend) -> Vec<String> {
    let sql = match backend {
        Backend::Sqlite => {
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'
             AND name NOT LIKE '_sqlx%' ORDER BY name"
        }
        Backend::Postgres => {
            "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema()
             AND tablename NOT LIKE '_sqlx%' ORDER BY 1"
        }
    };
    sqlx::query_scalar(sql).fetch_all(&mut *conn).await.unwrap()
}

/// `table`'s columns, the generated key (`id`) aside.
async fn columns(conn: &mut AnyConnection, backend: Backend, table: &str) -> Vec<String> {
    let sql = match backend {
        Backend::Sqlite => "SELECT name FROM pragma_table_info($1) WHERE name != 'id' ORDER BY cid",
        Backend::Postgres => {
            "SELECT column_name::text FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = $1 AND column_name != 'id'
             ORDER BY ordinal_position"
        }
    };
    sqlx::query_scalar(sql)
        .bind(table)
        .fetch_all(&mut *conn)
        .await
        .unwrap()
}

/// Every row of every table as JSON objects (the generated key aside), by table.
async fn snapshot(conn: &mut AnyConnection, backend: Backend) -> BTreeMap<String, Vec<Value>> {
    let mut all = BTreeMap::new();
    for table in tables(conn, backend).await {
        let columns = columns(conn, backend, &table).await;
        let sql = match backend {
            Backend::Sqlite => {
                let pairs: Vec<String> = columns.iter().map(|c| format!("'{c}', \"{c}\"")).collect();
                format!("SELECT json_object({}) FROM \"{table}\"", pairs.join(", "))
            }
            Backend::Postgres => format!("SELECT (to_jsonb(t) - 'id')::text FROM \"{table}\" AS t"),
        };
        let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_all(&mut *conn)
            .await
            .unwrap();
        let rows = rows.iter().map(|r| serde_json::from_str(r).unwrap()).collect();
        all.insert(table, rows);
    }
    all
}

/// Writes the representative rows of every table at this level.
async fn fill(conn: &mut AnyConnection, backend: Backend) {
    for table in tables(conn, backend).await {
        if DERIVED.contains(&table.as_str()) {
            continue;
        }
        let columns = columns(conn, backend, &table).await;
        for row in 0..rows_of(&table) {
            let values: Vec<String> = columns.iter().map(|c| value(&table, c, row)).collect();
            let sql = format!(
                "INSERT INTO \"{table}\" ({}) VALUES ({})",
                columns.join(", "),
                values.join(", ")
            );
            conn.execute(sqlx::AssertSqlSafe(sql))
                .await
                .unwrap_or_else(|e| panic!("{table}: {e}"));
        }
    }
}

/// The rows after the migration hold every value they held before (a renamed column under its
/// new name); the columns they gained are the ones [`ADDED`] names after `level`, each null or
/// its default.
fn kept(level: i64, before: &BTreeMap<String, Vec<Value>>, after: &BTreeMap<String, Vec<Value>>) {
    for (table, rows) in before {
        let migrated = &after[table];
        assert_eq!(rows.len(), migrated.len(), "level {level}: {table}'s rows");
        for (old, new) in rows.iter().zip(migrated) {
            let (old, new) = (old.as_object().unwrap(), new.as_object().unwrap());
            for (column, value) in old {
                let renamed = RENAMED
                    .iter()
                    .find(|(v, t, from, _)| *v > level && t == table && from == column)
                    .map_or(column.as_str(), |r| r.3);
                assert_eq!(
                    new.get(renamed),
                    Some(value),
                    "level {level}: {table}.{column} kept"
                );
            }
            for (column, value) in new {
                if old.contains_key(column) || RENAMED.iter().any(|r| r.1 == table && r.3 == column) {
                    continue;
                }
                assert!(
                    ADDED
                        .iter()
                        .any(|(v, t, c)| *v > level && t == table && c == column),
                    "level {level}: {table}.{column} is new and not named in ADDED"
                );
                assert!(
                    value.is_null() || value.as_i64() == Some(0),
                    "level {level}: the new {table}.{column} of an old row is {value}, not its default"
                );
            }
        }
    }
}

/// The journal at every level of `migrator`, filled, migrated by [`Journal::connect`], checked.
/// `fresh` gives an empty database: its URL, and the journal's target (a file's path, a URL).
async fn every_level(
    backend: Backend,
    migrator: sqlx::migrate::Migrator,
    fresh: impl AsyncFn(i64) -> (String, String),
) {
    sqlx::any::install_default_drivers();
    for (i, migration) in migrator.migrations.iter().enumerate() {
        let level = migration.version;
        let (url, target) = fresh(level).await;
        let mut conn = AnyConnection::connect(&url).await.unwrap();
        let old = sqlx::migrate::Migrator {
            migrations: std::borrow::Cow::Owned(migrator.migrations[..=i].to_vec()),
            ..sqlx::migrate::Migrator::DEFAULT
        };
        old.run(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("level {level}: {e}"));
        fill(&mut conn, backend).await;
        let before = snapshot(&mut conn, backend).await;
        conn.close().await.unwrap();

        let journal = Journal::connect(&target)
            .await
            .unwrap_or_else(|e| panic!("level {level}: {e}"));
        let mut conn = journal.pool.acquire().await.unwrap();
        let after = snapshot(&mut conn, backend).await;
        drop(conn);
        kept(level, &before, &after);
        accounted(&journal, level).await;
        journal.close().await;
    }
}

/// What the current code reads of the migrated rows: the ledger (built from the rows by 0003 at
/// the older levels), the row sums (0014) agreeing with it, and the audit's read of 03:00–03:03:
/// the fired slot with its restart's outcome, the suspended one, and the spec epoch where the
/// level had one.
async fn accounted(journal: &Journal, level: i64) {
    let ledger = journal.ledger("u1").await.unwrap().expect("a ledger row");
    assert_eq!(
        (ledger.fired_slots, ledger.missed_slots, ledger.succeeded),
        (1, 1, 1),
        "level {level}: {ledger:?}"
    );
    let rows = journal
        .audit_rows(
            super::at(0),
            super::at(3),
            (Some("ns"), Some("web")),
            None,
            super::reading(100, true),
        )
        .await
        .unwrap();
    assert_eq!(
        rows.totals.clone().unwrap(),
        [("u1".to_string(), 1, 1)],
        "level {level}"
    );
    let mut records: Vec<_> = (rows.records.iter())
        .map(|r| {
            (
                r.record.slot.to_string(),
                r.record.result,
                r.record.reason,
                r.restart_outcome,
            )
        })
        .collect();
    records.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        records,
        [
            (
                ts(super::at(1)),
                SlotResult::Fired,
                Some(Reason::Scheduled),
                Some(Outcome::Succeeded)
            ),
            (
                ts(super::at(2)),
                SlotResult::Skipped,
                Some(Reason::Suspended),
                None
            ),
        ],
        "level {level}"
    );
    if level >= 3 {
        assert_eq!(rows.epochs.len(), 1, "level {level}: the epoch of the rows");
    }
}

#[tokio::test]
async fn a_sqlite_journal_at_every_level_migrates_keeping_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let fresh = async |level: i64| {
        let path = dir.path().join(format!("level-{level}.db"));
        (
            format!("sqlite://{}?mode=rwc", path.display()),
            path.display().to_string(),
        )
    };
    every_level(Backend::Sqlite, sqlx::migrate!("./migrations/sqlite"), fresh).await;
}

#[tokio::test]
async fn a_postgres_journal_at_every_level_migrates_keeping_every_row() {
    let made = std::sync::Mutex::new(Vec::new());
    let fresh = async |_: i64| {
        let (name, url) = super::pg::Database::empty().await;
        made.lock().unwrap().push(name);
        (url.clone(), url)
    };
    every_level(Backend::Postgres, sqlx::migrate!("./migrations/postgres"), fresh).await;
    for name in made.into_inner().unwrap() {
        super::pg::admin(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
    }
}
