//! The audit of an outage, end to end, as an SRE reads it the morning after: restarts, an
//! operator killed for a while, a suspension, a blackout and a restart patch the API server
//! refuses — then `GET /audit`, `eru-operator audit` and the `/ui` page rendered by a real
//! headless Chromium must tell the same numbers, every slot accounted exactly once; a journal
//! with a record removed must make the CLI exit 3.

mod common;

use std::{collections::BTreeMap, path::PathBuf, process::Command, time::Duration};

use chrono::{DateTime, SecondsFormat, Utc};
use common::{
    Operator, TestNamespace, client,
    eru::{create_eru, deployment, items, time, wait_ready},
    get_json, kubectl,
    ledger::{ON_SCHEDULE, Workload, check, every_since_created},
    wait_for,
};
use eru_operator::eru::Eru;
use k8s_openapi::api::apps::v1::Deployment;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use regex::Regex;
use serde_json::{Value, json};

/// Every Eru restarts every 5 s; a slot not landed within 3 s is given up.
const SCHEDULE: &str = "*/5 * * * * *";
const STEP: i64 = 5;

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Headless Chromium: `--dump-dom` of `url`, or a screenshot of it into `png` (in the dark colour
/// scheme when the name says `dark`).
fn chromium(url: &str, png: Option<&PathBuf>) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("chromium");
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()));
    match png {
        Some(path) => cmd
            .arg(format!("--screenshot={}", path.display()))
            .arg("--window-size=1500,1000")
            .args(
                path.to_string_lossy()
                    .contains("dark")
                    .then_some("--blink-settings=preferredColorScheme=0"),
            ),
        None => cmd.arg("--dump-dom"),
    };
    let out = cmd
        .arg(url)
        .output()
        .expect("chromium (Debian package, installed by hack/deps.sh)");
    assert!(
        out.status.success(),
        "chromium failed on {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The `*/5`-second instants in `(created, until)`: the slots the test's schedule produced,
/// written out here rather than asked of the operator's schedule code.
fn slots_between(created: DateTime<Utc>, until: DateTime<Utc>) -> i64 {
    let first = (created.timestamp() / STEP + 1) * STEP;
    // the last multiple of STEP seconds strictly before `until` (which has milliseconds)
    let last = (until.timestamp_millis() - 1).div_euclid(STEP * 1000) * STEP;
    ((last - first) / STEP + 1).max(0)
}

/// The numbers one view shows for one Eru.
#[derive(Debug, PartialEq)]
struct Numbers {
    slots: i64,
    fired: i64,
    not_restarted: BTreeMap<String, i64>,
    pending: i64,
    unaccounted: i64,
    duplicated: i64,
    outside: i64,
}

fn numbers_of(eru: &Value) -> Numbers {
    Numbers {
        slots: eru["slots"].as_i64().unwrap(),
        fired: eru["fired"]["total"].as_i64().unwrap(),
        not_restarted: eru["not_restarted"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                (
                    n["reason"].as_str().unwrap().to_string(),
                    n["slots"].as_i64().unwrap(),
                )
            })
            .collect(),
        pending: eru["pending"].as_i64().unwrap(),
        unaccounted: eru["unaccounted"]["count"].as_i64().unwrap(),
        duplicated: eru["duplicated"]["count"].as_i64().unwrap(),
        outside: eru["outside_schedule"]["count"].as_i64().unwrap(),
    }
}

