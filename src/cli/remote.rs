//! A running operator's HTTP API as the source of `history` and `audit` (`--server URL`): the
//! same queries the offline commands run on a journal, answered by the operator that writes it,
//! so an installed operator is audited without stopping it or copying its database.
//!
//! - **Who asks**: `--token`, `--token-file`, else the bearer token of the kubeconfig's user
//!   (`--kubeconfig`, `--context`; a static token, a token file, an exec plugin or OIDC, through
//!   kube's own code), else the pod's ServiceAccount token when run in a cluster; never the
//!   kubeconfig's to a plain `http://` server. A kubeconfig user with a client certificate has no
//!   token to send: pass one (`kubectl create token`).
//! - **Whom it trusts**: `--cacert FILE` (a CA bundle, or the operator's own self-signed
//!   certificate), else the system's root certificates; `--insecure-skip-tls-verify` only when
//!   asked for.
//!
//! The API server's service proxy (`…/services/https:eru-operator:http/proxy/`) cannot carry the
//! token: the API server removes the `Authorization` header of every request it authenticated
//! before proxying it (k8s.io/apiserver, `filters.WithAuthentication`), so the operator would see
//! no caller. Reach the Service with `kubectl port-forward`, an Ingress, or from inside the
//! cluster instead.

use std::{path::PathBuf, sync::Arc, time::Duration};

use serde::de::DeserializeOwned;

/// Longest a request may take (an audit of a month of a large fleet takes seconds).
const TIMEOUT: Duration = Duration::from_secs(120);
/// Largest answer read (an audit of 1,000 Erus is a few MB).
const BODY_LIMIT: u64 = 256 * 1024 * 1024;
/// Tries of a request the operator answers 503 with a `Retry-After` (its query places are taken).
const TRIES: u32 = 5;

/// Where and how to reach a running operator (no `Debug`: it holds the token).
#[derive(Clone, Default)]
pub struct Options {
    /// `https://HOST:PORT` (or `http://` for an operator run with `--http-auth none`).
    pub server: String,
    pub token: Option<String>,
    pub token_file: Option<PathBuf>,
    pub cacert: Option<PathBuf>,
    pub insecure_skip_tls_verify: bool,
    /// The name the server's certificate must carry, when it is not the host of `server` (a
    /// certificate for the Service's name, reached through a port-forward on localhost).
    pub tls_server_name: Option<String>,
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
}

/// Why a request did not give an answer.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The operator refused the request's parameters (400): the CLI's exit status 2.
    #[error("{0}")]
    Invalid(String),
    /// Any other refusal, the connection, TLS, or an answer that does not read.
    #[error("{0}")]
    Failed(String),
}

/// A connection to one operator's HTTP API.
pub struct Remote {
    base: String,
    agent: ureq::Agent,
    authorization: Option<String>,
}

