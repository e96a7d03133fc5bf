//! Prometheus metrics shared by every kind. Names are a contract with `dashboards/` and the alert
//! rules in `deploy/`. Labels are bounded: kinds, phases, outcomes, reasons and error categories are fixed sets, and
//! `namespace`/`name` identify objects that exist (their series are removed when they go away).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Instant,
};

use crate::memory::{key_hash, shrink_after_burst};
use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

/// All shared metric handles, registered in one registry. Cheap to clone. Kinds register their
/// own series into [`Metrics::registry`] (e.g. `eru::metrics`).
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    transitions: IntCounterVec,
    objects: IntGaugeVec,
    /// Each object's phase, by kind and the [`key_hash`] of its uid (a uid string and its
    /// table entry took ~130 bytes an object).
    phases: Arc<Mutex<HashMap<(&'static str, u64), &'static str>>>,
    reconciles: IntCounterVec,
    reconcile_errors: IntCounterVec,
    reconcile_duration: HistogramVec,
    pub journal_write: Histogram,
    pub journal_batch: Histogram,
    /// 1 while the journal takes writes, 0 since one failed (until one succeeds again).
    pub journal_up: IntGauge,
    /// Journal writes (appends, heartbeats) that failed.
    pub journal_errors: prometheus::IntCounter,
    /// 1 while this process acts (holds the leader Lease, or leader election is off), 0 on a standby.
    pub leader: IntGauge,
    /// The API server's 429 answers, by what was asked (`runtime::throttle::Class`).
    pub api_throttled: IntCounterVec,
    /// Kubernetes Events dropped under pressure (a full queue, or a 429).
    pub events_dropped: prometheus::IntCounter,
    /// Per-object families rendered straight to text (see [`TextSeries`]).
    text: Arc<Mutex<Vec<Arc<dyn TextSeries>>>>,
}

/// Where a [`TextSeries`] family continues: the key of the last object rendered.
pub type Cursor = Box<str>;

/// Families with a few series per object (thousands of objects): rendered straight to text on
/// each scrape, a chunk of objects at a time, instead of being gathered as `prometheus` protobuf
/// structures (a `Metric` with its label pairs is ~1 KB: at 10,000 Erus a scrape built ~240 MB
/// of them at once).
pub trait TextSeries: Send + Sync {
    /// How many families it renders (each one contiguously, as the text format requires).
    fn families(&self) -> usize;
    /// Appends to `out` the series of family `family` for the objects after `after` (and the
    /// family's `# HELP`/`# TYPE` lines when `after` is `None`), at most [`CHUNK`] objects;
    /// returns where to continue, or `None` once the family is complete.
    fn render(&self, family: usize, after: Option<&Cursor>, out: &mut String) -> Option<Cursor>;
}

/// Objects per chunk of a [`TextSeries`] family.
pub const CHUNK: usize = 128;

/// Appends a `# HELP` and `# TYPE` header.
pub fn text_header(out: &mut String, name: &str, help: &str, kind: &str) {
    use std::fmt::Write;
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// Appends one sample: `name{labels} value`, the labels in the given order (sorted by name, as
/// the text format lists them), values escaped.
pub fn text_sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
    use std::fmt::Write;
    out.push_str(name);
    out.push('{');
    for (i, (label, v)) in labels.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(label);
        out.push_str("=\"");
        for c in v.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    let _ = writeln!(out, "}} {value}");
}

/// The scrape, a chunk at a time: the registry, then each [`TextSeries`] family in chunks.
pub struct Chunks {
    metrics: Metrics,
    /// (source, family, cursor) of the next chunk; `None` before the registry's chunk.
    next: Option<(usize, usize, Option<Cursor>)>,
}

impl Iterator for Chunks {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        let Some((source, family, after)) = self.next.take() else {
            self.next = Some((0, 0, None));
            let mut buffer = Vec::new();
            TextEncoder::new()
                .encode(&self.metrics.registry.gather(), &mut buffer)
                .expect("text encoding cannot fail");
            return Some(String::from_utf8(buffer).expect("Prometheus text is UTF-8"));
        };
        let series = self
            .metrics
            .text
            .lock()
            .expect("metrics lock")
            .get(source)
            .cloned()?;
        if family >= series.families() {
            self.next = Some((source + 1, 0, None));
            return self.next();
        }
        let mut out = String::new();
        self.next = Some(match series.render(family, after.as_ref(), &mut out) {
            Some(cursor) => (source, family, Some(cursor)),
            None => (source, family + 1, None),
        });
        Some(out)
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Registers `metric` in `registry` and returns it.
pub fn register<M: prometheus::core::Collector + Clone + 'static>(registry: &Registry, metric: M) -> M {
    registry
        .register(Box::new(metric.clone()))
        .expect("metric registered once");
    metric
}

