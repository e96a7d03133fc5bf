//! The Eru controller and its pass, one step per module:
//! [`observe`](super::observe) (watch caches and journal) → [`decide`](super::decide) (the
//! machine; pure) → [`journal`](super::record) (transitions and records, one transaction) →
//! [`act`](super::act) (restart patch, Events; results fed back) → [`status`](super::status) →
//! requeue at the next slot (or the rollout's deadline).

use std::{future::Future, sync::Arc, time::Duration as StdDuration};

use crate::runtime::lean::{DaemonSet, Deployment, StatefulSet};
use chrono::{DateTime, Duration, Utc};
use futures::StreamExt;
use kube::{
    Resource, ResourceExt,
    runtime::{
        Controller,
        controller::{self, Action},
        events::EventType,
        reflector::ObjectRef,
        watcher,
    },
};
use tokio::sync::watch;
use tracing::{debug, warn};

use super::{
    CachedEru, KIND,
    act::act,
    context::{EruContext, Options, TargetCaches, Workloads},
    decide::{Pass, decide},
    deleted,
    fleet::{Fleet, Grant},
    index::Targets,
    machine::State,
    metrics::EruMetrics,
    observe::observe,
    record::{self, slot_text},
    status::{FleetView, Queued, status},
    target::Workload,
};
use crate::{
    Result,
    machine::{Phase, status_digest},
    runtime::{
        Context, drive, shutdown_requested,
        wakes::{self, FarWakes, Wake},
        watch::{Shared, only_changes},
    },
};

/// Requeue margin after a slot: timers fire at or after their instant (millisecond rounding), so
/// the slot is due when the pass runs.
const SLOT_MARGIN: StdDuration = StdDuration::from_millis(2);

/// Builds the Eru controller on the shared Eru and workload caches; returns it and a future that
/// resolves once its caches synced. Erus are reconciled when their spec changes (not when the
/// operator writes their status), when a Deployment, StatefulSet or DaemonSet they target
/// changes, and at their slots.
pub fn controller(
    ctx: Arc<Context>,
    shutdown: watch::Receiver<bool>,
    erus: &mut Shared<CachedEru>,
    workloads: Workloads<'_>,
    options: Options,
) -> (impl Future<Output = ()> + use<>, impl Future<Output = ()> + use<>) {
    let (fleet, freed) = Fleet::new(options.limits);
    let far = FarWakes::default();
    let freed = futures::stream::unfold(freed, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) });
    let targets = Targets::default();
    let index = targets.clone();
    erus.on_event(move |event| index.observe(event));
    let memo = ctx.clone();
    erus.on_stored(move |event| {
        if let watcher::Event::Apply(eru) | watcher::Event::InitApply(eru) = event {
            let meta = eru.meta();
            memo.statuses.settle(
                meta.uid.as_deref().unwrap_or_default(),
                meta.resource_version.as_deref().unwrap_or_default(),
            );
        }
    });
    let gone = erus.deletions();
    let spec_changes = only_changes(erus.subscribe(), |eru: &CachedEru| {
        eru.metadata.generation.unwrap_or(0) as u64
    });
    let controller = Controller::for_shared_stream(spec_changes, erus.store.clone())
        .watches_shared_stream(seen(workloads.deployments), erus_of::<Deployment>(&targets))
        .watches_shared_stream(seen(workloads.statefulsets), erus_of::<StatefulSet>(&targets))
        .watches_shared_stream(seen(workloads.daemonsets), erus_of::<DaemonSet>(&targets))
        .reconcile_on(freed)
        .reconcile_on(far.due_stream())
        .with_config(controller::Config::default().concurrency(ctx.settings.concurrency))
        .graceful_shutdown_on(shutdown_requested(shutdown.clone()));
    let target_caches = TargetCaches::of(&workloads);
    let synced = {
        let (erus_synced, targets_synced) = (erus.synced.clone(), target_caches.clone());
        async move {
            futures::join!(erus_synced.wait(), targets_synced.synced());
        }
    };
    let context = Arc::new(EruContext {
        metrics: EruMetrics::register(&ctx.metrics),
        ctx,
        erus: erus.store.clone(),
        targets: target_caches,
        fleet,
        fleet_loaded: Default::default(),
        far,
        options: options.clone(),
    });
    let reload = options
        .blackouts
        .clone()
        .follow(shutdown_requested(shutdown.clone()));
    let deletions = deleted::follow(context.clone(), erus.store.clone(), erus.synced.clone(), gone);
    let run = drive(controller, KIND, context.ctx.clone(), context, reconcile);
    (
        async move {
            futures::join!(run, deletions, reload);
        },
        synced,
    )
}

