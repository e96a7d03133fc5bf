//! What the first pass of each Eru in a term reads of its journal, read for every Eru at once
//! (issue 57: the cold start). A first pass knows nothing of its Eru's journal (the
//! [`JournalMemo`](crate::eru::pass::journal_memo) starts empty), so at 10,000 Erus a start made
//! 80,000 small reads: the ledger, the epochs, the restart and run in flight, and the status's
//! summary (the ledger again, the last restart, the recent records, the last run). Here six
//! statements a chunk of Erus read all of it but the recent records, in one read transaction
//! (one snapshot: on PostgreSQL, repeatable read).
//!
//! Only an Eru's own passes write its rows (and its deletion, which drops what was read of it),
//! and none has run in this term when this is read: the term's first pass reads it (a standby
//! passes nothing; with leader election, a term begins after the leadership fence is taken), and
//! the other passes wait for it. So each Eru's rows stay as read here until its own first pass,
//! which takes them. What retention prunes meanwhile may still show, as with the memo.
//!
//! Kept small until taken (~0.8 KB an Eru, estimated from the rows' sizes): read a chunk of Erus at a time, rows that are most
//! often absent boxed, and each epoch's spec kept as its text until its pass parses it.

use std::collections::HashMap;

use sqlx::Any;

use super::*;

/// Erus read a chunk at a time: the rows in flight at once stay a few MB.
#[cfg(not(test))]
const CHUNK: i64 = 1000;
/// Chunks of two in the tests: three Erus cross a chunk's bounds.
#[cfg(test)]
const CHUNK: i64 = 2;

/// An Eru's rows, as its first pass of a term reads them (for an Eru with a ledger row).
#[derive(Clone, Debug, PartialEq)]
pub struct FirstRead {
    pub ledger: LedgerRow,
    /// The epochs in force at the ledger's cursor and after it, oldest first, their specs as
    /// text; `None` for a ledger without a cursor (the pass reads them from its own).
    epochs: Option<Vec<EpochText>>,
    /// The restart in progress ([`Reader::open_restart`]).
    pub open_restart: Option<Box<RestartRow>>,
    /// The manual run in progress ([`Reader::open_manual_run`]).
    pub open_run: Option<Box<RunRow>>,
    /// The restart of the ledger's last restart slot.
    pub last_restart: Option<Box<RestartRow>>,
    /// The latest manual run ([`Reader::last_manual_run`]).
    pub last_run: Option<Box<RunRow>>,
}

/// An epoch row with its spec unparsed.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
struct EpochText {
    uid: String,
    generation: i64,
    effective_from: Ts,
    observed_at: Ts,
    spec: String,
}

impl FirstRead {
    /// The read of an Eru with this ledger row, before its other rows are added.
    pub fn new(ledger: LedgerRow) -> Self {
        FirstRead {
            epochs: ledger.accounted_through.map(|_| Vec::new()),
            ledger,
            open_restart: None,
            open_run: None,
            last_restart: None,
            last_run: None,
        }
    }

    /// The epochs from the ledger's cursor ([`Reader::epochs`] from it), once; `None` for a
    /// ledger without a cursor. A spec that is not JSON fails as the pass's own read would.
    pub fn take_epochs(&mut self) -> Option<Result<Vec<EpochRow>>> {
        let epochs = self.epochs.take()?;
        Some(
            (epochs.into_iter())
                .map(|e| {
                    let spec = JsonText::try_from(e.spec).map_err(|error| crate::Error::JournalRow {
                        row: format!("spec_epochs (uid {}, generation {})", e.uid, e.generation),
                        reason: error.to_string(),
                    })?;
                    Ok(EpochRow {
                        uid: e.uid,
                        generation: e.generation,
                        effective_from: e.effective_from,
                        observed_at: e.observed_at,
                        spec,
                    })
                })
                .collect(),
        )
    }
}

/// The epochs of a chunk's Erus whose ledger has a cursor: the one in force at it and every later
/// one (the rows [`Reader::epochs`] reads from that cursor).
const EPOCHS: &str = "SELECT e.* FROM spec_epochs e JOIN eru_ledger l ON l.uid = e.uid
     WHERE l.accounted_through IS NOT NULL AND ($1 IS NULL OR l.namespace = $1)
       AND e.uid > $2 AND e.uid <= $3
       AND (e.effective_from > l.accounted_through
            OR e.generation = (SELECT x.generation FROM spec_epochs x
                               WHERE x.uid = e.uid AND x.effective_from <= l.accounted_through
                               ORDER BY x.effective_from DESC, x.generation DESC LIMIT 1))";

impl Journal {
    /// The first reads of every Eru with a ledger row (of `namespace`, or of all) that `keep`
    /// keeps, by uid. A row that does not read fails the whole read, as it fails a pass's.
    pub async fn first_reads(
        &self,
        namespace: Option<&str>,
        keep: impl Fn(&LedgerRow) -> bool,
    ) -> Result<HashMap<String, FirstRead>> {
        let mut reads = HashMap::new();
        let read = async {
            let mut tx = self.pool.begin().await?;
            if self.backend == Backend::Postgres {
                // one snapshot for every statement, as SQLite's read transaction has
                sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    .execute(&mut *tx)
                    .await?;
            }
            let mut after = String::new();
            while let Some((last, chunk)) = chunk(&mut tx, namespace, &after).await? {
                let full = chunk.len() as i64 == CHUNK;
                reads.extend(chunk.into_iter().filter(|(_, read)| keep(&read.ledger)));
                if !full {
                    break;
                }
                after = last;
            }
            tx.rollback().await
        };
        self.reached(read).await?;
        Ok(reads)
    }
}

