//! The Eru controller and its pass, one step per module:
//! [`observe`](super::observe) (watch caches and journal) → [`plan`](crate::eru::core::plan) (the
//! machine; pure) → [`commit`](super::commit) (transitions and records, one transaction) →
//! [`act`](super::act) (restart patch, fleet place, Events; results fed back to the plan) →
//! [`status`](super::status) → requeue at the plan's one wake-up instant.

use std::{future::Future, sync::Arc};

use chrono::{DateTime, Utc};
use futures::{
    StreamExt,
    stream::{BoxStream, SelectAll},
};
use kube::{
    Resource, ResourceExt,
    runtime::{controller::Action, reflector::ObjectRef, watcher},
};
use tokio::sync::watch;

use super::{
    act::act,
    commit,
    context::{EruContext, Holds, Options, TargetCaches, Workloads},
    deleted,
    observe::{Known, observe},
    status::status,
};
use crate::eru::{
    CachedEru, KIND,
    core::{
        messages::EruAction,
        pause::RESUME_ANNOTATION,
        plan::{Fed, Plan, plan},
        run::RUN_ANNOTATION,
    },
    fleet::Fleet,
    gates::Gatekeeper,
    index::Targets,
    metrics::EruMetrics,
    workloads::Workload,
};
use crate::{
    Result,
    journal::{EruSummary, counting_reads},
    machine::Phase,
    runtime::{
        Context,
        pass::{self, Steps},
        runner, shutdown_requested,
        status::status_digest,
        wakes::Wakes,
        watch::{Shared, key_of, only_changes},
    },
};

/// Wake-up margin after a slot: the timer compares milliseconds, truncated, so an instant with
/// a fraction of a millisecond could wake its Eru just before it; with the margin the slot is
/// due when the pass reads the clock.
const SLOT_MARGIN: chrono::Duration = chrono::Duration::milliseconds(2);

/// How soon a pass that left a backlog (more records than one pass journals) comes back.
const BACKLOG: std::time::Duration = std::time::Duration::from_millis(10);

/// Builds the Eru controller on the shared Eru and workload caches; returns it and a future that
/// resolves once its caches synced. Erus are reconciled when their spec or their run-now token
/// changes (not when the operator writes their status), when a Deployment, StatefulSet or
/// DaemonSet they target changes, when the fleet gives them a place, at the wake-up their last
/// pass set (a slot, a retry, a rollout's deadline), and all of them when this process becomes
/// the leader. The controller runs on the runtime's own [`runner`].
pub fn controller(
    ctx: Arc<Context>,
    shutdown: watch::Receiver<bool>,
    erus: &mut Shared<CachedEru>,
    workloads: Workloads<'_>,
    options: Options,
    holds: Holds,
) -> (impl Future<Output = ()> + use<>, impl Future<Output = ()> + use<>) {
    let (fleet, freed) = Fleet::new(options.limits);
    let wakes = Wakes::default();
    let freed = futures::stream::unfold(freed, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) });
    let targets = Targets::default();
    let index = targets.clone();
    erus.on_event(move |event| index.observe(event));
    let memo = ctx.clone();
    erus.on_stored(move |event| {
        if let watcher::Event::Apply(eru) | watcher::Event::InitApply(eru) = event {
            let meta = eru.meta();
            memo.statuses.cache_shows(
                meta.uid.as_deref().unwrap_or_default(),
                meta.resource_version.as_deref().unwrap_or_default(),
                eru.status_digest(),
            );
        }
    });
    let gone = erus.deletions();
    let triggers = triggers(&ctx, erus, &workloads, &targets, freed.boxed());
    let target_caches = TargetCaches::of(&workloads);
    let synced = {
        let (erus_synced, targets_synced) = (erus.synced.clone(), target_caches.clone());
        async move {
            futures::join!(erus_synced.wait(), targets_synced.synced());
        }
    };
    let context = Arc::new(EruContext {
        metrics: EruMetrics::register(&ctx.metrics),
        gatekeeper: Gatekeeper::new(
            ctx.client.clone(),
            ctx.settings.namespace.clone(),
            options.gates.clone(),
            &ctx.metrics,
        ),
        holds,
        ctx,
        erus: erus.store.clone(),
        targets: target_caches,
        fleet,
        fleet_loaded: Default::default(),
        first_read: Default::default(),
        journal_memo: Default::default(),
        wakes: wakes.clone(),
        options: options.clone(),
    });
    let reload = options
        .blackouts
        .clone()
        .follow(shutdown_requested(shutdown.clone()));
    let deletions = deleted::follow(context.clone(), erus.store.clone(), erus.synced.clone(), gone);
    let pacer = pacer(context.clone(), shutdown.clone());
    context.ctx.metrics.init_kind(KIND);
    let run = {
        let erus_synced = erus.synced.clone();
        runner::run(
            erus.store.clone(),
            wakes,
            triggers,
            usize::from(context.ctx.settings.concurrency),
            async move { erus_synced.wait().await },
            shutdown_requested(shutdown.clone()),
            move |eru| one_pass(eru, context.clone()),
        )
    };
    (
        async move {
            futures::join!(run, deletions, reload, pacer);
        },
        synced,
    )
}

