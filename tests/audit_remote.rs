//! `eru-operator audit|history --server` against an operator running `--http-auth kubernetes`
//! with its self-signed certificate, as an SRE reaches an installed one: the certificate taken
//! with `openssl s_client` (the docs' recipe) as `--cacert`, real ServiceAccount tokens
//! (TokenRequest) given with `--token` or through a kubeconfig, and the binary called as the
//! kubectl plugin `kubectl eru` through a `kubectl-eru` link on PATH.
//!
//! - the same verdict and per-Eru counts as `GET /audit` over the same window, exit 0, and the
//!   same items as `GET /history`;
//! - a slot record forged away from the journal: `GET /audit` says so and the CLI exits 3,
//!   naming the slot;
//! - one audit across two clusters (two operators, each with a journal of its own, stand in for
//!   two clusters' on this one control plane): a verdict per cluster and the union, the forged one
//!   named with its slot, exit 3; a cluster that cannot be reached named, exit 1;
//! - `--tls-server-name` checks the certificate against the Service's name, not localhost;
//! - a token without the grant: 403 with the operator's reason and a hint, exit 1; a
//!   namespace-scoped token without `-n`: 403 saying to name the namespace; no certificate to
//!   trust: a TLS error saying what to pass.

mod common;

use std::{path::Path, process::Command, time::Duration};

use chrono::{DateTime, SecondsFormat, Utc};
use common::{
    ClusterBindings, Operator, TestNamespace, client,
    eru::{create_eru, deployment, journal_sql, time, wait_ready},
    kubectl, wait_for,
};
use eru_operator::eru::Eru;
use k8s_openapi::api::apps::v1::Deployment;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::{Value, json};

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The CLI's exit status, standard output and standard error.
struct Run {
    code: i32,
    out: String,
    err: String,
}

/// `eru-operator ARGS`, with the environment's ERU_* and KUBECONFIG left out unless `env` sets them.
fn eru_operator(args: &[&str], env: &[(&str, &str)]) -> Run {
    run(Command::new(env!("CARGO_BIN_EXE_eru-operator")).args(args), env)
}

/// `kubectl eru ARGS`: kubectl finds the plugin as `kubectl-eru` on PATH (a link to the binary).
fn kubectl_eru(plugins: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let path = format!(
        "{}:{}",
        plugins.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    run(
        Command::new("kubectl").arg("eru").args(args).env("PATH", path),
        env,
    )
}

fn run(cmd: &mut Command, env: &[(&str, &str)]) -> Run {
    for var in ["ERU_DATABASE", "ERU_SERVER", "ERU_TOKEN", "ERU_CACERT"] {
        cmd.env_remove(var);
    }
    let out = cmd.envs(env.iter().copied()).output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        out: String::from_utf8_lossy(&out.stdout).into_owned(),
        err: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The certificate the operator at `host:port` serves, as `openssl s_client` shows it (PEM).
fn served_certificate(host: &str, port: u16) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect {host}:{port} -servername localhost </dev/null 2>/dev/null | openssl x509"
        ))
        .output()
        .unwrap();
    let pem = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        pem.contains("BEGIN CERTIFICATE"),
        "no certificate from {host}:{port}: {pem}"
    );
    pem
}

/// A token for `namespace/account` from the TokenRequest API.
fn token(namespace: &str, account: &str) -> String {
    kubectl(&["create", "token", account, "-n", namespace, "--duration", "1h"])
        .trim()
        .to_string()
}

/// What must agree between two audits of one closed window: the verdict, and each Eru's
/// accounting but its running counters (they count the whole journal, which grows meanwhile).
fn accounting(audit: &Value) -> Value {
    let erus: Vec<Value> = (audit["erus"].as_array().cloned().unwrap_or_default())
        .into_iter()
        .map(|mut e| {
            e.as_object_mut().unwrap().remove("counters");
            e
        })
        .collect();
    json!({"since": audit["since"], "until": audit["until"], "verdict": audit["verdict"], "erus": erus})
}

