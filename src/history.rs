//! Journal queries as the HTTP API and `eru-operator history` take them: parameters parsed and
//! validated into a [`Filter`], pages of journal rows with an opaque cursor.
//!
//! Pages are keyset-paged on the journal's row id, newest first: rows journaled while a client
//! pages land before its first page, never inside later ones, so there are no duplicates and no
//! gaps. A cursor names its endpoint and carries a checksum, so a cursor that was altered, made up
//! or taken from another endpoint is refused.

use chrono::DateTime;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::journal::{Filter, Journal, RestartRow, SlotRow, TransitionRow, parse_ts, ts};

/// Default and maximum page size.
pub const DEFAULT_LIMIT: u32 = 100;
pub const MAX_LIMIT: u32 = 1000;

/// Why a query was refused (the HTTP API answers 400, the CLI exits 2), or could not be run.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Journal(#[from] crate::Error),
}

type Result<T> = std::result::Result<T, QueryError>;

fn invalid<T>(message: impl Into<String>) -> Result<T> {
    Err(QueryError::Invalid(message.into()))
}

/// The three journal listings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    History,
    Transitions,
    Missed,
}

impl Endpoint {
    fn tag(self) -> &'static str {
        match self {
            Endpoint::History => "h",
            Endpoint::Transitions => "t",
            Endpoint::Missed => "m",
        }
    }
}

/// FNV-1a, enough to tell a cursor we issued from one that was edited or made up.
fn checksum(text: &str) -> u32 {
    text.bytes()
        .fold(0x811c9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x01000193))
}

/// The opaque cursor after row `id` of `endpoint`.
pub fn encode_cursor(endpoint: Endpoint, id: i64) -> String {
    let body = format!("{}:{id}", endpoint.tag());
    let text = format!("{body}:{:08x}", checksum(&body));
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The row id a cursor of `endpoint` continues after.
pub fn decode_cursor(endpoint: Endpoint, cursor: &str) -> Result<i64> {
    let refused = || invalid("cursor is not one this endpoint issued");
    if !cursor.len().is_multiple_of(2) || cursor.len() > 128 || !cursor.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return refused();
    }
    let bytes: Option<Vec<u8>> = (0..cursor.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&cursor[i..i + 2], 16).ok())
        .collect();
    let Some(text) = bytes.and_then(|b| String::from_utf8(b).ok()) else {
        return refused();
    };
    let Some((body, sum)) = text.rsplit_once(':') else {
        return refused();
    };
    let Some((tag, id)) = body.split_once(':') else {
        return refused();
    };
    match (
        tag == endpoint.tag(),
        id.parse::<i64>(),
        u32::from_str_radix(sum, 16),
    ) {
        (true, Ok(id), Ok(sum)) if sum == checksum(body) && id > 0 => Ok(id),
        _ => refused(),
    }
}

/// Query parameters of `GET /history`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct HistoryParams {
    /// Namespace of the Eru.
    pub namespace: Option<String>,
    /// Name of the Eru.
    pub name: Option<String>,
    /// Name of the restarted workload.
    pub target: Option<String>,
    /// `in_progress`, `succeeded`, `failed` or `abandoned`.
    pub outcome: Option<String>,
    /// Restarts started at or after this time (RFC 3339).
    pub since: Option<String>,
    /// Restarts started before this time (RFC 3339).
    pub until: Option<String>,
    /// Page size, 1 to 1000 (default 100).
    pub limit: Option<String>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// Query parameters of `GET /transitions`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct TransitionParams {
    /// `Eru`, `PodSet` or `Memcached`.
    pub kind: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// Transitions at or after this time (RFC 3339).
    pub since: Option<String>,
    /// Transitions before this time (RFC 3339).
    pub until: Option<String>,
    /// Page size, 1 to 1000 (default 100).
    pub limit: Option<String>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// Query parameters of `GET /missed`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct MissedParams {
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub target: Option<String>,
    /// `operator_down`, `past_deadline`, `suspended`, `target_paused`, `target_unhealthy`,
    /// `concurrent_rollout` or `target_missing`.
    pub reason: Option<String>,
    /// Slots at or after this time (RFC 3339).
    pub since: Option<String>,
    /// Slots before this time (RFC 3339).
    pub until: Option<String>,
    /// Page size, 1 to 1000 (default 100).
    pub limit: Option<String>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

const OUTCOMES: [&str; 4] = ["in_progress", "succeeded", "failed", "abandoned"];
const KINDS: [&str; 3] = ["Eru", "PodSet", "Memcached"];
const REASONS: [&str; 7] = [
    "operator_down",
    "past_deadline",
    "suspended",
    "target_paused",
    "target_unhealthy",
    "concurrent_rollout",
    "target_missing",
];

fn limit(value: Option<&str>) -> Result<u32> {
    match value {
        None => Ok(DEFAULT_LIMIT),
        Some(v) => match v.parse::<u32>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
            _ => invalid(format!(
                "limit must be an integer from 1 to {MAX_LIMIT}, got '{v}'"
            )),
        },
    }
}

