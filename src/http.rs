//! The HTTP API (axum): journal queries, Prometheus metrics and health. Bad parameters get a 400
//! with `{"error": "..."}`; no query string produces a 5xx.

use axum::{
    Json, Router,
    extract::{FromRequestParts, State},
    http::{StatusCode, request::Parts},
    response::{IntoResponse, Response},
    routing::get,
};
use serde::{Deserialize, de::DeserializeOwned};
use serde_json::json;

use crate::{
    controller::Readiness,
    journal::{Filter, Journal},
    metrics::Metrics,
};

/// Default and maximum page size.
pub const DEFAULT_LIMIT: u32 = 100;
pub const MAX_LIMIT: u32 = 1000;

/// Shared state of the handlers.
#[derive(Clone)]
pub struct AppState {
    pub journal: Journal,
    pub metrics: Metrics,
    pub readiness: Readiness,
}

/// The router.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/history", get(history))
        .route("/transitions", get(transitions))
        .route("/missed", get(missed))
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
        (self.status, Json(json!({"error": self.message}))).into_response()
    }
}

impl From<crate::Error> for ApiError {
    fn from(e: crate::Error) -> Self {
        tracing::error!(error = %e, "journal query failed");
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "the journal is unavailable")
    }
}

/// Query parameters, refused with a JSON 400 when malformed or unknown.
pub struct Params<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        serde_urlencoded_from_str(query)
            .map(Params)
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e))
    }
}

fn serde_urlencoded_from_str<T: DeserializeOwned>(query: &str) -> Result<T, String> {
    axum::extract::Query::<T>::try_from_uri(
        &format!("/?{query}")
            .parse()
            .map_err(|_| "malformed query string".to_string())?,
    )
    .map(|q| q.0)
    .map_err(|e| e.body_text())
}

/// Filters common to the journal endpoints.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Query {
    pub kind: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub limit: Option<u32>,
}

impl Query {
    fn filter(self, allow_kind: bool) -> Result<Filter, ApiError> {
        if self.kind.is_some() && !allow_kind {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "unknown parameter `kind` for this endpoint",
            ));
        }
        let limit = self.limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("limit must be between 1 and {MAX_LIMIT}"),
            ));
        }
        Ok(Filter {
            kind: self.kind,
            namespace: self.namespace,
            name: self.name,
            limit,
        })
    }
}

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

async fn metrics(State(state): State<AppState>) -> Response {
    (
        [("content-type", "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
        .into_response()
}

async fn history(State(state): State<AppState>, Params(q): Params<Query>) -> Result<Response, ApiError> {
    let items = state.journal.restarts(&q.filter(false)?).await?;
    Ok(Json(json!({ "items": items })).into_response())
}

async fn transitions(State(state): State<AppState>, Params(q): Params<Query>) -> Result<Response, ApiError> {
    let items = state.journal.transitions(&q.filter(true)?).await?;
    Ok(Json(json!({ "items": items })).into_response())
}

async fn missed(State(state): State<AppState>, Params(q): Params<Query>) -> Result<Response, ApiError> {
    let items = state.journal.missed(&q.filter(false)?).await?;
    Ok(Json(json!({ "items": items })).into_response())
}
