//! The Eru's custom resource (`mtsre.meitu.com/v1`): its spec and status as the API server
//! stores them, the schema and CEL rules generated from these types (`eru-operator crds`), and
//! the annotations and field managers the operator uses on workloads. The plain parts the pure
//! core reads (a blackout's fields, the restart annotation) are the core's own types
//! ([`super::core`]), reused here.

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::core::{
    RESTARTED_AT_ANNOTATION,
    blackout::{BLACKOUT_NAME_PATTERN, Blackout},
    schedule::SCHEDULE_PATTERN,
};

/// The prefix of every annotation the operator reads on a workload.
pub const ANNOTATION_PREFIX: &str = "mtsre.meitu.com/";
/// Field manager of the restart patch: it owns only the `restartedAt` annotation of a target's pod
/// template, so the apply leaves every other field alone, also on a Deployment another manager
/// applies in full (a Memcached's, under [`crate::memcached`]'s own manager). Its managedFields
/// entry on the target also tells when the last restart patch landed.
pub const RESTART_MANAGER: &str = "eru-operator-restart";
/// The field manager of the manual-run patch: its own, so a slot's patch (which applies only the
/// slot annotation) never removes a run's token, nor a run's patch a slot.
pub const RUN_MANAGER: &str = "eru-operator-run";
/// Workload (Deployment, StatefulSet, DaemonSet) annotation asking for an Eru to be created
/// automatically.
pub const AUTO_ANNOTATION: &str = "mtsre.meitu.com/eru";
/// Workload annotation with the automatic Eru's schedule.
pub const AUTO_SCHEDULE_ANNOTATION: &str = "mtsre.meitu.com/eru-schedule";
/// Workload annotation with the automatic Eru's time zone.
pub const AUTO_TIMEZONE_ANNOTATION: &str = "mtsre.meitu.com/eru-timezone";
/// `"true"` suspends the automatic Eru of the annotated workload.
pub const AUTO_SUSPEND_ANNOTATION: &str = "mtsre.meitu.com/eru-suspend";
/// Why the automatic Eru is suspended (its `spec.suspendNote`; the first 256 characters).
pub const AUTO_SUSPEND_NOTE_ANNOTATION: &str = "mtsre.meitu.com/eru-suspend-note";
/// The automatic Eru's `spec.failurePolicy.pauseAfter` (a whole number, 1 to 100; the API
/// server refuses any other value, reported as `EruInvalid`).
pub const AUTO_PAUSE_AFTER_ANNOTATION: &str = "mtsre.meitu.com/eru-pause-after";
/// The longest `spec.suspendNote`.
pub const SUSPEND_NOTE_MAX: usize = 256;

/// What the API server checks of a time zone: an IANA-shaped name.
pub const TIME_ZONE_PATTERN: &str = r"^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+){0,2}$";
/// A DNS-1123 subdomain (object names).
pub const NAME_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// Default for `startingDeadlineSeconds`.
pub const DEFAULT_STARTING_DEADLINE_SECONDS: i64 = 300;

fn default_starting_deadline() -> i64 {
    DEFAULT_STARTING_DEADLINE_SECONDS
}

