//! Unit tests of the journal: idempotent appends, queries, retention and group commit on both
//! backends (each `async fn name(journal: Journal)` below runs as `name::sqlite` and
//! `name::postgres`, see [`on_both!`]); file errors, WAL and migration of an old file on SQLite;
//! URLs, errors, collations and concurrent start-up on PostgreSQL.

use chrono::TimeZone;

use super::*;
use crate::vocab::{Outcome, Reason};

mod fence;
pub(crate) mod pg;
mod read_only;
mod unreadable;
mod upgrade;

/// For each test body `async fn name(journal: Journal)`: a module `name` with a test `sqlite` (on
/// an in-memory journal, or `file` for a WAL file in a temporary folder) and a test `postgres` (on
/// a fresh database of the test server, see [`pg`]).
macro_rules! on_both {
    ($($test:ident $(on $file:ident)?),* $(,)?) => {$(
        mod $test {
            #[tokio::test]
            async fn sqlite() {
                let dir = tempfile::tempdir().unwrap();
                let journal = on_both!(@sqlite dir $($file)?);
                super::$test(journal).await;
            }

            #[tokio::test]
            async fn postgres() {
                let db = super::pg::Database::fresh().await;
                super::$test(db.journal.clone()).await;
                db.close().await;
            }
        }
    )*};
    (@sqlite $dir:ident) => {{
        let _ = &$dir;
        super::Journal::open_in_memory().await.unwrap()
    }};
    (@sqlite $dir:ident file) => {
        super::Journal::open(&$dir.path().join("eru.db")).await.unwrap()
    };
}

on_both!(
    migrations_create_every_table,
    append_is_idempotent_and_the_ledger_counts_only_what_is_new,
    a_revert_is_marked_once_and_counted_as_written_once,
    finished_restarts_count_once_by_outcome,
    a_deletion_is_kept_on_the_ledger_row_the_audit_reads,
    failed_attempts_count_once_each_and_keep_the_last_error,
    ledger_counts_summarized_slots_and_times_only_move_forward,
    a_seed_starts_an_empty_ledger_once_and_advances_move_the_cursor,
    epochs_from_the_one_in_force,
    runs_since_are_bounded_to_the_span_and_the_run_before_it,
    kept_runs_and_outages_read_as_the_query_until_a_commit,
    transition_detail_round_trips,
    runs_record_start_heartbeat_and_stop,
    a_runs_last_sign_of_life_is_its_latest_heartbeat_or_commit,
    retention_prunes_in_batches_and_keeps_totals_and_what_accounting_needs,
    concurrent_appends_share_commits_and_a_bad_entry_fails_alone on file,
    open_restarts_filter_by_namespace_or_not,
    listings_filter_and_page_alike,
    a_free_text_nul_is_kept_as_a_replacement_character,
    an_outage_is_journaled_by_the_first_write_that_works_again on file,
    an_audits_window_reads_the_records_the_listing_reads,
    a_slot_record_ending_before_it_starts_is_refused,
    notifications_are_written_with_their_new_record_and_settled_once,
    a_full_outbox_gives_up_its_oldest,
    a_manual_run_moves_once_through_its_outcomes,
    the_row_sums_follow_rows_written_changed_or_deleted_by_any_hand,
    a_pause_is_written_once_resumed_once_and_its_resume_starts_the_next_row,
    a_deleted_erus_row_sums_go_with_its_rows_and_ledger,
    first_reads_are_what_each_erus_own_reads_read,
);

fn object() -> ObjectKey {
    ObjectKey {
        kind: "Eru",
        namespace: "ns".into(),
        name: "web".into(),
        uid: "u1".into(),
    }
}

/// An audit's reading of `cap` records, whole (as a page reads them).
fn reading(cap: usize, totals: bool) -> AuditReading {
    AuditReading {
        cap,
        totals,
        records: true,
    }
}

fn at(min: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, 3, min, 0).unwrap()
}

fn slot_row(slot: DateTime<Utc>, result: SlotResult, reason: Reason) -> NewSlot {
    NewSlot {
        object: object(),
        target: "web".into(),
        slot,
        last_slot: slot,
        slot_count: 1,
        result,
        reason,
        window: None,
        note: None,
        evaluated_at: slot,
    }
}

fn entry() -> Entry {
    Entry {
        transitions: vec![NewTransition {
            object: object(),
            observed: "42".into(),
            from: "Waiting",
            to: "Restarting",
            event: "SlotDue",
            at: at(0),
            detail: serde_json::json!({"slot": ts(at(0))}),
        }],
        slots: vec![slot_row(at(1), SlotResult::Skipped, Reason::TargetPaused)],
        restarts_decided: vec![NewRestart {
            object: object(),
            target: "web".into(),
            slot: at(0),
            decided_at: at(0),
            deadline_at: at(5),
        }],
        ..Entry::default()
    }
}

/// An Eru's deletion reaches the audit (mutation: dropping the `deleted_at` write in
/// `write.rs`): the ledger row keeps it (a replay changes nothing), and the
/// audit's read has it, so no slot is expected after it.
async fn a_deletion_is_kept_on_the_ledger_row_the_audit_reads(journal: Journal) {
    journal.append(&entry()).await.unwrap();
    assert_eq!(journal.ledger("u1").await.unwrap().unwrap().deleted_at, None);
    let deleted = Entry {
        deleted: vec![("u1".into(), at(3))],
        ..Entry::default()
    };
    journal.append(&deleted).await.unwrap();
    journal.append(&deleted).await.unwrap();
    assert_eq!(
        journal.ledger("u1").await.unwrap().unwrap().deleted_at,
        Some(Ts(at(3)))
    );
    let rows = journal
        .audit_rows(
            at(0),
            at(10),
            (Some("ns"), Some("web")),
            None,
            reading(100, false),
        )
        .await
        .unwrap();
    assert_eq!(rows.ledgers.len(), 1);
    assert_eq!(rows.ledgers[0].deleted_at, Some(Ts(at(3))));
}

async fn migrations_create_every_table(journal: Journal) {
    let sql = match journal.backend() {
        Backend::Sqlite => "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
        // `name`-typed catalog columns are cast: the Any driver reads integers and text only
        Backend::Postgres => {
            "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1"
        }
    };
    let tables: Vec<String> = sqlx::query_scalar(sql).fetch_all(&journal.pool).await.unwrap();
    for t in [
        "eru_ledger",
        "journal_outages",
        "manual_runs",
        "notifications",
        "operator_runs",
        "restarts",
        "slot_totals",
        "slots",
        "spec_epochs",
        "transitions",
    ] {
        assert!(tables.iter().any(|n| n == t), "missing table {t}: {tables:?}");
    }
}

/// A restart seen undone is marked once, with who undid it, and counted as written once: its
/// replay writes nothing (mutations: the count of new reverts `+=` → `-=` or `*=`).
async fn a_revert_is_marked_once_and_counted_as_written_once(journal: Journal) {
    journal.append(&entry()).await.unwrap();
    let revert = Entry {
        reverts: vec![RevertedRestart {
            uid: "u1".into(),
            slot: at(0),
            by: Some("kubectl-rollout".into()),
            at: at(3),
        }],
        ..Entry::default()
    };
    let first = journal.append(&revert).await.unwrap();
    assert_eq!(
        first,
        Appended {
            reverts: 1,
            ..Appended::default()
        }
    );
    assert_eq!(first.records(), 1);
    assert_eq!(journal.append(&revert).await.unwrap(), Appended::default());
    let row = journal.restart("u1", at(0)).await.unwrap().unwrap();
    assert_eq!(row.reverted_at, Some(Ts(at(3))));
    assert_eq!(row.reverted_by.as_deref(), Some("kubectl-rollout"));
}

/// Each finished restart counts once under its outcome on the Eru's ledger row, with the last
/// failure's time (mutations: `failed += 1` and `abandoned += 1` turned into `-=` or `*=`).
async fn finished_restarts_count_once_by_outcome(journal: Journal) {
    let decided = |slot: DateTime<Utc>| NewRestart {
        object: object(),
        target: "web".into(),
        slot,
        decided_at: slot,
        deadline_at: slot + chrono::Duration::minutes(5),
    };
    let all = Entry {
        restarts_decided: vec![decided(at(0)), decided(at(1)), decided(at(2))],
        ..Entry::default()
    };
    journal.append(&all).await.unwrap();
    let finish = |slot: DateTime<Utc>, outcome| FinishedRestart {
        uid: "u1".into(),
        slot,
        finished_at: slot + chrono::Duration::seconds(30),
        outcome,
        reason: None,
    };
    let done = Entry {
        restarts_finished: vec![
            finish(at(0), Outcome::Failed),
            finish(at(1), Outcome::Failed),
            // the latest, and not a failure: it leaves the last failure's time as it was
            finish(at(2), Outcome::Abandoned),
        ],
        ..Entry::default()
    };
    assert_eq!(journal.append(&done).await.unwrap().restarts_finished, 3);
    assert_eq!(journal.append(&done).await.unwrap(), Appended::default());
    let ledger = journal.ledger("u1").await.unwrap().unwrap();
    assert_eq!((ledger.succeeded, ledger.failed, ledger.abandoned), (0, 2, 1));
    assert_eq!(
        ledger.last_failure,
        Some(Ts(at(1) + chrono::Duration::seconds(30)))
    );
}

