//! Prometheus metrics. Names are a contract with `dashboards/` and the alert rules in `deploy/`.
//! Labels are bounded: kinds, phases, outcomes, reasons and error categories are fixed sets, and
//! `namespace`/`name` identify objects that exist (their series are removed when they go away).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Instant,
};

use prometheus::{
    Encoder, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

/// Kinds with reconcile metrics (EruAutoCreate: the Deployment-annotation controller).
pub const KINDS: [&str; 4] = ["Eru", "PodSet", "Memcached", "EruAutoCreate"];
/// Outcomes of a finished restart.
pub const RESTART_OUTCOMES: [&str; 3] = ["succeeded", "failed", "abandoned"];

/// Every (result, reason) of `eru_slots_total`.
fn slot_series() -> impl Iterator<Item = (&'static str, &'static str)> {
    use crate::eru::accounting::Reason;
    std::iter::once(("fired", "scheduled")).chain(Reason::ALL.iter().map(|r| (r.reason_result(), r.as_str())))
}

/// All metric handles, registered in one registry. Cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    pub restarts: IntCounterVec,
    pub restart_duration: Histogram,
    pub slots: IntCounterVec,
    pub fire_lateness: Histogram,
    pub next_fire: GaugeVec,
    pub transitions: IntCounterVec,
    objects: IntGaugeVec,
    phases: Arc<Mutex<HashMap<(&'static str, String), &'static str>>>,
    pub reconciles: IntCounterVec,
    pub reconcile_errors: IntCounterVec,
    pub reconcile_duration: HistogramVec,
    pub journal_write: Histogram,
    pub build_info: IntGaugeVec,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn counter(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let metric = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
    registry
        .register(Box::new(metric.clone()))
        .expect("metric registered once");
    metric
}

fn histogram(registry: &Registry, name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    let metric = Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets)).expect("valid metric");
    registry
        .register(Box::new(metric.clone()))
        .expect("metric registered once");
    metric
}

