//! The HTTP API in-process (no cluster): a property test that no query string produces a 5xx,
//! the 400 answers, stable paging while rows arrive, the generated OpenAPI document, and the
//! request bounds — the URL's and the headers' size (through the real server on loopback, where
//! hyper enforces the hard limits) and the cap on journal queries.

use std::sync::{Arc, atomic::Ordering};

use axum::{
    body::{Body, to_bytes},
    http::{HeaderMap, Request, StatusCode},
};
use chrono::{Duration, TimeZone, Utc};
use eru_operator::{
    http::{
        AppState,
        limits::{Guard, MAX_HEADERS, MAX_URI},
        router, router_with, serve,
    },
    journal::{Entry, Journal, NewRestart, NewSlot, NewTransition, ObjectKey, SlotResult},
    metrics::Metrics,
    runtime::Readiness,
    vocab::Reason,
};
use proptest::prelude::*;
use serde_json::Value;
use tower::ServiceExt;

fn object(name: &str) -> ObjectKey {
    ObjectKey {
        kind: "Eru",
        namespace: "ns".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
    }
}

/// `n` restarts, slots and transitions, one minute apart.
fn rows(start: i64, n: i64) -> Entry {
    let base = Utc.with_ymd_and_hms(2026, 11, 22, 0, 0, 0).unwrap();
    let mut entry = Entry::default();
    for i in start..start + n {
        let at = base + Duration::minutes(i);
        let name = if i % 2 == 0 { "web" } else { "api" };
        entry.restarts_decided.push(NewRestart {
            object: object(name),
            target: name.into(),
            slot: at,
            decided_at: at,
            deadline_at: at + Duration::minutes(5),
        });
        entry.slots.push(NewSlot {
            object: object(name),
            target: name.into(),
            slot: at + Duration::seconds(30),
            last_slot: at + Duration::seconds(30),
            slot_count: 1,
            result: SlotResult::Missed,
            reason: Reason::OperatorDown,
            window: Some((at, at + Duration::seconds(40))),
            note: None,
            evaluated_at: at,
        });
        entry.transitions.push(NewTransition {
            object: object(name),
            observed: i.to_string(),
            from: "Waiting",
            to: "Restarting",
            event: "SlotDue",
            at,
            detail: serde_json::json!({}),
        });
    }
    entry
}

/// The handlers' state over an in-memory journal holding `n` rows of each kind.
async fn state(n: i64) -> AppState {
    let journal = Journal::open_in_memory().await.unwrap();
    journal.append(&rows(0, n)).await.unwrap();
    let readiness = Readiness::default();
    readiness.journal.store(true, Ordering::Relaxed);
    AppState {
        journal,
        metrics: Metrics::new(),
        readiness,
        blackouts: Default::default(),
        holds: Default::default(),
    }
}

async fn app(n: i64) -> (axum::Router, Journal) {
    let state = state(n).await;
    let journal = state.journal.clone();
    (router(state), journal)
}

async fn get(app: &axum::Router, uri: &str) -> (StatusCode, Value) {
    let (status, _, body) = get_with_headers(app, Request::get(uri)).await;
    (status, body)
}

/// `request` answered in-process: the status, the headers and the body as JSON (`Null` if not).
async fn get_with_headers(
    app: &axum::Router,
    request: axum::http::request::Builder,
) -> (StatusCode, HeaderMap, Value) {
    let response = app
        .clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    let body = to_bytes(response.into_body(), 1 << 24).await.unwrap();
    (
        status,
        headers,
        serde_json::from_slice(&body).unwrap_or(Value::Null),
    )
}

/// One request written as `head` on a fresh connection to `address`, read until the server closes
/// it: the status, the head's lines (lowercase) and the body.
async fn raw(address: std::net::SocketAddr, head: &str) -> (u16, String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(address).await.unwrap();
    tcp.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tcp.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head.to_lowercase(), body.to_string())
}

/// A request head of `path` with `headers` (name, value) that asks the server to close after it.
fn head(path: &str, headers: &[(String, String)]) -> String {
    let mut head = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head + "\r\n"
}

