//! Benchmark of the notification delivery: `hack/bench.sh` (or `cargo bench --bench notify`)
//! prints medians. Under `cargo test` this runs once, tiny, as a smoke test (no timing claims in
//! tests).
//!
//! - a burst of 10,000 slot records (10,000 Erus, one notification each) with one webhook sink
//!   on loopback: the time from the burst's commit until the last is delivered (the delivery
//!   task as the operator runs it: a lane per sink, the upkeep beside);
//! - the prune of 1 M settled rows past the maximum age (batches of 1,000 until none is left,
//!   on the index of when each was settled), on a table that also holds 10,000 pending ones.
//!
//! SQLite, a WAL file on disk, as the operator's default journal.

use std::{
    io::{Read, Write},
    net::TcpListener,
    sync::Arc,
    time::{Duration, Instant},
};

use chrono::Utc;
use eru_operator::{
    journal::{Entry, Journal, NewNotice, NoticeOf, ObjectKey},
    notify::{
        Notifier,
        deliver::{Delivery, NotifyMetrics, deliver},
    },
    runtime::leader::Leadership,
    vocab::NoticeEvent,
};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// A receiver on loopback answering every request 200 (a thread per connection).
fn receiver() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut request = Vec::new();
                let mut buf = [0u8; 8192];
                while let Ok(n) = stream.read(&mut buf) {
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request);
                    let Some(end) = text.find("\r\n\r\n") else {
                        continue;
                    };
                    let length = (text[..end].lines())
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().to_string())
                        })
                        .and_then(|v| v.parse::<usize>().ok())
                        .unwrap_or(0);
                    if request.len() >= end + 4 + length {
                        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
                        request.clear();
                    }
                }
            });
        }
    });
    port
}

fn notice(i: usize, now: chrono::DateTime<Utc>) -> NewNotice {
    NewNotice {
        sink: "hook".into(),
        object: ObjectKey {
            kind: "Eru",
            namespace: "ns".into(),
            name: format!("web-{i}"),
            uid: format!("u-{i}"),
        },
        of: NoticeOf::Held(now),
        event: NoticeEvent::SlotHeld,
        last_slot: now,
        slot_count: 1,
        reason: Some("alert_firing".into()),
        note: None,
        created_at: now,
    }
}

/// Seconds from a burst of `n` notifications until the last is delivered.
async fn burst(journal: &Journal, port: u16, n: usize) -> Duration {
    let file = format!("sinks:\n- {{name: hook, type: webhook, url: 'http://127.0.0.1:{port}/eru'}}\n");
    let notifier = Notifier::parse(&file).unwrap();
    let delivery = Delivery {
        journal: journal.clone(),
        metrics: NotifyMetrics::new(&prometheus::Registry::new(), &notifier),
        notifier: Arc::new(notifier),
        leadership: Leadership::leader(),
        wake: Arc::default(),
        max_age: Duration::from_secs(86_400),
        backoff_max: Duration::from_secs(300),
        outbox_max: 100_000,
    };
    let wake = delivery.wake.clone();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(deliver(delivery, stopped));
    let now = Utc::now();
    let entry = Entry {
        notices: (0..n).map(|i| notice(i, now)).collect(),
        ..Entry::default()
    };
    journal.append(&entry).await.unwrap();
    let started = Instant::now();
    wake.notify_one();
    while journal.pending_count().await.unwrap() > 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = started.elapsed();
    stop.send(true).unwrap();
    task.await.unwrap();
    took
}

/// The time to prune `n` settled rows, written straight into the journal file at `path`.
async fn prune(journal: &Journal, path: &std::path::Path, n: u32) -> Duration {
    let old = Utc::now() - chrono::Duration::days(2);
    let old = old.format("%Y-%m-%dT%H:%M:%S%.3fZ");
    let sql = format!(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {n})
         INSERT INTO notifications (sink, key, uid, namespace, name, event, slot, last_slot, slot_count,
           created_at, next_attempt_at, delivered_at)
         SELECT 'hook', 'old/' || i, 'u-' || (i % 1000), 'ns', 'web', 'slot_held', '{old}', '{old}', 1,
           '{old}', '{old}', '{old}' FROM n"
    );
    sqlx::any::install_default_drivers();
    let url = format!("sqlite://{}", path.display());
    let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&url)
        .await
        .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::Connection::close(conn).await.unwrap();
    let cutoff = Utc::now() - chrono::Duration::days(1);
    let started = Instant::now();
    let mut pruned = 0;
    loop {
        let batch = journal.prune_notices(cutoff, 1000).await.unwrap();
        pruned += batch;
        if batch < 1000 {
            break;
        }
    }
    let took = started.elapsed();
    assert_eq!(pruned, u64::from(n));
    took
}

#[tokio::main]
async fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (records, settled, runs) = if full {
        (10_000, 1_000_000, 3)
    } else {
        (100, 10_000, 1)
    };
    let port = receiver();
    let mut bursts = Vec::new();
    let mut prunes = Vec::new();
    for _ in 0..runs {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("eru.db");
        let journal = Journal::open(&path).await.unwrap();
        bursts.push(burst(&journal, port, records).await);
        prunes.push(prune(&journal, &path, settled).await);
        journal.close().await;
    }
    println!(
        "notify: a burst of {records} slot records, one webhook sink: the last delivered after \
         {:.2?} (median of {runs}; {bursts:.2?})",
        median(bursts.clone())
    );
    println!(
        "notify: the prune of {settled} settled rows beside {records} delivered: {:.2?} (median of \
         {runs}; {prunes:.2?})",
        median(prunes.clone())
    );
}