/// What brings an Eru to its pass, but for its own wake-ups: a change of its spec, run-now token
/// or resume annotation; a change of a workload it targets; a place the fleet freed for it; and
/// every Eru when this process becomes the leader.
fn triggers(
    ctx: &Context,
    erus: &mut Shared<CachedEru>,
    workloads: &Workloads<'_>,
    targets: &Targets,
    freed: BoxStream<'static, ObjectRef<CachedEru>>,
) -> SelectAll<BoxStream<'static, ObjectRef<CachedEru>>> {
    let all_of = erus.store.clone();
    futures::stream::select_all([
        only_changes(erus.subscribe(), spec_or_run)
            .map(|eru| key_of(eru.as_ref()))
            .boxed(),
        erus_of(seen(workloads.deployments), targets),
        erus_of(seen(workloads.statefulsets), targets),
        erus_of(seen(workloads.daemonsets), targets),
        freed,
        (ctx.leadership.promoted())
            .flat_map(move |()| {
                let all = all_of
                    .state()
                    .iter()
                    .map(|eru| key_of(eru.as_ref()))
                    .collect::<Vec<_>>();
                futures::stream::iter(all)
            })
            .boxed(),
    ])
}

/// What a change of an Eru must change to trigger a pass: its generation (a spec change), its
/// run-now token or its resume annotation (annotations: no new generation).
fn spec_or_run(eru: &CachedEru) -> u64 {
    let generation = eru.metadata.generation.unwrap_or(0) as u64;
    let annotation = |key: &str| (eru.metadata.annotations.as_ref()).and_then(|a| a.get(key));
    let run = annotation(RUN_ANNOTATION).map_or(0, |token| crate::memory::key_hash(token).rotate_left(1));
    let resume =
        annotation(RESUME_ANNOTATION).map_or(0, |value| crate::memory::key_hash(value).rotate_left(2));
    generation ^ run ^ resume
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

/// The Erus that target each changed workload of kind `K`, from the index.
fn erus_of<K: Workload>(
    changes: impl futures::Stream<Item = Arc<K>> + Send + 'static,
    targets: &Targets,
) -> BoxStream<'static, ObjectRef<CachedEru>> {
    let targets = targets.clone();
    changes
        .flat_map(move |workload| {
            futures::stream::iter(targets.erus_of(
                &workload.namespace().unwrap_or_default(),
                K::KIND,
                &workload.name_any(),
            ))
        })
        .boxed()
}

/// One Eru pass as the runner runs it ([`runner::guarded`]: the leader's only, instrumented, a
/// failed one passed again after the retry delay). A pass that ends sets its Eru's next wake-up
/// itself ([`requeue`]), so the pass's `Action` says nothing more.
async fn one_pass(eru: Arc<CachedEru>, context: Arc<EruContext>) {
    let (namespace, name) = (eru.namespace().unwrap_or_default(), eru.name_any());
    let pass = async { pass::run(eru.clone(), context.clone()).await.map(|_| None) };
    runner::guarded(&context.ctx, KIND, &context.wakes, (&namespace, &name), pass).await;
}