#[tokio::test]
async fn an_overlong_url_is_414_and_overlarge_headers_431_in_json() {
    let (app, _) = app(3).await;
    let long = format!("/history?name={}", "a".repeat(MAX_URI));
    let (status, headers, body) = get_with_headers(&app, Request::get(long.as_str())).await;
    assert_eq!(status, StatusCode::URI_TOO_LONG, "{body}");
    assert_eq!(headers["cache-control"], "no-store");
    let error = body["error"].as_str().unwrap();
    assert!(error.contains(&format!("at most {MAX_URI}")), "{error}");
    // at the bound itself, the URL is read (and its parameter refused on its own rule)
    let at_bound = format!("/history?name={}", "a".repeat(MAX_URI - "/history?name=".len()));
    assert_eq!(get(&app, &at_bound).await.0, StatusCode::BAD_REQUEST);

    let mut request = Request::get("/history");
    for i in 0..5 {
        request = request.header(format!("x-fill-{i}"), "a".repeat(MAX_HEADERS / 4));
    }
    let (status, headers, body) = get_with_headers(&app, request).await;
    assert_eq!(status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, "{body}");
    assert_eq!(headers["cache-control"], "no-store");
    let error = body["error"].as_str().unwrap();
    assert!(error.contains(&format!("at most {MAX_HEADERS}")), "{error}");
}

#[tokio::test]
async fn pages_send_security_headers_and_every_answer_nosniff() {
    let (app, _) = app(3).await;
    for page in ["/ui", "/", "/ui/eru/ns/web"] {
        let (status, headers, _) = get_with_headers(&app, Request::get(page)).await;
        assert!(
            status == StatusCode::OK || status == StatusCode::BAD_REQUEST,
            "{page}: {status}"
        );
        assert!(
            headers["content-type"].to_str().unwrap().starts_with("text/html"),
            "{page}"
        );
        let policy = headers["content-security-policy"].to_str().unwrap();
        assert_eq!(policy, eru_operator::http::CONTENT_SECURITY_POLICY, "{page}");
        for directive in [
            "default-src 'none'",
            "frame-ancestors 'none'",
            "form-action 'self'",
        ] {
            assert!(policy.contains(directive), "{page}: {policy}");
        }
        assert!(!policy.contains("script-src"), "no script, ever: {policy}");
        assert_eq!(headers["x-frame-options"], "DENY", "{page}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{page}");
        assert_eq!(headers["referrer-policy"], "no-referrer", "{page}");
    }
    for json in ["/history", "/no-such-path", "/history?limit=x"] {
        let (_, headers, _) = get_with_headers(&app, Request::get(json)).await;
        assert_eq!(headers["x-content-type-options"], "nosniff", "{json}");
        assert!(
            headers.get("content-security-policy").is_none(),
            "{json}: JSON is not a page"
        );
    }
}

#[tokio::test]
async fn an_eru_pages_path_is_checked_before_anything_else() {
    let (app, _) = app(3).await;
    for (path, why) in [
        ("/ui/eru/Not_Valid/web", "namespace"),
        ("/ui/eru/ns/web%2Fx", "name"),
        (&*format!("/ui/eru/{}/web", "a".repeat(64)), "namespace"),
        ("/ui/eru/ns/-web", "name"),
    ] {
        let response = app
            .clone()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{path}");
        let body = to_bytes(response.into_body(), 1 << 20).await.unwrap();
        let page = String::from_utf8_lossy(&body);
        assert!(page.contains(why), "{path}: {page}");
    }
    // a percent-encoded valid name is that name: the Eru's page
    assert_eq!(get(&app, "/ui/eru/n%73/web").await.0, StatusCode::OK);
}