async fn append_is_idempotent_and_the_ledger_counts_only_what_is_new(journal: Journal) {
    let first = journal.append(&entry()).await.unwrap();
    assert_eq!(
        first,
        Appended {
            transitions: 1,
            slots: 1,
            restarts_decided: 1,
            ..Appended::default()
        }
    );
    let replay = journal.append(&entry()).await.unwrap();
    assert_eq!(replay, Appended::default(), "a replay must write nothing");
    let ledger = journal.ledger("u1").await.unwrap().unwrap();
    assert_eq!(ledger.missed_slots, 1, "the replay did not count again");
    assert_eq!(ledger.accounted_through, Some(Ts(at(1))));
    assert_eq!(ledger.last_restart_slot, Some(Ts(at(0))));
    assert_eq!(journal.ledger("other").await.unwrap(), None);

    // the patch lands (once), then a failed attempt replayed counts once
    let landed = Entry {
        restarts_patched: vec![PatchedRestart {
            landed_generation: None,
            uid: "u1".into(),
            slot: at(0),
            patched_at: at(0) + chrono::Duration::milliseconds(30),
        }],
        slots: vec![slot_row(at(0), SlotResult::Fired, Reason::Scheduled)],
        ..Entry::default()
    };
    assert_eq!(journal.append(&landed).await.unwrap().restarts_patched, 1);
    assert_eq!(journal.append(&landed).await.unwrap(), Appended::default());
    let row = journal.restart("u1", at(0)).await.unwrap().unwrap();
    assert_eq!(
        row.patched_at.map(|t| t.to_string()).as_deref(),
        Some("2026-11-22T03:00:00.030Z")
    );
    assert_eq!(
        row.deadline_at.map(|t| t.to_string()).as_deref(),
        Some("2026-11-22T03:05:00.000Z")
    );
    assert_eq!(journal.ledger("u1").await.unwrap().unwrap().fired_slots, 1);

    let finish = FinishedRestart {
        uid: "u1".into(),
        slot: at(0),
        finished_at: at(2),
        outcome: Outcome::Succeeded,
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
            outcome: Outcome::Failed,
            finished_at: at(5),
            ..finish
        }],
        ..Entry::default()
    };
    assert_eq!(journal.append(&late).await.unwrap().restarts_finished, 0);
    let row = journal.restart("u1", at(0)).await.unwrap().unwrap();
    assert_eq!(row.outcome, Outcome::Succeeded);
    assert_eq!(
        row.finished_at.map(|t| t.to_string()).as_deref(),
        Some("2026-11-22T03:02:00.000Z")
    );
    let ledger = journal.ledger("u1").await.unwrap().unwrap();
    assert_eq!((ledger.succeeded, ledger.failed), (1, 0));
    assert_eq!(ledger.last_success, Some(Ts(at(2))));

    let filter = Filter {
        limit: 10,
        ..Filter::default()
    };
    assert_eq!(journal.transitions(&filter).await.unwrap().len(), 1);
    assert_eq!(
        journal.missed(&filter).await.unwrap().len(),
        1,
        "fired slots are not missed"
    );
}

async fn failed_attempts_count_once_each_and_keep_the_last_error(journal: Journal) {
    journal.append(&entry()).await.unwrap();
    let attempt = |n: u32, error: &str| Entry {
        attempts: vec![FailedAttempt {
            uid: "u1".into(),
            slot: at(0),
            at: at(0) + chrono::Duration::seconds(n.into()),
            error: error.into(),
            next_attempt_at: at(0) + chrono::Duration::seconds(2 * i64::from(n)),
        }],
        ..Entry::default()
    };
    assert_eq!(journal.append(&attempt(1, "denied")).await.unwrap().attempts, 1);
    assert_eq!(
        journal.append(&attempt(1, "denied")).await.unwrap().attempts,
        0,
        "a replay"
    );
    assert_eq!(
        journal
            .append(&attempt(2, "still denied"))
            .await
            .unwrap()
            .attempts,
        1
    );
    let row = journal.open_restart("u1").await.unwrap().unwrap();
    assert_eq!(row.attempts, 2);
    assert_eq!(row.last_error.as_deref(), Some("still denied"));
    assert_eq!(
        row.next_attempt_at,
        Some(Ts(at(0) + chrono::Duration::seconds(4)))
    );
}

async fn ledger_counts_summarized_slots_and_times_only_move_forward(journal: Journal) {
    journal.append(&entry()).await.unwrap();
    let summary_row = NewSlot {
        slot: at(10),
        last_slot: at(20),
        slot_count: 11,
        result: SlotResult::Missed,
        reason: Reason::OperatorDown,
        ..slot_row(at(10), SlotResult::Missed, Reason::OperatorDown)
    };
    journal
        .append(&Entry {
            slots: vec![summary_row],
            ..Entry::default()
        })
        .await
        .unwrap();
    // an older slot recorded late does not move the cursor back
    journal
        .append(&Entry {
            slots: vec![slot_row(at(3), SlotResult::Skipped, Reason::TargetPaused)],
            ..Entry::default()
        })
        .await
        .unwrap();
    let summary = journal.eru_summary("u1").await.unwrap();
    let ledger = summary.ledger.unwrap();
    assert_eq!(ledger.missed_slots, 13, "1 + 11 summarized + 1");
    assert_eq!(ledger.last_missed, Some(Ts(at(20))));
    assert_eq!(ledger.accounted_through, Some(Ts(at(20))));
    assert_eq!(
        summary
            .last_restart
            .as_ref()
            .map(|r| r.slot.to_string())
            .as_deref(),
        Some("2026-11-22T03:00:00.000Z")
    );
    // status.recent: newest slot first, whatever order they were journaled in, each with its
    // slot's restart (none here: at(0)'s restart has no slot record yet)
    let recent: Vec<(String, i64, Option<Reason>)> = summary
        .recent
        .iter()
        .map(|r| (r.record.slot.to_string(), r.record.slot_count, r.record.reason))
        .collect();
    assert_eq!(
        recent,
        [
            (
                "2026-11-22T03:10:00.000Z".to_string(),
                11,
                Some(Reason::OperatorDown)
            ),
            (
                "2026-11-22T03:03:00.000Z".to_string(),
                1,
                Some(Reason::TargetPaused)
            ),
            (
                "2026-11-22T03:01:00.000Z".to_string(),
                1,
                Some(Reason::TargetPaused)
            ),
        ]
    );
    // at most RECENT, the newest
    let more: Vec<NewSlot> = (30..40)
        .map(|m| slot_row(at(m), SlotResult::Skipped, Reason::Suspended))
        .collect();
    journal
        .append(&Entry {
            slots: more,
            ..Entry::default()
        })
        .await
        .unwrap();
    let recent = journal.eru_summary("u1").await.unwrap().recent;
    let slots: Vec<String> = recent.iter().map(|r| r.record.slot.to_string()).collect();
    assert_eq!(
        slots,
        ["39", "38", "37", "36", "35"].map(|m| format!("2026-11-22T03:{m}:00.000Z"))
    );
}

async fn a_seed_starts_an_empty_ledger_once_and_advances_move_the_cursor(journal: Journal) {
    let seed = LedgerSeed {
        object: object(),
        accounted_through: Some(at(30)),
        missed_slots: 7,
        last_missed: Some(at(29)),
        ..LedgerSeed::default()
    };
    let seeded = Entry {
        seed: Some(seed.clone()),
        slots: vec![slot_row(at(31), SlotResult::Missed, Reason::JournalLost)],
        ..Entry::default()
    };
    journal.append(&seeded).await.unwrap();
    let ledger = journal.ledger("u1").await.unwrap().unwrap();
    assert_eq!(ledger.missed_slots, 8, "the status's 7, then one more");
    assert_eq!(ledger.accounted_through, Some(Ts(at(31))));
    // a later seed (another pass that saw no ledger yet) changes nothing
    let again = Entry {
        seed: Some(LedgerSeed {
            missed_slots: 100,
            ..seed
        }),
        advances: vec![(object(), at(40))],
        ..Entry::default()
    };
    journal.append(&again).await.unwrap();
    let ledger = journal.ledger("u1").await.unwrap().unwrap();
    assert_eq!(ledger.missed_slots, 8);
    assert_eq!(ledger.accounted_through, Some(Ts(at(40))));
}

async fn epochs_from_the_one_in_force(journal: Journal) {
    let epoch = |generation: i64, from: DateTime<Utc>| NewEpoch {
        uid: "u1".into(),
        generation,
        effective_from: from,
        observed_at: from,
        spec: serde_json::json!({"schedule": "* * * * *", "startingDeadlineSeconds": 300, "target": "web"}),
    };
    let entry = Entry {
        epochs: vec![
            epoch(1, at(0)),
            epoch(2, at(10)),
            epoch(3, at(20)),
            epoch(4, at(30)),
        ],
        ..Entry::default()
    };
    assert_eq!(journal.append(&entry).await.unwrap().epochs, 4);
    assert_eq!(
        journal.append(&entry).await.unwrap().epochs,
        0,
        "one row per generation"
    );
    let generations = |rows: Vec<EpochRow>| rows.iter().map(|r| r.generation).collect::<Vec<_>>();
    assert_eq!(
        generations(journal.epochs("u1", at(15)).await.unwrap()),
        [2, 3, 4]
    );
    assert_eq!(generations(journal.epochs("u1", at(30)).await.unwrap()), [4]);
    assert_eq!(
        generations(
            journal
                .epochs("u1", at(0) - chrono::Duration::seconds(1))
                .await
                .unwrap()
        ),
        [1, 2, 3, 4]
    );
}

async fn runs_since_are_bounded_to_the_span_and_the_run_before_it(journal: Journal) {
    for (start, end) in [(0, 5), (10, 15), (20, 25), (30, 35)] {
        let run = journal.start_run("0.1.0", "test", at(start)).await.unwrap();
        journal.heartbeat(run, at(end)).await.unwrap();
    }
    let starts = |runs: Vec<OperatorRun>| runs.iter().map(|r| r.started_at.to_string()).collect::<Vec<_>>();
    assert_eq!(
        starts(journal.runs_since(at(22)).await.unwrap()),
        [ts(at(10)), ts(at(20)), ts(at(30))],
        "the run before the span (its heartbeat starts a downtime), and those alive since"
    );
    assert_eq!(starts(journal.runs_since(at(40)).await.unwrap()), [ts(at(30))]);
}

