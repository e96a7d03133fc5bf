//! The API server's "slow down": a `429 Too Many Requests`, which API Priority and Fairness (or
//! the max-in-flight filter) answers when the operator's priority level has no seat and no queue
//! place for a request, before the request is handled. So a 429'd request is safe to send again,
//! whatever its verb; the operator waits the answer's `Retry-After` (at least; doubled on every
//! further 429, with jitter, capped at [`MAX_WAIT`]) and sends it again, up to [`MAX_RETRIES`]
//! times, and never past its [`Budget`]:
//!
//! - a restart patch waits no later than its slot's deadline (`startingDeadlineSeconds`): the
//!   429 then reaches the pass as a failed patch, which the journal records as such;
//! - an Event is never sent again (Events are the first thing dropped under pressure, counted in
//!   `eru_events_dropped_total`);
//! - statuses and everything else retry up to the cap; a status writer or a watch that still fails
//!   backs off on its own.
//!
//! Every 429 is counted in `eru_api_throttled_total{request}`. Other errors (a 503 from a
//! restarting API server, a 409, a 422) are never retried here: they may have been handled, and
//! their callers decide. kube's own retry layer (which retries 429, 503 and 504 for up to 15
//! attempts, waiting up to 1,000 s) is off.

use std::time::Duration;

use http::{Request, Response, StatusCode};
use kube::client::Body;
use prometheus::IntCounterVec;
use tokio::time::Instant;
use tower::{BoxError, retry::Policy};

/// Retries of one request at most.
pub const MAX_RETRIES: u32 = 8;
/// The longest wait before one retry.
pub const MAX_WAIT: Duration = Duration::from_secs(30);
/// The first retry's wait when the answer names none (APF names 1 s).
const FIRST_WAIT: Duration = Duration::from_millis(500);

/// What a request is, for its retry budget and the throttle metric's label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Class {
    /// A slot's restart patch: the one write whose lateness users see.
    Restart,
    Status,
    /// Best effort: a throttled Event is dropped, not retried.
    Event,
    #[default]
    Other,
}

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Restart => "restart",
            Class::Status => "status",
            Class::Event => "event",
            Class::Other => "other",
        }
    }
}

/// How long the requests of a task may be retried.
#[derive(Clone, Copy, Debug, Default)]
pub struct Budget {
    pub class: Class,
    /// No retry is sent after this instant.
    pub until: Option<Instant>,
}

tokio::task_local! {
    static BUDGET: Budget;
}

/// Runs `f` with `budget` for the requests it sends (the retry policy runs in the caller's task,
/// as the client's response future is polled there).
pub async fn within<F: Future>(budget: Budget, f: F) -> F::Output {
    BUDGET.scope(budget, f).await
}

/// The retry policy of the operator's client (a `tower::retry::RetryLayer` around kube's stack).
#[derive(Clone)]
pub struct Throttled {
    retries: u32,
    throttled: IntCounterVec,
}

impl Throttled {
    /// A policy counting 429s in `throttled` (label `request`, a [`Class`]).
    pub fn new(throttled: IntCounterVec) -> Self {
        Self {
            retries: 0,
            throttled,
        }
    }
}

/// How long to wait before retry number `retries` (0-based) of an answer that said `retry_after`.
pub fn wait(retries: u32, retry_after: Option<Duration>, jitter: f64) -> Duration {
    let backoff = FIRST_WAIT.saturating_mul(1 << retries.min(16));
    let base = retry_after.unwrap_or(FIRST_WAIT).max(backoff).min(MAX_WAIT);
    base.mul_f64(1.0 + jitter.clamp(0.0, 1.0) / 4.0).min(MAX_WAIT)
}

/// The `Retry-After` of an answer, in seconds (the API server sends seconds, never a date).
fn retry_after<B>(response: &Response<B>) -> Option<Duration> {
    let value = response.headers().get(http::header::RETRY_AFTER)?;
    let seconds: u64 = value.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds))
}

