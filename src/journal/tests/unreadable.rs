//! A journal row that does not read as its type fails the read, naming the row: never dropped.

use crate::journal::{Filter, Journal};

#[tokio::test]
async fn a_row_with_a_time_that_is_not_one_fails_the_read_with_its_id() {
    let journal = Journal::open_in_memory().await.unwrap();
    sqlx::query(
        "INSERT INTO restarts (uid, namespace, name, target, slot, decided_at, outcome)
         VALUES ('u1', 'ns', 'web', 'web', 'yesterday at three', '2026-11-22T03:00:00.000Z', 'in_progress')",
    )
    .execute(&journal.pool)
    .await
    .unwrap();
    let error = journal
        .restarts(&Filter {
            limit: 10,
            ..Filter::default()
        })
        .await
        .expect_err("the row is unreadable")
        .to_string();
    assert!(error.contains("id 1"), "{error}");
    assert!(
        error.contains("not a journal time: \"yesterday at three\""),
        "{error}"
    );
    let error = journal
        .open_restart("u1")
        .await
        .expect_err("the same row")
        .to_string();
    assert!(error.contains("id 1"), "{error}");
}

#[tokio::test]
async fn an_epoch_whose_spec_is_not_json_fails_the_read_with_its_uid_and_generation() {
    let journal = Journal::open_in_memory().await.unwrap();
    sqlx::query(
        "INSERT INTO spec_epochs (uid, generation, effective_from, observed_at, spec)
         VALUES ('u1', 3, '2026-11-22T03:00:00.000Z', '2026-11-22T03:00:00.000Z', '{not json')",
    )
    .execute(&journal.pool)
    .await
    .unwrap();
    let since = chrono::DateTime::parse_from_rfc3339("2026-11-22T00:00:00Z")
        .unwrap()
        .to_utc();
    let error = journal
        .epochs("u1", since)
        .await
        .expect_err("unreadable")
        .to_string();
    assert!(error.contains("uid u1, generation 3"), "{error}");
}
