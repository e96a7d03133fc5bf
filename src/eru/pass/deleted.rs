//! Deleted Erus. kube-runtime never reconciles an object that left its store, so deletions come
//! from the watch itself ([`Gone`]): the Eru's per-object series are removed, its status memo and
//! phase forgotten, and a restart it still had in progress is finished `abandoned` with reason
//! [`ERU_DELETED`] (a restart whose patch had not landed also records its slot
//! `skipped/eru_deleted`); its manual runs not ended end so too (`abandoned` in progress, `refused`
//! waiting). An Eru deleted while the operator was down is found the same way at start-up: a
//! restart or run left by an Eru that the synced cache no longer holds.
//!
//! Erus carry no finalizer on purpose: with one, every Eru (and the namespace holding it) would
//! hang in deletion whenever the operator is down or uninstalled, for nothing a watch cannot tell.

use std::{collections::HashSet, sync::Arc};

use chrono::Utc;
use kube::ResourceExt;
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::context::EruContext;
use crate::eru::{
    CachedEru, KIND,
    core::{
        ledger::{Reason, SlotRecord},
        messages::EruRecord,
        run::RunRecord,
    },
};
use crate::vocab::{Outcome, RunOutcome};
use crate::{
    journal::{Entry, ObjectKey, RestartRow, RunRow},
    runtime::{
        cache::Cache,
        watch::{Gone, Synced},
    },
};

/// The reason of a restart whose Eru was deleted before its rollout was seen to end.
pub const ERU_DELETED: Reason = Reason::EruDeleted;

/// Follows Eru deletions until the watch ends.
pub async fn follow(
    context: Arc<EruContext>,
    erus: Cache<CachedEru>,
    synced: Synced,
    mut gone: mpsc::UnboundedReceiver<Gone>,
) {
    // a standby only queues deletions; it sweeps and follows them once it leads
    context.ctx.leadership.acquired().await;
    synced.wait().await;
    sweep(&context, &erus).await;
    while let Some(g) = gone.recv().await {
        info!(namespace = %g.namespace, name = %g.name, "Eru deleted: forgetting its series");
        context.ctx.forget_uid(KIND, &g.uid);
        context.journal_memo.forget(&g.uid);
        // counted (and announced) before its series go
        abandon_open(&context, &g.uid).await;
        // per-Eru series are labelled by name: keep them if a namesake was created meanwhile
        let namesake = erus.find(&g.namespace, &g.name);
        if namesake.is_none() {
            context.metrics.forget(&g.namespace, &g.name);
            context.wakes.cancel(&g.namespace, &g.name);
        }
        let deleted = Entry {
            deleted: vec![(g.uid.clone(), Utc::now())],
            ..Entry::default()
        };
        if let Err(e) = context.ctx.append(&deleted).await {
            warn!(error = %e, "could not mark the deleted Eru's ledger");
        }
    }
}

/// Ends what the Erus deleted while no operator ran left open: their restarts in progress and
/// manual runs not ended. The set of live uids (~80 bytes an Eru) is dropped when it returns, not
/// kept for as long as deletions are followed.
async fn sweep(context: &EruContext, erus: &Cache<CachedEru>) {
    let live: HashSet<String> = erus.state().iter().filter_map(|e| e.uid()).collect();
    let namespace = context.ctx.settings.namespace.clone();
    match context.ctx.journal.open_restarts(namespace.as_deref()).await {
        Ok(open) => {
            abandon(
                context,
                open.into_iter().filter(|r| !live.contains(&r.uid)).collect(),
            )
            .await
        }
        Err(e) => warn!(error = %e, "could not list the restarts in progress"),
    }
    match context
        .ctx
        .journal
        .unended_manual_runs(namespace.as_deref(), None)
        .await
    {
        Ok(runs) => {
            end_runs(
                context,
                runs.into_iter().filter(|r| !live.contains(&r.uid)).collect(),
            )
            .await
        }
        Err(e) => warn!(error = %e, "could not list the manual runs not ended"),
    }
}

