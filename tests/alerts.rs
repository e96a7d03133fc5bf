//! Alert rules and dashboard, without a cluster: promtool checks and unit-tests the rules, the
//! PrometheusRule manifest carries exactly the same groups, and the dashboard's shape holds.
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

#[test]
fn dashboard_uses_a_datasource_variable_and_every_panel_queries() {
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(repo("dashboards/eru-operator.json")).unwrap())
            .unwrap();
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    assert!(
        variables
            .iter()
            .any(|v| v["name"] == "datasource" && v["type"] == "datasource")
    );
    let panels = dashboard["panels"].as_array().unwrap();
    assert!(panels.len() >= 12);
    for panel in panels {
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{}", panel["title"]);
        let targets = panel["targets"].as_array().unwrap();
        assert!(
            !targets.is_empty()
                && targets
                    .iter()
                    .all(|t| t["expr"].as_str().is_some_and(|e| e.contains("eru_")))
        );
    }
}
