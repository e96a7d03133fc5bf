//! The measurements of `hack/scale.sh N` (run it through the script, which brings up a cluster
//! with enough kwok nodes and builds the release binaries).
//!
//! In one cluster and one run:
//! 1. N Deployments (replicas 0), the operator started on them (RSS), N Erus all due at one slot
//!    (RSS, how long until all are reconciled);
//! 2. the slot: fire lateness from the journal (decided and landed, each minus the slot) p50, p99,
//!    max; rollouts finished; every Eru's slot accounted exactly once, none restarted twice (its
//!    history, its records, and its Deployment's annotation and generation: patched once per
//!    restart); the journal reads per Eru pass; RSS in the burst and after it. With `--flowcontrol FILE`, two
//!    slots: the first without the FlowSchema of FILE, the second with it (applied between them),
//!    and a probe client (`--probe-kubeconfig`: another identity) sending a fixed mix of GET,
//!    LIST and small PATCH requests at a fixed rate all along: its latency 20 s before each slot
//!    (idle), in the burst (the slot until its last restart landed) and 30 s after;
//! 3. a cold start: the operator restarted on N existing Erus, until every one is scheduled again;
//! 4. the physical limit: the same N restart applies sent by a tight concurrent loop of the same
//!    client, with the operator stopped;
//! 5. M CronJobs due at one minute: the CronJob controller's Job-creation lateness (the API
//!    server's timestamps, 1 s resolution).
//!
//! With `--paces P1,P2,...` (and a probe, no FlowSchema), one slot per restart pace instead: the
//! operator is restarted before each slot with `--restart-pace`/`--restart-rate` as P says
//! (`unlimited`, `fixed:R`, `adaptive` or `adaptive:R`), and each slot's landing against the limit
//! and the probe's p99 against idle are the frontier of docs/performance.md.
//!
//! Usage: scale N --operator PATH [--cronjobs M] [--concurrency C] [--operator-kubeconfig F]
//!   [--flowcontrol FILE --probe-kubeconfig F [--probe-rate R]] [--paces P,...]
//!   (KUBECONFIG names the cluster and its admin, who measures the limit: exempt from API Priority
//!   and Fairness). C (64) is how many of this program's own creations and tight-loop applies run
//!   at once; the operator's passes at once are its `--concurrency`, `ERU_CONCURRENCY` in the
//!   environment this program starts it in.

