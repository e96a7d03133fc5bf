//! Who may read what, decided by the cluster (`--http-auth kubernetes`), as kubebuilder's
//! operators do for their metrics: the bearer token is checked with a TokenReview, then each
//! question is a SubjectAccessReview.
//!
//! - `/healthz`, `/readyz` (probes), `/` (a list of links) and `/openapi.json` (the API's shape,
//!   no data) are open.
//! - `/metrics` needs `get` on the non-resource URL `/metrics` (ClusterRole `eru-metrics-reader`).
//! - Everything that shows the journal needs `get` on `erus/history` (group `mtsre.meitu.com`) in
//!   the namespace it shows; granted cluster-wide, every namespace. A listing without `namespace=`
//!   shows the namespaces the caller may read, filtered in the query (pages stay full, cursors
//!   skip nothing); a filter naming another namespace is a 403. An audit (`/audit`, `/ui`) of
//!   every namespace needs the cluster-wide grant.
//!
//! Which namespaces a caller may read: the cluster-wide review first; else one review per
//! namespace of the cluster (listed at most every [`TTL`], [`MAX_NAMESPACES`] at most, a few
//! reviews at a time). A namespace-scoped grant is a RoleBinding, which lives only in a namespace
//! that exists, so no grant is missed. Every answer is cached for [`TTL`]; a review that fails
//! (API server down, the operator's RBAC missing) refuses with a 503: closed, never open.
//!
//! What an unauthenticated caller may cost: each new token is one TokenReview, and the reviews
//! in flight are capped (`--http-max-reviews` of each kind): a request that needs one more gets a
//! 503 with `Retry-After` at once, without waiting and without a review. The kinds are apart, so
//! that a flood of made-up tokens fills only its own: TokenReviews of tokens never accepted;
//! TokenReviews of tokens accepted within the last hour (a returning caller whose identity
//! expired from the cache); and SubjectAccessReviews and the namespace list, which only an
//! authenticated caller causes. The
//! caches are bounded and evict by W-TinyLFU ([moka]): a flood of one-off tokens is not admitted
//! over the identities and decisions callers keep asking for, so it neither empties the caches
//! nor evicts a legitimate caller. Concurrent requests for one uncached token or question share
//! one review. With `--http-token-audiences`, a token must be issued for one of them (sent as
//! the TokenReview's `spec.audiences`, checked in its status, as client-go's webhook
//! authenticator does).

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use futures::StreamExt;
use k8s_openapi::api::{
    authentication::v1::{TokenReview, TokenReviewSpec},
    authorization::v1::{
        NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    },
    core::v1::Namespace,
};
use kube::{
    Api, Client,
    api::{ListParams, PostParams},
};
use moka::future::Cache;
use prometheus::IntCounterVec;
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use crate::metrics::{Metrics, counter};

/// How long an identity or a decision is reused: a revoked grant or token stops working within
/// it.
pub const TTL: Duration = Duration::from_secs(20);
/// Entries a cache holds at most (the namespaces' holds one).
pub const CAPACITY: u64 = 10_000;
/// Namespaces reviewed for a caller without a cluster-wide grant, at most.
pub const MAX_NAMESPACES: u32 = 1_000;
/// Reviews in flight for one caller at once.
const REVIEWS_AT_ONCE: usize = 8;
/// A review the API server has not answered by then fails (closed).
const REVIEW_TIMEOUT: Duration = Duration::from_secs(5);
/// The reviews in flight of each kind when `--http-max-reviews` is not given.
pub const DEFAULT_MAX_REVIEWS: usize = 16;
/// How long a token that authenticated counts as returning: its next TokenReview (after its
/// identity's [`TTL`]) takes a place a flood of made-up tokens cannot take.
pub const RETURNING_TTL: Duration = Duration::from_secs(3600);

/// The group, resource and subresource whose `get` grants a namespace's history.
pub const HISTORY: (&str, &str, &str) = ("mtsre.meitu.com", "erus", "history");

/// An authenticated caller, as the TokenReview named it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Identity {
    pub user: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// Why a request is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// 401: no token, or one the cluster does not accept.
    Unauthenticated(String),
    /// 403: a valid caller without the grant.
    Forbidden(String),
    /// 503: the cluster could not be asked.
    Unavailable(String),
    /// 503 with `Retry-After`: the reviews in flight are at their cap.
    Busy,
}