/// Graceful rolling restarts of a workload on a cron schedule.
// kube-derive takes one `printcolumn(...)` per column; clippy reads them as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, KubeSchema)]
#[kube(
    group = "mtsre.meitu.com",
    version = "v1",
    kind = "Eru",
    plural = "erus",
    namespaced,
    status = "EruStatus",
    shortname = "eru",
    category = "eru-operator",
    derive = "PartialEq",
    doc = "Elegant Rolling Updates: restarts a workload gracefully at every slot of a cron schedule.",
    printcolumn(name = "Target", type_ = "string", json_path = ".spec.target.name"),
    printcolumn(name = "Schedule", type_ = "string", json_path = ".spec.schedule"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason",
        description = "The Ready condition's reason: Scheduled, Suspended, Held, Queued, DryRun, or why it cannot restart (TargetMissing, InvalidSpec, RestartPatchFailed, TargetNotRollable)"
    ),
    printcolumn(name = "Suspend", type_ = "boolean", json_path = ".spec.suspend"),
    printcolumn(
        name = "Last",
        type_ = "date",
        json_path = ".status.lastRestart.slot",
        description = "The slot of the latest restart"
    ),
    printcolumn(
        name = "Next",
        type_ = "string",
        json_path = ".status.nextScheduleTime",
        description = "When the next restart starts (after jitter)"
    ),
    printcolumn(
        name = "Missed",
        type_ = "integer",
        json_path = ".status.missedSlots",
        description = "Slots missed or skipped since the Eru was created"
    ),
    printcolumn(
        name = "Outcome",
        type_ = "string",
        json_path = ".status.lastRestart.outcome",
        priority = 1,
        description = "The latest restart's outcome"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase", priority = 1),
    printcolumn(
        name = "Time Zone",
        type_ = "string",
        json_path = ".spec.timeZone",
        priority = 1
    ),
    printcolumn(
        name = "Note",
        type_ = "string",
        json_path = ".spec.suspendNote",
        priority = 1,
        description = "Why the Eru is suspended"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct EruSpec {
    /// Crontab schedule: 5 fields (minute hour day-of-month month day-of-week; 0 and 7 are
    /// Sunday; names like `mon` and `jan`), an optional leading seconds field, or one of
    /// `@yearly @monthly @weekly @daily @hourly`.
    #[schemars(length(min = 1, max = 128), regex(pattern = SCHEDULE_PATTERN))]
    pub schedule: String,

    /// IANA time zone of the schedule (default UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64), regex(pattern = TIME_ZONE_PATTERN))]
    pub time_zone: Option<String>,

    /// The workload to restart, in the Eru's namespace.
    pub target: Target,

    /// Suspend future restarts; suspended slots are recorded as skipped.
    #[serde(default)]
    pub suspend: bool,

    /// Why the Eru is suspended, for whoever reads its records later (an incident, a freeze, a
    /// ticket). Kept on every slot recorded `suspended` while it is set, and shown in the Ready
    /// condition, `kubectl get eru -o wide`, the audit and the page. Read only while `suspend` is
    /// true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = SUSPEND_NOTE_MAX))]
    pub suspend_note: Option<String>,

    /// A slot noticed later than this is not run, only recorded as missed. At least 1: a
    /// reconcile runs a moment after its slot, so 0 would let no slot run at all.
    #[serde(default = "default_starting_deadline")]
    #[schemars(range(min = 1, max = 31_536_000))]
    pub starting_deadline_seconds: i64,

    /// How long a rollout may take before the restart counts as failed (default: a
    /// Deployment's `progressDeadlineSeconds`; 600 for a StatefulSet or DaemonSet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 86_400))]
    pub rollout_timeout_seconds: Option<i64>,

    /// Spread restarts: each slot's restart happens at the slot plus a fixed offset in
    /// `[0, jitterSeconds)` derived from the Eru's uid and the slot (stable across operator
    /// restarts). The slot stays the restart's key; `startingDeadlineSeconds` counts from the
    /// offset instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 86_400))]
    pub jitter_seconds: Option<i64>,

    /// Windows in which no restart starts: a slot whose restart instant falls inside one is
    /// recorded `skipped/blackout` with the window. Recurring (`schedule` + `durationSeconds`, in
    /// the Eru's time zone) or absolute (`start` + `end`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(
        validation = Rule::new("self.all(b, has(b.schedule) == has(b.durationSeconds))")
            .message("a recurring blackout needs both schedule and durationSeconds"),
        validation = Rule::new("self.all(b, has(b.start) == has(b.end))")
            .message("an absolute blackout needs both start and end"),
        validation = Rule::new("self.all(b, has(b.schedule) != has(b.start))")
            .message("a blackout is either recurring (schedule, durationSeconds) or absolute (start, end)"),
        validation = Rule::new("self.all(b, !has(b.start) || timestamp(b.end) > timestamp(b.start))")
            .message("a blackout's end must be after its start")
    )]
    pub blackouts: Vec<Blackout>,

    /// Account and journal every slot (outcome `dry_run`, with the patch that would have been
    /// sent) without changing the target.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,

    /// Health gates: while one is closed, a due slot is **held** (it waits, unaccounted) and runs
    /// once they all open, if before its starting deadline; else it is recorded skipped with the
    /// gate's reason (`blocking_pods`, `pdb_blocked`, `alert_firing`, `gate_unknown`) and what held it.
    // boxed: rare, and every cached Eru carries the field
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gates: Option<Box<Gates>>,

    /// Need conditions: restart only when it helps. Asked when a slot is due and its gates are
    /// open; when they say the restart would not help, the slot is recorded skipped
    /// `not_needed` with the evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub need: Option<Box<NeedConditions>>,

    /// Silence the target's alerts while it restarts: an Alertmanager silence
    /// (`--alertmanager-url`), confined to the Eru's namespace, created just before the restart
    /// patch and expired when the rollout ends; it lapses by itself at the rollout's timeout
    /// (6 hours at most) even if the operator dies. Journaled with the restart (docs/eru.md,
    /// Silences).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub silence: Option<Box<Silence>>,

    /// Stop restarting when restarts hurt: after `pauseAfter` restarts in a row whose rollout
    /// ended `failed` or `abandoned`, the Eru pauses itself (`status.pausedOnFailure`, the Ready
    /// condition, an Event and a notification). Its slots are then skipped `paused_on_failure`,
    /// the note naming those restarts, until someone resumes it: `kubectl eru resume NS/NAME`,
    /// which sets the `mtsre.meitu.com/resume` annotation to `status.pausedOnFailure.since`.
    /// The operator never resumes it by itself, and no spec edit does (removing this field stops
    /// new pauses, not the one in force). Off when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<FailurePolicy>,
}

