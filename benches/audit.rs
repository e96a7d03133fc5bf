//! The audit page and `/audit` over HTTP, on a journal of 1,000 Erus and 1 M slot rows (each Eru
//! restarted every hour for 1,000 hours, one slot in ten skipped): p50 and p99 of the 24-hour
//! page and of `GET /audit` for the same window. `hack/bench.sh` runs it; without `--bench`
//! (`cargo test`) a small journal checks that it works.

use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};
use eru_operator::{
    journal::{
        Entry, FinishedRestart, Journal, NewEpoch, NewRestart, NewSlot, ObjectKey, PatchedRestart, SlotResult,
    },
    vocab::{Outcome, Reason},
};
use serde_json::json;

const REQUESTS: usize = 40;

fn object(i: usize) -> ObjectKey {
    ObjectKey {
        kind: "Eru",
        namespace: format!("team-{}", i % 20),
        name: format!("svc-{i}"),
        uid: format!("uid-{i}"),
    }
}

/// `erus` Erus, each with `hours` hourly slots ending at `end`; restarts joined for the last two days.
async fn journal(path: &std::path::Path, erus: usize, hours: i64, end: DateTime<Utc>) -> Journal {
    let journal = Journal::open(path).await.unwrap();
    let start = end - chrono::Duration::hours(hours);
    let mut epochs = Entry::default();
    for i in 0..erus {
        epochs.epochs.push(NewEpoch {
            uid: object(i).uid,
            generation: 1,
            effective_from: start - chrono::Duration::minutes(30),
            observed_at: start,
            spec: json!({"schedule": "0 * * * *", "startingDeadlineSeconds": 300, "target": format!("svc-{}", i)}),
        });
    }
    journal.append(&epochs).await.unwrap();
    journal
        .start_run("bench", "bench", start - chrono::Duration::hours(1))
        .await
        .unwrap();
    for h in 1..=hours {
        let slot = start + chrono::Duration::hours(h);
        let recent = end - slot <= chrono::Duration::hours(48);
        let mut batch = Entry::default();
        for i in 0..erus {
            let o = object(i);
            let skipped = (i as i64 + h) % 10 == 0;
            let (result, reason) = if skipped {
                (SlotResult::Skipped, Reason::TargetPaused)
            } else {
                (SlotResult::Fired, Reason::Scheduled)
            };
            if recent && !skipped {
                batch.restarts_decided.push(NewRestart {
                    object: o.clone(),
                    target: o.name.clone(),
                    slot,
                    decided_at: slot,
                    deadline_at: slot + chrono::Duration::minutes(5),
                });
                batch.restarts_patched.push(PatchedRestart {
                    landed_generation: None,
                    uid: o.uid.clone(),
                    slot,
                    patched_at: slot + chrono::Duration::seconds(1),
                });
                // rolled out, as a real journal's are (one restart in flight per Eru at most)
                batch.restarts_finished.push(FinishedRestart {
                    uid: o.uid.clone(),
                    slot,
                    finished_at: slot + chrono::Duration::seconds(30),
                    outcome: Outcome::Succeeded,
                    reason: None,
                });
            }
            batch.slots.push(NewSlot {
                target: o.name.clone(),
                object: o,
                slot,
                last_slot: slot,
                slot_count: 1,
                result,
                reason,
                window: None,
                note: None,
                evaluated_at: slot,
            });
        }
        journal.append(&batch).await.unwrap();
    }
    journal.heartbeat(1, end).await.unwrap();
    journal
}

/// p50 and p99 of `requests` GETs of `url`, each body checked by `ok`.
fn timed(url: &str, requests: usize, ok: impl Fn(&str) -> bool) -> (Duration, Duration) {
    let agent: ureq::Agent = ureq::Agent::config_builder().build().into();
    let mut samples: Vec<Duration> = (0..requests)
        .map(|_| {
            let start = Instant::now();
            let body = agent
                .get(url)
                .call()
                .unwrap()
                .body_mut()
                .read_to_string()
                .unwrap();
            let took = start.elapsed();
            assert!(ok(&body), "{url}: {:.300}", body);
            took
        })
        .collect();
    samples.sort();
    (
        samples[samples.len() / 2],
        samples[(samples.len() * 99).div_ceil(100) - 1],
    )
}

