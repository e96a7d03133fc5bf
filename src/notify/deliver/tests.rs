//! The delivery's steps on both backends, against receivers on 127.0.0.1: a lane's turn (select
//! due, send, settle), its expiry, and the upkeep's cap, unknown sinks and prune.

use std::{
    io::{Read, Write},
    net::TcpListener,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use chrono::{DateTime, TimeZone, Utc};
use prometheus::Registry;

use super::{Delivery, NotifyMetrics, lane, upkeep};
use crate::{
    journal::{Entry, Journal, NewNotice, NoticeOf, ObjectKey, PendingOf},
    notify::Notifier,
    runtime::leader::Leadership,
    vocab::NoticeEvent,
};

/// For each test body `async fn name(journal: Journal)`: a module `name` with a test `sqlite`
/// (in memory) and a test `postgres` (a fresh database of the journal tests' server).
macro_rules! on_both {
    ($($test:ident),* $(,)?) => {$(
        mod $test {
            #[tokio::test]
            async fn sqlite() {
                super::$test(crate::journal::Journal::open_in_memory().await.unwrap()).await;
            }

            #[tokio::test]
            async fn postgres() {
                let db = crate::journal::tests::pg::Database::fresh().await;
                super::$test(db.journal.clone()).await;
                db.close().await;
            }
        }
    )*};
}

on_both!(
    a_failing_sink_waits_on_its_own_lane_while_a_healthy_one_delivers,
    a_lane_drops_its_expired_rows_before_it_sends,
    the_cap_drops_the_oldest_in_bounded_chunks_and_the_audit_counts_them,
    rows_of_a_sink_no_longer_in_the_file_are_dropped,
    the_prune_deletes_every_old_settled_row_in_batches,
    a_turn_looks_up_each_due_eru_once_the_one_due_longest_first,
    the_delivery_sends_sleeps_while_idle_wakes_on_a_pass_and_stops,
    a_lane_looks_for_expired_rows_every_ten_seconds_and_says_what_it_dropped,
    a_lane_whose_journal_fails_retries_after_a_doubling_backoff,
    an_upkeep_drops_unknown_sinks_measures_and_prunes_every_ten_minutes,
    the_upkeep_runs_every_two_seconds_until_the_stop,
);

thread_local! {
    /// Where this thread's log lines go while a test captures them ([`Logs::capture`]).
    static CAPTURED: std::cell::RefCell<Option<Logs>> = const { std::cell::RefCell::new(None) };
}

/// The log lines written on this thread while the guard lives (a `#[tokio::test]` runs its
/// tasks on the test's thread). One subscriber for the whole test binary, set once, writes each
/// line to the capturing thread's buffer: a thread-local subscriber (`set_default`) would share
/// tracing's per-process cache of which log lines are wanted with threads that have none.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

/// Stops this thread's capture when dropped.
struct Capturing;

impl Drop for Capturing {
    fn drop(&mut self) {
        CAPTURED.with(|c| c.borrow_mut().take());
    }
}

/// A log line's writer: the capturing thread's buffer, or nowhere.
struct ThisThread;

impl Write for ThisThread {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        CAPTURED.with(|c| {
            if let Some(logs) = c.borrow().as_ref() {
                logs.0.lock().unwrap().extend_from_slice(buf);
            }
        });
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn capture() -> (Self, Capturing) {
        static SUBSCRIBER: std::sync::Once = std::sync::Once::new();
        SUBSCRIBER.call_once(|| {
            let subscriber = tracing_subscriber::fmt()
                .with_ansi(false)
                .with_writer(|| ThisThread)
                .finish();
            tracing::subscriber::set_global_default(subscriber)
                .expect("no other test sets a global subscriber");
        });
        let logs = Self::default();
        CAPTURED.with(|c| *c.borrow_mut() = Some(logs.clone()));
        (logs, Capturing)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// The lines that contain `needle`.
    fn lines(&self, needle: &str) -> Vec<String> {
        (self.text().lines())
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect()
    }
}

/// A receiver that answers every request 200 and counts them.
fn accepting() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let counted = count.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            // the headers, then the body by its Content-Length
            while let Ok(n) = stream.read(&mut buf) {
                if n == 0 {
                    break;
                }
                request.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&request);
                if let Some(end) = text.find("\r\n\r\n") {
                    let length = (text.lines())
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().to_string())
                        })
                        .and_then(|v| v.parse::<usize>().ok())
                        .unwrap_or(0);
                    if request.len() >= end + 4 + length {
                        break;
                    }
                }
            }
            counted.fetch_add(1, Ordering::Relaxed);
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    (port, count)
}

