//! The operator as a process under `deploy/` RBAC: it becomes ready, serves metrics, its journal
//! survives a SIGKILL, and bad flags or journal files fail clearly.

mod common;

use std::{process::Command, time::Duration};

use common::{Operator, TestNamespace, client, get, get_json, kubectl, wait_for};

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn ready_under_rbac_and_journal_survives_a_kill() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "foundation").await;
    // the samples hold a PodSet and a Memcached: every controller, as the demo runs them
    common::install_controller("podset");
    common::install_controller("memcached");
    let mut operator = Operator::start(&client, &ns.name, &["--controllers", "eru,podset,memcached"]).await;

    assert_eq!(get(&operator.url("/healthz")).0, 200);
    let ready = get_json(&operator.url("/readyz"));
    assert_eq!(
        ready,
        serde_json::json!({"journal": true, "crds": true, "caches": true, "role": "leader"})
    );
    let (status, metrics) = get(&operator.url("/metrics"));
    assert_eq!(status, 200);
    assert!(metrics.contains("eru_build_info{version=\""), "{metrics}");

    // the samples apply cleanly; the PodSet's transitions reach the journal
    kubectl(&["apply", "-n", &ns.name, "-f", "deploy/samples/"]);
    let journaled = wait_for(
        "PodSet transitions in the journal",
        Duration::from_secs(60),
        || async {
            let body = get_json(&operator.url("/transitions?kind=PodSet"));
            let items = body["items"].as_array()?.clone();
            (!items.is_empty()).then_some(items.len())
        },
    )
    .await;

    // a second operator on the same journal file refuses to start (both would act)
    let second = std::process::Command::new(env!("CARGO_BIN_EXE_eru-operator"))
        .args([
            "run",
            "--http-address",
            "127.0.0.1:0",
            "--kubeconfig",
            "/nonexistent",
        ])
        .arg("--database")
        .arg(&operator.database)
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains("is not usable: another eru-operator process is using it (pid "),
        "{stderr}"
    );

    // SIGKILL releases the lock with the process: the restart takes it again
    operator.kill();
    operator.restart().await;
    let after = get_json(&operator.url("/transitions?kind=PodSet"))["items"]
        .as_array()
        .unwrap()
        .len();
    assert!(
        after >= journaled,
        "journal lost rows across a SIGKILL: {journaled} before, {after} after"
    );
}

#[tokio::test]
async fn bad_flags_exit_2_with_one_line() {
    for args in [
        vec!["run", "--http-address", "not-an-address"],
        vec!["run", "--log-format", "xml"],
        vec!["run", "--controllers", "eru,replicaset"],
        vec!["run", "--default-schedule", "61 * * * *"],
        vec!["run", "--namespace", "Not_Valid"],
        vec!["run", "--retention", "90 days"],
        vec!["run", "--retention", "5s"],
        vec!["schedule", "* * *"],
        vec!["schedule", "* * * * *", "--time-zone", "Mars/Olympus"],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_eru-operator"))
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.starts_with("error:"), "{args:?}: {stderr}");
    }
}

#[tokio::test]
async fn unusable_journal_exits_nonzero_without_panic() {
    let dir = tempfile::tempdir().unwrap();
    let corrupt = dir.path().join("corrupt.db");
    std::fs::write(&corrupt, vec![7u8; 4096]).unwrap();
    let missing_dir = dir.path().join("missing/eru.db");
    for database in [corrupt, missing_dir] {
        let output = Command::new(env!("CARGO_BIN_EXE_eru-operator"))
            .args([
                "run",
                "--http-address",
                "127.0.0.1:0",
                "--kubeconfig",
                "/nonexistent",
            ])
            .arg("--database")
            .arg(&database)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("error:") && stderr.contains(&*database.to_string_lossy()),
            "{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// `eru-operator schedule` on the DST cases: each wall-clock time once, none lost.
#[test]
fn schedule_cli_runs_each_wall_clock_time_once_across_dst() {
    let slots = |expr: &str, tz: &str, after: &str| -> Vec<String> {
        let output = Command::new(env!("CARGO_BIN_EXE_eru-operator"))
            .args([
                "schedule",
                expr,
                "--time-zone",
                tz,
                "--after",
                after,
                "--count",
                "3",
            ])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(String::from)
            .collect()
    };
    assert_eq!(
        slots("0 1,13 * * *", "America/New_York", "2026-11-01T00:00:00Z"),
        [
            "2026-11-01T05:00:00Z",
            "2026-11-01T18:00:00Z",
            "2026-11-02T06:00:00Z"
        ],
        "01:00 once on the fall-back day"
    );
    assert_eq!(
        slots("30 2,14 * * *", "America/New_York", "2027-03-14T00:00:00Z"),
        [
            "2027-03-14T07:00:00Z",
            "2027-03-14T18:30:00Z",
            "2027-03-15T06:30:00Z"
        ],
        "02:30 runs at 03:00 EDT on the spring-forward day"
    );
    assert_eq!(
        slots("15 2,3 * * *", "Europe/Berlin", "2027-03-28T00:00:00Z"),
        [
            "2027-03-28T01:00:00Z",
            "2027-03-28T01:15:00Z",
            "2027-03-29T00:15:00Z"
        ],
        "02:15 runs at 03:00 CEST"
    );
}