/// The changes of a workload cache that may move an Eru: not those its controller has yet to
/// see ([`Workload::awaits_controller`]). Such a change (most often the echo of this operator's
/// own restart patch) cannot move an Eru: its rollout cannot be judged done or failed, and its
/// gates are closed, until the workload's controller catches up, and that write triggers the
/// pass. Skipping them halves the passes of a burst of due slots.
fn seen<K: Workload>(cache: &Shared<K>) -> impl futures::Stream<Item = Arc<K>> + Send + 'static {
    cache
        .subscribe()
        .filter(|workload| futures::future::ready(!workload.awaits_controller()))
}

/// The Erus that target a workload of kind `K`, from the index.
fn erus_of<K: Workload>(
    targets: &Targets,
) -> impl Fn(Arc<K>) -> Vec<ObjectRef<CachedEru>> + Send + Sync + 'static {
    let targets = targets.clone();
    move |workload| {
        targets.erus_of(
            &workload.namespace().unwrap_or_default(),
            K::KIND,
            &workload.name_any(),
        )
    }
}

/// One pass over `eru`.
async fn reconcile(eru: Arc<CachedEru>, context: Arc<EruContext>) -> Result<Action> {
    let ctx = &context.ctx;
    // an unsynced cache would show the target as missing and abandon a restart in flight
    context.targets.synced().await;
    if eru.meta().deletion_timestamp.is_some() {
        forget(&context, &eru);
        return Ok(Action::await_change());
    }
    let (namespace, name) = (eru.namespace().unwrap_or_default(), eru.name_any());
    context.metrics.init(&namespace, &name);

    let began = std::time::Instant::now();
    count_in_flight(&context).await?;
    let mut observed = observe(&context, &eru, Utc::now()).await?;
    let observed_in = began.elapsed();
    let (mut pass, mut queued) = (decide(&eru, &observed), None);
    if let Some((slot, deadline)) = pass.starts() {
        let uid = eru.uid().unwrap_or_default();
        let grant = context
            .fleet
            .request(&uid, &namespace, &name, slot, deadline, observed.now);
        if let Grant::Queued { ahead, in_flight } = grant {
            // no place: decided again without one (the slot waits, unaccounted)
            observed.capacity = false;
            pass = decide(&eru, &observed);
            queued = Some(Queued {
                slot,
                deadline,
                ahead,
                in_flight,
            });
        }
    }
    let Pass {
        state,
        decision,
        backlog,
        wake,
        gap,
        patched_at,
        rollout_timeout,
        next_fire,
    } = pass;
    record::journal(&context, &eru, &decision, observed.now, patched_at).await?;
    let journaled_in = began.elapsed();
    if let Some((from, to)) = gap {
        report_gap(&context, &eru, from, to);
    }
    let acted = act(&context, &eru, state, &decision.actions).await?;
    let acted_in = began.elapsed();

    settle_place(&context, &eru, &acted.state, queued.is_some());
    // the next slot: woken for it even while suspended, so skipped slots are journaled live
    let next_slot = next_fire;
    let next = next_slot.filter(|_| !eru.spec.suspend);
    context.metrics.set_next(&namespace, &name, next);
    ctx.metrics
        .set_phase(KIND, &eru.uid().unwrap_or_default(), acted.state.phase());
    if deleted_meanwhile(&context, &eru) {
        // the deletion was handled while this pass ran; undo what the pass set again
        forget(&context, &eru);
        deleted::abandon_open(&context, &eru.uid().unwrap_or_default()).await;
        return Ok(Action::await_change());
    }
    let summary = ctx.journal.eru_summary(&eru.uid().unwrap_or_default()).await?;
    let status = status(
        &eru,
        &observed,
        &acted.state,
        next,
        &summary,
        acted.patch_error,
        FleetView {
            capped: !context.fleet.limits().unlimited(),
            queued: queued.as_ref(),
        },
    );
    if observed.known_digest != Some(status_digest(&status)) {
        ctx.write_status(eru.as_ref(), &status)?;
    }
    debug!(eru = %name, ?observed_in, ?journaled_in, ?acted_in, done_in = ?began.elapsed(), "pass timings");

    let wake = match (&acted.state, acted.patched_at, acted.retry_at) {
        // landed in this pass: the rollout's deadline counts from now
        (State::RollingOut { .. }, Some(at), _) => Some(at + rollout_timeout + Duration::seconds(1)),
        // refused in this pass: the next try after the backoff (or the deadline, if sooner)
        (State::Restarting { restart }, _, Some(retry)) => {
            Some(retry.min(restart.deadline + Duration::milliseconds(1)))
        }
        // waiting for a place: woken when one frees up, else at the deadline to record it
        _ if queued.is_some() => queued.as_ref().map(|q| q.deadline + Duration::milliseconds(1)),
        _ => wake,
    };
    Ok(requeue(&context, &eru, backlog, next_slot, wake))
}

