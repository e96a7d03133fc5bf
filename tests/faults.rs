//! Faults the operator must survive unaided, end to end: the control plane restarted mid-rollout,
//! the journal's disk full, the PostgreSQL server restarted (the slots of a journal outage are
//! `missed/journal_unavailable` with its window). Each breaks what every other test
//! shares (the API server, the database server), so `hack/test.sh` runs these alone, one at a
//! time, after the others (test names start with `fault_`).

mod common;

use std::{process::Command, time::Duration};

use chrono::{DateTime, Utc};
use common::{
    Operator, TestNamespace, client,
    eru::{
        Accounted, accounted, create_eru, deployment, items, settle, succeeded_after, template_slot, time,
        wait_ready,
    },
    ledger::{ON_SCHEDULE, Workload, check, every_since_created},
    repo, wait_for,
};
use eru_operator::eru::Eru;
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use serde_json::json;

/// The cluster the tests run on (`hack/test.sh` names it).
fn cluster_name() -> String {
    std::env::var("ERU_TEST_CLUSTER").unwrap_or_else(|_| "test".into())
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh (runs the fault_ tests alone)"]
async fn fault_control_plane_restarted_mid_rollout() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "fault-apiserver").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 2, json!({})).await;
    wait_ready(&deployments, "web", 2).await;
    let operator = Operator::start(&client, &ns.name, &[]).await;
    let spec = json!({"schedule": "*/5 * * * * *", "target": {"kind": "Deployment", "name": "web"}});
    let created = Utc::now();
    create_eru(&client, &ns.name, "web", spec).await.unwrap();
    let first = succeeded_after(&operator, "web", created).await;

    // the next patch lands; while its rollout runs, etcd and the API server go away for 5 s
    let rolling = wait_for("a restart patch rolling out", Duration::from_secs(30), || async {
        let d = deployments.get("web").await.ok()?;
        let slot = template_slot(&d).filter(|s| *s > first)?;
        let status = d.status.as_ref()?;
        let done = status.observed_generation == d.metadata.generation
            && status.updated_replicas == Some(2)
            && status.replicas == Some(2);
        (!done).then_some(slot)
    })
    .await;
    let outage = Utc::now();
    let restarted = Command::new(repo().join("hack/cluster.sh"))
        .args([
            "restart-control-plane",
            "--name",
            &cluster_name(),
            "--down-seconds",
            "5",
        ])
        .status()
        .unwrap();
    assert!(
        restarted.success(),
        "hack/cluster.sh restart-control-plane failed"
    );
    let back = Utc::now();
    println!(
        "control plane down from {outage} to {back} ({:.1} s), slot {rolling} rolling out",
        (back - outage).num_milliseconds() as f64 / 1000.0
    );

    // the operator carries on unaided: the rollout caught in the outage is judged, and later
    // slots are restarted again
    wait_for(
        "the interrupted rollout judged",
        Duration::from_secs(90),
        || async {
            items(&operator, "/history?name=web&limit=1000")
                .iter()
                .find(|r| time(&r["slot"]) == rolling)
                .filter(|r| r["outcome"] != "in_progress")
                .map(|r| r["outcome"].as_str().unwrap_or_default().to_string())
        },
    )
    .await;
    let resumed = succeeded_after(&operator, "web", back + chrono::Duration::seconds(5)).await;
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let settled = settle(&erus, &operator, "web").await;
    // the slots of the outage: restarted once the API server is back, or given up for a newer
    // slot, or (its patches refused until its deadline) patch_failed; never operator_down
    let expected = every_since_created(&client, &ns.name, "web", Workload::Deployment("web"), 5, settled)
        .await
        .expect(
            outage,
            back + chrono::Duration::seconds(5),
            &[ON_SCHEDULE, &["patch_failed"]].concat(),
        );
    check(&client, &ns.name, &operator, &expected).await;

    // every slot from the first restart to the first one restarted after the outage: exactly one
    // record, and none claims the operator was down (it ran throughout; the API server did not)
    let slots = accounted(&operator, "web", 5, first, resumed);
    let rolled = slots.iter().find(|(s, _)| *s == rolling).map(|(_, a)| a.clone());
    assert_eq!(rolled, Some(Accounted::Fired("succeeded".into())), "{slots:?}");
    for (slot, record) in &slots {
        if let Accounted::Missed { reason, .. } = record {
            assert_ne!(reason, "operator_down", "slot {slot}: {slots:?}");
        }
    }
    println!("{} slots: {slots:?}", slots.len());
    let last = slots.last().map(|(_, a)| a.clone());
    assert_eq!(last, Some(Accounted::Fired("succeeded".into())), "{slots:?}");
}

