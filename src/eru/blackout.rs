//! Blackout windows, pure: whether a restart instant falls in one, and which. An Eru's own
//! (`spec.blackouts`, journaled with its epoch) and the operator's cluster-wide list
//! (`--blackouts-file`) are checked alike; the first window that holds the instant names the
//! record of the slot it skips.

use std::{
    path::PathBuf,
    sync::{Arc, RwLock},
};

use chrono::{DateTime, Duration, Utc};
use tracing::{info, warn};

use super::{
    Blackout, Gates,
    schedule::{Schedule, slot_text},
};

/// A stretch `(opened, closed)` (the ledger's `Window`).
type Window = (DateTime<Utc>, DateTime<Utc>);

/// Where a blackout was declared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `spec.blackouts[i]`.
    Spec(usize),
    /// The operator's cluster-wide list, entry `i`.
    Cluster(usize),
}

/// One blackout, ready to test instants against.
#[derive(Clone, Debug)]
enum When {
    /// Windows open at the schedule's slots and last `duration`.
    Recurring {
        opens: Box<Schedule>,
        duration: Duration,
    },
    /// One window `[start, end)`.
    Absolute {
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    },
}

#[derive(Clone, Debug)]
struct Compiled {
    origin: Origin,
    name: Option<String>,
    when: When,
}

/// The window an instant fell in, and how the record names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hit {
    /// `(opened, closed)`.
    pub window: Window,
    pub note: String,
}

/// A set of blackouts in one Eru's time zone.
#[derive(Clone, Debug, Default)]
pub struct Blackouts(Vec<Compiled>);

/// Why a blackout cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {reason}")]
pub struct BlackoutError {
    pub origin: String,
    pub reason: String,
}

impl Origin {
    fn describe(self) -> String {
        match self {
            Origin::Spec(i) => format!("spec.blackouts[{i}]"),
            Origin::Cluster(i) => format!("cluster blackout {i}"),
        }
    }
}

fn compile(
    origin: Origin,
    blackout: &Blackout,
    tz: Option<&str>,
    seed: &str,
) -> Result<Compiled, BlackoutError> {
    let error = |reason: String| BlackoutError {
        origin: origin.describe(),
        reason,
    };
    let when = match blackout {
        Blackout {
            schedule: Some(expr),
            duration_seconds: Some(seconds),
            start: None,
            end: None,
            ..
        } if *seconds > 0 => When::Recurring {
            opens: Box::new(Schedule::parse_for(expr, tz, seed).map_err(|e| error(e.to_string()))?),
            duration: Duration::seconds(*seconds),
        },
        Blackout {
            schedule: None,
            duration_seconds: None,
            start: Some(start),
            end: Some(end),
            ..
        } if end > start => When::Absolute {
            start: *start,
            end: *end,
        },
        _ => {
            return Err(error(
                "a blackout is either recurring (schedule and durationSeconds > 0) or absolute \
                 (start and a later end)"
                    .into(),
            ));
        }
    };
    Ok(Compiled {
        origin,
        name: blackout.name.clone(),
        when,
    })
}

impl Blackouts {
    /// Compiles an Eru's blackouts and the cluster-wide ones, in the Eru's time zone `tz`;
    /// `seed` (the Eru's `namespace/name`) resolves `H` in their schedules.
    pub fn compile(
        spec: &[Blackout],
        cluster: &[Blackout],
        tz: Option<&str>,
        seed: &str,
    ) -> Result<Self, BlackoutError> {
        let own = spec
            .iter()
            .enumerate()
            .map(|(i, b)| compile(Origin::Spec(i), b, tz, seed));
        let shared = cluster
            .iter()
            .enumerate()
            .map(|(i, b)| compile(Origin::Cluster(i), b, tz, seed));
        own.chain(shared).collect::<Result<_, _>>().map(Blackouts)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The first window holding `at`, if any.
    pub fn find(&self, at: DateTime<Utc>) -> Option<Hit> {
        self.0.iter().find_map(|b| {
            let (opened, closed) = match &b.when {
                When::Absolute { start, end } => (*start, *end),
                When::Recurring { opens, duration } => {
                    // a window that holds `at` opened in (at - duration, at]
                    let opened = opens.next_after(at - *duration)?;
                    (opened, opened + *duration)
                }
            };
            (opened <= at && at < closed).then(|| Hit {
                window: (opened, closed),
                note: b.note(opened, closed),
            })
        })
    }
}

impl Compiled {
    fn note(&self, opened: DateTime<Utc>, closed: DateTime<Utc>) -> String {
        let what = match (&self.origin, &self.name) {
            (Origin::Spec(i), Some(name)) => format!("blackout \"{name}\" (spec.blackouts[{i}])"),
            (Origin::Spec(i), None) => format!("blackout spec.blackouts[{i}]"),
            (Origin::Cluster(_), Some(name)) => format!("cluster blackout \"{name}\""),
            (Origin::Cluster(i), None) => format!("cluster blackout #{i}"),
        };
        format!("{what} from {} to {}", slot_text(opened), slot_text(closed))
    }
}

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
        super::hold::check_gates(gates).map_err(|e| format!("gates: {e}"))?;
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
    use chrono::TimeZone;