/// Counts the restarts in flight from the journal, once, before the first pass gives a place.
async fn count_in_flight(context: &EruContext) -> Result<()> {
    if context.fleet.limits().unlimited() {
        return Ok(());
    }
    context
        .fleet_loaded
        .get_or_try_init(|| async {
            let namespace = context.ctx.settings.namespace.as_deref();
            for open in context.ctx.journal.open_restarts(namespace).await? {
                context.fleet.hold(&open.uid, &open.namespace);
            }
            Ok::<_, crate::Error>(())
        })
        .await?;
    Ok(())
}

/// Keeps the Eru's place while a restart is in flight; otherwise, unless it just queued, frees
/// its place (or its turn) for the next in line.
fn settle_place(context: &EruContext, eru: &CachedEru, state: &State, queued: bool) {
    let uid = eru.uid().unwrap_or_default();
    if state.slot().is_some() {
        context.fleet.hold(&uid, &eru.namespace().unwrap_or_default());
    } else if !queued {
        context.fleet.leave(&uid, Utc::now());
    }
    let (waiting, in_flight) = context.fleet.sizes();
    context.metrics.set_fleet(waiting, in_flight);
}

/// Tells the user that slots between `from` and `to` cannot be accounted.
fn report_gap(context: &EruContext, eru: &CachedEru, from: DateTime<Utc>, to: DateTime<Utc>) {
    let note = format!(
        "slots between {} and {} are not accounted: the journal holds no record of this Eru before {} \
         and its spec changed since the last slot the cluster remembers, so which slots there were is unknown",
        slot_text(from),
        slot_text(to),
        slot_text(to)
    );
    warn!(eru = %eru.name_any(), %note, "ledger gap");
    context
        .ctx
        .publish(eru, EventType::Warning, "LedgerGap", "Account", Some(note));
}

/// When to come back: at once with a backlog; else at the next slot, or when the restart in
/// flight needs a look (a retry, its deadline, its rollout's timeout: no Deployment event may come
/// when a rollout stalls) if that is sooner. A wake-up beyond the scheduler's horizon waits in
/// the far timer ([`crate::runtime::wakes`]), which hands the Eru back a minute early for a
/// pass that requeues it to the millisecond.
fn requeue(
    context: &EruContext,
    eru: &CachedEru,
    backlog: bool,
    next: Option<DateTime<Utc>>,
    restart: Option<DateTime<Utc>>,
) -> Action {
    if backlog {
        return Action::requeue(StdDuration::from_millis(10));
    }
    let at = match (next, restart) {
        (Some(n), Some(d)) => Some(n.min(d)),
        (n, d) => n.or(d),
    };
    let (namespace, name) = (eru.namespace().unwrap_or_default(), eru.name_any());
    match at.map(|t| wakes::wake(Utc::now(), t)) {
        Some(Wake::Far(at)) => {
            context.far.wake_at(&namespace, &name, at);
            Action::await_change()
        }
        Some(Wake::Requeue(after)) => {
            context.far.cancel(&namespace, &name);
            Action::requeue(after + SLOT_MARGIN)
        }
        None => {
            context.far.cancel(&namespace, &name);
            Action::await_change()
        }
    }
}

/// Whether `eru` left the cache (or was replaced by a namesake) while its pass ran.
fn deleted_meanwhile(context: &EruContext, eru: &CachedEru) -> bool {
    context
        .erus
        .get(&ObjectRef::from_obj(eru))
        .is_none_or(|cached| cached.uid() != eru.uid())
}

/// Forgets a deleted Eru: its status memo, phase, per-Eru series and place in the fleet.
fn forget(context: &EruContext, eru: &CachedEru) {
    context.fleet.leave(&eru.uid().unwrap_or_default(), Utc::now());
    context
        .far
        .cancel(&eru.namespace().unwrap_or_default(), &eru.name_any());
    context.ctx.forget(KIND, eru);
    context
        .metrics
        .forget(&eru.namespace().unwrap_or_default(), &eru.name_any());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(generation: i64, observed: Option<i64>, deleting: bool) -> Deployment {
        let deleted = deleting.then_some("2026-11-23T03:00:00Z");
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "ns", "generation": generation, "deletionTimestamp": deleted},
            "status": {"observedGeneration": observed}
        }))
        .unwrap()
    }

    #[test]
    fn only_changes_the_deployment_controller_has_not_seen_are_skipped() {
        assert!(
            deployment(2, Some(1), false).awaits_controller(),
            "the echo of a restart patch"
        );
        assert!(
            !deployment(2, Some(2), false).awaits_controller(),
            "observed: a rollout may be done"
        );
        assert!(
            !deployment(1, None, false).awaits_controller(),
            "new: an Eru may wait for it"
        );
        assert!(!deployment(2, Some(1), true).awaits_controller(), "being deleted");
    }
}