/// When an Eru pauses itself.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailurePolicy {
    /// Restarts in a row whose rollout ended `failed` or `abandoned` (counted since the last
    /// resume). A restart given up before its patch landed, a dry run and a manual run neither
    /// count nor break the row; a restart that succeeded starts it again.
    // (`format: int32`: the API server warns at every apply of a format it does not know, and
    // schemars names a u32 `uint32`)
    #[schemars(range(min = 1, max = 100), extend("format" = "int32"))]
    pub pause_after: u32,
}

/// The Alertmanager silence an Eru holds while it restarts.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Silence {
    /// The silence's matchers (all must match an alert), after `namespace` equal to the Eru's
    /// namespace, which every silence carries: these can only narrow it (a `namespace` matcher
    /// that cannot match the Eru's namespace makes the Eru Invalid). Default: `pod` matching the
    /// target's pods (as kube-state-metrics and the kubelet label their alerts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub matchers: Vec<SilenceMatcher>,
    /// When the silence cannot be created (no `--alertmanager-url`, Alertmanager down or
    /// refusing): `Hold` (default) holds the restart patch, tried again with the patch's backoff
    /// until the slot's deadline (then `patch_failed`, with why); `Proceed` restarts without it
    /// (a `SilenceFailed` Event).
    #[serde(default)]
    pub on_unknown: SilenceOnUnknown,
}

/// One matcher of a silence, as Alertmanager has them.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SilenceMatcher {
    /// The alert label.
    #[schemars(regex(pattern = r"^[a-zA-Z_][a-zA-Z0-9_]*$"), length(max = 128))]
    pub name: String,
    /// Its value (a regular expression with `regex: true`).
    #[schemars(length(max = 1024))]
    pub value: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub regex: bool,
}

/// What a silence that cannot be created does.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SilenceOnUnknown {
    /// Hold the restart patch (tried again until the slot's deadline).
    #[default]
    Hold,
    /// Restart without the silence.
    Proceed,
}

