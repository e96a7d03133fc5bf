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
//! - one audit across two clusters (a second control plane, `hack/cluster.sh up --name
//!   audit-second`, with an operator of its own), each asked with a token of its own cluster: by
//!   `--all-contexts` (each context naming its operator in a kubeconfig extension; a context that
//!   names none listed as not audited) and by `--server`/`--context` pairs; a verdict per cluster
//!   and the union, the forged one named with its slot, exit 3; a cluster that cannot be reached
//!   named, exit 1;
//! - `--tls-server-name` checks the certificate against the Service's name, not localhost;
//! - a token without the grant: 403 with the operator's reason and a hint, exit 1; a
//!   namespace-scoped token without `-n`: 403 saying to name the namespace; no certificate to
//!   trust: a TLS error saying what to pass.

mod common;

use std::{path::Path, process::Command, time::Duration};

use chrono::{DateTime, SecondsFormat, Utc};
use common::{
    ClusterBindings, Operator, OtherCluster, TestNamespace, client,
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
/// accounting but its running counters (they count the whole journal, which grows meanwhile) and
/// its cursor (`accounted_through`: a suspended Eru's slots are still recorded, every 5 s).
fn accounting(audit: &Value) -> Value {
    let erus: Vec<Value> = (audit["erus"].as_array().cloned().unwrap_or_default())
        .into_iter()
        .map(|mut e| {
            e.as_object_mut().unwrap().remove("counters");
            e.as_object_mut().unwrap().remove("accounted_through");
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

    // a second cluster (a control plane of its own), its operator restarting an Eru there
    // from before the window begins
    let second = OtherCluster::up("audit-second").await;
    let other = TestNamespace::create(&second.client, "remote-other").await;
    let other_operator = Operator::start_in(&second, &other.name, &["--http-auth", "kubernetes"]).await;
    let other_deployments: Api<Deployment> = Api::namespaced(second.client.clone(), &other.name);
    deployment(&second.client, &other.name, "api", 1, json!({})).await;
    wait_ready(&other_deployments, "api", 1).await;
    create_eru(
        &second.client,
        &other.name,
        "api",
        json!({"schedule": "*/5 * * * * *", "startingDeadlineSeconds": 3,
               "target": {"kind": "Deployment", "name": "api"}}),
    )
    .await
    .unwrap();

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

    // one audit across the two clusters, each asked with a token of its own cluster: a verdict
    // per cluster, the forged one named with its slot, then the union; exit 3
    let other_erus: Api<Eru> = Api::namespaced(second.client.clone(), &other.name);
    other_erus
        .patch(
            "api",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": true}})),
        )
        .await
        .unwrap();
    second.kubectl(&["create", "serviceaccount", "auditor", "-n", &other.name]);
    second.kubectl(&[
        "create",
        "clusterrolebinding",
        "auditor",
        "--clusterrole",
        "view",
        "--serviceaccount",
        &format!("{}:auditor", other.name),
    ]);
    let second_auditor = second
        .kubectl(&[
            "create",
            "token",
            "auditor",
            "-n",
            &other.name,
            "--duration",
            "1h",
        ])
        .trim()
        .to_string();
    let mut other_operator = other_operator;
    other_operator.token = Some(second_auditor.clone());
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
    // the first cluster's token is refused by the second's operator (TokenReview there)
    let mut crossed = Operator::remote(other_operator.port, &auditor);
    crossed.host = other_operator.host.clone();
    assert_eq!(crossed.get("/audit").0, 401, "a token of another cluster");
    let other_server = other_operator.url("");

    // a kubeconfig of both clusters, as an SRE keeps one: each context names its operator in an
    // eru.mtsre.meitu.com extension; a third context names none
    let kubeconfigs = tempfile::tempdir().unwrap();
    std::fs::write(
        kubeconfigs.path().join("two.crt"),
        served_certificate("127.0.0.1", other_operator.port),
    )
    .unwrap();
    let api_server = |path: Option<&Path>| {
        let config = match path {
            Some(p) => kube::config::Kubeconfig::read_from(p).unwrap(),
            None => kube::config::Kubeconfig::read().unwrap(),
        };
        let cluster = config.clusters[0].cluster.clone().unwrap();
        (cluster.server.unwrap(), cluster.certificate_authority.unwrap())
    };
    let (one_api, one_ca) = api_server(None);
    let (two_api, two_ca) = api_server(Some(&second.kubeconfig));
    let context = |name: &str, cluster: &str, operator: Option<Value>| {
        let mut context = json!({"cluster": cluster, "user": cluster});
        if let Some(extension) = operator {
            context["extensions"] = json!([{"name": "eru.mtsre.meitu.com", "extension": extension}]);
        }
        json!({"name": name, "context": context})
    };
    let kubeconfig = |contexts: Vec<Value>| {
        json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "one", "cluster": {"server": one_api, "certificate-authority": one_ca}},
                {"name": "two", "cluster": {"server": two_api, "certificate-authority": two_ca}},
            ],
            "users": [
                {"name": "one", "user": {"token": auditor}},
                {"name": "two", "user": {"token": second_auditor}},
            ],
            "contexts": contexts,
            "current-context": "kind-dev",
        })
        .to_string()
    };
    let both = kubeconfigs.path().join("config");
    std::fs::write(
        &both,
        kubeconfig(vec![
            // an absolute certificate-authority, and a relative one: next to the kubeconfig
            context(
                "one",
                "one",
                Some(json!({"server": server, "certificate-authority": cacert})),
            ),
            context("kind-dev", "one", None),
            context(
                "two",
                "two",
                Some(json!({"server": other_server, "certificate-authority": "two.crt"})),
            ),
        ]),
    )
    .unwrap();
    let both = both.to_str().unwrap().to_string();
    let (since_text, until_text) = (rfc3339(since), rfc3339(until));
    let across = |args: &[&str], output: &str| {
        let window = ["--since", &since_text, "--until", &until_text, "-o", output];
        eru_operator(&[&["audit"], args, &window[..]].concat(), &[])
    };
    let all_contexts = across(&["--all-contexts", "--kubeconfig", &both], "table");
    assert_eq!(all_contexts.code, 3, "{}{}", all_contexts.out, all_contexts.err);
    let section = |out: &str, heading: &str| {
        (out.split(heading).nth(1))
            .and_then(|rest| rest.split("== ").next())
            .unwrap_or_else(|| panic!("no section {heading:?}: {out}"))
            .to_string()
    };
    let ours = section(&all_contexts.out, &format!("== cluster one ({server})\n"));
    assert!(
        ours.contains(&format!("{}/web: 1 without a record: {gone}", ns.name)),
        "{}",
        all_contexts.out
    );
    let theirs = section(&all_contexts.out, &format!("== cluster two ({other_server})\n"));
    assert!(
        theirs.contains(&format!("{}/api", other.name)),
        "{}",
        all_contexts.out
    );
    assert!(!theirs.contains("without a record"), "{}", all_contexts.out);
    for says in [
        "not accounted exactly once in one",
        "not audited (their contexts name no operator): kind-dev",
    ] {
        assert!(all_contexts.out.contains(says), "{says}: {}", all_contexts.out);
    }
    // the same two clusters named by --server and a --context each (the contexts' tokens)
    let bundle = kubeconfigs.path().join("both.crt");
    std::fs::write(
        &bundle,
        served_certificate("127.0.0.1", operator.port)
            + &served_certificate("127.0.0.1", other_operator.port),
    )
    .unwrap();
    let json = across(
        &[
            "--server",
            &server,
            "--context",
            "one",
            "--server",
            &other_server,
            "--context",
            "two",
            "--kubeconfig",
            &both,
            "--cacert",
            bundle.to_str().unwrap(),
        ],
        "json",
    );
    assert_eq!(json.code, 3, "{}{}", json.out, json.err);
    let json: Value = serde_json::from_str(&json.out).unwrap();
    assert_eq!(json["clusters"][0]["cluster"], "one");
    assert_eq!(json["clusters"][0]["server"], server.as_str());
    assert_eq!(json["clusters"][0]["accounted"], false);
    assert_eq!(json["clusters"][1]["cluster"], "two");
    assert_eq!(json["clusters"][1]["accounted"], true, "{}", json["clusters"][1]);
    assert_eq!(json["accounted"], false);
    let markdown = across(&["--all-contexts", "--kubeconfig", &both], "markdown");
    assert!(
        markdown.out.contains(&format!("## Cluster two ({other_server})")),
        "{}",
        markdown.out
    );
    // a cluster that cannot be reached is named, and the exit is 1
    let unreachable = "https://127.0.0.1:1";
    let with_down = kubeconfigs.path().join("with-down");
    std::fs::write(
        &with_down,
        kubeconfig(vec![
            context(
                "two",
                "two",
                Some(json!({"server": other_server, "certificate-authority": "two.crt"})),
            ),
            context("down", "one", Some(json!({"server": unreachable}))),
        ]),
    )
    .unwrap();
    let down = across(
        &["--all-contexts", "--kubeconfig", with_down.to_str().unwrap()],
        "table",
    );
    assert_eq!(down.code, 1, "{}{}", down.out, down.err);
    assert!(
        section(&down.out, &format!("== cluster down ({unreachable})\n")).starts_with("could not be read: "),
        "{}",
        down.out
    );
    assert!(down.out.contains("could not be read: down"), "{}", down.out);
    drop(bindings);
}
