//! Opening a journal: a SQLite file (the embedded default), an in-memory SQLite database, or a
//! PostgreSQL database named by a `postgres://` URL. All three give one pool type, `AnyPool`, so
//! every query of the journal is written once; what differs is set up here: SQLite's per-connection
//! PRAGMAs and integrity check, PostgreSQL's own migrations, and the errors' wording (a PostgreSQL
//! URL's password never reaches a message).

use std::{path::Path, str::FromStr, time::Duration};

use sqlx::{
    AnyConnection, AnyPool, Connection, Executor, Row,
    any::{AnyConnectOptions, AnyPoolOptions},
};

use super::{Journal, downtime, fence, writer};
use crate::{Error, Result};

/// Which database a journal is kept in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// A SQLite file (WAL, `synchronous=FULL`), or an in-memory SQLite database.
    Sqlite,
    /// A PostgreSQL database.
    Postgres,
}

impl Backend {
    /// `"sqlite"` or `"postgres"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// Pooled connections at most: the writer task's and the readers'. PostgreSQL gets more, its
/// readers and writer do not share one file's locks.
const SQLITE_CONNECTIONS: u32 = 4;
const POSTGRES_CONNECTIONS: u32 = 8;
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
/// A SQLite connection is a thread of this process: sqlx's ping before each acquire only asks that
/// thread to answer (it reads nothing of the file), a round trip per read that proves nothing
/// the read would not. A connection whose thread died (never seen) fails the statement that
/// uses it instead, which opens an outage as an unreachable journal does, and the ping on its
/// return drops it from the pool. (PostgreSQL keeps the ping: a server restart leaves pooled
/// connections dead.)
const SQLITE_TEST_BEFORE_ACQUIRE: bool = false;
/// A PostgreSQL server that is down makes every acquire wait for this long, reconnecting, before
/// the write fails: short enough that `/readyz` and `eru_journal_up` report the outage within a
/// few seconds (at 10 s a 10 s restart went unreported: the waits outlasted it), long enough
/// for a burst of passes sharing eight connections.
const POSTGRES_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(4);

/// Per-connection bounds of every PostgreSQL connection the operator works on (not the
/// migrations', which may rewrite a large table): no statement runs longer than 30 s, and a
/// transaction left idle for 30 s (its process frozen between two statements, or before its
/// commit) is ended by the server, releasing its locks — a new leader's writes wait for a frozen
/// one's at most that long. Longer than a lease (15 s by default): a leader frozen past its lease
/// that resumes still finds its transaction, and the fence (fence.rs) refuses its commit.
const POSTGRES_BOUNDS: [&str; 2] = [
    "SET statement_timeout = '30s'",
    "SET idle_in_transaction_session_timeout = '30s'",
];

/// Sets [`POSTGRES_BOUNDS`] on a new connection (one statement each: a prepared statement holds
/// one command).
fn bounded(conn: &mut AnyConnection) -> futures::future::BoxFuture<'_, std::result::Result<(), sqlx::Error>> {
    Box::pin(async move {
        for bound in POSTGRES_BOUNDS {
            conn.execute(bound).await?;
        }
        Ok(())
    })
}

/// Per-connection settings of every SQLite connection (`journal_mode=WAL` is a property of the
/// file, set once when it is opened). `SqliteConnectOptions` cannot reach an `AnyPool`, whose
/// options are a URL, so they are PRAGMAs run after each connect: a locked file is waited for up
/// to 5 s; every commit reaches the disk before anything it records is acted on (group commit
/// makes that cheap); temp tables stay in memory (the container's root filesystem is read-only).
const SQLITE_PRAGMAS: &str = "PRAGMA busy_timeout = 5000;
    PRAGMA foreign_keys = ON;
    PRAGMA synchronous = FULL;
    PRAGMA temp_store = MEMORY;";

/// What the readers' own connections add ([`Journal::with_own_readers`]): the file's pages read
/// through a memory map instead of a `pread` and a copy each. An audit's window (a day of 1,000
/// hourly Erus: 24,000 records, each fetched by rowid from the slots' index, and its restart's)
/// touches thousands of pages no 2 MB page cache keeps: the reads were three quarters of the
/// audit page's time (perf). The mapped pages are the kernel's page cache, shared and
/// reclaimable, not the process's heap (they show in RSS as file pages while in use).
const READER_PRAGMAS: &str = "PRAGMA mmap_size = 268435456;";

