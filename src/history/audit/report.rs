//! What an audit reports: the verdict, each Eru's accounting of its slots, the operator's facts.
//! Serialized as `GET /audit` answers (and documented in its OpenAPI schema).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{
    history::Window,
    journal::{SlotRecordRow, Ts},
    vocab::{Reason, RunOutcome, SlotResult},
};

/// The audit of a window.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Audit {
    /// Start of the window (inclusive).
    #[schema(value_type = String, format = DateTime)]
    pub since: Ts,
    /// End of the window (exclusive).
    #[schema(value_type = String, format = DateTime)]
    pub until: Ts,
    pub verdict: Verdict,
    pub operator: OperatorFacts,
    /// Every Eru that existed in the window, by namespace and name.
    pub erus: Vec<EruAudit>,
}

/// Whether every slot of the window is accounted exactly once.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Verdict {
    /// No slot up to its Eru's cursor lacks a record or has two, no record stands for a slot its
    /// schedule did not produce, and no counter falls short of the rows.
    pub accounted: bool,
    /// The verdict in a sentence.
    pub summary: String,
    pub erus: usize,
    /// Slots the Erus' specs produced in the window, up to now (later ones have not come).
    pub slots: i64,
    /// Restarted (the patch landed).
    pub fired: i64,
    /// Missed or skipped, with a reason.
    pub not_restarted: i64,
    /// After an Eru's cursor: in flight, or not yet due for a record.
    pub pending: i64,
    /// Of the pending: due slots a health gate holds now (each Eru's `held`; a running
    /// operator's `/audit` and page, 0 from the CLI).
    pub held: usize,
    pub unaccounted: i64,
    pub duplicated: i64,
    pub outside_schedule: i64,
    /// Records that break the journal's invariant (a last slot before the first): forged or
    /// corrupted rows, left out of the accounting (see each Eru's `invalid`).
    pub invalid: i64,
    /// Erus whose running counters disagree with their rows (see `EruAudit.counters`).
    pub counter_mismatches: usize,
    /// Erus of the window left out because the audit's work budget (1,000,000 slots enumerated
    /// and records read) ran out: narrow the window, or name a namespace or an Eru.
    pub not_audited: usize,
    /// The audit read everything in the window (no cap was reached, no Eru left out).
    pub complete: bool,
}

/// One Eru's slots in the window.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EruAudit {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// Every slot at or before this instant is restarted or recorded (the ledger's cursor).
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    pub accounted_through: Option<Ts>,
    /// When the operator saw the Eru deleted.
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    pub deleted_at: Option<Ts>,
    /// The spec epochs in force in the window, oldest first.
    pub epochs: Vec<EpochItem>,
    /// Slots its spec produced in the window, up to now (later ones have not come).
    pub slots: i64,
    /// Slots restarted, by how their restart went.
    pub fired: Fired,
    /// Slots missed or skipped, by result and reason.
    pub not_restarted: Vec<NotRestarted>,
    /// Not accounted yet: the restart in flight, and slots after the cursor.
    pub pending: i64,
    /// The slot of the restart in flight, if any.
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    pub in_flight: Option<Ts>,
    /// The due slot a health gate holds now, if one does and it falls in the window (a running
    /// operator's `/audit` and page; the CLI reads only the journal, where a hold appears once
    /// its slot is accounted).
    #[schema(required = true)]
    pub held: Option<HeldNow>,
    /// Slots up to the cursor with no record.
    pub unaccounted: Finding,
    /// Slots with more than one record.
    pub duplicated: Finding,
    /// Records of slots its schedule did not produce.
    pub outside_schedule: Finding,
    /// Records that break the journal's invariant (a last slot before the first slot): forged or
    /// corrupted rows, left out of the accounting.
    pub invalid: Finding,
    /// The ledger's running counters against its rows (whole journal; `GET /audit` and the CLI).
    #[schema(required = true)]
    pub counters: Option<Counters>,
    pub accounted: bool,
    /// Every slot of the window was enumerated (fewer than 100,000, within the audit's budget).
    pub complete: bool,
    /// What the numbers alone do not say (an unreadable epoch, a capped enumeration).
    #[schema(required = true)]
    pub note: Option<String>,
    /// Every record of the window, oldest first (the page draws them; omitted from `/audit`).
    #[serde(skip)]
    pub records: Vec<SlotRecordRow>,
    /// Manual runs asked in the window (`mtsre.meitu.com/run-now`), newest first: restarts that
    /// are no slot's, listed apart from the slot arithmetic above.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manual_runs: Vec<ManualRunItem>,
}

