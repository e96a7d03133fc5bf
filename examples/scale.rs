//! The measurements of `hack/scale.sh N` (run it through the script, which brings up a cluster
//! with enough kwok nodes and builds the release binaries).
//!
//! In one cluster and one run:
//! 1. N Deployments (replicas 0), the operator started on them (RSS), N Erus all due at one slot
//!    (RSS, how long until all are reconciled);
//! 2. the slot: fire lateness from the journal (decided and landed, each minus the slot) p50, p99,
//!    max; rollouts finished; every Eru restarted exactly once (its history and its Deployment's
//!    annotation and generation); RSS;
//! 3. a cold start: the operator restarted on N existing Erus, until every one is scheduled again;
//! 4. the physical limit: the same N restart applies sent by a tight concurrent loop of the same
//!    client, with the operator stopped;
//! 5. M CronJobs due at one minute: the CronJob controller's Job-creation lateness (the API
//!    server's timestamps, 1 s resolution).
//!
//! Usage: scale N --operator PATH [--cronjobs M] [--concurrency C] (KUBECONFIG names the cluster).

mod common;

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use chrono::{DateTime, SecondsFormat, Timelike, Utc};
use common::{
    Operator, Res, create_deployments, create_erus, each, fmt_s, get, namespace, percentiles, rss_mb, time,
};
use k8s_openapi::api::{
    apps::v1::Deployment,
    batch::v1::{CronJob, Job},
    core::v1::Namespace,
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
}