impl Metrics {
    /// A fresh registry with every metric registered.
    pub fn new() -> Self {
        let registry = Registry::new();
        let restarts = counter(
            &registry,
            "eru_restarts_total",
            "Rolling restarts finished, by Eru and outcome (succeeded, failed).",
            &["namespace", "name", "outcome"],
        );
        let restart_duration = histogram(
            &registry,
            "eru_restart_duration_seconds",
            "From the restart patch to the rollout's end.",
            vec![1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 3600.0],
        );
        let slots = counter(
            &registry,
            "eru_slots_total",
            "Evaluated cron slots by result (fired, missed, skipped) and reason.",
            &["namespace", "name", "result", "reason"],
        );
        let fire_lateness = histogram(
            &registry,
            "eru_fire_lateness_seconds",
            "Time from a slot to its restart patch.",
            vec![0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0],
        );
        let next_fire = GaugeVec::new(
            Opts::new(
                "eru_next_fire_timestamp_seconds",
                "Unix time of the next scheduled restart.",
            ),
            &["namespace", "name"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(next_fire.clone()))
            .expect("metric registered once");
        let transitions = counter(
            &registry,
            "eru_state_transitions_total",
            "State-machine transitions by kind and phases.",
            &["kind", "from", "to"],
        );
        let objects = IntGaugeVec::new(
            Opts::new("eru_objects", "Managed objects by kind and phase."),
            &["kind", "phase"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(objects.clone()))
            .expect("metric registered once");
        let reconciles = counter(
            &registry,
            "eru_reconcile_total",
            "Reconcile passes by kind and result (success, error).",
            &["kind", "result"],
        );
        let reconcile_errors = counter(
            &registry,
            "eru_reconcile_errors_total",
            "Failed reconcile passes by kind and error category.",
            &["kind", "category"],
        );
        let reconcile_duration = HistogramVec::new(
            HistogramOpts::new(
                "eru_reconcile_duration_seconds",
                "Duration of one reconcile pass.",
            )
            .buckets(vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0]),
            &["kind"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(reconcile_duration.clone()))
            .expect("metric registered once");
        let journal_write = histogram(
            &registry,
            "eru_journal_write_seconds",
            "Duration of one journal append (one transaction).",
            vec![0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0],
        );
        let build_info = IntGaugeVec::new(Opts::new("eru_build_info", "Build information."), &["version"])
            .expect("valid metric");
        registry
            .register(Box::new(build_info.clone()))
            .expect("metric registered once");
        build_info.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
        // Series that exist from the start read 0 instead of "no data" in dashboards and alerts.
        for kind in KINDS {
            for result in ["success", "error"] {
                reconciles.with_label_values(&[kind, result]);
            }
            for category in crate::error::CATEGORIES {
                reconcile_errors.with_label_values(&[kind, category]);
            }
        }
        Self {
            registry,
            restarts,
            restart_duration,
            slots,
            fire_lateness,
            next_fire,
            transitions,
            objects,
            phases: Arc::default(),
            reconciles,
            reconcile_errors,
            reconcile_duration,
            journal_write,
            build_info,
        }
    }

    /// The registry in Prometheus text format.
    pub fn render(&self) -> String {
        let mut buffer = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buffer)
            .expect("text encoding cannot fail");
        String::from_utf8(buffer).expect("Prometheus text is UTF-8")
    }

    /// Records that the object `uid` of `kind` is now in `phase` (for `eru_objects`).
    pub fn set_phase(&self, kind: &'static str, uid: &str, phase: &'static str) {
        let mut phases = self.phases.lock().expect("metrics lock");
        match phases.insert((kind, uid.to_string()), phase) {
            Some(old) if old == phase => return,
            Some(old) => self.objects.with_label_values(&[kind, old]).dec(),
            None => {}
        }
        self.objects.with_label_values(&[kind, phase]).inc();
    }

    /// Creates an Eru's counter series at 0 (every outcome, result and reason), so dashboards and
    /// alerts see 0 rather than no data.
    pub fn init_eru(&self, namespace: &str, name: &str) {
        for outcome in RESTART_OUTCOMES {
            self.restarts.with_label_values(&[namespace, name, outcome]);
        }
        for (result, reason) in slot_series() {
            self.slots.with_label_values(&[namespace, name, result, reason]);
        }
    }

    /// Forgets a deleted object: its phase count and its per-object series.
    pub fn forget(&self, kind: &'static str, uid: &str, namespace: &str, name: &str) {
        if let Some(old) = self
            .phases
            .lock()
            .expect("metrics lock")
            .remove(&(kind, uid.to_string()))
        {
            self.objects.with_label_values(&[kind, old]).dec();
        }
        if kind == "Eru" {
            let _ = self.next_fire.remove_label_values(&[namespace, name]);
            for outcome in RESTART_OUTCOMES {
                let _ = self.restarts.remove_label_values(&[namespace, name, outcome]);
            }
            for (result, reason) in slot_series() {
                let _ = self.slots.remove_label_values(&[namespace, name, result, reason]);
            }
        }
    }

    /// Starts timing a reconcile of `kind`; the duration is observed when the guard drops.
    pub fn reconcile_timer(&self, kind: &'static str) -> ReconcileTimer {
        ReconcileTimer {
            histogram: self.reconcile_duration.with_label_values(&[kind]),
            start: Instant::now(),
        }
    }
}

/// Observes a reconcile's duration on drop, whatever path the reconcile returned by.
pub struct ReconcileTimer {
    histogram: Histogram,
    start: Instant,
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        self.histogram.observe(self.start.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_move_between_series() {
        let metrics = Metrics::new();
        metrics.set_phase("PodSet", "u1", "ScalingUp");
        metrics.set_phase("PodSet", "u2", "ScalingUp");
        metrics.set_phase("PodSet", "u1", "Stable");
        assert_eq!(
            metrics.objects.with_label_values(&["PodSet", "ScalingUp"]).get(),
            1
        );
        assert_eq!(metrics.objects.with_label_values(&["PodSet", "Stable"]).get(), 1);
        metrics.forget("PodSet", "u1", "ns", "a");
        assert_eq!(metrics.objects.with_label_values(&["PodSet", "Stable"]).get(), 0);
    }

    #[test]
    fn render_has_build_info_and_histograms() {
        let metrics = Metrics::new();
        {
            let _timer = metrics.reconcile_timer("Memcached");
        }
        let text = metrics.render();
        assert!(text.contains(&format!(
            "eru_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        )));
        assert!(text.contains("eru_reconcile_duration_seconds_count{kind=\"Memcached\"} 1"));
    }
}