/// What a question is about.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Question {
    /// `get` on a non-resource URL.
    Url(&'static str),
    /// `get` on Eru history in a namespace (`None`: cluster-wide).
    History(Option<String>),
}

/// A bounded cache whose entries live `ttl` ([`TTL`] but in tests).
fn cache<K, V>(ttl: Duration) -> Cache<K, V>
where
    K: std::hash::Hash + Eq + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    Cache::builder().max_capacity(CAPACITY).time_to_live(ttl).build()
}

/// Options of the access checks.
#[derive(Clone, Debug)]
pub struct AuthOptions {
    /// `--http-token-audiences`: a token must be issued for one of these (empty: the API
    /// server's own).
    pub audiences: Vec<String>,
    /// `--http-max-reviews`: reviews in flight at once, of each kind (strangers' tokens,
    /// returning tokens, access reviews).
    pub max_reviews: usize,
}

impl Default for AuthOptions {
    fn default() -> Self {
        Self {
            audiences: Vec::new(),
            max_reviews: DEFAULT_MAX_REVIEWS,
        }
    }
}

/// The reviews, and what they answered lately.
pub struct Auth {
    client: Client,
    audiences: Vec<String>,
    /// A place per TokenReview in flight of a token never accepted before (a flood of made-up
    /// tokens fills only these).
    strangers: Semaphore,
    /// A place per TokenReview in flight of a token accepted before (its identity expired from
    /// the cache): a returning caller is reviewed again whatever a flood of strangers does.
    returning: Semaphore,
    /// A place per SubjectAccessReview or namespace list in flight: only an authenticated caller
    /// causes them.
    access: Semaphore,
    /// The tokens (by hash) that authenticated within [`RETURNING_TTL`].
    accepted: Cache<[u8; 32], ()>,
    /// `eru_http_access_reviews_total{review, result}`.
    counted: IntCounterVec,
    /// By the token's SHA-256 (the tokens themselves are not kept): who it is, or why not.
    identities: Cache<[u8; 32], Result<Identity, String>>,
    decisions: Cache<(Identity, Question), bool>,
    namespaces: Cache<(), Arc<Vec<String>>>,
}

/// The review kinds of `eru_http_access_reviews_total`.
const REVIEWS: [&str; 3] = ["token", "access", "namespaces"];

/// The results of `eru_http_access_reviews_total` (its label: the name in snake case).
#[derive(Clone, Copy, strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
enum ReviewResult {
    Answered,
    /// An error, or no answer in 5 s.
    Failed,
    /// Not sent: `--http-max-reviews` of its kind were in flight.
    OverCap,
}

impl ReviewResult {
    fn label(self) -> &'static str {
        self.into()
    }
}

impl Auth {
    pub fn new(client: Client, options: AuthOptions, metrics: &Metrics) -> Self {
        Self::answers_kept(client, options, metrics, TTL)
    }

    /// [`Auth::new`] keeping each answer (who a token is, a decision, the namespaces) `ttl`.
    fn answers_kept(client: Client, options: AuthOptions, metrics: &Metrics, ttl: Duration) -> Self {
        let counted = counter(
            metrics.registry(),
            "eru_http_access_reviews_total",
            "Requests of the HTTP API's access checks to the API server (--http-auth kubernetes) by review (token: TokenReview, access: SubjectAccessReview, namespaces: the namespace list) and result (answered, failed: an error or no answer in 5 s, over_cap: not sent, --http-max-reviews of its kind were in flight; the request got a 503).",
            &["review", "result"],
        );
        for review in REVIEWS {
            for result in <ReviewResult as strum::VariantArray>::VARIANTS {
                counted.with_label_values(&[review, result.label()]);
            }
        }
        Self {
            client,
            audiences: options.audiences,
            strangers: Semaphore::new(options.max_reviews.max(1)),
            returning: Semaphore::new(options.max_reviews.max(1)),
            access: Semaphore::new(options.max_reviews.max(1)),
            accepted: Cache::builder()
                .max_capacity(CAPACITY)
                .time_to_live(RETURNING_TTL)
                .build(),
            counted,
            identities: cache(ttl),
            decisions: cache(ttl),
            namespaces: cache(ttl),
        }
    }