/// A port nothing listens on: every connection is refused.
fn refusing() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn delivery(journal: Journal, sinks: &[(&str, u16)], outbox_max: u32) -> Delivery {
    let mut file = String::from("sinks:\n");
    for (name, port) in sinks {
        file += &format!("- {{name: {name}, type: webhook, url: 'http://127.0.0.1:{port}/eru'}}\n");
    }
    let notifier = Notifier::parse(&file).unwrap();
    Delivery {
        journal,
        metrics: NotifyMetrics::new(&Registry::new(), &notifier),
        notifier: Arc::new(notifier),
        leadership: Leadership::leader(),
        wake: Arc::default(),
        max_age: Duration::from_secs(3600),
        backoff_max: Duration::from_secs(300),
        outbox_max,
    }
}

/// A fresh lane of `sink` (it looks for expired rows at its first turn) and an HTTP agent.
fn lane_of(sink: &str) -> (lane::Lane, ureq::Agent) {
    let lane = lane::Lane {
        sink: sink.into(),
        ..Default::default()
    };
    (lane, crate::outbound::agent(Duration::from_secs(5)))
}

fn at(minute: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 27, 3, 0, 0).unwrap() + chrono::Duration::minutes(minute)
}

/// `n` held-slot notices of `erus` Erus for `sink`, written at `written`.
async fn write(journal: &Journal, sink: &str, erus: usize, n: usize, written: DateTime<Utc>) {
    let notices = (0..n)
        .map(|i| NewNotice {
            sink: sink.into(),
            object: ObjectKey {
                kind: "Eru",
                namespace: "ns".into(),
                name: format!("web-{}", i % erus),
                uid: format!("u-{}", i % erus),
            },
            of: NoticeOf::Held(at(i as i64)),
            event: NoticeEvent::SlotHeld,
            last_slot: at(i as i64),
            slot_count: 1,
            reason: Some("alert_firing".into()),
            note: None,
            created_at: written,
        })
        .collect();
    let entry = Entry {
        notices,
        ..Entry::default()
    };
    journal.append(&entry).await.unwrap();
}

fn counter(d: &Delivery, name: &str, labels: &[&str]) -> u64 {
    match name {
        "delivered" => d.metrics.delivered.with_label_values(labels).get(),
        "failed" => d.metrics.failed.with_label_values(labels).get(),
        "dropped" => d.metrics.dropped.with_label_values(labels).get(),
        _ => d.metrics.queries.with_label_values(labels).get(),
    }
}

/// A sink whose receiver refuses fails once per turn and waits a backoff of its own, counted
/// from the end of the attempt, its rows kept with the error; the healthy sink's lane delivers
/// all of its rows meanwhile, one message per Eru, and then idles until a row comes due.
async fn a_failing_sink_waits_on_its_own_lane_while_a_healthy_one_delivers(journal: Journal) {
    let (port, received) = accepting();
    let d = delivery(journal.clone(), &[("good", port), ("bad", refusing())], 10_000);
    let now = Utc::now();
    write(&journal, "bad", 150, 300, now).await;
    write(&journal, "good", 5, 20, now).await;
    let (mut bad, agent) = lane_of("bad");
    let before = Utc::now();
    let lane::Turn::Failed(until) = bad.turn(&d, &agent).await.unwrap() else {
        panic!("the refused sink's turn did not fail")
    };
    assert!(
        until >= before + chrono::Duration::seconds(1),
        "{until} waits at least 1 s"
    );
    assert_eq!(bad.failures, 1);
    assert!(
        (1..=4).contains(&counter(&d, "failed", &["bad"])),
        "at most the messages in flight"
    );
    let tried = journal
        .oldest_pending(PendingOf::Sink("bad"), 1000)
        .await
        .unwrap();
    assert_eq!(tried.len(), 300, "nothing is lost");
    assert!(
        journal.due_for("bad", Utc::now(), 200).await.unwrap().len() >= 146,
        "only the Erus tried wait for their retry"
    );

    let (mut good, _) = lane_of("good");
    assert_eq!(good.turn(&d, &agent).await.unwrap(), lane::Turn::Sent);
    assert_eq!(received.load(Ordering::Relaxed), 5, "one message per Eru");
    assert_eq!(counter(&d, "delivered", &["good"]), 20);
    assert!(
        journal
            .oldest_pending(PendingOf::Sink("good"), 100)
            .await
            .unwrap()
            .is_empty()
    );
    let lane::Turn::Idle(next) = good.turn(&d, &agent).await.unwrap() else {
        panic!("nothing is due for the healthy sink")
    };
    assert!(next <= Utc::now() + chrono::Duration::seconds(30));
    // the failed Erus' rows come due at their own backoff, from the end of the attempt
    let bad_rows = journal.pending_notices("bad", "u-0", 10).await.unwrap();
    assert!(
        bad_rows.iter().all(|r| r.attempts == 1
            && r.last_error.is_some()
            && r.next_attempt_at.0 >= before + chrono::Duration::seconds(1)),
        "{bad_rows:?}"
    );
}

