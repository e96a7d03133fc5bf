//! The journal's rows: what a reconcile appends and what the queries return.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Ts;
pub use crate::vocab::SlotResult;
use crate::vocab::{NoticeEvent, Outcome, Reason};
use sqlx::FromRow;

/// Which object a journal row is about.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectKey {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// A state-machine transition to append.
#[derive(Clone, Debug, PartialEq)]
pub struct NewTransition {
    pub object: ObjectKey,
    /// resourceVersion of the observed object: replaying the same observation gives the same key.
    pub observed: String,
    pub from: &'static str,
    pub to: &'static str,
    pub event: &'static str,
    pub at: DateTime<Utc>,
    pub detail: serde_json::Value,
}

/// An evaluated slot (or a summarized run of them) to append.
#[derive(Clone, Debug, PartialEq)]
pub struct NewSlot {
    pub object: ObjectKey,
    pub target: String,
    pub slot: DateTime<Utc>,
    pub last_slot: DateTime<Utc>,
    pub slot_count: i64,
    pub result: SlotResult,
    pub reason: Reason,
    /// The window the reason names (`operator_down`, `journal_lost`, `journal_unavailable`,
    /// `blackout`).
    pub window: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// What the reason alone does not say.
    pub note: Option<String>,
    pub evaluated_at: DateTime<Utc>,
}

/// A restart decided for a slot, before its patch is sent.
#[derive(Clone, Debug, PartialEq)]
pub struct NewRestart {
    pub object: ObjectKey,
    pub target: String,
    pub slot: DateTime<Utc>,
    pub decided_at: DateTime<Utc>,
    /// The restart is never patched after this instant.
    pub deadline_at: DateTime<Utc>,
}

/// A restart's patch landed.
#[derive(Clone, Debug, PartialEq)]
pub struct PatchedRestart {
    pub uid: String,
    pub slot: DateTime<Utc>,
    pub patched_at: DateTime<Utc>,
    /// The target's generation once it had landed, when known.
    pub landed_generation: Option<i64>,
}

/// A restart patch failed; the next try is due at `next_attempt_at`.
#[derive(Clone, Debug, PartialEq)]
pub struct FailedAttempt {
    pub uid: String,
    pub slot: DateTime<Utc>,
    pub at: DateTime<Utc>,
    pub error: String,
    pub next_attempt_at: DateTime<Utc>,
}

/// An Alertmanager silence of the restart of `slot`: created (`id`, lasting `until`), or expired.
#[derive(Clone, Debug, PartialEq)]
pub enum SilenceChange {
    Created {
        uid: String,
        slot: DateTime<Utc>,
        id: String,
        until: DateTime<Utc>,
    },
    Expired {
        uid: String,
        slot: DateTime<Utc>,
        at: DateTime<Utc>,
    },
}

/// A restart another field manager undid (`by`, if the managedFields name it), seen at `at`.
#[derive(Clone, Debug, PartialEq)]
pub struct RevertedRestart {
    pub uid: String,
    pub slot: DateTime<Utc>,
    pub by: Option<String>,
    pub at: DateTime<Utc>,
}

/// The end of a restart.
#[derive(Clone, Debug, PartialEq)]
pub struct FinishedRestart {
    pub uid: String,
    pub slot: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub outcome: Outcome,
    pub reason: Option<String>,
}

/// Which record a notification reports: it is written with that record, and only if the record
/// is new.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoticeOf {
    /// The slot record starting at this slot.
    Slot(DateTime<Utc>),
    /// The end of the restart of this slot.
    Finished(DateTime<Utc>),
    /// This slot, held by a health gate (no record: written once per sink, by its key).
    Held(DateTime<Utc>),
    /// The window starting here cannot be accounted (no record: written once per sink, by its
    /// key).
    Gap(DateTime<Utc>),
    /// The end of the manual run of this token (the row's `slot` is when it ended).
    Run { token: String, ended: DateTime<Utc> },
    /// The pause on failure that began at this instant (the row's `slot`).
    Paused(DateTime<Utc>),
}

