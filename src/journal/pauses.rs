//! Pauses on failure (`spec.failurePolicy`): one row per pause, keyed by the Eru's uid and the
//! instant it paused, so a replay adds nothing; resumed once. Written with a pass's [`Entry`]
//! (a new pause with its notifications), read by the pass: the latest pause of an Eru, and the
//! restarts that ended since its resume.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::FromRow;

use super::{columns::free_text, *};
use crate::vocab::Outcome;

/// A pause on failure, as journaled.
#[derive(Clone, Debug, FromRow, Serialize, PartialEq)]
pub struct PauseRow {
    pub id: i64,
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// When it paused (whole seconds).
    pub since: Ts,
    /// The restarts that tripped it.
    pub why: String,
    pub resumed_at: Option<Ts>,
    /// The field manager that set the resume annotation, if the managedFields named one.
    pub resumed_by: Option<String>,
}

/// A change to an Eru's pauses.
#[derive(Clone, Debug, PartialEq)]
pub enum PauseChange {
    /// The Eru paused itself at `since`.
    Paused {
        object: ObjectKey,
        since: DateTime<Utc>,
        why: String,
    },
    /// The pause of `since` was resumed.
    Resumed {
        uid: String,
        since: DateTime<Utc>,
        at: DateTime<Utc>,
        by: Option<String>,
    },
}

/// A restart of a slot whose patch landed, ended, as the pause's row reads it.
#[derive(Clone, Debug, FromRow, PartialEq)]
pub struct EndedRow {
    pub slot: Ts,
    pub outcome: Outcome,
    pub reason: Option<String>,
}

/// Applies `entry`'s pause changes on `conn`, with the notifications of a pause that is new (only
/// then: a replay writes none); returns how many changed a row.
pub(super) async fn pauses_on(conn: &mut sqlx::AnyConnection, entry: &Entry) -> Result<u64> {
    let mut changed = 0;
    for change in &entry.pauses {
        let applied = match change {
            PauseChange::Paused { object, since, why } => {
                let added = sqlx::query(
                    "INSERT INTO failure_pauses (uid, namespace, name, since, why) VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (uid, since) DO NOTHING",
                )
                .bind(&object.uid)
                .bind(&object.namespace)
                .bind(&object.name)
                .bind(ts(*since))
                .bind(free_text(why))
                .execute(&mut *conn)
                .await?
                .rows_affected();
                if added > 0 {
                    super::notices::pause_on(conn, entry, &object.uid, *since).await?;
                }
                added
            }
            PauseChange::Resumed { uid, since, at, by } => sqlx::query(
                "UPDATE failure_pauses SET resumed_at = $3, resumed_by = $4
                     WHERE uid = $1 AND since = $2 AND resumed_at IS NULL",
            )
            .bind(uid)
            .bind(ts(*since))
            .bind(ts(*at))
            .bind(by.as_deref().map(free_text))
            .execute(&mut *conn)
            .await?
            .rows_affected(),
        };
        changed += applied;
    }
    Ok(changed)
}

impl Journal {
    /// [`Reader::latest_pause`] on a connection of its own.
    pub async fn latest_pause(&self, uid: &str) -> Result<Option<PauseRow>> {
        self.reader().latest_pause(uid).await
    }

    /// [`Reader::ended_restarts`] on a connection of its own.
    pub async fn ended_restarts(
        &self,
        uid: &str,
        after: Option<DateTime<Utc>>,
        limit: i64,
    ) -> Result<Vec<EndedRow>> {
        self.reader().ended_restarts(uid, after, limit).await
    }
}
