//! The HTTP API under `--http-auth kubernetes` (and its self-signed HTTPS) against the real API
//! server, with real ServiceAccount tokens (TokenRequest) of four identities:
//!
//! - `cluster`: bound to the built-in `view` ClusterRole cluster-wide, which holds `erus/history`
//!   through deploy/rbac.yaml's aggregated `eru-view`;
//! - `team`: the Role and RoleBinding of deploy/examples/history-reader.yaml in namespace A only,
//!   granted to a Group as the example is: the group every ServiceAccount of the team's namespace
//!   is in (`system:serviceaccounts:<namespace>`), so the token's user has no grant of its own
//!   and only the groups the TokenReview names, passed on in each SubjectAccessReview, reach it;
//! - `prometheus`: the ClusterRole `eru-metrics-reader` only;
//! - `nobody`: no grant.
//!
//! One journal holds rows of namespaces A and B, interleaved (written with `sqlite3`, as the
//! operator's own rows would be); each identity sees exactly what it may on every listing,
//! including pages it walks, a cursor of another identity's page, and filters naming a forbidden
//! namespace. Another journal holds real ledgers: an operator scoped to B restarts an Eru there,
//! then one scoped to A on the same journal restarts one in A; the audit and its pages show each
//! identity exactly its namespaces' Erus and records. No token, a garbage token and the token of a
//! deleted ServiceAccount get a 401. Revoking the team's grant takes effect within the operator's
//! cache TTL. A token issued for another audience than `--http-token-audiences` gets a 401.

mod common;

use std::{collections::BTreeSet, time::Duration};

use common::{
    ClusterBindings, Operator, TestNamespace, agent, client,
    eru::{create_eru, deployment, journal_sql, wait_ready},
    kubectl, wait_for,
};
use eru_operator::http::auth::TTL;
use k8s_openapi::api::{
    authentication::v1::{TokenReview, TokenReviewSpec},
    authorization::v1::{
        NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    },
};
use kube::{Api, Client, api::PostParams};
use serde_json::Value;

/// Rows of each kind journaled per namespace.
const ROWS: usize = 12;

/// `--http-auth kubernetes`, with an access-review budget past any test cluster's namespaces:
/// these tests check which namespaces each identity sees, on a cluster whose namespace count
/// (other tests' namespaces) they do not control. The budget itself is unit-tested
/// (`src/http/auth.rs`) and measured (`hack/http-abuse.sh --tenancy`).
const AUTH: [&str; 4] = ["--http-auth", "kubernetes", "--http-caller-reviews", "10000"];

/// GET `path` of `operator` with `token`: the status and the body as JSON (or as a string).
fn call(operator: &Operator, path: &str, token: Option<&str>) -> (u16, Value) {
    let url = operator.url(path);
    let mut request = agent(Some(Duration::from_secs(30))).get(&url);
    if let Some(token) = token {
        request = request.header("Authorization", &format!("Bearer {token}"));
    }
    let mut response = request.call().unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = response.status().as_u16();
    let body = response.body_mut().read_to_string().unwrap_or_default();
    (status, serde_json::from_str(&body).unwrap_or(Value::String(body)))
}

/// The `error` of a refusal, checked to be JSON with the status expected.
fn refused(operator: &Operator, path: &str, token: Option<&str>, status: u16) -> String {
    let (got, body) = call(operator, path, token);
    assert_eq!(got, status, "GET {path}: {body}");
    body["error"]
        .as_str()
        .unwrap_or_else(|| panic!("GET {path}: {status} without a JSON error: {body}"))
        .to_string()
}

/// Every item of a listing, walking its pages of `limit`; each page but the last is full.
fn walk(operator: &Operator, path: &str, token: &str, limit: usize) -> Vec<Value> {
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let separator = if path.contains('?') { '&' } else { '?' };
        let mut page_path = format!("{path}{separator}limit={limit}");
        if let Some(cursor) = &cursor {
            page_path.push_str(&format!("&cursor={cursor}"));
        }
        let (status, page) = call(operator, &page_path, Some(token));
        assert_eq!(status, 200, "GET {page_path}: {page}");
        let page_items = page["items"].as_array().cloned().unwrap_or_default();
        cursor = page["next_cursor"].as_str().map(String::from);
        if cursor.is_some() {
            assert_eq!(
                page_items.len(),
                limit,
                "a page before the last is full: {page_path}"
            );
        }
        items.extend(page_items);
        if cursor.is_none() {
            return items;
        }
    }
}