/// When a scheduled restart is needed (see docs/eru.md, Need conditions).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, kube::KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.minPodAgeSeconds) || has(self.query)")
        .message("need needs minPodAgeSeconds or query"),
    validation = Rule::new("has(self.query) == has(self.threshold)")
        .message("need.query and need.threshold go together")
)]
pub struct NeedConditions {
    /// Skip the slot (`not_needed`) when every running pod of the target (the pods its pod
    /// template's labels select) is younger than this: a deploy that replaced them did what the
    /// restart would. At most 30 days.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 2_592_000))]
    pub min_pod_age_seconds: Option<i64>,
    /// A PromQL query, asked of `--prometheus-url` when a slot is due (`$namespace` and `$target`
    /// stand for the Eru's namespace and its target's name), confined to the Eru's namespace:
    /// every selector's `namespace` matchers are replaced by `namespace="<the Eru's namespace>"`
    /// (a query that cannot be confined makes the Eru Invalid). The restart is needed only when a
    /// sample of its answer (at most 1 MiB, 10,000 samples) is above `threshold`; else the slot is
    /// skipped `not_needed` with the value and the query as sent in its note. For example the highest memory working set of the
    /// target's containers over their limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4096))]
    pub query: Option<String>,
    /// The value a sample of `query` must exceed for the restart to be needed (a decimal number,
    /// e.g. "0.8").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^-?[0-9]+(\.[0-9]+)?$"), length(max = 32))]
    pub threshold: Option<String>,
    /// When a condition cannot be answered (the pods cannot be read, Prometheus cannot be asked
    /// or answers no vector): `Restart` (default) runs the slot as if the condition were not set;
    /// `Skip` records it skipped `need_unknown` with the error. An unknown answer is never
    /// recorded as `not_needed`.
    #[serde(default)]
    pub on_unknown: NeedOnUnknown,
}

/// What a need condition whose answer is unknown does.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum NeedOnUnknown {
    /// Restart, as without the condition.
    #[default]
    Restart,
    /// Skip the slot (`need_unknown`).
    Skip,
}

/// A label name (`[a-zA-Z_][a-zA-Z0-9_]*`, as Prometheus has them).
pub const ALERT_LABEL_PATTERN: &str = r"^[a-zA-Z_][a-zA-Z0-9_]*$";

/// Health gates of an Eru (see docs/eru.md, Health gates).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, kube::KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.blockingPodSelector) || has(self.alerts) || (has(self.podDisruptionBudgets) && self.podDisruptionBudgets)")
        .message("gates needs blockingPodSelector, alerts or podDisruptionBudgets: true"),
    validation = Rule::new(
        "!has(self.blockingPodSelector) || (has(self.blockingPodSelector.matchLabels) && size(self.blockingPodSelector.matchLabels) > 0) || (has(self.blockingPodSelector.matchExpressions) && size(self.blockingPodSelector.matchExpressions) > 0)"
    )
    .message("an empty blockingPodSelector would match every pod (the target's own too): give matchLabels or matchExpressions")
)]
pub struct Gates {
    /// Hold a due slot while a pod matching this selector exists in the Eru's namespace and has
    /// not finished (phase Pending or Running): a migration Job, a backup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocking_pod_selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    /// Hold a due slot while a matching Prometheus alert fires (needs `--prometheus-url`). An
    /// Eru's own gate sees only alerts whose `namespace` label is the Eru's namespace; the
    /// cluster-wide gates (the operator's blackouts file) see every alert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alerts: Option<AlertGate>,
    /// Hold a due slot while a PodDisruptionBudget of the target's namespace that selects the
    /// target's pods allows no disruption (`status.disruptionsAllowed` 0). A rolling restart
    /// does not evict, so the Deployment controller ignores budgets; this gate makes the restart
    /// wait for one. A budget that never allows a disruption (one replica, `minAvailable: 1`)
    /// holds every slot until its starting deadline: opt in per Eru.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pod_disruption_budgets: bool,
}