/// What the operator's own connections add (the passes' reads and the writer): a page cache of
/// 256 KiB each instead of SQLite's 2 MB. The passes' reads filled the four connections' caches
/// with 3.2 MB of glibc heap at 10,000 Erus (`malloc_stats`, 85 s after the start); 512 KiB
/// took it to 1.6 MB, 256 KiB to 1.3–1.4 MB (docs/performance.md); a page a pass misses is
/// read again from the kernel's page cache. Not mapped, as the readers' are: on a
/// mapped file a disk's read error is a SIGBUS that ends the process, where a `pread`'s is an
/// error the writer records as a journal outage.
const OPERATOR_PRAGMAS: &str = "PRAGMA cache_size = -256;";

/// True when `target` names a PostgreSQL database rather than a SQLite file.
pub fn is_postgres_url(target: &str) -> bool {
    let scheme = target.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    matches!(scheme.as_deref(), Some("postgres" | "postgresql"))
}

impl Journal {
    /// Opens the journal `target` names: a `postgres://` or `postgresql://` URL is a PostgreSQL
    /// database (migrated on open, safely also when several processes start at once), anything
    /// else the path of a SQLite file (as [`Journal::open`]). Errors are one line and never show
    /// the URL's password. A journal migrated by a newer release is refused, naming both schema
    /// versions. (One writer per journal: [`WriterLock`] for a file, a session advisory lock on
    /// PostgreSQL, both taken by the run after this; see `app::term`.)
    ///
    /// [`WriterLock`]: super::WriterLock
    pub async fn connect(target: &str) -> Result<Self> {
        if is_postgres_url(target) {
            Self::open_postgres(target).await
        } else {
            Self::open(Path::new(target)).await
        }
    }

    /// Opens the journal `target` names for reading only, as the offline commands (`history`,
    /// `audit`) do: nothing is migrated or written, and no file is created.
    ///
    /// - A SQLite file must exist. Without a `-wal` file beside it (a copy, or a journal whose
    ///   operator stopped cleanly) it is opened `immutable`: SQLite reads the file and nothing
    ///   else, takes no lock and creates no `-wal` or `-shm`. With a `-wal` (a running operator's
    ///   journal, or a copy taken with its `-wal`) it is opened `mode=ro`, which reads the
    ///   committed pages of the `-wal` too; SQLite then needs the `-shm` index beside it and
    ///   creates it if the copy lacks one.
    /// - A PostgreSQL database is read in read-only transactions
    ///   (`default_transaction_read_only`): no DDL, no write.
    ///
    /// A journal whose schema is not exactly this binary's (migrated by a newer release, or not
    /// yet by this one) is refused with both versions named.
    pub async fn connect_read_only(target: &str) -> Result<Self> {
        let journal = if is_postgres_url(target) {
            Self::open_postgres_read_only(target).await?
        } else {
            Self::open_read_only(Path::new(target)).await?
        };
        let migrator = match journal.backend {
            Backend::Sqlite => sqlx::migrate!("./migrations/sqlite"),
            Backend::Postgres => sqlx::migrate!("./migrations/postgres"),
        };
        let applied = applied_versions(&journal.pool)
            .await
            .map_err(|e| match journal.backend {
                Backend::Sqlite => Error::JournalFile {
                    path: target.to_string(),
                    reason: describe_sqlite(&e),
                },
                Backend::Postgres => Error::JournalDatabase {
                    target: redact(target),
                    reason: redact_in(&one_line(&describe_postgres(&e)), target),
                },
            })?;
        if let Err(reason) = schema_matches(applied.as_deref(), &migrator, true) {
            return Err(match journal.backend {
                Backend::Sqlite => Error::JournalFile {
                    path: target.to_string(),
                    reason,
                },
                Backend::Postgres => Error::JournalDatabase {
                    target: redact(target),
                    reason,
                },
            });
        }
        Ok(journal)
    }

