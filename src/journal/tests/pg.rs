//! The PostgreSQL side of the journal's tests: the server (`ERU_TEST_POSTGRES_URL`, which
//! hack/test.sh exports, else one server for this test binary, `hack/postgres.sh start --name
//! unit`, left running for the next run), a fresh database per test, and the tests only
//! PostgreSQL has: URLs, errors, collations, operators starting at once.

use std::{
    path::Path,
    process::Command,
    sync::{
        OnceLock,
        atomic::{AtomicU32, Ordering},
    },
};

use sqlx::{AnyConnection, Connection, Executor};

use super::*;

/// The test server's URL. Never skips: without a server the PostgreSQL tests fail and say how to
/// get one.
fn server() -> String {
    static SERVER: OnceLock<Result<String, String>> = OnceLock::new();
    SERVER
        .get_or_init(|| {
            if let Ok(url) = std::env::var("ERU_TEST_POSTGRES_URL")
                && !url.is_empty()
            {
                return Ok(url);
            }
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("hack/postgres.sh");
            let run = |args: &[&str]| {
                let out = Command::new(&script)
                    .args(args)
                    .output()
                    .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
                if out.status.success() {
                    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
                } else {
                    Err(format!(
                        "`{} {}` failed: {}",
                        script.display(),
                        args.join(" "),
                        String::from_utf8_lossy(&out.stderr).trim()
                    ))
                }
            };
            run(&["start", "--name", "unit"])?;
            run(&["url", "--name", "unit"])
        })
        .clone()
        .unwrap_or_else(|e| {
            panic!(
                "no PostgreSQL server for the journal's PostgreSQL tests: {e}\n\
                 set ERU_TEST_POSTGRES_URL to a server's URL, or run hack/test.sh (it starts one)"
            )
        })
}

/// `url` with its database (path) replaced by `database`, query kept.
fn with_database(url: &str, database: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a postgres:// URL");
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let query = rest.find('?').map_or("", |q| &rest[q..]);
    format!("{scheme}://{}/{database}{query}", &rest[..authority_end])
}

/// `host:port` of the test server.
fn host_port() -> String {
    let url = server();
    let rest = url.split_once("://").expect("a postgres:// URL").1;
    let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
    authority
        .rsplit_once('@')
        .map_or(authority, |(_, h)| h)
        .to_string()
}

/// Runs `sql` on the server's own database.
pub(crate) async fn admin(sql: String) {
    sqlx::any::install_default_drivers();
    let mut conn = AnyConnection::connect(&server()).await.unwrap();
    conn.execute(sqlx::AssertSqlSafe(sql)).await.unwrap();
    let _ = conn.close().await;
}

/// A database of its own for one test, dropped when the test ends (also when it fails).
pub(crate) struct Database {
    pub journal: Journal,
    pub url: String,
    name: String,
}

impl Database {
    /// An empty database (no journal tables yet) and its URL.
    pub(crate) async fn empty() -> (String, String) {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "eru_test_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        // a leftover of an earlier run whose process had the same id
        admin(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
        admin(format!("CREATE DATABASE {name}")).await;
        let url = with_database(&server(), &name);
        (name, url)
    }

    /// A fresh, migrated journal database.
    pub async fn fresh() -> Self {
        let (name, url) = Self::empty().await;
        let journal = Journal::connect(&url).await.unwrap_or_else(|e| panic!("{e}"));
        Self { journal, url, name }
    }

    /// Closes the journal's connections, then drops the database.
    pub async fn close(self) {
        self.journal.close().await;
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        // Drop cannot await: a runtime of its own on a thread of its own, best effort
        let (server, name) = (server(), self.name.clone());
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let mut conn = AnyConnection::connect(&server).await.ok()?;
                let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                conn.execute(sqlx::AssertSqlSafe(sql)).await.ok()?;
                conn.close().await.ok()
            })
        })
        .join();
    }
}

