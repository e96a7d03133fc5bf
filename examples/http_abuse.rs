//! The measurement of `hack/http-abuse.sh N` (run it through the script, which brings up a
//! cluster, installs deploy/'s RBAC and FlowSchemas, makes the identities and builds the
//! binaries): does the HTTP API, installed as it ships (`--http-auth kubernetes`, the operator as
//! its ServiceAccount), keep the slots on time and its own cost bounded while it is abused?
//!
//! One operator, N Deployments and N Erus due at two slots a few minutes apart: the first quiet,
//! the second loaded with C clients sending a new random bearer token with every request (each one
//! a TokenReview, unless the cap on reviews in flight refuses it first) and C clients with a valid
//! token asking for 30-day pages (`/ui` and `/audit`) of a namespace full of every-second Erus
//! (H of them, journaled with a month of epochs: the audit's work budget is what bounds a page).
//! Printed side by side: each slot's landed p50/p99/max and the loaded/quiet p99 ratio (goal ≤
//! 1.2x), the TokenReviews per second the operator sent against its cap on reviews in flight,
//! the operator's RSS (its peak while loaded), and every answer by status for each crowd. A 5xx
//! other than the documented 503, or no answer, fails the run.
//!
//! Usage: http_abuse N --operator PATH --operator-kubeconfig F --reader-token T --heavy-namespace NS
//!   [--clients C] [--heavy H] (KUBECONFIG names the cluster).

mod common;

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use chrono::{DateTime, SecondsFormat, Timelike, Utc};
use common::{Operator, Res, agent, create_deployments, create_erus, fmt_s, namespace, percentiles, rss_mb};
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Namespace};
use kube::{Api, Client, api::DeleteParams};

/// Minutes between the two slots: every rollout of the first ends well before the second.
const GAP_MINUTES: u32 = 3;
/// The crowds start this long before the loaded slot: the slot falls into a steady load.
const LEAD_IN: Duration = Duration::from_secs(20);

struct Args {
    n: usize,
    operator: PathBuf,
    operator_kubeconfig: PathBuf,
    reader_token: String,
    heavy_namespace: String,
    clients: usize,
    heavy: usize,
}

fn args() -> Args {
    let usage = "usage: http_abuse N --operator PATH --operator-kubeconfig F --reader-token T \
                 --heavy-namespace NS [--clients C] [--heavy H]";
    let mut it = std::env::args().skip(1);
    let mut a = Args {
        n: 0,
        operator: PathBuf::new(),
        operator_kubeconfig: PathBuf::new(),
        reader_token: String::new(),
        heavy_namespace: String::new(),
        clients: 200,
        heavy: 300,
    };
    while let Some(arg) = it.next() {
        let mut value = || it.next().expect(usage);
        match arg.as_str() {
            "--operator" => a.operator = value().into(),
            "--operator-kubeconfig" => a.operator_kubeconfig = value().into(),
            "--reader-token" => a.reader_token = value(),
            "--heavy-namespace" => a.heavy_namespace = value(),
            "--clients" => a.clients = value().parse().expect(usage),
            "--heavy" => a.heavy = value().parse().expect(usage),
            n => a.n = n.parse().expect(usage),
        }
    }
    assert!(
        a.n > 0 && a.operator.exists() && a.operator_kubeconfig.exists() && !a.reader_token.is_empty(),
        "{usage}"
    );
    a
}

fn say(what: impl AsRef<str>) {
    common::say("http-abuse", what);
}

/// What one crowd got.
#[derive(Default)]
struct Answers {
    /// Count per HTTP status (0: no answer: a connection error or the client's own timeout).
    by_status: BTreeMap<u16, usize>,
    /// Seconds of each answer.
    seconds: Vec<f64>,
}