    /// The SQLite file at `path`, read-only ([`Journal::connect_read_only`]).
    async fn open_read_only(path: &Path) -> Result<Self> {
        sqlx::any::install_default_drivers();
        let shown = path.display().to_string();
        let file_error = |reason: String| Error::JournalFile {
            path: shown.clone(),
            reason,
        };
        if !path.is_file() {
            return Err(file_error("the file does not exist".into()));
        }
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        let mode = if Path::new(&wal).exists() {
            "mode=ro"
        } else {
            "mode=ro&immutable=true"
        };
        let url = sqlite_url(path).replace("mode=rwc", mode);
        let options = AnyConnectOptions::from_str(&url).map_err(|e| file_error(describe_sqlite(&e)))?;
        let pragmas = "PRAGMA busy_timeout = 5000; PRAGMA query_only = ON; PRAGMA temp_store = MEMORY;";
        let mut first = AnyConnection::connect_with(&options)
            .await
            .map_err(|e| file_error(describe_sqlite(&e)))?;
        let opened = first.execute(pragmas).await;
        let _ = first.close().await;
        opened.map_err(|e| file_error(describe_sqlite(&e)))?;
        let pool = AnyPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .after_connect(move |conn, _| Box::pin(async move { conn.execute(pragmas).await.map(|_| ()) }))
            .connect_with(options)
            .await
            .map_err(|e| file_error(describe_sqlite(&e)))?;
        Ok(Self::on(pool, Backend::Sqlite))
    }

    /// The PostgreSQL database at `url`, read-only ([`Journal::connect_read_only`]).
    async fn open_postgres_read_only(url: &str) -> Result<Self> {
        sqlx::any::install_default_drivers();
        let db_error = |e: &dyn std::fmt::Display| Error::JournalDatabase {
            target: redact(url),
            reason: redact_in(&one_line(e), url),
        };
        let options = AnyConnectOptions::from_str(&with_application_name(url))
            .map_err(|e| db_error(&describe_postgres(&e)))?;
        let read_only = "SET default_transaction_read_only = on";
        let mut first = AnyConnection::connect_with(&options)
            .await
            .map_err(|e| db_error(&describe_postgres(&e)))?;
        let set = first.execute(read_only).await;
        let _ = first.close().await;
        set.map_err(|e| db_error(&describe_postgres(&e)))?;
        let pool = AnyPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(POSTGRES_ACQUIRE_TIMEOUT)
            .after_connect(move |conn, _| Box::pin(async move { conn.execute(read_only).await.map(|_| ()) }))
            .connect_with(options)
            .await
            .map_err(|e| db_error(&describe_postgres(&e)))?;
        Ok(Self::on(pool, Backend::Postgres))
    }