#[tokio::test]
async fn the_real_server_answers_oversized_requests_in_json_up_to_its_hard_limits() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve::serve(listener, router(state(3).await), None, async {
        let _ = stopped.await;
    }));

    let (status, head_lines, body) = raw(address, &head("/history?limit=1", &[])).await;
    assert_eq!(status, 200, "{head_lines}\n{body}");

    // a request target over MAX_URI: the router's 414, in JSON
    let long = format!("/history?name={}", "a".repeat(MAX_URI));
    let (status, head_lines, body) = raw(address, &head(&long, &[])).await;
    assert_eq!(status, 414, "{head_lines}");
    assert!(
        head_lines.contains("content-type: application/json"),
        "{head_lines}"
    );
    let error: Value = serde_json::from_str(&body).unwrap();
    assert!(
        error["error"].as_str().unwrap().contains("request target"),
        "{body}"
    );

    // headers over MAX_HEADERS (but under hyper's head, MAX_URI + MAX_HEADERS + 1 KiB): the
    // router's 431, in JSON
    let fill: Vec<(String, String)> = (0..5)
        .map(|i| (format!("x-fill-{i}"), "a".repeat(MAX_HEADERS / 4)))
        .collect();
    let (status, head_lines, body) = raw(address, &head("/history", &fill)).await;
    assert_eq!(status, 431, "{head_lines}");
    assert!(
        head_lines.contains("content-type: application/json"),
        "{head_lines}"
    );
    let error: Value = serde_json::from_str(&body).unwrap();
    assert!(
        error["error"].as_str().unwrap().contains("request headers"),
        "{body}"
    );

    // more than 100 headers: hyper refuses the head itself, a bare 431 before the router runs
    // (a small head, read whole, so the server's close cannot reset unread bytes)
    let many: Vec<(String, String)> = (0..101).map(|i| (format!("x-h{i}"), "1".into())).collect();
    let (status, head_lines, body) = raw(address, &head("/history", &many)).await;
    assert_eq!(status, 431, "{head_lines}");
    assert!(body.is_empty(), "{body}");

    let _ = stop.send(());
    server.await.unwrap();
}

