//! The HTTP API's contract, judged by tools nobody here wrote, against a live operator whose
//! journal holds restarts, a downtime and transitions:
//!
//! - Schemathesis (`hack/pytools.sh`) with all its checks, coverage and fuzzing phases, every
//!   endpoint of `/openapi.json` (including `/metrics`, `/healthz`, `/readyz`), once with a fixed
//!   seed and once with a random one (printed, to reproduce);
//! - a Python client generated from the same document by openapi-python-client, used without hand
//!   edits (`tests/contract/client_check.py`).

mod common;

use std::{
    path::Path,
    process::{Command, Output},
    time::Duration,
};

use common::{Operator, TestNamespace, client, get_json, repo, wait_for};
use kube::Client;
use serde_json::json;

/// Runs `hack/pytools.sh TOOL ARGS...` in `dir`; the combined output and whether it succeeded.
fn pytool(dir: &Path, args: &[&str]) -> (bool, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(repo().join("hack/pytools.sh"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("hack/pytools.sh runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr)
    );
    (status.success(), text)
}

async fn apply(client: &Client, ns: &str) {
    use k8s_openapi::api::apps::v1::Deployment;
    use kube::{Api, api::PostParams};
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            // every rollout's ReplicaSet is kept, so the ledger check can count them
            "revisionHistoryLimit": 1000,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}
            }
        }
    }))
    .unwrap();
    Api::<Deployment>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    // available before its Eru exists, so no slot finds it unhealthy (the ledger check expects
    // every slot restarted but the downtime's)
    common::eru::wait_ready(&Api::<Deployment>::namespaced(client.clone(), ns), "web", 1).await;
    let eru: eru_operator::eru::Eru = serde_json::from_value(json!({
        "apiVersion": "mtsre.meitu.com/v1", "kind": "Eru", "metadata": {"name": "web"},
        "spec": {"schedule": "*/2 * * * * *", "target": {"kind": "Deployment", "name": "web"}}
    }))
    .unwrap();
    Api::<eru_operator::eru::Eru>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &eru)
        .await
        .unwrap();
}

fn count(operator: &Operator, path: &str) -> usize {
    get_json(&operator.url(path))["items"]
        .as_array()
        .map_or(0, Vec::len)
}

#[tokio::test]
#[ignore = "needs a cluster (hack/test.sh) and the Python tools of hack/pytools.sh"]
async fn schemathesis_and_a_generated_client_agree_with_the_openapi_document() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "contract").await;
    let mut operator = Operator::start(&client, &ns.name, &[]).await;
    apply(&client, &ns.name).await;
    // A populated journal: succeeded restarts, then a downtime (operator_down records), then more.
    wait_for("4 restarts", Duration::from_secs(60), || async {
        (count(&operator, "/history?outcome=succeeded") >= 4).then_some(())
    })
    .await;
    operator.stop();
    let stopped = chrono::Utc::now();
    tokio::time::sleep(Duration::from_secs(7)).await;
    operator.restart().await;
    let restarted = chrono::Utc::now();
    wait_for(
        "downtime records and restarts after it",
        Duration::from_secs(60),
        || async {
            (count(&operator, "/missed?reason=operator_down") >= 1
                && count(&operator, "/history?outcome=succeeded") >= 6)
                .then_some(())
        },
    )
    .await;
    // the journal the contract is tried on keeps the promise: every slot so far one record, each
    // fired one rolled the Deployment once
    let erus = kube::Api::<eru_operator::eru::Eru>::namespaced(client.clone(), &ns.name);
    let born = common::eru::created(&erus, "web").await;
    let window = (born + chrono::Duration::seconds(1), chrono::Utc::now());
    common::ledger::check(
        &client,
        &ns.name,
        &operator,
        // the 7 s down: operator_down, but the newest slot, run at the start
        &common::ledger::Ledger::deployment(
            "web",
            "web",
            window,
            common::ledger::every(2, window.0, window.1),
        )
        .require(
            stopped,
            restarted + chrono::Duration::seconds(2),
            "operator_down",
            common::ledger::ON_SCHEDULE,
        ),
    )
    .await;

    let work = tempfile::tempdir().unwrap();
    // /audit refuses a window whose `since` is not before `until`, or that spans more than 31
    // days: a rule between two parameters, which a schema cannot state. For that operation
    // only, a schema-valid request may get the documented 400 (every other check still applies).
    std::fs::write(
        work.path().join("schemathesis.toml"),
        // a request made invalid by its length is rejected with the documented 414
        "[checks.negative_data_rejection]\n\
         expected-statuses = [\"400\", \"401\", \"403\", \"404\", \"405\", \"406\", \"409\", \"414\", \
         \"415\", \"422\", \"428\", \"429\", \"503\"]\n\
         [[operations]]\ninclude-path = \"/audit\"\n\
         checks.positive_data_acceptance.expected-statuses = [200, 400]\n",
    )
    .unwrap();
    let document = operator.url("/openapi.json");
    // ERU_CONTRACT_SEED replays a seed a run printed
    let random_seed = std::env::var("ERU_CONTRACT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
                % 1_000_000_007
        });
    for seed in [1, random_seed] {
        let seed = seed.to_string();
        let (ok, output) = pytool(
            work.path(),
            &[
                "schemathesis",
                "run",
                &document,
                "--checks",
                "all",
                "--phases",
                "coverage,fuzzing",
                "--seed",
                &seed,
                "--max-examples",
                "200",
                "--generation-database",
                "none",
                "--no-color",
            ],
        );
        let summary: Vec<&str> = output
            .lines()
            .filter(|l| l.contains("generated") || l.contains("issues found") || l.contains("Seed"))
            .collect();
        eprintln!("schemathesis seed {seed}: {}", summary.join(" | "));
        assert!(ok, "schemathesis (seed {seed}) found problems:\n{output}");
        assert!(
            output.contains("No issues found"),
            "schemathesis (seed {seed}) did not report a clean run:\n{output}"
        );
    }

    let spec = work.path().join("openapi.json");
    std::fs::write(&spec, get_json(&document).to_string()).unwrap();
    let package = work.path().join("generated/eru_client");
    let config = repo().join("tests/contract/client-config.yaml");
    let (ok, output) = pytool(
        work.path(),
        &[
            "openapi-python-client",
            "generate",
            "--path",
            spec.to_str().unwrap(),
            "--output-path",
            package.to_str().unwrap(),
            "--meta",
            "none",
            "--config",
            config.to_str().unwrap(),
        ],
    );
    assert!(ok, "openapi-python-client generate failed:\n{output}");
    let check = repo().join("tests/contract/client_check.py");
    let (ok, output) = pytool(
        work.path(),
        &[
            "python",
            check.to_str().unwrap(),
            work.path().join("generated").to_str().unwrap(),
            &operator.url(""),
            &ns.name,
        ],
    );
    assert!(ok, "the generated client failed:\n{output}");
    eprintln!("{}", output.trim());
}