fn time(name: &str, value: Option<&str>) -> Result<Option<String>> {
    value
        .map(|v| match DateTime::parse_from_rfc3339(v) {
            Ok(t) => Ok(ts(t.to_utc())),
            Err(_) => invalid(format!(
                "{name} must be an RFC 3339 time such as 2026-11-22T03:00:00Z, got '{v}'"
            )),
        })
        .transpose()
}

fn one_of(name: &str, value: Option<&str>, allowed: &[&str]) -> Result<Option<String>> {
    match value {
        Some(v) if !allowed.contains(&v) => {
            invalid(format!("{name} must be one of {}, got '{v}'", allowed.join(", ")))
        }
        other => Ok(other.map(String::from)),
    }
}

fn text(name: &str, value: Option<&str>) -> Result<Option<String>> {
    match value {
        Some(v) if v.is_empty() || v.len() > 253 => invalid(format!("{name} must be 1 to 253 characters")),
        other => Ok(other.map(String::from)),
    }
}

#[allow(clippy::too_many_arguments)]
fn filter(
    endpoint: Endpoint,
    namespace: Option<&str>,
    name: Option<&str>,
    target: Option<&str>,
    since: Option<&str>,
    until: Option<&str>,
    limit_value: Option<&str>,
    cursor: Option<&str>,
) -> Result<Filter> {
    let filter = Filter {
        namespace: text("namespace", namespace)?,
        name: text("name", name)?,
        target: text("target", target)?,
        since: time("since", since)?,
        until: time("until", until)?,
        limit: limit(limit_value)?,
        before: cursor.map(|c| decode_cursor(endpoint, c)).transpose()?,
        ..Filter::default()
    };
    if let (Some(since), Some(until)) = (&filter.since, &filter.until)
        && since > until
    {
        return invalid("since must not be after until");
    }
    Ok(filter)
}

/// An error answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: String,
}

/// One restart.
#[derive(Debug, Serialize, ToSchema, PartialEq)]
pub struct RestartItem {
    pub namespace: String,
    /// The Eru.
    pub name: String,
    /// The restarted workload.
    pub target: String,
    /// The scheduled slot (the restart's idempotency key).
    pub slot: String,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub duration_seconds: Option<f64>,
    /// `in_progress`, `succeeded`, `failed` or `abandoned`.
    pub outcome: String,
    pub reason: Option<String>,
}

impl From<RestartRow> for RestartItem {
    fn from(r: RestartRow) -> Self {
        let duration = r
            .finished_at
            .as_deref()
            .and_then(parse_ts)
            .zip(parse_ts(&r.started_at))
            .map(|(end, start)| (end - start).as_seconds_f64());
        Self {
            namespace: r.namespace,
            name: r.name,
            target: r.target,
            slot: r.slot,
            started_at: r.started_at,
            finished_at: r.finished_at,
            duration_seconds: duration,
            outcome: r.outcome,
            reason: r.reason,
        }
    }
}

/// A page of restarts, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct HistoryPage {
    pub items: Vec<RestartItem>,
    /// Pass as `cursor` for the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

/// One state-machine transition.
#[derive(Debug, Serialize, ToSchema)]
pub struct TransitionItem {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub from: String,
    pub to: String,
    /// The event that caused it.
    pub event: String,
    pub at: String,
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
#[derive(Debug, Serialize, ToSchema)]
pub struct TransitionPage {
    pub items: Vec<TransitionItem>,
    pub next_cursor: Option<String>,
}

/// When the operator was down.
#[derive(Debug, Serialize, ToSchema, PartialEq)]
pub struct Window {
    /// The last heartbeat before the downtime.
    pub start: String,
    /// The start of the next operator run.
    pub end: String,
}

/// A slot that was not restarted, or a summarized run of them (`slot_count` > 1).
#[derive(Debug, Serialize, ToSchema)]
pub struct MissedItem {
    pub namespace: String,
    pub name: String,
    pub target: String,
    /// The (first) slot.
    pub slot: String,
    /// The last slot this record stands for.
    pub last_slot: String,
    pub slot_count: i64,
    /// `missed` (the operator could not act) or `skipped` (it chose not to).
    pub result: String,
    pub reason: Option<String>,
    /// The downtime window, for `operator_down`.
    pub window: Option<Window>,
    pub evaluated_at: String,
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
            reason: s.reason,
            window,
            evaluated_at: s.evaluated_at,
        }
    }
}

/// A page of missed and skipped slots, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct MissedPage {
    pub items: Vec<MissedItem>,
    pub next_cursor: Option<String>,
}