/// What `/readyz` and `/metrics` say of the journal: (readyz journal part, eru_journal_up).
fn journal_health(operator: &Operator) -> (Option<bool>, Option<i64>) {
    let (_, readyz) = common::get(&operator.url("/readyz"));
    let ready = serde_json::from_str::<serde_json::Value>(&readyz)
        .ok()
        .and_then(|v| v["journal"].as_bool());
    let (_, metrics) = common::get(&operator.url("/metrics"));
    let up = metrics
        .lines()
        .find_map(|l| l.strip_prefix("eru_journal_up "))
        .and_then(|v| v.trim().parse().ok());
    (ready, up)
}

/// The starting deadline of [`every_5s_with_a_short_deadline`]: a slot is restarted at most this
/// late.
const STARTING_DEADLINE_SECONDS: i64 = 2;

/// The Eru of the journal fault tests: every 5 s, with a starting deadline (2 s) that the slots
/// inside a 10–12 s journal outage pass before the journal is back.
fn every_5s_with_a_short_deadline() -> serde_json::Value {
    json!({
        "schedule": "*/5 * * * * *",
        "startingDeadlineSeconds": STARTING_DEADLINE_SECONDS,
        "target": {"kind": "Deployment", "name": "web"}
    })
}

/// Runs `outage` (a command that takes the journal away and gives it back) while watching the
/// operator: its journal turns unready, and every slot the Deployment carries meanwhile is one
/// the journal recorded (checked once it is back). Then restarts resume unaided, every slot has
/// one record, and the slots of the outage say why they were not restarted:
/// `journal_unavailable`, with the outage's window (never `past_deadline` or `superseded`).
async fn survive_journal_outage(
    client: &kube::Client,
    ns: &str,
    operator: &Operator,
    deployments: &Api<Deployment>,
    erus: &Api<Eru>,
    (before, mut outage): (DateTime<Utc>, std::process::Child),
) {
    let mut seen_unready = false;
    let mut carried = std::collections::BTreeSet::new();
    let started = Utc::now();
    while outage.try_wait().unwrap().is_none() {
        if journal_health(operator) == (Some(false), Some(0)) {
            seen_unready = true;
        }
        if let Some(slot) = deployments.get("web").await.ok().as_ref().and_then(template_slot) {
            carried.insert(slot);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(outage.wait().unwrap().success(), "the outage command failed");
    let back = Utc::now();
    println!(
        "journal away from {started} to {back} ({:.1} s)",
        (back - started).num_milliseconds() as f64 / 1000.0
    );
    assert!(
        seen_unready,
        "/readyz and eru_journal_up never said the journal was unwritable"
    );
    wait_for("the journal ready again", Duration::from_secs(30), || async {
        (journal_health(operator) == (Some(true), Some(1))).then_some(())
    })
    .await;
    let after = succeeded_after(operator, "web", back).await;
    let settled = settle(erus, operator, "web").await;
    // the slots of the outage were not restarted, for want of a journal (which takes writes
    // again a moment after the outage ends: its retries backing off: the span runs 30 s on)
    let expected = every_since_created(client, ns, "web", Workload::Deployment("web"), 5, settled)
        .await
        .require(
            started,
            back + chrono::Duration::seconds(30),
            "journal_unavailable",
            ON_SCHEDULE,
        );
    check(client, ns, operator, &expected).await;

    // no cluster write without its record: every slot the template carried has its restart
    let restarts = items(operator, "/history?name=web&limit=1000");
    for slot in &carried {
        assert!(
            restarts
                .iter()
                .any(|r| time(&r["slot"]) == *slot && !r["patched_at"].is_null()),
            "the Deployment carried slot {slot}, which the journal does not record as patched"
        );
    }
    let slots = accounted(operator, "web", 5, before, after);
    println!("{} slots: {slots:?}", slots.len());
    for (slot, record) in &slots {
        if let Accounted::Missed { reason, .. } = record {
            assert_ne!(
                reason, "operator_down",
                "slot {slot}: the operator ran throughout: {slots:?}"
            );
        }
    }

    // The operator ran, but could journal nothing, so it restarted no slot of the outage; each
    // one is missed/journal_unavailable with a window that holds it and lies within the outage.
    // "Inside" leaves a second off each edge (the journal fails a moment after the fault begins
    // and takes writes a moment after it ends); the window starts at the last write that worked
    // (a heartbeat a second, or a batch, before) and ends at the first that works again.
    let edge = chrono::Duration::seconds(1);
    let after_patched = restarts
        .iter()
        .find(|r| time(&r["slot"]) == after)
        .map(|r| time(&r["patched_at"]))
        .expect("the restart after the outage landed");
    let inside: Vec<_> = slots
        .iter()
        .filter(|(slot, _)| *slot > started + edge && *slot <= back - edge)
        .collect();
    assert!(!inside.is_empty(), "no slot inside the outage: {slots:?}");
    // When the journal took writes again: the end of the missed slots' window. The outage
    // command returns a moment after that (it waits for the server to answer), so the last slot
    // "inside" may have been due a moment before the journal came back, and is then restarted
    // late, within its starting deadline, as any late slot is.
    let journal_back = (slots.iter())
        .filter_map(|(_, record)| match record {
            Accounted::Missed {
                reason,
                window: Some((_, to)),
            } if reason == "journal_unavailable" => Some(*to),
            _ => None,
        })
        .max()
        .unwrap_or_else(|| panic!("no slot missed for want of a journal: {slots:?}"));
    let deadline = chrono::Duration::seconds(STARTING_DEADLINE_SECONDS);
    for (slot, record) in &inside {
        if matches!(record, Accounted::Fired(_)) && *slot + deadline >= journal_back {
            let patched = (restarts.iter())
                .find(|r| time(&r["slot"]) == *slot)
                .map(|r| time(&r["patched_at"]))
                .expect("a fired slot has its restart");
            assert!(
                patched >= journal_back,
                "slot {slot} was patched at {patched}, before the journal took writes again at {journal_back}"
            );
            continue;
        }
        let Accounted::Missed {
            reason,
            window: Some((from, to)),
        } = record
        else {
            panic!("slot {slot} inside the outage is {record:?}, not missed/journal_unavailable: {slots:?}")
        };
        assert_eq!(
            reason, "journal_unavailable",
            "slot {slot} inside the outage (never past_deadline or superseded): {slots:?}"
        );
        assert!(
            from < slot && slot <= to,
            "slot {slot} outside its window {from} .. {to}"
        );
        // the journal took the write of the restart before the outage, and that of the restart
        // after it: the window lies between them
        assert!(
            *from >= before && *to <= after_patched,
            "window {from} .. {to} is not between the restarts around the outage ({before}, {after_patched})"
        );
    }
    println!(
        "inside the outage: {}",
        inside
            .iter()
            .map(|(slot, record)| match record {
                Accounted::Missed {
                    reason,
                    window: Some((from, to)),
                } => format!(
                    "{slot}: {reason} ({:+.3} s .. {:+.3} s of the outage)",
                    (*from - started).num_milliseconds() as f64 / 1000.0,
                    (*to - back).num_milliseconds() as f64 / 1000.0
                ),
                other => format!("{slot}: {other:?}"),
            })
            .collect::<Vec<_>>()
            .join("; ")
    );
}

#[tokio::test]
#[ignore = "needs the local cluster and PostgreSQL: hack/test.sh (runs the fault_ tests alone)"]
async fn fault_postgres_restarted() {
    let name = std::env::var("ERU_TEST_POSTGRES_NAME")
        .expect("ERU_TEST_POSTGRES_NAME: the hack/postgres.sh server to restart (hack/test.sh sets it)");
    let client = client().await;
    let ns = TestNamespace::create(&client, "fault-postgres").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    wait_ready(&deployments, "web", 1).await;
    let url = common::fresh_database("fault");
    let operator = Operator::start_on(&client, &ns.name, &[], &[], Some(&url)).await;
    create_eru(&client, &ns.name, "web", every_5s_with_a_short_deadline())
        .await
        .unwrap();
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    // a restart before the outage, read before it begins (a read during it may rightly be a 503)
    let before = succeeded_after(&operator, "web", Utc::now() - chrono::Duration::seconds(10)).await;
    // the server crashes (immediate shutdown) and is back 10 s later on the same port and data
    let outage = Command::new(repo().join("hack/postgres.sh"))
        .args(["restart", "--name", &name, "--immediate", "--down-seconds", "10"])
        .spawn()
        .unwrap();
    survive_journal_outage(
        &client,
        &ns.name,
        &operator,
        &deployments,
        &erus,
        (before, outage),
    )
    .await;
}

/// A tmpfs of `size` mounted on a fresh folder (the test runs as root, as CI does); unmounted
/// when dropped.
struct TinyDisk {
    dir: tempfile::TempDir,
}

impl TinyDisk {
    fn mount(size: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(mounted.success(), "mounting a tmpfs needs root (CAP_SYS_ADMIN)");
        Self { dir }
    }

    /// Fills what is left with one file (dd stops at ENOSPC).
    fn fill(&self) {
        let _ = Command::new("dd")
            .args(["if=/dev/zero", "bs=16k", "status=none"])
            .arg(format!("of={}", self.dir.path().join("filler").display()))
            .status();
    }
}

impl Drop for TinyDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").args(["-l"]).arg(self.dir.path()).status();
    }
}

