//! Benchmarks: `hack/bench.sh` (or `cargo bench --bench journal`) prints medians and ratios.
//! Under `cargo test` this runs once, tiny, as a smoke test (no timing claims in tests).
//!
//! - journal append of one reconcile's records (transition + slot + restart), WAL on disk, alone;
//! - durable transitions per second through the group-commit writer, 256 concurrent appenders;
//! - slot accounting of one bounded pass of a month-long per-second backlog;
//! - `/history` paging over 100k restarts: the first page vs a page 90k rows deep;
//! - one reconcile's journal work (ledger, epochs, open restart, runs, outages, append, summary) on a
//!   journal of 1 k rows and one of 1 M rows, side by side: the ratio shows it is indexed;
//! - `/history` pages over HTTP (the operator's own router on loopback) on the 1 M-row journal:
//!   p50 and p99 of the first page, a deep page, and a page filtered by Eru.
//!
//! Every journal figure is taken on SQLite (the lines above, as before) and then on PostgreSQL
//! (`ERU_TEST_POSTGRES_URL`, which hack/bench.sh sets, else `hack/postgres.sh start --name unit`),
//! printed side by side with p50, p99 and the PostgreSQL/SQLite ratio.

use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use eru_operator::{
    eru::core::ledger::{self, Epoch, EpochSpec, Span, account},
    history::{HistoryParams, history},
    journal::{Entry, Journal, NewRestart, NewSlot, NewTransition, ObjectKey, SlotResult},
};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn entry(i: i64) -> Entry {
    entry_of("u", i)
}

fn entry_of(uid: &str, i: i64) -> Entry {
    let object = ObjectKey {
        kind: "Eru",
        namespace: "ns".into(),
        name: format!("eru-{uid}"),
        uid: uid.into(),
    };
    let at = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + chrono::Duration::seconds(i);
    Entry {
        transitions: vec![NewTransition {
            object: object.clone(),
            observed: i.to_string(),
            from: "Waiting",
            to: "Restarting",
            event: "SlotDue",
            at,
            detail: serde_json::json!({}),
        }],
        slots: vec![NewSlot {
            object: object.clone(),
            target: "web".into(),
            slot: at,
            last_slot: at,
            slot_count: 1,
            result: SlotResult::Fired,
            reason: eru_operator::vocab::Reason::Scheduled,
            window: None,
            note: None,
            evaluated_at: at,
        }],
        restarts_decided: vec![NewRestart {
            object,
            target: "web".into(),
            slot: at,
            decided_at: at,
            deadline_at: at + chrono::Duration::seconds(300),
        }],
        ..Entry::default()
    }
}

/// Where a benchmark's journals live: SQLite files in a temporary folder, or databases of a
/// PostgreSQL server (created fresh, dropped at the end).
enum Backend {
    Sqlite(std::path::PathBuf),
    Postgres { server: String, databases: Vec<String> },
}

impl Backend {
    /// A new, empty journal called `name`.
    async fn journal(&mut self, name: &str) -> Journal {
        match self {
            Backend::Sqlite(dir) => Journal::open(&dir.join(format!("{name}.db"))).await.unwrap(),
            Backend::Postgres { server, databases } => {
                let database = format!("eru_bench_{name}");
                admin(
                    server,
                    &format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"),
                )
                .await;
                admin(server, &format!("CREATE DATABASE {database}")).await;
                databases.push(database.clone());
                Journal::connect(&with_database(server, &database))
                    .await
                    .unwrap_or_else(|e| panic!("{e}"))
            }
        }
    }

    async fn drop_databases(&self) {
        if let Backend::Postgres { server, databases } = self {
            for database in databases {
                admin(
                    server,
                    &format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"),
                )
                .await;
            }
        }
    }
}

