//! The measurement of `hack/http-load.sh N` (run it through the script, which brings up a cluster
//! and builds the binaries): does a crowd of heavy HTTP API clients make the slots late?
//!
//! One cluster, one operator, N Deployments and N Erus all due at the same slots, every few
//! minutes. The slots alternate: quiet (no client), loaded (C clients looping on heavy `/history`,
//! `/slots`, `/missed` and `/audit` queries from 20 s before the slot until every restart of it
//! landed), quiet, loaded… Printed side by side: each slot's fire lateness from the journal
//! (decided and landed, each minus the slot) p50/p99/max, the loaded slots' p99 over the quiet
//! ones', the clients' answers by status and latency, and whether every slot restarted every Eru
//! exactly once. A 5xx other than the documented 503 (over the query cap, or past the request
//! timeout) fails the run.
//!
//! Usage: http_load N --operator PATH [--clients C] [--rounds R] (KUBECONFIG names the cluster).

mod common;

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use chrono::{DateTime, SecondsFormat, Timelike, Utc};
use common::{Operator, Res, create_deployments, create_erus, fmt_s, namespace, percentiles, rss_mb};
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Namespace};
use kube::{Api, Client, api::DeleteParams};

/// Minutes between two slots: every rollout of a slot ends well before the next one.
const GAP_MINUTES: u32 = 3;
/// The clients start this long before a loaded slot: the slot falls into a steady load.
const LEAD_IN: Duration = Duration::from_secs(20);

struct Args {
    n: usize,
    operator: PathBuf,
    clients: usize,
    rounds: usize,
}

fn args() -> Args {
    let usage = "usage: http_load N --operator PATH [--clients C] [--rounds R]";
    let mut it = std::env::args().skip(1);
    let mut a = Args {
        n: 0,
        operator: PathBuf::new(),
        clients: 200,
        rounds: 2,
    };
    while let Some(arg) = it.next() {
        let mut value = || it.next().expect(usage);
        match arg.as_str() {
            "--operator" => a.operator = value().into(),
            "--clients" => a.clients = value().parse().expect(usage),
            "--rounds" => a.rounds = value().parse().expect(usage),
            n => a.n = n.parse().expect(usage),
        }
    }
    assert!(a.n > 0 && a.rounds > 0 && a.operator.exists(), "{usage}");
    a
}

fn say(what: impl AsRef<str>) {
    common::say("http-load", what);
}

/// What the clients got during one loaded slot.
#[derive(Default)]
struct Answers {
    /// Count per HTTP status (0: no answer: a connection error or the client's own timeout).
    by_status: BTreeMap<u16, usize>,
    /// Seconds of each 200 answer.
    ok_seconds: Vec<f64>,
}

/// `clients` threads looping on heavy journal queries until `stop`; each keeps one connection.
fn spawn_clients(
    base: &str,
    clients: usize,
    stop: Arc<AtomicBool>,
    answers: Arc<Mutex<Answers>>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..clients)
        .map(|i| {
            let (base, stop, answers) = (base.to_string(), stop.clone(), answers.clone());
            std::thread::spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .timeout_global(Some(Duration::from_secs(60)))
                    .build()
                    .into();
                let mut k = i;
                while !stop.load(Ordering::Relaxed) {
                    // the heaviest each listing allows: 1,000 rows, the audit of a week
                    let week_ago =
                        (Utc::now() - chrono::Duration::days(7)).to_rfc3339_opts(SecondsFormat::Secs, true);
                    let path = match k % 4 {
                        0 => "/history?limit=1000".to_string(),
                        1 => format!("/audit?since={week_ago}"),
                        2 => "/slots?limit=1000".to_string(),
                        _ => "/missed?limit=1000".to_string(),
                    };
                    k += 1;
                    let t = Instant::now();
                    let status = match agent.get(&format!("{base}{path}")).call() {
                        Ok(mut response) => {
                            // read the whole answer, as a client would, and drop it
                            let body = response.body_mut().with_config().limit(u64::MAX).read_to_vec();
                            if body.is_ok() {
                                response.status().as_u16()
                            } else {
                                0
                            }
                        }
                        Err(_) => 0,
                    };
                    let seconds = t.elapsed().as_secs_f64();
                    let mut a = answers.lock().unwrap();
                    *a.by_status.entry(status).or_default() += 1;
                    if status == 200 {
                        a.ok_seconds.push(seconds);
                    }
                }
            })
        })
        .collect()
}