fn namespaces(items: &[Value]) -> BTreeSet<String> {
    items
        .iter()
        .map(|i| i["namespace"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// A token for `namespace/account` from the TokenRequest API.
fn token(namespace: &str, account: &str) -> String {
    kubectl(&["create", "token", account, "-n", namespace, "--duration", "1h"])
        .trim()
        .to_string()
}

/// Waits until the API server's authorizer says what `user` may do (RBAC and the aggregation of
/// `eru-view` into `view` are applied asynchronously), so the operator's answers are not raced.
async fn wait_until_allowed(client: &Client, user: &str, attributes: SubjectAccessReviewSpec, allowed: bool) {
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.into()),
            ..attributes
        },
        ..SubjectAccessReview::default()
    };
    wait_for(
        &format!("the API server to answer allowed={allowed} for {user}"),
        Duration::from_secs(60),
        || async {
            let answer = api.create(&PostParams::default(), &review).await.ok()?;
            (answer.status?.allowed == allowed).then_some(())
        },
    )
    .await;
}

fn history_in(namespace: Option<&str>) -> SubjectAccessReviewSpec {
    SubjectAccessReviewSpec {
        resource_attributes: Some(ResourceAttributes {
            group: Some("mtsre.meitu.com".into()),
            resource: Some("erus".into()),
            subresource: Some("history".into()),
            verb: Some("get".into()),
            namespace: namespace.map(String::from),
            ..ResourceAttributes::default()
        }),
        ..SubjectAccessReviewSpec::default()
    }
}

/// Journal rows of namespaces `a` and `b`, interleaved: restarts, missed slots and transitions.
fn journal_rows(operator: &Operator, a: &str, b: &str) {
    let mut sql = String::from("BEGIN;");
    for i in 0..ROWS {
        for ns in [a, b] {
            let (name, at) = (format!("{ns}-eru-{i}"), format!("2026-01-01T00:{i:02}:00.000Z"));
            sql.push_str(&format!(
                "INSERT INTO restarts (uid, namespace, name, target, slot, decided_at, patched_at, finished_at, outcome) \
                 VALUES ('{name}', '{ns}', '{name}', 'web', '{at}', '{at}', '{at}', '{at}', 'succeeded');\
                 INSERT INTO slots (uid, namespace, name, target, slot, last_slot, result, reason, evaluated_at) \
                 VALUES ('{name}', '{ns}', '{name}', 'web', '{at}', '{at}', 'missed', 'operator_down', '{at}');\
                 INSERT INTO transitions (kind, namespace, name, uid, observed, from_state, to_state, event, at) \
                 VALUES ('Eru', '{ns}', '{name}', '{name}', '1', 'Pending', 'Scheduled', 'Observed', '{at}');"
            ));
        }
    }
    sql.push_str("COMMIT;");
    journal_sql(operator, &sql);
}