impl Remote {
    /// Checks `options` and finds the token to send; errors are one line saying what to fix.
    pub async fn new(options: &Options) -> Result<Self, String> {
        let given = options.server.trim_end_matches('/').to_string();
        let server: http::Uri = (given.parse().ok())
            .filter(|u: &http::Uri| {
                matches!(u.scheme_str(), Some("https" | "http")) && u.host().is_some_and(|h| !h.is_empty())
            })
            .ok_or_else(|| {
                format!(
                    "--server {given}: not an http(s) URL (e.g. https://localhost:8443 after \
                     `kubectl -n eru-system port-forward svc/eru-operator 8443:8080`)"
                )
            })?;
        // With --tls-server-name the requests name that host (SNI, and what the certificate is
        // checked against), and the resolver sends them to --server's address.
        let base = match &options.tls_server_name {
            Some(name) => {
                let port = server.port_u16().map(|p| format!(":{p}")).unwrap_or_default();
                let scheme = server.scheme_str().unwrap_or("https");
                format!("{scheme}://{name}{port}{}", server.path().trim_end_matches('/'))
            }
            None => given.clone(),
        };
        let token = match (&options.token, &options.token_file) {
            (Some(token), _) => Some(token.trim().to_string()),
            (None, Some(path)) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| format!("--token-file {}: {e}", path.display()))?
                    .trim()
                    .to_string(),
            ),
            (None, None) => None,
        };
        let authorization = match token {
            Some(token) if token.is_empty() => return Err("the token is empty".into()),
            Some(token) => Some(format!("Bearer {token}")),
            // a plain-HTTP server (an operator run with --http-auth none) is not sent the
            // kubeconfig's credentials: anyone on the way could read them
            None if server.scheme_str() == Some("http") => None,
            None => kubeconfig_authorization(options).await?,
        };
        Ok(Self {
            base,
            agent: agent(options, &server)?,
            authorization,
        })
    }

    /// The server, as given.
    pub fn server(&self) -> &str {
        &self.base
    }

    /// GET `path?query` as `T` (the type the server serialized it from).
    pub fn get<T: DeserializeOwned>(&self, path: &str, query: &str) -> Result<T, Failure> {
        let url = if query.is_empty() {
            format!("{}{path}", self.base)
        } else {
            format!("{}{path}?{query}", self.base)
        };
        let body = self.body(&url)?;
        serde_json::from_str(&body).map_err(|e| {
            Failure::Failed(format!(
                "{url}: the answer is not what this eru-operator {} reads ({e}); is the server an \
                 eru-operator of the same release?",
                env!("CARGO_PKG_VERSION")
            ))
        })
    }

    /// The body of a 200 answer to GET `url`; a refusal as the operator worded it.
    fn body(&self, url: &str) -> Result<String, Failure> {
        let mut tries = 0;
        loop {
            tries += 1;
            let mut request = self.agent.get(url).header("Accept", "application/json");
            if let Some(authorization) = &self.authorization {
                request = request.header("Authorization", authorization);
            }
            let mut response = request
                .call()
                .map_err(|e| Failure::Failed(format!("{url}: {}", describe(&e))))?;
            let status = response.status();
            let retry_after = (response.headers().get("retry-after"))
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok());
            let body = (response
                .body_mut()
                .with_config()
                .limit(BODY_LIMIT)
                .read_to_string())
            .map_err(|e| Failure::Failed(format!("{url}: reading the answer: {}", describe(&e))))?;
            if status.is_success() {
                return Ok(body);
            }
            if let (503, Some(seconds), true) = (status.as_u16(), retry_after, tries < TRIES) {
                std::thread::sleep(Duration::from_secs(seconds.clamp(1, 10)));
                continue;
            }
            let said = serde_json::from_str::<crate::history::ErrorBody>(&body)
                .map(|e| e.error)
                .unwrap_or_else(|_| body.lines().next().unwrap_or_default().to_string());
            let answered = format!("{url} answered {status}: {said}");
            return Err(match status.as_u16() {
                400 => Failure::Invalid(said),
                401 => Failure::Failed(format!(
                    "{answered}\nhint: send a token the cluster accepts: --token, --token-file, or a \
                     kubeconfig user with one (e.g. --token \"$(kubectl create token NAME -n NAMESPACE)\")"
                )),
                403 => Failure::Failed(format!(
                    "{answered}\nhint: the token's identity needs get on erus/history (group \
                     mtsre.meitu.com) in the namespace it reads, or cluster-wide for every namespace: the \
                     ClusterRole eru-history-reader, or the built-in view; without the cluster-wide grant, \
                     name the namespace with -n (docs/api.md#access)"
                )),
                _ => Failure::Failed(answered),
            });
        }
    }
}

