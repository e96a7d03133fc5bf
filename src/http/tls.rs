//! HTTPS for the API: the certificate and key of `--tls-cert-file`/`--tls-key-file` (PEM), read
//! again when either file changes (cert-manager rotates a Secret's files in place; the kubelet
//! swaps them), or a self-signed certificate generated at start (with `--http-auth kubernetes`
//! and no files: the token a client sends must not cross the network in clear text).
//!
//! A handshake always gets the certificate current at that moment; a rotated file that does not
//! parse (half-written) keeps the previous certificate and is tried again at the next look.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, RwLock},
    time::{Duration, SystemTime},
};

use tokio_rustls::{
    TlsAcceptor,
    rustls::{
        ServerConfig,
        crypto::ring,
        pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, pem::PemObject},
        server::{ClientHello, ResolvesServerCert},
        sign::CertifiedKey,
    },
};

/// How often the files are looked at.
pub const RELOAD_EVERY: Duration = Duration::from_secs(10);

/// The modification times of the certificate and key files.
type Stamps = (SystemTime, SystemTime);

/// Where the certificate comes from.
#[derive(Clone, Debug)]
pub enum Source {
    Files {
        cert: PathBuf,
        key: PathBuf,
    },
    /// Generated at start for these names (DNS names or IP addresses).
    SelfSigned(Vec<String>),
}

/// The certificate handshakes get now.
#[derive(Debug)]
pub struct Certificate {
    source: Source,
    current: RwLock<(Arc<CertifiedKey>, Option<Stamps>)>,
}

impl ResolvesServerCert for Certificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(
            &self.current.read().unwrap_or_else(|e| e.into_inner()).0,
        ))
    }
}

impl Certificate {
    /// Reads (or generates) the certificate; an error names the file at fault.
    pub fn load(source: Source) -> anyhow::Result<Arc<Self>> {
        let (key, stamps) = match &source {
            Source::Files { cert, key } => (from_files(cert, key)?, Some(stamps(cert, key)?)),
            Source::SelfSigned(names) => (self_signed(names)?, None),
        };
        Ok(Arc::new(Self {
            source,
            current: RwLock::new((key, stamps)),
        }))
    }

    /// A TLS acceptor serving this certificate (HTTP/1.1).
    pub fn acceptor(self: &Arc<Self>) -> anyhow::Result<TlsAcceptor> {
        let mut config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(Arc::clone(self) as Arc<dyn ResolvesServerCert>);
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }

    /// Reads the files again if they changed since the last read; true if the certificate was
    /// replaced.
    pub fn reload(&self) -> bool {
        let Source::Files { cert, key } = &self.source else {
            return false;
        };
        let Ok(now) = stamps(cert, key) else {
            return false;
        };
        if self.current.read().unwrap_or_else(|e| e.into_inner()).1 == Some(now) {
            return false;
        }
        match from_files(cert, key) {
            Ok(replacement) => {
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = (replacement, Some(now));
                tracing::info!(cert = %cert.display(), "TLS certificate reloaded");
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "the TLS files changed but do not load; keeping the current certificate");
                false
            }
        }
    }

    /// Looks at the files every [`RELOAD_EVERY`] until `shutdown`.
    pub async fn watch(self: Arc<Self>, shutdown: impl Future<Output = ()>) {
        if !matches!(self.source, Source::Files { .. }) {
            return;
        }
        let mut ticks = tokio::time::interval(RELOAD_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let looking = async {
            loop {
                ticks.tick().await;
                let certificate = Arc::clone(&self);
                // file reads off the async workers
                let _ = tokio::task::spawn_blocking(move || certificate.reload()).await;
            }
        };
        tokio::select! {
            () = looking => {}
            () = shutdown => {}
        }
    }
}

/// The modification times of both files (a rotation changes at least one).
fn stamps(cert: &Path, key: &Path) -> anyhow::Result<Stamps> {
    let modified = |path: &Path| -> anyhow::Result<SystemTime> {
        std::fs::metadata(path)
            .and_then(|m| m.modified())
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    };
    Ok((modified(cert)?, modified(key)?))
}

fn from_files(cert: &Path, key: &Path) -> anyhow::Result<Arc<CertifiedKey>> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| anyhow::anyhow!("--tls-cert-file {}: {e}", cert.display()))?;
    anyhow::ensure!(
        !chain.is_empty(),
        "--tls-cert-file {}: no PEM certificate in it",
        cert.display()
    );
    let private = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| anyhow::anyhow!("--tls-key-file {}: {e}", key.display()))?;
    certified(chain, private)
}

fn self_signed(names: &[String]) -> anyhow::Result<Arc<CertifiedKey>> {
    let generated = rcgen::generate_simple_self_signed(names.to_vec())?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(generated.signing_key.serialize_der()));
    certified(vec![generated.cert.der().clone()], key)
}

fn certified(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> anyhow::Result<Arc<CertifiedKey>> {
    let signing = ring::sign::any_supported_type(&key).map_err(|e| anyhow::anyhow!("the TLS key: {e}"))?;
    let certified = CertifiedKey::new(chain, signing);
    certified
        .keys_match()
        .map_err(|e| anyhow::anyhow!("the TLS key does not match the certificate: {e}"))?;
    Ok(Arc::new(certified))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        let generated = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
        let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        std::fs::write(&cert, generated.cert.pem()).unwrap();
        std::fs::write(&key, generated.signing_key.serialize_pem()).unwrap();
        (cert, key)
    }

    fn served(certificate: &Certificate) -> Vec<u8> {
        certificate.current.read().unwrap().0.cert[0].to_vec()
    }

    #[test]
    fn changed_files_replace_the_certificate_and_broken_ones_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = write_pair(dir.path(), "first.example");
        let certificate = Certificate::load(Source::Files {
            cert: cert.clone(),
            key: key.clone(),
        })
        .unwrap();
        let first = served(&certificate);
        assert!(!certificate.reload(), "unchanged files are not read again");
        // a rotation: new files, with a modification time that differs whatever the clock's grain
        write_pair(dir.path(), "second.example");
        let later = SystemTime::now() + Duration::from_secs(5);
        for path in [&cert, &key] {
            std::fs::File::options()
                .write(true)
                .open(path)
                .unwrap()
                .set_modified(later)
                .unwrap();
        }
        assert!(certificate.reload());
        assert_ne!(served(&certificate), first);
        let second = served(&certificate);
        std::fs::write(&cert, "half a file").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&cert)
            .unwrap()
            .set_modified(later + Duration::from_secs(5))
            .unwrap();
        assert!(!certificate.reload());
        assert_eq!(
            served(&certificate),
            second,
            "a broken file keeps the certificate"
        );
    }

    #[test]
    fn a_key_of_another_certificate_is_refused_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, _) = write_pair(dir.path(), "one.example");
        let other = tempfile::tempdir().unwrap();
        let (_, key) = write_pair(other.path(), "two.example");
        let error = Certificate::load(Source::Files { cert, key }).unwrap_err();
        assert!(error.to_string().contains("does not match"), "{error}");
    }

    #[test]
    fn a_self_signed_certificate_serves() {
        let certificate =
            Certificate::load(Source::SelfSigned(vec!["localhost".into(), "127.0.0.1".into()])).unwrap();
        assert!(certificate.acceptor().is_ok());
        assert!(!certificate.reload(), "nothing to reload");
    }
}