/// What [`measure`] found on one backend: samples, so medians and p99 can be told.
struct Figures {
    appends: Vec<Duration>,
    grouped: f64,
    first: Vec<Duration>,
    deep: Vec<Duration>,
    rows: i64,
    at_small: Vec<Duration>,
    at_large: Vec<Duration>,
    rows_small: i64,
    rows_large: i64,
    http: Vec<(&'static str, Duration, Duration)>,
    fill: Duration,
}

#[tokio::main]
async fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let scale = if full { 1 } else { 100 };
    let dir = tempfile::tempdir().unwrap();
    let mut sqlite = Backend::Sqlite(dir.path().to_path_buf());
    let sqlite_figures = measure(&mut sqlite, full, scale).await;

    // 2. accounting: one bounded pass of a 30-day per-second backlog (no journal involved)
    let from = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let epochs = [Epoch {
        generation: 1,
        from,
        spec: EpochSpec {
            schedule: "* * * * * *".into(),
            time_zone: None,
            suspend: false,
            suspend_note: None,
            starting_deadline_seconds: 300,
            target: "web".into(),
            jitter_seconds: 0,
            blackouts: Vec::new(),
            dry_run: false,
        },
    }];
    let window = [(from, from + chrono::Duration::days(30))];
    let span = Span {
        downtime: &window,
        ..Span::new(from, from + chrono::Duration::days(30))
    };
    let passes = if full { 15 } else { 1 };
    let samples: Vec<Duration> = (0..passes)
        .map(|_| {
            let start = Instant::now();
            let a = account(&epochs, &span);
            assert!(a.more && a.records.len() == ledger::RECORD_CAP + 1);
            start.elapsed()
        })
        .collect();
    let pass = median(samples);

    let server = postgres_server();
    let mut postgres = Backend::Postgres {
        server: server.clone(),
        databases: Vec::new(),
    };
    let version = server_version(&server).await;
    let postgres_figures = measure(&mut postgres, full, scale).await;
    postgres.drop_databases().await;

    if !full {
        println!("bench smoke run ok on SQLite and PostgreSQL {version} (use hack/bench.sh for figures)");
        return;
    }
    let Figures {
        appends,
        grouped,
        first,
        deep,
        rows,
        at_small,
        at_large,
        rows_small,
        rows_large,
        http,
        ..
    } = &sqlite_figures;
    let (append, first, deep) = (
        median(appends.clone()),
        median(first.clone()),
        median(deep.clone()),
    );
    let (at_small, at_large) = (median(at_small.clone()), median(at_large.clone()));
    let (appends, tasks, total) = (appends.len(), TASKS, GROUPED / scale);
    let reconciles = sqlite_figures.at_small.len();
    let requests = REQUESTS;
    println!(
        "journal append alone (1 transition + 1 slot + 1 restart, WAL, synchronous=FULL): median {append:?} over {appends}"
    );
    println!(
        "group commit: {grouped:.0} durable transitions/s ({total} appends of 1 transition from {tasks} concurrent tasks, synchronous=FULL)"
    );
    println!(
        "slot accounting, one pass of a 30-day per-second backlog ({} slots, {} records): median {pass:?} over {passes} ({:.0} slots/ms)",
        ledger::SLOT_BUDGET,
        ledger::RECORD_CAP + 1,
        ledger::SLOT_BUDGET as f64 / pass.as_secs_f64() / 1000.0
    );
    println!(
        "/history page of 100 over {rows} restarts: first {first:?}, {}k rows deep {deep:?} (ratio deep/first {:.2})",
        rows * 9 / 10 / 1000,
        deep.as_secs_f64() / first.as_secs_f64()
    );
    println!(
        "one reconcile's journal work (ledger, epochs, open restart, runs, outages, append, summary): \
         median {at_small:?} at {rows_small} rows, {at_large:?} at {rows_large} rows \
         (ratio {:.2}, over {reconciles})",
        at_large.as_secs_f64() / at_small.as_secs_f64()
    );
    for (what, p50, p99) in http {
        println!(
            "/history over HTTP at {rows_large} rows, {what}: p50 {p50:?} p99 {p99:?} over {requests} requests"
        );
    }
    side_by_side(&sqlite_figures, &postgres_figures, &version);
}