/// A notification for the outbox: one event for one sink.
#[derive(Clone, Debug, PartialEq)]
pub struct NewNotice {
    pub sink: String,
    pub object: ObjectKey,
    pub of: NoticeOf,
    pub event: NoticeEvent,
    pub last_slot: DateTime<Utc>,
    pub slot_count: i64,
    /// The slot's reason, or how the restart ended and why.
    pub reason: Option<String>,
    pub note: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl NewNotice {
    /// The slot the notice is about.
    pub fn slot(&self) -> DateTime<Utc> {
        match self.of {
            NoticeOf::Slot(slot)
            | NoticeOf::Finished(slot)
            | NoticeOf::Held(slot)
            | NoticeOf::Gap(slot)
            | NoticeOf::Paused(slot) => slot,
            NoticeOf::Run { ended, .. } => ended,
        }
    }

    /// Its idempotency key: `namespace/name/slot/event`, a manual run's
    /// `namespace/name/run/<token>/event`.
    pub fn key(&self) -> String {
        match &self.of {
            NoticeOf::Run { token, .. } => {
                let (namespace, name) = (&self.object.namespace, &self.object.name);
                format!("{namespace}/{name}/run/{token}/{}", self.event)
            }
            _ => notice_key(&self.object.namespace, &self.object.name, self.slot(), self.event),
        }
    }
}

/// A notification's idempotency key: `namespace/name/slot/event` (the slot as the journal writes
/// it).
pub fn notice_key(namespace: &str, name: &str, slot: DateTime<Utc>, event: NoticeEvent) -> String {
    format!("{namespace}/{name}/{}/{event}", super::ts(slot))
}

/// A notification in the outbox.
#[derive(Clone, Debug, FromRow, Serialize, PartialEq)]
pub struct NoticeRow {
    pub id: i64,
    pub sink: String,
    pub key: String,
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub event: NoticeEvent,
    pub slot: Ts,
    pub last_slot: Ts,
    pub slot_count: i64,
    pub reason: Option<String>,
    pub note: Option<String>,
    pub created_at: Ts,
    pub attempts: i64,
    pub next_attempt_at: Ts,
    pub last_error: Option<String>,
}

/// The outbox at a glance (the audit's operator facts).
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct OutboxFacts {
    /// Notifications not delivered yet.
    pub pending: i64,
    /// When the oldest of them was written.
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    pub oldest_pending: Option<Ts>,
    /// Delivered, and dropped, among the rows the outbox still keeps.
    pub delivered: i64,
    pub dropped: i64,
    /// The dropped ones by sink and reason (`expired`, `outbox_full`, `unknown_sink`), the most
    /// first.
    #[serde(default)]
    pub drops: Vec<OutboxDrops>,
}

/// Notifications dropped undelivered for one sink and reason, among the rows the outbox keeps.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct OutboxDrops {
    pub sink: String,
    pub reason: String,
    pub count: i64,
    /// When the last of them was dropped.
    #[schema(value_type = String, format = DateTime)]
    pub last: Ts,
}

impl OutboxFacts {
    /// In words: `3 pending, the oldest from …; 120 delivered, 2 dropped (2 expired to oncall)`.
    pub fn summary(&self) -> String {
        let oldest = (self.oldest_pending)
            .map(|t| format!(", the oldest from {t}"))
            .unwrap_or_default();
        let drops = (self.drops.iter())
            .map(|d| format!("{} {} to {}", d.count, d.reason, d.sink))
            .collect::<Vec<_>>();
        let drops = if drops.is_empty() {
            String::new()
        } else {
            format!(" ({})", drops.join(", "))
        };
        format!(
            "{} pending{oldest}; {} delivered, {} dropped{drops}",
            self.pending, self.delivered, self.dropped
        )
    }
}

/// A spec epoch: one generation's slot-deciding spec and when it took effect.
#[derive(Clone, Debug, PartialEq)]
pub struct NewEpoch {
    pub uid: String,
    pub generation: i64,
    pub effective_from: DateTime<Utc>,
    pub observed_at: DateTime<Utc>,
    /// The spec, as JSON.
    pub spec: serde_json::Value,
}

/// What the cluster remembers of an Eru whose ledger the journal does not hold (a lost or
/// replaced journal): the journal starts its counters from here, so status totals never go
/// backwards.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LedgerSeed {
    pub object: ObjectKey,
    pub accounted_through: Option<DateTime<Utc>>,
    pub missed_slots: i64,
    pub last_missed: Option<DateTime<Utc>>,
    pub last_success: Option<DateTime<Utc>>,
    pub last_failure: Option<DateTime<Utc>>,
}