/// Which firing alerts hold a slot: every alert whose name matches `name` (a regular expression,
/// anchored) and whose labels equal `labels` (`$namespace` and `$target` in a value stand for
/// the Eru's namespace and its target's name).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AlertGate {
    /// A regular expression (RE2 syntax, anchored at both ends) the alert's name must match.
    /// Default: every alert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub name: Option<String>,
    /// Labels the alert must carry with these exact values; `$namespace` and `$target` are
    /// replaced by the Eru's namespace and its target's name.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 16, "propertyNames" = {"pattern": ALERT_LABEL_PATTERN, "maxLength": 128}))]
    pub labels: std::collections::BTreeMap<String, String>,
    /// When Prometheus cannot be asked (unreachable, an error): `Hold` (default) holds the slot as
    /// a closed gate would, recording `skipped/gate_unknown` with the error if its deadline
    /// passes; `Proceed` treats the gate as open.
    #[serde(default)]
    pub on_unknown: OnUnknown,
}

/// What a gate whose answer is unknown does.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum OnUnknown {
    /// Hold the slot (fail safe).
    #[default]
    Hold,
    /// Treat the gate as open.
    Proceed,
}

/// A workload in the Eru's namespace.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// The workload's kind.
    pub kind: TargetKind,
    /// The workload's name.
    #[schemars(length(min = 1, max = 253), regex(pattern = NAME_PATTERN))]
    pub name: String,
}

impl Target {
    /// How the journal names this target (epochs, slots, restarts; `/history`, `/missed`): a
    /// Deployment by its name alone (as before other kinds existed), any other kind as
    /// `Kind/name` (`StatefulSet/web`, `DaemonSet/agent`).
    pub fn key(&self) -> String {
        match self.kind {
            TargetKind::Deployment => self.name.clone(),
            kind => format!("{}/{}", kind.as_str(), self.name),
        }
    }

    /// The target a journal key names ([`Target::key`]); `None` for an unknown kind.
    pub fn from_key(key: &str) -> Option<Self> {
        let (kind, name) = match key.split_once('/') {
            None => (TargetKind::Deployment, key),
            Some((kind, name)) => (TargetKind::ALL.into_iter().find(|k| k.as_str() == kind)?, name),
        };
        Some(Self {
            kind,
            name: name.to_string(),
        })
    }
}

/// Workload kinds an Eru can restart (all in `apps/v1`; a restart is the same pod-template
/// annotation for each, as `kubectl rollout restart` sets).
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum TargetKind {
    Deployment,
    StatefulSet,
    DaemonSet,
}

impl TargetKind {
    pub const ALL: [TargetKind; 3] = [
        TargetKind::Deployment,
        TargetKind::StatefulSet,
        TargetKind::DaemonSet,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::Deployment => "Deployment",
            TargetKind::StatefulSet => "StatefulSet",
            TargetKind::DaemonSet => "DaemonSet",
        }
    }
}

/// Observed state of an Eru.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EruStatus {
    /// The state machine's state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// `Ready`, `ScheduleValid`, `TargetFound`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The slot being restarted while the phase is Restarting or RollingOut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_slot: Option<DateTime<Utc>>,
    /// The ledger's cursor: every slot at or before this instant is restarted or recorded. Kept
    /// here as well as in the journal, so a lost or replaced journal never accounts (or restarts)
    /// a slot twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accounted_through: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_successful_time: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure_time: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_schedule_time: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_restart: Option<LastRestart>,
    /// Slots missed or skipped since the Eru was created.
    #[serde(default)]
    pub missed_slots: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_missed_time: Option<DateTime<Utc>>,
    /// The due slot a health gate holds, if one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<HeldSlot>,
    /// The latest slot records, newest first (at most 5): what happened, at a glance. Read from
    /// the journal, which keeps them all (`/slots`, `kubectl eru history`); a replaced journal
    /// starts the list again (the counters and the cursor above are kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 5))]
    pub recent: Vec<RecentSlot>,
    /// The next slots, oldest first (at most 5), each with its restart instant (after `H` and
    /// jitter) and the blackout that covers it, if one does. Empty while suspended or paused on
    /// failure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 5))]
    pub upcoming: Vec<UpcomingSlot>,
    /// The latest manual run (`mtsre.meitu.com/run-now`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_manual_run: Option<LastManualRun>,
    /// Set while the Eru is paused on failure (`spec.failurePolicy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_on_failure: Option<PausedOnFailure>,
}