#[tokio::main]
async fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (erus, hours) = if full { (1_000, 1_000) } else { (20, 50) };
    let end = Utc.with_ymd_and_hms(2026, 11, 24, 0, 0, 0).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let filled = Instant::now();
    // ERU_AUDIT_BENCH_JOURNAL: a journal file kept between runs (filled once: ~4 min)
    let kept = std::env::var_os("ERU_AUDIT_BENCH_JOURNAL").filter(|_| full);
    let journal = match &kept {
        Some(path) if std::path::Path::new(path).exists() => {
            Journal::open(std::path::Path::new(path)).await.unwrap()
        }
        Some(path) => journal(std::path::Path::new(path), erus, hours, end).await,
        None => journal(&dir.path().join("eru.db"), erus, hours, end).await,
    };
    let filled = filled.elapsed();
    // the reads as the operator's HTTP API makes them: through connections of their own
    let journal = journal.with_own_readers(2);
    // the page's two halves in process, as the handler runs them: the journal's rows read and
    // audited, then the audit rendered
    let params = eru_operator::http::ui::PageParams {
        since: Some(eru_operator::history::params::Time(
            end - chrono::Duration::hours(24),
        )),
        until: Some(eru_operator::history::params::Time(end)),
        ..Default::default()
    };
    let mut reads = Vec::new();
    let mut renders = Vec::new();
    let mut size = 0;
    for _ in 0..if full { REQUESTS / 2 } else { 1 } {
        let start = Instant::now();
        let audit = eru_operator::history::audit::read(
            &journal,
            &params.audit_params(end),
            end,
            &[],
            eru_operator::history::audit::Reads::FLEET_PAGE,
        )
        .await
        .unwrap();
        reads.push(start.elapsed());
        let start = Instant::now();
        let html = eru_operator::http::ui::fleet_page(&audit, &params, (0, 0)).into_string();
        renders.push(start.elapsed());
        size = html.len();
        if let Some(path) = std::env::var_os("ERU_AUDIT_BENCH_HTML") {
            std::fs::write(path, &html).unwrap(); // the page, to look at
        }
    }
    let (read, render) = (median(&mut reads), median(&mut renders));
    // `GET /audit`'s read in process, side by side, alternating: the records counted (what it
    // reads) against the records whole (what it read before, and an Eru's page still reads)
    let (mut counted, mut whole) = (Vec::new(), Vec::new());
    for i in 0..if full { REQUESTS / 2 } else { 1 } {
        use eru_operator::history::audit::{Reads, read};
        let mut pair = [(Reads::REPORT, &mut counted), (Reads::ERU_PAGE, &mut whole)];
        pair.rotate_left(i % 2); // each goes first in turn
        for (reads, times) in pair {
            let start = Instant::now();
            let audit = read(&journal, &params.audit_params(end), end, &[], reads)
                .await
                .unwrap();
            times.push(start.elapsed());
            assert!(audit.verdict.accounted, "{}", audit.verdict.summary);
        }
    }
    let (counted, whole) = (median(&mut counted), median(&mut whole));
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
    let window = format!(
        "since={}&until={}",
        (end - chrono::Duration::hours(24)).to_rfc3339(),
        end.to_rfc3339()
    )
    .replace('+', "%2B");
    let requests = if full { REQUESTS } else { 2 };
    let (page, audit) = tokio::task::spawn_blocking(move || {
        let page = timed(&format!("{base}/ui?{window}"), requests, |b| {
            b.contains("Every one of the") && b.matches("<g class=\"row\"").count() == erus
        });
        let audit = timed(&format!("{base}/audit?{window}"), requests, |b| {
            b.contains("\"accounted\":true")
        });
        (page, audit)
    })
    .await
    .unwrap();
    if !full {
        println!("audit bench smoke run ok (use hack/bench.sh for figures)");
        return;
    }
    let rows = erus as i64 * hours;
    println!("audit over HTTP, {erus} Erus, {rows} slot rows (filled in {filled:.1?}), a 24-hour window:");
    println!(
        "  GET /ui     (the page):  p50 {:?} p99 {:?} over {requests} requests",
        page.0, page.1
    );
    println!(
        "  GET /audit  (JSON, counters cross-checked): p50 {:?} p99 {:?} over {requests} requests",
        audit.0, audit.1
    );
    println!(
        "  the page in process: read and audit p50 {read:?}, render p50 {render:?} ({:.1} MB of HTML)",
        size as f64 / 1e6
    );
    println!(
        "  /audit's read and audit in process, counters cross-checked: the records counted p50 {counted:?}, \
         whole p50 {whole:?} ({:.2}x)",
        counted.as_secs_f64() / whole.as_secs_f64()
    );
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}
