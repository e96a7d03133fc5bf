//! The operator's cluster-wide blackouts and health gates (`--blackouts-file`): the file read at
//! start, then followed, so an edited ConfigMap applies without a restart. The windows' maths is
//! the core's ([`super::core::blackout`]).

use std::{
    path::PathBuf,
    sync::{Arc, RwLock},
};

use tracing::{info, warn};

use super::{
    Gates,
    core::blackout::{Blackout, Blackouts},
    gates::check_gates,
};

/// Reads the cluster-wide list: YAML (or JSON) of blackouts, as `spec.blackouts` takes them.
/// Every entry is checked (in UTC, with a placeholder seed) so a bad file is refused whole.
pub fn parse_cluster_list(text: &str) -> Result<Vec<Blackout>, String> {
    let list: Vec<Blackout> = if text.trim().is_empty() {
        Vec::new()
    } else {
        serde_yaml::from_str(text).map_err(|e| format!("not a list of blackouts: {e}"))?
    };
    Blackouts::compile(&[], &list, None, "check/check").map_err(|e| e.to_string())?;
    Ok(list)
}

/// The operator's cluster-wide blackouts (`--blackouts-file`): read at start (a bad file stops
/// the operator with the reason), then re-read every [`RELOAD_EVERY`] so an edited ConfigMap
/// mounted as the file applies without a restart; a bad edit is logged and the last good list
/// stays.
#[derive(Debug, Default)]
pub struct ClusterBlackouts {
    path: Option<PathBuf>,
    current: RwLock<(String, ClusterFile)>,
}

/// What the operator's file holds: cluster-wide blackouts, and cluster-wide health gates.
#[derive(Clone, Debug, Default)]
pub struct ClusterFile {
    pub blackouts: Arc<Vec<Blackout>>,
    pub gates: Option<Arc<Gates>>,
}

/// The file as a mapping (the list alone is the blackouts).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileMapping {
    #[serde(default)]
    blackouts: Vec<Blackout>,
    #[serde(default)]
    gates: Option<Gates>,
}

/// Reads the operator's file: a YAML (or JSON) list of blackouts, or a mapping with
/// `blackouts` (that list) and `gates` (shaped like an Eru's `spec.gates`: they apply to every
/// Eru, a blocking-pod selector across the namespaces the operator watches). Everything is
/// checked, so a bad file is refused whole.
pub fn parse_cluster_file(text: &str) -> Result<ClusterFile, String> {
    let value: serde_yaml::Value = if text.trim().is_empty() {
        serde_yaml::Value::Sequence(Vec::new())
    } else {
        serde_yaml::from_str(text).map_err(|e| format!("not YAML: {e}"))?
    };
    if value.is_sequence() {
        return Ok(ClusterFile {
            blackouts: Arc::new(parse_cluster_list(text)?),
            gates: None,
        });
    }
    let file: FileMapping = serde_yaml::from_value(value)
        .map_err(|e| format!("neither a list of blackouts nor a mapping of blackouts and gates: {e}"))?;
    Blackouts::compile(&[], &file.blackouts, None, "check/check").map_err(|e| e.to_string())?;
    if let Some(gates) = &file.gates {
        check_gates(gates).map_err(|e| format!("gates: {e}"))?;
    }
    Ok(ClusterFile {
        blackouts: Arc::new(file.blackouts),
        gates: file.gates.map(Arc::new),
    })
}

/// How often the file is read again.
pub const RELOAD_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

impl ClusterBlackouts {
    /// Reads `path` (none: no cluster-wide blackouts).
    pub fn load(path: Option<PathBuf>) -> Result<Self, String> {
        let Some(path) = path else {
            return Ok(Self::default());
        };
        let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        let file = parse_cluster_file(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Self {
            path: Some(path),
            current: RwLock::new((text, file)),
        })
    }

    /// The list in force.
    pub fn current(&self) -> Arc<Vec<Blackout>> {
        self.current.read().expect("blackouts lock").1.blackouts.clone()
    }

    /// The cluster-wide gates in force, if any.
    pub fn gates(&self) -> Option<Arc<Gates>> {
        self.current.read().expect("blackouts lock").1.gates.clone()
    }

    /// Reads the file again if it changed.
    pub fn reload(&self) {
        let Some(path) = &self.path else { return };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) => {
                warn!(path = %path.display(), error = %e, "cluster blackouts unreadable; the last list stays");
                return;
            }
        };
        if self.current.read().expect("blackouts lock").0 == text {
            return;
        }
        match parse_cluster_file(&text) {
            Ok(file) => {
                info!(
                    path = %path.display(),
                    blackouts = file.blackouts.len(),
                    gates = file.gates.is_some(),
                    "cluster blackouts and gates reloaded"
                );
                *self.current.write().expect("blackouts lock") = (text, file);
            }
            Err(e) => {
                warn!(path = %path.display(), error = %e, "cluster blackouts refused; the last list stays")
            }
        }
    }

    /// Re-reads the file every [`RELOAD_EVERY`] until `shutdown`.
    pub async fn follow(self: Arc<Self>, shutdown: impl std::future::Future<Output = ()>) {
        if self.path.is_none() {
            return;
        }
        let reload = async {
            loop {
                tokio::time::sleep(RELOAD_EVERY).await;
                self.reload();
            }
        };
        tokio::select! {
            () = reload => {}
            () = shutdown => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_is_checked_whole() {
        assert!(parse_cluster_list("- name: x\n  start: 2026-11-27T00:00:00Z\n").is_err());
        assert_eq!(
            parse_cluster_list("- name: bf\n  start: 2026-11-27T00:00:00Z\n  end: 2026-11-30T00:00:00Z\n")
                .unwrap()
                .len(),
            1
        );
        assert!(parse_cluster_list("").unwrap().is_empty());
    }

    #[test]
    fn the_file_is_a_list_of_blackouts_or_a_mapping_with_gates() {
        let list =
            parse_cluster_file("- name: bf\n  start: 2026-11-27T00:00:00Z\n  end: 2026-11-30T00:00:00Z\n")
                .unwrap();
        assert_eq!((list.blackouts.len(), list.gates.is_none()), (1, true));
        let both = parse_cluster_file(
            "blackouts:\n  - name: bf\n    start: 2026-11-27T00:00:00Z\n    end: 2026-11-30T00:00:00Z\n\
             gates:\n  alerts:\n    name: NodeDown|KubeAPIErrorBudgetBurn\n  blockingPodSelector:\n    matchLabels: {eru.mtsre.meitu.com/blocks: \"true\"}\n",
        )
        .unwrap();
        assert_eq!(both.blackouts.len(), 1);
        let gates = both.gates.unwrap();
        assert!(gates.alerts.is_some() && gates.blocking_pod_selector.is_some());
        assert!(
            parse_cluster_file("gates:\n  alerts:\n    name: \"(\"\n")
                .unwrap_err()
                .contains("gates")
        );
        assert!(parse_cluster_file("gates: {}\n").is_err(), "no gate in gates");
        assert!(parse_cluster_file("gate: {}\n").is_err(), "unknown key");
        assert!(parse_cluster_file("").unwrap().blackouts.is_empty());
    }
}
