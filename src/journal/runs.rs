//! Manual runs (`mtsre.meitu.com/run-now: <token>`): one row per Eru and token, apart from the
//! slots and restarts, so the slot arithmetic stays exact. Written with a pass's [`Entry`] (each
//! change applies once: a replay changes nothing), read by the pass (the run of the token the Eru
//! carries, the run in flight) and by the audit.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::FromRow;

use super::{columns::free_text, *};
use crate::vocab::RunOutcome;

/// A manual run, as journaled.
#[derive(Clone, Debug, FromRow, Serialize, PartialEq)]
pub struct RunRow {
    pub id: i64,
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub target: String,
    pub token: String,
    /// The field manager that set the annotation, if the Eru's managedFields named one.
    pub requested_by: Option<String>,
    /// When the annotation was set (the API server's clock, seconds), else when first seen.
    pub requested_at: Ts,
    /// It is never patched after this instant, nor started.
    pub deadline_at: Ts,
    pub decided_at: Option<Ts>,
    pub patched_at: Option<Ts>,
    pub attempts: i64,
    pub last_error: Option<String>,
    pub next_attempt_at: Option<Ts>,
    pub finished_at: Option<Ts>,
    pub outcome: RunOutcome,
    pub reason: Option<String>,
}

/// A change to one manual run's row, keyed by the Eru's uid and the token.
#[derive(Clone, Debug, PartialEq)]
pub enum RunChange {
    /// First seen: the row, `waiting`.
    Requested {
        object: ObjectKey,
        target: String,
        token: String,
        requested_by: Option<String>,
        requested_at: DateTime<Utc>,
        deadline_at: DateTime<Utc>,
        /// Why it waits, if something stands in its way.
        reason: Option<String>,
    },
    /// It got its place and its gates were open: `in_progress`.
    Decided {
        uid: String,
        token: String,
        at: DateTime<Utc>,
    },
    /// Its patch landed.
    Patched {
        uid: String,
        token: String,
        at: DateTime<Utc>,
    },
    /// Its patch failed; the next try is due at `next_attempt_at`.
    Attempt {
        uid: String,
        token: String,
        at: DateTime<Utc>,
        error: String,
        next_attempt_at: DateTime<Utc>,
    },
    /// No longer asked for while it waited: `refused` (a run that started is left as it is).
    Withdrawn {
        uid: String,
        token: String,
        at: DateTime<Utc>,
        reason: String,
    },
    /// It ended (or never started: `refused`).
    Ended {
        uid: String,
        token: String,
        at: DateTime<Utc>,
        outcome: RunOutcome,
        reason: Option<String>,
    },
}

/// Applies `entry`'s manual-run changes on `conn`, and writes the notifications of a run that
/// ended by them (only then: a replay writes none); returns how many changed a row.
pub(super) async fn runs_on(conn: &mut sqlx::AnyConnection, entry: &Entry) -> Result<u64> {
    let mut changed = 0;
    for change in &entry.runs {
        let applied = statement(change).execute(&mut *conn).await?.rows_affected();
        if let (1.., RunChange::Ended { uid, token, .. } | RunChange::Withdrawn { uid, token, .. }) =
            (applied, change)
        {
            super::notices::run_end_on(conn, entry, uid, token).await?;
        }
        changed += applied;
    }
    Ok(changed)
}

type Statement<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>;

/// The statement of one change: each applies once (a replay matches no row).
fn statement(change: &RunChange) -> Statement<'_> {
    {
        match change {
            RunChange::Requested {
                object,
                target,
                token,
                requested_by,
                requested_at,
                deadline_at,
                reason,
            } => requested(
                object,
                [target, token],
                [requested_by, reason],
                [requested_at, deadline_at],
            ),
            RunChange::Decided { uid, token, at } => sqlx::query(
                "UPDATE manual_runs SET outcome = 'in_progress', decided_at = $3, reason = NULL
                 WHERE uid = $1 AND token = $2 AND outcome = 'waiting'",
            )
            .bind(uid)
            .bind(token)
            .bind(ts(*at)),
            RunChange::Patched { uid, token, at } => sqlx::query(
                "UPDATE manual_runs SET patched_at = $3
                 WHERE uid = $1 AND token = $2 AND outcome = 'in_progress' AND patched_at IS NULL",
            )
            .bind(uid)
            .bind(token)
            .bind(ts(*at)),
            RunChange::Attempt {
                uid,
                token,
                at,
                error,
                next_attempt_at,
            } => sqlx::query(
                // keyed by the attempt's time: a replayed attempt is not counted twice
                "UPDATE manual_runs SET attempts = attempts + 1, last_error = $3, last_attempt_at = $4,
                   next_attempt_at = $5
                 WHERE uid = $1 AND token = $2 AND outcome = 'in_progress'
                   AND (last_attempt_at IS NULL OR last_attempt_at < $4)",
            )
            .bind(uid)
            .bind(token)
            .bind(free_text(error))
            .bind(ts(*at))
            .bind(ts(*next_attempt_at)),
            RunChange::Withdrawn {
                uid,
                token,
                at,
                reason,
            } => sqlx::query(
                "UPDATE manual_runs SET outcome = 'refused', finished_at = $3, reason = $4
                 WHERE uid = $1 AND token = $2 AND outcome = 'waiting'",
            )
            .bind(uid)
            .bind(token)
            .bind(ts(*at))
            .bind(free_text(reason)),
            RunChange::Ended {
                uid,
                token,
                at,
                outcome,
                reason,
            } => sqlx::query(
                "UPDATE manual_runs SET outcome = $3, finished_at = $4, reason = $5
                 WHERE uid = $1 AND token = $2 AND outcome IN ('waiting', 'in_progress')",
            )
            .bind(uid)
            .bind(token)
            .bind(*outcome)
            .bind(ts(*at))
            .bind(reason.as_deref().map(free_text)),
        }
    }
}

