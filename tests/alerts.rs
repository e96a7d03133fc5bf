//! Alert rules and dashboard, without a cluster: promtool checks and unit-tests the rules, the
//! PrometheusRule manifest carries exactly the same groups, and the dashboard's shape holds (its
//! variables in every query, per-Eru panels readable at 1,000 Erus, runbook links).
//! (tests/observability.rs evaluates every expression against a real Prometheus.)

use std::{path::Path, process::Command};

fn repo(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn promtool(args: &[&str]) {
    let output = Command::new("promtool")
        .args(args)
        .current_dir(repo("deploy/alerts"))
        .output()
        .expect("promtool on PATH (Debian package prometheus; hack/deps.sh installs it)");
    assert!(
        output.status.success(),
        "promtool {}:\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn rules_pass_promtool() {
    promtool(&["check", "rules", "eru-operator.rules.yaml"]);
    promtool(&["test", "rules", "eru-operator.rules.test.yaml"]);
}

#[test]
fn prometheusrule_manifest_has_the_same_groups() {
    let read = |p: &str| -> serde_yaml::Value {
        serde_yaml::from_str(&std::fs::read_to_string(repo(p)).unwrap()).unwrap()
    };
    let rules = read("deploy/alerts/eru-operator.rules.yaml");
    let manifest = read("deploy/alerts/prometheusrule.yaml");
    assert_eq!(manifest["kind"], "PrometheusRule");
    assert_eq!(
        manifest["spec"]["groups"], rules["groups"],
        "regenerate with python3 hack/prometheusrule.py"
    );
}

/// The operator's own series, and an Eru's (labelled namespace and name).
const PER_ERU: [&str; 5] = [
    "eru_restarts_total",
    "eru_slots_total",
    "eru_next_fire_timestamp_seconds",
    "eru_rollout_started_timestamp_seconds",
    "eru_held_since_timestamp_seconds",
];

#[test]
fn dashboard_selects_its_variables_and_stays_readable_at_a_thousand_erus() {
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(repo("dashboards/eru-operator.json")).unwrap())
            .unwrap();
    let variables: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(variables, ["datasource", "job", "namespace", "eru"]);
    let runbooks = std::fs::read_to_string(repo("docs/runbooks.md")).unwrap();
    let mut exprs = Vec::new();
    let panels = dashboard["panels"].as_array().unwrap();
    for panel in panels.iter().filter(|p| p["type"] != "row") {
        let title = panel["title"].as_str().unwrap();
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{title}");
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{title}");
        for target in targets {
            let expr = target["expr"].as_str().unwrap();
            exprs.push(expr);
            assert!(expr.contains(r#"{job=~"$job""#), "{title}: {expr}");
            if PER_ERU.iter().any(|m| expr.contains(m)) {
                assert!(
                    expr.contains(r#"namespace=~"$namespace", name=~"$eru""#),
                    "{title}: a per-Eru series without the namespace and Eru variables: {expr}"
                );
                // at 1,000 Erus: a line per namespace at most, or a top-10 table
                let per_eru = expr.contains("name)") || expr.contains("name, ");
                assert!(
                    !per_eru || (panel["type"] == "table" && expr.contains("k(10,")),
                    "{title}: one series per Eru outside a top-10 table: {expr}"
                );
                assert!(
                    expr.contains(" by (") || expr.contains("count by"),
                    "{title}: per-Eru series not aggregated: {expr}"
                );
            }
        }
        for link in panel["links"].as_array().into_iter().flatten() {
            let anchor = link["url"].as_str().unwrap().rsplit_once('#').unwrap().1;
            assert!(
                runbooks
                    .lines()
                    .any(|l| l.strip_prefix("## ").is_some_and(|h| h.to_lowercase() == anchor)),
                "{title}: no runbook section #{anchor}"
            );
        }
    }
    // the operator itself: leader, journal up and write errors, CPU, memory
    for metric in [
        "eru_leader",
        "eru_journal_up",
        "eru_journal_write_errors_total",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
    ] {
        assert!(
            exprs.iter().any(|e| e.contains(metric)),
            "no panel reads {metric}"
        );
    }
    // and every alert's runbook is a panel's link
    let linked = panels
        .iter()
        .flat_map(|p| p["links"].as_array().cloned().unwrap_or_default())
        .filter_map(|l| l["url"].as_str().map(str::to_string))
        .collect::<Vec<_>>();
    for alert in [
        "erurestartfailed",
        "eruslotsmissed",
        "erurolloutstuck",
        "eruscheduleoverdue",
        "erujournalunwritable",
        "eruoperatordown",
        "erureconcileerrors",
        "eruslotheldlong",
    ] {
        assert!(
            linked.iter().any(|u| u.ends_with(&format!("#{alert}"))),
            "no panel links the runbook of {alert}"
        );
    }
}