/// Everything one reconcile pass journals, written in one transaction.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Entry {
    pub transitions: Vec<NewTransition>,
    pub seed: Option<LedgerSeed>,
    pub epochs: Vec<NewEpoch>,
    pub slots: Vec<NewSlot>,
    pub restarts_decided: Vec<NewRestart>,
    pub restarts_patched: Vec<PatchedRestart>,
    pub attempts: Vec<FailedAttempt>,
    pub restarts_finished: Vec<FinishedRestart>,
    /// Cursors moved past a stretch whose slots cannot be accounted (their spec is unknown).
    pub advances: Vec<(ObjectKey, DateTime<Utc>)>,
    /// Erus deleted: their ledger rows are kept until retention removes them.
    pub deleted: Vec<(String, DateTime<Utc>)>,
    /// Notifications of the slot records and restart ends above: each is written only if the
    /// record it reports is new.
    pub notices: Vec<NewNotice>,
    /// Manual runs seen, started, patched or ended.
    pub runs: Vec<super::RunChange>,
    /// Restarts seen undone by another field manager.
    pub reverts: Vec<RevertedRestart>,
    /// Silences of restarts created or expired.
    pub silences: Vec<SilenceChange>,
    /// Pauses on failure begun or resumed.
    pub pauses: Vec<super::PauseChange>,
}

impl Entry {
    pub fn is_empty(&self) -> bool {
        *self == Entry::default()
    }
}

/// How many rows an [`Entry`] actually added or changed (replays add none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Appended {
    pub transitions: u64,
    pub epochs: u64,
    pub slots: u64,
    pub restarts_decided: u64,
    pub restarts_patched: u64,
    pub attempts: u64,
    pub restarts_finished: u64,
    /// Manual-run rows added or changed.
    pub runs: u64,
    /// Restarts newly marked reverted.
    pub reverts: u64,
    /// Pauses on failure begun or resumed.
    pub pauses: u64,
}

impl Appended {
    /// New slot, restart and attempt rows: what a replay of the same records does not add again.
    pub fn records(&self) -> u64 {
        self.slots
            + self.restarts_decided
            + self.restarts_patched
            + self.attempts
            + self.restarts_finished
            + self.runs
            + self.reverts
            + self.pauses
    }
}

/// A journaled transition.
#[derive(Clone, Debug, FromRow, Serialize, PartialEq)]
pub struct TransitionRow {
    pub id: i64,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub from_state: String,
    pub to_state: String,
    pub event: String,
    pub at: Ts,
    #[sqlx(try_from = "String")]
    pub detail: JsonText,
}

/// A row read with its key: a row whose columns do not read as `T` (a time that is not one, a
/// JSON column that does not parse) fails the read with the row's key (`id`, else `uid` and
/// `generation`) and what is wrong — a row is never dropped.
pub struct Keyed<T>(pub T);

impl<'r, T: FromRow<'r, sqlx::any::AnyRow>> FromRow<'r, sqlx::any::AnyRow> for Keyed<T> {
    fn from_row(row: &'r sqlx::any::AnyRow) -> sqlx::Result<Self> {
        use sqlx::Row;
        T::from_row(row).map(Keyed).map_err(|e| {
            let key = match row.try_get::<i64, _>("id") {
                Ok(id) => format!("id {id}"),
                Err(_) => {
                    let uid = row.try_get::<String, _>("uid").unwrap_or_default();
                    match row.try_get::<i64, _>("generation") {
                        Ok(generation) => format!("uid {uid}, generation {generation}"),
                        Err(_) => format!("uid {uid}"),
                    }
                }
            };
            sqlx::Error::Decode(format!("journal row ({key}) is unreadable: {e}").into())
        })
    }
}

impl<T> Keyed<T> {
    /// The rows of a keyed read.
    pub fn all(rows: Vec<Keyed<T>>) -> Vec<T> {
        rows.into_iter().map(|k| k.0).collect()
    }

    /// The row of a keyed read, if any.
    pub fn one(row: Option<Keyed<T>>) -> Option<T> {
        row.map(|k| k.0)
    }
}

/// A JSON column, parsed.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(transparent)]
pub struct JsonText(pub serde_json::Value);

impl TryFrom<String> for JsonText {
    type Error = serde_json::Error;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        serde_json::from_str(&s).map(JsonText)
    }
}

