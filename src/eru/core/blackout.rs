//! Blackout windows, pure: whether a restart instant falls in one, and which. An Eru's own
//! (`spec.blackouts`, journaled with its epoch) and the operator's cluster-wide list
//! (`--blackouts-file`, read by [`crate::eru::cluster_blackouts`]) are checked alike; the first
//! window that holds the instant names the record of the slot it skips.

use chrono::{DateTime, Duration, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schedule::{SCHEDULE_PATTERN, Schedule, slot_text};

/// A blackout's name: letters, digits, `-`, `_`, `.`.
pub const BLACKOUT_NAME_PATTERN: &str = r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$";

/// A window in which no restart starts: recurring (`schedule` + `durationSeconds`) or absolute
/// (`start` + `end`).
// The CRD checks its shape with CEL rules on `spec.blackouts` (crate::eru::EruSpec); the
// operator's cluster-wide file is checked by `Blackouts::compile`.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Blackout {
    /// Shown in the records of the slots it skips.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), regex(pattern = BLACKOUT_NAME_PATTERN))]
    pub name: Option<String>,
    /// Recurring: when each window opens (crontab, as `spec.schedule`; `H` allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128), regex(pattern = SCHEDULE_PATTERN))]
    pub schedule: Option<String>,
    /// Recurring: how long each window lasts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 31_536_000))]
    pub duration_seconds: Option<i64>,
    /// Absolute: when the window opens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<DateTime<Utc>>,
    /// Absolute: when it closes (exclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<DateTime<Utc>>,
}

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

    /// What holds a slot under a spec: its blackouts and the cluster's, or its own alone if a
    /// cluster one cannot be compiled in its time zone (checked when the file was read); `Err`
    /// if its own are invalid.
    pub fn for_spec(
        spec: &[Blackout],
        cluster: &[Blackout],
        tz: Option<&str>,
        seed: &str,
    ) -> Result<Self, BlackoutError> {
        Self::compile(spec, cluster, tz, seed).or_else(|_| Self::compile(spec, &[], tz, seed))
    }

    /// [`Blackouts::for_spec`], none if the spec's own are invalid (such a spec's slots are
    /// skipped `spec_invalid`).
    pub fn in_force(spec: &[Blackout], cluster: &[Blackout], tz: Option<&str>, seed: &str) -> Self {
        Self::for_spec(spec, cluster, tz, seed).unwrap_or_default()
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
    }
}
