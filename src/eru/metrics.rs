//! The Eru's own series, registered into the shared registry: restarts and their duration, slots
//! by result and reason, fire lateness, the next slot and when the rollout in progress began.
//! Per-Eru series start at 0 (dashboards and alerts see 0, not "no data") and leave with the Eru.

use std::{
    collections::BTreeMap,
    num::NonZeroI64,
    ops::Bound,
    sync::{Arc, Mutex},
};

use prometheus::{Histogram, IntGauge, IntGaugeVec, Opts};
use strum::VariantArray;

use super::core::machine::State;
use crate::metrics::{CHUNK, Cursor, Metrics, TextSeries, histogram, register, text_header, text_sample};
use crate::vocab::{Outcome, Reason, RunOutcome};

/// Handles of the Eru series. Cheap to clone.
#[derive(Clone)]
pub struct EruMetrics {
    pub restart_duration: Histogram,
    pub fire_lateness: Histogram,
    /// The journal reads of each Eru pass (`eru_pass_journal_reads`).
    pub pass_reads: Histogram,
    queued: IntGauge,
    in_flight: IntGauge,
    held: IntGauge,
    held_since: IntGaugeVec,
    manual_runs: prometheus::IntCounterVec,
    /// Restarts another field manager undid (`eru_restarts_reverted_total`).
    pub reverted: prometheus::IntCounter,
    per_eru: PerEru,
}

/// Every (result, reason) of `eru_slots_total`: a fired slot's reason is `scheduled`.
const SLOT_SERIES: usize = Reason::VARIANTS.len();

fn slot_series() -> impl Iterator<Item = (&'static str, &'static str)> {
    Reason::VARIANTS.iter().map(|r| (r.result().as_str(), r.as_str()))
}

/// `eru_manual_runs_total{outcome}`, every ended outcome's series from the start (a rate over a
/// new series misses its first run).
fn manual_runs(registry: &prometheus::Registry) -> prometheus::IntCounterVec {
    let runs = register(
        registry,
        prometheus::IntCounterVec::new(
            Opts::new(
                "eru_manual_runs_total",
                "Manual runs (mtsre.meitu.com/run-now) ended, by outcome (succeeded, failed, abandoned, refused, dry_run).",
            ),
            &["outcome"],
        )
        .expect("a valid counter"),
    );
    // every outcome from the start: a rate over a new series misses its first run
    for outcome in RunOutcome::VARIANTS.iter().filter(|o| o.ended()) {
        runs.with_label_values(&[outcome.as_str()]);
    }
    runs
}

/// The restart pace's series (registered only when the operator paces its restarts).
#[derive(Clone)]
pub struct PaceMetrics {
    rate: prometheus::Gauge,
    why: IntGaugeVec,
}

impl PaceMetrics {
    pub fn register(metrics: &Metrics) -> Self {
        let registry = metrics.registry();
        let rate = prometheus::Gauge::new(
            "eru_restart_pace_per_second",
            "Restarts that may begin per second now (--restart-pace, --restart-rate).",
        )
        .expect("a valid gauge");
        let why = IntGaugeVec::new(
            Opts::new(
                "eru_restart_pace_why",
                "Why the restart pace is what it is: 1 on the current reason (ceiling, rising, latency, throttled), 0 on the others.",
            ),
            &["why"],
        )
        .expect("a valid gauge");
        Self {
            rate: register(registry, rate),
            why: register(registry, why),
        }
    }

    pub fn set(&self, rate: f64, now: crate::eru::pace::Why) {
        self.rate.set(rate);
        for why in <crate::eru::pace::Why as VariantArray>::VARIANTS {
            let name: &'static str = why.into();
            self.why.with_label_values(&[name]).set(i64::from(*why == now));
        }
    }
}

/// `eru_restarts_reverted_total`.
fn reverted(registry: &prometheus::Registry) -> prometheus::IntCounter {
    let help = "Restarts another field manager undid (removed or replaced mtsre.meitu.com/restartedAt after the patch: a GitOps tool, an operator rebuilding the template).";
    register(
        registry,
        prometheus::IntCounter::new("eru_restarts_reverted_total", help).expect("a valid counter"),
    )
}