/// The runs and outages a pass reads are kept until this process commits (downtime.rs): from a
/// read kept at an earlier cursor, each later cursor gets what the query returns for it.
async fn kept_runs_and_outages_read_as_the_query_until_a_commit(journal: Journal) {
    let mut last = 0;
    for (start, end) in [(0, 5), (10, 15), (20, 25), (30, 35)] {
        last = journal.start_run("0.1.0", "test", at(start)).await.unwrap();
        journal.heartbeat(last, at(end)).await.unwrap();
    }
    for (from, to) in [(3, 4), (12, 18), (26, 29)] {
        sqlx::query("INSERT INTO journal_outages (run_id, started_at, ended_at) VALUES (1, $1, $2)")
            .bind(ts(at(from)))
            .bind(ts(at(to)))
            .execute(&journal.pool)
            .await
            .unwrap();
    }
    let mut reader = journal.reader();
    let just_after = |m| at(m) + chrono::Duration::microseconds(400);
    let cursors = [1, 4, 5, 10, 14, 15, 18, 22, 25, 29, 35, 40].map(at);
    for cursor in cursors.into_iter().chain([just_after(15), just_after(18)]) {
        // (rows written around this process's commits, above: a commit drops what was kept)
        journal.downtime.written();
        let (_, reads) = counting_reads(async { reader.runs_since(at(0)).await.unwrap() }).await;
        let (_, reads_outages) = counting_reads(async { reader.outages_since(at(0)).await.unwrap() }).await;
        assert_eq!((reads, reads_outages), (1, 1), "read, then kept");
        let (kept, reads) = counting_reads(async {
            let runs = reader.runs_since(cursor).await.unwrap();
            (runs, reader.outages_since(cursor).await.unwrap())
        })
        .await;
        assert_eq!(reads, 0, "{cursor}: from the read kept at an earlier cursor");
        journal.downtime.written();
        let read = (
            reader.runs_since(cursor).await.unwrap(),
            reader.outages_since(cursor).await.unwrap(),
        );
        assert_eq!(kept, read, "{cursor}: as the query reads");
    }
    drop(reader);
    // a commit of this process (a heartbeat) drops what was kept: the next pass reads it
    let mut reader = journal.reader();
    let _ = reader.runs_since(at(40)).await.unwrap();
    drop(reader);
    journal.heartbeat(last, at(50)).await.unwrap();
    let mut reader = journal.reader();
    let (runs, reads) = counting_reads(async { reader.runs_since(at(40)).await.unwrap() }).await;
    assert_eq!(reads, 1);
    assert_eq!(runs.last().map(|r| r.heartbeat_at.to_string()), Some(ts(at(50))));
}

#[tokio::test]
async fn a_journal_from_before_the_ledger_is_migrated_with_its_counts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("eru.db");
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true);
    let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
    let mut old = sqlx::migrate!("./migrations/sqlite");
    old.migrations = std::borrow::Cow::Owned(old.migrations[..2].to_vec());
    old.run(&pool).await.unwrap();
    for sql in [
        "INSERT INTO restarts (uid, namespace, name, target, slot, started_at, finished_at, outcome)
         VALUES ('u1', 'ns', 'web', 'web', '2026-11-22T03:00:00.000Z', '2026-11-22T03:00:00.100Z',
                 '2026-11-22T03:00:01.000Z', 'succeeded')",
        "INSERT INTO slots (uid, namespace, name, target, slot, last_slot, slot_count, result, reason, evaluated_at)
         VALUES ('u1', 'ns', 'web', 'web', '2026-11-22T03:01:00.000Z', '2026-11-22T03:04:00.000Z', 4,
                 'missed', 'operator_down', '2026-11-22T03:05:00.000Z')",
    ] {
        sqlx::query(sql).execute(&pool).await.unwrap();
    }
    pool.close().await;
    let journal = Journal::open(&path).await.unwrap();
    let ledger = journal.ledger("u1").await.unwrap().unwrap();
    assert_eq!((ledger.missed_slots, ledger.succeeded), (4, 1));
    assert_eq!(
        ledger.accounted_through.map(|t| t.to_string()).as_deref(),
        Some("2026-11-22T03:04:00.000Z")
    );
    let row = journal.restart("u1", at(0)).await.unwrap().unwrap();
    assert_eq!(
        row.decided_at, "2026-11-22T03:00:00.100Z",
        "started_at is decided_at now"
    );
    assert_eq!(row.patched_at, None, "unknown for old rows: not invented");
}

async fn transition_detail_round_trips(journal: Journal) {
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
        ("Waiting", "Restarting")
    );
}

async fn runs_record_start_heartbeat_and_stop(journal: Journal) {
    let run = journal.start_run("0.1.0", "test", at(0)).await.unwrap();
    journal.heartbeat(run, at(1)).await.unwrap();
    let runs = journal.runs_since(at(0)).await.unwrap();
    assert_eq!(runs[0].heartbeat_at, Ts(at(1)));
    assert_eq!(runs[0].stopped_at, None);
    journal.stop_run(run, at(3)).await.unwrap();
    assert_eq!(
        journal.runs_since(at(0)).await.unwrap()[0].stopped_at,
        Some(Ts(at(3)))
    );
}

/// The window rule (docs/eru.md, "Operator downtime"): a run is alive until the latest of its
/// heartbeats and of the commits of its records, so a crash's downtime starts after the last
/// record it wrote, not at an older heartbeat; and a heartbeat taken before a commit that lands
/// after it never moves the run's sign of life back.
async fn a_runs_last_sign_of_life_is_its_latest_heartbeat_or_commit(journal: Journal) {
    let start = Utc::now() - chrono::Duration::seconds(60);
    let run = journal.start_run("0.1.0", "test", start).await.unwrap();
    journal
        .heartbeat(run, start + chrono::Duration::seconds(10))
        .await
        .unwrap();
    // the journal keeps milliseconds
    let before = Utc::now() - chrono::Duration::milliseconds(1);
    journal.append(&entry()).await.unwrap();
    let after = Utc::now();
    let alive = journal.runs_since(start).await.unwrap()[0].heartbeat_at.0;
    assert!(
        before <= alive && alive <= after,
        "the run's sign of life is its last commit ({before} ..= {after}), not its heartbeat: {alive}"
    );
    journal
        .heartbeat(run, start + chrono::Duration::seconds(20))
        .await
        .unwrap();
    assert_eq!(
        journal.runs_since(start).await.unwrap()[0].heartbeat_at.0,
        alive,
        "an older heartbeat written later leaves it"
    );
    // an empty entry is no record: nothing committed, nothing moves
    journal.append(&Entry::default()).await.unwrap();
    let later = Utc::now() + chrono::Duration::seconds(5);
    journal.heartbeat(run, later).await.unwrap();
    assert_eq!(
        journal.runs_since(start).await.unwrap()[0]
            .heartbeat_at
            .to_string(),
        ts(later),
        "a newer heartbeat moves it"
    );
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
    assert_eq!(err.category(), crate::error::Category::Journal);
    let text = err.to_string();
    assert!(
        text.contains("eru.db") && text.contains("corrupt"),
        "unclear error: {text}"
    );
}