/// Rows older than the maximum age are dropped as `expired` by their lane, never sent.
async fn a_lane_drops_its_expired_rows_before_it_sends(journal: Journal) {
    let (port, received) = accepting();
    let d = delivery(journal.clone(), &[("hook", port)], 10_000);
    write(
        &journal,
        "hook",
        3,
        1_500,
        Utc::now() - chrono::Duration::hours(2),
    )
    .await;
    let (mut lane, agent) = lane_of("hook");
    assert!(matches!(
        lane.turn(&d, &agent).await.unwrap(),
        lane::Turn::Idle(_)
    ));
    assert_eq!(received.load(Ordering::Relaxed), 0);
    assert_eq!(counter(&d, "dropped", &["hook", "expired"]), 1_500);
    let facts = journal.outbox_facts(None).await.unwrap();
    assert_eq!((facts.pending, facts.dropped), (0, 1_500));
}

/// Lowered below a backlog, the cap drops the oldest rows (chunks of 1,000: far below either
/// backend's limit of bound parameters), keeps the newest, and the audit's facts say why.
async fn the_cap_drops_the_oldest_in_bounded_chunks_and_the_audit_counts_them(journal: Journal) {
    let d = delivery(journal.clone(), &[("a", refusing()), ("b", refusing())], 500);
    write(&journal, "a", 10, 2_000, Utc::now()).await;
    write(&journal, "b", 10, 1_000, Utc::now()).await;
    assert_eq!(upkeep::over_cap(&d).await.unwrap(), 2_500);
    assert_eq!(journal.pending_count().await.unwrap(), 500);
    let kept = journal.oldest_pending(PendingOf::All, 1000).await.unwrap();
    assert!(kept.iter().all(|(_, sink)| sink == "b"), "the newest are kept");
    assert_eq!(counter(&d, "dropped", &["a", "outbox_full"]), 2_000);
    assert_eq!(counter(&d, "dropped", &["b", "outbox_full"]), 500);
    let facts = journal.outbox_facts(Some("ns")).await.unwrap();
    assert_eq!(facts.dropped, 2_500);
    let drops: Vec<(&str, &str, i64)> = facts
        .drops
        .iter()
        .map(|d| (d.sink.as_str(), d.reason.as_str(), d.count))
        .collect();
    assert_eq!(drops, [("a", "outbox_full", 2_000), ("b", "outbox_full", 500)]);
    let statements = || counter(&d, "queries", &[upkeep::LABEL]);
    let before = statements();
    assert_eq!(
        upkeep::over_cap(&d).await.unwrap(),
        0,
        "nothing more once under the cap"
    );
    // (mutation: the loop's `left > 0` → `>=`, a read of no rows)
    assert_eq!(statements() - before, 1, "under the cap, the count alone");
}