impl EruMetrics {
    /// Registers the Eru series in `metrics`' registry.
    pub fn register(metrics: &Metrics) -> Self {
        let registry = metrics.registry();
        Self {
            restart_duration: histogram(
                registry,
                "eru_restart_duration_seconds",
                "From the restart patch to the rollout's end.",
                vec![1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 3600.0],
            ),
            fire_lateness: histogram(
                registry,
                "eru_fire_lateness_seconds",
                "Time from a slot to its restart patch.",
                vec![0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0],
            ),
            pass_reads: histogram(
                registry,
                "eru_pass_journal_reads",
                "Journal read queries of each Eru pass (observe, commit and status together).",
                vec![2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 16.0, 24.0],
            ),
            queued: register(
                registry,
                IntGauge::new(
                    "eru_restarts_queued",
                    "Due slots waiting for a place under --max-concurrent-restarts, or a token of the restart pace.",
                )
                .expect("a valid gauge"),
            ),
            in_flight: register(
                registry,
                IntGauge::new(
                    "eru_restarts_in_flight",
                    "Restarts holding a place under --max-concurrent-restarts (decided or rolling out).",
                )
                .expect("a valid gauge"),
            ),
            held: register(
                registry,
                IntGauge::new(
                    "eru_held_slots",
                    "Due slots a health gate holds (blocking pods, a firing alert, an unknown answer).",
                )
                .expect("a valid gauge"),
            ),
            held_since: register(
                registry,
                IntGaugeVec::new(
                    Opts::new(
                        "eru_held_since_timestamp_seconds",
                        "When the slot a health gate holds was first held, per Eru (only while one is held).",
                    ),
                    &["namespace", "name"],
                )
                .expect("a valid gauge"),
            ),
            manual_runs: manual_runs(registry),
            reverted: reverted(registry),
            per_eru: {
                let per_eru = PerEru::default();
                metrics.add_text(Arc::new(per_eru.clone()));
                per_eru
            },
        }
    }

    /// Sets the fleet's queue length and restarts in flight.
    pub fn set_fleet(&self, queued: usize, in_flight: usize) {
        self.queued.set(queued as i64);
        self.in_flight.set(in_flight as i64);
    }

    /// Sets (or, with `None`, removes) when the Eru's held slot was first held, and how many
    /// slots are held in all.
    pub fn set_held(
        &self,
        namespace: &str,
        name: &str,
        since: Option<chrono::DateTime<chrono::Utc>>,
        held: usize,
    ) {
        match since {
            Some(since) => self
                .held_since
                .with_label_values(&[namespace, name])
                .set(since.timestamp()),
            None => {
                let _ = self.held_since.remove_label_values(&[namespace, name]);
            }
        }
        self.held.set(held as i64);
    }

    /// Sets when the Eru paused itself on failure, or (`None`) that it is not paused.
    pub fn set_paused(&self, namespace: &str, name: &str, since: Option<chrono::DateTime<chrono::Utc>>) {
        self.per_eru
            .with(namespace, name, |s| s.paused_since = seconds(since));
    }

    /// Creates an Eru's counter series at 0 (every outcome, result and reason).
    pub fn init(&self, namespace: &str, name: &str) {
        self.per_eru.with(namespace, name, |_| {});
    }

    /// Counts `count` slots of the Eru with `result` and `reason`.
    pub fn add_slots(&self, namespace: &str, name: &str, reason: Reason, count: u64) {
        let Some(at) = Reason::VARIANTS.iter().position(|r| *r == reason) else {
            return;
        };
        let count = u32::try_from(count).unwrap_or(u32::MAX);
        self.per_eru.with(namespace, name, |s| {
            let slots = &mut s.counts().slots;
            slots[at] = slots[at].saturating_add(count)
        });
    }

    /// Counts a finished restart of the Eru.
    pub fn add_restart(&self, namespace: &str, name: &str, outcome: Outcome) {
        let at = Outcome::ENDED
            .iter()
            .position(|o| *o == outcome)
            .unwrap_or_default();
        self.per_eru.with(namespace, name, |s| {
            let restarts = &mut s.counts().restarts;
            restarts[at] = restarts[at].saturating_add(1)
        });
    }

    /// Counts a manual run that ended.
    pub fn add_manual_run(&self, outcome: RunOutcome) {
        self.manual_runs.with_label_values(&[outcome.as_str()]).inc();
    }

    /// Sets (or, with `None`, removes) the Eru's next slot.
    pub fn set_next(&self, namespace: &str, name: &str, next: Option<chrono::DateTime<chrono::Utc>>) {
        self.per_eru.with(namespace, name, |s| s.next = seconds(next));
    }

