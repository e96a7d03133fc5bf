//! High availability end to end: two operator processes with leader election (`--leader-elect`,
//! client-go's 15 s / 10 s / 2 s), as two replicas of the operator's Deployment would run. Only
//! the holder of the Lease acts; the other stands by with warm caches and takes over when the
//! leader dies. Before leader election, both processes acted: two journals each invented a
//! history, and both wrote status and Events.

mod common;

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use common::{
    Operator, TestNamespace, client,
    eru::{create_eru, deployment, items, settle, status, time, wait_ready},
    ledger::{Ledger, ON_SCHEDULE, check, every},
    wait_for,
};
use eru_operator::eru::Eru;
use k8s_openapi::api::{apps::v1::Deployment, events::v1::Event};
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use serde_json::{Value, json};

/// client-go's default, the operator's: a standby waits this long after the last change of the
/// Lease it saw (and tries every 2 s).
const LEASE_DURATION: Duration = Duration::from_secs(15);

/// The flags of a replica named `instance` electing a leader through a Lease in `ns`.
fn elected(ns: &str, instance: &str) -> Vec<String> {
    [
        "--leader-elect",
        "--leader-elect-namespace",
        ns,
        "--instance",
        instance,
    ]
    .map(str::to_string)
    .to_vec()
}

fn strs(flags: &[String]) -> Vec<&str> {
    flags.iter().map(String::as_str).collect()
}

/// Which of `replicas` leads, once exactly one does; panics if two ever say they lead.
async fn leader_of(replicas: &[&Operator]) -> usize {
    wait_for("exactly one leader", Duration::from_secs(60), || async {
        let roles: Vec<Option<String>> = replicas.iter().map(|r| r.role()).collect();
        let leading: Vec<usize> = (0..roles.len())
            .filter(|i| roles[*i].as_deref() == Some("leader"))
            .collect();
        assert!(leading.len() <= 1, "two leaders at once: {roles:?}");
        leading.first().copied()
    })
    .await
}