/// One Eru pass as the runtime's steps carry it: the core's plan, and the status the pass
/// started from (for the status step).
pub struct EruPass {
    plan: Plan,
    known: Known,
    /// The journal reads of the pass so far (`eru_pass_journal_reads`).
    reads: u32,
    /// Something of the pass was committed to the journal.
    committed: bool,
}

/// The Eru's steps of the runtime's pass ([`pass::run`]): observe → plan (the fleet's answer
/// fed back) → commit → act (the patch's result fed back, then committed) → status → requeue.
impl Steps for EruContext {
    type Object = CachedEru;
    type Plan = EruPass;
    type Action = EruAction;
    type Fed = Fed;

    async fn plan(&self, eru: &Arc<CachedEru>) -> Result<Option<EruPass>> {
        // an unsynced cache would show the target as missing and abandon a restart in flight
        self.targets.synced().await;
        if eru.meta().deletion_timestamp.is_some() {
            forget(self, eru);
            return Ok(None);
        }
        let (namespace, name) = (eru.namespace().unwrap_or_default(), eru.name_any());
        self.metrics.init(&namespace, &name);
        restore_fleet(self).await?;
        read_first(self).await;
        let (observed, reads) = counting_reads(observe(self, eru, Utc::now())).await;
        let (observed, known) = observed?;
        Ok(Some(EruPass {
            plan: plan(observed),
            known,
            reads,
            committed: false,
        }))
    }

    async fn commit(&self, eru: &Arc<CachedEru>, pass: &mut EruPass) -> Result<Vec<EruAction>> {
        let decided = pass.plan.take();
        if !(decided.records.is_empty() && decided.transitions.is_empty()) {
            // before the write: a pass that fails after it must not leave the memo behind
            self.journal_memo.forget(&eru.uid().unwrap_or_default());
            pass.committed = true;
        }
        let (committed, reads) = counting_reads(commit::commit(self, eru, &decided, pass.plan.at())).await;
        pass.reads += reads;
        committed?;
        Ok(decided.actions)
    }

    async fn act(&self, eru: &Arc<CachedEru>, pass: &EruPass, actions: Vec<EruAction>) -> Result<Vec<Fed>> {
        let mut results = Vec::new();
        for action in &actions {
            results.extend(act(self, eru, &pass.plan.state, action).await);
        }
        Ok(results)
    }

    fn after(pass: &mut EruPass, fed: Fed) {
        pass.plan.after(fed);
    }

    async fn finish(&self, eru: &Arc<CachedEru>, pass: EruPass) -> Result<Action> {
        let EruPass {
            plan,
            mut known,
            reads,
            committed,
        } = pass;
        let uid = eru.uid().unwrap_or_default();
        keep_or_free_place(self, eru, &plan);
        remember_hold(self, eru, &plan);
        (self.metrics).set_next(
            &eru.namespace().unwrap_or_default(),
            &eru.name_any(),
            plan.next_restart(),
        );
        (self.metrics).set_rollout(&eru.namespace().unwrap_or_default(), &eru.name_any(), &plan.state);
        self.ctx.metrics.set_phase(KIND, &uid, plan.state.phase());
        if deleted_meanwhile(self, eru) {
            // the deletion was handled while this pass ran; undo what the pass set again
            forget(self, eru);
            deleted::abandon_open(self, &uid).await;
            return Ok(Action::await_change());
        }
        let first = known.first.take();
        let status = finished_status(self, eru, &plan, &known, (committed, first), reads).await?;
        if known.digest != Some(status_digest(&status)) {
            self.ctx.write_status(eru.as_ref(), &status);
        }
        Ok(requeue(self, eru, plan.backlog, plan.wake()))
    }
}