/// Splits `limit + 1` rows into a page and the cursor after it.
fn page<R, T: From<R>>(
    endpoint: Endpoint,
    mut rows: Vec<R>,
    limit: u32,
    id: impl Fn(&R) -> i64,
) -> (Vec<T>, Option<String>) {
    let next = if rows.len() > limit as usize {
        rows.truncate(limit as usize);
        rows.last().map(|r| encode_cursor(endpoint, id(r)))
    } else {
        None
    };
    (rows.into_iter().map(T::from).collect(), next)
}

/// `GET /history`.
pub async fn history(journal: &Journal, p: &HistoryParams) -> Result<HistoryPage> {
    let mut f = filter(
        Endpoint::History,
        p.namespace.as_deref(),
        p.name.as_deref(),
        p.target.as_deref(),
        p.since.as_deref(),
        p.until.as_deref(),
        p.limit.as_deref(),
        p.cursor.as_deref(),
    )?;
    f.outcome = one_of("outcome", p.outcome.as_deref(), &OUTCOMES)?;
    let rows = journal.restarts(&f).await?;
    let (items, next_cursor) = page(Endpoint::History, rows, f.limit, |r: &RestartRow| r.id);
    Ok(HistoryPage { items, next_cursor })
}

/// `GET /transitions`.
pub async fn transitions(journal: &Journal, p: &TransitionParams) -> Result<TransitionPage> {
    let mut f = filter(
        Endpoint::Transitions,
        p.namespace.as_deref(),
        p.name.as_deref(),
        None,
        p.since.as_deref(),
        p.until.as_deref(),
        p.limit.as_deref(),
        p.cursor.as_deref(),
    )?;
    f.kind = one_of("kind", p.kind.as_deref(), &KINDS)?;
    let rows = journal.transitions(&f).await?;
    let (items, next_cursor) = page(Endpoint::Transitions, rows, f.limit, |r: &TransitionRow| r.id);
    Ok(TransitionPage { items, next_cursor })
}

/// `GET /missed`.
pub async fn missed(journal: &Journal, p: &MissedParams) -> Result<MissedPage> {
    let mut f = filter(
        Endpoint::Missed,
        p.namespace.as_deref(),
        p.name.as_deref(),
        p.target.as_deref(),
        p.since.as_deref(),
        p.until.as_deref(),
        p.limit.as_deref(),
        p.cursor.as_deref(),
    )?;
    f.reason = one_of("reason", p.reason.as_deref(), &REASONS)?;
    let rows = journal.missed(&f).await?;
    let (items, next_cursor) = page(Endpoint::Missed, rows, f.limit, |r: &SlotRow| r.id);
    Ok(MissedPage { items, next_cursor })
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
                    r.slot.clone(),
                    format!("{}/{}", r.namespace, r.name),
                    r.target.clone(),
                    r.outcome.clone(),
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
                    t.at.clone(),
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
                    m.slot.clone(),
                    m.slot_count.to_string(),
                    format!("{}/{}", m.namespace, m.name),
                    m.result.clone(),
                    or_dash(m.reason.as_ref()),
                    or_dash(m.window.as_ref().map(|w| format!("{} .. {}", w.start, w.end))),
                ]
            })
            .collect();
        table(&["SLOT", "COUNT", "ERU", "RESULT", "REASON", "DOWNTIME"], &rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_forgeries() {
        let c = encode_cursor(Endpoint::History, 42);
        assert_eq!(decode_cursor(Endpoint::History, &c).unwrap(), 42);
        assert!(
            decode_cursor(Endpoint::Missed, &c).is_err(),
            "another endpoint's cursor"
        );
        let forged = encode_cursor(Endpoint::History, 43).replace('3', "2");
        assert!(decode_cursor(Endpoint::History, &forged).is_err());
        for bad in [
            "",
            "zz",
            "abc",
            "68",
            &"00".repeat(100),
            "683a34323a3030303030303030",
        ] {
            assert!(decode_cursor(Endpoint::History, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn table_aligns_columns() {
        let text = table(
            &["A", "LONGER"],
            &[vec!["xyz".into(), "1".into()], vec!["q".into(), "22".into()]],
        );
        assert_eq!(text, "A    LONGER\nxyz  1\nq    22\n");
    }

    #[test]
    fn parameters_are_validated() {
        assert_eq!(limit(None).unwrap(), 100);
        assert_eq!(limit(Some("1000")).unwrap(), 1000);
        for bad in ["0", "1001", "-1", "ten", ""] {
            assert!(limit(Some(bad)).is_err(), "{bad}");
        }
        assert_eq!(
            time("since", Some("2026-11-22T04:00:00+01:00")).unwrap().unwrap(),
            "2026-11-22T03:00:00.000Z"
        );
        assert!(time("since", Some("yesterday")).is_err());
        assert!(one_of("outcome", Some("exploded"), &OUTCOMES).is_err());
        let err = filter(
            Endpoint::History,
            None,
            None,
            None,
            Some("2026-11-23T00:00:00Z"),
            Some("2026-11-22T00:00:00Z"),
            None,
            None,
        );
        assert!(err.is_err());
    }
}