#[tokio::test]
async fn over_the_query_cap_a_request_gets_503_with_retry_after_in_json() {
    let guard = Arc::new(Guard::new(None, 1, std::time::Duration::from_secs(30)));
    let app = router_with(state(3).await, Arc::clone(&guard));
    // the one place among the journal queries, held here: every journal endpoint finds none
    let place = guard.query().await.unwrap();
    // the clock stands still and jumps to the queue's deadline once nothing else can run: the
    // wait for a place ends on its own timeout, never on a race with a real query
    tokio::time::pause();
    for uri in [
        "/history",
        "/transitions",
        "/missed",
        "/slots",
        "/audit",
        "/ui",
        "/ui/eru/ns/web",
    ] {
        let (status, headers, body) = get_with_headers(&app, Request::get(uri)).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{uri}: {body}");
        assert_eq!(headers["retry-after"], "1", "{uri}");
        assert_eq!(headers["cache-control"], "no-store", "{uri}");
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("too many journal queries"),
            "{uri}: {body}"
        );
    }
    // what needs no journal query is answered at the cap
    for uri in ["/healthz", "/metrics", "/openapi.json"] {
        let (status, _, _) = get_with_headers(&app, Request::get(uri)).await;
        assert_eq!(status, StatusCode::OK, "{uri}");
    }
    // the place given back, the same query is answered
    tokio::time::resume();
    drop(place);
    let (status, headers, body) = get_with_headers(&app, Request::get("/history")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(headers.get("retry-after").is_none());
    assert_eq!(body["items"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn bad_parameters_are_400_with_a_json_error() {
    let (app, _) = app(3).await;
    for uri in [
        "/history?limit=0",
        "/history?limit=1001",
        "/history?limit=ten",
        "/history?since=yesterday",
        "/history?until=2026-13-01T00:00:00Z",
        "/history?outcome=exploded",
        "/history?colour=blue",
        "/history?kind=Eru",
        "/history?cursor=not-a-cursor",
        "/history?cursor=683a313a3030303030303030",
        "/transitions?kind=Deployment",
        "/missed?reason=bored",
        "/missed?name=",
        "/missed?namespace=Prod",
        "/slots?result=exploded",
        "/slots?reason=bored",
        "/slots?outcome=succeeded",
        "/slots?cursor=m1",
        "/history?name=-web",
        "/history?limit=%2B5",
        "/history?%zz=1",
    ] {
        let (status, body) = get(&app, uri).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}: {body}");
        assert!(
            body["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{uri}: {body}"
        );
    }
    // another endpoint's cursor is refused too
    let (_, page) = get(&app, "/transitions?limit=1").await;
    let cursor = page["next_cursor"].as_str().unwrap();
    let (status, _) = get(&app, &format!("/history?cursor={cursor}")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(get(&app, "/nope").await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn every_answer_is_no_store_and_typed_and_other_methods_get_405_with_allow() {
    let (app, _) = app(3).await;
    for (uri, content_type) in [
        ("/history", "application/json"),
        ("/missed?limit=1", "application/json"),
        ("/transitions?limit=x", "application/json"),
        ("/nope", "application/json"),
        ("/healthz", "text/plain"),
        ("/metrics", "text/plain"),
        ("/readyz", "application/json"),
    ] {
        let response = app
            .clone()
            .oneshot(Request::get(uri).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let headers = response.headers();
        assert_eq!(headers["cache-control"], "no-store", "{uri}");
        assert!(
            headers["content-type"]
                .to_str()
                .unwrap()
                .starts_with(content_type),
            "{uri}: {:?}",
            headers["content-type"]
        );
    }
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        let response = app
            .clone()
            .oneshot(
                Request::builder()
                    .method(method)
                    .uri("/history")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED, "{method}");
        assert_eq!(response.headers()["allow"], "GET,HEAD", "{method}");
        assert_eq!(response.headers()["cache-control"], "no-store");
        let body: Value =
            serde_json::from_slice(&to_bytes(response.into_body(), 1 << 20).await.unwrap()).unwrap();
        assert!(body["error"].as_str().unwrap().contains("GET"), "{body}");
    }
}

#[tokio::test]
async fn a_since_after_until_selects_nothing() {
    let (app, _) = app(3).await;
    let (status, body) = get(
        &app,
        "/history?since=2026-11-23T00:00:00Z&until=2026-11-22T00:00:00Z",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["items"], serde_json::json!([]));
}

#[tokio::test]
async fn filters_and_items() {
    let (app, _) = app(6).await;
    let (status, body) = get(
        &app,
        "/history?name=web&outcome=in_progress&since=2026-11-22T00:01:00Z",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let slots: Vec<&str> = body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["slot"].as_str().unwrap())
        .collect();
    assert_eq!(
        slots,
        ["2026-11-22T00:04:00.000Z", "2026-11-22T00:02:00.000Z"],
        "newest first, filtered"
    );
    let item = &body["items"][0];
    for field in [
        "namespace",
        "name",
        "target",
        "slot",
        "decided_at",
        "patched_at",
        "started_at",
        "finished_at",
        "duration_seconds",
        "outcome",
        "reason",
    ] {
        assert!(item.get(field).is_some(), "missing {field}: {item}");
    }
    let (_, missed) = get(&app, "/missed?reason=operator_down&limit=1").await;
    assert_eq!(missed["items"][0]["window"]["end"], "2026-11-22T00:05:40.000Z");
    let (_, transitions) = get(&app, "/transitions?kind=Eru&name=api").await;
    assert_eq!(transitions["items"].as_array().unwrap().len(), 3);
}

/// One slot of each kind of record: fired (its restart succeeded), skipped with no restart,
/// abandoned (decided, given up: also in `/history`), dry run (journaled only: also in `/history`).
#[tokio::test]
async fn slots_list_each_slot_once_with_its_restart_where_history_and_missed_overlap() {
    use eru_operator::{
        journal::{FinishedRestart, PatchedRestart},
        vocab::Outcome,
    };
    let journal = Journal::open_in_memory().await.unwrap();
    let slot = |m: i64| Utc.with_ymd_and_hms(2026, 11, 22, 3, 0, 0).unwrap() + Duration::minutes(m);
    let web = object("web");
    let record = |m: i64, result: SlotResult, reason: Reason| NewSlot {
        object: web.clone(),
        target: "web".into(),
        slot: slot(m),
        last_slot: slot(m),
        slot_count: 1,
        result,
        reason,
        window: None,
        note: None,
        evaluated_at: slot(m),
    };
    let decided = |m: i64| NewRestart {
        object: web.clone(),
        target: "web".into(),
        slot: slot(m),
        decided_at: slot(m),
        deadline_at: slot(m) + Duration::minutes(5),
    };
    let finished = |m: i64, outcome: Outcome| FinishedRestart {
        uid: web.uid.clone(),
        slot: slot(m),
        finished_at: slot(m) + Duration::seconds(20),
        outcome,
        reason: None,
    };
    let entry = Entry {
        restarts_decided: vec![decided(0), decided(2), decided(3)],
        restarts_patched: vec![PatchedRestart {
            landed_generation: None,
            uid: web.uid.clone(),
            slot: slot(0),
            patched_at: slot(0) + Duration::seconds(1),
        }],
        restarts_finished: vec![
            finished(0, Outcome::Succeeded),
            finished(2, Outcome::Abandoned),
            finished(3, Outcome::DryRun),
        ],
        slots: vec![
            record(0, SlotResult::Fired, Reason::Scheduled),
            record(1, SlotResult::Skipped, Reason::Suspended),
            record(2, SlotResult::Skipped, Reason::TargetPaused),
            record(3, SlotResult::Skipped, Reason::DryRun),
        ],
        ..Entry::default()
    };
    journal.append(&entry).await.unwrap();
    let readiness = Readiness::default();
    readiness.journal.store(true, Ordering::Relaxed);
    let app = router(AppState {
        journal: journal.clone(),
        metrics: Metrics::new(),
        readiness,
        blackouts: Default::default(),
        holds: Default::default(),
    });
    let (status, page) = get(&app, "/slots?name=web").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let items = page["items"].as_array().unwrap();
    let got: Vec<(&str, &str, &Value)> = items
        .iter()
        .map(|i| {
            (
                i["slot"].as_str().unwrap(),
                i["result"].as_str().unwrap(),
                &i["restart"]["outcome"],
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("2026-11-22T03:03:00.000Z", "skipped", &Value::from("dry_run")),
            ("2026-11-22T03:02:00.000Z", "skipped", &Value::from("abandoned")),
            ("2026-11-22T03:01:00.000Z", "skipped", &Value::Null),
            ("2026-11-22T03:00:00.000Z", "fired", &Value::from("succeeded")),
        ],
        "one record per slot, newest first, each with its restart attempt"
    );
    assert_eq!(items[3]["restart"]["patched_at"], "2026-11-22T03:00:01.000Z");
    assert!(items[3]["reason"].is_null(), "a fired slot has no reason");
    assert_eq!(items[2]["reason"], "suspended");
    assert_eq!(items[0]["uid"], "uid-web");
    // the overlap /slots resolves: abandoned and dry-run slots are in both of the other listings
    let (_, history) = get(&app, "/history?name=web").await;
    let (_, missed) = get(&app, "/missed?name=web").await;
    let count = |v: &Value| v["items"].as_array().unwrap().len();
    assert_eq!((count(&history), count(&missed)), (3, 3), "6 rows for 4 slots");
    let (_, fired) = get(&app, "/slots?name=web&result=fired").await;
    assert_eq!(count(&fired), 1);
    let (_, paused) = get(&app, "/slots?reason=target_paused").await;
    assert_eq!(paused["items"][0]["restart"]["outcome"], "abandoned");
    // paged with its own cursor, no gaps or duplicates
    let (_, first) = get(&app, "/slots?name=web&limit=3").await;
    let cursor = first["next_cursor"].as_str().unwrap();
    assert!(cursor.starts_with('s'), "{cursor}");
    let (_, second) = get(&app, &format!("/slots?name=web&limit=3&cursor={cursor}")).await;
    assert_eq!((count(&first), count(&second)), (3, 1));
    assert!(second["next_cursor"].is_null());
    assert_eq!(second["items"][0]["slot"], "2026-11-22T03:00:00.000Z");
    // a cursor of /missed is not one of /slots
    let (_, m) = get(&app, "/missed?name=web&limit=1").await;
    let other = m["next_cursor"].as_str().unwrap();
    assert_eq!(
        get(&app, &format!("/slots?cursor={other}")).await.0,
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test]
async fn paging_has_no_gaps_or_duplicates_while_rows_arrive() {
    let (app, journal) = app(25).await;
    let mut seen = Vec::new();
    let mut uri = "/history?limit=7".to_string();
    let mut pages = 0;
    loop {
        let (status, body) = get(&app, &uri).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        seen.extend(
            body["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["slot"].as_str().unwrap().to_string()),
        );
        pages += 1;
        // new restarts arrive between pages
        journal.append(&rows(100 + pages * 10, 3)).await.unwrap();
        match body["next_cursor"].as_str() {
            Some(cursor) => uri = format!("/history?limit=7&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(seen.len(), 25, "every row of the first snapshot, once: {seen:?}");
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.reverse();
    sorted.dedup();
    assert_eq!(sorted, seen, "newest first, no duplicates");
    assert_eq!(pages, 4);
}

#[tokio::test]
async fn openapi_document_is_generated_from_the_handlers() {
    let (app, _) = app(0).await;
    let (status, doc) = get(&app, "/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    for path in [
        "/history",
        "/transitions",
        "/missed",
        "/slots",
        "/metrics",
        "/healthz",
        "/readyz",
    ] {
        assert!(doc["paths"][path]["get"].is_object(), "{path} missing");
    }
    let params: Vec<&str> = doc["paths"]["/history"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        params,
        [
            "namespace",
            "name",
            "uid",
            "target",
            "outcome",
            "since",
            "until",
            "limit",
            "cursor"
        ]
    );
    assert!(doc["components"]["schemas"]["RestartItem"]["properties"]["duration_seconds"].is_object());
    assert!(doc["paths"]["/history"]["get"]["responses"]["400"].is_object());
    // the rules the parser enforces, stated in the document
    let param = |path: &str, name: &str| -> Value {
        doc["paths"][path]["get"]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{path} {name}"))["schema"]
            .clone()
    };
    assert_eq!(param("/history", "limit")["minimum"], 1);
    assert_eq!(param("/history", "limit")["maximum"], 1000);
    assert_eq!(param("/history", "limit")["default"], 100);
    assert_eq!(param("/missed", "since")["format"], "date-time");
    assert_eq!(param("/transitions", "namespace")["maxLength"], 63);
    assert_eq!(param("/history", "name")["minLength"], 1);
    assert!(
        param("/history", "name")["pattern"]
            .as_str()
            .unwrap()
            .starts_with('^')
    );
    assert_eq!(param("/history", "cursor")["pattern"], "^h[0-9a-f]{1,15}$");
    assert_eq!(param("/slots", "cursor")["pattern"], "^s[0-9a-f]{1,15}$");
    assert_eq!(
        param("/slots", "result")["enum"],
        serde_json::json!(["fired", "missed", "skipped"])
    );
    assert_eq!(
        param("/slots", "reason")["enum"].as_array().unwrap().len(),
        <eru_operator::vocab::Reason as strum::VariantArray>::VARIANTS.len()
    );
    assert_eq!(param("/slots", "limit")["maximum"], 1000);
    assert!(doc["paths"]["/slots"]["get"]["responses"]["400"].is_object());
    let restart = &doc["components"]["schemas"]["SlotItem"]["properties"]["restart"];
    assert!(!restart.is_null(), "a slot record carries its restart attempt");
    assert_eq!(
        param("/missed", "reason")["enum"].as_array().unwrap().len(),
        <eru_operator::vocab::Reason as strum::VariantArray>::VARIANTS.len()
    );
    assert_eq!(
        param("/transitions", "kind")["enum"],
        serde_json::json!(["Eru", "PodSet", "Memcached"])
    );
    let item = &doc["components"]["schemas"]["RestartItem"];
    assert!(
        item["required"]
            .as_array()
            .unwrap()
            .contains(&"finished_at".into()),
        "nullable, never absent"
    );
    assert_eq!(item["properties"]["started_at"]["format"], "date-time");
    for field in ["decided_at", "patched_at"] {
        assert_eq!(item["properties"][field]["format"], "date-time", "{field}");
        assert!(
            item["required"].as_array().unwrap().contains(&field.into()),
            "{field}"
        );
    }
    assert_eq!(
        doc["components"]["schemas"]["ErrorBody"]["required"],
        serde_json::json!(["error"])
    );
}

/// Query strings: known keys with plausible or hostile values, unknown keys, raw bytes.
fn query() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("namespace".to_string()),
        Just("name".to_string()),
        Just("target".to_string()),
        Just("outcome".to_string()),
        Just("reason".to_string()),
        Just("kind".to_string()),
        Just("since".to_string()),
        Just("until".to_string()),
        Just("limit".to_string()),
        Just("cursor".to_string()),
        "[a-z%&=+]{0,8}",
    ];
    let value = prop_oneof![
        "[0-9]{0,12}",
        "-?[0-9]{1,20}",
        "20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(Z|[+-][0-9]{2}:[0-9]{2})",
        "[0-9a-f]{0,40}",
        "(%[0-9A-Fa-f]{2}|[ -~]){0,24}",
        Just("in_progress".to_string()),
        Just("Eru".to_string()),
    ];
    prop::collection::vec((key, value), 0..6).prop_map(|pairs| {
        pairs
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&")
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn no_query_string_produces_a_5xx(q in query(), endpoint in prop_oneof![Just("/history"), Just("/transitions"), Just("/missed"), Just("/slots")]) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let (app, _) = app(5).await;
            let uri = format!("{endpoint}?{q}");
            let Ok(request) = Request::get(&uri).body(Body::empty()) else { return Ok(()) }; // not a URI at all
            let response = app.oneshot(request).await.unwrap();
            let status = response.status();
            let body: Value = serde_json::from_slice(&to_bytes(response.into_body(), 1 << 24).await.unwrap()).unwrap_or(Value::Null);
            prop_assert!(status == StatusCode::OK || status == StatusCode::BAD_REQUEST, "{uri}: {status} {body}");
            if status == StatusCode::BAD_REQUEST {
                prop_assert!(body["error"].is_string(), "{uri}: {body}");
            } else {
                prop_assert!(body["items"].is_array(), "{uri}: {body}");
            }
            Ok(())
        })?;
    }
}

#[test]
fn the_document_lists_exactly_the_reasons_outcomes_and_kinds_the_operator_journals() {
    use eru_operator::{
        history::params::{self, vocabulary},
        vocab::{Outcome, Reason},
    };
    use kube::Resource;
    use strum::VariantArray;
    let reasons: Vec<&str> = Reason::VARIANTS.iter().map(|r| r.as_str()).collect();
    assert_eq!(vocabulary::<params::Reason>(), reasons);
    let outcomes: Vec<&str> = Outcome::VARIANTS.iter().map(|o| o.as_str()).collect();
    assert_eq!(vocabulary::<params::Outcome>(), outcomes);
    let kinds = [
        eru_operator::eru::Eru::kind(&()),
        eru_operator::podset::PodSet::kind(&()),
        eru_operator::memcached::Memcached::kind(&()),
    ];
    assert_eq!(vocabulary::<params::Kind>(), kinds);
}

#[tokio::test]
async fn the_cli_reads_a_journal_file_through_the_same_parser() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("eru.db");
    Journal::open(&path)
        .await
        .unwrap()
        .append(&rows(0, 4))
        .await
        .unwrap();
    let cli = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_eru-operator"))
            .arg("history")
            .args(args)
            .arg("--database")
            .arg(&path)
            .output()
            .unwrap()
    };
    let out = cli(&["restarts", "--name", "web", "--limit", "1", "--output", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(page["items"][0]["slot"], "2026-11-22T00:02:00.000Z");
    assert_eq!(page["next_cursor"], "h3", "continues before row 3");
    for (args, message) in [
        (
            &["restarts", "--limit", "0"][..],
            "error: limit: must be an integer from 1 to 1000",
        ),
        (&["missed", "--name", ""][..], "error: name: must not be empty"),
        (
            &["transitions", "--outcome", "failed"][..],
            "error: unknown field `outcome`",
        ),
    ] {
        let out = cli(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with(message), "{args:?}: {stderr}");
    }
}
