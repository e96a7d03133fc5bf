//! What every answer shares: the JSON error body with its status (and `WWW-Authenticate`,
//! `Retry-After` where they apply), `Cache-Control: no-store`, `X-Content-Type-Options: nosniff`,
//! on pages a Content-Security-Policy that allows no script, no external asset and no framing,
//! and query parameters refused with a 400 naming the parameter.

use axum::{
    Json,
    extract::FromRequestParts,
    http::{HeaderValue, StatusCode, header, request::Parts},
    response::{IntoResponse, Response},
};
use serde::de::DeserializeOwned;

use super::limits;
use crate::history::{self, ErrorBody, QueryError};

/// The pages' policy: nothing but their own inline style and SVG (no script, no request to
/// anywhere but the filter form's own `/ui`), and no page may frame them (clickjacking).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// What every answer carries: `Cache-Control: no-store`, `X-Content-Type-Options: nosniff`, on
/// HTML the pages' security headers, and for a 405 (axum's, which sets `Allow`) the same JSON
/// body as every other error.
pub(super) async fn contract_headers(response: Response) -> Response {
    let mut response = if response.status() == StatusCode::METHOD_NOT_ALLOWED {
        let allow = response.headers().get(header::ALLOW).cloned();
        let mut refused = ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!(
                "method not allowed; this endpoint allows {}",
                allow
                    .as_ref()
                    .and_then(|a| a.to_str().ok())
                    .unwrap_or("GET, HEAD")
            ),
        )
        .into_response();
        if let Some(allow) = allow {
            refused.headers_mut().insert(header::ALLOW, allow);
        }
        refused
    } else {
        response
    };
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    let html = (headers.get(header::CONTENT_TYPE))
        .and_then(|t| t.to_str().ok())
        .is_some_and(|t| t.starts_with("text/html"));
    if html {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        );
        // for browsers without CSP's frame-ancestors
        headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    }
    response
}

/// An error answer: a status and `{"error": "..."}`.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    /// Seconds for a `Retry-After` header (a 503 over a cap, a 429 over the caller's allowance).
    retry_after: Option<u32>,
}

impl ApiError {
    pub(super) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            retry_after: None,
        }
    }

    /// Over the cap on journal queries: a 503 with `Retry-After`.
    pub(super) fn busy() -> Self {
        Self::retry_later("too many journal queries at once; retry after the Retry-After seconds")
    }

    /// A 503 with `Retry-After` and `message`.
    pub(super) fn retry_later(message: &str) -> Self {
        Self {
            retry_after: Some(limits::RETRY_AFTER_SECONDS),
            ..Self::new(StatusCode::SERVICE_UNAVAILABLE, message)
        }
    }
}

impl ApiError {
    /// A 429 with `Retry-After` `seconds` and `message`: the caller spent its allowance.
    pub(super) fn too_many(message: impl Into<String>, seconds: u32) -> Self {
        Self {
            retry_after: Some(seconds),
            ..Self::new(StatusCode::TOO_MANY_REQUESTS, message)
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(ErrorBody { error: self.message })).into_response();
        let headers = response.headers_mut();
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
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

/// A 401's description in the document.
pub(super) const AUTHENTICATE: &str =
    "With --http-auth kubernetes: no bearer token, or one the cluster does not accept (TokenReview)";
/// A 403's description.
pub(super) const AUTHORISE: &str = "With --http-auth kubernetes: the caller may not get erus/history in the \
namespace named, or (an audit without namespace) cluster-wide; or, a listing without namespace by a caller \
without the cluster-wide grant, finding the namespaces it may read would take more access reviews than \
one caller may cause per 20 s (--http-caller-reviews): name a namespace";
/// A 429's description.
pub(super) const OVER_BUDGET: &str = "With --http-auth kubernetes: the caller spent the access reviews it may \
cause per 20 s (--http-caller-reviews); Retry-After says when its allowance is renewed";
/// A 414's description (a query string can be long enough).
pub(super) const TOO_LONG: &str = "The request target (path and query) is over 8 KiB";
/// A journal endpoint's 503.
pub(super) const UNAVAILABLE: &str = "The journal is unavailable; too many journal queries or access reviews \
at once (with Retry-After); no answer in time; or access could not be checked with the API server";

/// Query parameters, refused with a JSON 400 naming the parameter when outside their schema.
pub struct Params<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(Params(history::parse(parts.uri.query().unwrap_or_default())?))
    }
}