/// The status a pass ends with. The journal decides what is new (a replayed record is not), so
/// its fields of history are read from it, unless nothing of the Eru's journal changed since the
/// status the pass started from was computed ([`JournalMemo`](super::journal_memo::JournalMemo)).
/// A term's first pass that committed nothing has the summary from the term's first reads
/// (`first`) and reads only its recent records. Observes the pass's journal reads.
async fn finished_status(
    context: &EruContext,
    eru: &CachedEru,
    plan: &Plan,
    known: &Known,
    (committed, first): (bool, Option<EruSummary>),
    reads: u32,
) -> Result<crate::eru::EruStatus> {
    let uid = eru.uid().unwrap_or_default();
    let memo = &context.journal_memo;
    let capped = !context.fleet.limits().unlimited();
    let journal = &context.ctx.journal;
    let (summary, summary_reads) = match first.filter(|_| !committed) {
        _ if !committed && memo.current(&uid, known.digest) => (None, 0),
        Some(first) => {
            let (recent, reads) = counting_reads(journal.recent(&uid)).await;
            let summary = EruSummary {
                recent: recent?,
                ..first
            };
            (Some(summary), reads)
        }
        None => {
            let (summary, reads) = counting_reads(journal.eru_summary(&uid)).await;
            (Some(summary?), reads)
        }
    };
    let status = status(eru, plan, known, summary.as_ref(), capped);
    let no_open_run = !committed && plan.observed().journal.open_run.is_none();
    memo.remember(&uid, status_digest(&status), no_open_run);
    context
        .metrics
        .pass_reads
        .observe(f64::from(reads + summary_reads));
    Ok(status)
}

/// The fleet's pacer (nothing without a restart pace) until shutdown, its gauges set each round.
async fn pacer(context: Arc<EruContext>, shutdown: watch::Receiver<bool>) {
    let gauges = (context.options.limits.pace)
        .map(|_| crate::eru::metrics::PaceMetrics::register(&context.ctx.metrics));
    let report = |rate, why| gauges.iter().for_each(|g| g.set(rate, why));
    tokio::select! {
        _ = context.fleet.pace(report) => {}
        _ = shutdown_requested(shutdown) => {}
    }
}

/// Counts the restarts in flight from the journal, once, before the first pass gives a place.
async fn restore_fleet(context: &EruContext) -> Result<()> {
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
            for open in context.ctx.journal.open_manual_runs(namespace).await? {
                context.fleet.hold(&open.uid, &open.namespace);
            }
            Ok::<_, crate::Error>(())
        })
        .await?;
    Ok(())
}

/// Reads the journal rows of every Eru the cache holds at once, at the term's first pass (the
/// others wait for it; the cache has synced): each Eru's first pass of the term takes its own
/// instead of reading them ([`JournalMemo`](super::journal_memo::JournalMemo)). If the read
/// fails, each pass reads its own, as any later pass does.
async fn read_first(context: &EruContext) {
    context
        .first_read
        .get_or_init(|| async {
            let started = std::time::Instant::now();
            let namespace = context.ctx.settings.namespace.as_deref();
            // the Erus the cache holds (an Eru's passes are its rows' only writers); one deleted
            // meanwhile is dropped when the reads are kept, or by its deletion after that
            let cached = |ledger: &crate::journal::LedgerRow| {
                (context.erus.find(&ledger.namespace, &ledger.name))
                    .is_some_and(|eru| eru.uid().as_deref() == Some(ledger.uid.as_str()))
            };
            let reads = context.ctx.journal.first_reads(namespace, cached).await;
            match reads {
                Ok(reads) => {
                    let kept = context.journal_memo.keep_first_reads(reads, cached);
                    let elapsed_ms = started.elapsed().as_millis();
                    tracing::info!(erus = kept, elapsed_ms, "read the Erus' journal rows at once");
                }
                Err(e) => tracing::warn!(error = %e, "cannot read the Erus' journal rows at once; each pass reads its own"),
            }
        })
        .await;
}

/// Keeps the Eru's place while a restart is in flight; otherwise, unless its slot waits for
/// one, frees its place (or its turn) for the next in line.
fn keep_or_free_place(context: &EruContext, eru: &CachedEru, plan: &Plan) {
    let uid = eru.uid().unwrap_or_default();
    if plan.state.in_flight() {
        context.fleet.hold(&uid, &eru.namespace().unwrap_or_default());
    } else if plan.queued.is_none() {
        context.fleet.leave(&uid, Utc::now());
    }
    let (waiting, in_flight) = context.fleet.sizes();
    context.metrics.set_fleet(waiting, in_flight);
}

