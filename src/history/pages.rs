//! The pages the listings answer with, as the OpenAPI document describes them (every field is
//! always present; `nullable` ones may be `null`; times are RFC 3339 in UTC), and as the CLI's
//! text tables.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::params::{Kind, Outcome, Reason, SlotResult};
use crate::journal::{RestartRow, SlotRecordRow, SlotRow, TransitionRow, Ts};

/// An error answer (every 4xx and 5xx of this API).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// What is wrong, naming the parameter where one is at fault.
    pub error: String,
}

/// One restart.
#[derive(Debug, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct RestartItem {
    pub namespace: String,
    /// The Eru.
    pub name: String,
    /// The restarted workload.
    pub target: String,
    /// The scheduled slot (the restart's idempotency key).
    #[schema(value_type = String, format = DateTime)]
    pub slot: Ts,
    /// When the restart was decided: journaled, before its patch was sent.
    #[schema(value_type = String, format = DateTime)]
    pub decided_at: Ts,
    /// When its patch landed on the target (the API server accepted it); null until then, and for
    /// a restart given up before it landed.
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    pub patched_at: Option<Ts>,
    /// Deprecated: the same as `decided_at`, kept for existing clients.
    #[schema(value_type = String, format = DateTime)]
    pub started_at: Ts,
    /// When the rollout ended (or the restart was given up); null while in progress.
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    pub finished_at: Option<Ts>,
    /// From the patch landing to the rollout's end; null while in progress or if it never landed.
    #[schema(required = true)]
    pub duration_seconds: Option<f64>,
    pub outcome: Outcome,
    /// Why it failed or was abandoned, in words; null otherwise.
    #[schema(required = true)]
    pub reason: Option<String>,
    /// Who removed or replaced its annotation after the patch (docs/gitops.md), when another
    /// field manager undid it and the managedFields name it; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverted_by: Option<String>,
    /// When the operator saw it undone; absent unless it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub reverted_at: Option<Ts>,
    /// The Alertmanager silence held while it rolled out (`spec.silence`); absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub silence_id: Option<String>,
    /// The end the silence was created with: it lapses then even if nobody expires it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub silence_until: Option<Ts>,
    /// When the operator expired it (the rollout ended); absent until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub silence_expired_at: Option<Ts>,
}

impl From<RestartRow> for RestartItem {
    fn from(r: RestartRow) -> Self {
        let duration = r
            .finished_at
            .zip(r.patched_at)
            .map(|(end, start)| (*end - *start).as_seconds_f64());
        Self {
            namespace: r.namespace,
            name: r.name,
            target: r.target,
            slot: r.slot,
            started_at: r.decided_at,
            decided_at: r.decided_at,
            patched_at: r.patched_at,
            finished_at: r.finished_at,
            duration_seconds: duration,
            outcome: r.outcome,
            reason: r.reason,
            reverted_by: r.reverted_by,
            reverted_at: r.reverted_at,
            silence_id: r.silence_id,
            silence_until: r.silence_until,
            silence_expired_at: r.silence_expired_at,
        }
    }
}

/// A page of restarts, newest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HistoryPage {
    pub items: Vec<RestartItem>,
    /// Pass as `cursor` for the next page; null on the last page.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

/// One state-machine transition.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TransitionItem {
    #[schema(value_type = Kind)]
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub from: String,
    pub to: String,
    /// The event that caused it.
    pub event: String,
    #[schema(value_type = String, format = DateTime)]
    pub at: Ts,
    /// Further facts about the transition, a JSON object (empty in this version).
    #[schema(value_type = Object)]
    pub detail: serde_json::Value,
}

impl From<TransitionRow> for TransitionItem {
    fn from(t: TransitionRow) -> Self {
        Self {
            kind: t.kind,
            namespace: t.namespace,
            name: t.name,
            from: t.from_state,
            to: t.to_state,
            event: t.event,
            at: t.at,
            detail: t.detail.0,
        }
    }
}

/// A page of transitions, newest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TransitionPage {
    pub items: Vec<TransitionItem>,
    /// Pass as `cursor` for the next page; null on the last page.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

/// The stretch of time that explains a slot; what it is depends on the reason (see
/// `MissedItem.window`).
#[derive(Debug, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct Window {
    /// Where it starts (e.g. the last heartbeat before a downtime, the last journal write that
    /// worked before a journal outage).
    #[schema(value_type = String, format = DateTime)]
    pub start: Ts,
    /// Where it ends (e.g. the start of the next operator run, the first journal write that
    /// worked again).
    #[schema(value_type = String, format = DateTime)]
    pub end: Ts,
}

