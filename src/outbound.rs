//! The HTTP client of the operator's outbound calls: Prometheus (the health gates, need
//! conditions), Alertmanager (silences) and the notification receivers. It lives below every
//! module that makes those calls, so none of them imports another for it.

use std::{sync::Arc, time::Duration};

/// An HTTP client: rustls with ring (already built for kube), the system's root certificates for
/// an `https://` URL, requests bounded by `timeout`.
pub fn agent(timeout: Duration) -> ureq::Agent {
    let roots: Vec<ureq::tls::Certificate<'static>> = rustls_native_certs::load_native_certs()
        .certs
        .iter()
        .map(|der| ureq::tls::Certificate::from_der(der.as_ref()).to_owned())
        .collect();
    let tls = ureq::tls::TlsConfig::builder()
        .root_certs(ureq::tls::RootCerts::new_with_certs(&roots))
        .provider(ureq::tls::TlsProvider::Rustls)
        .unversioned_rustls_crypto_provider(Arc::new(tokio_rustls::rustls::crypto::ring::default_provider()))
        .build();
    ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .tls_config(tls)
        .build()
        .into()
}

/// `url` as messages may show it: `user:password@` and the query string replaced by `***`.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = match authority.rsplit_once('@') {
        Some((_, host)) => format!("***@{host}"),
        None => authority.to_string(),
    };
    let path = match path.split_once('?') {
        Some((path, _)) => format!("{path}?***"),
        None => path.to_string(),
    };
    let scheme = if scheme.is_empty() {
        String::new()
    } else {
        format!("{scheme}://")
    };
    format!("{scheme}{host}{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_in_messages_lose_their_credentials_and_query() {
        assert_eq!(
            redact_url("https://admin:s3cret@prometheus.example:9090/api/v1/alerts?token=abc"),
            "https://***@prometheus.example:9090/api/v1/alerts?***"
        );
        assert_eq!(
            redact_url("http://prometheus.monitoring:9090/api/v1/alerts"),
            "http://prometheus.monitoring:9090/api/v1/alerts"
        );
    }
}