async fn rows_of_a_sink_no_longer_in_the_file_are_dropped(journal: Journal) {
    let d = delivery(journal.clone(), &[("kept", refusing())], 10_000);
    write(&journal, "gone", 2, 1_200, Utc::now()).await;
    write(&journal, "kept", 2, 3, Utc::now()).await;
    upkeep::unknown_sinks(&d).await.unwrap();
    assert_eq!(journal.pending_sinks().await.unwrap(), ["kept"]);
    assert_eq!(counter(&d, "dropped", &["gone", "unknown_sink"]), 1_200);
    // the count the warning logs is every chunk's (mutations: `+=` → `*=` or `=` in `drop_all`)
    write(&journal, "gone-too", 2, 1_200, Utc::now()).await;
    let dropped = d.drop_all(
        "gone-too",
        PendingOf::Sink("gone-too"),
        super::Dropped::UnknownSink,
    );
    assert_eq!(dropped.await.unwrap(), 1_200, "two chunks");
}

/// Every settled row older than the maximum age goes in one prune (batches until none is left);
/// pending rows and newer settled ones stay.
async fn the_prune_deletes_every_old_settled_row_in_batches(journal: Journal) {
    let d = delivery(journal.clone(), &[("hook", refusing())], 10_000);
    let now = Utc::now();
    write(&journal, "hook", 5, 2_600, now).await;
    let rows = journal.oldest_pending(PendingOf::All, 3_000).await.unwrap();
    let ids: Vec<i64> = rows.iter().map(|(id, _)| *id).collect();
    journal
        .notices_delivered(&ids[..2_500], now - chrono::Duration::hours(2))
        .await
        .unwrap();
    journal.notices_delivered(&ids[2_500..2_550], now).await.unwrap();
    assert_eq!(upkeep::prune(&d, now).await.unwrap(), 2_500);
    let facts = journal.outbox_facts(None).await.unwrap();
    assert_eq!((facts.pending, facts.delivered), (50, 50));
    assert_eq!(upkeep::prune(&d, now).await.unwrap(), 0);
}

/// A turn's Erus: each once however many rows it has, the one due longest first, never one not
/// due yet, at most the turn's number.
async fn a_turn_looks_up_each_due_eru_once_the_one_due_longest_first(journal: Journal) {
    let now = Utc::now();
    // u-0..u-2, 30 rows each, due now
    write(&journal, "hook", 3, 90, now).await;
    let rows = journal.pending_notices("hook", "u-1", 100).await.unwrap();
    let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
    // u-1 failed a minute ago and was due again 30 s ago: due longest; u-2 is not due for an hour
    journal
        .notices_failed(&ids, now - chrono::Duration::seconds(30), "HTTP 503")
        .await
        .unwrap();
    let rows = journal.pending_notices("hook", "u-2", 100).await.unwrap();
    let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
    journal
        .notices_failed(&ids, now + chrono::Duration::hours(1), "HTTP 503")
        .await
        .unwrap();
    let due = journal.due_for("hook", now, 10).await.unwrap();
    assert_eq!(due, ["u-1", "u-0"]);
    assert_eq!(journal.due_for("hook", now, 1).await.unwrap(), ["u-1"]);
    assert_eq!(
        journal
            .next_due("hook")
            .await
            .unwrap()
            .map(|t| t.timestamp_millis()),
        Some((now - chrono::Duration::seconds(30)).timestamp_millis())
    );
}

/// How many requests `received` counted within `within`, polled until it reaches `n`.
async fn received_by(received: &AtomicUsize, n: usize, within: Duration) -> usize {
    let deadline = tokio::time::Instant::now() + within;
    while received.load(Ordering::Relaxed) < n && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    received.load(Ordering::Relaxed)
}

