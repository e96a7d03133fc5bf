//! `audit --all-contexts`: the clusters of a kubeconfig, each audited through its own context.
//!
//! A context names an API server, not the operator's HTTP API (which the API server's proxy
//! cannot carry a token to: see `remote`). So a context says where its operator answers in an
//! extension of its own, which kubectl keeps as it is (`kubectl config` rewrites a kubeconfig
//! with its extensions):
//!
//! ```yaml
//! contexts:
//! - name: prod-eu
//!   context:
//!     cluster: prod-eu
//!     user: sre
//!     extensions:
//!     - name: eru.mtsre.meitu.com
//!       extension:
//!         server: https://eru.prod-eu.example.com
//!         certificate-authority: eru-prod-eu.crt        # optional; relative: to the kubeconfig's folder
//!         tls-server-name: eru-operator.eru-system.svc  # optional
//! ```
//!
//! Every context with the extension is a cluster, named by its context, asked with its user's
//! token. A context without one is listed as not audited (it names no operator), never skipped
//! in silence; a malformed extension is a bad argument.

use std::path::{Path, PathBuf};

use kube::config::Kubeconfig;
use serde::Deserialize;

/// The name of a context's extension that says where its operator's HTTP API answers.
pub const EXTENSION: &str = "eru.mtsre.meitu.com";

/// One cluster of an audit across clusters, and how its operator is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// Its name in the report: its context, else its server.
    pub name: String,
    /// The operator's HTTP API.
    pub server: String,
    /// The kubeconfig context whose user's token is sent.
    pub context: Option<String>,
    /// The CA certificates its operator's certificate chains to (else the command's --cacert).
    pub cacert: Option<PathBuf>,
    /// The name its operator's certificate carries (else the command's --tls-server-name).
    pub tls_server_name: Option<String>,
}

impl Cluster {
    /// A cluster given by --server (its CA and certificate name: the command's flags).
    pub fn of_server(name: &str, server: &str, context: Option<String>) -> Self {
        Self {
            name: name.to_string(),
            server: server.to_string(),
            context,
            cacert: None,
            tls_server_name: None,
        }
    }
}

/// What the contexts of a kubeconfig say.
#[derive(Debug, PartialEq, Eq)]
pub struct Contexts {
    /// The contexts with the extension, in the kubeconfig's order.
    pub clusters: Vec<Cluster>,
    /// The contexts without it: not audited.
    pub without: Vec<String>,
}

/// The extension's fields. An unknown key is refused (a typo such as `sever` would otherwise
/// leave a context without its server), so a key a later release adds is refused by this one:
/// upgrade the CLI with the kubeconfig.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct Extension {
    server: String,
    certificate_authority: Option<PathBuf>,
    tls_server_name: Option<String>,
}

/// The clusters the contexts of `kubeconfig` name; `folder` is the kubeconfig file's, against
/// which a relative `certificate-authority` is read (as kubectl reads a cluster's).
pub fn of(kubeconfig: &Kubeconfig, folder: Option<&Path>) -> Result<Contexts, String> {
    let mut found = Contexts {
        clusters: Vec::new(),
        without: Vec::new(),
    };
    for named in &kubeconfig.contexts {
        let extension = (named.context.as_ref())
            .and_then(|c| c.extensions.as_ref())
            .and_then(|all| all.iter().find(|e| e.name == EXTENSION));
        let Some(extension) = extension else {
            found.without.push(named.name.clone());
            continue;
        };
        let bad = |why: String| {
            format!(
                "context {}: its {EXTENSION} extension {why} (it holds server, and optionally \
                 certificate-authority and tls-server-name)",
                named.name
            )
        };
        let extension: Extension = serde_json::from_value(extension.extension.clone())
            .map_err(|e| bad(format!("does not read: {e}")))?;
        // (the server's URL is checked as --server's is, when the cluster is reached)
        if extension.server.trim().is_empty() {
            return Err(bad("has an empty server".into()));
        }
        let cacert = extension.certificate_authority.map(|path| match folder {
            Some(folder) if path.is_relative() => folder.join(path),
            _ => path,
        });
        found.clusters.push(Cluster {
            name: named.name.clone(),
            server: extension.server,
            context: Some(named.name.clone()),
            cacert,
            tls_server_name: extension.tls_server_name,
        });
    }
    Ok(found)
}

/// The kubeconfig `--all-contexts` reads, and its file's folder when it is one file: `path`
/// (--kubeconfig), else $KUBECONFIG (its files merged, as kubectl does), else ~/.kube/config.
pub fn read(path: Option<&Path>) -> Result<(Kubeconfig, Option<PathBuf>), String> {
    let folder = |p: &Path| p.parent().map(Path::to_path_buf);
    if let Some(path) = path {
        let config =
            Kubeconfig::read_from(path).map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?;
        return Ok((config, folder(path)));
    }
    let default = || std::env::var_os("HOME").map(|home| Path::new(&home).join(".kube/config"));
    let listed: Vec<PathBuf> = (std::env::var_os("KUBECONFIG").iter())
        .flat_map(std::env::split_paths)
        .filter(|p| !p.as_os_str().is_empty())
        .collect();
    // (an empty KUBECONFIG is no KUBECONFIG, as kube reads it; several files merged have no one
    // folder: a relative certificate-authority is then read as given, from the working folder)
    let one_file = match listed.as_slice() {
        [] => default(),
        [one] => Some(one.clone()),
        _ => None,
    };
    let config = Kubeconfig::read().map_err(|e| format!("the kubeconfig: {e}"))?;
    Ok((config, one_file.as_deref().and_then(folder)))
}

#[cfg(test)]
mod tests;