    /// Opens (creating if missing) and migrates the SQLite journal at `path`. An unwritable,
    /// locked or corrupt file gives [`Error::JournalFile`] naming the path.
    pub async fn open(path: &Path) -> Result<Self> {
        sqlx::any::install_default_drivers();
        let shown = path.display().to_string();
        let file_error = |reason: String| Error::JournalFile {
            path: shown.clone(),
            reason,
        };
        let options =
            AnyConnectOptions::from_str(&sqlite_url(path)).map_err(|e| file_error(describe_sqlite(&e)))?;
        // The first connection on its own: the pool retries a connection whose set-up fails until
        // its timeout and then says only "timed out"; this one reports what SQLite said.
        let mut first = AnyConnection::connect_with(&options)
            .await
            .map_err(|e| file_error(describe_sqlite(&e)))?;
        let checked = async {
            first.execute(SQLITE_PRAGMAS).await?;
            first.execute("PRAGMA journal_mode = WAL").await?;
            let check: String = sqlx::query("PRAGMA quick_check")
                .fetch_one(&mut first)
                .await?
                .try_get(0)?;
            Ok::<_, sqlx::Error>(check)
        }
        .await;
        let _ = first.close().await;
        let check = checked.map_err(|e| file_error(describe_sqlite(&e)))?;
        if check != "ok" {
            return Err(file_error(format!("integrity check: {check}")));
        }
        let pool = AnyPoolOptions::new()
            .max_connections(SQLITE_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .test_before_acquire(SQLITE_TEST_BEFORE_ACQUIRE)
            .after_connect(|conn, _| {
                Box::pin(async move {
                    conn.execute(SQLITE_PRAGMAS).await?;
                    conn.execute(OPERATOR_PRAGMAS).await.map(|_| ())
                })
            })
            .connect_with(options.clone())
            .await
            .map_err(|e| file_error(describe_sqlite(&e)))?;
        let migrator = sqlx::migrate!("./migrations/sqlite");
        let applied = applied_versions(&pool)
            .await
            .map_err(|e| file_error(describe_sqlite(&e)))?;
        schema_matches(applied.as_deref(), &migrator, false).map_err(file_error)?;
        migrator.run(&pool).await.map_err(|e| file_error(e.to_string()))?;
        Ok(Self {
            options: Some(options),
            ..Self::on(pool, Backend::Sqlite)
        })
    }

    /// This journal with its reads on a pool of their own, `connections` at most. The pool's
    /// connections are opened lazily by the task that first needs them, on its thread and in its
    /// runtime: [`crate::http::queries`] opens them on its low-priority thread (a SQLite file's
    /// worker threads then inherit its priority). Never share a pool across runtimes: a PostgreSQL
    /// connection opened in one runtime fails in every other once its own has stopped ("A Tokio
    /// 1.x context was found, but it is being shutdown"), and the operator's last journal write,
    /// its run's stop, would draw one. For reads only; an in-memory journal (one connection, one
    /// database) is returned as it is.
    pub fn with_own_readers(&self, connections: u32) -> Self {
        let Some(options) = &self.options else {
            return self.clone();
        };
        let readers = AnyPoolOptions::new().max_connections(connections);
        let readers = match self.backend {
            Backend::Sqlite => (readers.acquire_timeout(ACQUIRE_TIMEOUT))
                .test_before_acquire(SQLITE_TEST_BEFORE_ACQUIRE)
                .after_connect(|conn, _| {
                    Box::pin(async move {
                        conn.execute(SQLITE_PRAGMAS).await?;
                        conn.execute(READER_PRAGMAS).await.map(|_| ())
                    })
                }),
            Backend::Postgres => readers
                .acquire_timeout(POSTGRES_ACQUIRE_TIMEOUT)
                .after_connect(|conn, _| bounded(conn)),
        };
        Self {
            pool: readers.connect_lazy_with(options.clone()),
            ..self.clone()
        }
    }

    /// An in-memory SQLite journal (one connection, so one database, kept for the pool's life),
    /// for tests and previews.
    pub async fn open_in_memory() -> Result<Self> {
        sqlx::any::install_default_drivers();
        let pool = AnyPoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            // a new connection would be a new, empty database
            .idle_timeout(None)
            .max_lifetime(None)
            .after_connect(|conn, _| Box::pin(async move { conn.execute(SQLITE_PRAGMAS).await.map(|_| ()) }))
            .connect_with(AnyConnectOptions::from_str("sqlite::memory:")?)
            .await?;
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        Ok(Self::on(pool, Backend::Sqlite))
    }

    /// Connects to and migrates the PostgreSQL journal at `url`. Errors give
    /// [`Error::JournalDatabase`] with the URL, password hidden.
    async fn open_postgres(url: &str) -> Result<Self> {
        sqlx::any::install_default_drivers();
        let db_error = |e: &dyn std::fmt::Display| Error::JournalDatabase {
            target: redact(url),
            reason: redact_in(&one_line(e), url),
        };
        let options = AnyConnectOptions::from_str(&with_application_name(url))
            .map_err(|e| db_error(&describe_postgres(&e)))?;
        // As for SQLite: a first connection alone, so a refused connection, an unknown database or
        // a wrong password is reported as such at once instead of after the pool's timeout.
        let first = AnyConnection::connect_with(&options)
            .await
            .map_err(|e| db_error(&describe_postgres(&e)))?;
        let _ = first.close().await;
        let pool = AnyPoolOptions::new()
            .max_connections(POSTGRES_CONNECTIONS)
            .acquire_timeout(POSTGRES_ACQUIRE_TIMEOUT)
            .connect_with(options.clone())
            .await
            .map_err(|e| db_error(&describe_postgres(&e)))?;
        // The migrator holds a PostgreSQL advisory lock while it runs: operators starting at once
        // migrate one after the other, and the later ones find nothing left to do.
        let migrator = sqlx::migrate!("./migrations/postgres");
        let applied = applied_versions(&pool)
            .await
            .map_err(|e| db_error(&describe_postgres(&e)))?;
        schema_matches(applied.as_deref(), &migrator, false).map_err(|reason| db_error(&reason))?;
        migrator.run(&pool).await.map_err(|e| db_error(&e))?;
        pool.close().await;
        // the pool the operator works on, every connection bounded
        let pool = AnyPoolOptions::new()
            .max_connections(POSTGRES_CONNECTIONS)
            .acquire_timeout(POSTGRES_ACQUIRE_TIMEOUT)
            .after_connect(|conn, _| bounded(conn))
            .connect_with(options.clone())
            .await
            .map_err(|e| db_error(&describe_postgres(&e)))?;
        Ok(Self {
            options: Some(options),
            ..Self::on(pool, Backend::Postgres)
        })
    }

    fn on(pool: AnyPool, backend: Backend) -> Self {
        let outages = std::sync::Arc::default();
        let fence = std::sync::Arc::new(fence::Fence::default());
        let downtime = std::sync::Arc::<downtime::Downtime>::default();
        let writer = writer::Writer::spawn(
            pool.clone(),
            backend,
            std::sync::Arc::clone(&outages),
            (std::sync::Arc::clone(&fence), std::sync::Arc::clone(&downtime)),
        );
        Self {
            pool,
            writer,
            outages,
            fence,
            downtime,
            backend,
            options: None,
        }
    }

    /// Which database this journal is kept in.
    pub fn backend(&self) -> Backend {
        self.backend
    }
}

/// The migrations a journal has applied (successfully), in order; `None` when it has no migration
/// history at all (a new database, or not a journal).
async fn applied_versions(pool: &AnyPool) -> std::result::Result<Option<Vec<(i64, String)>>, sqlx::Error> {
    let query = "SELECT version, description FROM _sqlx_migrations WHERE success ORDER BY version";
    match sqlx::query(query).fetch_all(pool).await {
        Ok(rows) => Ok(Some(
            rows.iter()
                .map(|r| Ok((r.try_get::<i64, _>(0)?, r.try_get::<String, _>(1)?)))
                .collect::<std::result::Result<_, sqlx::Error>>()?,
        )),
        // SQLite: "no such table"; PostgreSQL: undefined_table (42P01)
        Err(sqlx::Error::Database(db))
            if db.message().contains("no such table") || db.code().as_deref() == Some("42P01") =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Whether a journal that applied `applied` can be used by this binary, whose migrations are
/// `migrator`'s: never when it applied one this binary does not know (a newer release migrated it:
/// this binary would misread its rows); when reading without migrating (`exact`), only when it
/// applied every one (an older journal lacks tables and columns the queries name). The reason
/// names both schema versions and what to do.
fn schema_matches(
    applied: Option<&[(i64, String)]>,
    migrator: &sqlx::migrate::Migrator,
    exact: bool,
) -> std::result::Result<(), String> {
    let ours = migrator.iter().map(|m| m.version).max().unwrap_or(0);
    let this = format!("this eru-operator {}", env!("CARGO_PKG_VERSION"));
    let Some(applied) = applied else {
        return if exact {
            Err(format!(
                "it has no schema history (no _sqlx_migrations table): not an eru-operator journal, or \
                 one no operator has started on yet ({this} reads schema version {ours})"
            ))
        } else {
            Ok(())
        };
    };
    let theirs = applied.iter().map(|(v, _)| *v).max().unwrap_or(0);
    if let Some((version, description)) = applied.iter().find(|(v, _)| !migrator.version_exists(*v)) {
        return Err(format!(
            "its schema is at version {theirs}, newer than {this}'s {ours} (it has migration {version} \
             \"{description}\", which this binary does not know): a newer eru-operator migrated it: run or read \
             it with that release or a later one, or restore the backup taken before the upgrade"
        ));
    }
    if exact {
        let missing: Vec<i64> = (migrator.iter().map(|m| m.version))
            .filter(|v| !applied.iter().any(|(a, _)| a == v))
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "its schema is at version {theirs}, older than {this}'s {ours} (migrations {missing:?} \
                 not applied); the offline commands read a journal without migrating it: use the \
                 eru-operator release that wrote it, or let an operator of this release migrate it \
                 (it does at start; back the journal up first)"
            ));
        }
    }
    Ok(())
}