/// The HTTP client: rustls with ring (already built for kube), the roots `options` name; with
/// `--tls-server-name`, that name resolved to `server`'s address.
fn agent(options: &Options, server: &http::Uri) -> Result<ureq::Agent, String> {
    use ureq::tls::{Certificate, RootCerts, TlsConfig, TlsProvider};
    let roots: Vec<Certificate<'static>> = match &options.cacert {
        Some(path) => {
            let pem = std::fs::read(path).map_err(|e| format!("--cacert {}: {e}", path.display()))?;
            let certs: Vec<Certificate<'static>> = ureq::tls::parse_pem(&pem)
                .filter_map(|item| match item {
                    Ok(ureq::tls::PemItem::Certificate(c)) => Some(c.to_owned()),
                    _ => None,
                })
                .collect();
            if certs.is_empty() {
                return Err(format!("--cacert {}: no PEM certificate in it", path.display()));
            }
            certs
        }
        None => rustls_native_certs::load_native_certs()
            .certs
            .iter()
            .map(|der| Certificate::from_der(der.as_ref()).to_owned())
            .collect(),
    };
    let tls = TlsConfig::builder()
        .provider(TlsProvider::Rustls)
        .unversioned_rustls_crypto_provider(Arc::new(tokio_rustls::rustls::crypto::ring::default_provider()))
        .root_certs(RootCerts::new_with_certs(&roots))
        .disable_verification(options.insecure_skip_tls_verify)
        .build();
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(TIMEOUT))
        .tls_config(tls)
        .build();
    Ok(match &options.tls_server_name {
        Some(name) => ureq::Agent::with_parts(
            config,
            ureq::unversioned::transport::DefaultConnector::new(),
            Pinned {
                name: name.clone(),
                server: server.clone(),
            },
        ),
        None => config.into(),
    })
}

/// Resolves `name` to the address of `server` (as curl's `--connect-to`), any other host as usual.
#[derive(Debug)]
struct Pinned {
    name: String,
    server: http::Uri,
}

impl ureq::unversioned::resolver::Resolver for Pinned {
    fn resolve(
        &self,
        uri: &http::Uri,
        config: &ureq::config::Config,
        timeout: ureq::unversioned::transport::NextTimeout,
    ) -> Result<ureq::unversioned::resolver::ResolvedSocketAddrs, ureq::Error> {
        let target = if uri.host() == Some(self.name.as_str()) {
            &self.server
        } else {
            uri
        };
        ureq::unversioned::resolver::DefaultResolver::default().resolve(target, config, timeout)
    }
}

/// A transport error in words a person acts on.
fn describe(e: &ureq::Error) -> String {
    let text = e.to_string();
    if text.contains("NotValidForName") || text.contains("not valid for name") {
        format!(
            "{text}: the certificate does not name the host of --server; with a port-forward to a \
             certificate of the Service's name, pass --tls-server-name with that name"
        )
    } else if text.contains("UnknownIssuer") || text.contains("invalid peer certificate") {
        format!(
            "{text}: the operator's certificate is not signed by a CA this command trusts; pass \
             --cacert with its CA (or, for the default self-signed certificate, the certificate \
             itself: docs/api.md#the-cli-against-a-running-operator)"
        )
    } else {
        text
    }
}