    /// The caller a request's `Authorization: Bearer <token>` stands for.
    pub async fn authenticate(&self, authorization: Option<&str>) -> Result<Identity, Refusal> {
        let token = bearer(authorization)?;
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let known = (self.identities)
            .try_get_with(key, self.review_token(token, key))
            .await
            .map_err(|refusal| (*refusal).clone())?;
        known.map_err(Refusal::Unauthenticated)
    }

    /// Runs `call`, a review of kind `review` (one of [`REVIEWS`]), within the cap on reviews in
    /// flight of `places` and [`REVIEW_TIMEOUT`].
    async fn review<T>(
        &self,
        places: &Semaphore,
        review: &'static str,
        what: &str,
        call: impl Future<Output = kube::Result<T>>,
    ) -> Result<T, Refusal> {
        let Ok(_place) = places.try_acquire() else {
            self.counted
                .with_label_values(&[review, ReviewResult::OverCap.label()])
                .inc();
            return Err(Refusal::Busy);
        };
        let answer = within(call, what).await;
        let result = if answer.is_ok() {
            ReviewResult::Answered
        } else {
            ReviewResult::Failed
        };
        self.counted.with_label_values(&[review, result.label()]).inc();
        answer
    }

    async fn review_token(&self, token: &str, key: [u8; 32]) -> Result<Result<Identity, String>, Refusal> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: (!self.audiences.is_empty()).then(|| self.audiences.clone()),
            },
            ..TokenReview::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let places = if self.accepted.contains_key(&key) {
            &self.returning
        } else {
            &self.strangers
        };
        let answer = (self.review(places, "token", "TokenReview", async move {
            api.create(&PostParams::default(), &review).await
        }))
        .await?;
        let status = answer.status.unwrap_or_default();
        let audience_ok = audience_accepted(&self.audiences, status.audiences.as_deref());
        Ok(match (status.authenticated, status.user) {
            (Some(true), Some(user)) if audience_ok => {
                self.accepted.insert(key, ()).await;
                Ok(Identity {
                    user: user.username.unwrap_or_default(),
                    uid: user.uid.unwrap_or_default(),
                    groups: user.groups.unwrap_or_default(),
                    extra: user.extra.unwrap_or_default(),
                })
            }
            (Some(true), Some(_)) => {
                tracing::debug!(audiences = ?status.audiences, "a bearer token was issued for another audience");
                Err("the bearer token is not valid for this API's audience (--http-token-audiences)".into())
            }
            _ => {
                // the review's error names the token's fault; it is logged, not answered
                tracing::debug!(error = ?status.error, "a bearer token was not accepted");
                Err(if self.audiences.is_empty() {
                    "the bearer token is not valid (expired, revoked, or not this cluster's)".into()
                } else {
                    format!(
                        "the bearer token is not valid (expired, revoked, not this cluster's, or not issued \
                         for the audience {})",
                        self.audiences.join(" or ")
                    )
                })
            }
        })
    }

    /// May `who` read `/metrics`?
    pub async fn may_read_metrics(&self, who: &Identity) -> Result<(), Refusal> {
        if self.allowed(who, Question::Url("/metrics")).await? {
            Ok(())
        } else {
            Err(Refusal::Forbidden(format!(
                "{} may not get /metrics (grant the ClusterRole eru-metrics-reader)",
                who.user
            )))
        }
    }

    /// The namespaces `who` may read history of, for a request naming `namespace` or none:
    /// `None` when every namespace (or the one named) is permitted, else the permitted ones. With
    /// `whole`, only all or nothing: an audit of every namespace is not cut down to some.
    pub async fn scope(
        &self,
        who: &Identity,
        namespace: Option<&str>,
        whole: bool,
    ) -> Result<Option<Vec<String>>, Refusal> {
        if let Some(namespace) = namespace {
            return if self
                .allowed(who, Question::History(Some(namespace.into())))
                .await?
            {
                Ok(None)
            } else {
                Err(Refusal::Forbidden(format!(
                    "{} may not read Eru history in namespace {namespace} (needs get on erus/history there)",
                    who.user
                )))
            };
        }
        if self.allowed(who, Question::History(None)).await? {
            return Ok(None);
        }
        if whole {
            return Err(Refusal::Forbidden(format!(
                "{} may not read Eru history cluster-wide; name a namespace (namespace=...)",
                who.user
            )));
        }
        let namespaces = self.namespaces().await?;
        let answers: Vec<Result<(String, bool), Refusal>> = futures::stream::iter(namespaces.iter().cloned())
            .map(|ns: String| async move {
                let allowed = self.allowed(who, Question::History(Some(ns.clone()))).await?;
                Ok((ns, allowed))
            })
            .buffer_unordered(REVIEWS_AT_ONCE)
            .collect()
            .await;
        let mut permitted = Vec::new();
        for answer in answers {
            let (namespace, allowed) = answer?;
            if allowed {
                permitted.push(namespace);
            }
        }
        permitted.sort();
        Ok(Some(permitted))
    }

    /// The cluster's namespaces (names only), first [`MAX_NAMESPACES`] in the API server's order.
    async fn namespaces(&self) -> Result<Arc<Vec<String>>, Refusal> {
        let list = async {
            let api: Api<Namespace> = Api::all(self.client.clone());
            let listed = (self.review(&self.access, "namespaces", "listing namespaces", async move {
                api.list_metadata(&ListParams::default().limit(MAX_NAMESPACES))
                    .await
            }))
            .await?;
            Ok(Arc::new(
                listed.items.into_iter().filter_map(|n| n.metadata.name).collect(),
            ))
        };
        (self.namespaces.try_get_with((), list))
            .await
            .map_err(|refusal: Arc<Refusal>| (*refusal).clone())
    }

    async fn allowed(&self, who: &Identity, question: Question) -> Result<bool, Refusal> {
        let key = (who.clone(), question.clone());
        let ask = async {
            let review = SubjectAccessReview {
                spec: access_review(who, &question),
                ..SubjectAccessReview::default()
            };
            let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
            let answer = (self.review(&self.access, "access", "SubjectAccessReview", async move {
                api.create(&PostParams::default(), &review).await
            }))
            .await?;
            let status = answer.status.unwrap_or_default();
            if let Some(error) = status.evaluation_error.filter(|_| !status.allowed) {
                // an authorizer that could not decide: refused, and said why in the log
                tracing::warn!(%error, user = %who.user, "a SubjectAccessReview could not be evaluated");
            }
            Ok::<_, Refusal>(status.allowed)
        };
        (self.decisions.try_get_with(key, ask))
            .await
            .map_err(|refusal| (*refusal).clone())
    }
}