/// The `sqlite:` URL of the file at `path`. The URL parser would fold `..` segments (wrong
/// across a symlink) and read `%`, `?` and `#` as syntax: the directory is resolved when it
/// exists, and every byte but the plainest is percent-encoded (sqlx decodes it again).
fn sqlite_url(path: &Path) -> String {
    let resolved = match (path.parent(), path.file_name()) {
        (Some(dir), Some(file)) => {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            std::fs::canonicalize(dir).map_or_else(|_| path.to_path_buf(), |dir| dir.join(file))
        }
        _ => path.to_path_buf(),
    };
    let mut url = String::from("sqlite:");
    for &b in resolved.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            url.push(char::from(b));
        } else {
            url.push_str(&format!("%{b:02X}"));
        }
    }
    // read-write, created if missing
    url.push_str("?mode=rwc");
    url
}

/// Names the operator in `pg_stat_activity`, unless the URL names something else.
fn with_application_name(url: &str) -> String {
    if url.contains("application_name=") {
        url.to_string()
    } else {
        let separator = if url.contains('?') { '&' } else { '?' };
        format!("{url}{separator}application_name=eru-operator")
    }
}

/// A one-line reason for a SQLite file that cannot be opened.
fn describe_sqlite(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Database(db) => {
            let msg = db.message();
            if msg.contains("not a database") {
                "the file is not a SQLite database or is corrupt".into()
            } else if msg.contains("locked") || msg.contains("busy") {
                "the database is locked by another process".into()
            } else if msg.contains("unable to open") || msg.contains("readonly") || msg.contains("read-only")
            {
                format!("cannot open or write it ({msg}); check the directory exists and is writable")
            } else {
                msg.to_string()
            }
        }
        other => other.to_string(),
    }
}