#[tokio::test]
async fn a_file_another_process_locks_is_a_clear_error_after_the_busy_timeout() {
    use sqlx::{Connection, Executor};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("eru.db");
    Journal::open(&path).await.unwrap().close().await;
    // what another process holding the file exclusively looks like
    let mut holder =
        sqlx::SqliteConnection::connect_with(&sqlx::sqlite::SqliteConnectOptions::new().filename(&path))
            .await
            .unwrap();
    holder
        .execute("PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE")
        .await
        .unwrap();
    // (how long it waits first is the busy timeout, a setting: asserted with the other pragmas,
    // not timed here)
    let text = Journal::open(&path).await.unwrap_err().to_string();
    assert!(
        text.contains("eru.db") && text.contains("locked by another process"),
        "unclear error: {text}"
    );
    holder.close().await.unwrap();
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

async fn retention_prunes_in_batches_and_keeps_totals_and_what_accounting_needs(journal: Journal) {
    let day = |d: i64| at(0) + chrono::Duration::days(d);
    // 30 days of one skipped slot and one finished restart a day, then one restart in progress
    for d in 0..30 {
        let mut e = entry();
        e.transitions[0].observed = d.to_string();
        e.transitions[0].at = day(d);
        e.slots = vec![slot_row(
            day(d) + chrono::Duration::hours(1),
            SlotResult::Skipped,
            Reason::TargetPaused,
        )];
        e.restarts_decided[0].slot = day(d);
        e.restarts_decided[0].decided_at = day(d);
        e.restarts_finished.push(FinishedRestart {
            uid: "u1".into(),
            slot: day(d),
            finished_at: day(d),
            outcome: Outcome::Succeeded,
            reason: None,
        });
        journal.append(&e).await.unwrap();
    }
    let mut open = entry();
    open.transitions.clear();
    open.slots.clear();
    open.restarts_decided[0].slot = day(-100);
    open.restarts_decided[0].decided_at = day(-100);
    journal.append(&open).await.unwrap();
    let epoch = |generation: i64, from: DateTime<Utc>| NewEpoch {
        uid: "u1".into(),
        generation,
        effective_from: from,
        observed_at: from,
        spec: serde_json::json!({}),
    };
    journal
        .append(&Entry {
            epochs: vec![epoch(1, day(-200)), epoch(2, day(5)), epoch(3, day(25))],
            ..Entry::default()
        })
        .await
        .unwrap();
    // journal outages: one long gone, one before the cutoff and the cursor, one after the cutoff
    let mut conn = journal.pool.acquire().await.unwrap();
    for (n, d) in [-50, 10, 25].into_iter().enumerate() {
        let start = day(d) - chrono::Duration::seconds(12);
        write::outage_on(&mut conn, Some(n as i64), start, day(d))
            .await
            .unwrap();
    }
    drop(conn);
    let before = journal.ledger("u1").await.unwrap().unwrap();

    let cutoff = day(20);
    let mut batches = 0;
    let mut pruned = Pruned::default();
    loop {
        let p = journal.prune(cutoff, 7).await.unwrap();
        if p.total() == 0 {
            break;
        }
        assert!(
            p.slots <= 7 && p.restarts <= 7 && p.transitions <= 7,
            "batched: {p:?}"
        );
        pruned.slots += p.slots;
        pruned.restarts += p.restarts;
        pruned.transitions += p.transitions;
        pruned.epochs += p.epochs;
        pruned.outages += p.outages;
        batches += 1;
    }
    assert!(batches >= 3, "{batches} batches");
    assert_eq!((pruned.slots, pruned.restarts, pruned.transitions), (20, 20, 20));
    assert_eq!(
        pruned.epochs, 1,
        "generation 1 is superseded by 2 before the cutoff and the cursor"
    );
    assert_eq!(pruned.outages, 2, "the outages that ended before the cutoff");
    let outages = journal.outages_since(day(-100)).await.unwrap();
    assert_eq!(
        outages.iter().map(|o| o.ended_at.to_string()).collect::<Vec<_>>(),
        [ts(day(25))]
    );
    let all = Filter {
        limit: 1000,
        ..Filter::default()
    };
    assert_eq!(journal.missed(&all).await.unwrap().len(), 10);
    let restarts = journal.restarts(&all).await.unwrap();
    assert_eq!(
        restarts.len(),
        11,
        "the 10 newest and the one in progress, however old"
    );
    assert!(journal.open_restart("u1").await.unwrap().is_some());
    assert_eq!(
        journal.ledger("u1").await.unwrap().unwrap(),
        before,
        "totals unchanged"
    );
    assert_eq!(
        row_sums(&journal).await,
        [("u1".to_string(), 0, 10)],
        "the rows' sums follow the rows: 10 are left"
    );
    let kept: Vec<i64> = journal
        .epochs("u1", day(30))
        .await
        .unwrap()
        .iter()
        .map(|e| e.generation)
        .collect();
    assert_eq!(kept, [3], "the epoch in force at the cursor stays");
    assert_eq!(journal.epochs("u1", day(10)).await.unwrap()[0].generation, 2);
}

async fn concurrent_appends_share_commits_and_a_bad_entry_fails_alone(journal: Journal) {
    let batches = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = batches.clone();
    journal.observe_batches(Box::new(move |size, _| seen.lock().unwrap().push(size)));
    let mut tasks = Vec::new();
    for i in 0..200u32 {
        let journal = journal.clone();
        tasks.push(tokio::spawn(async move {
            let mut e = entry();
            e.transitions[0].observed = i.to_string();
            e.restarts_decided.clear();
            e.slots[0].slot = at(0) + chrono::Duration::seconds(i.into());
            e.slots[0].last_slot = e.slots[0].slot;
            if i == 77 {
                e.slots[0].slot_count = 0; // refused by the table's CHECK
            }
            journal.append(&e).await
        }));
    }
    let mut failed = Vec::new();
    for (i, task) in tasks.into_iter().enumerate() {
        if task.await.unwrap().is_err() {
            failed.push(i);
        }
    }
    assert_eq!(failed, [77], "only the bad entry fails");
    let all = Filter {
        limit: 1000,
        ..Filter::default()
    };
    assert_eq!(
        journal.transitions(&all).await.unwrap().len(),
        199,
        "its transition went with it"
    );
    assert_eq!(journal.ledger("u1").await.unwrap().unwrap().missed_slots, 199);
    let batches = batches.lock().unwrap();
    assert_eq!(batches.iter().sum::<usize>(), 200);
    assert!(
        batches.len() < 100,
        "200 concurrent appends in {} commits",
        batches.len()
    );
}

async fn open_restarts_filter_by_namespace_or_not(journal: Journal) {
    // `$1 IS NULL OR namespace = $1` with a NULL and with a value: PostgreSQL must type the
    // parameter (text) in both places
    let mut other = entry();
    other.transitions.clear();
    other.slots.clear();
    other.restarts_decided[0].object = ObjectKey {
        namespace: "other".into(),
        uid: "u2".into(),
        ..object()
    };
    journal.append(&entry()).await.unwrap();
    journal.append(&other).await.unwrap();
    assert_eq!(journal.open_restarts(None).await.unwrap().len(), 2);
    let ns = journal.open_restarts(Some("ns")).await.unwrap();
    assert_eq!(ns.iter().map(|r| r.uid.as_str()).collect::<Vec<_>>(), ["u1"]);
    assert!(journal.open_restarts(Some("none")).await.unwrap().is_empty());
}

async fn listings_filter_and_page_alike(journal: Journal) {
    for i in 0..25u32 {
        let mut e = entry();
        e.transitions[0].observed = i.to_string();
        e.transitions[0].at = at(i);
        e.slots[0] = slot_row(
            at(i) + chrono::Duration::seconds(30),
            SlotResult::Missed,
            Reason::OperatorDown,
        );
        e.restarts_decided[0].slot = at(i);
        e.restarts_decided[0].decided_at = at(i);
        if i % 5 == 0 {
            e.restarts_decided[0].object.name = "api".into();
        }
        if i % 6 == 0 {
            // a namesake: "web" deleted and created again has another uid
            e.restarts_decided[0].object.uid = "u-again".into();
            e.slots[0].object.uid = "u-again".into();
        }
        journal.append(&e).await.unwrap();
    }
    // keyset pages, newest first, `limit + 1` rows to tell whether more follow
    let mut filter = Filter {
        limit: 10,
        ..Filter::default()
    };
    let mut seen = Vec::new();
    loop {
        let mut rows = journal.restarts(&filter).await.unwrap();
        let more = rows.len() > 10;
        rows.truncate(10);
        seen.extend(rows.iter().map(|r| r.id));
        if !more {
            break;
        }
        filter.before = rows.last().map(|r| r.id);
    }
    assert_eq!(seen.len(), 25);
    assert!(seen.windows(2).all(|w| w[0] > w[1]), "newest first: {seen:?}");
    let by_name = Filter {
        name: Some("api".into()),
        namespace: Some("ns".into()),
        limit: 100,
        ..Filter::default()
    };
    assert_eq!(journal.restarts(&by_name).await.unwrap().len(), 5);
    // by uid: only that ledger, not its namesake's (i = 0, 6, 12, 18, 24)
    let by_uid = |uid: &str| Filter {
        name: Some("web".into()),
        uid: Some(uid.into()),
        limit: 100,
        ..Filter::default()
    };
    assert_eq!(journal.slot_records(&by_uid("u-again")).await.unwrap().len(), 5);
    assert_eq!(journal.missed(&by_uid("u-again")).await.unwrap().len(), 5);
    assert_eq!(journal.slot_records(&by_uid("u1")).await.unwrap().len(), 20);
    assert_eq!(
        journal.restarts(&by_uid("u-again")).await.unwrap().len(),
        4,
        "(the restart of i = 0 is named api)"
    );
    // time bounds compare fixed-width text: byte order must be time order
    let window = Filter {
        since: Some(ts(at(10))),
        until: Some(ts(at(20))),
        limit: 100,
        ..Filter::default()
    };
    assert_eq!(journal.restarts(&window).await.unwrap().len(), 10);
    assert_eq!(journal.transitions(&window).await.unwrap().len(), 10);
    let missed = Filter {
        reason: Some("operator_down".into()),
        since: Some(ts(at(24))),
        limit: 100,
        ..Filter::default()
    };
    assert_eq!(journal.missed(&missed).await.unwrap().len(), 1);
    // the HTTP API's authorisation scope: a set of namespaces, in the query (`s.` in the join)
    let scoped = |namespaces: &[&str]| Filter {
        namespaces: Some(namespaces.iter().map(|n| n.to_string()).collect()),
        limit: 100,
        ..Filter::default()
    };
    assert_eq!(
        journal.restarts(&scoped(&["ns", "other"])).await.unwrap().len(),
        25
    );
    assert_eq!(
        journal
            .slot_records(&scoped(&["other", "ns"]))
            .await
            .unwrap()
            .len(),
        25
    );
    assert_eq!(journal.transitions(&scoped(&["ns"])).await.unwrap().len(), 25);
    assert!(journal.missed(&scoped(&["other"])).await.unwrap().is_empty());
    assert!(journal.restarts(&scoped(&[])).await.unwrap().is_empty());
}

#[tokio::test]
async fn odd_file_names_are_opened_as_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a b?c#d%25e.db");
    let journal = Journal::connect(path.to_str().unwrap()).await.unwrap();
    assert_eq!(journal.backend(), Backend::Sqlite);
    journal.append(&entry()).await.unwrap();
    journal.close().await;
    assert!(
        path.exists(),
        "{:?}",
        std::fs::read_dir(dir.path()).unwrap().collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_file_journal_is_wal_with_full_sync_on_every_connection() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(&dir.path().join("eru.db")).await.unwrap();
    // more connections than the pool keeps idle: each gets the settings
    let mut conns = Vec::new();
    for _ in 0..3 {
        conns.push(journal.pool.acquire().await.unwrap());
    }
    for conn in &mut conns {
        let mut setting = async |pragma: &str| -> String {
            let row = sqlx::query(sqlx::AssertSqlSafe(format!("PRAGMA {pragma}")))
                .fetch_one(&mut **conn)
                .await
                .unwrap();
            row.try_get::<String, _>(0)
                .or_else(|_| row.try_get::<i64, _>(0).map(|n| n.to_string()))
                .unwrap()
        };
        assert_eq!(setting("journal_mode").await, "wal");
        assert_eq!(setting("synchronous").await, "2", "FULL");
        assert_eq!(setting("busy_timeout").await, "5000");
        assert_eq!(setting("foreign_keys").await, "1");
        assert_eq!(setting("temp_store").await, "2", "MEMORY");
    }
}

async fn a_free_text_nul_is_kept_as_a_replacement_character(journal: Journal) {
    journal.append(&entry()).await.unwrap();
    let attempt = Entry {
        attempts: vec![FailedAttempt {
            uid: "u1".into(),
            slot: at(0),
            at: at(1),
            error: "bad\0byte".into(),
            next_attempt_at: at(2),
        }],
        ..Entry::default()
    };
    journal.append(&attempt).await.unwrap();
    let row = journal.open_restart("u1").await.unwrap().unwrap();
    assert_eq!(row.last_error.as_deref(), Some("bad\u{FFFD}byte"));
}

/// Makes every later mark of a notification delivered fail (a trigger refuses it), as a full disk
/// would: the other statements still work. For the notification delivery's tests.
pub(crate) async fn refuse_delivered_marks(journal: &Journal) {
    let statements: &[&str] = match journal.backend() {
        Backend::Sqlite => &["CREATE TRIGGER refuse_delivered BEFORE UPDATE ON notifications
                              WHEN NEW.delivered_at IS NOT NULL
                              BEGIN SELECT RAISE(ABORT, 'the disk is full'); END"],
        Backend::Postgres => &[
            "CREATE FUNCTION refuse_delivered() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN RAISE EXCEPTION 'the disk is full'; END $$",
            "CREATE TRIGGER refuse_delivered BEFORE UPDATE ON notifications FOR EACH ROW
             WHEN (NEW.delivered_at IS NOT NULL) EXECUTE FUNCTION refuse_delivered()",
        ],
    };
    for sql in statements {
        sqlx::query(sqlx::AssertSqlSafe(*sql))
            .execute(&journal.pool)
            .await
            .unwrap();
    }
}

/// Makes every later transaction that journals a transition or a heartbeat fail at its COMMIT,
/// as a full disk or a database gone away does (a deferred foreign key checked then); the
/// returned statement lets them through again.
async fn refuse_commits(journal: &Journal) -> &'static str {
    let function = "CREATE FUNCTION gate_write() RETURNS trigger LANGUAGE plpgsql AS
                    $$ BEGIN INSERT INTO gated VALUES (1); RETURN NULL; END $$";
    let statements: &[&str] = match journal.backend() {
        Backend::Sqlite => &[
            "CREATE TABLE gate (id INTEGER PRIMARY KEY)",
            "CREATE TABLE gated (gate INTEGER NOT NULL REFERENCES gate (id) DEFERRABLE INITIALLY DEFERRED)",
            "CREATE TRIGGER gate_transitions AFTER INSERT ON transitions BEGIN INSERT INTO gated VALUES (1); END",
            "CREATE TRIGGER gate_heartbeats AFTER UPDATE ON operator_runs BEGIN INSERT INTO gated VALUES (1); END",
        ],
        Backend::Postgres => &[
            "CREATE TABLE gate (id BIGINT PRIMARY KEY)",
            "CREATE TABLE gated (gate BIGINT NOT NULL REFERENCES gate (id) DEFERRABLE INITIALLY DEFERRED)",
            function,
            "CREATE TRIGGER gate_transitions AFTER INSERT ON transitions FOR EACH ROW EXECUTE FUNCTION gate_write()",
            "CREATE TRIGGER gate_heartbeats AFTER UPDATE ON operator_runs FOR EACH ROW EXECUTE FUNCTION gate_write()",
        ],
    };
    for sql in statements {
        sqlx::query(sqlx::AssertSqlSafe(*sql))
            .execute(&journal.pool)
            .await
            .unwrap();
    }
    "INSERT INTO gate (id) VALUES (1)"
}

async fn an_outage_is_journaled_by_the_first_write_that_works_again(journal: Journal) {
    let run = journal.start_run("0.1.0", "test", Utc::now()).await.unwrap();
    journal.heartbeat(run, Utc::now()).await.unwrap();
    let last_worked = Utc::now();
    assert_eq!(journal.outage_now(Utc::now()), None);
    let let_through = refuse_commits(&journal).await;

    // writes fail: an outage is open from the last write that worked, in memory only
    let failed_at = Utc::now();
    assert!(journal.append(&entry()).await.is_err());
    let (since, until) = journal.outage_now(Utc::now()).expect("an open outage");
    assert!(since <= last_worked && since < failed_at, "{since} {last_worked}");
    assert!(until > failed_at);
    assert!(
        journal.heartbeat(run, Utc::now()).await.is_err(),
        "a heartbeat fails the same"
    );
    assert_eq!(
        journal.outage_now(Utc::now()).map(|o| o.0),
        Some(since),
        "still the same outage"
    );
    let long_ago = since - chrono::Duration::days(1);
    assert!(
        journal.outages_since(long_ago).await.unwrap().is_empty(),
        "nothing journaled while writes fail (not even the outage: its insert failed with them)"
    );

    // the first write that works journals the outage with itself
    sqlx::query(let_through).execute(&journal.pool).await.unwrap();
    // at the journal's precision (milliseconds): the end it stores is truncated the same way
    let back = parse_ts(&ts(Utc::now())).unwrap();
    journal.append(&entry()).await.unwrap();
    let done = Utc::now();
    assert_eq!(journal.outage_now(Utc::now()), None);
    let outages = journal.outages_since(long_ago).await.unwrap();
    assert_eq!(outages.len(), 1, "{outages:?}");
    let outage = &outages[0];
    assert_eq!(outage.run_id, Some(run));
    assert_eq!(
        outage.started_at.to_string(),
        ts(since),
        "at the journal's precision"
    );
    let ended = *outage.ended_at;
    assert!(back <= ended && ended <= done, "{back} {ended} {done}");
    assert_eq!(
        journal.ledger("u1").await.unwrap().unwrap().missed_slots,
        1,
        "the entry went in with it"
    );
    // bounded by its end: an outage that ended before a cursor is not read for it
    assert!(journal.outages_since(ended).await.unwrap().is_empty());

    // writes keep working: no second outage; a later one starts after the last write that worked
    journal.heartbeat(run, Utc::now()).await.unwrap();
    assert_eq!(journal.outages_since(long_ago).await.unwrap().len(), 1);
    let mut conn = journal.pool.acquire().await.unwrap();
    write::outage_on(&mut conn, Some(run), since, done).await.unwrap();
    drop(conn);
    assert_eq!(
        journal.outages_since(long_ago).await.unwrap().len(),
        1,
        "written once per run and start"
    );
}

#[test]
fn journal_times_are_written_as_chrono_writes_them() {
    use chrono::SecondsFormat;
    let base = Utc.with_ymd_and_hms(1969, 12, 31, 23, 59, 58).unwrap();
    for step in 0..20_000i64 {
        // scattered over a century, milliseconds included
        let t = base + chrono::Duration::milliseconds(step * 7_919_993_417 % 3_155_760_000_000);
        assert_eq!(ts(t), t.to_rfc3339_opts(SecondsFormat::Millis, true));
        assert_eq!(Ts(t).to_string(), ts(t));
    }
    let leap = chrono::NaiveDate::from_ymd_opt(2016, 12, 31)
        .unwrap()
        .and_hms_milli_opt(23, 59, 59, 1_500)
        .unwrap()
        .and_utc();
    assert_eq!(ts(leap), leap.to_rfc3339_opts(SecondsFormat::Millis, true));
}

#[test]
fn journal_times_are_read_as_chrono_reads_them() {
    let chrono_reads = |s: &str| {
        DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    };
    let base = Utc.with_ymd_and_hms(1969, 12, 31, 23, 59, 58).unwrap();
    for step in 0..20_000i64 {
        let t = base + chrono::Duration::milliseconds(step * 7_919_993_417 % 3_155_760_000_000);
        assert_eq!(parse_ts(&ts(t)), Some(t));
        assert_eq!(parse_ts(&ts(t)), chrono_reads(&ts(t)));
    }
    // off the fast path's shape or its calendar: as chrono reads them (or not)
    for text in [
        "2024-02-29T12:00:00.250Z",
        "2026-02-29T12:00:00.000Z",
        "2026-02-30T00:00:00.000Z",
        "2026-13-01T00:00:00.000Z",
        "2026-11-24T24:00:00.000Z",
        "2016-12-31T23:59:60.500Z",
        "2026-11-24T10:00:00Z",
        "2026-11-24T10:00:00.123456Z",
        "2026-11-24T11:00:00.000+01:00",
        "2026-11-24t10:00:00.000z",
        "2026-1a-24T10:00:00.000Z",
        "+2026-11-24T10:00:00.00Z",
        "",
        "not a time",
    ] {
        assert_eq!(parse_ts(text), chrono_reads(text), "{text}");
    }
}

/// The audit's one-document read of a window (json_group_array / json_agg) gives exactly the
/// records, with their restarts, that the row-by-row listing gives; the window's bounds and its
/// cap hold.
async fn an_audits_window_reads_the_records_the_listing_reads(journal: Journal) {
    journal.append(&entry()).await.unwrap();
    let mut windowed = slot_row(at(3), SlotResult::Missed, Reason::OperatorDown);
    windowed.slot_count = 2;
    windowed.last_slot = at(4);
    windowed.window = Some((at(2), at(5)));
    windowed.note = Some("a \"quoted\" note, ünïcode".into());
    let more = Entry {
        restarts_patched: vec![PatchedRestart {
            landed_generation: None,
            uid: "u1".into(),
            slot: at(0),
            patched_at: at(0) + chrono::Duration::milliseconds(30),
        }],
        restarts_finished: vec![FinishedRestart {
            uid: "u1".into(),
            slot: at(0),
            finished_at: at(2),
            outcome: Outcome::Succeeded,
            reason: None,
        }],
        slots: vec![
            slot_row(at(0), SlotResult::Fired, Reason::Scheduled),
            windowed,
            slot_row(at(20), SlotResult::Skipped, Reason::TargetPaused),
        ],
        ..Entry::default()
    };
    journal.append(&more).await.unwrap();
    let mut listed = journal
        .slot_records(&Filter {
            limit: 100,
            ..Filter::default()
        })
        .await
        .unwrap();
    listed.retain(|r| r.record.slot.0 < at(10));
    listed.sort_by_key(|r| (r.record.slot, r.record.id));
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert_eq!(listed[0].restart_outcome, Some(Outcome::Succeeded));
    let read = journal
        .audit_rows(at(0), at(10), (None, None), None, reading(100, false))
        .await
        .unwrap();
    assert_eq!(read.records, listed);
    assert!(!read.truncated);
    let capped = journal
        .audit_rows(at(0), at(10), (None, None), None, reading(2, false))
        .await
        .unwrap();
    assert_eq!((capped.records.len(), capped.truncated), (2, true));
    // what `GET /audit` reads: the same records, counted, by Eru
    let counted = AuditReading {
        records: false,
        ..reading(100, false)
    };
    let tallied = journal
        .audit_rows(at(0), at(10), (None, None), None, counted)
        .await
        .unwrap();
    let expected: Vec<TallyRow> = listed.iter().map(TallyRow::from).collect();
    assert_eq!(tallied.tallies, [("u1".to_string(), expected)]);
    assert!(tallied.records.is_empty() && !tallied.truncated);
    let capped = AuditReading { cap: 2, ..counted };
    let capped = (journal.audit_rows(at(0), at(10), (None, None), None, capped))
        .await
        .unwrap();
    assert_eq!((capped.tallies[0].1.len(), capped.truncated), (2, true));
}

/// Migration 0008: a slot record whose last slot is before its first is refused, by the append
/// (which fails whole) and by hand, inserted or updated; a valid one still goes in.
async fn a_slot_record_ending_before_it_starts_is_refused(journal: Journal) {
    let forged = Entry {
        slots: vec![NewSlot {
            last_slot: at(1),
            slot_count: 2,
            ..slot_row(at(3), SlotResult::Missed, Reason::OperatorDown)
        }],
        ..Entry::default()
    };
    let error = journal
        .append(&forged)
        .await
        .expect_err("a forged record is refused");
    assert!(error.to_string().contains("last_slot"), "{error}");
    let by_hand = |last: &str| {
        format!(
            "INSERT INTO slots (uid, namespace, name, target, slot, last_slot, result, reason, evaluated_at) \
             VALUES ('u', 'ns', 'web', 'web', '2026-11-22T03:05:00.000Z', '{last}', 'missed', 'operator_down', \
             '2026-11-22T03:05:00.000Z')"
        )
    };
    let refused = sqlx::query(sqlx::AssertSqlSafe(by_hand("2026-11-22T03:04:59.999Z")))
        .execute(&journal.pool)
        .await;
    assert!(refused.is_err(), "{refused:?}");
    sqlx::query(sqlx::AssertSqlSafe(by_hand("2026-11-22T03:05:00.000Z")))
        .execute(&journal.pool)
        .await
        .expect("a record of one slot");
    let moved = sqlx::query("UPDATE slots SET last_slot = '2026-11-22T03:00:00.000Z' WHERE uid = 'u'")
        .execute(&journal.pool)
        .await;
    assert!(moved.is_err(), "an update is refused too: {moved:?}");
    assert!(
        journal.append(&entry()).await.is_ok(),
        "valid records still go in"
    );
}

async fn pending(journal: &Journal, sink: &str) -> Vec<NoticeRow> {
    journal.pending_notices(sink, "u1", 100).await.unwrap()
}

fn notice(sink: &str, of: NoticeOf, event: crate::vocab::NoticeEvent) -> NewNotice {
    NewNotice {
        sink: sink.into(),
        object: object(),
        of,
        event,
        last_slot: at(1),
        slot_count: 1,
        reason: Some("target_paused".into()),
        note: None,
        created_at: at(1),
    }
}

/// The outbox: a notification is written only with the record it reports, and only when that
/// record is new (a replay adds none, even once the first was delivered); a failure is tried
/// again at its time with the error kept; a delivered or dropped one is never due again; the
/// audit's facts count them.
async fn notifications_are_written_with_their_new_record_and_settled_once(journal: Journal) {
    use crate::vocab::NoticeEvent::*;
    let mut with_notices = entry();
    with_notices.notices = vec![
        notice("a", NoticeOf::Slot(at(1)), SlotSkipped),
        notice("b", NoticeOf::Slot(at(1)), SlotSkipped),
        // no record of this slot in the entry: never written
        notice("a", NoticeOf::Slot(at(7)), SlotMissed),
    ];
    journal.append(&with_notices).await.unwrap();
    for sink in ["a", "b"] {
        assert_eq!(journal.due_for(sink, at(1), 10).await.unwrap(), ["u1"]);
        assert_eq!(journal.next_due(sink).await.unwrap(), Some(at(1)));
    }
    assert_eq!(journal.pending_sinks().await.unwrap().len(), 2);
    assert!(journal.due_for("c", at(1), 10).await.unwrap().is_empty());
    assert_eq!(journal.next_due("c").await.unwrap(), None);
    let due = [pending(&journal, "a").await, pending(&journal, "b").await].concat();
    let keys: Vec<(&str, &str)> = due.iter().map(|n| (n.sink.as_str(), n.key.as_str())).collect();
    assert_eq!(
        keys,
        [
            ("a", "ns/web/2026-11-22T03:01:00.000Z/slot_skipped"),
            ("b", "ns/web/2026-11-22T03:01:00.000Z/slot_skipped")
        ]
    );
    assert!(
        journal.due_for("a", at(0), 10).await.unwrap().is_empty(),
        "not due before it was written"
    );
    journal.notices_delivered(&[due[0].id], at(2)).await.unwrap();
    journal
        .notices_failed(&[due[1].id], at(4), "HTTP 503")
        .await
        .unwrap();
    // the same records again (a replayed pass): nothing new
    journal.append(&with_notices).await.unwrap();
    assert!(journal.due_for("b", at(3), 10).await.unwrap().is_empty());
    assert_eq!(journal.next_due("b").await.unwrap(), Some(at(4)));
    assert_eq!(journal.due_for("b", at(4), 10).await.unwrap(), ["u1"]);
    assert_eq!(journal.next_due("a").await.unwrap(), None, "delivered");
    let retried = pending(&journal, "b").await;
    assert_eq!(retried.len(), 1);
    assert_eq!(
        (retried[0].attempts, retried[0].last_error.as_deref()),
        (1, Some("HTTP 503"))
    );
    let facts = journal.outbox_facts(Some("ns")).await.unwrap();
    assert_eq!((facts.pending, facts.delivered, facts.dropped), (1, 1, 0));
    assert_eq!(facts.oldest_pending, Some(Ts(at(1))));
    assert_eq!(journal.outbox_facts(Some("other")).await.unwrap().pending, 0);
    journal
        .notices_dropped(&[retried[0].id], at(5), "expired")
        .await
        .unwrap();
    // settling a settled row changes nothing
    journal.notices_delivered(&[retried[0].id], at(6)).await.unwrap();
    let facts = journal.outbox_facts(None).await.unwrap();
    assert_eq!((facts.pending, facts.delivered, facts.dropped), (0, 1, 1));
    assert_eq!(
        facts.drops,
        [OutboxDrops {
            sink: "b".into(),
            reason: "expired".into(),
            count: 1,
            last: Ts(at(5))
        }]
    );
    assert_eq!(
        facts.summary(),
        "0 pending; 1 delivered, 1 dropped (1 expired to b)"
    );
    assert!(journal.due_for("b", at(50), 10).await.unwrap().is_empty());
    // the end of a restart: written with its finish, once
    let mut finished = entry();
    finished.restarts_finished = vec![FinishedRestart {
        uid: "u1".into(),
        slot: at(0),
        finished_at: at(3),
        outcome: Outcome::Failed,
        reason: Some("timed out".into()),
    }];
    finished.notices = vec![notice("a", NoticeOf::Finished(at(0)), RestartFailed)];
    journal.append(&finished).await.unwrap();
    journal.append(&finished).await.unwrap();
    let due = pending(&journal, "a").await;
    assert_eq!(due.len(), 1, "{due:?}");
    assert_eq!(due[0].key, "ns/web/2026-11-22T03:00:00.000Z/restart_failed");
    // a hold: no record, written once per sink by its key, however many passes find it
    let held = Entry {
        notices: vec![notice("a", NoticeOf::Held(at(8)), SlotHeld)],
        ..Entry::default()
    };
    journal.append(&held).await.unwrap();
    journal.append(&held).await.unwrap();
    let keys: Vec<String> = pending(&journal, "a").await.into_iter().map(|n| n.key).collect();
    assert_eq!(
        keys,
        [
            "ns/web/2026-11-22T03:00:00.000Z/restart_failed",
            "ns/web/2026-11-22T03:08:00.000Z/slot_held"
        ]
    );
    // settled rows go once older than the cutoff; pending ones stay
    assert_eq!(journal.prune_notices(at(10), 100).await.unwrap(), 2);
    assert_eq!(journal.outbox_facts(None).await.unwrap().pending, 2);
}

async fn a_full_outbox_gives_up_its_oldest(journal: Journal) {
    use crate::vocab::NoticeEvent::SlotSkipped;
    let mut e = Entry::default();
    for minute in 1..=5 {
        e.slots
            .push(slot_row(at(minute), SlotResult::Skipped, Reason::TargetPaused));
        e.notices
            .push(notice("a", NoticeOf::Slot(at(minute)), SlotSkipped));
    }
    journal.append(&e).await.unwrap();
    assert_eq!(journal.pending_count().await.unwrap(), 5);
    // each sink's backlog (its gauges): how many, and since when
    assert_eq!(
        journal.pending_by_sink().await.unwrap(),
        [("a".to_string(), 5, Some(at(1)))]
    );
    let due = pending(&journal, "a").await;
    let oldest = journal.oldest_pending(PendingOf::All, 2).await.unwrap();
    assert_eq!(
        oldest,
        vec![(due[0].id, "a".to_string()), (due[1].id, "a".to_string())]
    );
    assert_eq!(journal.oldest_pending(PendingOf::Sink("b"), 9).await.unwrap(), []);
    let written_before = PendingOf::WrittenBefore("a", at(1) + chrono::Duration::seconds(1));
    assert_eq!(journal.oldest_pending(written_before, 9).await.unwrap().len(), 5);
    let written_before = PendingOf::WrittenBefore("a", at(1));
    assert_eq!(journal.oldest_pending(written_before, 9).await.unwrap(), []);
}

async fn a_manual_run_moves_once_through_its_outcomes(journal: Journal) {
    use crate::vocab::RunOutcome;
    let (uid, token) = ("u1".to_string(), "deploy-42".to_string());
    let requested = Entry {
        runs: vec![RunChange::Requested {
            object: object(),
            target: "web".into(),
            token: token.clone(),
            requested_by: Some("kubectl-annotate".into()),
            requested_at: at(0),
            deadline_at: at(5),
            reason: Some("blackout: maintenance".into()),
        }],
        ..Entry::default()
    };
    assert_eq!(journal.append(&requested).await.unwrap().runs, 1);
    assert_eq!(
        journal.append(&requested).await.unwrap().runs,
        0,
        "a replay adds nothing"
    );
    let row = journal.manual_run(&uid, &token).await.unwrap().unwrap();
    assert_eq!(
        (row.outcome, row.reason.as_deref(), row.requested_by.as_deref()),
        (
            RunOutcome::Waiting,
            Some("blackout: maintenance"),
            Some("kubectl-annotate")
        )
    );
    let steps = Entry {
        runs: vec![
            RunChange::Decided {
                uid: uid.clone(),
                token: token.clone(),
                at: at(1),
            },
            RunChange::Attempt {
                uid: uid.clone(),
                token: token.clone(),
                at: at(1),
                error: "denied".into(),
                next_attempt_at: at(2),
            },
            RunChange::Patched {
                uid: uid.clone(),
                token: token.clone(),
                at: at(2),
            },
        ],
        ..Entry::default()
    };
    assert_eq!(journal.append(&steps).await.unwrap().runs, 3);
    assert_eq!(
        journal.append(&steps).await.unwrap().runs,
        0,
        "a replay adds nothing"
    );
    let open = journal.open_manual_run(&uid).await.unwrap().unwrap();
    assert_eq!(
        (open.outcome, open.attempts, open.reason),
        (RunOutcome::InProgress, 1, None)
    );
    assert_eq!(journal.open_manual_runs(Some("ns")).await.unwrap().len(), 1);
    assert!(journal.open_manual_runs(Some("other")).await.unwrap().is_empty());
    // its end's notification is written with the end, once: not by a replay, nor by an end
    // that changes nothing
    let end = |outcome| {
        let event = crate::vocab::NoticeEvent::of_run(outcome).unwrap();
        let of = NoticeOf::Run {
            token: token.clone(),
            ended: at(3),
        };
        Entry {
            runs: vec![RunChange::Ended {
                uid: uid.clone(),
                token: token.clone(),
                at: at(3),
                outcome,
                reason: Some("the rollout finished".into()),
            }],
            notices: vec![notice("a", of, event)],
            ..Entry::default()
        }
    };
    assert_eq!(journal.append(&end(RunOutcome::Succeeded)).await.unwrap().runs, 1);
    assert_eq!(
        journal.append(&end(RunOutcome::Failed)).await.unwrap().runs,
        0,
        "an ended run keeps its outcome"
    );
    journal.append(&end(RunOutcome::Succeeded)).await.unwrap();
    let keys: Vec<String> = pending(&journal, "a").await.into_iter().map(|n| n.key).collect();
    assert_eq!(keys, ["ns/web/run/deploy-42/run_succeeded"]);
    let last = journal.last_manual_run(&uid).await.unwrap().unwrap();
    assert_eq!(last.outcome, RunOutcome::Succeeded);
    assert!(journal.open_manual_run(&uid).await.unwrap().is_none());
    let listed = journal.manual_runs(Some("ns"), (at(0), at(1)), 10).await.unwrap();
    assert_eq!(listed, vec![last]);
    assert!(
        journal
            .manual_runs(Some("ns"), (at(1), at(9)), 10)
            .await
            .unwrap()
            .is_empty()
    );
    // kept while the Eru lives, whatever its age; gone with a deleted Eru's ledger
    let live = Entry {
        advances: vec![(object(), at(0))],
        ..Entry::default()
    };
    journal.append(&live).await.unwrap();
    let pruned = journal.prune(at(59), 100).await.unwrap();
    assert_eq!(
        pruned.manual_runs, 0,
        "its Eru lives: it may still carry the token"
    );
    let deleted = Entry {
        deleted: vec![(uid.clone(), at(4))],
        ..Entry::default()
    };
    journal.append(&deleted).await.unwrap();
    let pruned = journal.prune(at(59), 100).await.unwrap();
    assert_eq!(pruned.manual_runs, 1, "its Eru was deleted before the cutoff");
}

/// Each Eru's `(uid, fired, not fired)` in its rows, as the audit's cross-check reads them.
async fn row_sums(journal: &Journal) -> Vec<(String, i64, i64)> {
    let far = at(0) + chrono::Duration::days(400);
    let rows = journal
        .audit_rows(at(0), far, (None, None), None, reading(10, true))
        .await
        .unwrap();
    let mut sums = rows.totals.expect("asked for");
    sums.sort();
    sums
}

/// The cross-check's sums are kept by the database (migration 0014), not by the operator's
/// write path, so a row forged, changed or deleted by hand moves them as it moved the full
/// read they replace (mutation: a trigger that does not fire, or counts the wrong column).
async fn the_row_sums_follow_rows_written_changed_or_deleted_by_any_hand(journal: Journal) {
    let mut e = entry();
    e.slots
        .push(slot_row(at(2), SlotResult::Fired, Reason::Scheduled));
    e.slots.push(NewSlot {
        last_slot: at(5),
        slot_count: 3,
        ..slot_row(at(3), SlotResult::Missed, Reason::OperatorDown)
    });
    journal.append(&e).await.unwrap();
    journal.append(&e).await.unwrap();
    assert_eq!(
        row_sums(&journal).await,
        [("u1".into(), 1, 4)],
        "a replay adds nothing"
    );
    let ledger = journal.ledger("u1").await.unwrap().unwrap();
    assert_eq!((ledger.fired_slots, ledger.missed_slots), (1, 4));
    let by_hand = [
        // forged: a fired row the operator never wrote
        "INSERT INTO slots (uid, namespace, name, target, slot, last_slot, slot_count, result, evaluated_at)
         VALUES ('u1', 'ns', 'web', 'web', '2026-11-22T03:09:00.000Z', '2026-11-22T03:09:00.000Z', 1, 'fired',
                 '2026-11-22T03:09:00.000Z')",
        // changed: the skipped row becomes two fired slots
        "UPDATE slots SET result = 'fired', slot_count = 2 WHERE uid = 'u1' AND slot = '2026-11-22T03:01:00.000Z'",
        // deleted: the missed run of three
        "DELETE FROM slots WHERE uid = 'u1' AND slot = '2026-11-22T03:03:00.000Z'",
    ];
    let mut sums = Vec::new();
    for sql in by_hand {
        sqlx::query(sql).execute(&journal.pool).await.unwrap();
        sums.push(row_sums(&journal).await[0].clone());
    }
    let u1 = |f, n| ("u1".to_string(), f, n);
    assert_eq!(sums, [u1(2, 4), u1(4, 3), u1(4, 0)]);
    // moved to another Eru by hand: its sums leave with it
    sqlx::query("INSERT INTO eru_ledger (uid, namespace, name) VALUES ('u2', 'ns', 'api')")
        .execute(&journal.pool)
        .await
        .unwrap();
    sqlx::query("UPDATE slots SET uid = 'u2' WHERE slot = '2026-11-22T03:09:00.000Z'")
        .execute(&journal.pool)
        .await
        .unwrap();
    assert_eq!(row_sums(&journal).await, [u1(3, 0), ("u2".into(), 1, 0)]);
}

/// A restart of `slot` decided at `decided`, patched, ended with `outcome`.
fn ended_restart(slot: DateTime<Utc>, decided: DateTime<Utc>, outcome: Outcome) -> Entry {
    let mut e = entry();
    e.transitions.clear();
    e.slots.clear();
    e.restarts_decided[0].slot = slot;
    e.restarts_decided[0].decided_at = decided;
    e.restarts_patched.push(PatchedRestart {
        uid: "u1".into(),
        slot,
        patched_at: decided,
        landed_generation: None,
    });
    e.restarts_finished.push(FinishedRestart {
        uid: "u1".into(),
        slot,
        finished_at: decided,
        outcome,
        reason: Some("timed out".into()),
    });
    e
}

/// Pauses on failure in the journal (mutations: a replay that adds a second row, a resume that
/// moves twice, `>` for `>=` at the resume): the pause is keyed by its Eru and instant, resumed
/// once (its first resumer kept), and the row of ended restarts counts from the resume on, a
/// restart decided in the resuming pass included; retention keeps an Eru's latest pause.
async fn a_pause_is_written_once_resumed_once_and_its_resume_starts_the_next_row(journal: Journal) {
    for (m, outcome) in [(1, Outcome::Failed), (2, Outcome::Failed)] {
        journal
            .append(&ended_restart(at(m), at(m), outcome))
            .await
            .unwrap();
    }
    let paused = Entry {
        pauses: vec![PauseChange::Paused {
            object: object(),
            since: at(3),
            why: "2 restarts in a row".into(),
        }],
        ..Entry::default()
    };
    assert_eq!(journal.append(&paused).await.unwrap().pauses, 1);
    assert_eq!(
        journal.append(&paused).await.unwrap().pauses,
        0,
        "a replay adds nothing"
    );
    let latest = journal.latest_pause("u1").await.unwrap().unwrap();
    assert_eq!((latest.since, latest.resumed_at), (Ts(at(3)), None));
    let resumed = |by: &str| Entry {
        pauses: vec![PauseChange::Resumed {
            uid: "u1".into(),
            since: at(3),
            at: at(5),
            by: Some(by.into()),
        }],
        ..Entry::default()
    };
    assert_eq!(journal.append(&resumed("alice")).await.unwrap().pauses, 1);
    assert_eq!(journal.append(&resumed("bob")).await.unwrap().pauses, 0);
    let latest = journal.latest_pause("u1").await.unwrap().unwrap();
    assert_eq!(
        (latest.resumed_at, latest.resumed_by.as_deref()),
        (Some(Ts(at(5))), Some("alice"))
    );
    // the restart decided in the pass that resumed (at the resume's instant) counts; those before
    // the pause do not
    journal
        .append(&ended_restart(at(6), at(5), Outcome::Failed))
        .await
        .unwrap();
    let slots = |rows: Vec<EndedRow>| rows.iter().map(|r| r.slot).collect::<Vec<_>>();
    let since_resume = journal.ended_restarts("u1", Some(at(5)), 10).await.unwrap();
    assert_eq!(slots(since_resume), [Ts(at(6))]);
    let all = journal.ended_restarts("u1", None, 2).await.unwrap();
    assert_eq!(
        slots(all),
        [Ts(at(6)), Ts(at(2))],
        "newest first, at most the limit"
    );
    // long after: retention keeps the latest pause (its resume is where the row counts from)
    let far = at(0) + chrono::Duration::days(100);
    while journal.prune(far, 100).await.unwrap().total() > 0 {}
    assert_eq!(
        journal.latest_pause("u1").await.unwrap().map(|p| p.since),
        Some(Ts(at(3)))
    );
}

/// Retention of the row sums (mutation: the statement left out, or one that deletes the sums of
/// an Eru whose rows remain): a deleted Eru's sums go once its rows and ledger have gone, a live
/// Eru's stay.
async fn a_deleted_erus_row_sums_go_with_its_rows_and_ledger(journal: Journal) {
    let mut e = entry();
    e.transitions.clear();
    e.restarts_decided.clear();
    journal.append(&e).await.unwrap();
    let mut live = e.clone();
    live.slots[0].object.uid = "u2".into();
    live.slots[0].object.name = "api".into();
    journal.append(&live).await.unwrap();
    let deleted = Entry {
        deleted: vec![("u1".into(), at(3))],
        ..Entry::default()
    };
    journal.append(&deleted).await.unwrap();
    assert_eq!(row_sums(&journal).await.len(), 2);
    let far = at(0) + chrono::Duration::days(100);
    let mut pruned = Pruned::default();
    loop {
        let p = journal.prune(far, 100).await.unwrap();
        if p.total() == 0 {
            break;
        }
        pruned.slot_totals += p.slot_totals;
        pruned.ledgers += p.ledgers;
    }
    assert_eq!(
        (pruned.ledgers, pruned.slot_totals),
        (1, 1),
        "u1's ledger and sums"
    );
    let left: Vec<String> = sqlx::query_scalar("SELECT uid FROM slot_totals ORDER BY uid")
        .fetch_all(&journal.pool)
        .await
        .unwrap();
    assert_eq!(
        left,
        ["u2"],
        "a live Eru's sums stay (its rows are pruned, its ledger is not)"
    );
}

/// The term's first reads (mutations: the in-force epoch left out, an epoch before the cursor
/// let in, another Eru's restart or run taken, the namespace or the filter ignored, a chunk's
/// bounds off by one): for
/// each Eru with a ledger row, exactly what its own pass reads, on both backends.
async fn first_reads_are_what_each_erus_own_reads_read(journal: Journal) {
    use crate::vocab::RunOutcome;
    let key = |namespace: &str, name: &str, uid: &str| ObjectKey {
        kind: "Eru",
        namespace: namespace.into(),
        name: name.into(),
        uid: uid.into(),
    };
    let epoch = |uid: &str, generation: i64, from: DateTime<Utc>| NewEpoch {
        uid: uid.into(),
        generation,
        effective_from: from,
        observed_at: from,
        spec: serde_json::json!({"schedule": "* * * * *", "target": "web"}),
    };
    // u1: four epochs, its cursor between the first two's; a restart in flight, a slot record
    // and a manual run in flight
    let mut u1 = entry();
    u1.epochs = [0, 10, 20, 30]
        .into_iter()
        .zip(1..)
        .map(|(m, g)| epoch("u1", g, at(m)))
        .collect();
    u1.advances = vec![(object(), at(15))];
    u1.runs = vec![RunChange::Requested {
        object: object(),
        target: "web".into(),
        token: "t1".into(),
        requested_by: None,
        requested_at: at(0),
        deadline_at: at(5),
        reason: None,
    }];
    journal.append(&u1).await.unwrap();
    let decided = Entry {
        runs: vec![RunChange::Decided {
            uid: "u1".into(),
            token: "t1".into(),
            at: at(1),
        }],
        ..Entry::default()
    };
    journal.append(&decided).await.unwrap();
    // u2: a ledger without a cursor (its pass reads the epochs from its own)
    let u2 = Entry {
        seed: Some(LedgerSeed {
            object: key("ns", "api", "u2"),
            ..LedgerSeed::default()
        }),
        epochs: vec![epoch("u2", 1, at(0))],
        ..Entry::default()
    };
    journal.append(&u2).await.unwrap();
    // u3, in another namespace: a restart ended, its cursor after both its epochs
    let mut u3 = ended_restart(at(2), at(2), Outcome::Succeeded);
    u3.restarts_decided[0].object = key("other", "web", "u3");
    u3.restarts_patched[0].uid = "u3".into();
    u3.restarts_finished[0].uid = "u3".into();
    u3.epochs = vec![epoch("u3", 1, at(0)), epoch("u3", 2, at(5))];
    u3.advances = vec![(key("other", "web", "u3"), at(40))];
    journal.append(&u3).await.unwrap();
    // u4: epochs only, no ledger row
    let u4 = Entry {
        epochs: vec![epoch("u4", 1, at(0))],
        ..Entry::default()
    };
    journal.append(&u4).await.unwrap();

    let all = journal.first_reads(None, |_| true).await.unwrap();
    for uid in ["u1", "u2", "u3", "u4"] {
        let ledger = journal.ledger(uid).await.unwrap();
        let Some(mut read) = all.get(uid).cloned() else {
            assert!(ledger.is_none(), "{uid}: an Eru with a ledger row is read");
            continue;
        };
        assert_eq!(Some(&read.ledger), ledger.as_ref(), "{uid}");
        let cursor = read.ledger.accounted_through;
        let epochs = match cursor {
            Some(cursor) => Some(journal.epochs(uid, *cursor).await.unwrap()),
            None => None,
        };
        let first = read.take_epochs().map(Result::unwrap);
        assert_eq!(first, epochs, "{uid}: the epochs from its cursor");
        let open_restart = journal.open_restart(uid).await.unwrap();
        assert_eq!(read.open_restart.map(|r| *r), open_restart, "{uid}");
        let open_run = journal.open_manual_run(uid).await.unwrap();
        assert_eq!(read.open_run.map(|r| *r), open_run, "{uid}");
        let last_restart = match read.ledger.last_restart_slot {
            Some(slot) => journal.restart(uid, *slot).await.unwrap(),
            None => None,
        };
        assert_eq!(read.last_restart.map(|r| *r), last_restart, "{uid}");
        let last_run = journal.last_manual_run(uid).await.unwrap();
        assert_eq!(read.last_run.map(|r| *r), last_run, "{uid}");
    }
    // what each has, so the comparison above compares something
    let generations = |uid: &str| {
        let epochs = all[uid].clone().take_epochs().map(Result::unwrap);
        epochs.map(|e| e.iter().map(|r| r.generation).collect::<Vec<_>>())
    };
    assert_eq!(generations("u1"), Some(vec![2, 3, 4]));
    assert_eq!(generations("u2"), None);
    assert_eq!(generations("u3"), Some(vec![2]));
    assert!(!all.contains_key("u4"));
    assert_eq!(all["u1"].open_restart.as_ref().map(|r| r.slot), Some(Ts(at(0))));
    assert_eq!(
        all["u1"].open_run.as_ref().map(|r| (r.token.as_str(), r.outcome)),
        Some(("t1", RunOutcome::InProgress))
    );
    assert!(all["u3"].open_restart.is_none());
    assert_eq!(
        all["u3"].last_restart.as_ref().map(|r| r.outcome),
        Some(Outcome::Succeeded)
    );
    assert!(all["u3"].last_run.is_none() && all["u2"].last_run.is_none());
    // one namespace, and only the Erus kept
    let ns = (journal.first_reads(Some("ns"), |ledger| ledger.uid != "u2").await).unwrap();
    assert_eq!(ns.keys().collect::<Vec<_>>(), ["u1"]);
    assert_eq!(ns["u1"], all["u1"]);
}
