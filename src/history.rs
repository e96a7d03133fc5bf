//! Journal queries as the HTTP API and `eru-operator history` take them: typed parameters
//! ([`params`]) turned into a journal [`Filter`], pages of journal rows ([`pages`]) with an opaque
//! cursor.
//!
//! Pages are keyset-paged on the journal's row id, newest first: rows journaled while a client
//! pages land before its first page, never inside later ones, so there are no duplicates and no
//! gaps.

pub mod audit;
pub mod pages;
pub mod params;

use crate::journal::{Filter, Journal, RestartRow, SlotRecordRow, SlotRow, TransitionRow, ts};
pub use pages::{
    ErrorBody, HistoryPage, MissedItem, MissedPage, RestartItem, SlotItem, SlotPage, SlotRestart,
    TransitionItem, TransitionPage, Window, table,
};
use params::{
    Cursor, Limit, Listing, Namespace, ObjectName, Records, Restarts, Slots, Time, Transitions, wire_name,
};
pub use params::{HistoryParams, MissedParams, SlotParams, TransitionParams, parse};

/// Why a query was refused (the HTTP API answers 400, the CLI exits 2), or could not be run.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Journal(#[from] crate::Error),
}

type Result<T> = std::result::Result<T, QueryError>;

/// The filter every listing shares.
fn filter<L>(
    namespace: &Option<Namespace>,
    name: &Option<ObjectName>,
    since: Option<Time>,
    until: Option<Time>,
    limit: Option<Limit>,
    cursor: Option<Cursor<L>>,
) -> Filter {
    Filter {
        namespace: namespace.as_ref().map(|n| n.0.clone()),
        name: name.as_ref().map(|n| n.0.clone()),
        since: since.map(|t| ts(t.0)),
        until: until.map(|t| ts(t.0)),
        limit: limit.unwrap_or_default().0,
        before: cursor.map(|c| c.before),
        ..Filter::default()
    }
}

/// Splits `limit + 1` rows into a page and the cursor after it.
fn page<L: Listing, R, T: From<R>>(
    mut rows: Vec<R>,
    limit: u32,
    id: impl Fn(&R) -> i64,
) -> (Vec<T>, Option<String>) {
    let next = if rows.len() > limit as usize {
        rows.truncate(limit as usize);
        rows.last().map(|r| Cursor::<L>::new(id(r)).to_string())
    } else {
        None
    };
    (rows.into_iter().map(T::from).collect(), next)
}

/// `GET /history`.
pub async fn history(journal: &Journal, p: &HistoryParams) -> Result<HistoryPage> {
    history_in(journal, p, None).await
}

/// [`history`] of only these namespaces (`None`: all), the HTTP API's authorisation scope.
pub async fn history_in(
    journal: &Journal,
    p: &HistoryParams,
    namespaces: Option<Vec<String>>,
) -> Result<HistoryPage> {
    let f = Filter {
        namespaces,
        uid: p.uid.as_ref().map(|u| u.0.clone()),
        target: p.target.as_ref().map(|t| t.0.clone()),
        outcome: p.outcome.as_ref().map(wire_name),
        ..filter(&p.namespace, &p.name, p.since, p.until, p.limit, p.cursor)
    };
    let rows = journal.restarts(&f).await?;
    let (items, next_cursor) = page::<Restarts, _, _>(rows, f.limit, |r: &RestartRow| r.id);
    Ok(HistoryPage { items, next_cursor })
}

/// `GET /transitions`.
pub async fn transitions(journal: &Journal, p: &TransitionParams) -> Result<TransitionPage> {
    transitions_in(journal, p, None).await
}

/// [`transitions`] of only these namespaces (`None`: all), the HTTP API's authorisation scope.
pub async fn transitions_in(
    journal: &Journal,
    p: &TransitionParams,
    namespaces: Option<Vec<String>>,
) -> Result<TransitionPage> {
    let f = Filter {
        namespaces,
        kind: p.kind.as_ref().map(wire_name),
        ..filter(&p.namespace, &p.name, p.since, p.until, p.limit, p.cursor)
    };
    let rows = journal.transitions(&f).await?;
    let (items, next_cursor) = page::<Transitions, _, _>(rows, f.limit, |r: &TransitionRow| r.id);
    Ok(TransitionPage { items, next_cursor })
}

/// `GET /missed`.
pub async fn missed(journal: &Journal, p: &MissedParams) -> Result<MissedPage> {
    missed_in(journal, p, None).await
}

/// [`missed`] of only these namespaces (`None`: all), the HTTP API's authorisation scope.
pub async fn missed_in(
    journal: &Journal,
    p: &MissedParams,
    namespaces: Option<Vec<String>>,
) -> Result<MissedPage> {
    let f = Filter {
        namespaces,
        uid: p.uid.as_ref().map(|u| u.0.clone()),
        target: p.target.as_ref().map(|t| t.0.clone()),
        reason: p.reason.as_ref().map(wire_name),
        ..filter(&p.namespace, &p.name, p.since, p.until, p.limit, p.cursor)
    };
    let rows = journal.missed(&f).await?;
    let (items, next_cursor) = page::<Slots, _, _>(rows, f.limit, |r: &SlotRow| r.id);
    Ok(MissedPage { items, next_cursor })
}

/// `GET /slots`: every slot's one ledger record, with its restart attempt.
pub async fn slots(journal: &Journal, p: &SlotParams) -> Result<SlotPage> {
    slots_in(journal, p, None).await
}

/// [`slots`] of only these namespaces (`None`: all), the HTTP API's authorisation scope.
pub async fn slots_in(
    journal: &Journal,
    p: &SlotParams,
    namespaces: Option<Vec<String>>,
) -> Result<SlotPage> {
    let f = Filter {
        namespaces,
        uid: p.uid.as_ref().map(|u| u.0.clone()),
        target: p.target.as_ref().map(|t| t.0.clone()),
        result: p.result.as_ref().map(wire_name),
        reason: p.reason.as_ref().map(wire_name),
        ..filter(&p.namespace, &p.name, p.since, p.until, p.limit, p.cursor)
    };
    let rows = journal.slot_records(&f).await?;
    let (items, next_cursor) = page::<Records, _, _>(rows, f.limit, |r: &SlotRecordRow| r.record.id);
    Ok(SlotPage { items, next_cursor })
}