/// Remembers the slot a health gate holds (or forgets it), and sets the held and paused metrics.
fn remember_hold(context: &EruContext, eru: &CachedEru, plan: &Plan) {
    let uid = eru.uid().unwrap_or_default();
    let (namespace, name) = (eru.namespace().unwrap_or_default(), eru.name_any());
    let held = context.holds.set(&uid, plan.held.as_ref());
    (context.metrics).set_held(&namespace, &name, plan.held.as_ref().map(|h| h.since), held);
    (context.metrics).set_paused(&namespace, &name, plan.paused().map(|p| p.since));
}

/// When to come back: at once with a backlog; else at the next slot, or when the restart in
/// flight needs a look (a retry, its deadline, its rollout's timeout: no Deployment event may come
/// when a rollout stalls) if that is sooner. The wake-up waits in the controller's timer
/// ([`crate::runtime::wakes`]); the runner ignores the returned `Action`.
fn requeue(context: &EruContext, eru: &CachedEru, backlog: bool, at: Option<DateTime<Utc>>) -> Action {
    let (namespace, name) = (eru.namespace().unwrap_or_default(), eru.name_any());
    match (backlog, at) {
        (true, _) => context.wakes.wake_in(&namespace, &name, BACKLOG),
        (false, Some(at)) => context.wakes.wake_at(&namespace, &name, at + SLOT_MARGIN),
        (false, None) => context.wakes.cancel(&namespace, &name),
    }
    Action::await_change()
}

/// Whether `eru` left the cache (or was replaced by a namesake) while its pass ran.
fn deleted_meanwhile(context: &EruContext, eru: &CachedEru) -> bool {
    context
        .erus
        .get(&ObjectRef::from_obj(eru))
        .is_none_or(|cached| cached.uid() != eru.uid())
}

/// Forgets a deleted Eru: its status memo, phase, per-Eru series, place in the fleet and hold.
fn forget(context: &EruContext, eru: &CachedEru) {
    context.fleet.leave(&eru.uid().unwrap_or_default(), Utc::now());
    context.journal_memo.forget(&eru.uid().unwrap_or_default());
    let held = context.holds.set(&eru.uid().unwrap_or_default(), None);
    (context.metrics).set_held(&eru.namespace().unwrap_or_default(), &eru.name_any(), None, held);
    context
        .wakes
        .cancel(&eru.namespace().unwrap_or_default(), &eru.name_any());
    context.ctx.forget(KIND, eru);
    context
        .metrics
        .forget(&eru.namespace().unwrap_or_default(), &eru.name_any());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::lean::Deployment;

    /// What triggers a pass (mutation: the resume annotation left out, so a resume waits for the
    /// Eru's next slot, a day for a daily one): a new generation, a run-now token, a resume value.
    #[test]
    fn a_pass_is_triggered_by_the_spec_a_run_now_token_or_a_resume() {
        let eru = |generation: i64, annotations: serde_json::Value| -> CachedEru {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "web", "namespace": "ns", "generation": generation,
                             "annotations": annotations},
                "spec": {"schedule": "0 3 * * *", "target": {"kind": "Deployment", "name": "web"}}
            }))
            .unwrap()
        };
        let plain = spec_or_run(&eru(1, serde_json::json!({})));
        let keys = [
            spec_or_run(&eru(2, serde_json::json!({}))),
            spec_or_run(&eru(1, serde_json::json!({RUN_ANNOTATION: "a"}))),
            spec_or_run(&eru(
                1,
                serde_json::json!({RESUME_ANNOTATION: "2026-11-22T03:10:00Z"}),
            )),
            spec_or_run(&eru(
                1,
                serde_json::json!({RESUME_ANNOTATION: "2026-11-22T03:20:00Z"}),
            )),
            spec_or_run(&eru(
                1,
                serde_json::json!({RUN_ANNOTATION: "a", RESUME_ANNOTATION: "2026-11-22T03:10:00Z"}),
            )),
        ];
        for (i, key) in keys.iter().enumerate() {
            assert_ne!(*key, plain, "{i}");
            assert!(keys[..i].iter().all(|k| k != key), "{i}");
        }
        assert_eq!(spec_or_run(&eru(1, serde_json::json!({"other": "x"}))), plain);
    }

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