mod common;

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use chrono::{DateTime, SecondsFormat, Timelike, Utc};
use common::{
    Operator, Res, create_deployments, create_erus, each, fmt_s, get, namespace, percentiles, rss_anon_mb,
    rss_mb, time,
};
use k8s_openapi::api::{
    apps::v1::Deployment,
    batch::v1::{CronJob, Job},
    core::v1::{ConfigMap, Namespace},
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

struct Args {
    n: usize,
    cronjobs: usize,
    operator: PathBuf,
    concurrency: usize,
    operator_kubeconfig: Option<PathBuf>,
    flowcontrol: Option<PathBuf>,
    probe_kubeconfig: Option<PathBuf>,
    probe_rate: f64,
    /// The priority level's nominalConcurrencyShares to measure, a slot each (none: the file's).
    apf_shares: Vec<u32>,
    /// Restart paces to measure, a slot each.
    paces: Vec<String>,
    /// The namespaces and their objects stay (to measure more cold starts on them).
    keep: bool,
}

/// The operator's flags for a pace of `--paces`.
fn pace_flags(pace: &str) -> Vec<String> {
    let (mode, rate) = pace.split_once(':').unwrap_or((pace, ""));
    assert!(
        matches!(mode, "unlimited" | "fixed" | "adaptive") && (mode != "fixed" || !rate.is_empty()),
        "--paces: unlimited, fixed:R, adaptive or adaptive:R, not {pace:?}"
    );
    if mode == "unlimited" {
        return Vec::new(); // the default
    }
    let mut flags = vec!["--restart-pace".to_string(), mode.to_string()];
    if !rate.is_empty() {
        flags.extend(["--restart-rate".to_string(), rate.to_string()]);
    }
    flags
}

fn args() -> Args {
    let mut it = std::env::args().skip(1);
    let mut a = Args {
        n: 0,
        cronjobs: 0,
        operator: PathBuf::new(),
        concurrency: 64,
        operator_kubeconfig: None,
        flowcontrol: None,
        probe_kubeconfig: None,
        probe_rate: 20.0,
        apf_shares: Vec::new(),
        paces: Vec::new(),
        keep: false,
    };
    while let Some(arg) = it.next() {
        let mut value = || it.next().expect("a value after the flag");
        match arg.as_str() {
            "--operator" => a.operator = value().into(),
            "--cronjobs" => a.cronjobs = value().parse().expect("--cronjobs M"),
            "--concurrency" => a.concurrency = value().parse().expect("--concurrency C"),
            "--operator-kubeconfig" => a.operator_kubeconfig = Some(value().into()),
            "--flowcontrol" => a.flowcontrol = Some(value().into()),
            "--probe-kubeconfig" => a.probe_kubeconfig = Some(value().into()),
            "--probe-rate" => a.probe_rate = value().parse().expect("--probe-rate R (requests/s)"),
            "--apf-shares" => {
                a.apf_shares = (value()
                    .split(',')
                    .map(|v| v.parse().expect("--apf-shares S[,S...]")))
                .collect()
            }
            "--paces" => a.paces = value().split(',').map(str::to_string).collect(),
            "--keep" => a.keep = true,
            n => a.n = n.parse().expect("usage: scale N --operator PATH [--cronjobs M]"),
        }
    }
    assert!(
        a.n > 0 && a.operator.exists(),
        "usage: scale N --operator PATH [--cronjobs M]"
    );
    assert!(
        a.flowcontrol.is_none() || a.probe_kubeconfig.is_some(),
        "--flowcontrol needs --probe-kubeconfig"
    );
    assert!(
        a.paces.is_empty() || (a.flowcontrol.is_none() && a.probe_kubeconfig.is_some()),
        "--paces needs --probe-kubeconfig and no --flowcontrol"
    );
    a.paces.iter().for_each(|p| drop(pace_flags(p)));
    a
}

fn say(what: impl AsRef<str>) {
    common::say("scale", what);
}

/// Pages through `/history` for the restarts of `slot`.
fn history(operator: &Operator, slot: DateTime<Utc>) -> Vec<Value> {
    let mut rows = Vec::new();
    let mut cursor = String::new();
    loop {
        let url = operator.url(&format!("/history?limit=1000{cursor}"));
        let Some(page) = get(&url).and_then(|b| serde_json::from_str::<Value>(&b).ok()) else {
            return rows;
        };
        rows.extend(
            page["items"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|r| time(&r["slot"]) == Some(slot)),
        );
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => return rows,
        }
    }
}

/// One request of the probe: when it was sent, how long it took, whether it succeeded.
#[derive(Clone, Copy)]
struct Sample {
    at: DateTime<Utc>,
    seconds: f64,
    ok: bool,
}