/// A journaled restart.
#[derive(Clone, Debug, FromRow, Serialize, PartialEq)]
pub struct RestartRow {
    pub id: i64,
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub target: String,
    pub slot: Ts,
    /// When the restart was decided (journaled before its patch was sent).
    pub decided_at: Ts,
    /// When its patch landed; null until then (and for restarts journaled before this was kept).
    pub patched_at: Option<Ts>,
    /// The target's generation once the patch had landed (migration 0012); null before.
    #[serde(skip_serializing)]
    pub landed_generation: Option<i64>,
    /// Never patched after this instant; null for restarts journaled before this was kept.
    pub deadline_at: Option<Ts>,
    pub attempts: i64,
    pub last_error: Option<String>,
    pub next_attempt_at: Option<Ts>,
    pub finished_at: Option<Ts>,
    pub outcome: Outcome,
    pub reason: Option<String>,
    /// Who removed or replaced the restart's annotation after its patch, if another field
    /// manager did and the managedFields name it.
    pub reverted_by: Option<String>,
    /// When the operator saw the restart undone; null unless it was.
    pub reverted_at: Option<Ts>,
    /// The Alertmanager silence held for the restart (`spec.silence`), if one was created.
    pub silence_id: Option<String>,
    /// The end it was created with: it lapses then even if nobody expires it.
    pub silence_until: Option<Ts>,
    /// When the operator expired it (the rollout ended), if it did.
    pub silence_expired_at: Option<Ts>,
}

/// A journaled missed or skipped slot (or a summarized run of them).
#[derive(Clone, Debug, FromRow, Serialize, PartialEq)]
pub struct SlotRow {
    pub id: i64,
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub target: String,
    pub slot: Ts,
    pub last_slot: Ts,
    pub slot_count: i64,
    pub result: SlotResult,
    pub reason: Option<Reason>,
    pub window_start: Option<Ts>,
    pub window_end: Option<Ts>,
    pub evaluated_at: Ts,
    pub note: Option<String>,
}

/// A slot's one ledger record, with the restart attempt of the same slot if there was one (a
/// fired slot's, or one decided and given up: abandoned, dry run).
#[derive(Clone, Debug, FromRow, PartialEq)]
pub struct SlotRecordRow {
    #[sqlx(flatten)]
    pub record: SlotRow,
    pub restart_decided_at: Option<Ts>,
    pub restart_patched_at: Option<Ts>,
    pub restart_finished_at: Option<Ts>,
    pub restart_outcome: Option<Outcome>,
    pub restart_reason: Option<String>,
    pub restart_attempts: Option<i64>,
    /// When the slot's restart was seen undone by another field manager, if it was.
    pub restart_reverted_at: Option<Ts>,
}

/// What an audit counts of a slot record: the slots it stands for, how it accounts them, and its
/// restart's outcome. `GET /audit` and the CLI read only these; the pages, which draw each
/// record, read [`SlotRecordRow`]s and count them through this same shape.
#[derive(Clone, Debug, PartialEq)]
pub struct TallyRow {
    pub id: i64,
    pub slot: Ts,
    pub last_slot: Ts,
    pub slot_count: i64,
    pub result: crate::vocab::SlotResult,
    pub reason: Option<Reason>,
    pub window_start: Option<Ts>,
    pub window_end: Option<Ts>,
    pub note: Option<String>,
    pub restart_outcome: Option<Outcome>,
    /// The slot's restart was seen undone by another field manager.
    pub reverted: bool,
}

impl From<&SlotRecordRow> for TallyRow {
    fn from(r: &SlotRecordRow) -> Self {
        let s = &r.record;
        TallyRow {
            id: s.id,
            slot: s.slot,
            last_slot: s.last_slot,
            slot_count: s.slot_count,
            result: s.result,
            reason: s.reason,
            window_start: s.window_start,
            window_end: s.window_end,
            note: s.note.clone(),
            restart_outcome: r.restart_outcome,
            reverted: r.restart_reverted_at.is_some(),
        }
    }
}

/// What an audit reads beside its window's accounting ([`super::Journal::audit_rows`]).
#[derive(Clone, Copy, Debug)]
pub struct AuditReading {
    /// Records read at most (past it the audit says it is incomplete).
    pub cap: usize,
    /// Each Eru's rows summed over the whole journal (the counters' cross-check).
    pub totals: bool,
    /// The records whole, for a page to draw; else only what the audit counts of them.
    pub records: bool,
}

