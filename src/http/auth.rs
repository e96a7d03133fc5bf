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
//! What an authenticated caller may cost: every SubjectAccessReview a caller causes (an answer
//! not cached) is charged to its allowance, `--http-caller-reviews` per [`TTL`] window, keyed by
//! its user name (not by the token: a caller minting tokens gets no new allowance). Its reviews in
//! flight are [`CALLER_AT_ONCE`] at most, so one caller never holds every place of the shared
//! cap, and one sweep of the namespaces per caller runs at a time (the next finds the answers
//! cached). A sweep is counted before it starts: more reviews than the whole allowance is a 403
//! that says to name a namespace (it could never be answered whole), more than what is left of
//! it a 429 with `Retry-After` (the window's end); a listing is never answered from a part of
//! the namespaces.
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

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicU32, Ordering},
    },
    time::{Duration, Instant},
};

use futures::StreamExt;
use k8s_openapi::api::{
    authentication::v1::{TokenReview, TokenReviewSpec},
    authorization::v1::{
        NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
        SubjectAccessReviewStatus,
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
/// Access reviews of one caller in flight at once (a quarter of the default cap on them): one
/// caller cannot hold every place.
const CALLER_AT_ONCE: usize = 4;
/// Access reviews one caller may cause per [`TTL`] when `--http-caller-reviews` is not given.
pub const DEFAULT_CALLER_REVIEWS: u32 = 128;
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
    /// 429 with `Retry-After` (seconds): the caller's allowance of access reviews is spent for
    /// this window.
    OverBudget(String, u32),
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
    /// `--http-caller-reviews`: SubjectAccessReviews one caller may cause per [`TTL`].
    pub caller_reviews: u32,
}

impl Default for AuthOptions {
    fn default() -> Self {
        Self {
            audiences: Vec::new(),
            max_reviews: DEFAULT_MAX_REVIEWS,
            caller_reviews: DEFAULT_CALLER_REVIEWS,
        }
    }
}

/// One caller's allowance of access reviews for one window (its cache entry lives the window).
struct Allowance {
    /// Reviews charged in this window.
    spent: AtomicU32,
    /// A place per review of this caller in flight.
    at_once: Semaphore,
    /// Held by the caller's namespace sweep: one at a time.
    sweep: tokio::sync::Mutex<()>,
    began: Instant,
}

impl Allowance {
    fn new() -> Self {
        Self {
            spent: AtomicU32::new(0),
            at_once: Semaphore::new(CALLER_AT_ONCE),
            sweep: tokio::sync::Mutex::new(()),
            began: Instant::now(),
        }
    }

    /// Charges one review if fewer than `limit` were charged.
    fn charge(&self, limit: u32) -> bool {
        (self.spent)
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |spent| {
                (spent < limit).then_some(spent + 1)
            })
            .is_ok()
    }

    /// Gives back a charge whose review was not sent.
    fn refund(&self) {
        let _ = (self.spent).fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| s.checked_sub(1));
    }

    fn left(&self, limit: u32) -> u32 {
        limit.saturating_sub(self.spent.load(Ordering::SeqCst))
    }

    /// Whole seconds until this window ends (at least 1): the 429's `Retry-After`.
    fn retry_after(&self, window: Duration) -> u32 {
        let left = window.saturating_sub(self.began.elapsed());
        u32::try_from(left.as_secs() + 1).unwrap_or(u32::MAX)
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
    /// By user name: what each caller may still cost in its window.
    allowances: Cache<String, Arc<Allowance>>,
    caller_reviews: u32,
    /// The allowances' window: the answers' TTL (an answer cached costs nothing).
    window: Duration,
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
    /// Not sent: the caller's `--http-caller-reviews` for the window were spent (a 429), or a
    /// sweep of the namespaces would spend more than all of them (a 403).
    OverBudget,
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
            "Requests of the HTTP API's access checks to the API server (--http-auth kubernetes) by review (token: TokenReview, access: SubjectAccessReview, namespaces: the namespace list) and result (answered, failed: an error or no answer in 5 s, over_cap: not sent, --http-max-reviews of its kind were in flight, the request got a 503; over_budget: SubjectAccessReviews not sent, the caller's --http-caller-reviews per 20 s were spent or a namespace sweep needed more, the request got a 429 or 403).",
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
            allowances: cache(ttl),
            caller_reviews: options.caller_reviews.max(1),
            window: ttl,
        }
    }

    /// `who`'s allowance in the current window (a new one once the last window ended).
    async fn allowance(&self, who: &Identity) -> Arc<Allowance> {
        (self.allowances)
            .get_with(who.user.clone(), async { Arc::new(Allowance::new()) })
            .await
    }

    /// Counts `reviews` SubjectAccessReviews not sent for a caller's allowance.
    fn over_budget(&self, reviews: usize) {
        (self
            .counted
            .with_label_values(&["access", ReviewResult::OverBudget.label()]))
        .inc_by(reviews as u64);
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
        self.sweep(who).await.map(Some)
    }

    /// The namespaces `who` may read history of, one review per namespace whose answer is not
    /// cached, all within `who`'s allowance or none (a 403 when the whole allowance would not
    /// do, a 429 when what is left of it would not): never a part of them.
    async fn sweep(&self, who: &Identity) -> Result<Vec<String>, Refusal> {
        let namespaces = self.namespaces().await?;
        let allowance = self.allowance(who).await;
        // one sweep of a caller at a time: a crowd of its requests waits for the first, then
        // finds the answers cached
        let _sweeping = allowance.sweep.lock().await;
        let question = |ns: &str| (who.clone(), Question::History(Some(ns.to_string())));
        let unknown = (namespaces.iter())
            .filter(|ns| !self.decisions.contains_key(&question(ns)))
            .count();
        // the cluster-wide question is asked again with them (its answer lives as long as
        // theirs): a sweep that fits only beside it could never be answered
        if unknown + 1 > self.caller_reviews as usize {
            self.over_budget(unknown);
            return Err(Refusal::Forbidden(format!(
                "{} may not read Eru history cluster-wide, and finding which of the cluster's {} \
                 namespaces they may read would take {} access reviews, more than the {} \
                 one caller may cause per {} s (--http-caller-reviews); name a namespace (namespace=...)",
                who.user,
                namespaces.len(),
                unknown + 1,
                self.caller_reviews,
                self.window.as_secs()
            )));
        }
        if unknown > allowance.left(self.caller_reviews) as usize {
            self.over_budget(unknown);
            return Err(self.spent(who, &allowance));
        }
        let answers: Vec<Result<(String, bool), Refusal>> = futures::stream::iter(namespaces.iter().cloned())
            .map(|ns: String| async move {
                let allowed = self.allowed(who, Question::History(Some(ns.clone()))).await?;
                Ok((ns, allowed))
            })
            .buffer_unordered(CALLER_AT_ONCE)
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
        Ok(permitted)
    }

    /// The 429 of a caller whose allowance is spent for this window.
    fn spent(&self, who: &Identity, allowance: &Allowance) -> Refusal {
        Refusal::OverBudget(
            format!(
                "{} caused the {} access reviews one caller may cause per {} s \
                 (--http-caller-reviews); retry after the Retry-After seconds, or name a namespace \
                 (namespace=...) already checked",
                who.user,
                self.caller_reviews,
                self.window.as_secs()
            ),
            allowance.retry_after(self.window),
        )
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

    /// `who`'s answer to `question`: cached, or a SubjectAccessReview charged to `who`'s
    /// allowance.
    async fn allowed(&self, who: &Identity, question: Question) -> Result<bool, Refusal> {
        let key = (who.clone(), question.clone());
        let ask = async {
            let allowance = self.allowance(who).await;
            let _mine = (allowance.at_once.acquire().await)
                .map_err(|_| Refusal::Unavailable("the access checks are stopping".into()))?;
            if !allowance.charge(self.caller_reviews) {
                self.over_budget(1);
                return Err(self.spent(who, &allowance));
            }
            let answer = self.review_access(who, &question).await;
            if answer == Err(Refusal::Busy) {
                // not sent: not charged
                allowance.refund();
            }
            answer
        };
        (self.decisions.try_get_with(key, ask))
            .await
            .map_err(|refusal| (*refusal).clone())
    }

    /// One SubjectAccessReview of `question` for `who`, within the shared cap.
    async fn review_access(&self, who: &Identity, question: &Question) -> Result<bool, Refusal> {
        let review = SubjectAccessReview {
            spec: access_review(who, question),
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = (self.review(&self.access, "access", "SubjectAccessReview", async move {
            api.create(&PostParams::default(), &review).await
        }))
        .await?;
        let status = answer.status.unwrap_or_default();
        if let Some(error) = undecided(&status) {
            // an authorizer that could not decide: refused, and said why in the log
            tracing::warn!(%error, user = %who.user, "a SubjectAccessReview could not be evaluated");
        }
        Ok(status.allowed)
    }
}

/// Why a SubjectAccessReview's refusal was no decision (an authorizer's evaluation error); an
/// allowed review's error is another authorizer's, overruled, and not a refusal to explain.
fn undecided(status: &SubjectAccessReviewStatus) -> Option<&str> {
    status.evaluation_error.as_deref().filter(|_| !status.allowed)
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

    /// A fake API server: `answer` turns each request into the JSON body of a 200.
    fn fake_api<F, Fut>(answer: F) -> Client
    where
        F: Fn(http::Request<kube::client::Body>) -> Fut + Send + 'static,
        Fut: Future<Output = serde_json::Value> + Send + 'static,
    {
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let answered = answer(request);
            async move {
                let body = answered.await.to_string();
                Ok::<_, std::convert::Infallible>(http::Response::new(axum::body::Body::from(body)))
            }
        });
        Client::new(service, "default")
    }

    /// An API server that answers every TokenReview "authenticated as `reviewed`", each only once
    /// `open` lets it; counts the requests it got.
    fn api_server(open: Arc<Semaphore>, requests: Arc<AtomicUsize>) -> Client {
        fake_api(move |request| {
            let (open, requests) = (open.clone(), requests.clone());
            async move {
                requests.fetch_add(1, Ordering::SeqCst);
                assert!(
                    request.uri().path().ends_with("/tokenreviews"),
                    "{}",
                    request.uri()
                );
                open.acquire().await.unwrap().forget();
                serde_json::json!({
                    "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                    "spec": {}, "status": {"authenticated": true, "user": {"username": "reviewed"}}
                })
            }
        })
    }

    #[tokio::test]
    async fn reviews_past_the_cap_are_refused_at_once_and_one_token_is_reviewed_once() {
        let (open, requests) = (Arc::new(Semaphore::new(0)), Arc::new(AtomicUsize::new(0)));
        let options = AuthOptions {
            max_reviews: 2,
            ..AuthOptions::default()
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
        fake_api(move |request| {
            let (granted, reviews) = (granted.clone(), reviews.clone());
            async move {
                assert!(
                    request.uri().path().ends_with("/subjectaccessreviews"),
                    "{}",
                    request.uri()
                );
                reviews.fetch_add(1, Ordering::SeqCst);
                serde_json::json!({
                    "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                    "spec": {}, "status": {"allowed": granted.load(Ordering::SeqCst)}
                })
            }
        })
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

    /// A cluster of `namespaces` namespaces whose SubjectAccessReviews answer `grant(user,
    /// namespace)` (namespace "": cluster-wide), each once `open` lets it (`None`: at once);
    /// counts the reviews and the most in flight at once.
    struct Cluster {
        reviews: Arc<AtomicUsize>,
        most_at_once: Arc<AtomicUsize>,
    }

    fn cluster(
        namespaces: usize,
        grant: fn(&str, &str) -> bool,
        open: Option<Arc<Semaphore>>,
    ) -> (Client, Cluster) {
        let (reviews, in_flight, most) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
        );
        let counted = Cluster {
            reviews: reviews.clone(),
            most_at_once: most.clone(),
        };
        let client = fake_api(move |request| {
            let (reviews, in_flight, most, open) =
                (reviews.clone(), in_flight.clone(), most.clone(), open.clone());
            async move {
                if request.uri().path().ends_with("/namespaces") {
                    let items: Vec<_> = (0..namespaces)
                        .map(|i| serde_json::json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": {"name": format!("ns-{i}")}}))
                        .collect();
                    let list = serde_json::json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList", "metadata": {}, "items": items});
                    return list;
                }
                assert!(
                    request.uri().path().ends_with("/subjectaccessreviews"),
                    "{}",
                    request.uri()
                );
                reviews.fetch_add(1, Ordering::SeqCst);
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                let body = axum::body::to_bytes(axum::body::Body::new(request.into_body()), usize::MAX)
                    .await
                    .unwrap();
                let review: SubjectAccessReview = serde_json::from_slice(&body).unwrap();
                let user = review.spec.user.unwrap_or_default();
                let namespace =
                    (review.spec.resource_attributes.and_then(|a| a.namespace)).unwrap_or_default();
                if let Some(open) = open {
                    open.acquire().await.unwrap().forget();
                }
                in_flight.fetch_sub(1, Ordering::SeqCst);
                serde_json::json!({
                    "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                    "spec": {}, "status": {"allowed": grant(&user, &namespace)}
                })
            }
        });
        (client, counted)
    }

    fn caller(user: &str) -> Identity {
        Identity {
            user: user.into(),
            uid: String::new(),
            groups: Vec::new(),
            extra: BTreeMap::new(),
        }
    }

    /// nobody: no grant; reader: ns-1 and ns-3; admin: cluster-wide.
    fn grants(user: &str, namespace: &str) -> bool {
        match user {
            "admin" => true,
            "reader" => namespace == "ns-1" || namespace == "ns-3",
            _ => false,
        }
    }

    fn counted(auth: &Auth, result: &str) -> u64 {
        auth.counted.with_label_values(&["access", result]).get()
    }

    /// More namespaces than a caller's allowance: an unscoped listing by a caller without the
    /// cluster-wide grant is a 403 at once, after the one cluster-wide review and none per
    /// namespace (mutation: no count before the sweep: a review per namespace, then a 429
    /// midway).
    #[tokio::test]
    async fn a_sweep_larger_than_the_allowance_is_refused_before_any_review() {
        let namespaces = DEFAULT_CALLER_REVIEWS as usize + 8;
        let (client, cluster) = cluster(namespaces, grants, None);
        let auth = Auth::new(client, AuthOptions::default(), &Metrics::new());
        let refused = auth.scope(&caller("nobody"), None, false).await;
        assert!(
            matches!(&refused, Err(Refusal::Forbidden(why)) if why.contains("namespace=")),
            "{refused:?}"
        );
        assert_eq!(
            cluster.reviews.load(Ordering::SeqCst),
            1,
            "the cluster-wide review only"
        );
        assert_eq!(counted(&auth, "over_budget"), namespaces as u64);
        // the cluster-wide grant needs no sweep; a scoped request is one review
        assert_eq!(auth.scope(&caller("admin"), None, false).await, Ok(None));
        assert_eq!(auth.scope(&caller("reader"), Some("ns-3"), false).await, Ok(None));
        assert_eq!(cluster.reviews.load(Ordering::SeqCst), 3);
    }

    /// A sweep counts the cluster-wide review beside the namespaces' (mutation: `unknown + 1` →
    /// `unknown * 1`): with an allowance of 4, a cluster of 3 namespaces is swept (1 + 3 reviews),
    /// one of 4 is a 403 at once (1 + 4 could never be answered), not a 429 midway.
    #[tokio::test]
    async fn a_sweep_fits_the_allowance_with_the_cluster_wide_review() {
        let options = || AuthOptions {
            caller_reviews: 4,
            ..AuthOptions::default()
        };
        let (client, three) = cluster(3, grants, None);
        let auth = Auth::new(client, options(), &Metrics::new());
        let swept = auth.scope(&caller("reader"), None, false).await;
        assert_eq!(swept, Ok(Some(vec!["ns-1".to_string()])));
        assert_eq!(three.reviews.load(Ordering::SeqCst), 4);
        let (client, four) = cluster(4, grants, None);
        let auth = Auth::new(client, options(), &Metrics::new());
        let refused = auth.scope(&caller("reader"), None, false).await;
        assert!(matches!(&refused, Err(Refusal::Forbidden(_))), "{refused:?}");
        assert_eq!(
            four.reviews.load(Ordering::SeqCst),
            1,
            "the cluster-wide review only"
        );
    }

    /// A crowd of one caller's unscoped listings costs one sweep: the first reviews each
    /// namespace once, the others wait for it and answer from the cache, whole.
    #[tokio::test]
    async fn a_crowd_of_one_callers_listings_costs_one_sweep() {
        let (client, cluster) = cluster(20, grants, None);
        let auth = Arc::new(Auth::new(client, AuthOptions::default(), &Metrics::new()));
        let crowd: Vec<_> = (0..100)
            .map(|i| {
                let auth = auth.clone();
                let who = caller(if i % 2 == 0 { "nobody" } else { "reader" });
                tokio::spawn(async move { auth.scope(&who, None, false).await })
            })
            .collect();
        for (i, answer) in futures::future::join_all(crowd).await.into_iter().enumerate() {
            let expected = if i % 2 == 0 {
                vec![]
            } else {
                vec!["ns-1".to_string(), "ns-3".into()]
            };
            assert_eq!(answer.unwrap(), Ok(Some(expected)));
        }
        // each caller: the cluster-wide review and one per namespace
        assert_eq!(cluster.reviews.load(Ordering::SeqCst), 2 * (1 + 20));
        assert_eq!(counted(&auth, "over_budget"), 0);
    }

    /// An allowance on its own (mutations: a refund that gives nothing back, a `Retry-After` of
    /// 1 s whatever is left of the window): charges up to its limit, a refund frees one place and
    /// never goes below none spent, and the 429 says how long is left, at least a second.
    #[test]
    fn an_allowance_refunds_a_charge_and_says_how_long_its_window_lasts() {
        let a = Allowance::new();
        assert!(a.charge(2) && a.charge(2) && !a.charge(2));
        assert_eq!(a.left(2), 0);
        a.refund();
        assert_eq!(a.left(2), 1);
        assert!(a.charge(2));
        let fresh = Allowance::new();
        fresh.refund();
        assert_eq!(fresh.left(2), 2, "nothing spent, nothing refunded");
        assert!((19..=20).contains(&a.retry_after(Duration::from_secs(20))));
        assert_eq!(a.retry_after(Duration::ZERO), 1);
    }

    /// Past its allowance a caller gets a 429 with the window's end as Retry-After, and no
    /// review is sent; another caller is not affected; a new window renews it.
    #[tokio::test]
    async fn a_spent_allowance_is_a_429_until_the_window_ends() {
        let ttl = Duration::from_millis(500);
        let (client, cluster) = cluster(4, grants, None);
        let options = AuthOptions {
            caller_reviews: 5,
            ..AuthOptions::default()
        };
        let auth = Auth::answers_kept(client, options, &Metrics::new(), ttl);
        let nobody = caller("nobody");
        for i in 0..5 {
            let refused = auth.scope(&nobody, Some(&format!("made-up-{i}")), false).await;
            assert!(matches!(refused, Err(Refusal::Forbidden(_))), "{refused:?}");
        }
        let spent = auth.scope(&nobody, Some("made-up-5"), false).await;
        assert!(matches!(spent, Err(Refusal::OverBudget(_, 1))), "{spent:?}");
        // an answer cached costs nothing
        assert!(matches!(
            auth.scope(&nobody, Some("made-up-0"), false).await,
            Err(Refusal::Forbidden(_))
        ));
        // a new token of the same user (another Identity: its credential id) gets no new allowance
        let mut minted = nobody.clone();
        minted.extra.insert(
            "authentication.kubernetes.io/credential-id".into(),
            vec!["JTI=2".into()],
        );
        assert!(matches!(
            auth.scope(&minted, Some("made-up-6"), false).await,
            Err(Refusal::OverBudget(..))
        ));
        // a sweep (1 + 4 reviews): a 429, not a part of the namespaces
        assert!(matches!(
            auth.scope(&nobody, None, false).await,
            Err(Refusal::OverBudget(..))
        ));
        assert_eq!(cluster.reviews.load(Ordering::SeqCst), 5);
        assert_eq!(
            auth.scope(&caller("reader"), None, false).await,
            Ok(Some(vec!["ns-1".into(), "ns-3".into()]))
        );
        tokio::time::sleep(ttl * 2).await;
        assert_eq!(auth.scope(&nobody, None, false).await, Ok(Some(vec![])));
    }

    /// One caller's reviews in flight are at most [`CALLER_AT_ONCE`]: the shared cap keeps
    /// places for the others (mutation: no per-caller semaphore: 16 at once).
    #[tokio::test]
    async fn one_caller_holds_a_few_places_of_the_shared_cap() {
        let open = Arc::new(Semaphore::new(0));
        let (client, cluster) = cluster(30, grants, Some(open.clone()));
        let auth = Arc::new(Auth::new(client, AuthOptions::default(), &Metrics::new()));
        let crowd: Vec<_> = (0..30)
            .map(|i| {
                let auth = auth.clone();
                tokio::spawn(async move {
                    auth.scope(&caller("nobody"), Some(&format!("ns-{i}")), false)
                        .await
                })
            })
            .collect();
        while cluster.reviews.load(Ordering::SeqCst) < CALLER_AT_ONCE {
            tokio::task::yield_now().await;
        }
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert_eq!(cluster.most_at_once.load(Ordering::SeqCst), CALLER_AT_ONCE);
        // another caller still gets a place
        let admin = {
            let auth = auth.clone();
            tokio::spawn(async move { auth.scope(&caller("admin"), None, false).await })
        };
        while cluster.reviews.load(Ordering::SeqCst) < CALLER_AT_ONCE + 1 {
            tokio::task::yield_now().await;
        }
        open.add_permits(1_000);
        assert_eq!(admin.await.unwrap(), Ok(None));
        for answer in futures::future::join_all(crowd).await {
            assert!(matches!(answer.unwrap(), Err(Refusal::Forbidden(_))));
        }
        assert_eq!(cluster.reviews.load(Ordering::SeqCst), 31);
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

    /// An API server whose TokenReviews answer by the token sent: `ours` is authenticated for
    /// the audiences asked (the API server's own, `kube`, when none were), `theirs` for another
    /// audience only, any other token not at all. It keeps the audiences each review asked for.
    fn token_reviewer(asked: Arc<std::sync::Mutex<Vec<Option<Vec<String>>>>>) -> Client {
        fake_api(move |request| {
            let asked = asked.clone();
            async move {
                assert!(
                    request.uri().path().ends_with("/tokenreviews"),
                    "{}",
                    request.uri()
                );
                let body = request.into_body().collect_bytes().await.unwrap();
                let review: TokenReview = serde_json::from_slice(&body).unwrap();
                let audiences = review.spec.audiences.clone();
                asked.lock().unwrap().push(audiences.clone());
                let status = match review.spec.token.as_str() {
                    "ours" => serde_json::json!({"authenticated": true, "user": {"username": "alice"},
                        "audiences": audiences.unwrap_or_else(|| vec!["kube".into()])}),
                    "theirs" => serde_json::json!({"authenticated": true, "user": {"username": "mallory"},
                        "audiences": ["https://elsewhere.example"]}),
                    _ => serde_json::json!({"authenticated": false, "error": "invalid bearer token"}),
                };
                serde_json::json!({
                    "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}, "status": status
                })
            }
        })
    }

    /// The TokenReview sends the token, and the audiences only when some are configured; a token
    /// the API server authenticates for another audience is refused as such. (Mutations: the
    /// review without its spec, or its `audiences` sent when none are configured and not when
    /// some are, the audience guard always true, the "another audience" arm deleted.)
    #[tokio::test]
    async fn a_token_review_sends_the_token_and_the_configured_audiences() {
        let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
        let own = Auth::new(
            token_reviewer(asked.clone()),
            AuthOptions::default(),
            &Metrics::new(),
        );
        assert_eq!(own.authenticate(Some("Bearer ours")).await.unwrap().user, "alice");
        assert!(matches!(
            own.authenticate(Some("Bearer made-up")).await,
            Err(Refusal::Unauthenticated(_))
        ));
        // no audience configured: none asked, and a token of any audience is taken
        assert_eq!(
            own.authenticate(Some("Bearer theirs")).await.unwrap().user,
            "mallory"
        );
        assert_eq!(*asked.lock().unwrap(), vec![None, None, None]);

        asked.lock().unwrap().clear();
        let options = AuthOptions {
            audiences: vec!["eru-operator".into()],
            ..AuthOptions::default()
        };
        let scoped = Auth::new(token_reviewer(asked.clone()), options, &Metrics::new());
        assert_eq!(
            scoped.authenticate(Some("Bearer ours")).await.unwrap().user,
            "alice"
        );
        let Err(Refusal::Unauthenticated(why)) = scoped.authenticate(Some("Bearer theirs")).await else {
            panic!("a token for another audience was accepted");
        };
        assert!(why.contains("not valid for this API's audience"), "{why}");
        let Err(Refusal::Unauthenticated(why)) = scoped.authenticate(Some("Bearer made-up")).await else {
            panic!("a made-up token was accepted");
        };
        assert!(why.contains("not issued for the audience eru-operator"), "{why}");
        let eru = Some(vec!["eru-operator".to_string()]);
        assert_eq!(*asked.lock().unwrap(), vec![eru.clone(), eru.clone(), eru]);
    }

    /// Only a refusal's evaluation error is logged as undecided (mutation: `!` deleted, every
    /// allowed answer with an overruled authorizer's error logged as a refusal).
    #[test]
    fn an_evaluation_error_explains_only_a_refusal() {
        let status = |allowed, error: Option<&str>| SubjectAccessReviewStatus {
            allowed,
            evaluation_error: error.map(Into::into),
            ..SubjectAccessReviewStatus::default()
        };
        assert_eq!(
            undecided(&status(false, Some("webhook down"))),
            Some("webhook down")
        );
        assert_eq!(undecided(&status(true, Some("webhook down"))), None);
        assert_eq!(undecided(&status(false, None)), None);
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
        // (mutation: the verb deleted: a review of no verb, which no Role grants)
        assert_eq!(attributes.verb.as_deref(), Some("get"));
        assert_eq!(attributes.namespace.as_deref(), Some("a"));
        assert_eq!(spec.uid, None, "an empty uid is not sent");
        // a token's extra (a service account's node and pod names) is reviewed as it came, and
        // none is sent as none (mutation: `!` deleted: sent only when empty)
        assert_eq!(spec.extra, None);
        let extra = BTreeMap::from([(
            "authentication.kubernetes.io/pod-name".to_string(),
            vec!["p".to_string()],
        )]);
        let with_extra = Identity {
            extra: extra.clone(),
            uid: "u-1".into(),
            ..who.clone()
        };
        let spec_with_extra = access_review(&with_extra, &Question::History(None));
        assert_eq!(spec_with_extra.extra, Some(extra));
        assert_eq!(spec_with_extra.uid.as_deref(), Some("u-1"));
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