/// A slot that was not restarted, or a summarized run of them (`slot_count` > 1).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MissedItem {
    pub namespace: String,
    pub name: String,
    pub target: String,
    /// The (first) slot.
    #[schema(value_type = String, format = DateTime)]
    pub slot: Ts,
    /// The last slot this record stands for.
    #[schema(value_type = String, format = DateTime)]
    pub last_slot: Ts,
    /// How many slots this record stands for.
    #[schema(minimum = 1)]
    pub slot_count: i64,
    /// `missed` or `skipped`.
    pub result: SlotResult,
    #[schema(required = true)]
    pub reason: Option<Reason>,
    /// For `operator_down`: when no operator ran (the last heartbeat before, the next start).
    /// For `journal_lost`: what no readable journal covers (the last slot the cluster remembers,
    /// this journal's first run).
    /// For `journal_unavailable`: when the operator ran but its journal took no writes (the last
    /// journal write that worked, the first that worked again).
    /// For `blackout`: the window the restart instant fell in. Null otherwise.
    #[schema(required = true)]
    pub window: Option<Window>,
    /// What the reason alone does not say: the blackout by name (`blackout`), why the target
    /// cannot be rolled (`target_not_rollable`), the patch a dry run would have sent (`dry_run`).
    /// Null otherwise.
    #[schema(required = true)]
    pub note: Option<String>,
    /// When the operator accounted for the slot.
    #[schema(value_type = String, format = DateTime)]
    pub evaluated_at: Ts,
}

impl From<SlotRow> for MissedItem {
    fn from(s: SlotRow) -> Self {
        let window = s
            .window_start
            .zip(s.window_end)
            .map(|(start, end)| Window { start, end });
        Self {
            namespace: s.namespace,
            name: s.name,
            target: s.target,
            slot: s.slot,
            last_slot: s.last_slot,
            slot_count: s.slot_count,
            result: s.result,
            reason: s.reason.and_then(Reason::shown),
            window,
            note: s.note,
            evaluated_at: s.evaluated_at,
        }
    }
}

/// A page of missed and skipped slots, newest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MissedPage {
    pub items: Vec<MissedItem>,
    /// Pass as `cursor` for the next page; null on the last page.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

/// The restart attempt of a slot: the one that fired it, or one decided and given up
/// (`abandoned`) or journaled only (`dry_run`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SlotRestart {
    /// When it was decided (journaled before its patch was sent).
    #[schema(value_type = String, format = DateTime)]
    pub decided_at: Ts,
    /// When its patch landed; null if it never did.
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    pub patched_at: Option<Ts>,
    /// When its rollout ended or it was given up; null while in progress.
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    pub finished_at: Option<Ts>,
    pub outcome: Outcome,
    /// Why it failed or was abandoned, in words; null otherwise.
    #[schema(required = true)]
    pub reason: Option<String>,
    /// Patches the API server refused.
    #[schema(minimum = 0)]
    pub failed_patches: i64,
}

/// A slot's one ledger record: restarted (`fired`), or not (`missed`, `skipped`, with the reason),
/// or a summarized run of slots not restarted for one reason (`slot_count` > 1).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SlotItem {
    pub namespace: String,
    pub name: String,
    /// The Eru's uid: an Eru deleted and created again under its name is another ledger.
    pub uid: String,
    pub target: String,
    /// The (first) slot.
    #[schema(value_type = String, format = DateTime)]
    pub slot: Ts,
    /// The last slot this record stands for.
    #[schema(value_type = String, format = DateTime)]
    pub last_slot: Ts,
    /// How many slots this record stands for.
    #[schema(minimum = 1)]
    pub slot_count: i64,
    pub result: SlotResult,
    /// Why the slot was not restarted; null for a fired slot.
    #[schema(required = true)]
    pub reason: Option<Reason>,
    /// The stretch of time the reason names (see `MissedItem.window`); null otherwise.
    #[schema(required = true)]
    pub window: Option<Window>,
    /// What the reason alone does not say (see `MissedItem.note`); null otherwise.
    #[schema(required = true)]
    pub note: Option<String>,
    /// When the operator accounted for the slot.
    #[schema(value_type = String, format = DateTime)]
    pub evaluated_at: Ts,
    /// The slot's restart attempt, if one was decided; null otherwise.
    #[schema(required = true)]
    pub restart: Option<SlotRestart>,
}