/// A counter vector, registered.
pub fn counter(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    register(
        registry,
        IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric"),
    )
}

/// A histogram with `buckets`, registered.
pub fn histogram(registry: &Registry, name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    register(
        registry,
        Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets)).expect("valid metric"),
    )
}

/// The journal's series: how long an append and a group commit take, whether it takes writes, and
/// the writes that failed.
fn journal_series(registry: &Registry) -> (Histogram, Histogram, IntGauge, prometheus::IntCounter) {
    let journal_write = histogram(
        registry,
        "eru_journal_write_seconds",
        "Duration of one journal append, from asking to durable (group commit included).",
        vec![0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0],
    );
    let journal_batch = histogram(
        registry,
        "eru_journal_batch_size",
        "Appends committed together in one journal transaction (group commit).",
        vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0],
    );
    let journal_up = register(
            registry,
            IntGauge::new(
                "eru_journal_up",
                "1 while the journal takes writes; 0 since a write failed (disk full, database down), until one succeeds.",
            )
            .expect("valid metric"),
        );
    journal_up.set(1);
    let journal_errors = register(
        registry,
        prometheus::IntCounter::new(
            "eru_journal_write_errors_total",
            "Journal writes (appends, heartbeats) that failed; nothing is acted on without its record.",
        )
        .expect("valid metric"),
    );
    (journal_write, journal_batch, journal_up, journal_errors)
}

/// The process's own series: its build, whether it leads, the API server's 429s to it, the
/// Events it dropped, and CPU and memory (process_*).
fn process_series(registry: &Registry) -> (IntGauge, IntCounterVec, prometheus::IntCounter) {
    let build_info = register(
        registry,
        IntGaugeVec::new(Opts::new("eru_build_info", "Build information."), &["version"])
            .expect("valid metric"),
    );
    build_info.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
    let leader = register(
            registry,
            IntGauge::new(
                "eru_leader",
                "1 while this process acts (holds the leader Lease, or runs without leader election), 0 on a standby.",
            )
            .expect("valid metric"),
        );
    let api_throttled = counter(
        registry,
        "eru_api_throttled_total",
        "The API server's 429 (Too Many Requests: API Priority and Fairness) answers to the operator, by request (restart, status, event, other).",
        &["request"],
    );
    for request in ["restart", "status", "event", "other"] {
        api_throttled.with_label_values(&[request]);
    }
    let events_dropped = register(
            registry,
            prometheus::IntCounter::new(
                "eru_events_dropped_total",
                "Kubernetes Events not sent: dropped under pressure (the queue was full, or the API server answered 429); restart patches and statuses go first.",
            )
            .expect("valid metric"),
        );
    // process_cpu_seconds_total, process_resident_memory_bytes, open fds, threads, start time
    // (from /proc/self: the dashboard's CPU and memory panels)
    #[cfg(target_os = "linux")]
    registry
        .register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))
        .expect("process metrics registered once");
    (leader, api_throttled, events_dropped)
}

