//! The HTTP API (axum): journal listings, the OpenAPI document generated from these handlers and
//! from the parameter types they parse, Prometheus metrics and health.
//!
//! The contract, as the document states it: bad parameters get a 400 with `{"error": "..."}`
//! naming the parameter; unknown paths a 404 and other methods than those documented a 405 with
//! `Allow`, both with the same JSON body; every answer carries `Cache-Control: no-store` (they all
//! describe live state) and the `Content-Type` the document gives. tests/http.rs checks no query
//! string produces a 5xx (property test); tests/contract.rs runs Schemathesis against a live
//! operator.

use axum::{
    Extension, Json, Router,
    extract::{Path, RawQuery, State},
    http::StatusCode,
    response::{Html, IntoResponse, Response},
    routing::get,
};
use serde::Serialize;
use utoipa::{OpenApi, ToSchema};

use std::sync::Arc;

use chrono::Utc;

mod answer;
pub mod auth;
pub mod limits;
pub mod queries;
pub mod serve;
pub mod tls;
pub mod ui;

use answer::{AUTHENTICATE, AUTHORISE, OVER_BUDGET, TOO_LONG, UNAVAILABLE, contract_headers};
pub use answer::{ApiError, CONTENT_SECURITY_POLICY, Params};
use limits::{Caller, Guard};

use crate::{
    eru::{cluster_blackouts::ClusterBlackouts, pass::context::Holds},
    history::{
        self, ErrorBody, HistoryPage, HistoryParams, MissedPage, MissedParams, QueryError, SlotPage,
        SlotParams, TransitionPage, TransitionParams,
        audit::{self, Audit, AuditParams},
        params::{Namespace, ObjectName},
    },
    journal::Journal,
    metrics::Metrics,
    runtime::Readiness,
};

/// Shared state of the handlers.
#[derive(Clone)]
pub struct AppState {
    pub journal: Journal,
    pub metrics: Metrics,
    pub readiness: Readiness,
    /// The cluster-wide blackouts (`--blackouts-file`), as the audit shows them.
    pub blackouts: Arc<ClusterBlackouts>,
    /// The slots health gates hold now, as the audit shows them.
    pub holds: Holds,
}

impl AppState {
    /// The audit of `p` at `now`, reading what `reads` asks, with the cluster-wide blackouts in
    /// force and the slots health gates hold now.
    async fn audit(
        &self,
        p: &AuditParams,
        now: chrono::DateTime<Utc>,
        reads: audit::Reads,
    ) -> Result<Audit, QueryError> {
        let blackouts = self.blackouts.current();
        let audit = audit::read(&self.journal, p, now, &blackouts, reads).await?;
        Ok(audit::with_holds(audit, &self.holds.snapshot()))
    }

    /// The fleet as its gauges show it now: due slots waiting for a place, restarts in flight.
    pub fn fleet(&self) -> (i64, i64) {
        let gauge = |name: &str| {
            (self.metrics.registry().gather().iter())
                .find(|f| f.name() == name)
                .and_then(|f| f.get_metric().first().map(|m| m.get_gauge().get_value() as i64))
                .unwrap_or_default()
        };
        (gauge("eru_restarts_queued"), gauge("eru_restarts_in_flight"))
    }
}

/// The OpenAPI 3 document of this API.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "eru-operator",
        description = "Restart history, state transitions and the missed-slot audit of the ERU \
operator's journal.\n\nEvery rule the server enforces on a parameter is in its schema: a value \
outside it gets a 400 with an `ErrorBody` naming the parameter. An empty value (`?name=`) is such a \
value: omit a parameter not to filter by it. Listings are newest first and paged with an opaque \
`cursor` (the `next_cursor` of the previous page, null on the last one); rows journaled while a \
client pages appear before its first page, never inside later ones. Unknown paths get a 404 and \
undocumented methods a 405 with `Allow`, with the same JSON body. Every answer carries \
`Cache-Control: no-store`.\n\nWith `--http-auth kubernetes` every endpoint but `/healthz`, `/readyz`, `/` and `/openapi.json` needs `Authorization: Bearer <token>`, a token the cluster accepts (TokenReview): without one, a 401. `/metrics` needs `get` on the non-resource URL `/metrics`; the journal's endpoints answer for the namespaces where the caller may `get` the subresource `erus/history` (group `mtsre.meitu.com`), every namespace if granted cluster-wide: a listing without `namespace` holds only those, a `namespace` outside them is a 403, and an audit of every namespace needs the cluster-wide grant. When the cluster cannot be asked, a 503; the access reviews in flight are capped, and past the cap a request that needs one gets a 503 with `Retry-After` at once. Each caller may cause a bounded number of access reviews per 20 s (`--http-caller-reviews`): past it a 429 with `Retry-After`; a listing without `namespace` by a caller without the cluster-wide grant costs one review per namespace of the cluster, and when that is more than the whole allowance it is a 403 asking for a `namespace` (never a part of the namespaces). Journal queries run a few at a time: over the cap a 503 with `Retry-After`. An audit does a bounded amount of work: past it the answer is incomplete and says so (`verdict.complete`, `verdict.not_audited`)."
    ),
    paths(
        history_handler,
        transitions_handler,
        missed_handler,
        slots_handler,
        audit_handler,
        healthz,
        readyz,
        metrics
    ),
    components(schemas(ErrorBody, ReadyzBody, Role))
)]
pub struct ApiDoc;