/// The `Authorization` header the kubeconfig's user (or the pod's ServiceAccount) would send to
/// the API server, when it is a bearer token; `None` when there is no such user or it has no
/// token (a client certificate).
async fn kubeconfig_authorization(options: &Options) -> Result<Option<String>, String> {
    use kube::client::ConfigExt;
    let config = if options.kubeconfig.is_some() || options.context.is_some() {
        let kubeconfig = match &options.kubeconfig {
            Some(path) => kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?,
            None => kube::config::Kubeconfig::read().map_err(|e| format!("the kubeconfig: {e}"))?,
        };
        let chosen = kube::config::KubeConfigOptions {
            context: options.context.clone(),
            ..Default::default()
        };
        kube::Config::from_custom_kubeconfig(kubeconfig, &chosen)
            .await
            .map_err(|e| format!("the kubeconfig: {e}"))?
    } else {
        match kube::Config::infer().await {
            Ok(config) => config,
            // no kubeconfig and not in a cluster: no token to take from there
            Err(_) => return Ok(None),
        }
    };
    let Some(layer) = config
        .auth_layer()
        .map_err(|e| format!("the kubeconfig's user: {e}"))?
    else {
        return Ok(None);
    };
    // kube's own layer (static token, token file, exec plugin, OIDC refresh) sets the header on a
    // request; read it off.
    let mut service = tower::Layer::layer(&layer, Capture);
    std::future::poll_fn(|cx| tower::Service::poll_ready(&mut service, cx))
        .await
        .map_err(|e| format!("the kubeconfig's user: {e}"))?;
    let request = http::Request::get("/")
        .body(kube::client::Body::empty())
        .expect("a request");
    let header = tower::Service::call(&mut service, request)
        .await
        .map_err(|e| format!("the kubeconfig's user's token: {e}"))?
        .into_body();
    Ok(header.filter(|h| h.len() > 7 && h[..7].eq_ignore_ascii_case("bearer ")))
}

/// A service that answers a request with its `Authorization` header as the body.
#[derive(Clone)]
struct Capture;

impl tower::Service<http::Request<kube::client::Body>> for Capture {
    type Response = http::Response<Option<String>>;
    type Error = tower::BoxError;
    type Future = std::future::Ready<Result<Self::Response, tower::BoxError>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let header = (request.headers().get(http::header::AUTHORIZATION))
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        std::future::ready(Ok(http::Response::new(header)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(server: &str) -> Options {
        Options {
            server: server.into(),
            token: Some("t".into()),
            ..Options::default()
        }
    }

    #[tokio::test]
    async fn the_server_is_an_http_url() {
        for bad in ["localhost:8443", "ftp://x", "https://", ""] {
            let error = Remote::new(&options(bad)).await.err().unwrap();
            assert!(error.contains("not an http(s) URL"), "{bad}: {error}");
        }
        let remote = Remote::new(&options("https://localhost:8443/")).await.unwrap();
        assert_eq!(remote.server(), "https://localhost:8443");
        assert_eq!(remote.authorization.as_deref(), Some("Bearer t"));
    }

    #[tokio::test]
    async fn a_kubeconfig_users_token_is_sent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n\
             users: [{name: u, user: {token: from-kubeconfig}}, {name: cert, user: {}}]\n\
             contexts: [{name: a, context: {cluster: c, user: u}}, {name: b, context: {cluster: c, user: cert}}]\n\
             current-context: a\n",
        )
        .unwrap();
        let with = |context: Option<&str>| Options {
            server: "https://localhost:8443".into(),
            kubeconfig: Some(path.clone()),
            context: context.map(String::from),
            ..Options::default()
        };
        let remote = Remote::new(&with(None)).await.unwrap();
        assert_eq!(remote.authorization.as_deref(), Some("Bearer from-kubeconfig"));
        let remote = Remote::new(&with(Some("b"))).await.unwrap();
        assert_eq!(remote.authorization, None, "a user without a token sends none");
        let plain = Options {
            server: "http://localhost:8080".into(),
            ..with(None)
        };
        assert_eq!(
            Remote::new(&plain).await.unwrap().authorization,
            None,
            "the kubeconfig's token never goes to a plain-HTTP server"
        );
        let given = Options {
            token: Some("given".into()),
            ..with(None)
        };
        assert_eq!(
            Remote::new(&given).await.unwrap().authorization.as_deref(),
            Some("Bearer given"),
            "--token wins"
        );
    }

    #[tokio::test]
    async fn a_cacert_without_a_certificate_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "not a certificate").unwrap();
        let error = Remote::new(&Options {
            cacert: Some(path),
            ..options("https://localhost:8443")
        })
        .await
        .err()
        .unwrap();
        assert!(error.contains("no PEM certificate"), "{error}");
    }
}
