//! The HTTP API (axum): journal listings, the OpenAPI document generated from these handlers,
//! Prometheus metrics and health. Bad parameters get a 400 with `{"error": "..."}`; no query
//! string produces a 5xx (tests/http.rs checks that with a property test).

use axum::{
    Json, Router,
    extract::{FromRequestParts, State},
    http::{StatusCode, request::Parts},
    response::{IntoResponse, Response},
    routing::get,
};
use serde::de::DeserializeOwned;
use serde_json::json;
use utoipa::OpenApi;

use crate::{
    history::{
        self, ErrorBody, HistoryPage, HistoryParams, MissedItem, MissedPage, MissedParams, QueryError,
        RestartItem, TransitionItem, TransitionPage, TransitionParams, Window,
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
}

/// The OpenAPI 3 document of this API.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "eru-operator",
        description = "Restart history, state transitions and the missed-slot audit of the ERU operator's journal."
    ),
    paths(
        history_handler,
        transitions_handler,
        missed_handler,
        healthz,
        readyz,
        metrics
    ),
    components(schemas(
        HistoryPage,
        RestartItem,
        TransitionPage,
        TransitionItem,
        MissedPage,
        MissedItem,
        Window,
        ErrorBody
    ))
)]
pub struct ApiDoc;

/// The router.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/history", get(history_handler))
        .route("/transitions", get(transitions_handler))
        .route("/missed", get(missed_handler))
        .route("/openapi.json", get(|| async { Json(ApiDoc::openapi()) }))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such endpoint") })
        .with_state(state)
}

/// An error answer: a status and `{"error": "..."}`.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(ErrorBody { error: self.message })).into_response()
    }
}

impl From<QueryError> for ApiError {
    fn from(e: QueryError) -> Self {
        match e {
            QueryError::Invalid(message) => Self::new(StatusCode::BAD_REQUEST, message),
            QueryError::Journal(e) => {
                tracing::error!(error = %e, "journal query failed");
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "the journal is unavailable")
            }
        }
    }
}

/// Query parameters, refused with a JSON 400 when malformed or unknown.
pub struct Params<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::try_from_uri(&parts.uri)
            .map(|q| Params(q.0))
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.body_text()))
    }
}

/// Restarts, newest first.
#[utoipa::path(get, path = "/history", params(HistoryParams), responses(
    (status = 200, description = "A page of restarts", body = HistoryPage),
    (status = 400, description = "Bad parameters", body = ErrorBody),
))]
async fn history_handler(
    State(state): State<AppState>,
    Params(p): Params<HistoryParams>,
) -> Result<Json<HistoryPage>, ApiError> {
    Ok(Json(history::history(&state.journal, &p).await?))
}

/// State-machine transitions, newest first.
#[utoipa::path(get, path = "/transitions", params(TransitionParams), responses(
    (status = 200, description = "A page of transitions", body = TransitionPage),
    (status = 400, description = "Bad parameters", body = ErrorBody),
))]
async fn transitions_handler(
    State(state): State<AppState>,
    Params(p): Params<TransitionParams>,
) -> Result<Json<TransitionPage>, ApiError> {
    Ok(Json(history::transitions(&state.journal, &p).await?))
}

/// Slots that were not restarted, with reason and downtime window, newest first.
#[utoipa::path(get, path = "/missed", params(MissedParams), responses(
    (status = 200, description = "A page of missed and skipped slots", body = MissedPage),
    (status = 400, description = "Bad parameters", body = ErrorBody),
))]
async fn missed_handler(
    State(state): State<AppState>,
    Params(p): Params<MissedParams>,
) -> Result<Json<MissedPage>, ApiError> {
    Ok(Json(history::missed(&state.journal, &p).await?))
}

/// The process is alive.
#[utoipa::path(get, path = "/healthz", responses((status = 200, description = "alive")))]
async fn healthz() -> &'static str {
    "ok"
}

/// Ready once the journal is open, the CRDs are established and the watch caches synced.
#[utoipa::path(get, path = "/readyz", responses(
    (status = 200, description = "ready"),
    (status = 503, description = "not ready; the body says which part"),
))]
async fn readyz(State(state): State<AppState>) -> Response {
    use std::sync::atomic::Ordering::Relaxed;
    let r = &state.readiness;
    let body = json!({
        "journal": r.journal.load(Relaxed),
        "crds": r.crds.load(Relaxed),
        "caches": r.caches.load(Relaxed),
    });
    let status = if r.is_ready() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// Prometheus metrics, text format.
#[utoipa::path(get, path = "/metrics", responses((status = 200, description = "Prometheus text format")))]
async fn metrics(State(state): State<AppState>) -> Response {
    (
        [("content-type", "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
        .into_response()
}