/// A reason for a PostgreSQL database that cannot be used (not yet redacted: see [`redact_in`]).
fn describe_postgres(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Database(db) => match db.code() {
            Some(code) => format!("{} (SQLSTATE {code})", db.message()),
            None => db.message().to_string(),
        },
        sqlx::Error::Io(io) => format!("cannot reach the server: {io}"),
        sqlx::Error::Tls(tls) => format!("TLS: {tls}"),
        sqlx::Error::Configuration(c) => format!("invalid URL: {c}"),
        sqlx::Error::PoolTimedOut => {
            format!("no connection within {} s", ACQUIRE_TIMEOUT.as_secs())
        }
        other => other.to_string(),
    }
}

/// `e` on one line.
fn one_line(e: &dyn std::fmt::Display) -> String {
    e.to_string()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// The secrets of a PostgreSQL URL: the password of its user info and of a `password=` query
/// parameter, each as written and percent-decoded.
fn secrets(url: &str) -> Vec<String> {
    let mut found = Vec::new();
    if let Some((_, rest)) = url.split_once("://") {
        let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
        if let Some((user_info, _)) = authority.rsplit_once('@')
            && let Some((_, password)) = user_info.split_once(':')
        {
            found.push(password.to_string());
        }
    }
    if let Some((_, query)) = url.split_once('?') {
        for pair in query.split(['&', '#']) {
            if let Some(("password", value)) = pair.split_once('=') {
                found.push(value.to_string());
            }
        }
    }
    let decoded: Vec<String> = found.iter().map(|s| percent_decode(s)).collect();
    found.extend(decoded);
    found.retain(|s| !s.is_empty());
    // longest first, so a password containing another is hidden whole
    found.sort_by_key(|s| std::cmp::Reverse(s.len()));
    found.dedup();
    found
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((hi * 16 + lo) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `text` with every secret of `url` replaced by `***`.
fn redact_in(text: &str, url: &str) -> String {
    secrets(url).iter().fold(text.to_string(), |text, secret| {
        text.replace(secret.as_str(), "***")
    })
}

/// What to show of a journal target in messages and logs: a PostgreSQL URL with its password
/// replaced by `***`; a SQLite path as it is.
pub fn redact(target: &str) -> String {
    if is_postgres_url(target) {
        redact_in(target, target)
    } else {
        target.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_urls_are_told_from_paths() {
        assert!(is_postgres_url("postgres://u@h/db"));
        assert!(is_postgres_url("postgresql://u@h/db"));
        assert!(is_postgres_url("POSTGRES://h"));
        assert!(!is_postgres_url("./eru.db"));
        assert!(!is_postgres_url("/var/lib/eru/postgres://x"));
        assert!(!is_postgres_url("sqlite://eru.db"));
    }

    #[test]
    fn passwords_never_show() {
        let url = "postgres://eru:s%40cr3t:x@db.example:5432/eru?sslmode=require&password=other";
        let shown = redact(url);
        assert_eq!(
            shown,
            "postgres://eru:***@db.example:5432/eru?sslmode=require&password=***"
        );
        let text = format!("failed for {url}: s@cr3t:x and other");
        let hidden = redact_in(&text, url);
        assert!(!hidden.contains("cr3t") && !hidden.contains("other"), "{hidden}");
        assert_eq!(redact("postgres://eru@db/eru"), "postgres://eru@db/eru");
        assert_eq!(redact("postgres://eru:@db/eru"), "postgres://eru:@db/eru");
        assert_eq!(redact("./eru.db"), "./eru.db");
    }

    #[test]
    fn sqlite_urls_keep_odd_file_names() {
        let dir = tempfile::tempdir().unwrap();
        let url = sqlite_url(&dir.path().join("a b?c#d%e.db"));
        assert!(url.ends_with("/a%20b%3Fc%23d%25e.db?mode=rwc"), "{url}");
        assert!(!url.contains(".."));
    }
}