#[tokio::test]
#[ignore = "needs a cluster: hack/test.sh"]
async fn the_cli_audits_a_running_operator_as_get_audit_does() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "remote").await;
    let ids = TestNamespace::create(&client, "remote-ids").await;
    let mut operator = Operator::start(&client, &ns.name, &["--http-auth", "kubernetes"]).await;
    let server = operator.url("");
    assert!(server.starts_with("https://127.0.0.1:"), "{server}");

    // who asks: an auditor (the built-in view, cluster-wide: it aggregates eru-view), a team
    // that may read its namespace only (deploy/examples/history-reader.yaml), and nobody
    for account in ["auditor", "team", "nobody"] {
        kubectl(&["create", "serviceaccount", account, "-n", &ids.name]);
    }
    let bindings = ClusterBindings(vec![format!("{}-auditor", ids.name)]);
    kubectl(&[
        "create",
        "clusterrolebinding",
        &bindings.0[0],
        "--clusterrole",
        "view",
        "--serviceaccount",
        &format!("{}:auditor", ids.name),
    ]);
    kubectl(&[
        "create",
        "rolebinding",
        "team-history",
        "-n",
        &ns.name,
        "--clusterrole",
        "eru-history-reader",
        "--serviceaccount",
        &format!("{}:team", ids.name),
    ]);
    let [auditor, team, nobody] = ["auditor", "team", "nobody"].map(|a| token(&ids.name, a));
    operator.token = Some(auditor.clone());
    // RBAC (and view's aggregation) applies asynchronously: wait until the auditor reads
    wait_for(
        "the auditor may read the audit",
        Duration::from_secs(60),
        || async { (operator.get("/audit").0 == 200).then_some(()) },
    )
    .await;

    // an Eru restarting every 5 s
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    deployment(&client, &ns.name, "web", 1, json!({})).await;
    wait_ready(&deployments, "web", 1).await;
    let since = Utc::now() - chrono::Duration::seconds(1);
    create_eru(
        &client,
        &ns.name,
        "web",
        json!({"schedule": "*/5 * * * * *", "startingDeadlineSeconds": 3,
               "target": {"kind": "Deployment", "name": "web"}}),
    )
    .await
    .unwrap();
    // a second operator with a journal of its own (another cluster's, as the audit across
    // clusters reads it), restarting an Eru of its own namespace
    let other = TestNamespace::create(&client, "remote-other").await;
    let other_operator = Operator::start(&client, &other.name, &["--http-auth", "kubernetes"]).await;
    let other_deployments: Api<Deployment> = Api::namespaced(client.clone(), &other.name);
    deployment(&client, &other.name, "api", 1, json!({})).await;
    wait_ready(&other_deployments, "api", 1).await;
    create_eru(
        &client,
        &other.name,
        "api",
        json!({"schedule": "*/5 * * * * *", "startingDeadlineSeconds": 3,
               "target": {"kind": "Deployment", "name": "api"}}),
    )
    .await
    .unwrap();
    let fired = wait_for("web: three restarts", Duration::from_secs(90), || async {
        let (status, body) = operator.get("/slots?name=web&result=fired");
        assert_eq!(status, 200, "{body}");
        let page: Value = serde_json::from_str(&body).unwrap();
        let fired = page["items"].as_array().cloned().unwrap_or_default();
        (fired.len() >= 3).then_some(fired)
    })
    .await;
    // a closed window in the past: up to the second newest restart's slot, included
    let until = time(&fired[1]["slot"]) + chrono::Duration::seconds(1);
    let window = format!("since={}&until={}", rfc3339(since), rfc3339(until));

    // the certificate to trust, taken as docs/api.md says; a kubectl-eru link on PATH
    let dir = tempfile::tempdir().unwrap();
    let cacert = dir.path().join("eru-operator.crt");
    std::fs::write(&cacert, served_certificate("127.0.0.1", operator.port)).unwrap();
    let cacert = cacert.to_str().unwrap().to_string();
    let plugins = dir.path().join("bin");
    std::fs::create_dir(&plugins).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_eru-operator"), plugins.join("kubectl-eru")).unwrap();

    // the audit tells the restart in flight now, which every 5 s changes: suspend, and compare
    // once the last rollout ended, or two reads a moment apart differ
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    erus.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": true}})),
    )
    .await
    .unwrap();
    let api = wait_for("the window's rollouts ended", Duration::from_secs(60), || async {
        let (status, body) = operator.get(&format!("/audit?namespace={}&{window}", ns.name));
        assert_eq!(status, 200, "{body}");
        let api: Value = serde_json::from_str(&body).unwrap();
        let eru = &api["erus"][0];
        (eru["in_flight"].is_null() && eru["fired"]["in_progress"] == 0).then_some(api)
    })
    .await;
    assert_eq!(api["verdict"]["accounted"], true, "{}", api["verdict"]);
    assert_eq!(api["erus"][0]["counters"]["agree"], true, "{}", api["erus"][0]);
    assert!(
        api["verdict"]["fired"].as_i64().unwrap() >= 2,
        "{}",
        api["verdict"]
    );
    let remote = [
        "audit",
        "--server",
        &server,
        "--cacert",
        &cacert,
        "-n",
        &ns.name,
        "--since",
        &rfc3339(since),
        "--until",
        &rfc3339(until),
    ];
    let cli = eru_operator(&[&remote[..], &["--token", &auditor, "-o", "json"]].concat(), &[]);
    assert_eq!(cli.code, 0, "{}{}", cli.out, cli.err);
    let cli_audit: Value = serde_json::from_str(&cli.out).unwrap();
    assert_eq!(
        accounting(&cli_audit),
        accounting(&api),
        "the CLI and GET /audit: the same verdict and counts"
    );
    eprintln!("verdict: {}", cli_audit["verdict"]["summary"]);

    // as a kubectl plugin, the token from a kubeconfig's user: the table, exit 0
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:1'}}}}]\n\
             users: [{{name: auditor, user: {{token: '{auditor}'}}}}]\n\
             contexts: [{{name: auditor, context: {{cluster: c, user: auditor}}}}]\ncurrent-context: auditor\n"
        ),
    )
    .unwrap();
    let kubeconfig = kubeconfig.to_str().unwrap();
    let plugin = kubectl_eru(&plugins, &remote[..], &[("KUBECONFIG", kubeconfig)]);
    assert_eq!(plugin.code, 0, "{}{}", plugin.out, plugin.err);
    assert!(plugin.out.contains(&format!("{}/web", ns.name)), "{}", plugin.out);
    assert!(
        plugin.out.contains(&format!(
            "verdict: {}",
            api["verdict"]["summary"].as_str().unwrap()
        )),
        "{}",
        plugin.out
    );
    // a certificate checked against another name than --server's host (a certificate of the
    // Service's name, reached on localhost): the self-signed one names eru-operator.eru-system.svc
    let port = operator.port.to_string();
    let by_name = [
        "audit",
        "--server",
        &format!("https://localhost:{port}"),
        "--tls-server-name",
        "eru-operator.eru-system.svc",
        "--cacert",
        &cacert,
        "-n",
        &ns.name,
        "--since",
        &rfc3339(since),
        "--until",
        &rfc3339(until),
        "--token",
        &auditor,
        "-o",
        "json",
    ];
    let named = eru_operator(&by_name, &[]);
    assert_eq!(named.code, 0, "{}", named.err);
    let named: Value = serde_json::from_str(&named.out).unwrap();
    assert_eq!(accounting(&named), accounting(&api));
    let help = kubectl_eru(&plugins, &["audit", "--help"], &[]);
    assert!(help.out.contains("Usage: kubectl eru audit"), "{}", help.out);

    // history: the same items as GET /history
    let (_, body) = operator.get(&format!("/history?namespace={}&{window}", ns.name));
    let listed: Value = serde_json::from_str(&body).unwrap();
    let history = eru_operator(
        &[
            "history",
            "--server",
            &server,
            "--cacert",
            &cacert,
            "--kubeconfig",
            kubeconfig,
            "-n",
            &ns.name,
            "--since",
            &rfc3339(since),
            "--until",
            &rfc3339(until),
            "-o",
            "json",
        ],
        &[],
    );
    assert_eq!(history.code, 0, "{}", history.err);
    let page: Value = serde_json::from_str(&history.out).unwrap();
    assert_eq!(page, listed, "history --server and GET /history");

    // refusals: no grant (403), a namespace-scoped grant without -n (403), a bad token (401),
    // a certificate nobody said to trust
    let refused = eru_operator(&[&remote[..], &["--token", &nobody]].concat(), &[]);
    assert_eq!(refused.code, 1, "{}", refused.err);
    assert!(
        refused.err.contains("answered 403 Forbidden")
            && refused
                .err
                .contains(&format!("may not read Eru history in namespace {}", ns.name))
            && refused.err.contains("eru-history-reader"),
        "{}",
        refused.err
    );
    eprintln!("{}", refused.err.trim());
    let team_remote: Vec<&str> = remote
        .iter()
        .copied()
        .filter(|a| *a != "-n" && *a != ns.name)
        .collect();
    let scoped = eru_operator(&[&team_remote[..], &["--token", &team]].concat(), &[]);
    assert_eq!(scoped.code, 1, "{}", scoped.err);
    assert!(
        scoped.err.contains("cluster-wide") && scoped.err.contains("-n"),
        "{}",
        scoped.err
    );
    let own = eru_operator(&[&remote[..], &["--token", &team, "-o", "json"]].concat(), &[]);
    assert_eq!(own.code, 0, "the team reads its own namespace: {}", own.err);
    let garbage = eru_operator(&[&remote[..], &["--token", "garbage"]].concat(), &[]);
    assert_eq!(garbage.code, 1);
    assert!(garbage.err.contains("answered 401"), "{}", garbage.err);
    let untrusted = eru_operator(
        &["audit", "--server", &server, "--token", &auditor, "-n", &ns.name],
        &[],
    );
    assert_eq!(untrusted.code, 1, "{}", untrusted.err);
    assert!(untrusted.err.contains("--cacert"), "{}", untrusted.err);

    // a fired slot's record gone from the journal (the newest in the window): the operator's
    // audit says so, and the CLI exits 3 naming the slot
    let gone = fired[1]["slot"].as_str().unwrap().to_string();
    journal_sql(
        &operator,
        &format!(
            "DELETE FROM slots WHERE namespace = '{}' AND name = 'web' AND slot = '{gone}'",
            ns.name
        ),
    );
    let (_, body) = operator.get(&format!("/audit?namespace={}&{window}", ns.name));
    let forged: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(forged["verdict"]["accounted"], false, "{}", forged["verdict"]);
    assert_eq!(forged["verdict"]["unaccounted"], 1, "{}", forged["verdict"]);
    let cli = eru_operator(&[&remote[..], &["--token", &auditor]].concat(), &[]);
    assert_eq!(cli.code, 3, "{}{}", cli.out, cli.err);
    assert!(
        cli.out
            .contains(&format!("{}/web: 1 without a record: {gone}", ns.name)),
        "the table names the slot: {}",
        cli.out
    );
    let json = eru_operator(&[&remote[..], &["--token", &auditor, "-o", "json"]].concat(), &[]);
    assert_eq!(json.code, 3);
    assert_eq!(
        accounting(&serde_json::from_str(&json.out).unwrap())["verdict"],
        forged["verdict"]
    );

    // one audit across two clusters (two operators, each with its own journal): a verdict per
    // cluster, the forged one named with its slot, then the union; exit 3
    let other_erus: Api<Eru> = Api::namespaced(client.clone(), &other.name);
    other_erus
        .patch(
            "api",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": true}})),
        )
        .await
        .unwrap();
    let mut other_operator = other_operator;
    other_operator.token = Some(auditor.clone());
    wait_for(
        "the other cluster's window accounted",
        Duration::from_secs(60),
        || async {
            let (status, body) = other_operator.get(&format!("/audit?{window}"));
            let audit: Value = serde_json::from_str(&body).ok()?;
            (status == 200
                && audit["verdict"]["accounted"] == true
                && audit["verdict"]["fired"].as_i64()? >= 1)
                .then_some(())
        },
    )
    .await;
    let other_server = other_operator.url("");
    let bundle = dir.path().join("both.crt");
    std::fs::write(
        &bundle,
        served_certificate("127.0.0.1", operator.port)
            + &served_certificate("127.0.0.1", other_operator.port),
    )
    .unwrap();
    let bundle = bundle.to_str().unwrap().to_string();
    let across = |servers: &[&str], output: &str| {
        let mut args = vec!["audit"];
        for s in servers {
            args.extend(["--server", s]);
        }
        let (since, until) = (rfc3339(since), rfc3339(until));
        let window = [
            "--since", &since, "--until", &until, "--cacert", &bundle, "--token", &auditor,
        ];
        eru_operator(&[&args[..], &window[..], &["-o", output]].concat(), &[])
    };
    let both = across(&[&server, &other_server], "table");
    assert_eq!(both.code, 3, "{}{}", both.out, both.err);
    let ours = (both
        .out
        .split(&format!("== cluster {server} ({server})\n"))
        .nth(1))
    .and_then(|rest| rest.split("== cluster ").next())
    .unwrap_or_else(|| panic!("no section of {server}: {}", both.out));
    assert!(
        ours.contains(&format!("{}/web: 1 without a record: {gone}", ns.name)),
        "{}",
        both.out
    );
    assert!(
        both.out
            .contains(&format!("== cluster {other_server} ({other_server})")),
        "{}",
        both.out
    );
    assert!(
        both.out
            .contains(&format!("not accounted exactly once in {server}")),
        "the union names the cluster: {}",
        both.out
    );
    let json = across(&[&server, &other_server], "json");
    assert_eq!(json.code, 3);
    let json: Value = serde_json::from_str(&json.out).unwrap();
    assert_eq!(json["clusters"][0]["server"], server.as_str());
    assert_eq!(json["clusters"][0]["accounted"], false);
    assert_eq!(json["clusters"][1]["accounted"], true, "{}", json["clusters"][1]);
    assert_eq!(json["accounted"], false);
    let markdown = across(&[&server, &other_server], "markdown");
    assert!(
        markdown.out.contains(&format!("## Cluster {other_server}")),
        "{}",
        markdown.out
    );
    // a cluster that cannot be reached is named, and the exit is 1
    let unreachable = "https://127.0.0.1:1";
    let down = across(&[&other_server, unreachable], "table");
    assert_eq!(down.code, 1, "{}{}", down.out, down.err);
    let section = down
        .out
        .split(&format!("== cluster {unreachable} ({unreachable})\n"))
        .nth(1)
        .unwrap_or_default();
    assert!(section.starts_with("could not be read: "), "{}", down.out);
    assert!(
        down.out.contains(&format!("could not be read: {unreachable}")),
        "{}",
        down.out
    );
    drop(bindings);
}