/// A manual run, as the audit lists it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ManualRunItem {
    pub token: String,
    /// The field manager that set the annotation.
    #[schema(required = true)]
    pub requested_by: Option<String>,
    #[schema(value_type = String, format = DateTime)]
    pub requested_at: Ts,
    pub outcome: RunOutcome,
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    pub patched_at: Option<Ts>,
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    pub finished_at: Option<Ts>,
    #[schema(required = true)]
    pub reason: Option<String>,
}

/// A due slot a health gate holds: it runs when the gates open, if before `deadline`; else it is
/// recorded skipped with `reason`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HeldNow {
    #[schema(value_type = String, format = DateTime)]
    pub slot: Ts,
    /// When a gate first held it.
    #[schema(value_type = String, format = DateTime)]
    pub since: Ts,
    /// When the gates were last asked (and still held it).
    #[schema(value_type = String, format = DateTime)]
    pub checked_at: Ts,
    /// Its starting deadline.
    #[schema(value_type = String, format = DateTime)]
    pub deadline: Ts,
    /// `blocking_pods`, `pdb_blocked`, `alert_firing` or `gate_unknown`.
    pub reason: Reason,
    /// What holds it: the pods, the alerts, or the error asking Prometheus.
    pub note: String,
}

/// A spec epoch: one generation's slot-deciding spec and when it took effect.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EpochItem {
    pub generation: i64,
    #[schema(value_type = String, format = DateTime)]
    pub effective_from: Ts,
    pub schedule: String,
    #[schema(required = true)]
    pub time_zone: Option<String>,
    pub suspend: bool,
    /// Why it was suspended (`spec.suspendNote`), when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend_note: Option<String>,
    pub target: String,
}

/// Restarted slots by restart outcome.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct Fired {
    pub total: i64,
    pub succeeded: i64,
    pub failed: i64,
    /// Landed, then its rollout was not seen to end (target gone, Eru deleted).
    pub abandoned: i64,
    pub in_progress: i64,
    /// Of these, restarts another field manager undid after the patch (docs/gitops.md): counted
    /// by their outcome above too.
    #[serde(default)]
    pub reverted: i64,
}

/// Slots not restarted for one reason.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct NotRestarted {
    pub result: SlotResult,
    /// Null only for a record written without one (no operator writes such a record).
    #[schema(required = true)]
    pub reason: Option<Reason>,
    pub slots: i64,
    /// The distinct windows the reason names (first ten).
    pub windows: Vec<Window>,
    /// The distinct notes (first ten).
    pub notes: Vec<String>,
}

/// Slots of one finding: how many, and the first twenty.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct Finding {
    pub count: i64,
    #[schema(value_type = Vec<String>)]
    pub slots: Vec<Ts>,
}

/// An Eru's running counters against its journal rows.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Counters {
    pub fired_slots: i64,
    pub missed_slots: i64,
    pub rows_fired: i64,
    pub rows_not_fired: i64,
    pub agree: bool,
    #[schema(required = true)]
    pub note: Option<String>,
}

/// What the operator itself did in the window.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct OperatorFacts {
    /// Operator runs (leader terms) overlapping the window, oldest first.
    pub runs: Vec<RunItem>,
    /// When no operator ran, within the window (from a run's last sign of life, the latest of its
    /// heartbeats and journal writes, to the next run's start).
    pub downtime: Vec<Window>,
    /// The part of the window before this journal's first run: the journal knows nothing of it
    /// (not downtime: no operator had written to this journal yet, or its rows are gone).
    #[schema(required = true)]
    pub no_journal: Option<Window>,
    /// When another instance took over from the previous one.
    pub handovers: Vec<Handover>,
    /// When the operator ran but its journal took no writes.
    pub journal_outages: Vec<Window>,
    /// The cluster-wide blackouts as configured now, with their windows in this window.
    pub cluster_blackouts: Vec<BlackoutItem>,
    /// The notification outbox now (in the audited namespace): what is still to be delivered.
    #[serde(default)]
    pub notifications: crate::journal::OutboxFacts,
}

/// One operator run.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunItem {
    pub instance: String,
    pub version: String,
    #[schema(value_type = String, format = DateTime)]
    pub started_at: Ts,
    #[schema(value_type = String, format = DateTime)]
    pub last_heartbeat: Ts,
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    pub stopped_at: Option<Ts>,
}

/// A leader handover.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Handover {
    #[schema(value_type = String, format = DateTime)]
    pub at: Ts,
    pub from: String,
    pub to: String,
}

/// A cluster-wide blackout and its windows in the audited window.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BlackoutItem {
    #[schema(required = true)]
    pub name: Option<String>,
    /// `schedule` + `duration_seconds`, or `start`–`end`, as configured.
    pub spec: String,
    /// Its windows in the audited window (none listed for a schedule with `H`: those differ
    /// per Eru and appear as each Eru's `blackout` records).
    pub windows: Vec<Window>,
}