/// `clients` threads, each on its own connection, looping until `stop`: `path(k)` with the
/// bearer token `token(k)` (k counts the thread's requests).
fn crowd(
    base: &str,
    clients: usize,
    stop: Arc<AtomicBool>,
    answers: Arc<Mutex<Answers>>,
    path: Arc<dyn Fn(usize) -> String + Send + Sync>,
    token: Arc<dyn Fn(usize) -> String + Send + Sync>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..clients)
        .map(|i| {
            let (base, stop, answers) = (base.to_string(), stop.clone(), answers.clone());
            let (path, token) = (path.clone(), token.clone());
            std::thread::spawn(move || {
                let agent = agent(Duration::from_secs(60));
                let mut k = i;
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    let request = agent
                        .get(&format!("{base}{}", path(k)))
                        .header("Authorization", &format!("Bearer {}", token(k)));
                    k += 1;
                    let status = match request.call() {
                        Ok(mut response) => {
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
                    a.seconds.push(seconds);
                }
            })
        })
        .collect()
}

/// A bearer token no one was ever issued: the shape of a ServiceAccount token, new every call.
fn random_token(k: usize) -> String {
    static SEED: AtomicU64 = AtomicU64::new(0x9e37_79b9_7f4a_7c15);
    let mut x = SEED.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed) ^ (k as u64);
    let mut part = |n: usize| -> String {
        (0..n)
            .map(|_| {
                // xorshift64*
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                let c = (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 58) as u8;
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[c as usize] as char
            })
            .collect()
    };
    format!("eyJhbGciOiJSUzI1NiJ9.{}.{}", part(400), part(342))
}