#[tokio::test]
#[ignore = "needs a cluster: hack/test.sh"]
async fn each_identity_reads_exactly_what_the_cluster_grants_it() {
    let client = client().await;
    let a = TestNamespace::create(&client, "auth-a").await;
    let b = TestNamespace::create(&client, "auth-b").await;
    let ids = TestNamespace::create(&client, "auth-ids").await;
    let team_ns = TestNamespace::create(&client, "auth-team").await;
    // the listings' operator watches a namespace of no Eru: its journal holds only the rows below
    let operator = Operator::start(&client, &ids.name, &AUTH).await;
    assert!(operator.url("/").starts_with("https://"));
    journal_rows(&operator, &a.name, &b.name);

    // the identities
    for account in ["cluster", "prometheus", "nobody", "gone"] {
        kubectl(&["create", "serviceaccount", account, "-n", &ids.name]);
    }
    kubectl(&["create", "serviceaccount", "team", "-n", &team_ns.name]);
    let team_group = format!("system:serviceaccounts:{}", team_ns.name);
    let user = |account: &str| {
        let ns = if account == "team" {
            &team_ns.name
        } else {
            &ids.name
        };
        format!("system:serviceaccount:{ns}:{account}")
    };
    let bindings = ClusterBindings(vec![
        format!("{}-cluster", ids.name),
        format!("{}-prometheus", ids.name),
    ]);
    kubectl(&[
        "create",
        "clusterrolebinding",
        &bindings.0[0],
        "--clusterrole",
        "view",
        "--serviceaccount",
        &format!("{}:cluster", ids.name),
    ]);
    kubectl(&[
        "create",
        "clusterrolebinding",
        &bindings.0[1],
        "--clusterrole",
        "eru-metrics-reader",
        "--serviceaccount",
        &format!("{}:prometheus", ids.name),
    ]);
    // deploy/examples/history-reader.yaml, in namespace A, for its Group: the team's namespace's
    // ServiceAccounts' group (only the names change; the subject stays a Group)
    let sample = std::fs::read_to_string(common::repo().join("deploy/examples/history-reader.yaml"))
        .unwrap()
        .replace("namespace: team-a", &format!("namespace: {}", a.name));
    let group = "  - kind: Group\n    apiGroup: rbac.authorization.k8s.io\n    name: team-a";
    assert!(sample.contains(group), "the example grants a Group: {sample}");
    let sample = sample.replace(
        group,
        &group.replace("name: team-a", &format!("name: {team_group}")),
    );
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), sample).unwrap();
    kubectl(&["apply", "-f", file.path().to_str().unwrap()]);
    wait_until_allowed(&client, &user("cluster"), history_in(None), true).await;
    // the grant reaches the team's token through its group, not its user
    let group_only = |namespace: Option<&str>| SubjectAccessReviewSpec {
        groups: Some(vec![
            team_group.clone(),
            "system:serviceaccounts".into(),
            "system:authenticated".into(),
        ]),
        ..history_in(namespace)
    };
    wait_until_allowed(&client, &user("team"), group_only(Some(&a.name)), true).await;
    wait_until_allowed(&client, &user("team"), history_in(Some(&a.name)), false).await;
    let metrics = SubjectAccessReviewSpec {
        non_resource_attributes: Some(NonResourceAttributes {
            path: Some("/metrics".into()),
            verb: Some("get".into()),
        }),
        ..SubjectAccessReviewSpec::default()
    };
    wait_until_allowed(&client, &user("prometheus"), metrics, true).await;
    let [cluster, prometheus, nobody] =
        ["cluster", "prometheus", "nobody"].map(|account| token(&ids.name, account));
    let team = token(&team_ns.name, "team");
    // the audit's journal: real ledgers of Erus in B, then in A
    let (audited, _journal_folder) = real_ledgers(&client, &a.name, &b.name, &cluster).await;

    // a token of a ServiceAccount deleted since: what an expired token is to the TokenReview
    // (TokenRequest's shortest lifetime is 10 minutes)
    let gone = token(&ids.name, "gone");
    kubectl(&["delete", "serviceaccount", "gone", "-n", &ids.name]);
    let reviews: Api<TokenReview> = Api::all(client.clone());
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: gone.clone(),
            audiences: None,
        },
        ..TokenReview::default()
    };
    wait_for(
        "the deleted ServiceAccount's token to be refused",
        Duration::from_secs(60),
        || async {
            let answer = reviews.create(&PostParams::default(), &review).await.ok()?;
            (answer.status?.authenticated != Some(true)).then_some(())
        },
    )
    .await;

    // open to anyone: the probes, the index, the document
    let (status, healthz) = call(&operator, "/healthz", None);
    assert_eq!((status, healthz.as_str()), (200, Some("ok")));
    let (status, readyz) = call(&operator, "/readyz", None);
    assert_eq!((status, readyz["journal"].as_bool()), (200, Some(true)));
    let (status, document) = call(&operator, "/openapi.json", None);
    assert_eq!(status, 200);
    let responses = &document["paths"]["/history"]["get"]["responses"];
    for code in ["401", "403", "503"] {
        assert!(
            responses[code]["description"].is_string(),
            "the document has {code}: {responses}"
        );
    }

    // everything else needs a token the cluster accepts
    let journal_paths = [
        "/history",
        "/transitions",
        "/missed",
        "/slots",
        "/audit",
        "/ui",
        "/metrics",
        "/no-such-path",
    ];
    for path in journal_paths {
        assert!(
            refused(&operator, path, None, 401).contains("bearer token"),
            "{path}"
        );
        assert!(
            refused(&operator, path, Some("garbage"), 401).contains("not valid"),
            "{path}"
        );
        assert!(
            refused(&operator, path, Some(&gone), 401).contains("not valid"),
            "{path}"
        );
    }

    // /metrics: only with the eru-metrics-reader grant
    let (status, text) = call(&operator, "/metrics", Some(&prometheus));
    assert_eq!(status, 200);
    assert!(
        text.as_str().unwrap_or_default().contains("eru_build_info"),
        "{text}"
    );
    for token in [&cluster, &team, &nobody] {
        assert!(refused(&operator, "/metrics", Some(token), 403).contains("eru-metrics-reader"));
    }

    let both = BTreeSet::from([a.name.clone(), b.name.clone()]);
    let only_a = BTreeSet::from([a.name.clone()]);
    for listing in ["/history", "/transitions", "/missed", "/slots"] {
        // the cluster-wide reader: both namespaces, whole
        let all = walk(&operator, listing, &cluster, 5);
        assert_eq!(namespaces(&all), both, "{listing}");
        assert_eq!(all.len(), 2 * ROWS, "{listing}");
        // namespace A's reader: all of A, in full pages, and nothing of B
        let seen = walk(&operator, listing, &team, 5);
        assert_eq!(namespaces(&seen), only_a, "{listing}");
        let expected: Vec<&Value> = all.iter().filter(|i| i["namespace"] == a.name.as_str()).collect();
        assert_eq!(
            seen.iter().collect::<Vec<_>>(),
            expected,
            "{listing}: A's rows, as the cluster reader sees them"
        );
        assert_eq!(
            walk(&operator, &format!("{listing}?namespace={}", a.name), &team, 5),
            seen
        );
        let error = refused(
            &operator,
            &format!("{listing}?namespace={}", b.name),
            Some(&team),
            403,
        );
        assert!(error.contains(&b.name), "{error}");
        // no grant: an empty listing that hints at nothing, and a 403 for a named namespace
        for token in [&prometheus, &nobody] {
            let (status, page) = call(&operator, listing, Some(token));
            assert_eq!(status, 200, "{listing}: {page}");
            assert_eq!(
                page,
                serde_json::json!({"items": [], "next_cursor": null}),
                "{listing}"
            );
            refused(
                &operator,
                &format!("{listing}?namespace={}", a.name),
                Some(token),
                403,
            );
        }
        // a cursor of the cluster reader's first page, replayed by the others
        let (_, first) = call(&operator, &format!("{listing}?limit=3"), Some(&cluster));
        let cursor = first["next_cursor"].as_str().expect("more than one page");
        let replay = format!("{listing}?limit=1000&cursor={cursor}");
        let (status, page) = call(&operator, &replay, Some(&team));
        assert_eq!(status, 200);
        let replayed = page["items"].as_array().cloned().unwrap_or_default();
        assert_eq!(
            namespaces(&replayed),
            only_a,
            "{listing}: the replayed cursor shows only A"
        );
        assert_eq!(
            replayed.len(),
            ROWS - 1,
            "{listing}: A's rows older than the cursor (B11, A11, B10 were its page)"
        );
        for token in [&prometheus, &nobody] {
            let (_, page) = call(&operator, &replay, Some(token));
            assert_eq!(page["items"], serde_json::json!([]), "{listing}");
        }
    }

    // the audit: one namespace with its grant, every namespace with the cluster-wide one
    let (status, audit) = call(&operator, "/audit", Some(&cluster));
    assert_eq!(status, 200, "{audit}");
    let (status, audit) = call(&operator, &format!("/audit?namespace={}", a.name), Some(&team));
    assert_eq!(status, 200, "{audit}");
    let erus = audit["erus"].as_array().cloned().unwrap_or_default();
    assert!(erus.iter().all(|e| e["namespace"] == a.name.as_str()), "{audit}");
    assert!(refused(&operator, "/audit", Some(&team), 403).contains("cluster-wide"));
    refused(
        &operator,
        &format!("/audit?namespace={}", b.name),
        Some(&team),
        403,
    );
    refused(&operator, "/audit", Some(&nobody), 403);
    let (status, page) = call(&operator, &format!("/ui?namespace={}", a.name), Some(&team));
    assert_eq!(status, 200, "{page}");
    assert!(
        page.as_str().unwrap_or_default().contains("<html"),
        "an HTML page"
    );
    refused(&operator, "/ui", Some(&team), 403);
    refused(&operator, &format!("/ui/eru/{}/x", b.name), Some(&team), 403);

    // the audit of real ledgers: each identity its namespaces' Erus and records, on every page
    let a_real = format!("{}/real", a.name);
    let b_real = format!("{}/real", b.name);
    let (status, audit) = call(&audited, "/audit", Some(&cluster));
    assert_eq!(status, 200, "{audit}");
    let erus = |audit: &Value| -> BTreeSet<String> {
        (audit["erus"].as_array().into_iter().flatten())
            .map(|e| {
                format!(
                    "{}/{}",
                    e["namespace"].as_str().unwrap(),
                    e["name"].as_str().unwrap()
                )
            })
            .collect()
    };
    assert_eq!(
        erus(&audit),
        BTreeSet::from([a_real.clone(), b_real.clone()]),
        "{audit}"
    );
    for eru in audit["erus"].as_array().unwrap() {
        assert!(eru["fired"]["succeeded"].as_i64().unwrap() >= 2, "{eru}");
    }
    let (status, team_audit) = call(&audited, &format!("/audit?namespace={}", a.name), Some(&team));
    assert_eq!(status, 200, "{team_audit}");
    assert_eq!(
        erus(&team_audit),
        BTreeSet::from([a_real.clone()]),
        "{team_audit}"
    );
    assert!(
        team_audit["verdict"]["fired"].as_i64().unwrap() >= 2,
        "{team_audit}"
    );
    assert!(refused(&audited, "/audit", Some(&team), 403).contains("cluster-wide"));
    refused(
        &audited,
        &format!("/audit?namespace={}", b.name),
        Some(&team),
        403,
    );
    let seen = walk(&audited, "/slots", &team, 2);
    assert_eq!(namespaces(&seen), BTreeSet::from([a.name.clone()]), "/slots");
    assert!(seen.len() >= 2, "{seen:?}");
    let (status, page) = call(&audited, &format!("/ui?namespace={}", a.name), Some(&team));
    assert_eq!(status, 200);
    let page = page.as_str().unwrap_or_default().to_string();
    assert!(
        page.contains(&a_real) && !page.contains(&b.name),
        "the team's page: {page}"
    );
    let (status, page) = call(&audited, &format!("/ui/eru/{}/real", a.name), Some(&team));
    assert_eq!(status, 200, "{page}");
    assert!(page.as_str().unwrap_or_default().contains(&a_real));
    refused(&audited, &format!("/ui/eru/{}/real", b.name), Some(&team), 403);
    refused(&audited, "/ui", Some(&team), 403);
    let (status, page) = call(&audited, "/ui", Some(&cluster));
    assert_eq!(status, 200);
    let page = page.as_str().unwrap_or_default();
    assert!(
        page.contains(&a_real) && page.contains(&b_real),
        "the cluster's page"
    );
    // an Eru page's path is checked before anything is asked of the API server: a 400 also
    // without a token
    let (status, _) = call(&audited, "/ui/eru/Not_A_Namespace/real", None);
    assert_eq!(status, 400);

    // revoking the grant: refused once the API server says so and the cache's TTL has passed
    kubectl(&["delete", "rolebinding", "eru-history-reader", "-n", &a.name]);
    wait_until_allowed(&client, &user("team"), group_only(Some(&a.name)), false).await;
    let revoked = std::time::Instant::now();
    tokio::time::sleep(TTL + Duration::from_secs(1)).await;
    refused(
        &audited,
        &format!("/audit?namespace={}", a.name),
        Some(&team),
        403,
    );
    let (status, page) = call(&audited, "/slots", Some(&team));
    assert_eq!((status, &page["items"]), (200, &serde_json::json!([])), "{page}");
    println!(
        "the revoked grant refused {:.1} s after the API server denied it (TTL {TTL:?})",
        revoked.elapsed().as_secs_f64()
    );
    drop(bindings);
}

