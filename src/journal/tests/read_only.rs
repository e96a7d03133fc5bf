//! The offline commands' journal ([`Journal::connect_read_only`]): it reads what the operator
//! wrote, writes nothing, migrates nothing, creates no file; a journal of another schema version
//! than this binary's is refused naming both, by the offline commands and by `run`.

use std::path::Path;

use sqlx::{Connection, Executor};

use super::{pg::Database, *};

/// The files in `dir`, by name.
fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Runs `sql` on the SQLite file at `path`, with a connection of its own.
async fn sqlite(path: &Path, sql: &str) {
    let mut conn =
        sqlx::SqliteConnection::connect_with(&sqlx::sqlite::SqliteConnectOptions::new().filename(path))
            .await
            .unwrap();
    conn.execute(sqlx::AssertSqlSafe(sql.to_string())).await.unwrap();
    conn.close().await.unwrap();
}

/// A journal file written by an operator that stopped (closed: no `-wal` left), with one restart.
async fn stopped_journal(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("eru.db");
    let journal = Journal::open(&path).await.unwrap();
    journal.append(&entry()).await.unwrap();
    journal.close().await;
    assert_eq!(files(dir), ["eru.db"], "a closed journal leaves its file alone");
    path
}

fn all() -> Filter {
    Filter {
        limit: 10,
        ..Filter::default()
    }
}

#[tokio::test]
async fn a_copy_is_read_without_a_byte_or_a_file_changing() {
    let dir = tempfile::tempdir().unwrap();
    let path = stopped_journal(dir.path()).await;
    let before = std::fs::read(&path).unwrap();
    let journal = Journal::connect_read_only(path.to_str().unwrap()).await.unwrap();
    assert_eq!(journal.restarts(&all()).await.unwrap().len(), 1);
    let write = Entry {
        transitions: entry().transitions,
        ..Entry::default()
    };
    assert!(
        journal.append(&write).await.is_err(),
        "a read-only journal takes no write"
    );
    journal.close().await;
    assert_eq!(files(dir.path()), ["eru.db"], "no -wal, -shm or lock file");
    assert!(
        std::fs::read(&path).unwrap() == before,
        "the file is byte-identical"
    );
}

#[tokio::test]
async fn a_running_operators_journal_is_read_with_its_wal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("eru.db");
    let live = Journal::open(&path).await.unwrap();
    live.append(&entry()).await.unwrap();
    let before = files(dir.path());
    assert!(before.contains(&"eru.db-wal".to_string()), "{before:?}");
    let journal = Journal::connect_read_only(path.to_str().unwrap()).await.unwrap();
    assert_eq!(
        journal.restarts(&all()).await.unwrap().len(),
        1,
        "what is committed in the -wal is read"
    );
    journal.close().await;
    assert_eq!(files(dir.path()), before);
    live.close().await;
}

#[tokio::test]
async fn a_missing_file_is_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("eru.db");
    let error = Journal::connect_read_only(path.to_str().unwrap())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("does not exist"), "{error}");
    assert!(files(dir.path()).is_empty());
}

#[tokio::test]
async fn a_newer_schema_is_refused_naming_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let path = stopped_journal(dir.path()).await;
    sqlite(
        &path,
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES (9001, 'from the future', TRUE, X'00', 0)",
    )
    .await;
    let before = std::fs::read(&path).unwrap();
    let ours = sqlx::migrate!("./migrations/sqlite")
        .iter()
        .map(|m| m.version)
        .max()
        .unwrap();
    for error in [
        Journal::connect_read_only(path.to_str().unwrap())
            .await
            .unwrap_err(),
        Journal::connect(path.to_str().unwrap()).await.unwrap_err(),
    ] {
        let text = error.to_string();
        assert!(
            text.contains("at version 9001, newer than this eru-operator")
                && text.contains(&format!("'s {ours} "))
                && text.contains("\"from the future\""),
            "{text}"
        );
    }
    let _ = std::fs::remove_file(dir.path().join("eru.db.lock"));
    assert!(
        std::fs::read(&path).unwrap() == before,
        "refused before migrating anything"
    );
}

#[tokio::test]
async fn an_older_schema_is_read_by_no_offline_command() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("eru.db");
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true);
    let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
    let mut old = sqlx::migrate!("./migrations/sqlite");
    old.migrations = std::borrow::Cow::Owned(old.migrations[..3].to_vec());
    old.run(&pool).await.unwrap();
    pool.close().await;
    let before = std::fs::read(&path).unwrap();
    let ours = sqlx::migrate!("./migrations/sqlite")
        .iter()
        .map(|m| m.version)
        .max()
        .unwrap();
    let error = Journal::connect_read_only(path.to_str().unwrap())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("at version 3, older than this eru-operator")
            && error.contains(&format!("'s {ours} "))
            && error.contains("without migrating"),
        "{error}"
    );
    assert!(std::fs::read(&path).unwrap() == before, "not migrated");
    // the operator itself migrates it
    let journal = Journal::connect(path.to_str().unwrap()).await.unwrap();
    journal.close().await;
    Journal::connect_read_only(path.to_str().unwrap())
        .await
        .unwrap()
        .close()
        .await;
}

#[tokio::test]
async fn a_file_that_is_no_journal_is_said_to_be_none() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.db");
    sqlite_new(&path).await;
    let error = Journal::connect_read_only(path.to_str().unwrap())
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("not an eru-operator journal"), "{error}");
}

async fn sqlite_new(path: &Path) {
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true);
    let mut conn = sqlx::SqliteConnection::connect_with(&options).await.unwrap();
    conn.execute("CREATE TABLE t (x INTEGER)").await.unwrap();
    conn.close().await.unwrap();
}

#[tokio::test]
async fn postgres_is_read_in_read_only_transactions() {
    let db = Database::fresh().await;
    db.journal.append(&entry()).await.unwrap();
    let journal = Journal::connect_read_only(&db.url).await.unwrap();
    assert_eq!(journal.backend(), Backend::Postgres);
    assert_eq!(journal.restarts(&all()).await.unwrap().len(), 1);
    let error = sqlx::query("CREATE TABLE nope (x INTEGER)")
        .execute(&journal.pool)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("read-only transaction"), "no DDL: {error}");
    journal.close().await;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES (9001, 'from the future', TRUE, '\\x00', 0)",
    )
    .execute(&db.journal.pool)
    .await
    .unwrap();
    let error = Journal::connect_read_only(&db.url).await.unwrap_err().to_string();
    assert!(error.contains("at version 9001, newer than"), "{error}");
    db.close().await;
}