#[tokio::test]
async fn connect_picks_the_backend_from_the_target() {
    let db = Database::fresh().await;
    assert_eq!(db.journal.backend(), Backend::Postgres);
    assert_eq!(Backend::Postgres.as_str(), "postgres");
    let postgresql = db.url.replacen("postgres://", "postgresql://", 1);
    let again = Journal::connect(&postgresql).await.unwrap();
    assert_eq!(again.backend(), Backend::Postgres);
    again.close().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("eru.db");
    let file = Journal::connect(path.to_str().unwrap()).await.unwrap();
    assert_eq!(file.backend(), Backend::Sqlite);
    assert_eq!(Backend::Sqlite.as_str(), "sqlite");
    assert!(path.exists());
    db.close().await;
}

#[tokio::test]
async fn a_journal_survives_reconnecting() {
    let db = Database::fresh().await;
    db.journal.append(&entry()).await.unwrap();
    db.journal.close().await;
    let again = Journal::connect(&db.url).await.unwrap();
    let all = Filter {
        limit: 5,
        ..Filter::default()
    };
    assert_eq!(again.restarts(&all).await.unwrap().len(), 1);
    assert_eq!(again.append(&entry()).await.unwrap(), Appended::default());
    again.close().await;
}

#[tokio::test]
async fn operators_starting_at_once_migrate_once() {
    let (name, url) = Database::empty().await;
    // four processes' worth of journals on one new database, at the same instant: the migrator's
    // advisory lock lets one create the tables, the others then find them
    let journals = futures::future::join_all((0..4).map(|_| Journal::connect(&url))).await;
    let journals: Vec<Journal> = journals
        .into_iter()
        .map(|j| j.unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations")
        .fetch_one(&journals[0].pool)
        .await
        .unwrap();
    let ours = sqlx::migrate!("./migrations/postgres").iter().count() as i64;
    assert_eq!(applied, ours, "each of this operator's migrations, once");
    for j in &journals {
        j.close().await;
    }
    drop(Database {
        journal: journals[0].clone(),
        url,
        name,
    });
}

#[tokio::test]
async fn errors_are_one_line_and_never_show_the_password() {
    let cases = [
        // no such database (or, on a server that checks passwords, a failed authentication)
        format!("postgres://postgres:hunter2%21@{}/eru_no_such_db", host_port()),
        // nothing listens there
        "postgresql://eru:hunter2%21@127.0.0.1:1/eru?password=hunter3".to_string(),
        // not a URL sqlx can use
        "postgres://eru:hunter2%21@127.0.0.1:5432/eru?sslmode=sometimes".to_string(),
    ];
    for url in cases {
        let err = Journal::connect(&url).await.unwrap_err();
        assert_eq!(err.category(), crate::error::Category::Journal);
        let text = err.to_string();
        assert!(!text.contains("hunter") && !text.contains('\n'), "{url}: {text}");
        assert!(
            text.starts_with("journal database postgres") && text.contains(":***@"),
            "{url}: {text}"
        );
        eprintln!("{text}");
    }
    let refused = Journal::connect("postgres://eru:pw@127.0.0.1:1/eru")
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("cannot reach the server"), "{refused}");
    let missing = Journal::connect(&format!("postgres://postgres@{}/eru_no_such_db", host_port()))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        missing.contains("eru_no_such_db") && missing.contains("does not exist")
            || missing.contains("authentication"),
        "{missing}"
    );
}

#[tokio::test]
async fn compared_text_is_byte_ordered_whatever_the_server_locale() {
    let db = Database::fresh().await;
    // free text and JSON, never compared or ordered, keep the database's collation
    let free = [
        "notifications.last_error",
        "notifications.note",
        "manual_runs.last_error",
        "operator_runs.instance",
        "operator_runs.version",
        "restarts.last_error",
        "slots.note",
        "spec_epochs.spec",
        "transitions.detail",
    ];
    let columns: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT table_name::text || '.' || column_name::text, collation_name::text
         FROM information_schema.columns
         WHERE table_schema = current_schema() AND data_type = 'text'
           AND table_name::text != '_sqlx_migrations'
         ORDER BY 1",
    )
    .fetch_all(&db.journal.pool)
    .await
    .unwrap();
    assert!(columns.len() > 40, "{columns:?}");
    for (column, collation) in columns {
        if !free.contains(&column.as_str()) {
            assert_eq!(collation.as_deref(), Some("C"), "{column}");
        }
    }
    db.close().await;
}