/// Another client of the cluster: a fixed mix of GET, LIST and small PATCH requests on a few
/// ConfigMaps of its own namespace, at a fixed rate (open loop: a slow answer does not slow the
/// rate down), with an identity of its own (a ServiceAccount token), until `stop`.
struct Probe {
    samples: Arc<std::sync::Mutex<Vec<Sample>>>,
    /// Requests not sent because 256 were still waiting for their answers.
    skipped: Arc<std::sync::atomic::AtomicUsize>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Probe {
    async fn start(kubeconfig: &std::path::Path, rate: f64) -> Res<Self> {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig)?;
        let mut config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
                .await?;
        // every answer as it comes: a retried 429 would hide in the latency
        config.default_retry = false;
        let ns = config.default_namespace.clone();
        let client = Client::try_from(config)?;
        let cms: Api<ConfigMap> = Api::namespaced(client, &ns);
        for i in 0..10 {
            let cm: ConfigMap = serde_json::from_value(
                json!({"metadata": {"name": format!("probe-{i}")}, "data": {"tick": "0"}}),
            )?;
            cms.patch(
                &format!("probe-{i}"),
                &PatchParams::apply("scale-probe").force(),
                &Patch::Apply(cm),
            )
            .await?;
        }
        let probe = Self {
            samples: Arc::default(),
            skipped: Arc::default(),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let (samples, skipped, stop) = (probe.samples.clone(), probe.skipped.clone(), probe.stop.clone());
        tokio::spawn(async move {
            let in_flight = Arc::new(AtomicUsize::new(0));
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                i += 1;
                if in_flight.load(Ordering::Relaxed) >= 256 {
                    skipped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                in_flight.fetch_add(1, Ordering::Relaxed);
                let (cms, samples, in_flight) = (cms.clone(), samples.clone(), in_flight.clone());
                tokio::spawn(async move {
                    let at = Utc::now();
                    let t = Instant::now();
                    let name = format!("probe-{}", i % 10);
                    let ok = match i % 3 {
                        0 => cms.get(&name).await.is_ok(),
                        1 => cms.list(&ListParams::default()).await.is_ok(),
                        _ => {
                            let patch = json!({"data": {"tick": i.to_string()}});
                            cms.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                                .await
                                .is_ok()
                        }
                    };
                    let seconds = t.elapsed().as_secs_f64();
                    samples.lock().unwrap().push(Sample { at, seconds, ok });
                    in_flight.fetch_sub(1, Ordering::Relaxed);
                });
            }
        });
        Ok(probe)
    }

    /// Its answers sent in [from, to): "n requests: p50 p99 (errors)" and the p99.
    fn window(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> (String, f64) {
        let samples = self.samples.lock().unwrap();
        let inside: Vec<&Sample> = samples.iter().filter(|s| s.at >= from && s.at < to).collect();
        let errors = inside.iter().filter(|s| !s.ok).count();
        let (p50, p99, _) = percentiles(inside.iter().map(|s| s.seconds).collect());
        (
            format!(
                "{} requests: p50 {} p99 {}{}",
                inside.len(),
                fmt_s(p50),
                fmt_s(p99),
                if errors > 0 {
                    format!(" ({errors} failed)")
                } else {
                    String::new()
                }
            ),
            p99,
        )
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The probe's window common to every pace: the default starting deadline, in which every
/// restart of a slot begins.
const FIVE_MINUTES: i64 = eru_operator::eru::crd::DEFAULT_STARTING_DEADLINE_SECONDS;

/// What one slot showed.
struct SlotRun {
    l50: f64,
    l99: f64,
    lmax: f64,
    /// Erus whose restart for the slot landed.
    restarted: usize,
    /// Each Eru's slot accounted once (restarted or recorded), none restarted twice.
    exact: bool,
}

/// The FlowSchema of `file` with its priority level's nominalConcurrencyShares set to `shares`
/// (the file's own value when `None`), applied as the admin; the seats the API server gave it.
async fn apply_flowcontrol(
    file: &std::path::Path,
    shares: Option<u32>,
    dir: &std::path::Path,
) -> Res<String> {
    let text = std::fs::read_to_string(file)?;
    let text = match shares {
        Some(shares) => {
            let re = regex::Regex::new(r"nominalConcurrencyShares: \d+").unwrap();
            re.replace(&text, format!("nominalConcurrencyShares: {shares}"))
                .into_owned()
        }
        None => text,
    };
    let applied = dir.join("flowcontrol.yaml");
    std::fs::write(&applied, text)?;
    kubectl("apply", &applied)?;
    // the level's seats, from the API server's own metrics
    tokio::time::sleep(Duration::from_secs(2)).await;
    let metrics = std::process::Command::new("kubectl")
        .args(["get", "--raw", "/metrics"])
        .output()?;
    let seats = String::from_utf8_lossy(&metrics.stdout)
        .lines()
        .find(|l| l.starts_with("apiserver_flowcontrol_current_limit_seats{priority_level=\"eru-operator\"}"))
        .and_then(|l| l.rsplit(' ').next().map(str::to_string))
        .unwrap_or_else(|| "?".into());
    Ok(seats)
}

/// `kubectl apply|delete -f file` (the FlowSchema of the run), as the admin.
fn kubectl(verb: &str, file: &std::path::Path) -> Res<()> {
    let mut command = std::process::Command::new("kubectl");
    command.arg(verb).arg("-f").arg(file);
    if verb == "delete" {
        command.arg("--ignore-not-found");
    }
    let status = command.stdout(std::process::Stdio::null()).status()?;
    if !status.success() {
        return Err(format!("kubectl {verb} -f {} failed", file.display()).into());
    }
    Ok(())
}

/// Slot number `nth` of the run: waits for it, follows it in the journal until every rollout
/// finished (or a bound), and reports its lateness, memory, the probe's latency around it and
/// whether each Eru restarted exactly once for it.
#[allow(clippy::too_many_arguments)]
async fn measure_slot(
    operator: &Operator,
    n: usize,
    slot: DateTime<Utc>,
    nth: usize,
    label: &str,
    rollouts: i64,
    probe: Option<&Probe>,
    row: &mut impl FnMut(&str, String),
) -> Res<SlotRun> {
    let rss_before = (rss_mb(operator.pid()), rss_anon_mb(operator.pid()));
    let mut peak = rss_before;
    while Utc::now() < slot + chrono::Duration::seconds(1) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // every restart lands first; rollouts then take as long as the Deployment controller.
    // Progress is counted in the journal file itself (read-only, WAL): paging N rows of /history
    // every few seconds would load the operator during the very burst it is measured in.
    let journal = operator.journal().await?;
    // (a bound, not a target: the table says how many finished by then)
    let deadline = slot + chrono::Duration::seconds(rollouts);
    let mut landed_at = None;
    let mut rss_after = (f64::NAN, f64::NAN);
    loop {
        let rss = (rss_mb(operator.pid()), rss_anon_mb(operator.pid()));
        let (landed, open): (i64, i64) = sqlx::query_as(
            "SELECT count(patched_at), count(*) FILTER (WHERE outcome = 'in_progress') FROM restarts WHERE slot = $1",
        )
        .bind(eru_operator::journal::ts(slot))
        .fetch_one(&journal)
        .await?;
        match landed_at {
            None => peak = (peak.0.max(rss.0), peak.1.max(rss.1)),
            // "after": a minute past the last restart (the operator trims its heap once a minute)
            Some(at) if Utc::now() > at + chrono::Duration::seconds(65) && rss_after.0.is_nan() => {
                rss_after = rss
            }
            Some(_) => {}
        }
        // past the Erus' starting deadline (the default) no restart of the slot begins: a pace
        // that held some past it has them recorded skipped, and the rest have landed
        let started = Utc::now() > slot + chrono::Duration::seconds(FIVE_MINUTES + 5);
        if landed_at.is_none() && (landed as usize == n || started) {
            landed_at = Some(Utc::now());
            say(format!("{landed} of {n} restarts of slot {nth} landed"));
        }
        // (with a probe, the slot's first five minutes are its common window: a burst's rollouts
        // outlast it, a paced burst fills it)
        let window = probe.is_none() || Utc::now() > slot + chrono::Duration::seconds(FIVE_MINUTES + 1);
        if (open == 0 && landed_at.is_some() && !rss_after.0.is_nan() && window) || Utc::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    journal.close().await;
    let rows = history(operator, slot);
    let of = |field: &str| -> Vec<f64> {
        rows.iter()
            .filter_map(|r| time(&r[field]))
            .map(|t| (t - slot).as_seconds_f64())
            .collect()
    };
    let (decided, landed, finished) = (of("decided_at"), of("patched_at"), of("finished_at"));
    let (d50, d99, dmax) = percentiles(decided.clone());
    let (l50, l99, lmax) = percentiles(landed.clone());
    let (_, f99, fmax) = percentiles(finished.clone());
    row(
        &format!("slot {nth}{label}: fire lateness, decided (journal decided_at - slot)"),
        format!("p50 {} p99 {} max {}", fmt_s(d50), fmt_s(d99), fmt_s(dmax)),
    );
    row(
        &format!("slot {nth}{label}: fire lateness, landed (journal patched_at - slot)"),
        format!("p50 {} p99 {} max {}", fmt_s(l50), fmt_s(l99), fmt_s(lmax)),
    );
    row(
        &format!("slot {nth}{label}: rollouts finished (finished_at - slot)"),
        format!(
            "{} of {n}; p99 {} max {}",
            finished.len(),
            fmt_s(f99),
            fmt_s(fmax)
        ),
    );
    row(
        &format!("slot {nth}{label}: operator RSS"),
        format!(
            "{:.1} MB before the slot, peak {:.1} MB until the last restart landed, {:.1} MB a minute after (anonymous: {:.1} / {:.1} / {:.1} MB)",
            rss_before.0, peak.0, rss_after.0, rss_before.1, peak.1, rss_after.1
        ),
    );
    if let Some(probe) = probe {
        let end = slot + chrono::Duration::milliseconds((lmax * 1000.0) as i64);
        let (idle, idle99) = probe.window(slot - chrono::Duration::seconds(20), slot);
        let (burst, burst99) = probe.window(slot, end);
        let (after, _) = probe.window(end, end + chrono::Duration::seconds(30));
        row(
            &format!("slot {nth}{label}: probe client, idle (20 s before)"),
            idle,
        );
        row(&format!("slot {nth}{label}: probe client, in the burst"), burst);
        row(&format!("slot {nth}{label}: probe client, 30 s after"), after);
        row(
            &format!("slot {nth}{label}: probe p99 in the burst against idle"),
            format!("{:.2}x", burst99 / idle99),
        );
        // the same window for every pace: a fast burst ends sooner, but its rollouts go on
        let (five, five99) = probe.window(slot, slot + chrono::Duration::seconds(FIVE_MINUTES));
        row(
            &format!("slot {nth}{label}: probe client, the slot's first 5 minutes"),
            five,
        );
        row(
            &format!("slot {nth}{label}: probe p99 in the slot's first 5 minutes against idle"),
            format!("{:.2}x", five99 / idle99),
        );
        // the burst's course: how fast it went, and whom it slowed when (its rollouts too)
        let mut course = Vec::new();
        for from in (0..(lmax.ceil() as i64).max(FIVE_MINUTES)).step_by(30) {
            let at = |s: i64| slot + chrono::Duration::seconds(s);
            let n = landed
                .iter()
                .filter(|&&l| l >= from as f64 && l < (from + 30) as f64)
                .count();
            let (_, p99) = probe.window(at(from), at(from + 30));
            course.push(format!("{from}–{} s: {n} / {}", from + 30, fmt_s(p99)));
        }
        row(
            &format!("slot {nth}{label}: by 30 s, restarts landed / probe p99"),
            course.join("; "),
        );
    }
    if let Some(metrics) = get(&operator.url("/metrics")) {
        row(
            &format!("slot {nth}{label}: journal reads per Eru pass (since the operator started)"),
            pass_reads(&metrics),
        );
    }
    // exactly once: one restart per Eru for the slot, its patch landed
    let mut per_eru: HashMap<String, usize> = HashMap::new();
    for r in rows.iter().filter(|r| !r["patched_at"].is_null()) {
        *per_eru
            .entry(r["name"].as_str().unwrap_or_default().to_string())
            .or_default() += 1;
    }
    let doubled = per_eru.values().filter(|c| **c > 1).count();
    // and every Eru's slot accounted once: restarted, or recorded with its reason (a pace may
    // hold slots past their deadline; a target still rolling out is skipped)
    let journal = operator.journal().await?;
    let (records, erus): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT uid) FROM slots WHERE slot <= $1 AND last_slot >= $1",
    )
    .bind(eru_operator::journal::ts(slot))
    .fetch_one(&journal)
    .await?;
    let reasons: Vec<(String, i64)> = sqlx::query_as(
        "SELECT result || '/' || coalesce(reason, ''), count(*) FROM slots
         WHERE slot <= $1 AND last_slot >= $1 AND result <> 'fired' GROUP BY 1 ORDER BY 2 DESC",
    )
    .bind(eru_operator::journal::ts(slot))
    .fetch_all(&journal)
    .await?;
    journal.close().await;
    // unpaced, every Eru restarts; paced, a slot may also be held past its deadline by the pace
    // (fleet_capacity) or find its target still rolling out (target_unhealthy), nothing else
    let paced = label.contains("[pace ") && !label.contains("[pace unlimited]");
    let allowed =
        |reason: &str| paced && ["skipped/fleet_capacity", "skipped/target_unhealthy"].contains(&reason);
    let unexplained = reasons.iter().any(|(reason, _)| !allowed(reason));
    let reasons: Vec<String> = reasons.iter().map(|(r, c)| format!("{c} {r}")).collect();
    row(
        &format!("slot {nth}{label}: exactly once (the journal)"),
        format!(
            "{} of {n} Erus restarted, {doubled} twice; {records} records of {erus} Erus for the slot{}",
            per_eru.len(),
            if reasons.is_empty() {
                String::new()
            } else {
                format!(", the others: {}", reasons.join(", "))
            }
        ),
    );
    Ok(SlotRun {
        l50,
        l99,
        lmax,
        restarted: per_eru.len(),
        exact: doubled == 0 && records == n as i64 && erus == n as i64 && !unexplained,
    })
}

/// `eru_pass_journal_reads` of a /metrics text: the mean and the share of passes at each bound.
fn pass_reads(metrics: &str) -> String {
    let value = |name: &str| {
        (metrics.lines())
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    let (sum, count) = (
        value("eru_pass_journal_reads_sum"),
        value("eru_pass_journal_reads_count"),
    );
    let buckets: Vec<String> = (metrics.lines())
        .filter_map(|l| {
            let rest = l.strip_prefix("eru_pass_journal_reads_bucket{le=\"")?;
            let (le, n) = rest.split_once("\"} ")?;
            let n: f64 = n.parse().ok()?;
            (le != "+Inf").then(|| format!("≤ {le}: {:.1} %", 100.0 * n / count))
        })
        .collect();
    format!(
        "{:.2} on average over {count} passes; {}",
        sum / count,
        buckets.join(", ")
    )
}

#[tokio::main]
async fn main() -> Res<()> {
    let args = args();
    let n = args.n;
    let client = Client::try_default().await?;
    let ns = namespace(&client, "scale").await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let mut report: Vec<(String, String)> = Vec::new();
    let mut row = |k: &str, v: String| {
        say(format!("{k}: {v}"));
        report.push((k.to_string(), v));
    };
    if let Some(file) = &args.flowcontrol {
        kubectl("delete", file)?; // the first slot runs without it
    }

    // 1. Deployments, the operator, the Erus
    let t = Instant::now();
    let created = create_deployments(&deployments, n).await?;
    let create_rate = n as f64 / created;
    row(
        "deployments created",
        format!(
            "{n} in {created:.1} s ({create_rate:.0}/s), all observed by the Deployment controller after {:.1} s",
            t.elapsed().as_secs_f64()
        ),
    );
    let dir = tempfile::tempdir()?;
    let mut operator = Operator::new(args.operator.clone(), dir.path(), &ns)?;
    operator.kubeconfig = args.operator_kubeconfig.clone();
    let t = operator.start();
    operator.wait_ready().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    row(
        "operator ready",
        format!(
            "{:.2} s; RSS {:.1} MB with {n} Deployments cached{}",
            t.elapsed().as_secs_f64(),
            rss_mb(operator.pid()),
            if args.operator_kubeconfig.is_some() {
                " (as its ServiceAccount)"
            } else {
                ""
            }
        ),
    );
    let probe = match &args.probe_kubeconfig {
        Some(file) => Some(Probe::start(file, args.probe_rate).await?),
        None => None,
    };

    // the slots: after the Erus are created and reconciled, with a margin; with the FlowSchema
    // a second one after every rollout of the first finished
    // creating N Erus, their first passes and status writes take a few times creating N Deployments
    let lead = Duration::from_secs_f64(9.0 * n as f64 / create_rate + 60.0);
    let slot = DateTime::from_timestamp((Utc::now() + lead).timestamp() + 1, 0).unwrap();
    // the slots apart by whole minutes: the rollouts of one finish before the next (a target
    // still rolling out would be skipped, rightly), and one schedule names them all
    // (paced, the rollouts drain slower than after an unpaced burst: 5,866 of 10,000 had ended
    // 570 s after a slot at 50 a second; so a paced run's slots are spaced for 12 rollouts a
    // second, not 20: 15 minutes at 10,000)
    let drain = if args.paces.is_empty() {
        n as i64 / 20
    } else {
        n as i64 / 12
    };
    // (with a probe, a slot's five minutes end before the next slot's idle window begins)
    let least = if args.probe_kubeconfig.is_some() {
        FIVE_MINUTES + 60
    } else {
        120
    };
    let settle = ((drain + 60).max(least) + 59) / 60 * 60;
    let rollouts = settle - 30;
    // without the FlowSchema, then with it at each share count measured
    let variants: Vec<Option<Option<u32>>> = match &args.flowcontrol {
        None if !args.paces.is_empty() => vec![None; args.paces.len()],
        None => vec![None],
        Some(_) if args.apf_shares.is_empty() => vec![None, Some(None)],
        Some(_) => std::iter::once(None)
            .chain(args.apf_shares.iter().map(|s| Some(Some(*s))))
            .collect(),
    };
    let slots: Vec<DateTime<Utc>> = (0..variants.len() as i64)
        .map(|i| slot + chrono::Duration::seconds(i * settle))
        .collect();
    assert!(
        *slots.last().unwrap() - slot < chrono::Duration::minutes(60),
        "the slots span an hour or more: measure fewer share counts"
    );
    let list = |f: fn(&DateTime<Utc>) -> u32| {
        let mut v: Vec<String> = slots.iter().map(|s| f(s).to_string()).collect();
        v.dedup();
        v.join(",")
    };
    // (slots within an hour: "S M1,M2,… H1,H2" has no other instant between the first and last)
    let schedule = format!(
        "{} {} {} * * *",
        slot.second(),
        list(|s| s.minute()),
        list(|s| s.hour())
    );
    row(
        "slots",
        format!(
            "{} (schedule '{schedule}' UTC)",
            slots
                .iter()
                .map(|s| s.to_rfc3339_opts(SecondsFormat::Secs, true))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    let erus: Api<eru_operator::eru::Eru> = Api::namespaced(client.clone(), &ns);
    let t = Instant::now();
    let created = create_erus(&erus, n, &schedule).await?;
    row(
        "Erus created and reconciled",
        format!(
            "{n} created in {created:.1} s, all Waiting after {:.1} s; RSS {:.1} MB",
            t.elapsed().as_secs_f64(),
            rss_mb(operator.pid())
        ),
    );
    assert!(
        Utc::now() < slot - chrono::Duration::seconds(20),
        "the slot is too close: raise the lead"
    );

    // 2. the slots
    let mut runs = Vec::new();
    let mut labels = Vec::new();
    for (i, (slot, variant)) in slots.iter().copied().zip(&variants).enumerate() {
        let label = match (&args.flowcontrol, variant) {
            (None, _) if !args.paces.is_empty() => {
                let pace = &args.paces[i];
                // the operator restarted with this pace (unless it runs with it), well before the
                // probe's idle window
                if operator.extra != pace_flags(pace) {
                    operator.stop();
                    operator.extra = pace_flags(pace);
                    operator.start();
                    operator.wait_ready().await;
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    let left = (slot - Utc::now()).num_seconds();
                    say(format!(
                        "operator restarted with pace {pace}, {left} s before slot {}",
                        i + 1
                    ));
                    if left < 25 {
                        say(
                            "warning: less than 25 s before the slot: the probe's idle window overlaps the restart",
                        );
                    }
                }
                format!(" [pace {pace}]")
            }
            (None, _) => String::new(),
            (Some(_), None) => " [without the FlowSchema]".to_string(),
            (Some(file), Some(shares)) => {
                let seats = apply_flowcontrol(file, *shares, dir.path()).await?;
                let shares = shares.map_or_else(|| "as shipped".to_string(), |s| format!("{s} shares"));
                say(format!("FlowSchema applied ({shares}: {seats} seats)"));
                format!(" [with the FlowSchema, {shares}: {seats} seats]")
            }
        };
        let run = measure_slot(
            &operator,
            n,
            slot,
            i + 1,
            &label,
            rollouts,
            probe.as_ref(),
            &mut row,
        )
        .await?;
        runs.push(run);
        labels.push(label);
    }
    if let Some(file) = &args.flowcontrol {
        kubectl("delete", file)?;
    }
    if let Some(probe) = &probe {
        let skipped = probe.skipped.load(std::sync::atomic::Ordering::Relaxed);
        if skipped > 0 {
            row("probe requests not sent (256 unanswered)", skipped.to_string());
        }
    }
    drop(probe);
    // each Deployment patched once for each of its Eru's restarts (the Erus are named after them)
    let journal = operator.journal().await?;
    let fired: HashMap<String, i64> =
        sqlx::query_as("SELECT name, count(*) FROM restarts WHERE patched_at IS NOT NULL GROUP BY name")
            .fetch_all(&journal)
            .await?
            .into_iter()
            .collect();
    journal.close().await;
    let text = slots.last().unwrap().to_rfc3339_opts(SecondsFormat::Secs, true);
    let list = deployments.list(&ListParams::default()).await?;
    let carrying = (list.items.iter())
        .filter(|d| {
            d.spec
                .as_ref()
                .and_then(|s| s.template.metadata.as_ref())
                .and_then(|m| m.annotations.as_ref())
                .and_then(|a| a.get(eru_operator::eru::RESTARTED_AT_ANNOTATION))
                == Some(&text)
        })
        .count();
    let patched_once = (list.items.iter())
        .filter(|d| d.metadata.generation == Some(1 + fired.get(&d.name_any()).copied().unwrap_or(0)))
        .count();
    let last = runs.last().map_or(0, |r| r.restarted);
    row(
        "exactly once (the cluster)",
        format!(
            "{carrying} of {n} Deployments carry the last slot ({last} restarted for it); {patched_once} were patched exactly once for each restart of their Eru"
        ),
    );
    let exact = runs.iter().all(|r| r.exact) && carrying == last && patched_once == n;

    // 3. cold start on N existing Erus
    operator.stop();
    let t = operator.start();
    let scheduled = loop {
        if let Some(metrics) = get(&operator.url("/metrics")) {
            let scheduled = metrics
                .lines()
                .filter(|l| l.starts_with("eru_next_fire_timestamp_seconds{"))
                .count();
            if scheduled == n {
                break t.elapsed();
            }
        }
        // /metrics of N Erus is N × 18 series: polled often, it would load the start it measures
        tokio::time::sleep(Duration::from_millis(if n > 1000 { 1000 } else { 100 })).await;
    };
    row(
        "cold start",
        format!(
            "{n} Erus scheduled {:.2} s after the process started; RSS {:.1} MB",
            scheduled.as_secs_f64(),
            rss_mb(operator.pid())
        ),
    );
    operator.stop();

    // 4. the physical limit: the same applies from a tight concurrent loop, operator stopped
    let marker = (slots.last().unwrap().to_owned() + chrono::Duration::days(1))
        .to_rfc3339_opts(SecondsFormat::Secs, true);
    let start = Instant::now();
    let offsets = Arc::new(std::sync::Mutex::new(Vec::with_capacity(n)));
    let resent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    each(n, args.concurrency, |i| {
        let api = deployments.clone();
        let marker = marker.clone();
        let offsets = offsets.clone();
        let resent = resent.clone();
        async move {
            let patch = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": format!("web-{i}")},
                               "spec": {"template": {"metadata": {"annotations": {eru_operator::eru::RESTARTED_AT_ANNOTATION: marker}}}}});
            let params = PatchParams::apply("scale-limit").force();
            // a request the connection lost (the API server closes some under this load) is sent
            // again, as any client would: the apply is idempotent; an answer is never retried
            let mut attempt = 1;
            loop {
                match api.patch(&format!("web-{i}"), &params, &Patch::Apply(&patch)).await {
                    Ok(_) => break,
                    Err(kube::Error::Api(e)) => return Err(e.into()),
                    Err(e) if attempt < 5 => {
                        attempt += 1;
                        resent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        eprintln!("web-{i}: {e}; sent again");
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            offsets.lock().unwrap().push(start.elapsed().as_secs_f64());
            Ok(())
        }
    })
    .await;
    let (p50, p99, max) = percentiles(offsets.lock().unwrap().clone());
    row(
        "physical limit (tight loop, the admin: exempt from API Priority and Fairness)",
        format!(
            "{n} applies accepted: p50 {} p99 {} last {} (concurrency {}; {} sent again after a lost connection)",
            fmt_s(p50),
            fmt_s(p99),
            fmt_s(max),
            args.concurrency,
            resent.load(std::sync::atomic::Ordering::Relaxed)
        ),
    );
    let limit = max;
    for (run, label) in runs.iter().zip(&labels) {
        row(
            &format!("landed (last) against the limit{label}"),
            format!(
                "{} against {}: {:.2}x (p99 {:.2}x)",
                fmt_s(run.lmax),
                fmt_s(limit),
                run.lmax / limit,
                run.l99 / p99
            ),
        );
    }
    // 5. the CronJob controller, same cluster
    if args.cronjobs > 0 {
        let m = args.cronjobs;
        let cron_ns = namespace(&client, "scale-cron").await?;
        let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), &cron_ns);
        let minute = {
            let at = Utc::now() + chrono::Duration::seconds((2.0 * m as f64 / create_rate) as i64 + 30);
            DateTime::from_timestamp((at.timestamp() / 60 + 1) * 60, 0).unwrap()
        };
        each(m, 32, |i| {
            let api = cronjobs.clone();
            async move {
                let cj = serde_json::from_value(json!({
                    "metadata": {"name": format!("cj-{i}")},
                    "spec": {"schedule": format!("{} {} * * *", minute.minute(), minute.hour()), "timeZone": "Etc/UTC",
                             "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
                                 "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}}}}}
                }))?;
                api.create(&PostParams::default(), &cj).await?;
                Ok(())
            }
        })
        .await;
        say(format!("{m} CronJobs due at {minute}"));
        let jobs: Api<Job> = Api::namespaced(client.clone(), &cron_ns);
        let deadline = minute + chrono::Duration::seconds(300);
        let lateness = loop {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let list = jobs.list(&ListParams::default()).await?;
            if list.items.len() >= m || Utc::now() > deadline {
                break list
                    .items
                    .iter()
                    .filter_map(|j| j.creation_timestamp())
                    .map(|t| (t.0.as_second() - minute.timestamp()) as f64)
                    .collect::<Vec<_>>();
            }
        };
        let (c50, c99, cmax) = percentiles(lateness.clone());
        row(
            "CronJob controller, Job creation lateness (API server time, 1 s)",
            format!(
                "{} of {m} Jobs: p50 {} p99 {} max {}",
                lateness.len(),
                fmt_s(c50),
                fmt_s(c99),
                fmt_s(cmax)
            ),
        );
        row(
            "ratio CronJob / Eru (landed)",
            format!(
                "p50 {:.0}x, p99 {:.0}x",
                c50.max(0.5) / runs[0].l50,
                c99.max(0.5) / runs[0].l99
            ),
        );
        if !args.keep {
            let _ = Api::<Namespace>::all(client.clone())
                .delete(&cron_ns, &DeleteParams::background())
                .await;
        }
    }
    if !args.keep {
        let _ = Api::<Namespace>::all(client.clone())
            .delete(&ns, &DeleteParams::background())
            .await;
    }

    println!("\n| N = {n} | |\n|---|---|");
    for (k, v) in &report {
        println!("| {k} | {v} |");
    }
    println!("| operator log | {} |", operator.log.display());
    if args.keep {
        println!("| kept | namespace {ns} (and scale-cron-*, if CronJobs ran) |");
    }
    let _kept = dir.keep(); // the journal and log stay for a look
    assert!(exact, "a slot was lost or doubled");
    Ok(())
}