/// The same figures on SQLite and PostgreSQL, one line each, with the PostgreSQL/SQLite ratio
/// (of medians; of throughput for group commit, where above 1 means PostgreSQL is faster).
fn side_by_side(sqlite: &Figures, postgres: &Figures, version: &str) {
    println!();
    println!(
        "SQLite (WAL, synchronous=FULL) vs PostgreSQL {version} (loopback, fsync and synchronous_commit on), same runs:"
    );
    println!(
        "{:<58} {:>22} {:>22} {:>9}",
        "", "sqlite p50 / p99", "postgres p50 / p99", "pg/sqlite"
    );
    let line = |what: String, s: &[Duration], p: &[Duration]| {
        let (s50, s99, p50, p99) = (median(s.to_vec()), p99_of(s), median(p.to_vec()), p99_of(p));
        println!(
            "{what:<58} {:>22} {:>22} {:>8.2}x",
            format!("{} / {}", short(s50), short(s99)),
            format!("{} / {}", short(p50), short(p99)),
            p50.as_secs_f64() / s50.as_secs_f64()
        );
    };
    line(
        format!("journal append alone ({} appends)", sqlite.appends.len()),
        &sqlite.appends,
        &postgres.appends,
    );
    println!(
        "{:<58} {:>22} {:>22} {:>8.2}x",
        format!("group commit, durable transitions/s ({TASKS} tasks)"),
        format!("{:.0}", sqlite.grouped),
        format!("{:.0}", postgres.grouped),
        postgres.grouped / sqlite.grouped
    );
    line(
        format!("/history page of 100 over {} restarts, first", sqlite.rows),
        &sqlite.first,
        &postgres.first,
    );
    line(
        format!("/history page of 100 over {} restarts, 90 % deep", sqlite.rows),
        &sqlite.deep,
        &postgres.deep,
    );
    line(
        format!("one reconcile's journal work at {} rows", sqlite.rows_small),
        &sqlite.at_small,
        &postgres.at_small,
    );
    line(
        format!("one reconcile's journal work at {} rows", sqlite.rows_large),
        &sqlite.at_large,
        &postgres.at_large,
    );
    for ((what, s50, s99), (_, p50, p99)) in sqlite.http.iter().zip(&postgres.http) {
        println!(
            "{:<58} {:>22} {:>22} {:>8.2}x",
            format!("/history over HTTP at {} rows, {what}", sqlite.rows_large),
            format!("{} / {}", short(*s50), short(*s99)),
            format!("{} / {}", short(*p50), short(*p99)),
            p50.as_secs_f64() / s50.as_secs_f64()
        );
    }
    println!(
        "(filling the {}-row journal took {:.1} s on SQLite, {:.1} s on PostgreSQL)",
        sqlite.rows_large,
        sqlite.fill.as_secs_f64(),
        postgres.fill.as_secs_f64()
    );
}

/// Concurrent appenders of the group-commit figure, and their appends at full scale.
const TASKS: i64 = 256;
const GROUPED: i64 = 40_000;
/// HTTP requests per URL at full scale.
const REQUESTS: usize = 500;