/// `eru_http_access_reviews_total{review="token", result}` of the operator's /metrics, read with
/// `token` (a reader's grant may take a few seconds to reach the API server's authorizer).
fn token_reviews(operator: &Operator, token: &str, result: &str) -> f64 {
    // (the exposition sorts labels by name)
    let series = format!(r#"eru_http_access_reviews_total{{result="{result}",review="token"}} "#);
    let mut last = String::new();
    for _ in 0..60 {
        let answer = agent(Duration::from_secs(30))
            .get(&operator.url("/metrics"))
            .header("Authorization", &format!("Bearer {token}"))
            .call();
        if let Ok(mut response) = answer {
            let status = response.status().as_u16();
            let text =
                (response.body_mut().with_config().limit(u64::MAX).read_to_string()).unwrap_or_default();
            if let Some(value) = text
                .lines()
                .find_map(|l| l.strip_prefix(&series))
                .and_then(|v| v.parse().ok())
            {
                return value;
            }
            last = format!("{status}: {}", text.chars().take(300).collect::<String>());
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    panic!("no {series} in /metrics: {last}")
}

/// H Erus every second in `ns`, as the journal holds them after a month: a ledger each and an
/// epoch in force since 31 days ago (no Kubernetes object: the audit reads only the journal).
async fn heavy_namespace(operator: &Operator, ns: &str, h: usize) -> Res<()> {
    let file = sqlx::sqlite::SqliteConnectOptions::new().filename(&operator.database);
    let journal = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(file)
        .await?;
    let now = Utc::now();
    let from = eru_operator::journal::ts(now - chrono::Duration::days(31));
    let cursor = eru_operator::journal::ts(now);
    let mut tx = journal.begin().await?;
    for i in 0..h {
        let (uid, name) = (format!("heavy-{i}"), format!("every-second-{i}"));
        sqlx::query(
            "INSERT INTO eru_ledger (uid, namespace, name, accounted_through) VALUES ($1, $2, $3, $4)",
        )
        .bind(&uid)
        .bind(ns)
        .bind(&name)
        .bind(&cursor)
        .execute(&mut *tx)
        .await?;
        let spec = serde_json::json!({"schedule": "* * * * * *", "suspend": true,
                                      "startingDeadlineSeconds": 300, "target": name});
        sqlx::query(
            "INSERT INTO spec_epochs (uid, generation, effective_from, observed_at, spec) VALUES ($1, 1, $2, $2, $3)",
        )
        .bind(&uid)
        .bind(&from)
        .bind(spec.to_string())
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    journal.close().await;
    Ok(())
}

#[tokio::main]
async fn main() -> Res<()> {
    let args = args();
    let n = args.n;
    let client = Client::try_default().await?;
    let ns = namespace(&client, "abuse").await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let created = create_deployments(&deployments, n).await?;
    say(format!("{n} Deployments created in {created:.1} s and observed"));
    let dir = tempfile::tempdir()?;
    let mut operator = Operator::new(args.operator.clone(), dir.path(), &ns)?;
    operator.kubeconfig = Some(args.operator_kubeconfig.clone());
    operator.extra = vec!["--http-auth".into(), "kubernetes".into()];
    // the journal first (migrated by a first start), then the heavy namespace's month in it
    operator.start();
    operator.wait_ready().await;
    operator.stop();
    heavy_namespace(&operator, &args.heavy_namespace, args.heavy).await?;
    operator.start();
    operator.wait_ready().await;
    say(format!(
        "{} every-second Erus journaled in {} since 31 days ago",
        args.heavy, args.heavy_namespace
    ));

    let lead = chrono::Duration::seconds((6.0 * created + 40.0) as i64);
    let first = {
        let at = Utc::now() + lead;
        DateTime::from_timestamp(at.timestamp() + 1, 0).unwrap()
    };
    let slots = [first, first + chrono::Duration::minutes(GAP_MINUTES.into())];
    let schedule = format!(
        "{} {},{} * * * *",
        first.second(),
        slots[0].minute(),
        slots[1].minute()
    );
    say(format!(
        "slots from {} (schedule '{schedule}' UTC): quiet, then loaded",
        first.to_rfc3339_opts(SecondsFormat::Secs, true)
    ));
    let erus: Api<eru_operator::eru::Eru> = Api::namespaced(client.clone(), &ns);
    create_erus(&erus, n, &schedule).await?;
    say(format!(
        "{n} Erus Waiting; operator RSS {:.1} MB",
        rss_mb(operator.pid())
    ));

    let journal = operator.journal().await?;
    let mut table: Vec<(String, String)> = Vec::new();
    let mut p99 = Vec::new();
    let mut exact = true;
    let mut crowds: Vec<(&str, Answers)> = Vec::new();
    let (mut reviews_per_second, mut over_cap, mut rss_peak) = (0.0, 0.0, 0.0f64);
    for (k, slot) in slots.iter().enumerate() {
        let loaded = k == 1;
        let start_at = *slot - chrono::Duration::from_std(LEAD_IN)?;
        while Utc::now() < start_at {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let strangers = Arc::new(Mutex::new(Answers::default()));
        let readers = Arc::new(Mutex::new(Answers::default()));
        let mut threads = Vec::new();
        let reviews_before = token_reviews(&operator, &args.reader_token, "answered");
        let over_cap_before = token_reviews(&operator, &args.reader_token, "over_cap");
        let t0 = Instant::now();
        if loaded {
            say(format!(
                "slot {}: {} + {} clients on",
                k + 1,
                args.clients,
                args.clients
            ));
            threads.extend(crowd(
                &operator.url(""),
                args.clients,
                stop.clone(),
                strangers.clone(),
                Arc::new(|k| ["/history", "/audit", "/slots", "/ui"][k % 4].to_string()),
                Arc::new(random_token),
            ));
            let heavy = args.heavy_namespace.clone();
            let token = args.reader_token.clone();
            threads.extend(crowd(
                &operator.url(""),
                args.clients,
                stop.clone(),
                readers.clone(),
                Arc::new(move |k| {
                    if k % 2 == 0 {
                        format!("/ui?namespace={heavy}&window=30d")
                    } else {
                        let since = (Utc::now() - chrono::Duration::days(30))
                            .to_rfc3339_opts(SecondsFormat::Secs, true);
                        format!("/audit?namespace={heavy}&since={since}")
                    }
                }),
                Arc::new(move |_| token.clone()),
            ));
        }
        let bound = *slot + chrono::Duration::seconds(120);
        loop {
            rss_peak = rss_peak.max(rss_mb(operator.pid()));
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
        if loaded {
            let seconds = t0.elapsed().as_secs_f64();
            reviews_per_second =
                (token_reviews(&operator, &args.reader_token, "answered") - reviews_before) / seconds;
            over_cap = token_reviews(&operator, &args.reader_token, "over_cap") - over_cap_before;
        }
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            let _ = t.join();
        }
        let rows: Vec<(String, Option<String>)> =
            sqlx::query_as("SELECT decided_at, patched_at FROM restarts WHERE slot = $1")
                .bind(eru_operator::journal::ts(*slot))
                .fetch_all(&journal)
                .await?;
        let after = |t: &str| {
            DateTime::parse_from_rfc3339(t)
                .map_or(f64::NAN, |t| (t.with_timezone(&Utc) - *slot).as_seconds_f64())
        };
        let landed: Vec<f64> = rows.iter().filter_map(|(_, p)| p.as_deref().map(after)).collect();
        let (l50, l99, lmax) = percentiles(landed.clone());
        p99.push(l99);
        exact &= rows.len() == n && landed.len() == n;
        table.push((
            format!(
                "slot {} {} ({})",
                k + 1,
                slot.format("%H:%M:%S"),
                if loaded {
                    format!("{} random-token + {} reader clients", args.clients, args.clients)
                } else {
                    "quiet".into()
                }
            ),
            format!(
                "landed p50 {} p99 {} max {}; {} of {n} restarted",
                fmt_s(l50),
                fmt_s(l99),
                fmt_s(lmax),
                landed.len()
            ),
        ));
        if loaded {
            crowds.push(("random tokens", std::mem::take(&mut *strangers.lock().unwrap())));
            crowds.push((
                "reader, 30-day pages",
                std::mem::take(&mut *readers.lock().unwrap()),
            ));
        }
    }
    journal.close().await;
    table.push((
        "landed p99, loaded / quiet".into(),
        format!("{:.2}x (goal ≤ 1.2x)", p99[1] / p99[0]),
    ));
    table.push((
        "TokenReviews sent while loaded".into(),
        format!(
            "{reviews_per_second:.0}/s, {over_cap:.0} refused over the cap (--http-max-reviews: 16 in \
             flight of each kind)"
        ),
    ));
    let mut bad = 0;
    for (who, answers) in &crowds {
        let (p50, p99, _) = percentiles(answers.seconds.clone());
        bad += (answers.by_status.iter())
            .filter(|(s, _)| **s == 0 || (**s >= 500 && **s != 503))
            .map(|(_, c)| c)
            .sum::<usize>();
        table.push((
            format!("answers to the {who} clients"),
            format!(
                "{}; p50 {} p99 {}",
                (answers.by_status.iter())
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
                fmt_s(p50),
                fmt_s(p99)
            ),
        ));
    }
    table.push((
        "operator RSS".into(),
        format!(
            "peak {rss_peak:.1} MB while loaded; {:.1} MB at the end",
            rss_mb(operator.pid())
        ),
    ));
    operator.stop();
    let _ = Api::<Namespace>::all(client.clone())
        .delete(&ns, &DeleteParams::background())
        .await;
    println!(
        "\n| N = {n}; {} random-token and {} reader clients; {} every-second Erus | |\n|---|---|",
        args.clients, args.clients, args.heavy
    );
    for (k, v) in &table {
        println!("| {k} | {v} |");
    }
    println!("| operator log | {} |", operator.log.display());
    let _kept = dir.keep();
    assert!(exact, "a slot was lost or doubled");
    assert_eq!(bad, 0, "a client got a 5xx other than 503, or no answer");
    Ok(())
}