/// The whole delivery as a leader runs it (`deliver`): the lane sends what is due, then sleeps
/// without reading the journal until a pass's wake, which reaches it at once (its idle wait
/// would last up to 30 s); the journal statements are counted by sink; a stop ends the lanes and
/// the upkeep. (Mutations: `deliver` → `()`; `pause` → `true`, the lanes ending at their first
/// wait; `pause` → `false`, an idle lane reading the journal in a loop; `Delivery::queried` →
/// `()`.)
async fn the_delivery_sends_sleeps_while_idle_wakes_on_a_pass_and_stops(journal: Journal) {
    let (port, received) = accepting();
    let d = delivery(journal.clone(), &[("hook", port)], 10_000);
    let (wake, metrics) = (d.wake.clone(), d.metrics.clone());
    let queries = || metrics.queries.with_label_values(&["hook"]).get();
    write(&journal, "hook", 3, 6, Utc::now()).await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(super::deliver(d, stopped));
    assert_eq!(
        received_by(&received, 3, Duration::from_secs(10)).await,
        3,
        "one message per Eru"
    );
    // idle (the turn settled every row, and its statements stopped): a second without anything
    // due reads the journal a few times at most
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut last = queries();
    while tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let settled = metrics.delivered.with_label_values(&["hook"]).get() == 6;
        if settled && queries() == last {
            break;
        }
        last = queries();
    }
    let idle_from = queries();
    assert!(idle_from > 0, "the lane's statements are counted");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        queries() - idle_from <= 2,
        "an idle lane waits: {} statements in a second",
        queries() - idle_from
    );
    // a pass journals a notice and wakes the delivery: sent now, not at the idle wait's end
    // (rows 0-5 again, already there: a notice is keyed by its sink and key, the Eru, slot and
    // event; row 6 is new)
    write(&journal, "hook", 3, 7, Utc::now()).await;
    wake.notify_one();
    assert_eq!(
        received_by(&received, 4, Duration::from_secs(5)).await,
        4,
        "the wake reached the idle lane"
    );
    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the delivery ends at the stop")
        .unwrap();
}

/// A lane looks for its expired rows at its first turn and then once per ten seconds (each look
/// is a journal statement), warns with the count when it drops some and says nothing when none
/// had expired; with nothing pending it sleeps the idle wait's 30 s. (Mutations: the look's
/// bound `>=` → `<`, a look every turn; `expire`'s `> 0` → `==`, `<` or `>=`, a drop unsaid or a
/// drop of nothing told; the idle wait `now + 30 s` → `now - 30 s`, a lane reading in a loop.)
async fn a_lane_looks_for_expired_rows_every_ten_seconds_and_says_what_it_dropped(journal: Journal) {
    let (logs, _guard) = Logs::capture();
    let (port, received) = accepting();
    let d = delivery(journal.clone(), &[("hook", port)], 10_000);
    let (mut lane, agent) = lane_of("hook");
    let statements = || counter(&d, "queries", &["hook"]);
    let before = Utc::now();
    let lane::Turn::Idle(next) = lane.turn(&d, &agent).await.unwrap() else {
        panic!("nothing is pending")
    };
    assert!(
        next >= before + chrono::Duration::seconds(30),
        "{next}: an idle lane sleeps 30 s from {before}"
    );
    assert_eq!(statements(), 3, "the look, the due Erus, the next due row");
    lane.turn(&d, &agent).await.unwrap();
    assert_eq!(statements(), 5, "no look within ten seconds of the last");
    let dropped = "notifications dropped: undelivered for longer than --notification-max-age";
    assert!(logs.lines(dropped).is_empty(), "nothing expired: {}", logs.text());

    write(&journal, "hook", 1, 2, Utc::now() - chrono::Duration::hours(2)).await;
    lane.expired_at = Some(Utc::now() - chrono::Duration::seconds(10));
    lane.turn(&d, &agent).await.unwrap();
    assert_eq!(
        received.load(Ordering::Relaxed),
        0,
        "an expired row is never sent"
    );
    assert_eq!(counter(&d, "dropped", &["hook", "expired"]), 2);
    let said = logs.lines(dropped);
    assert!(
        said.len() == 1 && said[0].contains("events=2") && said[0].contains("hook"),
        "{said:?}"
    );
}

/// A lane whose journal fails (here: the mark of a sent message as delivered) retries after a
/// backoff of its own that doubles from 1 s: within 6.5 s it tries at 0 s, 1 s, 2-3 s and maybe
/// 4-6.5 s, never in a loop; nothing is lost. (Mutations in `lane::run`'s error path: the
/// backoff added to now → subtracted, a loop; the failures `+=` → `-=` or `*=`, a retry every
/// second, seven.)
async fn a_lane_whose_journal_fails_retries_after_a_doubling_backoff(journal: Journal) {
    let (port, received) = accepting();
    let d = Arc::new(delivery(journal.clone(), &[("hook", port)], 10_000));
    write(&journal, "hook", 1, 1, Utc::now()).await;
    crate::journal::tests::refuse_delivered_marks(&journal).await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(lane::run(d, "hook".into(), Arc::default(), stopped));
    tokio::time::sleep(Duration::from_millis(6_500)).await;
    let tries = received.load(Ordering::Relaxed);
    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the lane ends at the stop")
        .unwrap();
    assert!((2..=4).contains(&tries), "{tries} tries in 6.5 s");
    assert_eq!(journal.pending_count().await.unwrap(), 1, "the row waits");
}