fn args() -> Args {
    let mut it = std::env::args().skip(1);
    let mut a = Args {
        n: 0,
        cronjobs: 0,
        operator: PathBuf::new(),
        concurrency: 64,
    };
    while let Some(arg) = it.next() {
        let mut value = || it.next().expect("a value after the flag");
        match arg.as_str() {
            "--operator" => a.operator = value().into(),
            "--cronjobs" => a.cronjobs = value().parse().expect("--cronjobs M"),
            "--concurrency" => a.concurrency = value().parse().expect("--concurrency C"),
            n => a.n = n.parse().expect("usage: scale N --operator PATH [--cronjobs M]"),
        }
    }
    assert!(
        a.n > 0 && a.operator.exists(),
        "usage: scale N --operator PATH [--cronjobs M]"
    );
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
    let t = operator.start();
    operator.wait_ready().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    row(
        "operator ready",
        format!(
            "{:.2} s; RSS {:.1} MB with {n} Deployments cached",
            t.elapsed().as_secs_f64(),
            rss_mb(operator.pid())
        ),
    );

    // the slot: after the Erus are created and reconciled, with a margin
    // creating N Erus, their first passes and status writes take a few times creating N Deployments
    let lead = Duration::from_secs_f64(6.0 * n as f64 / create_rate + 30.0);
    let slot = DateTime::from_timestamp((Utc::now() + lead).timestamp() + 1, 0).unwrap();
    let schedule = format!("{} {} {} * * *", slot.second(), slot.minute(), slot.hour());
    row(
        "slot",
        format!(
            "{} (schedule '{schedule}' UTC)",
            slot.to_rfc3339_opts(SecondsFormat::Secs, true)
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
        Utc::now() < slot - chrono::Duration::seconds(3),
        "the slot is too close: raise the lead"
    );

    // 2. the slot
    let rss_before = rss_mb(operator.pid());
    let mut peak = rss_before;
    while Utc::now() < slot + chrono::Duration::seconds(1) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // every restart lands first; rollouts then take as long as the Deployment controller (20 QPS).
    // Progress is counted in the journal file itself (read-only, WAL): paging N rows of /history
    // every few seconds would load the operator during the very burst it is measured in.
    let journal = operator.journal().await?;
    // (a bound, not a target: the table says how many finished by then)
    let deadline = slot + chrono::Duration::seconds((n as i64 / 20).max(240));
    let mut landed_all = false;
    loop {
        peak = peak.max(rss_mb(operator.pid()));
        let (landed, done): (i64, i64) = sqlx::query_as(
            "SELECT count(patched_at), count(*) FILTER (WHERE outcome = 'succeeded') FROM restarts WHERE slot = $1",
        )
        .bind(eru_operator::journal::ts(slot))
        .fetch_one(&journal)
        .await?;
        if landed as usize == n && !landed_all {
            landed_all = true;
            say(format!("all {n} restarts landed"));
        }
        if done as usize == n || Utc::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    journal.close().await;
    let rows = history(&operator, slot);
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
        "fire lateness, decided (journal decided_at - slot)",
        format!("p50 {} p99 {} max {}", fmt_s(d50), fmt_s(d99), fmt_s(dmax)),
    );
    row(
        "fire lateness, landed (journal patched_at - slot)",
        format!("p50 {} p99 {} max {}", fmt_s(l50), fmt_s(l99), fmt_s(lmax)),
    );
    row(
        "rollouts finished (finished_at - slot)",
        format!(
            "{} of {n}; p99 {} max {}",
            finished.len(),
            fmt_s(f99),
            fmt_s(fmax)
        ),
    );
    row(
        "operator RSS",
        format!("{rss_before:.1} MB before the slot, peak {peak:.1} MB during it"),
    );

    // exactly once: one succeeded restart per Eru, its Deployment carrying the slot, patched once
    let mut per_eru: HashMap<String, usize> = HashMap::new();
    for r in rows.iter().filter(|r| !r["patched_at"].is_null()) {
        *per_eru
            .entry(r["name"].as_str().unwrap_or_default().to_string())
            .or_default() += 1;
    }
    let doubled = per_eru.values().filter(|c| **c > 1).count();
    let list = deployments.list(&ListParams::default()).await?;
    let text = slot.to_rfc3339_opts(SecondsFormat::Secs, true);
    let carrying = list
        .items
        .iter()
        .filter(|d| {
            d.spec
                .as_ref()
                .and_then(|s| s.template.metadata.as_ref())
                .and_then(|m| m.annotations.as_ref())
                .and_then(|a| a.get(eru_operator::eru::RESTARTED_AT_ANNOTATION))
                == Some(&text)
        })
        .count();
    let patched_once = list
        .items
        .iter()
        .filter(|d| d.metadata.generation == Some(2))
        .count();
    let missed = get(&operator.url("/missed?limit=1000"))
        .and_then(|b| serde_json::from_str::<Value>(&b).ok())
        .map_or(0, |p| p["items"].as_array().map_or(0, Vec::len));
    row(
        "exactly once",
        format!(
            "{} Erus restarted, {doubled} twice; {carrying} of {n} Deployments carry the slot, {patched_once} patched exactly once; {missed} missed/skipped records",
            per_eru.len()
        ),
    );
    let exact = per_eru.len() == n && doubled == 0 && carrying == n && patched_once == n && missed == 0;

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
    let marker = (slot + chrono::Duration::days(1)).to_rfc3339_opts(SecondsFormat::Secs, true);
    let start = Instant::now();
    let offsets = Arc::new(std::sync::Mutex::new(Vec::with_capacity(n)));
    each(n, args.concurrency, |i| {
        let api = deployments.clone();
        let marker = marker.clone();
        let offsets = offsets.clone();
        async move {
            let patch = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": format!("web-{i}")},
                               "spec": {"template": {"metadata": {"annotations": {eru_operator::eru::RESTARTED_AT_ANNOTATION: marker}}}}});
            api.patch(&format!("web-{i}"), &PatchParams::apply("scale-limit").force(), &Patch::Apply(patch)).await?;
            offsets.lock().unwrap().push(start.elapsed().as_secs_f64());
            Ok(())
        }
    })
    .await;
    let (p50, p99, max) = percentiles(offsets.lock().unwrap().clone());
    row(
        "physical limit (tight loop, same client)",
        format!(
            "{n} applies accepted: p50 {} p99 {} last {} (concurrency {})",
            fmt_s(p50),
            fmt_s(p99),
            fmt_s(max),
            args.concurrency
        ),
    );
    let limit = max;

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
            format!("p50 {:.0}x, p99 {:.0}x", c50.max(0.5) / l50, c99.max(0.5) / l99),
        );
        let _ = Api::<Namespace>::all(client.clone())
            .delete(&cron_ns, &DeleteParams::background())
            .await;
    }
    let _ = Api::<Namespace>::all(client.clone())
        .delete(&ns, &DeleteParams::background())
        .await;

    println!("\n| N = {n} | |\n|---|---|");
    for (k, v) in &report {
        println!("| {k} | {v} |");
    }
    println!(
        "| landed p99 vs 1.5x limit | {} vs {} |",
        fmt_s(l99),
        fmt_s(1.5 * limit)
    );
    println!("| operator log | {} |", operator.log.display());
    let _kept = dir.keep(); // the journal and log stay for a look
    assert!(exact, "a slot was lost or doubled");
    Ok(())
}