/// Finishes the restart a deleted Eru (`uid`) still had in progress, if any, and its manual runs
/// not ended.
pub async fn abandon_open(context: &EruContext, uid: &str) {
    match context.ctx.journal.open_restart(uid).await {
        Ok(open) => abandon(context, open.into_iter().collect()).await,
        Err(e) => warn!(error = %e, "could not read the deleted Eru's restart in progress"),
    }
    match context.ctx.journal.unended_manual_runs(None, Some(uid)).await {
        Ok(runs) => end_runs(context, runs).await,
        Err(e) => warn!(error = %e, "could not read the deleted Eru's manual runs"),
    }
}

/// The journal key of the deleted Eru `namespace/name` (`uid`).
fn eru_key(namespace: &str, name: &str, uid: &str) -> ObjectKey {
    ObjectKey {
        kind: KIND,
        namespace: namespace.to_string(),
        name: name.to_string(),
        uid: uid.to_string(),
    }
}

/// Ends the manual runs of deleted Erus: one in progress `abandoned`, one waiting `refused`, with
/// reason `eru_deleted`, through the commit path.
async fn end_runs(context: &EruContext, runs: Vec<RunRow>) {
    for row in &runs {
        let object = eru_key(&row.namespace, &row.name, &row.uid);
        let outcome = match row.outcome {
            RunOutcome::InProgress => RunOutcome::Abandoned,
            _ => RunOutcome::Refused,
        };
        let record = EruRecord::Run(RunRecord::Ended {
            token: row.token.clone(),
            outcome,
            at: None,
            reason: Some(ERU_DELETED.as_str().into()),
        });
        if let Err(e) = super::commit::commit_records(context, &object, &[record], Utc::now()).await {
            warn!(error = %e, "could not journal the manual run of a deleted Eru (retried at the next start)");
        }
    }
}

/// Finishes `rows` as abandoned because their Eru was deleted, through the commit path (journal,
/// metrics, Events) like every other record; the per-Eru series it touches are forgotten after,
/// unless a namesake lives.
async fn abandon(context: &EruContext, rows: Vec<RestartRow>) {
    let now = Utc::now();
    for row in &rows {
        let object = eru_key(&row.namespace, &row.name, &row.uid);
        let mut records = vec![deleted_record(row)];
        // its silence ends with it (else it would lapse at its own end)
        if let Some(id) = row
            .silence_id
            .as_ref()
            .filter(|_| row.silence_expired_at.is_none())
        {
            match context.options.silencer.expire(id).await {
                Ok(()) => records.push(EruRecord::SilenceExpired {
                    slot: *row.slot,
                    at: Utc::now(),
                }),
                Err(e) => {
                    warn!(error = %e, silence = %id, "could not expire the deleted Eru's silence; it lapses at its end")
                }
            }
        }
        match super::commit::commit_records(context, &object, &records, now).await {
            Ok(_) => {
                info!(namespace = %row.namespace, name = %row.name, slot = %row.slot, "Eru deleted: its restart in progress is abandoned")
            }
            Err(e) => {
                warn!(error = %e, "could not journal the restart of a deleted Eru (retried at the next start)")
            }
        }
        if context.erus.find(&row.namespace, &row.name).is_none() {
            context.metrics.forget(&row.namespace, &row.name);
        }
    }
}

/// The record of a deleted Eru's restart in progress: given up (its slot `skipped/eru_deleted`) if
/// its patch never landed, else finished `abandoned`.
fn deleted_record(row: &RestartRow) -> EruRecord {
    let slot = *row.slot;
    match row.patched_at {
        None => EruRecord::GaveUp {
            slot,
            reason: ERU_DELETED.as_str().into(),
            record: SlotRecord::one(slot, Reason::EruDeleted, None, &row.target),
        },
        Some(patched_at) => EruRecord::Finished {
            slot,
            patched_at: *patched_at,
            outcome: Outcome::Abandoned,
            finished_at: None,
            reason: Some(ERU_DELETED.as_str().into()),
        },
    }
}