impl From<SlotRecordRow> for SlotItem {
    fn from(row: SlotRecordRow) -> Self {
        let s = row.record;
        let restart = row.restart_decided_at.map(|decided_at| SlotRestart {
            decided_at,
            patched_at: row.restart_patched_at,
            finished_at: row.restart_finished_at,
            outcome: row.restart_outcome.unwrap_or(Outcome::InProgress),
            reason: row.restart_reason,
            failed_patches: row.restart_attempts.unwrap_or_default(),
        });
        Self {
            namespace: s.namespace,
            name: s.name,
            uid: s.uid,
            target: s.target,
            slot: s.slot,
            last_slot: s.last_slot,
            slot_count: s.slot_count,
            reason: s.reason.and_then(Reason::shown),
            result: s.result,
            window: s
                .window_start
                .zip(s.window_end)
                .map(|(start, end)| Window { start, end }),
            note: s.note,
            evaluated_at: s.evaluated_at,
            restart,
        }
    }
}

/// A page of slot records, newest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SlotPage {
    pub items: Vec<SlotItem>,
    /// Pass as `cursor` for the next page; null on the last page.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

impl SlotPage {
    /// The page as a text table.
    pub fn table(&self) -> String {
        let rows: Vec<Vec<String>> = self
            .items
            .iter()
            .map(|s| {
                vec![
                    s.slot.to_string(),
                    s.slot_count.to_string(),
                    format!("{}/{}", s.namespace, s.name),
                    s.result.to_string(),
                    or_dash(s.reason.as_ref()),
                    or_dash(s.restart.as_ref().map(|r| r.outcome)),
                    or_dash(s.note.as_ref()),
                ]
            })
            .collect();
        table(
            &["SLOT", "COUNT", "ERU", "RESULT", "REASON", "RESTART", "NOTE"],
            &rows,
        )
    }
}

/// Renders rows as an aligned text table.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_string()
    };
    let mut out = vec![line(headers.iter().map(|h| h.to_string()).collect())];
    out.extend(rows.iter().map(|r| line(r.clone())));
    out.join("\n") + "\n"
}

fn or_dash(value: Option<impl ToString>) -> String {
    value.map_or_else(|| "-".to_string(), |v| v.to_string())
}

impl HistoryPage {
    /// The page as a text table.
    pub fn table(&self) -> String {
        let rows: Vec<Vec<String>> = self
            .items
            .iter()
            .map(|r| {
                vec![
                    r.slot.to_string(),
                    format!("{}/{}", r.namespace, r.name),
                    r.target.clone(),
                    r.outcome.to_string(),
                    or_dash(r.duration_seconds.map(|d| format!("{d:.1}s"))),
                    or_dash(r.reason.as_ref()),
                ]
            })
            .collect();
        table(&["SLOT", "ERU", "TARGET", "OUTCOME", "DURATION", "REASON"], &rows)
    }
}

impl TransitionPage {
    /// The page as a text table.
    pub fn table(&self) -> String {
        let rows: Vec<Vec<String>> = self
            .items
            .iter()
            .map(|t| {
                vec![
                    t.at.to_string(),
                    t.kind.clone(),
                    format!("{}/{}", t.namespace, t.name),
                    t.from.clone(),
                    t.to.clone(),
                    t.event.clone(),
                ]
            })
            .collect();
        table(&["AT", "KIND", "OBJECT", "FROM", "TO", "EVENT"], &rows)
    }
}

impl MissedPage {
    /// The page as a text table.
    pub fn table(&self) -> String {
        let rows: Vec<Vec<String>> = self
            .items
            .iter()
            .map(|m| {
                vec![
                    m.slot.to_string(),
                    m.slot_count.to_string(),
                    format!("{}/{}", m.namespace, m.name),
                    m.result.to_string(),
                    or_dash(m.reason.as_ref()),
                    or_dash(m.window.as_ref().map(|w| format!("{} .. {}", w.start, w.end))),
                    or_dash(m.note.as_ref()),
                ]
            })
            .collect();
        table(
            &["SLOT", "COUNT", "ERU", "RESULT", "REASON", "WINDOW", "NOTE"],
            &rows,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_columns() {
        let text = table(
            &["A", "LONGER"],
            &[vec!["xyz".into(), "1".into()], vec!["q".into(), "22".into()]],
        );
        assert_eq!(text, "A    LONGER\nxyz  1\nq    22\n");
    }
}