/// Whether a TokenReview's status `audiences` accepts a token when `wanted` were asked for: any
/// token if none were, else one of them must be in the status (its absence is a refusal).
fn audience_accepted(wanted: &[String], status: Option<&[String]>) -> bool {
    wanted.is_empty() || status.unwrap_or_default().iter().any(|a| wanted.contains(a))
}

/// The SubjectAccessReview asking `question` of `who`.
fn access_review(who: &Identity, question: &Question) -> SubjectAccessReviewSpec {
    let (non_resource, resource) = match question {
        Question::Url(path) => (
            Some(NonResourceAttributes {
                path: Some((*path).into()),
                verb: Some("get".into()),
            }),
            None,
        ),
        Question::History(namespace) => (
            None,
            Some(ResourceAttributes {
                group: Some(HISTORY.0.into()),
                resource: Some(HISTORY.1.into()),
                subresource: Some(HISTORY.2.into()),
                verb: Some("get".into()),
                namespace: namespace.clone(),
                ..ResourceAttributes::default()
            }),
        ),
    };
    SubjectAccessReviewSpec {
        user: Some(who.user.clone()),
        uid: Some(who.uid.clone()).filter(|u| !u.is_empty()),
        groups: Some(who.groups.clone()),
        extra: Some(who.extra.clone()).filter(|e| !e.is_empty()),
        non_resource_attributes: non_resource,
        resource_attributes: resource,
    }
}