    /// Sets when the Eru's rollout in progress began (its restart patch landed) while `state` is
    /// RollingOut, and removes the series otherwise: the `EruRolloutStuck` alert judges each Eru by
    /// its own rollout's age, so back-to-back rollouts of different Erus never add up.
    pub fn set_rollout(&self, namespace: &str, name: &str, state: &State) {
        let started = match state {
            State::RollingOut { rollout } => seconds(Some(rollout.patched_at)),
            _ => None,
        };
        self.per_eru
            .with(namespace, name, |s| s.rollout_started = started);
    }

    /// Removes every series of a deleted Eru.
    pub fn forget(&self, namespace: &str, name: &str) {
        self.per_eru.forget(namespace, name);
    }
}

/// One Eru's counters, next slot, rollout start and pause: 32 bytes. The counters are allocated
/// at the first count (an Eru on a yearly schedule may never have one), 32-bit (a slot a second
/// for 136 years); the instants are Unix seconds, never 0 for an instant a pass sets.
#[derive(Default)]
struct Series {
    counts: Option<Box<Counts>>,
    next: Option<NonZeroI64>,
    rollout_started: Option<NonZeroI64>,
    paused_since: Option<NonZeroI64>,
}

#[derive(Default)]
struct Counts {
    restarts: [u32; Outcome::ENDED.len()],
    slots: [u32; SLOT_SERIES],
}

impl Series {
    fn counts(&mut self) -> &mut Counts {
        self.counts.get_or_insert_default()
    }

    fn restarts(&self) -> [u32; Outcome::ENDED.len()] {
        self.counts.as_ref().map(|c| c.restarts).unwrap_or_default()
    }

    fn slots(&self) -> [u32; SLOT_SERIES] {
        self.counts.as_ref().map_or([0; SLOT_SERIES], |c| c.slots)
    }
}

/// An instant as a series keeps it ([`Series`]): Unix seconds.
fn seconds(at: Option<chrono::DateTime<chrono::Utc>>) -> Option<NonZeroI64> {
    at.and_then(|t| NonZeroI64::new(t.timestamp()))
}

/// An Eru's key in [`PerEru`]: its namespace, a NUL and its name. It sorts as the pair would (a
/// NUL is below every character a Kubernetes name may hold), in one allocation instead of two.
fn eru_key(namespace: &str, name: &str) -> String {
    format!("{namespace}\0{name}")
}

/// `eru_restarts_total`, `eru_slots_total`, `eru_next_fire_timestamp_seconds`,
/// `eru_rollout_started_timestamp_seconds` and `eru_paused_since_timestamp_seconds`, kept as a few
/// integers per Eru and rendered as text only when scraped, a chunk of Erus at a time (a
/// `prometheus` vector keeps each of an Eru's ~24 series as a copy of its descriptor and label
/// pairs: ~14 KB per Eru; gathering them as protobuf structures for a scrape costs ~1 KB a series).
#[derive(Clone, Default)]
struct PerEru {
    series: Arc<Mutex<BTreeMap<Box<str>, Series>>>,
}

const RESTARTS: (&str, &str) = (
    "eru_restarts_total",
    "Rolling restarts finished, by Eru and outcome (succeeded, failed, abandoned).",
);
const SLOTS: (&str, &str) = (
    "eru_slots_total",
    "Evaluated cron slots by result (fired, missed, skipped) and reason.",
);
const NEXT: (&str, &str) = (
    "eru_next_fire_timestamp_seconds",
    "Unix time of the next scheduled restart.",
);
const PAUSED: (&str, &str) = (
    "eru_paused_since_timestamp_seconds",
    "Unix time the Eru paused itself on failure (spec.failurePolicy); 0 while it is not paused.",
);
const ROLLOUT: (&str, &str) = (
    "eru_rollout_started_timestamp_seconds",
    "Unix time the Eru's rollout in progress began (its restart patch landed); only while it rolls out.",
);

impl PerEru {
    /// Runs `f` on the Eru's series, creating them at 0 first if need be.
    fn with(&self, namespace: &str, name: &str, f: impl FnOnce(&mut Series)) {
        let key = eru_key(namespace, name);
        let mut series = self.series.lock().expect("metrics lock");
        match series.get_mut(key.as_str()) {
            Some(s) => f(s),
            None => f(series.entry(key.into_boxed_str()).or_default()),
        }
    }

    fn forget(&self, namespace: &str, name: &str) {
        let mut series = self.series.lock().expect("metrics lock");
        series.remove(eru_key(namespace, name).as_str());
    }
}

impl TextSeries for PerEru {
    fn families(&self) -> usize {
        5
    }