/// The numbers the page's table shows for the Eru `key`, read from the rendered DOM.
fn numbers_on_page(dom: &str, key: &str) -> Numbers {
    let row = Regex::new(&format!(
        r#"(?s)<tr data-eru="{}">(.*?)</tr>"#,
        regex::escape(key)
    ))
    .unwrap()
    .captures(dom)
    .unwrap_or_else(|| panic!("no table row for {key}"))[1]
        .to_string();
    let cell = |count: &str| -> String {
        Regex::new(&format!(r#"(?s)<td data-count="{count}">(.*?)</td>"#))
            .unwrap()
            .captures(&row)
            .unwrap_or_else(|| panic!("no {count} cell for {key}"))[1]
            .to_string()
    };
    let leading = |text: String| -> i64 { text.trim().split([' ', '<']).next().unwrap().parse().unwrap() };
    let reasons = Regex::new(r#"<span data-reason="([a-z_]+)">(\d+) "#).unwrap();
    Numbers {
        slots: leading(cell("slots")),
        fired: leading(cell("fired")),
        not_restarted: reasons
            .captures_iter(&cell("not_restarted"))
            .map(|c| (c[1].to_string(), c[2].parse().unwrap()))
            .collect(),
        pending: leading(cell("pending")),
        unaccounted: leading(cell("unaccounted")),
        duplicated: leading(cell("duplicated")),
        outside: leading(cell("outside_schedule")),
    }
}

/// The marks of the timeline row of `key`: (fired slots — a run of successes is one mark of
/// `data-count` slots —, not-restarted slots by reason).
fn marks_on_page(dom: &str, key: &str) -> (i64, BTreeMap<String, i64>) {
    let row = Regex::new(&format!(
        r#"(?s)<g class="row" data-eru="{}"[^>]*>(.*?)</g>\s*(<g class="row"|</svg>)"#,
        regex::escape(key)
    ))
    .unwrap()
    .captures(dom)
    .unwrap_or_else(|| panic!("no timeline row for {key}"))[1]
        .to_string();
    let fired = Regex::new(r#"data-kind="fired" data-count="(\d+)""#)
        .unwrap()
        .captures_iter(&row)
        .map(|c| c[1].parse::<i64>().unwrap())
        .sum();
    let spans = Regex::new(
        r#"data-kind="(?:missed|skipped)" data-reason="([a-z_]+)" data-slot="[^"]+" data-count="(\d+)""#,
    )
    .unwrap();
    let mut by_reason = BTreeMap::new();
    for c in spans.captures_iter(&row) {
        *by_reason.entry(c[1].to_string()).or_insert(0) += c[2].parse::<i64>().unwrap();
    }
    (fired, by_reason)
}

/// `eru-operator audit` over `journal`; its exit code and standard output.
fn cli_audit(journal: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_eru-operator"))
        .arg("audit")
        .arg("--database")
        .arg(journal)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[tokio::test]
#[ignore = "needs the local cluster and chromium: hack/test.sh"]
async fn an_outage_audited_by_the_api_the_cli_and_the_page_in_a_real_browser() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "audit").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    for name in ["web", "api", "frozen"] {
        deployment(&client, &ns.name, name, 1, json!({})).await;
        wait_ready(&deployments, name, 1).await;
    }
    // the API server refuses every pod-template change of `frozen`
    let file = common::eru::freeze_template(&deployments, &ns.name, "frozen").await;

    let since = Utc::now();
    let mut operator = Operator::start(&client, &ns.name, &[]).await;
    // a plain process beside this suite's others: its queries at nice 19, never SCHED_IDLE, which
    // would wait for every busy process of this cgroup (docs/api.md)
    assert_eq!(
        common::thread_class(operator.pid().unwrap(), common::QUERY_THREAD),
        Some((libc::SCHED_OTHER, 19))
    );
    let spec = |target: &str| {
        json!({"schedule": SCHEDULE, "startingDeadlineSeconds": 3,
                                     "target": {"kind": "Deployment", "name": target}})
    };
    create_eru(&client, &ns.name, "web", spec("web")).await.unwrap();
    create_eru(&client, &ns.name, "frozen", spec("frozen"))
        .await
        .unwrap();
    // a blackout that opens a few slots from now and closes 10 s later
    let from = Utc::now() + chrono::Duration::seconds(8);
    let mut api_spec = spec("api");
    api_spec["blackouts"] = json!([{"name": "change-freeze", "start": rfc3339(from),
                                    "end": rfc3339(from + chrono::Duration::seconds(10))}]);
    create_eru(&client, &ns.name, "api", api_spec).await.unwrap();
    let slot_records = |operator: &Operator, name: &str, reason: &str| {
        items(operator, &format!("/slots?name={name}&reason={reason}"))
    };
    for (name, reason) in [("api", "blackout"), ("frozen", "patch_failed")] {
        wait_for(
            &format!("{name}: a slot {reason}"),
            Duration::from_secs(60),
            || async { (!slot_records(&operator, name, reason).is_empty()).then_some(()) },
        )
        .await;
    }
    wait_for("web restarted", Duration::from_secs(60), || async {
        (!items(&operator, "/slots?name=web&result=fired").is_empty()).then_some(())
    })
    .await;

    // the operator dies for three slots, then comes back
    operator.kill();
    let killed = Utc::now();
    wait_for(
        "three slots pass without an operator",
        Duration::from_secs(30),
        || async { (Utc::now() > killed + chrono::Duration::seconds(3 * STEP + 1)).then_some(()) },
    )
    .await;
    operator.restart().await;
    let restarted = Utc::now();
    wait_for(
        "web: slots missed while it was down",
        Duration::from_secs(60),
        || async { (!slot_records(&operator, "web", "operator_down").is_empty()).then_some(()) },
    )
    .await;

    // web is suspended for a while
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let suspend = |on: bool| json!({"spec": {"suspend": on}});
    let suspended = Utc::now();
    erus.patch("web", &PatchParams::default(), &Patch::Merge(suspend(true)))
        .await
        .unwrap();
    wait_for(
        "web: a slot skipped while suspended",
        Duration::from_secs(60),
        || async { (!slot_records(&operator, "web", "suspended").is_empty()).then_some(()) },
    )
    .await;
    erus.patch("web", &PatchParams::default(), &Patch::Merge(suspend(false)))
        .await
        .unwrap();
    let resumed = Utc::now();

    // the window ends now; every Eru's ledger is waited past it, so the three views see the same rows
    let until = Utc::now();
    let audit_path = format!("/audit?since={}&until={}", rfc3339(since), rfc3339(until));
    let audit = wait_for(
        "every slot of the window accounted or given up",
        Duration::from_secs(60),
        || async {
            let audit = get_json(&operator.url(&audit_path));
            (audit["verdict"]["pending"] == 0 && audit["erus"].as_array()?.len() == 3).then_some(audit)
        },
    )
    .await;
    assert_eq!(
        audit["verdict"]["accounted"], true,
        "{}",
        audit["verdict"]["summary"]
    );
    let erus_of = |audit: &Value| -> BTreeMap<String, Value> {
        audit["erus"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["name"].as_str().unwrap().to_string(), e.clone()))
            .collect()
    };
    let by_name = erus_of(&audit);
    // independent of the operator: the schedule's instants between each Eru's creation and the end
    for name in ["web", "api", "frozen"] {
        let created = erus
            .get(name)
            .await
            .unwrap()
            .metadata
            .creation_timestamp
            .unwrap()
            .0;
        let created = DateTime::from_timestamp(created.as_second(), 0).unwrap();
        assert_eq!(
            by_name[name]["slots"].as_i64().unwrap(),
            slots_between(created, until),
            "{name}: the slots of */5 s from its creation to the end of the window"
        );
        let n = numbers_of(&by_name[name]);
        assert_eq!(
            (n.unaccounted, n.duplicated, n.outside, n.pending),
            (0, 0, 0, 0),
            "{name}: {n:?}"
        );
        assert_eq!(
            n.fired + n.not_restarted.values().sum::<i64>(),
            n.slots,
            "{name}: every slot restarted or not, once"
        );
    }
    let web = numbers_of(&by_name["web"]);
    assert!(
        web.fired >= 2 && web.not_restarted["operator_down"] >= 1 && web.not_restarted["suspended"] >= 1,
        "{web:?}"
    );
    assert!(numbers_of(&by_name["api"]).not_restarted["blackout"] >= 1);
    assert!(numbers_of(&by_name["frozen"]).not_restarted["patch_failed"] >= 1);
    assert_eq!(
        numbers_of(&by_name["frozen"]).fired,
        0,
        "the frozen template never changed"
    );
    let downtime = audit["operator"]["downtime"].as_array().unwrap().clone();
    assert!(
        downtime
            .iter()
            .any(|w| time(&w["start"]) <= killed && time(&w["end"]) > killed),
        "the kill is a downtime window: {downtime:?}"
    );
    assert_eq!(audit["operator"]["runs"].as_array().unwrap().len(), 2);
    for e in by_name.values() {
        assert_eq!(e["counters"]["agree"], true, "{}", e["counters"]);
    }

    // the CLI, offline over the same journal: the same numbers, exit 0
    let journal = operator
        .database_url
        .clone()
        .unwrap_or_else(|| operator.database.display().to_string());
    let window = ["--since", &rfc3339(since), "--until", &rfc3339(until)];
    let (code, out) = cli_audit(&journal, &[&window[..], &["--format", "json"]].concat());
    assert_eq!(code, 0, "{out}");
    let cli: Value = serde_json::from_str(&out).unwrap();
    for (name, e) in erus_of(&cli) {
        assert_eq!(
            numbers_of(&e),
            numbers_of(&by_name[&name]),
            "{name}: the CLI and /audit"
        );
    }
    let (code, markdown) = cli_audit(&journal, &[&window[..], &["--format", "markdown"]].concat());
    assert_eq!(code, 0, "{markdown}");
    assert!(markdown.contains(&format!("| {}/web |", ns.name)), "{markdown}");

    // the page, in a real browser: every row, mark and band, the same numbers
    let page_url = operator.url(&format!("/ui?since={}&until={}", rfc3339(since), rfc3339(until)));
    let dom = chromium(&page_url, None);
    assert_eq!(
        dom.matches(r#"<g class="row""#).count(),
        3,
        "a timeline row per Eru"
    );
    // each row is drawn over its Eru's life, with the downtime in it: all three lived through
    // the kill (created before it)
    for row in dom.split(r#"<g class="row""#).skip(1) {
        let row = row.split("</g>").next().unwrap_or_default();
        assert_eq!(
            row.matches(r#"data-band="operator_down""#).count(),
            downtime.len(),
            "a band per downtime window in each row: {row}"
        );
    }
    // the window opened before the operator's first run: that stretch is no downtime
    let first_run = time(&audit["operator"]["runs"][0]["started_at"]);
    assert!(
        downtime.iter().all(|w| time(&w["start"]) >= first_run),
        "no downtime before the journal's first run ({first_run}): {downtime:?}"
    );
    assert_eq!(
        time(&audit["operator"]["no_journal"]["end"]),
        first_run,
        "{}",
        audit["operator"]
    );
    assert!(
        dom.contains(r#"data-fact="no_journal""#),
        "the page says what precedes the journal"
    );
    assert_eq!(dom.matches(r#"data-band="no_journal""#).count(), 1);
    // the page as a new user first opens it (the last 24 hours): the day before this journal's
    // first run is "no journal", not downtime, and only the kill is down
    let fresh = chromium(&operator.url(&format!("/ui?namespace={}", ns.name)), None);
    let down = fresh
        .split(r#"data-fact="downtime""#)
        .nth(1)
        .and_then(|rest| rest.split("</li>").next())
        .unwrap_or_else(|| panic!("no Down line: {fresh}"));
    assert_eq!(
        down.matches(r#"class="window""#).count(),
        downtime.len(),
        "the Down line lists the kill only: {down}"
    );
    assert!(
        fresh.contains("No journal before"),
        "the first view says what precedes the journal"
    );
    for (name, e) in &by_name {
        let key = format!("{}/{name}", ns.name);
        assert_eq!(
            numbers_on_page(&dom, &key),
            numbers_of(e),
            "{name}: the page and /audit"
        );
        let (fired, spans) = marks_on_page(&dom, &key);
        let n = numbers_of(e);
        assert_eq!(fired, n.fired, "{name}: the fired marks count every fired slot");
        assert_eq!(
            spans, n.not_restarted,
            "{name}: the spans stand for every slot not restarted"
        );
    }
    assert!(
        dom.contains("✔ Every one of the"),
        "the verdict as a person reads it"
    );
    let eru_url = operator.url(&format!(
        "/ui/eru/{}/web?since={}&until={}",
        ns.name,
        rfc3339(since),
        rfc3339(until)
    ));
    let eru_dom = chromium(&eru_url, None);
    assert!(eru_dom.contains("Every slot is accounted exactly once."));
    assert_eq!(
        eru_dom.matches(r#"<tr data-kind="#).count() as i64,
        audit_records(&operator, "web", since, until),
        "a table row per slot record of web in the window"
    );
    assert!(eru_dom.contains("Spec epochs in force") && eru_dom.contains(SCHEDULE));
    // bad input: a page that says why, never a 5xx
    let (status, body) =
        common::get(&operator.url("/ui?since=2026-11-22T00:00:00Z&until=2026-11-21T00:00:00Z"));
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("must be before until"), "{body}");
    let (status, body) =
        common::get(&operator.url("/audit?since=2026-01-01T00:00:00Z&until=2026-03-01T00:00:00Z"));
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("at most 31 days"), "{body}");

    // screenshots of both pages, for a person to look at
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("audit-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    chromium(&page_url, Some(&shots.join("fleet.png")));
    chromium(&eru_url, Some(&shots.join("eru.png")));
    chromium(&page_url, Some(&shots.join("fleet-dark.png")));
    for png in ["fleet.png", "eru.png", "fleet-dark.png"] {
        let bytes = std::fs::read(shots.join(png)).unwrap();
        assert!(
            bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000,
            "{png} is a real screenshot"
        );
    }
    eprintln!("screenshots in {}", shots.display());

    // the promise from the cluster's side too: one record per slot, one rollout per fired slot,
    // each slot for the reason the test caused. The kill: operator_down, the newest slot run at
    // the start or, noticed over its 3 s deadline, past_deadline. Then each Eru's own.
    let second = chrono::Duration::seconds(1);
    let down = [ON_SCHEDULE, &["operator_down", "past_deadline"]].concat();
    for name in ["web", "api", "frozen"] {
        let workload = Workload::Deployment(name);
        let expected = every_since_created(&client, &ns.name, name, workload, STEP, until)
            .await
            .expect(killed, restarted + chrono::Duration::seconds(STEP), &down);
        let expected = match name {
            "web" => expected.require_some(killed, restarted, "operator_down").require(
                suspended - second,
                resumed + second,
                "suspended",
                ON_SCHEDULE,
            ),
            // (the kill may fall inside the blackout)
            "api" => expected.require(
                from,
                from + chrono::Duration::milliseconds(9_999),
                "blackout",
                &["operator_down"],
            ),
            // every patch refused: a slot the operator was there for is patch_failed
            _ => expected
                .expect(since, until, &["patch_failed", "operator_down", "past_deadline"])
                .require_some(since, until, "patch_failed"),
        };
        check(&client, &ns.name, &operator, &expected).await;
    }

    // a record gone from the journal: the audit says so, names the slot, and the CLI exits 3
    operator.kill();
    let gone = forge_missing_record(&journal, since, until).await;
    let (code, out) = cli_audit(&journal, &window);
    assert_eq!(code, 3, "{out}");
    assert!(
        out.contains("Not every slot is accounted exactly once: 1 without a record"),
        "{out}"
    );
    let named = format!("{}/{gone}", ns.name);
    assert!(out.contains(&named), "the table names the slot ({named}): {out}");
    let (code, markdown) = cli_audit(&journal, &[&window[..], &["--format", "markdown"]].concat());
    assert_eq!(code, 3, "{markdown}");
    assert!(
        markdown.contains(&format!("- {named}")),
        "the markdown names the slot: {markdown}"
    );
    kubectl(&["delete", "-f", file.path().to_str().unwrap()]);
}

/// How many slot records of `name` `/slots` lists in the window (every page).
fn audit_records(operator: &Operator, name: &str, since: DateTime<Utc>, until: DateTime<Utc>) -> i64 {
    let base = format!(
        "/slots?name={name}&since={}&until={}&limit=1000",
        rfc3339(since),
        rfc3339(until)
    );
    let (mut count, mut path) = (0, base.clone());
    loop {
        let page = get_json(&operator.url(&path));
        count += page["items"].as_array().unwrap().len() as i64;
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("{base}&cursor={cursor}"),
            None => return count,
        }
    }
}

/// Deletes the newest fired slot record of the window from the journal, as a broken or tampered
/// journal would; returns what the audit's text then says of its Eru: `<name>: 1 without a
/// record: <slot>`.
async fn forge_missing_record(journal: &str, since: DateTime<Utc>, until: DateTime<Utc>) -> String {
    sqlx::any::install_default_drivers();
    let url = if journal.starts_with("postgres") {
        journal.to_string()
    } else {
        format!("sqlite://{journal}")
    };
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    let (name, slot): (String, String) = sqlx::query_as(
        "SELECT name, slot FROM slots WHERE id = (SELECT max(id) FROM slots WHERE result = 'fired' AND slot >= $1 AND slot < $2)",
    )
        .bind(rfc3339(since))
        .bind(rfc3339(until))
        .fetch_one(&pool)
        .await
        .unwrap();
    let deleted = sqlx::query(
        "DELETE FROM slots WHERE id = (SELECT max(id) FROM slots WHERE result = 'fired' AND slot >= $1 AND slot < $2)",
    )
        .bind(rfc3339(since))
        .bind(rfc3339(until))
        .execute(&pool)
        .await
        .unwrap()
        .rows_affected();
    assert_eq!(deleted, 1);
    pool.close().await;
    format!("{name}: 1 without a record: {slot}")
}
