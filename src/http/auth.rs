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
//! that exists, so no grant is missed. Every answer is cached for [`TTL`] in maps of bounded size;
//! a review that fails (API server down, the operator's RBAC missing) refuses with a 503: closed,
//! never open.

use std::{
    collections::{BTreeMap, HashMap},
    hash::Hash,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

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
use sha2::{Digest, Sha256};

/// How long an identity or a decision is reused.
pub const TTL: Duration = Duration::from_secs(20);
/// Entries a cache holds at most (past it, expired entries go; if none has, all go).
pub const CAPACITY: usize = 10_000;
/// Namespaces reviewed for a caller without a cluster-wide grant, at most.
pub const MAX_NAMESPACES: u32 = 1_000;
/// Reviews in flight for one caller at once.
const REVIEWS_AT_ONCE: usize = 8;
/// A review the API server has not answered by then fails (closed).
const REVIEW_TIMEOUT: Duration = Duration::from_secs(5);

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
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// 401: no token, or one the cluster does not accept.
    Unauthenticated(String),
    /// 403: a valid caller without the grant.
    Forbidden(String),
    /// 503: the cluster could not be asked.
    Unavailable(String),
}

/// What a question is about.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Question {
    /// `get` on a non-resource URL.
    Url(&'static str),
    /// `get` on Eru history in a namespace (`None`: cluster-wide).
    History(Option<String>),
}

/// A map whose entries expire, of bounded size.
struct Ttl<K, V> {
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash, V: Clone> Ttl<K, V> {
    fn new() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn get(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        (entries.get(key))
            .filter(|(at, _)| at.elapsed() < TTL)
            .map(|(_, v)| v.clone())
    }

    fn insert(&self, key: K, value: V) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= CAPACITY {
            entries.retain(|_, (at, _)| at.elapsed() < TTL);
            if entries.len() >= CAPACITY {
                entries.clear();
            }
        }
        entries.insert(key, (Instant::now(), value));
    }
}

/// The reviews, and what they answered lately.
pub struct Auth {
    client: Client,
    /// By the token's SHA-256 (the tokens themselves are not kept): who it is, or why not.
    identities: Ttl<[u8; 32], Result<Identity, String>>,
    decisions: Ttl<(Identity, Question), bool>,
    namespaces: Ttl<(), Arc<Vec<String>>>,
}

impl Auth {
    pub fn new(client: Client) -> Self {
        Self {
            client,
            identities: Ttl::new(),
            decisions: Ttl::new(),
            namespaces: Ttl::new(),
        }
    }

    /// The caller a request's `Authorization: Bearer <token>` stands for.
    pub async fn authenticate(&self, authorization: Option<&str>) -> Result<Identity, Refusal> {
        let token = bearer(authorization)?;
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let known = match self.identities.get(&key) {
            Some(known) => known,
            None => {
                let known = self.review_token(token).await?;
                self.identities.insert(key, known.clone());
                known
            }
        };
        known.map_err(Refusal::Unauthenticated)
    }

    async fn review_token(&self, token: &str) -> Result<Result<Identity, String>, Refusal> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let answer = within(api.create(&PostParams::default(), &review), "TokenReview").await?;
        let status = answer.status.unwrap_or_default();
        Ok(match (status.authenticated, status.user) {
            (Some(true), Some(user)) => Ok(Identity {
                user: user.username.unwrap_or_default(),
                uid: user.uid.unwrap_or_default(),
                groups: user.groups.unwrap_or_default(),
                extra: user.extra.unwrap_or_default(),
            }),
            _ => {
                // the review's error names the token's fault; it is logged, not answered
                tracing::debug!(error = ?status.error, "a bearer token was not accepted");
                Err("the bearer token is not valid (expired, revoked, or not this cluster's)".into())
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
        if let Some(known) = self.namespaces.get(&()) {
            return Ok(known);
        }
        let api: Api<Namespace> = Api::all(self.client.clone());
        let listed = within(
            api.list_metadata(&ListParams::default().limit(MAX_NAMESPACES)),
            "listing namespaces",
        )
        .await?;
        let names = Arc::new(listed.items.into_iter().filter_map(|n| n.metadata.name).collect());
        self.namespaces.insert((), Arc::clone(&names));
        Ok(names)
    }

    async fn allowed(&self, who: &Identity, question: Question) -> Result<bool, Refusal> {
        let key = (who.clone(), question);
        if let Some(allowed) = self.decisions.get(&key) {
            return Ok(allowed);
        }
        let (who, question) = key;
        let review = SubjectAccessReview {
            spec: access_review(&who, &question),
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = within(api.create(&PostParams::default(), &review), "SubjectAccessReview").await?;
        let status = answer.status.unwrap_or_default();
        if let Some(error) = status.evaluation_error.filter(|_| !status.allowed) {
            // an authorizer that could not decide: refused, and said why in the log
            tracing::warn!(%error, user = %who.user, "a SubjectAccessReview could not be evaluated");
        }
        self.decisions.insert((who, question), status.allowed);
        Ok(status.allowed)
    }
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
    use super::*;

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
    fn a_full_cache_drops_what_expired_or_else_everything() {
        let cache = Ttl::new();
        for i in 0..CAPACITY {
            cache.insert(i, i);
        }
        assert_eq!(cache.get(&7), Some(7));
        cache.insert(CAPACITY, CAPACITY);
        assert_eq!(
            cache.entries.lock().unwrap().len(),
            1,
            "nothing expired: all dropped"
        );
        assert_eq!(cache.get(&CAPACITY), Some(CAPACITY));
        assert_eq!(cache.get(&7), None);
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
        let cluster = access_review(&who, &Question::History(None));
        assert_eq!(cluster.resource_attributes.unwrap().namespace, None);
        let metrics = access_review(&who, &Question::Url("/metrics"));
        assert_eq!(
            metrics.non_resource_attributes.unwrap().path.as_deref(),
            Some("/metrics")
        );
    }
}