/// A pause on failure, as `status.pausedOnFailure` shows it.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PausedOnFailure {
    /// When it paused (whole seconds). Resuming it sets `mtsre.meitu.com/resume` to this value.
    pub since: DateTime<Utc>,
    /// The restarts that tripped it, and how each ended.
    pub why: String,
}

/// A manual run, as `status.lastManualRun` shows it.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastManualRun {
    /// The annotation's value: one run per distinct token.
    pub token: String,
    /// The field manager that set the annotation (`kubectl-annotate`, `kubectl-eru`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_by: Option<String>,
    pub requested_at: DateTime<Utc>,
    /// `waiting`, `in_progress`, `succeeded`, `failed`, `abandoned`, `refused` or `dry_run`.
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patched_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
    /// Why it waits, was refused, abandoned or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A slot record, as `status.recent` shows it.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecentSlot {
    /// The slot: the value the restart stamps on the pod template
    /// (`mtsre.meitu.com/restartedAt`), which joins the workload to this record.
    pub slot: DateTime<Utc>,
    /// The last slot of a summary record (many consecutive slots with one reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_slot: Option<DateTime<Utc>>,
    /// How many slots the record stands for (1 unless a summary).
    pub slots: i64,
    /// `fired`, `missed` or `skipped`.
    pub result: String,
    /// Why it was missed or skipped (docs/eru.md, "Which reason").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A fired slot's restart: `in_progress`, `succeeded`, `failed`, `abandoned` or `dry_run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// When the record was written.
    pub recorded_at: DateTime<Utc>,
    /// When the restart's rollout ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
    /// What else is known: the window, the gate, the suspension's note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A slot to come, as `status.upcoming` shows it.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpcomingSlot {
    pub slot: DateTime<Utc>,
    /// When its restart starts: the slot plus its jitter offset.
    pub restart_at: DateTime<Utc>,
    /// The blackout that covers the restart instant (the slot will be skipped), if one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blackout: Option<String>,
}

/// A due slot a health gate holds: it runs when the gates open, if before `deadline`; else it is
/// recorded skipped with `reason` and `note`.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HeldSlot {
    pub slot: DateTime<Utc>,
    /// The first pass that held it.
    pub since: DateTime<Utc>,
    /// The last pass that found a gate closed.
    pub checked_at: DateTime<Utc>,
    pub deadline: DateTime<Utc>,
    /// `blocking_pods`, `pdb_blocked`, `alert_firing` or `gate_unknown`.
    pub reason: String,
    /// What holds it: the pods, the alerts, or the error asking Prometheus.
    pub note: String,
}

/// The latest restart.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastRestart {
    pub slot: DateTime<Utc>,
    /// When the restart was decided (journaled before its patch was sent). Deprecated: the same
    /// as `decidedAt`, kept for existing readers.
    pub started_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<DateTime<Utc>>,
    /// When the restart patch landed (absent until it did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patched_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
    /// in_progress, succeeded, failed or abandoned.
    pub outcome: String,
    /// Why it failed or was abandoned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// From the patch landing to the rollout's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<f64>,
    /// The restarted workload (`Kind/name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Who removed or replaced the restart's annotation after its patch (docs/gitops.md), if
    /// another field manager did and the managedFields name it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverted_by: Option<String>,
    /// When the operator saw the restart undone, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverted_at: Option<DateTime<Utc>>,
}