#[tokio::test]
#[ignore = "needs the local cluster and root: hack/test.sh (runs the fault_ tests alone)"]
async fn fault_journal_disk_full() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "fault-disk").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    wait_ready(&deployments, "web", 1).await;
    // the SQLite journal on a 16 MB filesystem of its own
    let disk = TinyDisk::mount("16m");
    let mut operator = Operator::prepare(&client, &ns.name, &[], &[], None).await;
    operator.database = disk.dir.path().join("eru.db");
    operator.spawn().await;
    create_eru(&client, &ns.name, "web", every_5s_with_a_short_deadline())
        .await
        .unwrap();
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let before = succeeded_after(&operator, "web", Utc::now() - chrono::Duration::seconds(10)).await;
    // the disk fills up; 12 s later the space comes back (the filler is deleted)
    disk.fill();
    let path = disk.dir.path().join("filler");
    let outage = Command::new("bash")
        .args(["-c", "sleep 12 && rm -f \"$0\""])
        .arg(&path)
        .spawn()
        .unwrap();
    survive_journal_outage(
        &client,
        &ns.name,
        &operator,
        &deployments,
        &erus,
        (before, outage),
    )
    .await;
    let _ = &disk;
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh (runs the fault_ tests alone)"]
async fn fault_leader_exits_in_a_long_control_plane_outage_and_returns_under_a_supervisor() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "fault-leader").await;
    common::allow_lease(&client, &ns.name).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    wait_ready(&deployments, "web", 1).await;
    let flags = [
        "--leader-elect",
        "--leader-elect-namespace",
        &ns.name,
        "--instance",
        "solo",
    ];
    let mut operator = Operator::start(&client, &ns.name, &flags).await;
    wait_for("leadership", Duration::from_secs(30), || async {
        (operator.role().as_deref() == Some("leader")).then_some(())
    })
    .await;
    let spec = json!({"schedule": "*/5 * * * * *", "target": {"kind": "Deployment", "name": "web"}});
    let created = Utc::now();
    create_eru(&client, &ns.name, "web", spec).await.unwrap();
    let first = succeeded_after(&operator, "web", created).await;

    // the control plane goes away for 20 s, longer than the renew deadline (10 s): the leader
    // must stop acting and exit; a supervisor (here: this loop, in a cluster: kubelet) starts it
    // again, and it retries until the API server is back
    let mut outage = Command::new(repo().join("hack/cluster.sh"))
        .args([
            "restart-control-plane",
            "--name",
            &cluster_name(),
            "--down-seconds",
            "20",
        ])
        .spawn()
        .unwrap();
    let down = Utc::now();
    let mut exits = Vec::new();
    while outage.try_wait().unwrap().is_none() {
        if let Some(status) = operator.exited() {
            exits.push((Utc::now(), status));
            tokio::time::sleep(Duration::from_secs(1)).await; // a supervisor's back-off
            operator.respawn();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        outage.wait().unwrap().success(),
        "hack/cluster.sh restart-control-plane failed"
    );
    let back = Utc::now();
    println!(
        "control plane down {:.1} s; operator exits during it: {:?}",
        (back - down).num_milliseconds() as f64 / 1000.0,
        exits
            .iter()
            .map(|(at, s)| format!("{:.1} s: {s}", (*at - down).num_milliseconds() as f64 / 1000.0))
            .collect::<Vec<_>>()
    );
    let (first_exit, status) = exits
        .first()
        .cloned()
        .expect("the leader exited during a 20 s outage (fail-stop)");
    assert!(
        !status.success(),
        "a lost lease is an error exit, not a clean stop"
    );
    assert!(
        first_exit < back,
        "it exited at {first_exit}, after the outage ended at {back}"
    );

    // back: supervised until it leads again, then it restarts on schedule unaided
    wait_for("the operator leading again", Duration::from_secs(120), || {
        if let Some(status) = operator.exited() {
            exits.push((Utc::now(), status));
            operator.respawn();
        }
        let role = operator.role();
        async move { (role.as_deref() == Some("leader")).then_some(()) }
    })
    .await;
    let resumed = succeeded_after(&operator, "web", back + chrono::Duration::seconds(5)).await;
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let settled = settle(&erus, &operator, "web").await;
    // the slots while no operator ran are operator_down; a restart decided before the exit and
    // refused by the absent API server until its deadline is patch_failed
    let expected = every_since_created(&client, &ns.name, "web", Workload::Deployment("web"), 5, settled)
        .await
        .require(
            down,
            resumed,
            "operator_down",
            &[ON_SCHEDULE, &["patch_failed"]].concat(),
        );
    check(&client, &ns.name, &operator, &expected).await;

    // every slot exactly one record (accounted() panics on none or two); the slots while no
    // process ran are operator_down, none restarted twice
    let slots = accounted(&operator, "web", 5, first, resumed);
    println!("{} slots: {slots:?}", slots.len());
    let down_slots: Vec<_> = slots
        .iter()
        .filter(|(_, a)| matches!(a, Accounted::Missed { reason, .. } if reason == "operator_down"))
        .collect();
    assert!(
        !down_slots.is_empty(),
        "the operator was gone for a while: {slots:?}"
    );
    for (slot, record) in &down_slots {
        let Accounted::Missed {
            window: Some((from, to)),
            ..
        } = record
        else {
            panic!("operator_down without a window: {record:?}")
        };
        // the downtime begins after the restart before the outage and by the first exit
        assert!(
            from < slot && slot <= to && *from > first && *from <= first_exit,
            "slot {slot}: window {from} .. {to}, first exit {first_exit}"
        );
    }
    let last = slots.last().map(|(_, a)| a.clone());
    assert_eq!(last, Some(Accounted::Fired("succeeded".into())), "{slots:?}");
    operator.stop();
}