    fn render(&self, family: usize, after: Option<&Cursor>, out: &mut String) -> Option<Cursor> {
        let (name, help, kind) = match family {
            0 => (RESTARTS.0, RESTARTS.1, "counter"),
            1 => (SLOTS.0, SLOTS.1, "counter"),
            2 => (NEXT.0, NEXT.1, "gauge"),
            3 => (ROLLOUT.0, ROLLOUT.1, "gauge"),
            _ => (PAUSED.0, PAUSED.1, "gauge"),
        };
        if after.is_none() {
            text_header(out, name, help, kind);
        }
        let series = self.series.lock().expect("metrics lock");
        let from = match after {
            Some(key) => Bound::Excluded(&**key),
            None => Bound::Unbounded,
        };
        let mut last: Option<&Cursor> = None;
        for (i, (key, s)) in series.range::<str, _>((from, Bound::Unbounded)).enumerate() {
            if i == CHUNK {
                return last.cloned();
            }
            let (namespace, eru) = key.split_once('\0').unwrap_or_default();
            match family {
                0 => {
                    for (outcome, count) in Outcome::ENDED.iter().zip(s.restarts()) {
                        let labels = [
                            ("name", eru),
                            ("namespace", namespace),
                            ("outcome", outcome.as_str()),
                        ];
                        text_sample(out, name, &labels, count);
                    }
                }
                1 => {
                    for ((result, reason), count) in slot_series().zip(s.slots()) {
                        let labels = [
                            ("name", eru),
                            ("namespace", namespace),
                            ("reason", reason),
                            ("result", result),
                        ];
                        text_sample(out, name, &labels, count);
                    }
                }
                2 => {
                    if let Some(at) = s.next {
                        text_sample(out, name, &[("name", eru), ("namespace", namespace)], at);
                    }
                }
                3 => {
                    if let Some(at) = s.rollout_started {
                        text_sample(out, name, &[("name", eru), ("namespace", namespace)], at);
                    }
                }
                _ => {
                    let at = s.paused_since.map_or(0, NonZeroI64::get);
                    text_sample(out, name, &[("name", eru), ("namespace", namespace)], at);
                }
            }
            last = Some(key);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Across chunk boundaries every Eru is rendered once per family, each family in one block.
    #[test]
    fn chunks_render_every_eru_once() {
        let metrics = Metrics::new();
        let eru = EruMetrics::register(&metrics);
        let n = 2 * crate::metrics::CHUNK + 7;
        for i in 0..n {
            eru.init("ns", &format!("e{i:04}"));
            eru.set_next(
                "ns",
                &format!("e{i:04}"),
                chrono::DateTime::from_timestamp(1_800_000_000, 0),
            );
        }
        assert!(metrics.chunks().count() > 3 * 3, "more than one chunk per family");
        let text = metrics.render();
        for i in 0..n {
            let needle =
                format!(r#"eru_next_fire_timestamp_seconds{{name="e{i:04}",namespace="ns"}} 1800000000"#);
            assert_eq!(text.matches(&needle).count(), 1, "{needle}");
        }
        for name in [
            "eru_restarts_total",
            "eru_slots_total",
            "eru_next_fire_timestamp_seconds",
        ] {
            assert_eq!(text.matches(&format!("# TYPE {name} ")).count(), 1, "{name}");
        }
        assert_eq!(text.matches("eru_slots_total{").count(), n * SLOT_SERIES);
    }

    /// The rollout's start is a series only while the Eru rolls out: it appears with the
    /// RollingOut state (at its patch's time, also when restored later), goes when the rollout
    /// ends, and goes with a deleted Eru.
    #[test]
    fn the_rollout_start_is_a_series_only_while_rolling_out() {
        let metrics = Metrics::new();
        let eru = EruMetrics::register(&metrics);
        let at = |s: i64| chrono::DateTime::from_timestamp(s, 0).unwrap();
        let rolling = State::RollingOut {
            rollout: crate::eru::core::restart::Rollout {
                cause: crate::eru::core::restart::Cause::Slot(at(1_800_000_000)),
                target: "Deployment/web".into(),
                patched_at: at(1_800_000_002),
                landed_generation: None,
            },
        };
        let series = r#"eru_rollout_started_timestamp_seconds{name="web",namespace="ns"} 1800000002"#;
        eru.init("ns", "web");
        eru.set_rollout("ns", "web", &State::Waiting {});
        assert!(
            !metrics
                .render()
                .contains("eru_rollout_started_timestamp_seconds{")
        );
        eru.set_rollout("ns", "web", &rolling);
        eru.set_rollout("ns", "other", &State::Waiting {});
        let text = metrics.render();
        assert!(text.contains(series), "{text}");
        assert_eq!(text.matches("eru_rollout_started_timestamp_seconds{").count(), 1);
        assert_eq!(
            text.matches("# TYPE eru_rollout_started_timestamp_seconds gauge")
                .count(),
            1
        );
        eru.set_rollout("ns", "web", &State::Waiting {});
        assert!(
            !metrics
                .render()
                .contains("eru_rollout_started_timestamp_seconds{")
        );
        eru.set_rollout("ns", "web", &rolling);
        eru.forget("ns", "web");
        assert!(!metrics.render().contains(r#"name="web""#));
    }

    /// Each Eru's series name its own namespace and name, also where one namespace and name
    /// joined would read like another's.
    #[test]
    fn series_keep_each_erus_namespace_and_name_apart() {
        let metrics = Metrics::new();
        let eru = EruMetrics::register(&metrics);
        let at = chrono::DateTime::from_timestamp(1_800_000_000, 0);
        for (namespace, name) in [("team-a", "web"), ("team", "a-web"), ("team", "a")] {
            eru.init(namespace, name);
            eru.set_next(namespace, name, at);
        }
        eru.add_restart("team", "a-web", Outcome::Succeeded);
        let text = metrics.render();
        let next = |namespace: &str, name: &str| {
            format!(r#"eru_next_fire_timestamp_seconds{{name="{name}",namespace="{namespace}"}} 1800000000"#)
        };
        for (namespace, name) in [("team-a", "web"), ("team", "a-web"), ("team", "a")] {
            assert_eq!(text.matches(&next(namespace, name)).count(), 1, "{text}");
        }
        assert_eq!(text.matches("eru_next_fire_timestamp_seconds{").count(), 3);
        let succeeded = |namespace: &str, name: &str| {
            format!(r#"eru_restarts_total{{name="{name}",namespace="{namespace}",outcome="succeeded"}}"#)
        };
        assert!(
            text.contains(&format!("{} 1", succeeded("team", "a-web"))),
            "{text}"
        );
        assert!(
            text.contains(&format!("{} 0", succeeded("team-a", "web"))),
            "{text}"
        );
        assert!(text.contains(&format!("{} 0", succeeded("team", "a"))), "{text}");
        eru.forget("team", "a-web");
        let text = metrics.render();
        assert!(!text.contains(r#"name="a-web""#));
        assert!(text.contains(&next("team-a", "web")) && text.contains(&next("team", "a")));
    }

    #[test]
    fn an_erus_series_start_at_zero_and_leave_with_it() {
        let metrics = Metrics::new();
        let eru = EruMetrics::register(&metrics);
        eru.init("ns", "web");
        eru.add_slots("ns", "web", Reason::OperatorDown, 3);
        eru.add_restart("ns", "web", Outcome::Failed);
        eru.set_next("ns", "web", chrono::DateTime::from_timestamp(1_800_000_000, 0));
        let text = metrics.render();
        assert!(text.contains(r#"eru_restarts_total{name="web",namespace="ns",outcome="abandoned"} 0"#));
        assert!(
            text.contains(
                r#"eru_slots_total{name="web",namespace="ns",reason="suspended",result="skipped"} 0"#
            )
        );
        assert!(text.contains(
            r#"eru_slots_total{name="web",namespace="ns",reason="operator_down",result="missed"} 3"#
        ));
        assert!(text.contains(r#"eru_restarts_total{name="web",namespace="ns",outcome="failed"} 1"#));
        assert!(text.contains(r#"eru_next_fire_timestamp_seconds{name="web",namespace="ns"} 1800000000"#));
        assert!(text.contains(
            r#"eru_slots_total{name="web",namespace="ns",reason="journal_unavailable",result="missed"} 0"#
        ));
        // not paused: 0; paused: since when
        assert!(text.contains(r#"eru_paused_since_timestamp_seconds{name="web",namespace="ns"} 0"#));
        assert_eq!(text.matches(r#"name="web""#).count(), 4 + SLOT_SERIES + 1 + 1);
        eru.set_paused("ns", "web", chrono::DateTime::from_timestamp(1_800_000_060, 0));
        let paused = r#"eru_paused_since_timestamp_seconds{name="web",namespace="ns"} 1800000060"#;
        assert!(metrics.render().contains(paused));
        eru.forget("ns", "web");
        assert!(!metrics.render().contains(r#"name="web""#));
    }
}
