//! The outbox's rows, written with the records they announce ([`super::Entry::notices`]), in the
//! record's transaction: one function per kind of record. A slot record's, a restart end's and a
//! manual run end's notifications are written only when that record was just added (a replay
//! writes none); a held slot and an unaccounted window have no record, and are written once per
//! sink by their key.

use chrono::{DateTime, Utc};

use super::{columns::free_text, *};

/// The notifications of the slot record starting at `slot` of the Eru `uid`, just added.
pub(super) async fn slot_on(
    conn: &mut sqlx::AnyConnection,
    entry: &Entry,
    uid: &str,
    slot: DateTime<Utc>,
) -> Result<()> {
    of_on(conn, entry, uid, |of| *of == NoticeOf::Slot(slot)).await
}

/// The notifications of the end of the restart of `slot` of the Eru `uid`, just journaled.
pub(super) async fn finished_on(
    conn: &mut sqlx::AnyConnection,
    entry: &Entry,
    uid: &str,
    slot: DateTime<Utc>,
) -> Result<()> {
    of_on(conn, entry, uid, |of| *of == NoticeOf::Finished(slot)).await
}

/// The notifications of the end of the manual run `token` of the Eru `uid`, just journaled.
pub(super) async fn run_end_on(
    conn: &mut sqlx::AnyConnection,
    entry: &Entry,
    uid: &str,
    token: &str,
) -> Result<()> {
    of_on(
        conn,
        entry,
        uid,
        |of| matches!(of, NoticeOf::Run { token: t, .. } if t == token),
    )
    .await
}

/// The notifications of the pause on failure of the Eru `uid` that began at `since`, just
/// journaled.
pub(super) async fn pause_on(
    conn: &mut sqlx::AnyConnection,
    entry: &Entry,
    uid: &str,
    since: DateTime<Utc>,
) -> Result<()> {
    of_on(conn, entry, uid, |of| *of == NoticeOf::Paused(since)).await
}

/// The notifications of slots held by a health gate and of windows that cannot be accounted:
/// no record carries them, so each is written once per sink by its key.
pub(super) async fn unrecorded_on(conn: &mut sqlx::AnyConnection, entry: &Entry) -> Result<()> {
    let unrecorded = |n: &&NewNotice| matches!(n.of, NoticeOf::Held(_) | NoticeOf::Gap(_));
    for n in entry.notices.iter().filter(unrecorded) {
        notice_on(conn, n).await?;
    }
    Ok(())
}

/// The entry's notifications of the Eru `uid` whose record `of` picks.
async fn of_on(
    conn: &mut sqlx::AnyConnection,
    entry: &Entry,
    uid: &str,
    of: impl Fn(&NoticeOf) -> bool,
) -> Result<()> {
    for n in entry.notices.iter().filter(|n| n.object.uid == uid && of(&n.of)) {
        notice_on(conn, n).await?;
    }
    Ok(())
}

/// One notification into the outbox (one already there, by sink and key, stays as it is).
async fn notice_on(conn: &mut sqlx::AnyConnection, n: &NewNotice) -> Result<()> {
    sqlx::query(
        "INSERT INTO notifications (sink, key, uid, namespace, name, event, slot, last_slot, slot_count,
           reason, note, created_at, next_attempt_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12) ON CONFLICT (sink, key) DO NOTHING",
    )
    .bind(&n.sink)
    .bind(n.key())
    .bind(&n.object.uid)
    .bind(&n.object.namespace)
    .bind(&n.object.name)
    .bind(n.event)
    .bind(ts(n.slot()))
    .bind(ts(n.last_slot))
    .bind(n.slot_count)
    .bind(n.reason.as_deref().map(free_text))
    .bind(n.note.as_deref().map(free_text))
    .bind(ts(n.created_at))
    .execute(&mut *conn)
    .await?;
    Ok(())
}