/// Samples both replicas' roles for `span`: never two leaders.
async fn never_two_leaders(replicas: &[&Operator], span: Duration) {
    let end = Instant::now() + span;
    while Instant::now() < end {
        let roles: Vec<Option<String>> = replicas.iter().map(|r| r.role()).collect();
        let leading = roles.iter().filter(|r| r.as_deref() == Some("leader")).count();
        assert!(leading <= 1, "two leaders at once: {roles:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// How long `standby` takes to lead, from `since` (printed, never asserted: how fast is for
/// hack/bench.sh; that it happens at all, within a generous three leases, is the test's).
async fn takeover(standby: &Operator, since: Instant) -> Duration {
    wait_for("the standby to take over", LEASE_DURATION * 3, || async {
        (standby.role().as_deref() == Some("leader")).then(|| since.elapsed())
    })
    .await
}

/// The Events about the Eru `name`, as `(reportingInstance, eventTime)`.
async fn events_by_instance(client: &Client, ns: &str, name: &str) -> Vec<(String, DateTime<Utc>)> {
    let list = Api::<Event>::namespaced(client.clone(), ns)
        .list(&Default::default())
        .await
        .unwrap();
    list.items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter_map(|e| {
            let at = e.event_time.as_ref()?.0;
            let at = DateTime::from_timestamp(at.as_second(), at.subsec_nanosecond().max(0) as u32)?;
            Some((e.reporting_instance.unwrap_or_default(), at))
        })
        .collect()
}

/// The restarts (slot and outcome) in a stopped replica's own SQLite journal, read by
/// `eru-operator history` as an auditor would.
fn journal_restarts(operator: &Operator) -> Vec<Value> {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_eru-operator"))
        .args([
            "history",
            "restarts",
            "--output",
            "json",
            "--limit",
            "1000",
            "--database",
        ])
        .arg(&operator.database)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let page: Value = serde_json::from_slice(&output.stdout).unwrap();
    page["items"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn two_replicas_with_separate_journals_never_both_act() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "ha-sqlite").await;
    common::allow_lease(&client, &ns.name).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    wait_ready(&deployments, "web", 1).await;
    let a_flags = elected(&ns.name, "replica-a");
    let b_flags = elected(&ns.name, "replica-b");
    let mut a = Operator::start(&client, &ns.name, &strs(&a_flags)).await;
    let mut b = Operator::start(&client, &ns.name, &strs(&b_flags)).await;
    let spec = json!({"schedule": "*/5 * * * * *", "target": {"kind": "Deployment", "name": "web"}});
    create_eru(&client, &ns.name, "web", spec).await.unwrap();

    let first = leader_of(&[&a, &b]).await;
    let (leader, standby) = if first == 0 {
        (&mut a, &mut b)
    } else {
        (&mut b, &mut a)
    };
    wait_for("two restarts by the leader", Duration::from_secs(60), || async {
        (items(leader, "/history?name=web&outcome=succeeded").len() >= 2).then_some(())
    })
    .await;
    never_two_leaders(&[leader, standby], Duration::from_secs(12)).await;
    // the standby has journaled nothing: no run, no transition, no restart, no slot
    for path in ["/history", "/missed", "/transitions"] {
        assert_eq!(items(standby, path), Vec::<Value>::new(), "standby {path}");
    }
    let standby_metrics = common::get(&standby.url("/metrics")).1;
    assert!(standby_metrics.contains("\neru_leader 0"), "{standby_metrics}");
    let leader_metrics = common::get(&leader.url("/metrics")).1;
    assert!(leader_metrics.contains("\neru_leader 1"), "{leader_metrics}");

    // the leader dies without a word; the standby takes over within a lease and a retry
    leader.kill();
    let killed = Instant::now();
    let killed_at = Utc::now();
    let took = takeover(standby, killed).await;
    println!(
        "takeover after SIGKILL of the leader: {:.1} s",
        took.as_secs_f64()
    );
    wait_for("a restart by the new leader", Duration::from_secs(60), || async {
        items(standby, "/history?name=web&outcome=succeeded")
            .iter()
            .any(|r| time(&r["slot"]) > killed_at)
            .then_some(())
    })
    .await;
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let settled = settle(&erus, standby, "web").await;
    wait_for("suspended", Duration::from_secs(60), || async {
        let s = erus.get("web").await.ok()?.status?;
        (s.phase.as_deref() == Some("Suspended")).then_some(())
    })
    .await;
    // every slot after the kill is the new leader's: one record in its journal each, and the
    // Deployment rolled exactly its fired ones (the dead one's journal holds the slots before)
    let window = (killed_at + chrono::Duration::milliseconds(1), settled);
    check(
        &client,
        &ns.name,
        standby,
        &Ledger {
            journal_from: Some(killed_at),
            // the slots of the takeover are in no journal the new leader can read: the newest
            // runs at its first pass, the others are said not restarted (the dead one's
            // journal is not this one's)
            ..Ledger::deployment("web", "web", window, every(5, window.0, window.1)).expect(
                killed_at,
                killed_at + chrono::Duration::from_std(took).unwrap() + chrono::Duration::seconds(5),
                &[ON_SCHEDULE, &["journal_lost", "operator_down"]].concat(),
            )
        },
    )
    .await;

    // Events: the old leader's all before its death, the new leader's all after it
    let (old, new) = if first == 0 {
        ("replica-a", "replica-b")
    } else {
        ("replica-b", "replica-a")
    };
    let events = events_by_instance(&client, &ns.name, "web").await;
    let by: BTreeMap<&str, Vec<DateTime<Utc>>> = events.iter().fold(BTreeMap::new(), |mut m, (i, t)| {
        m.entry(i.as_str()).or_insert_with(Vec::new).push(*t);
        m
    });
    assert_eq!(by.keys().copied().collect::<Vec<_>>(), {
        let mut both = vec![old, new];
        both.sort();
        both
    });
    assert!(by[old].iter().all(|t| *t <= killed_at), "{events:?}");
    assert!(by[new].iter().all(|t| *t > killed_at), "{events:?}");

    // no slot restarted by both: the new leader patched only slots the old one did not. A
    // restart the old one patched and the new one found still rolling (killed before its status
    // said it ended) is adopted: the new leader's record of it carries the old patch's instant,
    // before the kill. Only the status's last restart can be adopted, so at most one record may
    // be, and only the dead one's newest patched slot (a slot decided again by the new leader
    // would also carry the old instant: its patch changes nothing)
    let dead = if first == 0 { &a } else { &b };
    let alive = if first == 0 { &b } else { &a };
    let old_patches: BTreeSet<DateTime<Utc>> = journal_restarts(dead)
        .iter()
        .filter(|r| !r["patched_at"].is_null())
        .map(|r| time(&r["slot"]))
        .collect();
    let (adopted, patched): (Vec<_>, Vec<_>) = items(alive, "/history?name=web&limit=1000")
        .iter()
        .filter(|r| !r["patched_at"].is_null())
        .map(|r| (time(&r["slot"]), time(&r["patched_at"])))
        .partition(|(_, patched_at)| *patched_at <= killed_at);
    assert!(
        adopted.len() <= 1,
        "more than the last restart adopted: {adopted:?}"
    );
    if let Some((slot, patched_at)) = adopted.first() {
        assert_eq!(
            Some(slot),
            old_patches.last(),
            "{slot}: patched at {patched_at}, before the kill, yet not the dead leader's last restart"
        );
    }
    assert!(!old_patches.is_empty() && !patched.is_empty());
    let twice: Vec<_> = (patched.iter())
        .filter(|(slot, _)| old_patches.contains(slot))
        .collect();
    assert!(twice.is_empty(), "restarted by both: {twice:?}");
}

/// A moment to strike at, from 1 to 9 s away, different each round (no seed to remember: the
/// clock's nanoseconds).
fn random_pause() -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    Duration::from_millis(1000 + u64::from(nanos % 8000))
}

#[tokio::test]
#[ignore = "needs the local cluster and PostgreSQL: hack/test.sh"]
async fn failover_on_postgres_restarts_every_slot_once_or_says_why() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "ha-postgres").await;
    common::allow_lease(&client, &ns.name).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 2, json!({})).await;
    wait_ready(&deployments, "web", 2).await;
    let url = common::fresh_database("failover");
    // notifications to a receiver that is down until the last failover: every event is journaled
    // by one leader and delivered by another
    let port = common::free_port();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notifications.yaml");
    let sink = format!("{{name: hook, type: webhook, url: 'http://127.0.0.1:{port}/', hmacSecret: k}}");
    std::fs::write(&file, format!("sinks: [{sink}]\nroutes: [{{sink: hook}}]\n")).unwrap();
    let file = file.display().to_string();
    let mut replicas = Vec::new();
    for i in 0..2 {
        let mut flags = elected(&ns.name, &format!("replica-{i}"));
        flags.extend(["--notifications-file", &file, "--notification-backoff-max", "2s"].map(String::from));
        replicas.push(Operator::start_on(&client, &ns.name, &strs(&flags), &[], Some(&url)).await);
    }
    let spec = json!({"schedule": "*/5 * * * * *", "target": {"kind": "Deployment", "name": "web"}});
    let created = Utc::now();
    create_eru(&client, &ns.name, "web", spec).await.unwrap();
    let leader = leader_of(&[&replicas[0], &replicas[1]]).await;
    let first = wait_for("a first restart", Duration::from_secs(60), || async {
        items(&replicas[leader], "/history?name=web&outcome=succeeded")
            .iter()
            .map(|r| time(&r["slot"]))
            .find(|slot| *slot > created)
    })
    .await;

    // five times: SIGKILL the leader at a random moment (every other time while a restart it
    // patched is rolling out); the standby takes over; the dead one comes back as a standby
    let mut kills: Vec<DateTime<Utc>> = Vec::new();
    let mut takeovers = Vec::new();
    for round in 0..5 {
        let leader = leader_of(&[&replicas[0], &replicas[1]]).await;
        if round % 2 == 1 {
            let seen = kills.last().copied().unwrap_or(first);
            wait_for("a restart rolling out", Duration::from_secs(60), || async {
                let d = deployments.get("web").await.ok()?;
                let slot = common::eru::template_slot(&d).filter(|s| *s > seen)?;
                let st = d.status.as_ref()?;
                let done = st.observed_generation == d.metadata.generation && st.updated_replicas == Some(2);
                (!done).then_some(slot)
            })
            .await;
        } else {
            tokio::time::sleep(random_pause()).await;
        }
        replicas[leader].kill();
        let killed = Instant::now();
        let killed_at = Utc::now();
        kills.push(killed_at);
        takeovers.push(takeover(&replicas[1 - leader], killed).await);
        replicas[leader].restart().await;
        wait_for("a restart by the new leader", Duration::from_secs(60), || async {
            items(&replicas[1 - leader], "/history?name=web&outcome=succeeded")
                .iter()
                .any(|r| time(&r["slot"]) > killed_at)
                .then_some(())
        })
        .await;
    }
    let leader = leader_of(&[&replicas[0], &replicas[1]]).await;
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let suspended = common::eru::settle(&erus, &replicas[leader], "web").await;

    let seconds: Vec<String> = takeovers
        .iter()
        .map(|t| format!("{:.1}", t.as_secs_f64()))
        .collect();
    println!("takeover after SIGKILL of the leader (s): {}", seconds.join(", "));
    // the whole run on the one journal both replicas share, against the Deployment
    let born = common::eru::created(&erus, "web").await;
    let window = (born + chrono::Duration::seconds(1), suspended);
    // each kill leaves no leader for a lease (15 s): of the slots in it, the newest runs at the
    // takeover and the others are operator_down; the first 10 s after a kill hold two slots of
    // */5 that no takeover can reach (the lease outlasts them), so one is, at least
    let mut expected = Ledger::deployment("web", "web", window, every(5, window.0, window.1)).expect(
        window.0,
        window.1,
        &[ON_SCHEDULE, &["operator_down"]].concat(),
    );
    for kill in &kills {
        expected = expected.require_some(*kill, *kill + chrono::Duration::seconds(10), "operator_down");
    }
    check(&client, &ns.name, &replicas[leader], &expected).await;
    // every slot from the first restart to the suspension: one record (a slot restarted twice
    // or recorded twice panics here), and a downtime says which kill it was
    let slots = common::eru::accounted(
        &replicas[leader],
        "web",
        5,
        first,
        suspended - chrono::Duration::seconds(1),
    );
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for (slot, record) in &slots {
        let common::eru::Accounted::Missed { reason, window } = record else {
            *reasons.entry("restarted".into()).or_default() += 1;
            continue;
        };
        *reasons.entry(reason.clone()).or_default() += 1;
        if reason == "operator_down" {
            let (start, end) = window.expect("operator_down has its window");
            assert!(
                start <= *slot && *slot <= end,
                "slot {slot} outside its window {start}..{end}"
            );
            assert!(
                kills.iter().any(|k| start <= *k && *k <= end),
                "slot {slot}: downtime {start}..{end} contains no kill ({kills:?})"
            );
        }
    }
    println!("{} slots: {reasons:?}", slots.len());
    assert!(reasons.get("restarted").copied().unwrap_or(0) >= 5, "{reasons:?}");

    // the receiver comes up (refusing once): the last leader delivers what five leaders journaled
    use common::receiver::{Answer, Receiver, delivered, owed, verify};
    // (no more slots, so no more events: suspended, each slot would be one)
    let yearly = Patch::Merge(json!({"spec": {"schedule": "0 0 1 1 *"}}));
    erus.patch("web", &PatchParams::default(), &yearly).await.unwrap();
    let receiver = Receiver::start(port, &[Answer::Refuse]);
    let (received, owed) = wait_for("every owed event delivered", Duration::from_secs(60), || async {
        // what was sent, then what is owed: an event sent was journaled before
        let received = receiver.received();
        let owed = owed(&replicas[leader], &ns.name, "web");
        let pending = replicas[leader].get_json("/audit")["operator"]["notifications"]["pending"].as_i64();
        (owed.is_subset(&delivered(&received)) && pending == Some(0)).then_some((received, owed))
    })
    .await;
    let copies = verify(&received, &owed, b"k");
    let journaled_by_earlier_leaders = (copies.values())
        .filter(|c| {
            c[0]["at"]
                .as_str()
                .is_some_and(|at| time(&json!(at)) < *kills.last().unwrap())
        })
        .count();
    assert!(journaled_by_earlier_leaders > 0, "{copies:?}");
    println!(
        "{} notification events, {journaled_by_earlier_leaders} journaled before the last failover, delivered by the last leader",
        copies.len()
    );
}