/// One upkeep: the rows of a sink no longer in the file dropped, each sink's gauges (its pending
/// rows and how long the oldest has waited), and the prune of old settled rows when ten minutes
/// have passed since the last, told only when it deleted some. (Mutations: `keep` and `measure`
/// → `Ok(())`; the prune's bound `>=` → `<`; `prune`'s `> 0` → `==`, `<` or `>=`.)
async fn an_upkeep_drops_unknown_sinks_measures_and_prunes_every_ten_minutes(journal: Journal) {
    let (logs, _guard) = Logs::capture();
    let d = delivery(
        journal.clone(),
        &[("hook", refusing()), ("idle", refusing())],
        10_000,
    );
    let now = Utc::now();
    write(&journal, "hook", 2, 4, now - chrono::Duration::minutes(5)).await;
    write(&journal, "gone", 1, 1, now).await;
    write(&journal, "idle", 1, 3, now - chrono::Duration::hours(3)).await;
    let settled = journal.oldest_pending(PendingOf::Sink("idle"), 10).await.unwrap();
    let ids: Vec<i64> = settled.iter().map(|(id, _)| *id).collect();
    let two_hours_ago = now - chrono::Duration::hours(2);
    journal.notices_delivered(&ids, two_hours_ago).await.unwrap();
    let pruned = "settled notifications past the maximum age deleted";

    let nine_minutes_ago = Some(now - chrono::Duration::minutes(9));
    let mut last = nine_minutes_ago;
    upkeep::keep(&d, now, &mut last).await.unwrap();
    assert_eq!(
        journal.pending_sinks().await.unwrap(),
        ["hook"],
        "the unknown sink's rows"
    );
    let gauge = |name: &str, sink: &str| match name {
        "pending" => d.metrics.pending.with_label_values(&[sink]).get(),
        _ => d.metrics.oldest.with_label_values(&[sink]).get(),
    };
    assert_eq!((gauge("pending", "hook"), gauge("pending", "idle")), (4, 0));
    assert!(
        (300..310).contains(&gauge("oldest", "hook")),
        "{}",
        gauge("oldest", "hook")
    );
    assert_eq!(gauge("oldest", "idle"), 0);
    assert_eq!(last, nine_minutes_ago, "no prune within ten minutes of the last");
    assert_eq!(journal.outbox_facts(None).await.unwrap().delivered, 3);
    assert!(logs.lines(pruned).is_empty(), "{}", logs.text());

    let mut last = Some(now - chrono::Duration::minutes(10));
    upkeep::keep(&d, now, &mut last).await.unwrap();
    assert_eq!(last, Some(now), "pruned ten minutes after the last");
    assert_eq!(journal.outbox_facts(None).await.unwrap().delivered, 0);
    let said = logs.lines(pruned);
    assert!(said.len() == 1 && said[0].contains("rows=3"), "{said:?}");
    // nothing left to delete: the prune says nothing
    upkeep::keep(&d, now, &mut None).await.unwrap();
    assert_eq!(logs.lines(pruned).len(), 1, "{}", logs.text());
}

/// The upkeep as the leader runs it: at once, then every two seconds, until the stop.
/// (Mutations: `upkeep::run` → `()`; its pause `now + 2 s` → `now - 2 s`, a loop.)
async fn the_upkeep_runs_every_two_seconds_until_the_stop(journal: Journal) {
    let d = Arc::new(delivery(journal.clone(), &[("hook", refusing())], 10));
    let metrics = d.metrics.clone();
    write(&journal, "hook", 1, 30, Utc::now()).await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(upkeep::run(d, stopped));
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the upkeep ends at the stop")
        .unwrap();
    assert_eq!(journal.pending_count().await.unwrap(), 10, "the cap applied");
    let statements = metrics.queries.with_label_values(&[upkeep::LABEL]).get();
    // one or two upkeeps (at 0 s and 2 s; a loaded machine may run one): the first's five
    // statements (the count, the cap's read, the sinks, the gauges, the prune), then three
    assert!((5..=8).contains(&statements), "{statements} statements in 3 s");
}