/// The router, without access checks and with the default bounds.
pub fn router(state: AppState) -> Router {
    router_with(state, Arc::new(Guard::open()))
}

/// The router behind `guard`: its bounds, and its access checks if it has any. The caller keeps
/// a handle on it (tests hold a place among the queries to see the 503 over the cap).
pub fn router_with(state: AppState, guard: Arc<Guard>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/history", get(history_handler))
        .route("/transitions", get(transitions_handler))
        .route("/missed", get(missed_handler))
        .route("/slots", get(slots_handler))
        .route("/audit", get(audit_handler))
        .route("/", get(index))
        .route("/ui", get(ui_fleet))
        .route("/ui/eru/{namespace}/{name}", get(ui_eru))
        .route("/openapi.json", get(|| async { Json(ApiDoc::openapi()) }))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such endpoint") })
        .layer(axum::middleware::from_fn_with_state(guard.clone(), limits::guard))
        .layer(Extension(guard))
        .layer(axum::middleware::map_response(contract_headers))
        .with_state(state)
}

/// The probes alone, for `--probe-address`: `/healthz` and `/readyz`, no access check, nothing
/// else (a 404), so that the kubelet's probes never wait behind the API's callers or its
/// connection cap.
pub fn probes(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "only /healthz and /readyz here") })
        .layer(axum::middleware::map_response(contract_headers))
        .with_state(state)
}

/// Restarts, newest first.
#[utoipa::path(get, path = "/history", operation_id = "listHistory", params(HistoryParams), responses(
    (status = 200, description = "A page of restarts", body = HistoryPage),
    (status = 400, description = "A parameter outside its schema", body = ErrorBody),
    (status = 401, description = AUTHENTICATE, body = ErrorBody),
    (status = 403, description = AUTHORISE, body = ErrorBody),
    (status = 414, description = TOO_LONG, body = ErrorBody),
    (status = 429, description = OVER_BUDGET, body = ErrorBody, headers(("Retry-After" = u32, description = "Seconds until the caller's allowance of access reviews is renewed"))),
    (status = 503, description = UNAVAILABLE, body = ErrorBody, headers(("Retry-After" = u32, description = "With a 503 over the query cap: seconds to wait before retrying"))),
))]
async fn history_handler(
    State(state): State<AppState>,
    Extension(guard): Extension<Arc<Guard>>,
    caller: Caller,
    Params(p): Params<HistoryParams>,
) -> Result<Json<HistoryPage>, ApiError> {
    let (scope, _place) = guard.admit(&caller, namespace(&p.namespace), false).await?;
    Ok(Json(history::history_in(&state.journal, &p, scope).await?))
}

/// State-machine transitions, newest first.
#[utoipa::path(get, path = "/transitions", operation_id = "listTransitions", params(TransitionParams), responses(
    (status = 200, description = "A page of transitions", body = TransitionPage),
    (status = 400, description = "A parameter outside its schema", body = ErrorBody),
    (status = 401, description = AUTHENTICATE, body = ErrorBody),
    (status = 403, description = AUTHORISE, body = ErrorBody),
    (status = 414, description = TOO_LONG, body = ErrorBody),
    (status = 429, description = OVER_BUDGET, body = ErrorBody, headers(("Retry-After" = u32, description = "Seconds until the caller's allowance of access reviews is renewed"))),
    (status = 503, description = UNAVAILABLE, body = ErrorBody, headers(("Retry-After" = u32, description = "With a 503 over the query cap: seconds to wait before retrying"))),
))]
async fn transitions_handler(
    State(state): State<AppState>,
    Extension(guard): Extension<Arc<Guard>>,
    caller: Caller,
    Params(p): Params<TransitionParams>,
) -> Result<Json<TransitionPage>, ApiError> {
    let (scope, _place) = guard.admit(&caller, namespace(&p.namespace), false).await?;
    Ok(Json(history::transitions_in(&state.journal, &p, scope).await?))
}