/// A number in [0, 1) that differs between requests and processes (spreads retries apart).
fn jitter() -> f64 {
    use std::hash::{BuildHasher, RandomState};
    let bits = RandomState::new().hash_one(std::time::SystemTime::now());
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

impl<B> Policy<Request<Body>, Response<B>, BoxError> for Throttled {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        _request: &mut Request<Body>,
        result: &mut Result<Response<B>, BoxError>,
    ) -> Option<Self::Future> {
        let response = result.as_ref().ok()?;
        if response.status() != StatusCode::TOO_MANY_REQUESTS {
            return None;
        }
        let budget = BUDGET.try_with(|b| *b).unwrap_or_default();
        self.throttled.with_label_values(&[budget.class.as_str()]).inc();
        if budget.class == Class::Event || self.retries >= MAX_RETRIES {
            return None;
        }
        let wait = wait(self.retries, retry_after(response), jitter());
        let at = Instant::now() + wait;
        if budget.until.is_some_and(|until| at > until) {
            return None;
        }
        self.retries += 1;
        Some(tokio::time::sleep_until(at))
    }

    fn clone_request(&mut self, request: &Request<Body>) -> Option<Request<Body>> {
        // a streamed body cannot be sent twice (no request of the operator streams one)
        let body = request.body().try_clone()?;
        let mut clone = Request::builder()
            .method(request.method().clone())
            .uri(request.uri().clone())
            .version(request.version())
            .body(body)
            .ok()?;
        *clone.headers_mut() = request.headers().clone();
        *clone.extensions_mut() = request.extensions().clone();
        Some(clone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_at_least_what_the_server_asks_doubling_and_capped() {
        let s = Duration::from_secs;
        // the server's Retry-After first, then the doubling backoff once it is longer
        assert_eq!(wait(0, Some(s(1)), 0.0), s(1));
        assert_eq!(wait(1, Some(s(1)), 0.0), s(1));
        assert_eq!(wait(2, Some(s(1)), 0.0), s(2));
        assert_eq!(wait(3, Some(s(1)), 0.0), s(4));
        // no Retry-After: from half a second
        assert_eq!(wait(0, None, 0.0), Duration::from_millis(500));
        // jitter adds up to a quarter, never past the cap
        assert_eq!(wait(0, Some(s(4)), 1.0), s(5));
        assert_eq!(wait(20, Some(s(4)), 0.9), MAX_WAIT);
        assert_eq!(wait(0, Some(s(3600)), 0.0), MAX_WAIT);
    }

    fn answer(status: u16, retry_after: Option<&str>) -> Result<Response<()>, BoxError> {
        let mut response = Response::builder().status(status);
        if let Some(value) = retry_after {
            response = response.header("Retry-After", value);
        }
        Ok(response.body(()).unwrap())
    }

    fn counter() -> IntCounterVec {
        IntCounterVec::new(prometheus::Opts::new("t", "t"), &["request"]).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn retries_only_throttled_answers_within_the_budget() {
        let throttled = counter();
        let mut request = Request::new(Body::from(b"{}".to_vec()));
        // only a 429 is retried
        for status in [200, 409, 422, 500, 503, 504] {
            let mut policy = Throttled::new(throttled.clone());
            assert!(
                policy
                    .retry(&mut request, &mut answer(status, Some("1")))
                    .is_none(),
                "{status}"
            );
        }
        assert!(
            Throttled::new(throttled.clone())
                .retry(&mut request, &mut answer(429, Some("1")))
                .is_some()
        );
        assert_eq!(throttled.with_label_values(&["other"]).get(), 1);
        // at most MAX_RETRIES times
        let mut policy = Throttled::new(throttled.clone());
        let retried = (0..20)
            .filter(|_| policy.retry(&mut request, &mut answer(429, Some("1"))).is_some())
            .count();
        assert_eq!(retried, MAX_RETRIES as usize);
        // an Event is never retried; a restart patch not past its deadline
        let event = Budget {
            class: Class::Event,
            until: None,
        };
        let retried = within(event, async {
            Throttled::new(throttled.clone()).retry(&mut request, &mut answer(429, Some("1")))
        })
        .await;
        assert!(retried.is_none());
        assert_eq!(throttled.with_label_values(&["event"]).get(), 1);
        let restart = |seconds| Budget {
            class: Class::Restart,
            until: Some(Instant::now() + Duration::from_secs(seconds)),
        };
        let mut policy = Throttled::new(throttled.clone());
        let first = within(restart(3), async {
            policy.retry(&mut request, &mut answer(429, Some("2")))
        })
        .await;
        assert!(first.is_some(), "2 s (+ jitter ≤ 0.5 s) fits in a 3 s budget");
        let second = within(restart(1), async {
            policy.retry(&mut request, &mut answer(429, Some("2")))
        })
        .await;
        assert!(second.is_none(), "a 2 s wait ends past a deadline 1 s away");
        assert_eq!(throttled.with_label_values(&["restart"]).get(), 2);
    }
}