/// The state letter of process `pid` (`T`: stopped), from `/proc/<pid>/stat`.
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ...": the state follows the last ')'
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// A leader frozen in the middle of a pass (the failpoint `stop-before-restart-patch`: the
/// restart is decided and journaled, then the process SIGSTOPs itself just before the patch) past
/// its lease, while the standby takes over; resumed (SIGCONT), it patches nothing, journals
/// nothing and never says it leads: leading is the renew deadline, checked before every write,
/// not a flag its renew loop clears later. Before that, the resumed process served `eru_leader 1`
/// for about 100 ms, and its in-flight pass had nothing between it and its patch.
#[tokio::test]
#[ignore = "needs the local cluster and PostgreSQL: hack/test.sh"]
async fn a_leader_frozen_between_decision_and_patch_patches_nothing_when_it_resumes() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "ha-freeze").await;
    common::allow_lease(&client, &ns.name).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    wait_ready(&deployments, "web", 1).await;
    let url = common::fresh_database("freeze");
    // the one that freezes leads first: started alone, the standby after it leads
    let frozen_flags = elected(&ns.name, "frozen");
    let mut frozen = Operator::start_on(
        &client,
        &ns.name,
        &strs(&frozen_flags),
        &[("ERU_FAILPOINT", "stop-before-restart-patch")],
        Some(&url),
    )
    .await;
    wait_for("the first replica to lead", Duration::from_secs(60), || async {
        (frozen.role().as_deref() == Some("leader")).then_some(())
    })
    .await;
    let standby_flags = elected(&ns.name, "standby");
    let standby = Operator::start_on(&client, &ns.name, &strs(&standby_flags), &[], Some(&url)).await;
    assert_eq!(standby.role().as_deref(), Some("standby"));

    // a slot every 30 s, with a deadline that outlasts the freeze and the takeover
    let spec = json!({"schedule": "*/30 * * * * *", "startingDeadlineSeconds": 60,
                      "target": {"kind": "Deployment", "name": "web"}});
    create_eru(&client, &ns.name, "web", spec).await.unwrap();
    let pid = frozen.pid().unwrap();
    wait_for(
        "the leader to stop itself before its patch",
        Duration::from_secs(60),
        || async { (process_state(pid) == Some('T')).then_some(()) },
    )
    .await;
    let frozen_at = Instant::now();
    // decided and journaled by the frozen leader, not patched
    let decided = wait_for(
        "the decided restart in the journal",
        Duration::from_secs(10),
        || async { items(&standby, "/history?name=web").into_iter().next() },
    )
    .await;
    let slot = time(&decided["slot"]);
    assert!(decided["patched_at"].is_null(), "{decided}");
    assert_eq!(
        common::eru::template_slot(&deployments.get("web").await.unwrap()),
        None
    );

    // the standby takes over and patches that slot (the same journaled restart, its key)
    let took = takeover(&standby, frozen_at).await;
    println!("takeover from a frozen leader: {:.1} s", took.as_secs_f64());
    wait_for("the new leader's patch", Duration::from_secs(60), || async {
        (common::eru::template_slot(&deployments.get("web").await.ok()?) == Some(slot)).then_some(())
    })
    .await;
    // frozen for longer than a lease in all, then resumed: its in-flight pass goes on to its patch
    let frozen_for = LEASE_DURATION + Duration::from_secs(5);
    tokio::time::sleep(frozen_for.saturating_sub(frozen_at.elapsed())).await;
    let resumed_at = Utc::now();
    assert!(
        std::process::Command::new("kill")
            .args(["-CONT", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    // sampled until it exits: never a leader on /metrics or /readyz
    let mut samples = 0;
    while frozen.exited().is_none() {
        if let Ok(mut response) = common::agent(Some(Duration::from_secs(2)))
            .get(&frozen.url("/metrics"))
            .call()
        {
            let body = response.body_mut().read_to_string().unwrap_or_default();
            assert!(
                !body.contains("\neru_leader 1"),
                "the resumed process says it leads"
            );
            samples += 1;
        }
        if let Some(role) = frozen.role() {
            assert_eq!(role, "standby", "the resumed process says it leads");
        }
        assert!(
            Instant::now() < frozen_at + frozen_for + Duration::from_secs(60),
            "the resumed process did not exit:\n{}",
            frozen.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("{samples} /metrics samples of the resumed process before it exited");
    let log = std::fs::read_to_string(&frozen.log).unwrap_or_default();
    assert!(
        log.contains("failpoint stop-before-restart-patch: stopping"),
        "{log}"
    );
    let resumed = log
        .split("failpoint stop-before-restart-patch: continued")
        .nth(1)
        .unwrap_or_default();
    assert!(
        !resumed.contains("restart patched"),
        "the resumed pass sent its patch:\n{resumed}"
    );
    // the process exits as its renew loop notices, maybe before the resumed pass logs anything;
    // if the pass got to its patch first, the log says it was not sent
    println!(
        "the resumed pass's patch refused before the exit: {}",
        resumed.contains("restart patch not sent")
    );
    // the API server received exactly one restart patch of the Deployment, the new leader's,
    // before the resume (a patch setting the same slot again would change nothing, so only the
    // API server's audit log can tell it was never sent); nothing journaled by the resumed one
    if let Some(patches) = common::workload_patches("deployments", &ns.name, "web") {
        let restarts: Vec<_> = patches
            .iter()
            .filter(|p| p.field_manager.as_deref() == Some("eru-operator-restart"))
            .collect();
        assert_eq!(
            restarts.len(),
            1,
            "one restart patch reached the API server: {patches:?}"
        );
        assert!(restarts[0].received < resumed_at, "{patches:?}");
    }
    let history = items(&standby, "/history?name=web&limit=1000");
    let restart = history
        .iter()
        .find(|r| time(&r["slot"]) == slot)
        .unwrap_or_else(|| panic!("no restart of {slot}: {history:?}"));
    assert!(time(&restart["patched_at"]) < resumed_at, "{restart}");
    let records = items(&standby, "/slots?name=web&limit=1000");
    let record = records
        .iter()
        .find(|r| time(&r["slot"]) == slot)
        .unwrap_or_else(|| panic!("no record of {slot}: {records:?}"));
    assert_eq!(
        record["restart"]["failed_patches"], 0,
        "no failed patch journaled by the resumed one: {record}"
    );
    let runs = common::get_json(&standby.url("/audit"))["operator"]["runs"].clone();
    assert!(
        runs.as_array()
            .unwrap()
            .iter()
            .filter(|r| r["instance"].as_str().is_some_and(|i| i.starts_with("frozen")))
            .all(|r| time(&r["last_heartbeat"]) < resumed_at),
        "the resumed process wrote a sign of life: {runs}"
    );

    // and the whole run: every slot once, the one slot rolled once
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let settled = settle(&erus, &standby, "web").await;
    let born = common::eru::created(&erus, "web").await;
    let window = (born + chrono::Duration::seconds(1), settled);
    check(
        &client,
        &ns.name,
        &standby,
        &Ledger::deployment("web", "web", window, every(30, window.0, window.1)).require(
            slot,
            slot,
            "fired",
            &[],
        ),
    )
    .await;
}

/// The fence (src/journal/fence.rs) on a shared PostgreSQL journal: a leader frozen in its
/// writer after a batch's statements and its leadership deadline's check, just before the commit
/// (the failpoint `stop-before-journal-commit`), past its lease while the standby takes over and
/// takes a newer epoch, then resumed: the database refuses the commit, and the journal holds
/// nothing of that batch — the batch moves its run's last sign of life to the commit's instant,
/// after the resume, and the frozen run's never gets there. Without the fence, the resumed
/// writer's commit (one round trip) races its renew loop's exit and may land.
#[tokio::test]
#[ignore = "needs the local cluster and PostgreSQL: hack/test.sh"]
async fn a_leader_frozen_before_its_commit_commits_nothing_once_a_newer_leader_took_the_journal() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "ha-fence").await;
    common::allow_lease(&client, &ns.name).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    wait_ready(&deployments, "web", 1).await;
    let url = common::fresh_database("fence");
    let frozen_flags = elected(&ns.name, "frozen");
    let failpoint = [("ERU_FAILPOINT", "stop-before-journal-commit")];
    let mut frozen =
        Operator::start_on(&client, &ns.name, &strs(&frozen_flags), &failpoint, Some(&url)).await;
    wait_for("the first replica to lead", Duration::from_secs(60), || async {
        (frozen.role().as_deref() == Some("leader")).then_some(())
    })
    .await;
    let standby_flags = elected(&ns.name, "standby");
    let standby = Operator::start_on(&client, &ns.name, &strs(&standby_flags), &[], Some(&url)).await;
    assert_eq!(standby.role().as_deref(), Some("standby"));

    // the Eru's first pass is the leader's first batch of records: it stops before committing it
    let spec = json!({"schedule": "0 0 1 1 *", "target": {"kind": "Deployment", "name": "web"}});
    create_eru(&client, &ns.name, "web", spec).await.unwrap();
    let pid = frozen.pid().unwrap();
    wait_for(
        "the leader to stop before its commit",
        Duration::from_secs(60),
        || async { (process_state(pid) == Some('T')).then_some(()) },
    )
    .await;
    let frozen_at = Instant::now();
    let took = takeover(&standby, frozen_at).await;
    println!(
        "takeover from a leader frozen before its commit: {:.1} s",
        took.as_secs_f64()
    );
    // the new leader took a newer epoch before it journaled anything; its own pass of the Eru
    // waits for the frozen transaction's rows (PostgreSQL's row locks), so the frozen one is
    // resumed before its idle transaction is ended by the server (30 s), to meet the fence
    let frozen_for = LEASE_DURATION + Duration::from_secs(5);
    tokio::time::sleep(frozen_for.saturating_sub(frozen_at.elapsed())).await;
    let resumed_at = Utc::now();
    assert!(
        std::process::Command::new("kill")
            .args(["-CONT", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    let resumed = Instant::now();
    while frozen.exited().is_none() {
        assert!(
            resumed.elapsed() < Duration::from_secs(60),
            "the resumed process did not exit:\n{}",
            frozen.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = std::fs::read_to_string(&frozen.log).unwrap_or_default();
    // resumed, the writer thread and the lease's renew loop race: the writer logs that it went on
    // (then its commit meets the fence), or the renew loop, past its deadline, ends the process
    // first (then the batch never reaches the database); either way nothing of it may land, below
    assert!(
        log.contains("failpoint stop-before-journal-commit: continued")
            || log.contains("lost the leader lease: exiting before another replica may take over"),
        "{log}"
    );
    // the refusal is logged when the writer got there before the renew loop ended the process
    println!(
        "the resumed commit refused by the fence before the exit: {}",
        log.contains("journal write refused by the fence")
    );
    let runs = common::get_json(&standby.url("/audit"))["operator"]["runs"].clone();
    let frozen_runs: Vec<&Value> = (runs.as_array().unwrap().iter())
        .filter(|r| r["instance"].as_str().is_some_and(|i| i.starts_with("frozen")))
        .collect();
    assert!(!frozen_runs.is_empty(), "{runs}");
    assert!(
        frozen_runs
            .iter()
            .all(|r| time(&r["last_heartbeat"]) < resumed_at),
        "the frozen batch committed after the resume: {runs}"
    );
    // the new leader's pass goes on (its writes waited for the frozen transaction's rows)
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    wait_for("the new leader's pass", Duration::from_secs(60), || async {
        (status(&erus, "web").await?.phase.as_deref() == Some("Waiting")).then_some(())
    })
    .await;
    standby.chained_transitions("Eru", "web");
}

/// The high-availability install is valid for the API server (dry run): two replicas, the
/// journal URL from a Secret, anti-affinity, a PodDisruptionBudget.
#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn a_second_operator_without_leader_election_on_one_postgres_journal_refuses_to_start() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "ha-actor").await;
    let url = common::fresh_database("actor");
    let first = Operator::start_on(&client, &ns.name, &[], &[], Some(&url)).await;
    let mut second = Operator::prepare(&client, &ns.name, &[], &[], Some(&url)).await;
    let status = second
        .spawn_expecting_exit(Duration::from_secs(30))
        .await
        .expect("the second operator exits instead of acting beside the first");
    assert!(!status.success());
    let log = second.log_tail();
    assert!(
        log.contains("another eru-operator process without --leader-elect acts on it"),
        "{log}"
    );
    assert!(!log.contains("password"), "{log}");
    // the first one's lock goes with it: a successor starts
    drop(first);
    let mut third = Operator::prepare(&client, &ns.name, &[], &[], Some(&url)).await;
    third.spawn().await;
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn the_high_availability_install_is_accepted() {
    common::install();
    let applied = common::kubectl(&["apply", "--dry-run=server", "-f", "deploy/ha/"]);
    for object in [
        "deployment.apps/eru-operator",
        "poddisruptionbudget.policy/eru-operator",
        "service/eru-operator",
    ] {
        assert!(applied.contains(object), "{applied}");
    }
    let manifest = std::fs::read_to_string(common::repo().join("deploy/ha/operator.yaml")).unwrap();
    for needed in ["replicas: 2", "--leader-elect", "secretKeyRef", "podAntiAffinity"] {
        assert!(
            manifest.contains(needed),
            "deploy/ha/operator.yaml lacks {needed}"
        );
    }
}