/// What an audit of a window reads: the Erus' ledgers, their epochs, the slot records of the
/// window (with their restarts; at most `cap`, sorted by Eru and slot: whole for a page to draw,
/// or only what the audit counts), the restarts still in progress, and the operator's runs and
/// journal outages around the window.
#[derive(Clone, Debug, Default)]
pub struct AuditRows {
    pub ledgers: Vec<LedgerRow>,
    pub epochs: Vec<EpochRow>,
    /// The records whole, when asked for (a page draws them).
    pub records: Vec<SlotRecordRow>,
    /// Otherwise what the audit counts of them, by Eru (uid).
    pub tallies: Vec<(String, Vec<TallyRow>)>,
    /// More records fell in the window than `cap`.
    pub truncated: bool,
    pub open: Vec<RestartRow>,
    pub runs: Vec<OperatorRun>,
    pub outages: Vec<OutageRow>,
    /// Each Eru's slots over the whole journal, `(uid, fired, not fired)`, when asked for.
    pub totals: Option<Vec<(String, i64, i64)>>,
    /// The notification outbox, in the audited namespace.
    pub outbox: OutboxFacts,
}

/// An Eru's ledger row: its cursor and counters.
#[derive(Clone, Debug, Default, FromRow, PartialEq)]
pub struct LedgerRow {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// Every slot at or before this instant is restarted or recorded.
    pub accounted_through: Option<Ts>,
    /// Slots missed or skipped (summaries count every slot they stand for).
    pub missed_slots: i64,
    pub last_missed: Option<Ts>,
    pub fired_slots: i64,
    pub succeeded: i64,
    pub failed: i64,
    pub abandoned: i64,
    pub last_success: Option<Ts>,
    pub last_failure: Option<Ts>,
    pub last_restart_slot: Option<Ts>,
    /// When the operator saw the Eru deleted.
    pub deleted_at: Option<Ts>,
}

/// A journaled spec epoch.
#[derive(Clone, Debug, FromRow, PartialEq)]
pub struct EpochRow {
    pub uid: String,
    pub generation: i64,
    pub effective_from: Ts,
    pub observed_at: Ts,
    /// The spec's slot-deciding fields, as JSON.
    #[sqlx(try_from = "String")]
    pub spec: JsonText,
}

/// An Eru's history as its status shows it: the ledger row and the latest restart.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EruSummary {
    pub ledger: Option<LedgerRow>,
    pub last_restart: Option<RestartRow>,
    /// The latest slot records, newest slot first, at most [`RECENT`].
    pub recent: Vec<SlotRecordRow>,
    /// The latest manual run, if any.
    pub last_run: Option<super::RunRow>,
}

/// How many slot records an Eru's status shows (`status.recent`).
pub const RECENT: u32 = 5;

/// One operator process, as journaled.
#[derive(Clone, Debug, FromRow, Serialize, PartialEq)]
pub struct OperatorRun {
    pub id: i64,
    pub started_at: Ts,
    pub heartbeat_at: Ts,
    pub stopped_at: Option<Ts>,
    pub version: String,
    pub instance: String,
}

/// A journal outage: the journal took no writes in `(started_at, ended_at]` (from the last write
/// that worked to the first that worked again), as the operator run `run_id` saw it.
#[derive(Clone, Debug, FromRow, Serialize, PartialEq)]
pub struct OutageRow {
    pub id: i64,
    pub run_id: Option<i64>,
    pub started_at: Ts,
    pub ended_at: Ts,
}

/// Filters shared by the journal queries (all optional).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filter {
    pub kind: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub uid: Option<String>,
    pub target: Option<String>,
    pub outcome: Option<String>,
    pub result: Option<String>,
    pub reason: Option<String>,
    /// Journal time bounds, as [`ts`] strings: at or after `since`, before `until`.
    pub since: Option<String>,
    pub until: Option<String>,
    /// Only rows of these namespaces (`None`: every namespace; an empty list: none). The HTTP
    /// API's authorisation scope: applied in the query, so a page is full of rows the caller may
    /// read and its cursor skips nothing it may.
    pub namespaces: Option<Vec<String>>,
    /// Rows with an id below this one (the page cursor).
    pub before: Option<i64>,
    /// Page size; one row more is fetched to tell whether another page follows.
    pub limit: u32,
}