    use super::*;

    fn t(d: u32, h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, d, h, m, 0).unwrap()
    }

    fn recurring(name: Option<&str>, schedule: &str, seconds: i64) -> Blackout {
        Blackout {
            name: name.map(Into::into),
            schedule: Some(schedule.into()),
            duration_seconds: Some(seconds),
            start: None,
            end: None,
        }
    }

    fn absolute(name: &str, start: DateTime<Utc>, end: DateTime<Utc>) -> Blackout {
        Blackout {
            name: Some(name.into()),
            schedule: None,
            duration_seconds: None,
            start: Some(start),
            end: Some(end),
        }
    }

    #[test]
    fn recurring_window_holds_from_open_to_before_close() {
        // every day 02:00 for an hour
        let b = Blackouts::compile(
            &[recurring(Some("nightly"), "0 2 * * *", 3600)],
            &[],
            None,
            "ns/e",
        )
        .unwrap();
        assert_eq!(b.find(t(23, 1, 59)), None);
        let hit = b.find(t(23, 2, 0)).expect("opens at 02:00");
        assert_eq!(hit.window, (t(23, 2, 0), t(23, 3, 0)));
        assert_eq!(
            hit.note,
            "blackout \"nightly\" (spec.blackouts[0]) from 2026-11-23T02:00:00Z to 2026-11-23T03:00:00Z"
        );
        assert!(b.find(t(23, 2, 59)).is_some());
        assert_eq!(b.find(t(23, 3, 0)), None, "the end is exclusive");
    }

    #[test]
    fn recurring_window_in_the_eru_time_zone() {
        // 02:00 in Shanghai is 18:00 UTC the day before
        let b = Blackouts::compile(
            &[recurring(None, "0 2 * * *", 600)],
            &[],
            Some("Asia/Shanghai"),
            "ns/e",
        )
        .unwrap();
        assert!(b.find(t(22, 18, 5)).is_some());
        assert!(b.find(t(23, 2, 5)).is_none());
    }

    #[test]
    fn absolute_and_cluster_windows() {
        let freeze = absolute("black-friday", t(27, 0, 0), t(30, 0, 0));
        let b = Blackouts::compile(&[], &[freeze], None, "ns/e").unwrap();
        assert!(b.find(t(26, 23, 59)).is_none());
        let hit = b.find(t(28, 3, 0)).unwrap();
        assert_eq!(hit.window, (t(27, 0, 0), t(30, 0, 0)));
        assert!(
            hit.note
                .starts_with("cluster blackout \"black-friday\" from 2026-11-27T00:00:00Z")
        );
        assert!(b.find(t(30, 0, 0)).is_none());
    }

    #[test]
    fn bad_blackouts_are_refused_with_where() {
        let half = Blackout {
            duration_seconds: None,
            ..recurring(None, "0 2 * * *", 60)
        };
        let e = Blackouts::compile(&[half], &[], None, "ns/e").unwrap_err();
        assert_eq!(e.origin, "spec.blackouts[0]");
        let backwards = absolute("x", t(30, 0, 0), t(27, 0, 0));
        assert!(Blackouts::compile(&[], &[backwards], None, "ns/e").is_err());
        let e = Blackouts::compile(&[recurring(None, "0 25 * * *", 60)], &[], None, "ns/e").unwrap_err();
        assert!(e.to_string().contains("spec.blackouts[0]"), "{e}");
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