/// Slots that were not restarted, with reason and downtime window, newest first.
#[utoipa::path(get, path = "/missed", operation_id = "listMissed", params(MissedParams), responses(
    (status = 200, description = "A page of missed and skipped slots", body = MissedPage),
    (status = 400, description = "A parameter outside its schema", body = ErrorBody),
    (status = 401, description = AUTHENTICATE, body = ErrorBody),
    (status = 403, description = AUTHORISE, body = ErrorBody),
    (status = 414, description = TOO_LONG, body = ErrorBody),
    (status = 429, description = OVER_BUDGET, body = ErrorBody, headers(("Retry-After" = u32, description = "Seconds until the caller's allowance of access reviews is renewed"))),
    (status = 503, description = UNAVAILABLE, body = ErrorBody, headers(("Retry-After" = u32, description = "With a 503 over the query cap: seconds to wait before retrying"))),
))]
async fn missed_handler(
    State(state): State<AppState>,
    Extension(guard): Extension<Arc<Guard>>,
    caller: Caller,
    Params(p): Params<MissedParams>,
) -> Result<Json<MissedPage>, ApiError> {
    let (scope, _place) = guard.admit(&caller, namespace(&p.namespace), false).await?;
    Ok(Json(history::missed_in(&state.journal, &p, scope).await?))
}

/// Every slot's one ledger record, newest first: restarted (`fired`, with its restart), or not
/// (`missed`/`skipped`, with the reason). The listing that answers "is every slot accounted, exactly
/// once?": `/history` lists restart attempts (an abandoned or dry-run one's slot is also in
/// `/missed`), `/missed` only the slots that did not fire.
#[utoipa::path(get, path = "/slots", operation_id = "listSlots", params(SlotParams), responses(
    (status = 200, description = "A page of slot records", body = SlotPage),
    (status = 400, description = "A parameter outside its schema", body = ErrorBody),
    (status = 401, description = AUTHENTICATE, body = ErrorBody),
    (status = 403, description = AUTHORISE, body = ErrorBody),
    (status = 414, description = TOO_LONG, body = ErrorBody),
    (status = 429, description = OVER_BUDGET, body = ErrorBody, headers(("Retry-After" = u32, description = "Seconds until the caller's allowance of access reviews is renewed"))),
    (status = 503, description = UNAVAILABLE, body = ErrorBody, headers(("Retry-After" = u32, description = "With a 503 over the query cap: seconds to wait before retrying"))),
))]
async fn slots_handler(
    State(state): State<AppState>,
    Extension(guard): Extension<Arc<Guard>>,
    caller: Caller,
    Params(p): Params<SlotParams>,
) -> Result<Json<SlotPage>, ApiError> {
    let (scope, _place) = guard.admit(&caller, namespace(&p.namespace), false).await?;
    Ok(Json(history::slots_in(&state.journal, &p, scope).await?))
}

/// The audit of a window: per Eru, the slots its spec produced, how each is accounted (restarted
/// by outcome; missed or skipped by reason, with windows and notes) and whether each is accounted
/// exactly once — from the journal's rows, cross-checked with the ledger's running counters; plus
/// the operator's runs, downtime, handovers, journal outages and cluster-wide blackouts.
#[utoipa::path(get, path = "/audit", operation_id = "audit", params(AuditParams), responses(
    (status = 200, description = "The audit of the window", body = Audit),
    (status = 400, description = "A parameter outside its schema, since not before until, or a window over 31 days", body = ErrorBody),
    (status = 401, description = AUTHENTICATE, body = ErrorBody),
    (status = 403, description = AUTHORISE, body = ErrorBody),
    (status = 414, description = TOO_LONG, body = ErrorBody),
    (status = 429, description = OVER_BUDGET, body = ErrorBody, headers(("Retry-After" = u32, description = "Seconds until the caller's allowance of access reviews is renewed"))),
    (status = 503, description = UNAVAILABLE, body = ErrorBody, headers(("Retry-After" = u32, description = "With a 503 over the query cap: seconds to wait before retrying"))),
))]
async fn audit_handler(
    State(state): State<AppState>,
    Extension(guard): Extension<Arc<Guard>>,
    caller: Caller,
    Params(p): Params<AuditParams>,
) -> Result<Json<Audit>, ApiError> {
    let (_, _place) = guard.admit(&caller, namespace(&p.namespace), true).await?;
    Ok(Json(state.audit(&p, Utc::now(), audit::Reads::REPORT).await?))
}

