//! The leadership fence (`journal/fence.rs`): once a newer process took the journal's epoch,
//! every write path of an older one is refused by the database — the writer's batches (records,
//! silences, heartbeats), the outbox's settles and prune, retention, the run's stop — and nothing
//! of it is kept; the write guard (the leadership deadline) refuses the same paths.

use super::*;
use crate::Error;

/// Two handles on one journal, as two operator processes have: `old`, then `new`.
macro_rules! on_both_twice {
    ($($test:ident),* $(,)?) => {$(
        mod $test {
            #[tokio::test]
            async fn sqlite() {
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("eru.db");
                let old = super::Journal::open(&path).await.unwrap();
                let new = super::Journal::open(&path).await.unwrap();
                super::$test(old, new).await;
            }

            #[tokio::test]
            async fn postgres() {
                let db = super::super::pg::Database::fresh().await;
                let new = super::Journal::connect(&db.url).await.unwrap();
                super::$test(db.journal.clone(), new.clone()).await;
                new.close().await;
                db.close().await;
            }
        }
    )*};
}

on_both_twice!(
    a_newer_epoch_refuses_every_write_of_an_older_one,
    the_write_guard_refuses_every_write_path
);

fn refused<T: std::fmt::Debug>(result: Result<T>, path: &str) {
    match result {
        Err(Error::NotLeader(_)) => {}
        other => panic!("{path}: not refused as a write of a process that does not lead: {other:?}"),
    }
}

/// An entry that creates (or expires) the silence of the restart of `entry()`'s slot.
fn silence(change: SilenceChange) -> Entry {
    Entry {
        silences: vec![change],
        ..Entry::default()
    }
}

async fn a_newer_epoch_refuses_every_write_of_an_older_one(old: Journal, new: Journal) {
    use crate::vocab::NoticeEvent::SlotSkipped;
    let first = old.take_fence().await.unwrap();
    let run = old.start_run("test", "old", at(0)).await.unwrap();
    let mut written = entry();
    written.notices = vec![super::notice("a", NoticeOf::Slot(at(1)), SlotSkipped)];
    old.append(&written).await.unwrap();
    let slot = written.restarts_decided[0].slot;
    let created = SilenceChange::Created {
        uid: "u1".into(),
        slot,
        id: "s1".into(),
        until: at(30),
    };
    old.append(&silence(created)).await.unwrap();
    let notices = super::pending(&old, "a").await;
    assert_eq!(notices.len(), 1);

    let run_of = |journal: Journal| async move {
        let runs = journal.runs_since(at(0)).await.unwrap();
        runs.into_iter().find(|r| r.id == run).unwrap()
    };
    let before = run_of(old.clone()).await;

    // a newer process takes the journal
    assert_eq!(new.take_fence().await.unwrap(), first + 1);

    let mut late = entry();
    late.transitions[0].observed = "43".into();
    late.slots = vec![super::slot_row(at(9), SlotResult::Skipped, Reason::TargetPaused)];
    refused(old.append(&late).await, "a batch of records");
    refused(old.heartbeat(run, at(2)).await, "a heartbeat");
    let expired = SilenceChange::Expired {
        uid: "u1".into(),
        slot,
        at: at(3),
    };
    refused(old.append(&silence(expired.clone())).await, "a silence's expiry");
    let ids = [notices[0].id];
    refused(old.notices_delivered(&ids, at(4)).await, "a delivery's settle");
    refused(
        old.notices_failed(&ids, at(5), "HTTP 503").await,
        "a failure's settle",
    );
    refused(old.notices_dropped(&ids, at(5), "expired").await, "a drop");
    refused(old.prune_notices(at(50), 100).await, "the outbox's prune");
    refused(old.prune(at(50), 100).await, "retention");
    refused(old.stop_run(run, at(6)).await, "the run's stop");

    // nothing of them is in the journal
    let all = Filter {
        limit: 100,
        ..Filter::default()
    };
    let listed = new.slot_records(&all).await.unwrap();
    assert!(listed.iter().all(|s| *s.record.slot != at(9)), "{listed:?}");
    let row = new.restart("u1", slot).await.unwrap().unwrap();
    assert_eq!(
        (row.silence_id.as_deref(), row.silence_expired_at),
        (Some("s1"), None)
    );
    let still = super::pending(&new, "a").await;
    assert_eq!((still.len(), still[0].attempts), (1, 0));
    // neither its heartbeat nor its batches' sign of life nor its stop moved the run
    assert_eq!(run_of(new.clone()).await, before);

    // the newer process writes every path
    new.append(&silence(expired)).await.unwrap();
    new.notices_delivered(&ids, at(4)).await.unwrap();
    new.prune_notices(at(50), 100).await.unwrap();
    new.prune(at(0), 100).await.unwrap();
    new.stop_run(run, at(6)).await.unwrap();
}

async fn the_write_guard_refuses_every_write_path(old: Journal, new: Journal) {
    let _ = new;
    old.take_fence().await.unwrap();
    let run = old.start_run("test", "old", at(0)).await.unwrap();
    old.guard_writes(Box::new(|| false));
    refused(old.append(&entry()).await, "a batch of records");
    refused(old.heartbeat(run, at(1)).await, "a heartbeat");
    refused(old.notices_delivered(&[1], at(1)).await, "a settle");
    refused(old.prune_notices(at(50), 100).await, "the outbox's prune");
    refused(old.prune(at(50), 100).await, "retention");
    refused(old.stop_run(run, at(2)).await, "the run's stop");
}
