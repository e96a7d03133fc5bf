//! Need conditions: whether a due slot's restart would help, decided from what the pass observed
//! (the target's pods and when they started). A restart exists to replace pods that have run long
//! enough to leak; when every pod is younger than `minPodAgeSeconds` (a deploy or a manual
//! rollout replaced them), the slot is skipped `not_needed`, with the evidence in its note.
//! Asked when a slot is due and its gates are open, after every other reason to skip it.

use chrono::{DateTime, Duration, Utc};

use super::schedule::slot_text as text;
use crate::vocab::Reason;

/// What the need conditions answered for a due slot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Need {
    /// No condition, or the restart helps (an old enough pod runs; an unknown answer with
    /// `onUnknown: Restart`).
    #[default]
    Needed,
    /// The restart would not help: skipped `not_needed`, with the evidence.
    NotNeeded(String),
    /// The conditions could not be evaluated and `onUnknown: Skip`: skipped `need_unknown`, with
    /// the error (never recorded as not needed).
    Unknown(String),
}

impl Need {
    /// The reason and note a due slot is skipped for, if it is.
    pub fn skip(&self) -> Option<(Reason, &str)> {
        match self {
            Need::Needed => None,
            Need::NotNeeded(note) => Some((Reason::NotNeeded, note)),
            Need::Unknown(note) => Some((Reason::NeedUnknown, note)),
        }
    }
}

/// `minPodAgeSeconds`: the restart of `target` is not needed when every one of its running
/// `pods` (name, start) is younger than `min_age` at `now` (none running: nothing to replace).
pub fn by_pod_age(
    pods: &[(String, DateTime<Utc>)],
    min_age: Duration,
    now: DateTime<Utc>,
    target: &str,
) -> Need {
    let seconds = min_age.num_seconds();
    let Some((name, started)) = pods.iter().min_by_key(|(name, started)| (*started, name.clone())) else {
        return Need::NotNeeded(format!("no pod of {target} runs: a restart would replace none"));
    };
    if now - *started >= min_age {
        return Need::Needed;
    }
    Need::NotNeeded(format!(
        "every pod of {target} is younger than {seconds} s (minPodAgeSeconds): the oldest of {}, {name}, started at {} ({} s before the slot's pass)",
        pods.len(),
        text(*started),
        (now - *started).num_seconds()
    ))
}

/// `query` (as sent): needed when a sample of its answer is above `threshold`; a query that
/// answers no sample has none above it.
pub fn by_query(samples: &[f64], threshold: f64, query: &str) -> Need {
    let max = samples.iter().copied().filter(|v| !v.is_nan()).reduce(f64::max);
    match max {
        Some(value) if value > threshold => Need::Needed,
        Some(value) => Need::NotNeeded(format!(
            "the need query returned {value} at most, not above its threshold {threshold}: {query}"
        )),
        None => Need::NotNeeded(format!(
            "the need query returned no sample, so none above its threshold {threshold}: {query}"
        )),
    }
}

/// The answer of several conditions: not needed when one says so (its evidence: a definite no
/// is true whatever the others could not answer); else, if one could not be answered, unknown
/// with `skip_unknown` (`onUnknown: Skip`) and needed without; else needed.
pub fn all(answers: &[Need], skip_unknown: bool) -> Need {
    if let Some(no) = answers.iter().find(|a| matches!(a, Need::NotNeeded(_))) {
        return no.clone();
    }
    match answers.iter().find(|a| matches!(a, Need::Unknown(_))) {
        Some(unknown) if skip_unknown => unknown.clone(),
        _ => Need::Needed,
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 27, 3, 0, 0).unwrap() + Duration::seconds(s)
    }

    #[test]
    fn a_restart_is_needed_once_one_pod_is_old_enough() {
        let pods = |starts: &[i64]| -> Vec<(String, DateTime<Utc>)> {
            starts
                .iter()
                .enumerate()
                .map(|(i, s)| (format!("web-{i}"), t(*s)))
                .collect()
        };
        let hour = Duration::hours(1);
        // the oldest pod is exactly an hour old: needed (the boundary counts as old enough)
        assert_eq!(
            by_pod_age(&pods(&[600, 0]), hour, t(3600), "Deployment/web"),
            Need::Needed
        );
        let young = by_pod_age(&pods(&[600, 1]), hour, t(3600), "Deployment/web");
        assert_eq!(
            young,
            Need::NotNeeded(
                "every pod of Deployment/web is younger than 3600 s (minPodAgeSeconds): the oldest of 2, \
                 web-1, started at 2026-11-27T03:00:01Z (3599 s before the slot's pass)"
                    .into()
            )
        );
        assert_eq!(young.skip().map(|(r, _)| r), Some(Reason::NotNeeded));
        assert!(
            matches!(by_pod_age(&[], hour, t(0), "Deployment/web"), Need::NotNeeded(n) if n.starts_with("no pod"))
        );
        assert_eq!(Need::Unknown("x".into()).skip(), Some((Reason::NeedUnknown, "x")));
        assert_eq!(Need::Needed.skip(), None);
    }

    #[test]
    fn a_query_needs_a_sample_above_its_threshold() {
        let q = "max(x)";
        assert_eq!(by_query(&[0.2, 0.81], 0.8, q), Need::Needed);
        assert_eq!(
            by_query(&[0.8, f64::NAN], 0.8, q),
            Need::NotNeeded(
                "the need query returned 0.8 at most, not above its threshold 0.8: max(x)".into()
            ),
            "equal is not above; NaN is no value"
        );
        assert!(matches!(by_query(&[], 0.8, q), Need::NotNeeded(n) if n.contains("no sample")));
    }

    #[test]
    fn a_definite_no_wins_and_an_unknown_skips_only_when_asked() {
        let no = Need::NotNeeded("young".into());
        let unknown = Need::Unknown("Prometheus down".into());
        assert_eq!(all(&[unknown.clone(), no.clone()], false), no);
        assert_eq!(all(&[Need::Needed, unknown.clone()], true), unknown);
        assert_eq!(all(&[Need::Needed, unknown], false), Need::Needed);
        assert_eq!(all(&[], true), Need::Needed);
    }
}
