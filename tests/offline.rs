//! The offline commands on a journal copy, as an SRE runs them on a backup: `eru-operator audit`
//! and every `history` listing leave the file byte-identical and create no file beside it (no
//! `-wal`, `-shm` or lock), read what the operator wrote, and take the CLI's common flags
//! (`-o`, `-n`, `--since 48h`; `--format` as before). A journal of another schema version is
//! refused naming both. No cluster needed.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use chrono::{DateTime, Duration, DurationRound, Utc};
use eru_operator::{
    journal::{Entry, Journal, NewEpoch, NewSlot, ObjectKey, SlotResult},
    vocab::Reason,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Erus of the journal, each with a slot every hour.
const ERUS: usize = 3;
const HOURS: i64 = 30;

fn object(i: usize) -> ObjectKey {
    ObjectKey {
        kind: "Eru",
        namespace: format!("team-{}", i % 2),
        name: format!("svc-{i}"),
        uid: format!("uid-{i}"),
    }
}

/// A journal as an operator leaves it when it stops: `ERUS` Erus with a slot every hour for
/// `HOURS` hours up to `end`, one in five skipped, the rest fired; closed, so no `-wal` is left.
async fn journal(path: &Path, end: DateTime<Utc>) {
    let journal = Journal::open(path).await.unwrap();
    let start = end - Duration::hours(HOURS);
    journal
        .start_run("test", "offline", start - Duration::hours(1))
        .await
        .unwrap();
    let mut entry = Entry::default();
    for i in 0..ERUS {
        entry.epochs.push(NewEpoch {
            uid: object(i).uid,
            generation: 1,
            effective_from: start + Duration::minutes(30),
            observed_at: start,
            spec: json!({"schedule": "0 * * * *", "startingDeadlineSeconds": 300, "target": format!("svc-{i}")}),
        });
        for h in 1..=HOURS {
            let slot = start + Duration::hours(h);
            let o = object(i);
            let (result, reason) = if h % 5 == 0 {
                (SlotResult::Skipped, Reason::TargetPaused)
            } else {
                (SlotResult::Fired, Reason::Scheduled)
            };
            entry.slots.push(NewSlot {
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
    }
    journal.append(&entry).await.unwrap();
    journal.heartbeat(1, end).await.unwrap();
    journal.close().await;
}

fn cli(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_eru-operator"))
        .args(args)
        .env_remove("ERU_DATABASE")
        .env_remove("ERU_SERVER")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn sha256(path: &Path) -> String {
    format!("{:x}", Sha256::digest(std::fs::read(path).unwrap()))
}

#[tokio::test]
async fn an_offline_audit_of_a_copy_leaves_it_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    // the last slot an hour ago: `--since 48h` covers every slot, `--until` half an hour after it
    let end = Utc::now().duration_trunc(Duration::hours(1)).unwrap() - Duration::hours(1);
    journal(&dir.path().join("operator.db"), end).await;
    // the copy an SRE audits: `kubectl cp` of a stopped operator's volume
    let copies = dir.path().join("backup");
    std::fs::create_dir(&copies).unwrap();
    let copy: PathBuf = copies.join("eru.db");
    std::fs::copy(dir.path().join("operator.db"), &copy).unwrap();
    let db = copy.to_str().unwrap();
    let before = sha256(&copy);
    let until = (end + Duration::minutes(30)).to_rfc3339();
    let window = ["--since", "48h", "--until", until.as_str()];

    let (code, out, err) = cli(&[&["audit", "--database", db, "-o", "json"][..], &window].concat());
    assert_eq!(code, 0, "{out}{err}");
    let audit: Value = serde_json::from_str(&out).unwrap();
    let verdict = &audit["verdict"];
    assert_eq!(verdict["accounted"], true, "{verdict}");
    assert_eq!(verdict["erus"], ERUS, "{verdict}");
    assert_eq!(verdict["slots"], ERUS as i64 * HOURS, "{verdict}");
    assert_eq!(verdict["fired"], ERUS as i64 * (HOURS - HOURS / 5), "{verdict}");
    assert_eq!(verdict["not_restarted"], ERUS as i64 * (HOURS / 5), "{verdict}");
    eprintln!("verdict: {}", verdict["summary"]);
    // `--format` still works; -n narrows to one namespace
    let (code, markdown, err) =
        cli(&[&["audit", "--database", db, "--format", "markdown"][..], &window].concat());
    assert_eq!(code, 0, "{err}");
    assert!(markdown.contains("| team-0/svc-0 |"), "{markdown}");
    let (code, table, err) = cli(&[&["audit", "--database", db, "-n", "team-1"][..], &window].concat());
    assert_eq!(code, 0, "{err}");
    assert!(
        table.contains("team-1/svc-1") && !table.contains("team-0/"),
        "{table}"
    );
    for listing in ["restarts", "missed", "slots", "transitions"] {
        let (code, out, err) = cli(&[
            "history",
            listing,
            "--database",
            db,
            "-o",
            "json",
            "--since",
            "2d",
        ]);
        assert_eq!(code, 0, "{listing}: {err}");
        let page: Value = serde_json::from_str(&out).unwrap();
        assert!(page["items"].is_array(), "{listing}: {page}");
    }
    let (_, out, _) = cli(&[
        "history",
        "missed",
        "--database",
        db,
        "-o",
        "json",
        "-n",
        "team-0",
        "--limit",
        "1000",
    ]);
    let missed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        missed["items"].as_array().unwrap().len(),
        (HOURS / 5) as usize * 2,
        "svc-0 and svc-2 are in team-0"
    );

    assert_eq!(sha256(&copy), before, "the copy is byte-identical");
    assert_eq!(
        files(&copies),
        ["eru.db"],
        "no -wal, -shm or lock file was created"
    );

    // bad input: exit 2 with the API's own words
    let (code, _, err) = cli(&["audit", "--database", db, "--since", "yesterday"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("neither a duration"), "{err}");
    let (code, _, err) = cli(&["history", "--database", db, "-n", "Team_0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("namespace"), "{err}");
    // a journal that is not there is not created
    let missing = copies.join("missing.db");
    let (code, _, err) = cli(&["audit", "--database", missing.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("does not exist"), "{err}");
    assert_eq!(files(&copies), ["eru.db"]);

    // a journal a newer release migrated: refused, naming both versions, not touched
    let pool = sqlx::SqlitePool::connect_with(sqlx::sqlite::SqliteConnectOptions::new().filename(&copy))
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES (9001, 'from the future', TRUE, X'00', 0)",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let newer = sha256(&copy);
    let (code, _, err) = cli(&["audit", "--database", db]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("its schema is at version 9001, newer than this eru-operator")
            && err.contains(&format!("eru-operator {}'s ", env!("CARGO_PKG_VERSION"))),
        "{err}"
    );
    eprintln!("{}", err.trim());
    assert_eq!(sha256(&copy), newer);
}

/// `audit --all-contexts` refuses what does not go with it before asking anyone (exit 2), takes
/// the environment's ERU_SERVER, ERU_TOKEN and ERU_DATABASE as left aside, and reports a context
/// whose operator cannot be reached as that cluster's finding (exit 1), not a bad argument.
#[test]
fn all_contexts_refuses_what_does_not_go_with_it_and_leaves_the_environment_aside() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("config");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\n\
         clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n\
         users: [{name: u, user: {token: t}}]\n\
         contexts:\n\
         - {name: down, context: {cluster: c, user: u, extensions: [{name: eru.mtsre.meitu.com, extension: {server: 'https://127.0.0.1:1'}}]}}\n\
         - {name: kind, context: {cluster: c, user: u}}\n",
    )
    .unwrap();
    let kubeconfig = kubeconfig.to_str().unwrap();
    let all = ["audit", "--all-contexts", "--kubeconfig", kubeconfig];
    for (extra, says) in [
        (&["--server", "https://x:1"][..], "--server with --all-contexts"),
        (&["--token", "t"][..], "--token with --all-contexts"),
        (&["--context", "down"][..], "cannot be used with"),
        (&["--tls-server-name", "x"][..], "cannot be used with"),
        (
            &["--database", "eru.db"][..],
            "--database and --blackouts-file do not apply",
        ),
    ] {
        let (code, _, err) = cli(&[&all[..], extra].concat());
        assert_eq!(code, 2, "{extra:?}: {err}");
        assert!(err.contains(says), "{extra:?}: {err}");
    }
    // --kubeconfig asks for --server or --all-contexts: another flag does not stand in for them
    let (code, _, err) = cli(&["audit", "--kubeconfig", kubeconfig, "--since", "1h"]);
    assert_eq!(code, 2, "{err}");
    // the environment's server, token and journal are left aside; the unreachable context is
    // named, the context without an operator listed
    let out = Command::new(env!("CARGO_BIN_EXE_eru-operator"))
        .args(all)
        .env("ERU_SERVER", "https://elsewhere:1")
        .env("ERU_TOKEN", "not-this-one")
        .env("ERU_DATABASE", "/nonexistent/eru.db")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("== cluster down (https://127.0.0.1:1)\ncould not be read: "),
        "{stdout}"
    );
    assert!(
        stdout.contains("not audited (their contexts name no operator): kind"),
        "{stdout}"
    );
    // no context naming its operator: exit 2, saying what to add
    let none = dir.path().join("none");
    std::fs::write(
        &none,
        "apiVersion: v1\nkind: Config\ncontexts: [{name: kind, context: {cluster: c}}]\n",
    )
    .unwrap();
    let (code, _, err) = cli(&["audit", "--all-contexts", "--kubeconfig", none.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no context of the kubeconfig names its operator (contexts: kind)"),
        "{err}"
    );
}