/// The row of a run first seen (`waiting`): its Eru, target and token, who asked and why it
/// waits, when it was asked and its deadline; one already there stays as it is.
fn requested<'q>(
    object: &'q ObjectKey,
    [target, token]: [&'q String; 2],
    [requested_by, reason]: [&'q Option<String>; 2],
    [requested_at, deadline_at]: [&'q DateTime<Utc>; 2],
) -> Statement<'q> {
    sqlx::query(
        "INSERT INTO manual_runs (uid, namespace, name, target, token, requested_by, requested_at,
           deadline_at, reason)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (uid, token) DO NOTHING",
    )
    .bind(&object.uid)
    .bind(&object.namespace)
    .bind(&object.name)
    .bind(target)
    .bind(token)
    .bind(requested_by)
    .bind(ts(*requested_at))
    .bind(ts(*deadline_at))
    .bind(reason.as_deref().map(free_text))
}

impl Journal {
    /// [`Reader::manual_run`] on a connection of its own.
    pub async fn manual_run(&self, uid: &str, token: &str) -> Result<Option<RunRow>> {
        self.reader().manual_run(uid, token).await
    }

    /// [`Reader::open_manual_run`] on a connection of its own.
    pub async fn open_manual_run(&self, uid: &str) -> Result<Option<RunRow>> {
        self.reader().open_manual_run(uid).await
    }

    /// The manual runs not ended (waiting or in progress) of the Eru `uid` (or of every Eru) in
    /// `namespace` (or in all): what a deleted Eru leaves.
    pub async fn unended_manual_runs(
        &self,
        namespace: Option<&str>,
        uid: Option<&str>,
    ) -> Result<Vec<RunRow>> {
        Ok(Keyed::all(
            sqlx::query_as(
                "SELECT * FROM manual_runs WHERE outcome IN ('waiting', 'in_progress')
                   AND ($1 IS NULL OR namespace = $1) AND ($2 IS NULL OR uid = $2)
                 ORDER BY id",
            )
            .bind(namespace)
            .bind(uid)
            .fetch_all(&self.pool)
            .await?,
        ))
    }

    /// Every manual run in progress (of the Erus in `namespace`, or of all): the fleet's places.
    pub async fn open_manual_runs(&self, namespace: Option<&str>) -> Result<Vec<RunRow>> {
        Ok(Keyed::all(
            sqlx::query_as(
                "SELECT * FROM manual_runs WHERE outcome = 'in_progress' AND ($1 IS NULL OR namespace = $1)
                 ORDER BY id",
            )
            .bind(namespace)
            .fetch_all(&self.pool)
            .await?,
        ))
    }

    /// [`Reader::last_manual_run`] on a connection of its own.
    pub async fn last_manual_run(&self, uid: &str) -> Result<Option<RunRow>> {
        self.reader().last_manual_run(uid).await
    }

    /// The manual runs requested in `[from, to)` (of the Erus in `namespace`, or of all), newest
    /// first, at most `limit + 1`.
    pub async fn manual_runs(
        &self,
        namespace: Option<&str>,
        (from, to): (DateTime<Utc>, DateTime<Utc>),
        limit: i64,
    ) -> Result<Vec<RunRow>> {
        Ok(Keyed::all(
            sqlx::query_as(
                "SELECT * FROM manual_runs WHERE requested_at >= $2 AND requested_at < $3
                   AND ($1 IS NULL OR namespace = $1)
                 ORDER BY requested_at DESC, id DESC LIMIT $4",
            )
            .bind(namespace)
            .bind(ts(from))
            .bind(ts(to))
            .bind(limit + 1)
            .fetch_all(&self.pool)
            .await?,
        ))
    }
}
