//! The Eru's own series, registered into the shared registry: restarts and their duration, slots
//! by result and reason, fire lateness and the next slot. Per-Eru series start at 0 (dashboards and
//! alerts see 0, not "no data") and leave with the Eru.

use prometheus::{GaugeVec, Histogram, IntCounterVec, Opts};

use super::{ledger::Reason, machine::RestartOutcome};
use crate::metrics::{Metrics, counter, histogram, register};

/// Handles of the Eru series. Cheap to clone.
#[derive(Clone)]
pub struct EruMetrics {
    pub restarts: IntCounterVec,
    pub restart_duration: Histogram,
    pub slots: IntCounterVec,
    pub fire_lateness: Histogram,
    pub next_fire: GaugeVec,
}

/// Every (result, reason) of `eru_slots_total`.
fn slot_series() -> impl Iterator<Item = (&'static str, &'static str)> {
    std::iter::once(("fired", "scheduled")).chain(Reason::ALL.iter().map(|r| (r.reason_result(), r.as_str())))
}

impl EruMetrics {
    /// Registers the Eru series in `metrics`' registry.
    pub fn register(metrics: &Metrics) -> Self {
        let registry = metrics.registry();
        Self {
            restarts: counter(
                registry,
                "eru_restarts_total",
                "Rolling restarts finished, by Eru and outcome (succeeded, failed, abandoned).",
                &["namespace", "name", "outcome"],
            ),
            restart_duration: histogram(
                registry,
                "eru_restart_duration_seconds",
                "From the restart patch to the rollout's end.",
                vec![1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 3600.0],
            ),
            slots: counter(
                registry,
                "eru_slots_total",
                "Evaluated cron slots by result (fired, missed, skipped) and reason.",
                &["namespace", "name", "result", "reason"],
            ),
            fire_lateness: histogram(
                registry,
                "eru_fire_lateness_seconds",
                "Time from a slot to its restart patch.",
                vec![0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0],
            ),
            next_fire: register(
                registry,
                GaugeVec::new(
                    Opts::new(
                        "eru_next_fire_timestamp_seconds",
                        "Unix time of the next scheduled restart.",
                    ),
                    &["namespace", "name"],
                )
                .expect("valid metric"),
            ),
        }
    }

    /// Creates an Eru's counter series at 0 (every outcome, result and reason).
    pub fn init(&self, namespace: &str, name: &str) {
        for outcome in RestartOutcome::ALL {
            self.restarts
                .with_label_values(&[namespace, name, outcome.as_str()]);
        }
        for (result, reason) in slot_series() {
            self.slots.with_label_values(&[namespace, name, result, reason]);
        }
    }

    /// Sets (or, with `None`, removes) the Eru's next slot.
    pub fn set_next(&self, namespace: &str, name: &str, next: Option<chrono::DateTime<chrono::Utc>>) {
        match next {
            Some(t) => self
                .next_fire
                .with_label_values(&[namespace, name])
                .set(t.timestamp() as f64),
            None => {
                let _ = self.next_fire.remove_label_values(&[namespace, name]);
            }
        }
    }

    /// Removes every series of a deleted Eru.
    pub fn forget(&self, namespace: &str, name: &str) {
        let _ = self.next_fire.remove_label_values(&[namespace, name]);
        for outcome in RestartOutcome::ALL {
            let _ = self
                .restarts
                .remove_label_values(&[namespace, name, outcome.as_str()]);
        }
        for (result, reason) in slot_series() {
            let _ = self.slots.remove_label_values(&[namespace, name, result, reason]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_erus_series_start_at_zero_and_leave_with_it() {
        let metrics = Metrics::new();
        let eru = EruMetrics::register(&metrics);
        eru.init("ns", "web");
        eru.set_next("ns", "web", chrono::DateTime::from_timestamp(1_800_000_000, 0));
        let text = metrics.render();
        assert!(text.contains(r#"eru_restarts_total{name="web",namespace="ns",outcome="abandoned"} 0"#));
        assert!(
            text.contains(
                r#"eru_slots_total{name="web",namespace="ns",reason="suspended",result="skipped"} 0"#
            )
        );
        assert!(text.contains(r#"eru_next_fire_timestamp_seconds{name="web",namespace="ns"} 1800000000"#));
        eru.forget("ns", "web");
        assert!(!metrics.render().contains(r#"name="web""#));
    }
}