/// The first reads of the next chunk of Erus by uid, after `after`, and the chunk's last uid (in
/// the database's order); `None` past the last.
async fn chunk(
    tx: &mut sqlx::Transaction<'_, Any>,
    namespace: Option<&str>,
    after: &str,
) -> sqlx::Result<Option<(String, HashMap<String, FirstRead>)>> {
    let ledgers: Vec<Keyed<LedgerRow>> = sqlx::query_as(
        "SELECT * FROM eru_ledger WHERE ($1 IS NULL OR namespace = $1) AND uid > $2 ORDER BY uid LIMIT $3",
    )
    .bind(namespace)
    .bind(after)
    .bind(CHUNK)
    .fetch_all(&mut **tx)
    .await?;
    let Some(last) = ledgers.last().map(|l| l.0.uid.clone()) else {
        return Ok(None);
    };
    let mut reads: HashMap<String, FirstRead> = (Keyed::all(ledgers).into_iter())
        .map(|ledger| (ledger.uid.clone(), FirstRead::new(ledger)))
        .collect();
    let range = (namespace, after, last.as_str());
    for epoch in rows::<EpochText>(tx, EPOCHS, range).await? {
        if let Some(kept) = reads.get_mut(&epoch.uid).and_then(|r| r.epochs.as_mut()) {
            kept.push(epoch);
        }
    }
    for read in reads.values_mut() {
        if let Some(epochs) = &mut read.epochs {
            epochs.sort_by(|a, b| (&a.effective_from, a.generation).cmp(&(&b.effective_from, b.generation)));
        }
    }
    // in progress: at most one each, else the latest slot's restart and the latest run, as the
    // pass's own reads order them
    let open = "SELECT * FROM restarts WHERE outcome = 'in_progress' AND ($1 IS NULL OR namespace = $1)
                AND uid > $2 AND uid <= $3";
    let rows_of = rows::<RestartRow>(tx, open, range).await?;
    keep_each(
        &mut reads,
        rows_of,
        |r| &mut r.open_restart,
        |a, b| a.slot > b.slot,
    );
    let open = "SELECT * FROM manual_runs WHERE outcome = 'in_progress' AND ($1 IS NULL OR namespace = $1)
                AND uid > $2 AND uid <= $3";
    let rows_of = rows::<RunRow>(tx, open, range).await?;
    keep_each(&mut reads, rows_of, |r| &mut r.open_run, |a, b| a.id > b.id);
    let last_restarts =
        "SELECT r.* FROM restarts r JOIN eru_ledger l ON l.uid = r.uid AND r.slot = l.last_restart_slot
         WHERE ($1 IS NULL OR l.namespace = $1) AND l.uid > $2 AND l.uid <= $3";
    let rows_of = rows::<RestartRow>(tx, last_restarts, range).await?;
    keep_each(
        &mut reads,
        rows_of,
        |r| &mut r.last_restart,
        |a, b| a.slot > b.slot,
    );
    let last_runs = "SELECT * FROM manual_runs WHERE id IN (SELECT max(id) FROM manual_runs
                       WHERE uid > $2 AND uid <= $3 GROUP BY uid) AND ($1 IS NULL OR namespace = $1)";
    let rows_of = rows::<RunRow>(tx, last_runs, range).await?;
    keep_each(&mut reads, rows_of, |r| &mut r.last_run, |a, b| a.id > b.id);
    Ok(Some((last, reads)))
}

/// A restart's or a manual run's row, of one Eru.
trait Row {
    fn uid(&self) -> &str;
}

macro_rules! row_of_eru {
    ($($row:ty),*) => {$(
        impl Row for $row {
            fn uid(&self) -> &str {
                &self.uid
            }
        }
    )*};
}
row_of_eru!(RestartRow, RunRow);

/// Puts each row in its Eru's read, at `place`; of two rows of one Eru, the one `later` than the
/// other.
fn keep_each<T: Row>(
    reads: &mut HashMap<String, FirstRead>,
    rows: Vec<T>,
    place: fn(&mut FirstRead) -> &mut Option<Box<T>>,
    later: fn(&T, &T) -> bool,
) {
    for row in rows {
        if let Some(read) = reads.get_mut(row.uid()) {
            let kept = place(read);
            if kept.as_deref().is_none_or(|k| later(&row, k)) {
                *kept = Some(Box::new(row));
            }
        }
    }
}

/// Every row `sql` reads in `tx`: `$1` the namespace (or NULL), `$2` and `$3` the chunk's uids
/// (after, through).
async fn rows<T>(
    tx: &mut sqlx::Transaction<'_, Any>,
    sql: &'static str,
    (namespace, after, last): (Option<&str>, &str, &str),
) -> sqlx::Result<Vec<T>>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::any::AnyRow> + Send + Unpin,
{
    let rows: Vec<Keyed<T>> = sqlx::query_as(sql)
        .bind(namespace)
        .bind(after)
        .bind(last)
        .fetch_all(&mut **tx)
        .await?;
    Ok(Keyed::all(rows))
}
