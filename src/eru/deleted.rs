//! Deleted Erus. kube-runtime never reconciles an object that left its store, so deletions come
//! from the watch itself ([`Gone`]): the Eru's per-object series are removed, its status memo and
//! phase forgotten, and a restart it still had in progress is finished `abandoned` with reason
//! [`ERU_DELETED`] (a restart whose patch had not landed also records its slot
//! `skipped/eru_deleted`). An Eru deleted while the operator was down is found the same way at
//! start-up: a restart left in progress by an Eru that the synced cache no longer holds.
//!
//! Erus carry no finalizer on purpose: with one, every Eru (and the namespace holding it) would
//! hang in deletion whenever the operator is down or uninstalled, for nothing a watch cannot tell.

use std::{collections::HashSet, sync::Arc};

use chrono::Utc;
use kube::{
    ResourceExt,
    runtime::reflector::{ObjectRef, Store},
};
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::{
    CachedEru, KIND,
    context::EruContext,
    ledger::{Reason, SlotRecord},
    machine::RestartOutcome,
};
use crate::{
    journal::{Entry, FinishedRestart, NewSlot, ObjectKey, RestartRow, parse_ts},
    runtime::watch::{Gone, Synced},
};

/// The reason of a restart whose Eru was deleted before its rollout was seen to end.
pub const ERU_DELETED: &str = "eru_deleted";

/// Follows Eru deletions until the watch ends.
pub async fn follow(
    context: Arc<EruContext>,
    erus: Store<CachedEru>,
    synced: Synced,
    gone: mpsc::UnboundedReceiver<Gone>,
) {
    // a standby only queues deletions; it sweeps and follows them once it leads
    context.ctx.leadership.acquired().await;
    synced.wait().await;
    let live: HashSet<String> = erus.state().iter().filter_map(|e| e.uid()).collect();
    let namespace = context.ctx.settings.namespace.clone();
    match context.ctx.journal.open_restarts(namespace.as_deref()).await {
        Ok(open) => {
            abandon(
                &context,
                open.into_iter().filter(|r| !live.contains(&r.uid)).collect(),
            )
            .await
        }
        Err(e) => warn!(error = %e, "could not list the restarts in progress"),
    }
    let mut gone = gone;
    while let Some(g) = gone.recv().await {
        info!(namespace = %g.namespace, name = %g.name, "Eru deleted: forgetting its series");
        context.ctx.forget_uid(KIND, &g.uid);
        // per-Eru series are labelled by name: keep them if a namesake was created meanwhile
        let namesake = erus.get(&ObjectRef::new(&g.name).within(&g.namespace));
        if namesake.is_none() {
            context.metrics.forget(&g.namespace, &g.name);
            context.far.cancel(&g.namespace, &g.name);
        }
        abandon_open(&context, &g.uid).await;
        let deleted = Entry {
            deleted: vec![(g.uid.clone(), Utc::now())],
            ..Entry::default()
        };
        if let Err(e) = context.ctx.append(&deleted).await {
            warn!(error = %e, "could not mark the deleted Eru's ledger");
        }
    }
}

/// Finishes the restart a deleted Eru (`uid`) still had in progress, if any.
pub async fn abandon_open(context: &EruContext, uid: &str) {
    match context.ctx.journal.open_restart(uid).await {
        Ok(open) => abandon(context, open.into_iter().collect()).await,
        Err(e) => warn!(error = %e, "could not read the deleted Eru's restart in progress"),
    }
}

/// Finishes `rows` as abandoned because their Eru was deleted.
async fn abandon(context: &EruContext, rows: Vec<RestartRow>) {
    if rows.is_empty() {
        return;
    }
    let now = Utc::now();
    let mut entry = Entry::default();
    for row in &rows {
        let Some(slot) = parse_ts(&row.slot) else { continue };
        entry.restarts_finished.push(FinishedRestart {
            uid: row.uid.clone(),
            slot,
            finished_at: now,
            outcome: RestartOutcome::Abandoned.as_str(),
            reason: Some(ERU_DELETED.into()),
        });
        if row.patched_at.is_none() {
            // never landed: the slot was not restarted
            let record = SlotRecord::one(slot, Reason::EruDeleted, None, &row.target);
            entry.slots.push(NewSlot {
                object: ObjectKey {
                    kind: KIND,
                    namespace: row.namespace.clone(),
                    name: row.name.clone(),
                    uid: row.uid.clone(),
                },
                target: record.target,
                slot,
                last_slot: slot,
                slot_count: 1,
                result: record.reason.result(),
                reason: record.reason.as_str(),
                window: None,
                note: None,
                evaluated_at: now,
            });
        }
    }
    match context.ctx.append(&entry).await {
        Ok(_) => {
            for r in &rows {
                info!(namespace = %r.namespace, name = %r.name, slot = %r.slot, "Eru deleted: its restart in progress is abandoned");
            }
        }
        Err(e) => {
            warn!(error = %e, "could not journal the restarts of deleted Erus (retried at the next start)")
        }
    }
}