/// `/`: where to go.
async fn index() -> Html<&'static str> {
    Html(concat!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>eru-operator</title></head><body>",
        "<h1>eru-operator</h1><ul><li><a href=\"/ui\">The restart audit of the last 24 hours</a></li>",
        "<li><a href=\"/openapi.json\">The HTTP API (OpenAPI)</a>: /slots, /audit, /history, /missed, /transitions</li>",
        "<li><a href=\"/metrics\">Metrics</a></li></ul></body></html>"
    ))
}

/// A page's query without its empty values (a filter form sends `name=` for "any").
fn page_query(query: Option<&str>) -> String {
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(
            form_urlencoded::parse(query.unwrap_or_default().as_bytes()).filter(|(_, v)| !v.is_empty()),
        )
        .finish()
}

/// A page, or the page that says why there is none.
fn page_or_refusal(result: Result<maud::Markup, QueryError>) -> Response {
    match result {
        Ok(page) => Html(page.into_string()).into_response(),
        Err(QueryError::Invalid(message)) => {
            (StatusCode::BAD_REQUEST, Html(ui::refused(&message).into_string())).into_response()
        }
        Err(QueryError::Journal(e)) => {
            tracing::error!(error = %e, "journal query failed");
            let page = ui::refused("the journal is unavailable; try again shortly");
            (StatusCode::SERVICE_UNAVAILABLE, Html(page.into_string())).into_response()
        }
    }
}

/// A request's namespace filter, as the access check takes it.
fn namespace(filter: &Option<history::params::Namespace>) -> Option<&str> {
    filter.as_ref().map(|n| n.0.as_str())
}

/// `/ui`: every Eru of a window on one timeline.
async fn ui_fleet(
    State(state): State<AppState>,
    Extension(guard): Extension<Arc<Guard>>,
    caller: Caller,
    RawQuery(query): RawQuery,
) -> Response {
    let now = Utc::now();
    let params: Result<ui::PageParams, _> = history::parse(&page_query(query.as_deref()));
    let namespace = params.as_ref().ok().and_then(|p| p.namespace.as_ref());
    // a page is an audit: one namespace, or all of them
    let _place = match guard.admit(&caller, namespace.map(|n| n.0.as_str()), true).await {
        Ok((_, place)) => place,
        Err(refused) => return refused.into_response(),
    };
    let page = async {
        let params = params?;
        let audit = (state.audit(&params.audit_params(now), now, audit::Reads::FLEET_PAGE)).await?;
        Ok(ui::fleet_page(&audit, &params, state.fleet()))
    };
    page_or_refusal(page.await)
}

/// The prefix of an Eru's page, `/ui/eru/{namespace}/{name}`.
const ERU_PAGE: &str = "/ui/eru/";

/// A namespace and a name in a path (percent-decoded), or why not.
fn eru_page_object(namespace: &str, name: &str) -> Result<(Namespace, ObjectName), String> {
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    };
    let namespace = Namespace::try_from(decode(namespace)).map_err(|e| format!("namespace: {e}"))?;
    let name = ObjectName::try_from(decode(name)).map_err(|e| format!("name: {e}"))?;
    Ok((namespace, name))
}

/// The parameters a request's path carries (an Eru page's namespace and name), checked before
/// anything is asked of the API server on the request's behalf: a 400 page if they are not a
/// namespace and an object name (`None`: nothing to refuse).
pub(crate) fn refused_path(path: &str) -> Option<Response> {
    let mut segments = path.strip_prefix(ERU_PAGE)?.split('/');
    match (segments.next(), segments.next(), segments.next()) {
        (Some(namespace), Some(name), None) => eru_page_object(namespace, name).err().map(|message| {
            (StatusCode::BAD_REQUEST, Html(ui::refused(&message).into_string())).into_response()
        }),
        // not a route: the router's 404
        _ => None,
    }
}