impl Metrics {
    /// A fresh registry with the shared metrics registered.
    pub fn new() -> Self {
        let registry = Registry::new();
        let transitions = counter(
            &registry,
            "eru_state_transitions_total",
            "State-machine transitions by kind and phases.",
            &["kind", "from", "to"],
        );
        let objects = register(
            &registry,
            IntGaugeVec::new(
                Opts::new("eru_objects", "Managed objects by kind and phase."),
                &["kind", "phase"],
            )
            .expect("valid metric"),
        );
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
        let reconcile_duration = register(
            &registry,
            HistogramVec::new(
                HistogramOpts::new(
                    "eru_reconcile_duration_seconds",
                    "Duration of one reconcile pass.",
                )
                .buckets(vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0]),
                &["kind"],
            )
            .expect("valid metric"),
        );
        let (journal_write, journal_batch, journal_up, journal_errors) = journal_series(&registry);
        let (leader, api_throttled, events_dropped) = process_series(&registry);
        Self {
            registry,
            transitions,
            objects,
            phases: Arc::default(),
            reconciles,
            reconcile_errors,
            reconcile_duration,
            journal_write,
            journal_batch,
            journal_up,
            journal_errors,
            leader,
            api_throttled,
            events_dropped,
            text: Arc::default(),
        }
    }

    /// Adds per-object families rendered as text on each scrape.
    pub fn add_text(&self, series: Arc<dyn TextSeries>) {
        self.text.lock().expect("metrics lock").push(series);
    }

    /// The scrape in chunks (see [`TextSeries`]): what `/metrics` streams.
    pub fn chunks(&self) -> Chunks {
        Chunks {
            metrics: self.clone(),
            next: None,
        }
    }

    /// Tells `/readyz` and the journal series whether a journal write worked.
    pub fn journal_wrote<T, E>(&self, result: &Result<T, E>, readiness: &crate::runtime::Readiness) {
        let ok = result.is_ok();
        if !ok {
            self.journal_errors.inc();
        }
        self.journal_up.set(i64::from(ok));
        readiness.journal.store(ok, std::sync::atomic::Ordering::Relaxed);
    }

    /// The registry, for kinds registering their own series.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Creates the reconcile series of a controller `kind` at 0, so dashboards and alerts see 0
    /// rather than "no data".
    pub fn init_kind(&self, kind: &'static str) {
        for result in ["success", "error"] {
            self.reconciles.with_label_values(&[kind, result]);
        }
        for category in <crate::error::Category as strum::VariantArray>::VARIANTS {
            self.reconcile_errors
                .with_label_values(&[kind, category.as_str()]);
        }
    }

    /// Counts a reconcile of `kind` that succeeded, or failed with an error `category`.
    pub fn count_reconcile(&self, kind: &'static str, error: Option<crate::error::Category>) {
        let result = if error.is_some() { "error" } else { "success" };
        self.reconciles.with_label_values(&[kind, result]).inc();
        if let Some(category) = error {
            self.reconcile_errors
                .with_label_values(&[kind, category.as_str()])
                .inc();
        }
    }

    /// Counts a journaled transition.
    pub fn count_transition(&self, kind: &'static str, from: &'static str, to: &'static str) {
        self.transitions.with_label_values(&[kind, from, to]).inc();
    }

    /// Every series in Prometheus text format, at once.
    pub fn render(&self) -> String {
        self.chunks().collect()
    }

    /// Records that the object `uid` of `kind` is now in `phase` (for `eru_objects`).
    pub fn set_phase(&self, kind: &'static str, uid: &str, phase: &'static str) {
        let mut phases = self.phases.lock().expect("metrics lock");
        match phases.insert((kind, key_hash(uid)), phase) {
            Some(old) if old == phase => return,
            Some(old) => self.objects.with_label_values(&[kind, old]).dec(),
            None => {}
        }
        self.objects.with_label_values(&[kind, phase]).inc();
    }

    /// Forgets a deleted object's phase.
    pub fn forget_phase(&self, kind: &'static str, uid: &str) {
        let mut phases = self.phases.lock().expect("metrics lock");
        if let Some(old) = phases.remove(&(kind, key_hash(uid))) {
            self.objects.with_label_values(&[kind, old]).dec();
        }
        shrink_after_burst(&mut phases);
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
        metrics.forget_phase("PodSet", "u1");
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

    /// The process series the dashboard's CPU and memory panels read (the crate's `process`
    /// feature, from /proc/self).
    #[cfg(target_os = "linux")]
    #[test]
    fn render_has_the_process_series() {
        let text = Metrics::new().render();
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_open_fds",
            "process_start_time_seconds",
        ] {
            let value = text
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .unwrap_or_else(|| panic!("{name} missing:\n{text}"));
            let value: f64 = value.parse().unwrap();
            assert!(value >= 0.0, "{name} {value}");
        }
        let rss: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("process_resident_memory_bytes "))
            .unwrap()
            .parse()
            .unwrap();
        assert!(rss > 1_000_000.0, "a test binary's RSS is more than 1 MB: {rss}");
    }
}