#[tokio::main]
async fn main() -> Res<()> {
    let args = args();
    let n = args.n;
    let client = Client::try_default().await?;
    let ns = namespace(&client, "load").await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let created = create_deployments(&deployments, n).await?;
    say(format!("{n} Deployments created in {created:.1} s and observed"));
    let dir = tempfile::tempdir()?;
    let mut operator = Operator::new(args.operator.clone(), dir.path(), &ns)?;
    operator.start();
    operator.wait_ready().await;

    // the slots: 2 × rounds of them, GAP_MINUTES apart, at one second of the minute, the first
    // after the Erus are created and reconciled (a few times as long as the Deployments took)
    let lead = chrono::Duration::seconds((6.0 * created + 40.0) as i64);
    let first = {
        let at = Utc::now() + lead;
        DateTime::from_timestamp(at.timestamp() + 1, 0).unwrap()
    };
    let slots: Vec<DateTime<Utc>> = (0..2 * args.rounds)
        .map(|k| first + chrono::Duration::minutes((k as u32 * GAP_MINUTES).into()))
        .collect();
    assert!(
        slots.len() as u32 * GAP_MINUTES < 60,
        "the slots' minutes must not come round again within the run: fewer rounds"
    );
    let minutes: Vec<String> = slots.iter().map(|s| s.minute().to_string()).collect();
    let schedule = format!("{} {} * * * *", first.second(), minutes.join(","));
    say(format!(
        "slots from {} (schedule '{schedule}' UTC), quiet and loaded in turn",
        first.to_rfc3339_opts(SecondsFormat::Secs, true)
    ));
    let erus: Api<eru_operator::eru::Eru> = Api::namespaced(client.clone(), &ns);
    create_erus(&erus, n, &schedule).await?;
    assert!(
        Utc::now() + chrono::Duration::from_std(LEAD_IN)? < first,
        "the first slot is too close: raise the lead"
    );
    say(format!(
        "{n} Erus Waiting; operator RSS {:.1} MB",
        rss_mb(operator.pid())
    ));

    // the journal, read-only (WAL): progress and lateness without loading the HTTP API measured
    let journal = operator.journal().await?;
    let mut loaded_answers: Vec<Answers> = Vec::new();
    for (k, slot) in slots.iter().enumerate() {
        let loaded = k % 2 == 1;
        let start_at = *slot - chrono::Duration::from_std(LEAD_IN)?;
        while Utc::now() < start_at {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let answers = Arc::new(Mutex::new(Answers::default()));
        let threads = if loaded {
            say(format!("slot {}: {} clients on", k + 1, args.clients));
            spawn_clients(&operator.url(""), args.clients, stop.clone(), answers.clone())
        } else {
            Vec::new()
        };
        // until every restart of the slot landed (and a little longer), or a bound
        let bound = *slot + chrono::Duration::seconds(120);
        loop {
            let landed: i64 = sqlx::query_scalar("SELECT count(patched_at) FROM restarts WHERE slot = $1")
                .bind(eru_operator::journal::ts(*slot))
                .fetch_one(&journal)
                .await?;
            if landed as usize == n || Utc::now() > bound {
                say(format!("slot {}: {landed} of {n} restarts landed", k + 1));
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            let _ = t.join();
        }
        if loaded {
            let answers = std::mem::take(&mut *answers.lock().unwrap());
            say(format!(
                "slot {}: answers by status {:?}",
                k + 1,
                answers.by_status
            ));
            loaded_answers.push(answers);
        }
    }

    // lateness and exactly once, per slot, from the journal
    let mut table: Vec<(String, String)> = Vec::new();
    let (mut quiet_p99, mut loaded_p99) = (Vec::new(), Vec::new());
    let mut exact = true;
    for (k, slot) in slots.iter().enumerate() {
        let rows: Vec<(String, Option<String>)> =
            sqlx::query_as("SELECT decided_at, patched_at FROM restarts WHERE slot = $1")
                .bind(eru_operator::journal::ts(*slot))
                .fetch_all(&journal)
                .await?;
        let other: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM slots WHERE slot <= $1 AND last_slot >= $1 AND result <> 'fired'",
        )
        .bind(eru_operator::journal::ts(*slot))
        .fetch_one(&journal)
        .await?;
        let after = |t: &str| {
            DateTime::parse_from_rfc3339(t)
                .map_or(f64::NAN, |t| (t.with_timezone(&Utc) - *slot).as_seconds_f64())
        };
        let decided: Vec<f64> = rows.iter().map(|(d, _)| after(d)).collect();
        let landed: Vec<f64> = rows.iter().filter_map(|(_, p)| p.as_deref().map(after)).collect();
        let (d50, d99, _) = percentiles(decided);
        let (l50, l99, lmax) = percentiles(landed.clone());
        let loaded = k % 2 == 1;
        if loaded { &mut loaded_p99 } else { &mut quiet_p99 }.push(l99);
        exact &= rows.len() == n && landed.len() == n && other == 0;
        table.push((
            format!(
                "slot {} {} ({})",
                k + 1,
                slot.format("%H:%M:%S"),
                if loaded { format!("{} clients", args.clients) } else { "quiet".into() }
            ),
            format!(
                "decided p50 {} p99 {}; landed p50 {} p99 {} max {}; {} of {n} restarted, {other} missed/skipped",
                fmt_s(d50),
                fmt_s(d99),
                fmt_s(l50),
                fmt_s(l99),
                fmt_s(lmax),
                landed.len()
            ),
        ));
    }
    journal.close().await;
    let mut all = Answers::default();
    for a in loaded_answers {
        for (status, count) in a.by_status {
            *all.by_status.entry(status).or_default() += count;
        }
        all.ok_seconds.extend(a.ok_seconds);
    }
    let (o50, o99, _) = percentiles(all.ok_seconds.clone());
    let bad: usize = (all.by_status.iter())
        .filter(|(s, _)| **s == 0 || (**s >= 500 && **s != 503))
        .map(|(_, c)| c)
        .sum();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let ratio = mean(&loaded_p99) / mean(&quiet_p99);
    table.push((
        "clients' answers (loaded slots)".into(),
        format!(
            "{}; 200s p50 {} p99 {}",
            (all.by_status.iter())
                .map(|(s, c)| format!(
                    "{c} × {}",
                    if *s == 0 {
                        "no answer".into()
                    } else {
                        s.to_string()
                    }
                ))
                .collect::<Vec<_>>()
                .join(", "),
            fmt_s(o50),
            fmt_s(o99)
        ),
    ));
    table.push((
        "landed p99, loaded / quiet (means of the slots)".into(),
        format!("{ratio:.2}x (goal ≤ 1.2x)"),
    ));
    table.push((
        "operator RSS at the end".into(),
        format!("{:.1} MB", rss_mb(operator.pid())),
    ));
    operator.stop();
    let _ = Api::<Namespace>::all(client.clone())
        .delete(&ns, &DeleteParams::background())
        .await;

    println!("\n| N = {n}, {} clients | |\n|---|---|", args.clients);
    for (k, v) in &table {
        println!("| {k} | {v} |");
    }
    println!("| operator log | {} |", operator.log.display());
    let _kept = dir.keep(); // the journal and log stay for a look
    assert!(exact, "a slot was lost or doubled");
    assert_eq!(bad, 0, "a client got a 5xx other than 503, or no answer");
    Ok(())
}
