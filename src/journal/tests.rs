//! Unit tests of the journal: idempotent appends, queries, file errors.

use chrono::TimeZone;

use super::*;

fn object() -> ObjectKey {
    ObjectKey {
        kind: "Eru",
        namespace: "ns".into(),
        name: "web".into(),
        uid: "u1".into(),
    }
}

fn at(min: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, 3, min, 0).unwrap()
}

fn entry() -> Entry {
    Entry {
        transitions: vec![NewTransition {
            object: object(),
            observed: "42".into(),
            from: "Waiting",
            to: "RollingOut",
            event: "SlotDue",
            at: at(0),
            detail: serde_json::json!({"slot": ts(at(0))}),
        }],
        slots: vec![NewSlot {
            object: object(),
            target: "web".into(),
            slot: at(1),
            last_slot: at(1),
            slot_count: 1,
            result: SlotResult::Skipped,
            reason: "target_paused",
            window: None,
            evaluated_at: at(1),
        }],
        restarts_started: vec![NewRestart {
            object: object(),
            target: "web".into(),
            slot: at(0),
            started_at: at(0),
        }],
        restarts_finished: vec![],
    }
}

#[tokio::test]
async fn migrations_create_every_table() {
    let journal = Journal::open_in_memory().await.unwrap();
    let tables: Vec<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .fetch_all(&journal.pool)
            .await
            .unwrap();
    for t in ["operator_runs", "restarts", "slots", "transitions"] {
        assert!(tables.iter().any(|n| n == t), "missing table {t}: {tables:?}");
    }
}

#[tokio::test]
async fn append_is_idempotent() {
    let journal = Journal::open_in_memory().await.unwrap();
    let first = journal.append(&entry()).await.unwrap();
    assert_eq!(
        first,
        Appended {
            transitions: 1,
            slots: 1,
            restarts_started: 1,
            restarts_finished: 0
        }
    );
    let replay = journal.append(&entry()).await.unwrap();
    assert_eq!(replay, Appended::default(), "a replay must write nothing");

    let finish = FinishedRestart {
        uid: "u1".into(),
        slot: at(0),
        finished_at: at(2),
        outcome: "succeeded",
        reason: None,
    };
    let done = Entry {
        restarts_finished: vec![finish.clone()],
        ..Entry::default()
    };
    assert_eq!(journal.append(&done).await.unwrap().restarts_finished, 1);
    // a second finish (replay, or a late failure) does not overwrite the first outcome
    let late = Entry {
        restarts_finished: vec![FinishedRestart {
            outcome: "failed",
            finished_at: at(5),
            ..finish
        }],
        ..Entry::default()
    };
    assert_eq!(journal.append(&late).await.unwrap().restarts_finished, 0);
    let row = journal.restart("u1", at(0)).await.unwrap().unwrap();
    assert_eq!(row.outcome, "succeeded");
    assert_eq!(row.finished_at.as_deref(), Some("2026-11-22T03:02:00.000Z"));

    let filter = Filter {
        limit: 10,
        ..Filter::default()
    };
    assert_eq!(journal.transitions(&filter).await.unwrap().len(), 1);
    assert_eq!(journal.missed(&filter).await.unwrap().len(), 1);
    assert_eq!(journal.last_accounted_slot("u1").await.unwrap(), Some(at(1)));
    assert_eq!(journal.last_accounted_slot("other").await.unwrap(), None);
}

#[tokio::test]
async fn eru_summary_counts_summarized_slots() {
    let journal = Journal::open_in_memory().await.unwrap();
    journal.append(&entry()).await.unwrap();
    let summary_row = NewSlot {
        slot: at(10),
        last_slot: at(20),
        slot_count: 11,
        result: SlotResult::Missed,
        reason: "operator_down",
        ..entry().slots[0].clone()
    };
    let fired = NewSlot {
        slot: at(0),
        last_slot: at(0),
        result: SlotResult::Fired,
        reason: "scheduled",
        ..entry().slots[0].clone()
    };
    journal
        .append(&Entry {
            slots: vec![summary_row, fired],
            ..Entry::default()
        })
        .await
        .unwrap();
    let summary = journal.eru_summary("u1").await.unwrap();
    assert_eq!(
        summary.missed_slots, 12,
        "1 skipped + 11 summarized, fired excluded"
    );
    assert_eq!(summary.last_missed, Some(at(20)));
    assert_eq!(
        summary.last_restart.as_ref().map(|r| r.slot.as_str()),
        Some("2026-11-22T03:00:00.000Z")
    );
    assert_eq!(
        journal.open_restart("u1").await.unwrap().map(|r| r.outcome),
        Some("in_progress".into())
    );
    assert_eq!(summary.last_success, None);
}

#[tokio::test]
async fn transition_detail_round_trips() {
    let journal = Journal::open_in_memory().await.unwrap();
    journal.append(&entry()).await.unwrap();
    let rows = journal
        .transitions(&Filter {
            limit: 1,
            ..Filter::default()
        })
        .await
        .unwrap();
    assert_eq!(rows[0].detail.0["slot"], "2026-11-22T03:00:00.000Z");
    assert_eq!(
        (rows[0].from_state.as_str(), rows[0].to_state.as_str()),
        ("Waiting", "RollingOut")
    );
}

#[tokio::test]
async fn runs_record_start_heartbeat_and_stop() {
    let journal = Journal::open_in_memory().await.unwrap();
    let run = journal.start_run("0.1.0", "test", at(0)).await.unwrap();
    journal.heartbeat(run, at(1)).await.unwrap();
    let runs = journal.runs().await.unwrap();
    assert_eq!(runs[0].heartbeat_at, ts(at(1)));
    assert_eq!(runs[0].stopped_at, None);
    journal.stop_run(run, at(3)).await.unwrap();
    assert_eq!(journal.runs().await.unwrap()[0].stopped_at, Some(ts(at(3))));
}

#[tokio::test]
async fn file_journal_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("eru.db");
    let journal = Journal::open(&path).await.unwrap();
    journal.append(&entry()).await.unwrap();
    journal.close().await;
    let again = Journal::open(&path).await.unwrap();
    assert_eq!(
        again
            .restarts(&Filter {
                limit: 5,
                ..Filter::default()
            })
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn corrupt_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("eru.db");
    std::fs::write(&path, vec![0x42u8; 8192]).unwrap();
    let err = Journal::open(&path).await.unwrap_err();
    assert_eq!(err.category(), "journal");
    let text = err.to_string();
    assert!(
        text.contains("eru.db") && text.contains("corrupt"),
        "unclear error: {text}"
    );
}

#[tokio::test]
async fn missing_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no/such/dir/eru.db");
    let text = Journal::open(&path).await.unwrap_err().to_string();
    assert!(
        text.contains("no/such/dir/eru.db") && text.contains("cannot open"),
        "unclear error: {text}"
    );
}