/// A review call, failed closed: an error or no answer in [`REVIEW_TIMEOUT`] is a 503.
async fn within<T>(call: impl Future<Output = kube::Result<T>>, what: &str) -> Result<T, Refusal> {
    match tokio::time::timeout(REVIEW_TIMEOUT, call).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => {
            tracing::error!(error = %e, "{what} failed; refusing the request");
            Err(Refusal::Unavailable(format!(
                "cannot check access with the Kubernetes API server ({what} failed); try again shortly"
            )))
        }
        Err(_) => {
            tracing::error!("{what} got no answer in {REVIEW_TIMEOUT:?}; refusing the request");
            Err(Refusal::Unavailable(format!(
                "cannot check access with the Kubernetes API server ({what} timed out); try again shortly"
            )))
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header.
fn bearer(authorization: Option<&str>) -> Result<&str, Refusal> {
    let Some(value) = authorization else {
        return Err(Refusal::Unauthenticated(
            "a bearer token is required (Authorization: Bearer <token>)".into(),
        ));
    };
    match value.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() => {
            Ok(token.trim())
        }
        _ => Err(Refusal::Unauthenticated(
            "the Authorization header must be 'Bearer <token>'".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// An API server that answers every TokenReview "authenticated as `reviewed`", each only once
    /// `open` lets it; counts the requests it got.
    fn api_server(open: Arc<Semaphore>, requests: Arc<AtomicUsize>) -> Client {
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let (open, requests) = (open.clone(), requests.clone());
            async move {
                requests.fetch_add(1, Ordering::SeqCst);
                assert!(
                    request.uri().path().ends_with("/tokenreviews"),
                    "{}",
                    request.uri()
                );
                open.acquire().await.unwrap().forget();
                let review = serde_json::json!({
                    "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                    "spec": {}, "status": {"authenticated": true, "user": {"username": "reviewed"}}
                });
                Ok::<_, std::convert::Infallible>(http::Response::new(axum::body::Body::from(
                    review.to_string(),
                )))
            }
        });
        Client::new(service, "default")
    }

    #[tokio::test]
    async fn reviews_past_the_cap_are_refused_at_once_and_one_token_is_reviewed_once() {
        let (open, requests) = (Arc::new(Semaphore::new(0)), Arc::new(AtomicUsize::new(0)));
        let options = AuthOptions {
            audiences: Vec::new(),
            max_reviews: 2,
        };
        let auth = Arc::new(Auth::new(
            api_server(open.clone(), requests.clone()),
            options,
            &Metrics::new(),
        ));
        let ask = |token: &'static str| {
            let auth = auth.clone();
            tokio::spawn(async move { auth.authenticate(Some(&format!("Bearer {token}"))).await })
        };
        // two tokens under review: the cap is full
        let (first, second) = (ask("one"), ask("two"));
        while requests.load(Ordering::SeqCst) < 2 {
            tokio::task::yield_now().await;
        }
        // a third token: refused now, no review sent
        assert_eq!(auth.authenticate(Some("Bearer three")).await, Err(Refusal::Busy));
        // the first token again: it waits for the review in flight, it sends none
        let again = ask("one");
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert!(!again.is_finished());
        open.add_permits(2);
        for answer in [first, second, again] {
            assert_eq!(answer.await.unwrap().unwrap().user, "reviewed");
        }
        assert_eq!(requests.load(Ordering::SeqCst), 2, "one review per token");
        // answered: from the cache, without a review
        assert!(auth.authenticate(Some("Bearer two")).await.is_ok());
        assert_eq!(requests.load(Ordering::SeqCst), 2);
        // a flood of strangers fills their places; a returning token (its identity expired)
        // is reviewed from places of its own
        let (flood_a, flood_b) = (ask("stranger-a"), ask("stranger-b"));
        while requests.load(Ordering::SeqCst) < 4 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            auth.authenticate(Some("Bearer stranger-c")).await,
            Err(Refusal::Busy)
        );
        let one: [u8; 32] = Sha256::digest(b"one").into();
        auth.identities.invalidate(&one).await;
        let returning = ask("one");
        while requests.load(Ordering::SeqCst) < 5 {
            tokio::task::yield_now().await;
        }
        open.add_permits(3);
        for answer in [flood_a, flood_b, returning] {
            assert!(answer.await.unwrap().is_ok());
        }
        let counted = |result: &str| auth.counted.with_label_values(&["token", result]).get();
        assert_eq!((counted("answered"), counted("over_cap")), (5, 2));
    }

    /// An API server whose SubjectAccessReviews answer `granted` as it is at the time; counts
    /// them.
    fn authorizer(granted: Arc<std::sync::atomic::AtomicBool>, reviews: Arc<AtomicUsize>) -> Client {
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let (granted, reviews) = (granted.clone(), reviews.clone());
            async move {
                assert!(
                    request.uri().path().ends_with("/subjectaccessreviews"),
                    "{}",
                    request.uri()
                );
                reviews.fetch_add(1, Ordering::SeqCst);
                let review = serde_json::json!({
                    "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                    "spec": {}, "status": {"allowed": granted.load(Ordering::SeqCst)}
                });
                Ok::<_, std::convert::Infallible>(http::Response::new(axum::body::Body::from(
                    review.to_string(),
                )))
            }
        });
        Client::new(service, "default")
    }

    /// A revoked grant holds until its answer's TTL ends, and not after (mutation: the cache
    /// without `time_to_live`: a grant would hold as long as the process).
    #[tokio::test]
    async fn a_revoked_grant_ends_with_its_answers_ttl() {
        let ttl = Duration::from_millis(300);
        let granted = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let reviews = Arc::new(AtomicUsize::new(0));
        let auth = Auth::answers_kept(
            authorizer(granted.clone(), reviews.clone()),
            AuthOptions::default(),
            &Metrics::new(),
            ttl,
        );
        let who = Identity {
            user: "prometheus".into(),
            uid: String::new(),
            groups: Vec::new(),
            extra: BTreeMap::new(),
        };
        assert_eq!(auth.may_read_metrics(&who).await, Ok(()));
        granted.store(false, Ordering::SeqCst);
        // within the TTL: the answer kept, no review sent
        assert_eq!(auth.may_read_metrics(&who).await, Ok(()));
        assert_eq!(reviews.load(Ordering::SeqCst), 1);
        // past it: asked again, and refused
        tokio::time::sleep(ttl * 2).await;
        assert!(matches!(
            auth.may_read_metrics(&who).await,
            Err(Refusal::Forbidden(_))
        ));
        assert_eq!(reviews.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn only_a_bearer_token_is_taken() {
        assert_eq!(bearer(Some("Bearer abc")), Ok("abc"));
        assert_eq!(bearer(Some("bearer  abc ")), Ok("abc"));
        for refused in [
            None,
            Some("Basic abc"),
            Some("Bearer"),
            Some("Bearer  "),
            Some("abc"),
        ] {
            assert!(
                matches!(bearer(refused), Err(Refusal::Unauthenticated(_))),
                "{refused:?}"
            );
        }
    }

    #[test]
    fn a_token_for_another_audience_is_refused() {
        let ours = ["eru-operator".to_string()];
        assert!(audience_accepted(&[], None), "no audience asked: any token");
        assert!(audience_accepted(&ours, Some(&["eru-operator".to_string()])));
        assert!(!audience_accepted(
            &ours,
            Some(&["https://kubernetes.default.svc".to_string()])
        ));
        assert!(
            !audience_accepted(&ours, None),
            "asked, and the status names none"
        );
    }

    #[test]
    fn history_is_a_subresource_review_in_the_namespace_or_cluster_wide() {
        let who = Identity {
            user: "alice".into(),
            uid: String::new(),
            groups: vec!["team-a".into()],
            extra: BTreeMap::new(),
        };
        let spec = access_review(&who, &Question::History(Some("a".into())));
        let attributes = spec.resource_attributes.unwrap();
        assert_eq!(
            (attributes.group.as_deref(), attributes.resource.as_deref()),
            (Some("mtsre.meitu.com"), Some("erus"))
        );
        assert_eq!(attributes.subresource.as_deref(), Some("history"));
        assert_eq!(attributes.namespace.as_deref(), Some("a"));
        assert_eq!(spec.uid, None, "an empty uid is not sent");
        // a Group grant (deploy/examples/history-reader.yaml) holds only if the caller's groups
        // are reviewed (mutation: `groups: Some(..)` → `None` in `access_review`)
        assert_eq!(spec.groups, Some(vec!["team-a".to_string()]));
        assert_eq!(spec.user.as_deref(), Some("alice"));
        let cluster = access_review(&who, &Question::History(None));
        assert_eq!(cluster.resource_attributes.unwrap().namespace, None);
        let metrics = access_review(&who, &Question::Url("/metrics"));
        assert_eq!(
            metrics.non_resource_attributes.unwrap().path.as_deref(),
            Some("/metrics")
        );
    }
}