/// Every journal figure of this bench on `backend`.
async fn measure(backend: &mut Backend, full: bool, scale: i64) -> Figures {
    let journal = backend.journal("bench").await;

    // 1. append
    let appends = 2_000 / scale;
    let mut samples = Vec::with_capacity(appends as usize);
    for i in 0..appends {
        let e = entry(i);
        let start = Instant::now();
        journal.append(&e).await.unwrap();
        samples.push(start.elapsed());
    }

    // 1b. group commit: 256 concurrent appenders, one transition each per append
    let total = GROUPED / scale;
    let start = Instant::now();
    let mut handles = Vec::new();
    for t in 0..TASKS {
        let journal = journal.clone();
        handles.push(tokio::spawn(async move {
            let mut i = t;
            while i < total {
                let mut e = entry_of("gc", 10_000_000 + i);
                e.slots.clear();
                e.restarts_decided.clear();
                journal.append(&e).await.unwrap();
                i += TASKS;
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let grouped = total as f64 / start.elapsed().as_secs_f64();

    // 3. paging: first page vs deep page over many restarts
    let rows = 100_000 / scale;
    for chunk in (appends..appends + rows).collect::<Vec<_>>().chunks(1_000) {
        let mut batch = Entry::default();
        for &i in chunk {
            batch.restarts_decided.extend(entry(i).restarts_decided);
        }
        journal.append(&batch).await.unwrap();
    }
    use eru_operator::history::params::{Cursor, Limit, Restarts};
    let page = |cursor: Option<Cursor<Restarts>>| HistoryParams {
        limit: Some(Limit(100)),
        cursor,
        ..HistoryParams::default()
    };
    let deep_cursor = Cursor::<Restarts>::new((rows / 10).max(2));
    let mut first = Vec::new();
    let mut deep = Vec::new();
    for _ in 0..if full { 51 } else { 1 } {
        let start = Instant::now();
        assert_eq!(history(&journal, &page(None)).await.unwrap().items.len(), 100);
        first.push(start.elapsed());
        let start = Instant::now();
        history(&journal, &page(Some(deep_cursor))).await.unwrap();
        deep.push(start.elapsed());
    }
    journal.close().await;

    // 4. one reconcile's journal work at 1 k rows and at 1 M rows
    let rows_small = 1_000 / scale;
    let rows_large = 1_000_000 / scale;
    let small = filled(backend.journal("small").await, rows_small).await;
    let started = Instant::now();
    let large = filled(backend.journal("large").await, rows_large).await;
    let fill = started.elapsed();
    let reconciles = if full { 301 } else { 3 };
    let mut at_small = Vec::new();
    let mut at_large = Vec::new();
    for i in 0..reconciles {
        // alternate, so both see the same machine load
        at_small.push(reconcile_cost(&small, i).await);
        at_large.push(reconcile_cost(&large, i).await);
    }
    small.close().await;

    // 5. /history over HTTP on the large journal
    let requests = if full { REQUESTS } else { 3 };
    let http = over_http(large.clone(), requests, rows_large).await;
    large.close().await;
    Figures {
        appends: samples,
        grouped,
        first,
        deep,
        rows,
        at_small,
        at_large,
        rows_small,
        rows_large,
        http,
        fill,
    }
}

fn p99_of(samples: &[Duration]) -> Duration {
    let mut samples = samples.to_vec();
    samples.sort();
    samples[(samples.len() * 99).div_ceil(100) - 1]
}

/// A duration in µs or ms, 3 significant figures.
fn short(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1_000.0 {
        format!("{us:.0}µs")
    } else {
        format!("{:.2}ms", us / 1_000.0)
    }
}

/// The PostgreSQL server to measure: `ERU_TEST_POSTGRES_URL` (hack/bench.sh sets it), else the
/// one `hack/postgres.sh start --name unit` keeps (as the unit tests do).
fn postgres_server() -> String {
    if let Ok(url) = std::env::var("ERU_TEST_POSTGRES_URL")
        && !url.is_empty()
    {
        return url;
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("hack/postgres.sh");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(&script)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        assert!(
            out.status.success(),
            "no PostgreSQL for the bench: set ERU_TEST_POSTGRES_URL or run hack/bench.sh; `{} {}` failed: {}",
            script.display(),
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    run(&["start", "--name", "unit"]);
    run(&["url", "--name", "unit"])
}

/// `url` with its database (path) replaced by `database`, query kept.
fn with_database(url: &str, database: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a postgres:// URL");
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let query = rest.find('?').map_or("", |q| &rest[q..]);
    format!("{scheme}://{}/{database}{query}", &rest[..authority_end])
}

/// Runs `sql` on the server's own database.
async fn admin(server: &str, sql: &str) {
    use sqlx::{Connection, Executor};
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(server).await.unwrap();
    conn.execute(sqlx::AssertSqlSafe(sql.to_string())).await.unwrap();
    let _ = conn.close().await;
}

async fn server_version(server: &str) -> String {
    use sqlx::Connection;
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(server).await.unwrap();
    let version: String = sqlx::query_scalar("SELECT current_setting('server_version')")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let _ = conn.close().await;
    version
}

/// Serves the operator's HTTP API over `journal` on loopback and pages `/history` through it:
/// (what, p50, p99) for the first page, a page deep in the journal, and a page of one Eru.
async fn over_http(journal: Journal, requests: usize, rows: i64) -> Vec<(&'static str, Duration, Duration)> {
    let app = eru_operator::http::router(eru_operator::http::AppState {
        journal,
        metrics: eru_operator::metrics::Metrics::new(),
        readiness: eru_operator::runtime::Readiness::default(),
        blackouts: Default::default(),
        holds: Default::default(),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    // restart ids run 1..rows/3: a cursor a tenth of the way in pages 90 % deep
    let deep = format!("{base}/history?limit=100&cursor=h{:x}", (rows / 30).max(2));
    let urls = [
        ("first page of 100", format!("{base}/history?limit=100")),
        ("page of 100, 90 % deep", deep),
        (
            "page of 100 of one Eru",
            format!("{base}/history?limit=100&name=eru-other-7"),
        ),
    ];
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder().build().into();
        urls.into_iter()
            .map(|(what, url)| {
                let mut samples: Vec<Duration> = (0..requests)
                    .map(|_| {
                        let start = Instant::now();
                        let body = agent
                            .get(&url)
                            .call()
                            .unwrap()
                            .body_mut()
                            .read_to_string()
                            .unwrap();
                        assert!(body.starts_with("{\"items\":[{"), "{what}: {body:.200}");
                        start.elapsed()
                    })
                    .collect();
                samples.sort();
                let p99 = samples[(samples.len() * 99).div_ceil(100) - 1];
                (what, samples[samples.len() / 2], p99)
            })
            .collect()
    })
    .await
    .unwrap()
}

/// A journal of about `rows` rows (transitions, slots and restarts of 1,000 other Erus) plus
/// the Eru the reconciles are about.
async fn filled(journal: Journal, rows: i64) -> Journal {
    let per_entry = 3;
    let entries = rows / per_entry;
    let mut i = 0;
    while i < entries {
        let mut batch = Entry::default();
        for j in i..(i + 5_000).min(entries) {
            let e = entry_of(&format!("other-{}", j % 1_000), j);
            batch.transitions.extend(e.transitions);
            batch.slots.extend(e.slots);
            batch.restarts_decided.extend(e.restarts_decided);
        }
        journal.append(&batch).await.unwrap();
        i += 5_000;
    }
    journal
        .start_run(
            "bench",
            "bench",
            Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap(),
        )
        .await
        .unwrap();
    journal
}

/// What one Eru reconcile asks of the journal (as `eru::pass::observe`, `eru::pass::commit` and the status
/// step do), for its `i`-th slot.
async fn reconcile_cost(journal: &Journal, i: i64) -> Duration {
    let uid = "reconciled";
    let now = Utc.with_ymd_and_hms(2026, 6, 1, 0, 0, 0).unwrap() + chrono::Duration::seconds(i);
    let start = Instant::now();
    journal.outage_now(now);
    let ledger = journal.ledger(uid).await.unwrap();
    let since = ledger.and_then(|l| l.accounted_through).map_or(now, |t| *t);
    journal.epochs(uid, since).await.unwrap();
    journal.open_restart(uid).await.unwrap();
    journal.runs_since(since).await.unwrap();
    journal.outages_since(since).await.unwrap();
    let mut e = entry_of(uid, 1_000_000_000 + i);
    e.transitions[0].at = now;
    e.slots[0].slot = now;
    e.slots[0].last_slot = now;
    e.restarts_decided[0].slot = now;
    journal.append(&e).await.unwrap();
    journal.eru_summary(uid).await.unwrap();
    start.elapsed()
}
