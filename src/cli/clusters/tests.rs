//! Unit tests of the audit across clusters: its verdict, exit status and texts.

use chrono::{TimeZone, Utc};

use super::*;
use crate::journal::AuditRows;

/// An audit of no Eru (accounted), or one whose verdict says a slot has no record.
fn audit(accounted: bool) -> Audit {
    let at = |h| Utc.with_ymd_and_hms(2026, 11, 22, h, 0, 0).unwrap();
    let mut a = crate::history::audit::audit(AuditRows::default(), None, (at(0), at(1)), at(2), &[], None);
    if !accounted {
        a.verdict.accounted = false;
        a.verdict.unaccounted = 1;
        a.verdict.slots = 4;
        a.verdict.summary = "1 slot without a record: 2026-11-22T00:30:00Z".into();
    }
    a
}

fn cluster(name: &str, audit: Result<Audit, String>) -> ClusterAudit {
    ClusterAudit::new(name.into(), format!("https://{name}:8443"), audit)
}

#[test]
fn every_cluster_accounted_is_exit_0() {
    let all = Clusters::new(
        vec![cluster("a", Ok(audit(true))), cluster("b", Ok(audit(true)))],
        vec![],
    );
    assert!(all.accounted);
    assert_eq!(all.exit(), 0);
    assert!(
        all.summary
            .ends_with("every slot of every cluster accounted exactly once"),
        "{}",
        all.summary
    );
}

#[test]
fn a_cluster_not_accounted_is_named_and_exit_3() {
    let all = Clusters::new(
        vec![cluster("a", Ok(audit(true))), cluster("b", Ok(audit(false)))],
        vec![],
    );
    assert!(!all.accounted);
    assert_eq!(all.exit(), 3);
    assert!(
        all.summary.contains("1 without a record") && all.summary.contains("exactly once in b"),
        "{}",
        all.summary
    );
    let table = all.table();
    let b = table
        .split("== cluster b (https://b:8443)\n")
        .nth(1)
        .expect("b's section");
    assert!(b.contains("2026-11-22T00:30:00Z"), "{table}");
    assert!(
        table.trim_end().ends_with(&format!("verdict: {}", all.summary)),
        "{table}"
    );
}

#[test]
fn a_cluster_that_cannot_be_read_is_its_own_finding_and_exit_1() {
    let all = Clusters::new(
        vec![
            cluster("a", Ok(audit(false))),
            cluster("c", Err("https://c:8443/audit: connection refused".into())),
        ],
        vec![],
    );
    assert_eq!(all.exit(), 1, "an unread cluster outranks one read and failing");
    assert!(all.summary.contains("could not be read: c"), "{}", all.summary);
    let markdown = all.markdown();
    assert!(
        markdown.contains(
            "## Cluster c (https://c:8443)\n\ncould not be read: https://c:8443/audit: connection refused"
        ),
        "{markdown}"
    );
    let json = serde_json::to_value(&all).unwrap();
    assert_eq!(json["clusters"][1]["cluster"], "c");
    assert_eq!(json["clusters"][1]["accounted"], serde_json::Value::Null);
    assert_eq!(json["clusters"][0]["audit"]["verdict"]["unaccounted"], 1);
}

#[test]
fn contexts_not_audited_are_named_and_change_no_exit() {
    let all = Clusters::new(
        vec![cluster("a", Ok(audit(true)))],
        vec!["kind-dev".into(), "minikube".into()],
    );
    assert!(all.accounted);
    assert_eq!(all.exit(), 0);
    assert!(
        all.summary.ends_with(
            "accounted exactly once; not audited (their contexts name no operator): kind-dev, minikube"
        ),
        "{}",
        all.summary
    );
    assert!(
        all.table()
            .contains("not audited (their contexts name no operator): kind-dev, minikube")
    );
    let json = serde_json::to_value(&all).unwrap();
    assert_eq!(json["not_audited"], serde_json::json!(["kind-dev", "minikube"]));
}
