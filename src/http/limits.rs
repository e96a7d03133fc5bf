//! What bounds a request before and while it runs: the URL's and the headers' size, its path's
//! parameters (checked before any access review), the caller's access (with `--http-auth
//! kubernetes`, [`super::auth`]), a deadline on the whole answer, and a
//! cap on journal queries running at once, so a burst of heavy reads queues briefly and then gets a
//! 503 with `Retry-After` instead of taking the journal's connections from the reconciles and the
//! journal writer.

use std::{sync::Arc, time::Duration};

use axum::{
    extract::{FromRequestParts, Request, State},
    http::{StatusCode, header, request::Parts},
    middleware::Next,
    response::{IntoResponse, Response},
};
use tokio::sync::{Semaphore, SemaphorePermit};

use super::{
    ApiError,
    auth::{Auth, Identity, Refusal},
    queries::QueryThread,
};
use crate::runtime::urgent::Urgent;

/// Longest request target (path and query), in bytes: longer gets a 414.
pub const MAX_URI: usize = 8 * 1024;
/// Most bytes of request headers (names and values): more gets a 431.
pub const MAX_HEADERS: usize = 16 * 1024;
/// How long a request may wait for a place among the journal queries before its 503.
const QUEUE_WAIT: Duration = Duration::from_secs(1);
/// How long no restart patch must have begun before a query runs after a burst of them.
const SETTLE: Duration = Duration::from_millis(250);
/// What a 503 over the cap tells the client to wait, in seconds.
pub const RETRY_AFTER_SECONDS: u32 = 1;

/// The paths anyone may read: the probes, the index of links, the API's document.
const OPEN: [&str; 4] = ["/healthz", "/readyz", "/", "/openapi.json"];
/// The paths answered on the caller's runtime, not on the query thread: the probes and the
/// metrics must not wait behind a crowd of history readers.
const PROMPT: [&str; 3] = ["/healthz", "/readyz", "/metrics"];

/// The HTTP API's bounds and, with `--http-auth kubernetes`, its access checks.
pub struct Guard {
    pub auth: Option<Auth>,
    queries: Semaphore,
    request_timeout: Duration,
    /// Where the answers but [`PROMPT`]'s are built (`None`: on the caller's runtime).
    thread: Option<QueryThread>,
    /// The restart patches in flight, whose burst a query waits out (`None`: no wait).
    urgent: Option<Urgent>,
}

impl Guard {
    /// No access checks; the default bounds (tests, benches, `--http-auth none`).
    pub fn open() -> Self {
        Self::new(None, 2, Duration::from_secs(30))
    }

    pub fn new(auth: Option<Auth>, max_queries: usize, request_timeout: Duration) -> Self {
        Self {
            auth,
            queries: Semaphore::new(max_queries),
            request_timeout,
            thread: None,
            urgent: None,
        }
    }

    /// The answers but the probes' and the metrics' built on `thread`, each journal query after
    /// a burst of restart patches has ended (`eru-operator run`).
    pub fn behind(self, thread: QueryThread, urgent: Urgent) -> Self {
        Self {
            thread: Some(thread),
            urgent: Some(urgent),
            ..self
        }
    }

    /// A place among the journal queries, or the 503 that says to come back.
    pub async fn query(&self) -> Result<SemaphorePermit<'_>, ApiError> {
        match tokio::time::timeout(QUEUE_WAIT, self.queries.acquire()).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(ApiError::busy()),
        }
    }

    /// [`Guard::scope`], then a place among the journal queries, held while the answer is built,
    /// and the end of a burst of restart patches if one is on (the request's timeout bounds the
    /// wait): what every endpoint that reads the journal does first.
    pub async fn admit(
        &self,
        caller: &Caller,
        namespace: Option<&str>,
        whole: bool,
    ) -> Result<(Option<Vec<String>>, SemaphorePermit<'_>), ApiError> {
        let scope = self.scope(caller, namespace, whole).await?;
        let place = self.query().await?;
        if let Some(urgent) = &self.urgent {
            urgent.quiet(SETTLE).await;
        }
        Ok((scope, place))
    }

    /// The namespaces `caller` may read history of, for a request naming `namespace` or not
    /// (see [`Auth::scope`]); `None`: no restriction beyond the request's own filter.
    pub async fn scope(
        &self,
        caller: &Caller,
        namespace: Option<&str>,
        whole: bool,
    ) -> Result<Option<Vec<String>>, ApiError> {
        match (&self.auth, &caller.0) {
            (None, _) => Ok(None),
            (Some(auth), Some(who)) => Ok(auth.scope(who, namespace, whole).await?),
            (Some(_), None) => Err(Refusal::Unauthenticated("a bearer token is required".into()).into()),
        }
    }
}

/// The authenticated caller of a request (`None` without `--http-auth kubernetes`).
#[derive(Clone, Debug)]
pub struct Caller(pub Option<Identity>);

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(Caller(parts.extensions.get::<Identity>().cloned()))
    }
}

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::Unauthenticated(why) => ApiError::new(StatusCode::UNAUTHORIZED, why),
            Refusal::Forbidden(why) => ApiError::new(StatusCode::FORBIDDEN, why),
            Refusal::Unavailable(why) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, why),
            Refusal::Busy => {
                ApiError::retry_later("too many access reviews at once; retry after the Retry-After seconds")
            }
            Refusal::OverBudget(why, seconds) => ApiError::too_many(why, seconds),
        }
    }
}

/// The middleware: sizes, then access, then the answer within the deadline.
pub async fn guard(State(guard): State<Arc<Guard>>, mut request: Request, next: Next) -> Response {
    let target = request.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if target > MAX_URI {
        return ApiError::new(
            StatusCode::URI_TOO_LONG,
            format!("the request target is {target} bytes; at most {MAX_URI} are read"),
        )
        .into_response();
    }
    let headers: usize = (request.headers().iter())
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum();
    if headers > MAX_HEADERS {
        return ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!("the request headers are {headers} bytes; at most {MAX_HEADERS} are read"),
        )
        .into_response();
    }
    // a path's parameters before anything is asked of the API server on its behalf
    if let Some(refused) = super::refused_path(request.uri().path()) {
        return refused;
    }
    let answer = async {
        if let Some(auth) = &guard.auth
            && !OPEN.contains(&request.uri().path())
        {
            let authorization = request.headers().get(header::AUTHORIZATION);
            let authorization = authorization.and_then(|v| v.to_str().ok());
            let who = auth.authenticate(authorization).await?;
            if request.uri().path() == "/metrics" {
                auth.may_read_metrics(&who).await?;
            }
            request.extensions_mut().insert(who);
        }
        match &guard.thread {
            Some(thread) if !PROMPT.contains(&request.uri().path()) => {
                // a panic there is a bug, and a 500 says so
                (thread.run(next.run(request)).await).map_err(|e| {
                    ApiError::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("the answer failed: {e}"),
                    )
                })
            }
            _ => Ok(next.run(request).await),
        }
    };
    match tokio::time::timeout(guard.request_timeout, answer).await {
        Ok(Ok(response)) => response,
        Ok(Err(refused)) => refused.into_response(),
        Err(_) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "no answer within {} s; narrow the query (a shorter window, a namespace or name)",
                guard.request_timeout.as_secs()
            ),
        )
        .into_response(),
    }
}