/// A TCP proxy to the test server on a loopback port of its own, which a test takes down (every
/// connection through it cut, new ones refused) and brings back on the same port: the database
/// gone away and back, as the journal sees it.
struct Proxy {
    port: u16,
    serving: Option<tokio::task::JoinHandle<()>>,
}

impl Proxy {
    async fn start() -> Self {
        let mut proxy = Self {
            port: 0,
            serving: None,
        };
        proxy.up().await;
        proxy
    }

    /// Listens again (on the same port after the first time).
    async fn up(&mut self) {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port))
            .await
            .unwrap();
        self.port = listener.local_addr().unwrap().port();
        let upstream = host_port();
        self.serving = Some(tokio::spawn(async move {
            // dropped with this task: every connection through the proxy ends with it
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((mut client, _)) = listener.accept().await {
                let upstream = upstream.clone();
                connections.spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        }));
    }

    /// Cuts every connection and refuses new ones.
    async fn down(&mut self) {
        if let Some(serving) = self.serving.take() {
            serving.abort();
            let _ = serving.await;
        }
    }

    /// `url` (of the test server) through this proxy.
    fn url(&self, url: &str) -> String {
        url.replacen(&host_port(), &format!("127.0.0.1:{}", self.port), 1)
    }
}

#[tokio::test]
async fn a_database_gone_away_is_an_outage_journaled_once_it_is_back() {
    let db = Database::fresh().await;
    let mut proxy = Proxy::start().await;
    let journal = Journal::connect(&proxy.url(&db.url)).await.unwrap();
    let run = journal.start_run("0.1.0", "test", Utc::now()).await.unwrap();
    journal.heartbeat(run, Utc::now()).await.unwrap();
    let last_worked = Utc::now();

    // gone: a pass's first read finds no connection (after the pool's 4 s), and that alone opens
    // the outage (no write needed: one shorter than a heartbeat would go unnoticed otherwise)
    proxy.down().await;
    let read = journal.ledger("u1").await;
    assert!(read.is_err(), "{read:?}");
    let (since, _) = journal
        .outage_now(Utc::now())
        .expect("a read that cannot reach the database opens an outage");
    assert!(since <= last_worked, "{since} {last_worked}");

    // back: the first write that works journals it
    proxy.up().await;
    let back = Utc::now();
    journal.append(&entry()).await.unwrap();
    assert_eq!(journal.outage_now(Utc::now()), None);
    let outages = journal
        .outages_since(since - chrono::Duration::days(1))
        .await
        .unwrap();
    assert_eq!(outages.len(), 1, "{outages:?}");
    assert_eq!(
        (outages[0].run_id, outages[0].started_at.to_string()),
        (Some(run), ts(since))
    );
    assert!(*outages[0].ended_at >= back);
    journal.close().await;
    db.close().await;
}

/// The HTTP API reads on a runtime of its own, which stops while the operator makes its last
/// write (its run's stop). Readers sharing the operator's pool left connections of that runtime
/// in it, and the stop drew one as the runtime shut down: "A Tokio 1.x context was found, but it
/// is being shutdown" (CI, the lost-journal e2e, once). Own readers keep each runtime's
/// connections out of the other's pool.
#[tokio::test]
async fn the_readers_connections_never_enter_the_operators_pool() {
    let db = Database::fresh().await;
    let run = db.journal.start_run("test", "reader", Utc::now()).await.unwrap();
    let before = db.journal.pool.size();
    let readers = db.journal.with_own_readers(2);
    // a thread and runtime of their own, while this runtime goes on serving its connections
    tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let all = Filter {
                limit: 5,
                ..Filter::default()
            };
            // two at once: a shared pool would open a connection in this runtime for one
            let (a, b) = tokio::join!(readers.restarts(&all), readers.restarts(&all));
            a.unwrap();
            b.unwrap();
            assert_eq!(
                readers.pool.size(),
                2,
                "the readers' two connections, in their own pool"
            );
        });
    })
    .await
    .unwrap();
    assert_eq!(
        db.journal.pool.size(),
        before,
        "no connection of the readers' runtime"
    );
    db.journal.stop_run(run, Utc::now()).await.unwrap();
    db.close().await;
}