/// Deployments and Erus `real` (every 2 s) in B, restarted by an operator scoped to B, then in A
/// by an operator scoped to A on the same journal (with `--http-auth kubernetes`, read with
/// `token`), each until two restarts succeeded; returns A's operator, and B's (stopped), which
/// holds the journal's folder.
async fn real_ledgers(client: &Client, a: &str, b: &str, token: &str) -> (Operator, Operator) {
    let mut before = Operator::start(client, b, &[]).await;
    let mut then = Operator::prepare(client, a, &AUTH, &[], None).await;
    then.database = before.database.clone();
    then.database_url = before.database_url.clone();
    then.token = Some(token.to_string());
    for ns in [b, a] {
        if ns == a {
            before.stop();
            then.spawn().await;
        }
        let operator = if ns == a { &then } else { &before };
        let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), ns);
        deployment(client, ns, "web", 1, serde_json::json!({})).await;
        wait_ready(&deployments, "web", 1).await;
        create_eru(
            client,
            ns,
            "real",
            serde_json::json!({"schedule": "*/2 * * * * *", "target": {"kind": "Deployment", "name": "web"}}),
        )
        .await
        .unwrap();
        let path = format!("/history?namespace={ns}&name=real&outcome=succeeded");
        wait_for(
            &format!("two restarts in {ns}"),
            Duration::from_secs(90),
            || async {
                let (status, body) = operator.get(&path);
                let page: Value = serde_json::from_str(&body).ok().filter(|_| status == 200)?;
                (page["items"].as_array()?.len() >= 2).then_some(())
            },
        )
        .await;
    }
    // nothing in flight when the audit is read: the Eru in A suspended
    kubectl(&[
        "patch",
        "eru",
        "real",
        "-n",
        a,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"suspend":true}}"#,
    ]);
    (then, before)
}

#[tokio::test]
#[ignore = "needs a cluster: hack/test.sh"]
async fn a_token_for_another_audience_is_refused() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "auth-aud").await;
    let operator = Operator::start(
        &client,
        &ns.name,
        &[
            "--http-auth",
            "kubernetes",
            "--http-caller-reviews",
            "10000",
            "--http-token-audiences",
            "eru-operator-test,other",
        ],
    )
    .await;
    kubectl(&["create", "serviceaccount", "reader", "-n", &ns.name]);
    let ours = kubectl(&[
        "create",
        "token",
        "reader",
        "-n",
        &ns.name,
        "--duration",
        "1h",
        "--audience",
        "eru-operator-test",
    ]);
    let default = token(&ns.name, "reader");
    // issued for our audience: authenticated (no grant: an empty listing)
    let (status, page) = call(&operator, "/history", Some(ours.trim()));
    assert_eq!((status, &page["items"]), (200, &serde_json::json!([])), "{page}");
    // the API server's own audience: not for this API
    let error = refused(&operator, "/history", Some(&default), 401);
    assert!(error.contains("audience"), "{error}");
}