/// `/ui/eru/{namespace}/{name}`: one Eru's slots, times and epochs.
async fn ui_eru(
    State(state): State<AppState>,
    Extension(guard): Extension<Arc<Guard>>,
    caller: Caller,
    Path((namespace, name)): Path<(String, String)>,
    RawQuery(query): RawQuery,
) -> Response {
    let now = Utc::now();
    // the middleware checked them (refused_path); again here, for a router without it
    let (namespace, name) = match eru_page_object(&namespace, &name) {
        Ok((namespace, name)) => (namespace.0, name.0),
        Err(message) => {
            return (StatusCode::BAD_REQUEST, Html(ui::refused(&message).into_string())).into_response();
        }
    };
    let _place = match guard.admit(&caller, Some(&namespace), true).await {
        Ok((_, place)) => place,
        Err(refused) => return refused.into_response(),
    };
    let page = async {
        let mut query = page_query(query.as_deref());
        for (key, value) in [("namespace", &namespace), ("name", &name)] {
            let pair = form_urlencoded::Serializer::new(String::new())
                .append_pair(key, value)
                .finish();
            query = if query.is_empty() {
                pair
            } else {
                format!("{query}&{pair}")
            };
        }
        let params: ui::PageParams = history::parse(&query)?;
        let audit = (state.audit(&params.audit_params(now), now, audit::Reads::ERU_PAGE)).await?;
        match audit
            .erus
            .iter()
            .rev()
            .find(|e| e.namespace == namespace && e.name == name)
        {
            Some(eru) => Ok(ui::eru_page(&audit, eru)),
            None => Err(QueryError::Invalid(format!(
                "the journal holds no Eru {namespace}/{name} in this window"
            ))),
        }
    };
    page_or_refusal(page.await)
}

/// The process is alive.
#[utoipa::path(get, path = "/healthz", operation_id = "healthz", responses(
    (status = 200, description = "alive", body = String, content_type = "text/plain", example = "ok"),
))]
async fn healthz() -> &'static str {
    "ok"
}

/// Which parts of the operator are ready.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReadyzBody {
    /// The journal is open.
    pub journal: bool,
    /// The custom resource definitions are established.
    pub crds: bool,
    /// The watch caches have synced.
    pub caches: bool,
    /// Whether this process acts (`leader`: it holds the leader Lease, or runs without leader
    /// election) or stands by (`standby`: caches warm, read API served, takes over when the
    /// leader's Lease expires). A standby is ready too.
    pub role: Role,
}

/// The part a process plays under leader election.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Leader,
    Standby,
}

/// Ready once the journal is open, the CRDs are established and the watch caches synced.
#[utoipa::path(get, path = "/readyz", operation_id = "readyz", responses(
    (status = 200, description = "ready", body = ReadyzBody),
    (status = 503, description = "not ready; the body says which part", body = ReadyzBody),
))]
async fn readyz(State(state): State<AppState>) -> Response {
    use std::sync::atomic::Ordering::Relaxed;
    let r = &state.readiness;
    let body = ReadyzBody {
        journal: r.journal.load(Relaxed),
        crds: r.crds.load(Relaxed),
        caches: r.caches.load(Relaxed),
        role: if r.leader.is_leader() {
            Role::Leader
        } else {
            Role::Standby
        },
    };
    let status = if r.is_ready() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// Prometheus metrics, text exposition format 0.0.4.
#[utoipa::path(get, path = "/metrics", operation_id = "metrics", responses(
    (status = 200, description = "Prometheus text format", body = String, content_type = "text/plain"),
    (status = 401, description = AUTHENTICATE, body = ErrorBody),
    (status = 403, description = "With --http-auth kubernetes: the caller may not get the non-resource URL /metrics (ClusterRole eru-metrics-reader)", body = ErrorBody),
    (status = 429, description = OVER_BUDGET, body = ErrorBody, headers(("Retry-After" = u32, description = "Seconds until the caller's allowance of access reviews is renewed"))),
    (status = 503, description = "With --http-auth kubernetes: access could not be checked with the API server, or too many access reviews at once (with Retry-After)", body = ErrorBody, headers(("Retry-After" = u32, description = "With a 503 over the cap on access reviews: seconds to wait before retrying"))),
))]
async fn metrics(State(state): State<AppState>) -> Response {
    // whether this process leads at this instant (a lease lapsed in a freeze reads 0 at once)
    (state.metrics.leader).set(i64::from(state.readiness.leader.is_leader()));
    // streamed a chunk at a time: the per-Eru series of a large fleet are tens of MB of text
    let chunks = state
        .metrics
        .chunks()
        .map(|chunk| Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(chunk)));
    (
        [("content-type", "text/plain; version=0.0.4")],
        axum::body::Body::from_stream(futures::stream::iter(chunks)),
    )
        .into_response()
}
