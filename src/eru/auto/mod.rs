//! Erus created from workload annotations: a Deployment, StatefulSet or DaemonSet annotated
//! `mtsre.meitu.com/eru: "true"` asks for an Eru named after it, owned by it and labelled as managed
//! by the operator; its schedule and time zone come from `mtsre.meitu.com/eru-schedule` and
//! `mtsre.meitu.com/eru-timezone` (or `--default-schedule`); `mtsre.meitu.com/eru-suspend: "true"`
//! suspends it, and `mtsre.meitu.com/eru-suspend-note` says why; `mtsre.meitu.com/eru-pause-after`
//! gives it a failure policy (`pauseAfter`: it pauses itself after that many failed restarts in
//! a row, and is resumed like any Eru). Removing the annotation, or any
//! value but "true", deletes that Eru. A user-made Eru of the same name is never touched: the
//! conflict is reported with an Event. Such Events (and `EruInvalid`, for annotations the CRD
//! schema refuses) are emitted when the problem appears or changes, not on every update of the
//! workload's status; a refused apply is not retried until the annotations change.
//!
//! **Names.** Workloads of different kinds may share a name (a Deployment `web` and a StatefulSet
//! `web`). The first to ask gets the Eru `web`; a later one, finding `web` to be another
//! workload's automatic Eru, gets `web-statefulset` (`web-deployment`, `web-daemonset`: its kind,
//! lower-cased). An automatic Eru keeps its name for as long as it exists: one that got the suffix
//! keeps it after `web` is freed, so an Eru (and its history) is never renamed. An Eru is created
//! only after the API server (not just the cache, which may lag) said that name is free, so one
//! workload's apply never takes over another's Eru.

use std::{
    collections::{BTreeMap, HashMap},
    future::Future,
    hash::{DefaultHasher, Hash, Hasher},
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::{
    StreamExt,
    stream::{BoxStream, SelectAll},
};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, ObjectMeta, Patch, PatchParams},
    runtime::{events::EventType, reflector::ObjectRef},
};
use tokio::sync::{mpsc, watch};
use tracing::info;

use super::{
    AUTO_ANNOTATION, AUTO_PAUSE_AFTER_ANNOTATION, AUTO_SCHEDULE_ANNOTATION, AUTO_SUSPEND_ANNOTATION,
    AUTO_SUSPEND_NOTE_ANNOTATION, AUTO_TIMEZONE_ANNOTATION, CachedEru, DEFAULT_STARTING_DEADLINE_SECONDS,
    Eru, EruSpec, FailurePolicy, SUSPEND_NOTE_MAX, Target, TargetKind, pass::context::Workloads,
    workloads::Workload,
};
use crate::{
    Result,
    runtime::{
        Context, MANAGER,
        cache::Cache,
        runner, shutdown_requested,
        wakes::Wakes,
        watch::{Shared, Synced, key_of, only_changes, relevant_changes},
    },
};

/// Label marking Erus the operator created.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", MANAGER);

/// What to do about one workload's automatic Eru.
#[derive(Clone, Debug, PartialEq)]
pub enum AutoAction {
    /// Create or update the Eru.
    Apply(Box<Eru>),
    /// Delete the Eru the operator created.
    Delete,
    /// An Eru of that name exists and is not ours: report, touch nothing.
    Conflict(String),
    Nothing,
}

/// Whether `eru` is an automatic Eru (created by the operator).
fn is_automatic(eru: &CachedEru) -> bool {
    eru.labels().get(MANAGED_BY.0).map(String::as_str) == Some(MANAGED_BY.1)
}

/// Whether `workload` has any automatic-Eru annotation (`mtsre.meitu.com/eru*`).
fn annotated(workload: &impl Resource) -> bool {
    workload
        .annotations()
        .keys()
        .any(|k| k.starts_with(AUTO_ANNOTATION))
}

/// Whether `eru` is the automatic Eru of `workload`.
fn is_ours(eru: &CachedEru, workload: &impl Resource) -> bool {
    is_automatic(eru)
        && eru
            .owner_references()
            .iter()
            .any(|o| Some(&o.uid) == workload.meta().uid.as_ref())
}

/// The name an automatic Eru of a `kind` workload takes when the workload's own name is taken
/// by another workload's automatic Eru.
pub fn suffixed(kind: TargetKind, name: &str) -> String {
    format!("{name}-{}", kind.as_str().to_lowercase())
}

/// The name of `workload`'s automatic Eru, given the Erus of its namespace (`existing`): the one it
/// has, else its own name unless another workload's automatic Eru has it, else
/// [`suffixed`].
pub fn eru_name<K: Workload>(workload: &K, existing: impl Fn(&str) -> Option<Arc<CachedEru>>) -> String {
    let name = workload.name_any();
    let other = suffixed(K::KIND, &name);
    let own = |n: &str| existing(n).is_some_and(|eru| is_ours(&eru, workload));
    let taken = || existing(&name).is_some_and(|eru| is_automatic(&eru));
    if !own(&name) && (own(&other) || taken()) {
        other
    } else {
        name
    }
}

/// The automatic Eru `name` a workload asks for.
pub fn desired<K: Workload>(workload: &K, name: &str, default_schedule: &str) -> Eru {
    let annotations = workload.annotations();
    let spec = EruSpec {
        schedule: annotations
            .get(AUTO_SCHEDULE_ANNOTATION)
            .cloned()
            .unwrap_or_else(|| default_schedule.to_string()),
        time_zone: annotations.get(AUTO_TIMEZONE_ANNOTATION).cloned(),
        target: Target {
            kind: K::KIND,
            name: workload.name_any(),
        },
        suspend: annotations.get(AUTO_SUSPEND_ANNOTATION).map(String::as_str) == Some("true"),
        suspend_note: annotations
            .get(AUTO_SUSPEND_NOTE_ANNOTATION)
            .map(|note| note.chars().take(SUSPEND_NOTE_MAX).collect::<String>())
            .filter(|note| !note.is_empty()),
        starting_deadline_seconds: DEFAULT_STARTING_DEADLINE_SECONDS,
        rollout_timeout_seconds: None,
        jitter_seconds: None,
        blackouts: Vec::new(),
        dry_run: false,
        gates: None,
        need: None,
        silence: None,
        // a value that is no whole number is 0, which the schema refuses (EruInvalid)
        failure_policy: annotations
            .get(AUTO_PAUSE_AFTER_ANNOTATION)
            .map(|n| FailurePolicy {
                pause_after: n.trim().parse().unwrap_or(0),
            }),
    };
    let mut eru = Eru::new(name, spec);
    eru.metadata = ObjectMeta {
        name: Some(name.to_string()),
        namespace: workload.namespace(),
        labels: Some(BTreeMap::from([(
            MANAGED_BY.0.to_string(),
            MANAGED_BY.1.to_string(),
        )])),
        owner_references: workload.controller_owner_ref(&()).map(|o| vec![o]),
        ..ObjectMeta::default()
    };
    eru
}

/// Decides what to do for `workload`, given the Erus of its namespace (`existing`): the name of
/// its automatic Eru ([`eru_name`]) and the action on it.
pub fn decide<K: Workload>(
    workload: &K,
    existing: impl Fn(&str) -> Option<Arc<CachedEru>>,
    default_schedule: &str,
) -> (String, AutoAction) {
    let wanted = workload.annotations().get(AUTO_ANNOTATION).map(String::as_str) == Some("true");
    let name = eru_name(workload, &existing);
    let action = match existing(&name) {
        Some(eru) if !is_ours(&eru, workload) => {
            if wanted {
                let whose = if is_automatic(&eru) {
                    "is another workload's automatic Eru"
                } else {
                    "is not managed by the operator"
                };
                AutoAction::Conflict(format!(
                    "an Eru named {name} already exists and {whose}; it is left as it is"
                ))
            } else {
                AutoAction::Nothing
            }
        }
        Some(eru) if wanted => {
            let want = desired(workload, &name, default_schedule);
            if eru.spec == want.spec {
                AutoAction::Nothing
            } else {
                AutoAction::Apply(Box::new(want))
            }
        }
        Some(_) => AutoAction::Delete,
        None if wanted => AutoAction::Apply(Box::new(desired(workload, &name, default_schedule))),
        None => AutoAction::Nothing,
    };
    (name, action)
}

struct AutoContext {
    ctx: Arc<Context>,
    erus: Cache<CachedEru>,
    erus_synced: Synced,
    /// Per workload uid, the problem last reported (a conflict, or the apply the API refused):
    /// reported again only when it changes. Entries exist only while a problem does.
    reported: Mutex<HashMap<String, String>>,
}

impl AutoContext {
    /// Records `problem` for `workload`; true if it differs from the one last reported.
    fn report(&self, workload: &impl Resource, problem: String) -> bool {
        let uid = workload.meta().uid.clone().unwrap_or_default();
        let mut reported = self.reported.lock().expect("reported lock");
        reported.insert(uid, problem.clone()).as_ref() != Some(&problem)
    }

    /// Forgets what was reported for `workload` (the problem is gone).
    fn resolved(&self, workload: &impl Resource) {
        let uid = workload.meta().uid.clone().unwrap_or_default();
        self.reported.lock().expect("reported lock").remove(&uid);
    }
}

/// The controllers that keep automatic Erus in line with the annotations of Deployments,
/// StatefulSets and DaemonSets, on the shared workload and Eru caches (one controller per kind,
/// one context).
pub fn controller(
    ctx: Arc<Context>,
    shutdown: watch::Receiver<bool>,
    workloads: Workloads<'_>,
    erus: &mut Shared<CachedEru>,
) -> (impl Future<Output = ()> + use<>, impl Future<Output = ()> + use<>) {
    let context = Arc::new(AutoContext {
        ctx,
        erus: erus.store.clone(),
        erus_synced: erus.synced.clone(),
        reported: Mutex::default(),
    });
    // one filter of the Erus' spec changes (a map of every Eru's generation), told to all three
    let told: [_; 3] = std::array::from_fn(|_| mpsc::unbounded_channel::<Arc<CachedEru>>());
    let [
        (to_deployments, for_deployments),
        (to_statefulsets, for_statefulsets),
        (to_daemonsets, for_daemonsets),
    ] = told;
    let edits = only_changes(erus.subscribe(), |eru: &CachedEru| {
        eru.metadata.generation.unwrap_or(0) as u64
    })
    .for_each(move |eru| {
        for tx in [&to_deployments, &to_statefulsets, &to_daemonsets] {
            let _ = tx.send(eru.clone()); // a controller gone (shutdown) takes nothing
        }
        futures::future::ready(())
    });
    let (deployments, deployments_synced) = controller_of(
        context.clone(),
        shutdown.clone(),
        workloads.deployments,
        erus,
        for_deployments,
    );
    let (statefulsets, statefulsets_synced) = controller_of(
        context.clone(),
        shutdown.clone(),
        workloads.statefulsets,
        erus,
        for_statefulsets,
    );
    let (daemonsets, daemonsets_synced) =
        controller_of(context, shutdown, workloads.daemonsets, erus, for_daemonsets);
    (
        async move {
            futures::join!(deployments, statefulsets, daemonsets, edits);
        },
        async move {
            futures::join!(deployments_synced, statefulsets_synced, daemonsets_synced);
        },
    )
}

/// The workloads of kind `K` whose automatic Eru may be `eru`: the one named like it, and the one
/// it is [`suffixed`] for.
fn named_by<K: Workload>(eru: &str, namespace: &str) -> Vec<ObjectRef<K>> {
    let suffix = format!("-{}", K::KIND.as_str().to_lowercase());
    std::iter::once(eru)
        .chain(eru.strip_suffix(&suffix).filter(|n| !n.is_empty()))
        .map(|name| ObjectRef::new(name).within(namespace))
        .collect()
}

/// The controller of the automatic Erus of kind `K`, on the runtime's [`runner`]. A workload is
/// reconciled when its `mtsre.meitu.com/eru*` annotations change (not on every status update),
/// when an Eru that may be its automatic one ([`named_by`]) is edited or deleted, and every
/// workload when this process becomes the leader; workloads with neither such annotations nor an
/// automatic Eru are otherwise never looked at.
fn controller_of<K: Workload>(
    context: Arc<AutoContext>,
    shutdown: watch::Receiver<bool>,
    workloads: &Shared<K>,
    erus: &mut Shared<CachedEru>,
    edited: mpsc::UnboundedReceiver<Arc<CachedEru>>,
) -> (
    impl Future<Output = ()> + use<K>,
    impl Future<Output = ()> + use<K>,
) {
    let triggers = triggers(&context.ctx, workloads, erus, edited);
    let (workloads_synced, erus_synced) = (workloads.synced.clone(), erus.synced.clone());
    let ready = {
        let workloads_synced = workloads_synced.clone();
        async move { workloads_synced.wait().await }
    };
    context.ctx.metrics.init_kind(KIND);
    let wakes = Wakes::default();
    let run = runner::run(
        workloads.store.clone(),
        wakes.clone(),
        triggers,
        usize::from(context.ctx.settings.concurrency),
        ready,
        shutdown_requested(shutdown),
        move |workload: Arc<K>| {
            let (context, wakes) = (context.clone(), wakes.clone());
            async move {
                let (namespace, name) = (workload.namespace().unwrap_or_default(), workload.name_any());
                // this pass makes a retry still waiting for the workload moot (kube's scheduler
                // dropped it too); a failure sets a new one
                wakes.cancel(&namespace, &name);
                let pass = reconcile(workload, context.clone());
                runner::guarded(&context.ctx, KIND, &wakes, (&namespace, &name), pass).await;
            }
        },
    );
    let synced = async move {
        futures::join!(workloads_synced.wait(), erus_synced.wait());
    };
    (run, synced)
}

/// What brings a workload of kind `K` to its pass ([`controller_of`]); `edited` are the Erus whose
/// spec changed.
fn triggers<K: Workload>(
    ctx: &Context,
    workloads: &Shared<K>,
    erus: &mut Shared<CachedEru>,
    edited: mpsc::UnboundedReceiver<Arc<CachedEru>>,
) -> SelectAll<BoxStream<'static, ObjectRef<K>>> {
    // A workload is looked at only when it has automatic-Eru annotations or an automatic Eru:
    // with thousands of plain workloads a start costs no pass for each.
    let eru_cache = erus.store.clone();
    let relevant = relevant_changes(workloads.subscribe(), move |w: &K| {
        let has_eru = || {
            let namespace = w.namespace().unwrap_or_default();
            [w.name_any(), suffixed(K::KIND, &w.name_any())]
                .iter()
                .any(|name| {
                    eru_cache
                        .find(&namespace, name)
                        .is_some_and(|eru| is_ours(&eru, w))
                })
        };
        (annotated(w) || has_eru()).then(|| {
            let mut hasher = DefaultHasher::new();
            w.annotations()
                .iter()
                .filter(|(k, _)| k.starts_with(AUTO_ANNOTATION))
                .for_each(|entry| entry.hash(&mut hasher));
            hasher.finish()
        })
    });
    let spec_changes =
        futures::stream::unfold(edited, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) });
    // of the workloads an Eru may belong to, those that exist and to which it matters: an
    // automatic Eru to every one (it may be theirs), another Eru to annotated ones (a conflict)
    let existing = |store: Cache<K>| {
        move |refs: Vec<ObjectRef<K>>, automatic: bool| -> Vec<ObjectRef<K>> {
            refs.into_iter()
                .filter(|r| store.get(r).is_some_and(|w| automatic || annotated(w.as_ref())))
                .collect()
        }
    };
    // a deleted Eru asks the annotated workloads it may have belonged to again
    let in_store = existing(workloads.store.clone());
    let deleted = futures::stream::unfold(erus.deletions(), |mut gone| async move {
        let g = gone.recv().await?;
        Some((named_by::<K>(&g.name, &g.namespace), gone))
    })
    .flat_map(move |refs| futures::stream::iter(in_store(refs, false)));
    let in_store = existing(workloads.store.clone());
    let edited = spec_changes.flat_map(move |eru| {
        futures::stream::iter(in_store(
            named_by::<K>(&eru.name_any(), &eru.namespace().unwrap_or_default()),
            is_automatic(&eru),
        ))
    });
    let all_of = workloads.store.clone();
    let promoted = ctx.leadership.promoted().flat_map(move |()| {
        futures::stream::iter(
            all_of
                .state()
                .iter()
                .map(|w| key_of(w.as_ref()))
                .collect::<Vec<_>>(),
        )
    });
    futures::stream::select_all([
        relevant.map(|w| key_of(w.as_ref())).boxed(),
        edited.boxed(),
        deleted.boxed(),
        promoted.boxed(),
    ])
}

/// The kind the automatic-Eru controllers' passes are counted under (`eru_reconcile_*`).
const KIND: &str = "EruAutoCreate";

/// Returns how soon the workload must be looked at again, if it must.
async fn reconcile<K: Workload>(workload: Arc<K>, context: Arc<AutoContext>) -> Result<Option<Duration>> {
    let ctx = &context.ctx;
    // an unsynced Eru cache would hide a user's Eru, which must never be overwritten
    context.erus_synced.wait().await;
    if workload.meta().deletion_timestamp.is_some() {
        context.resolved(workload.as_ref());
        return Ok(None); // its Eru goes with it (owner reference)
    }
    let namespace = workload.namespace().unwrap_or_default();
    let workload_name = workload.name_any();
    let kind = K::KIND.as_str();
    let existing = |name: &str| context.erus.find(&namespace, name);
    let (name, action) = decide(workload.as_ref(), existing, &ctx.settings.default_schedule);
    let api: Api<Eru> = ctx.api(&namespace);
    match action {
        AutoAction::Apply(_) if existing(&name).is_none() && api.get_opt(&name).await?.is_some() => {
            // created meanwhile, e.g. by the controller of a workload of another kind and the same
            // name, and not cached yet: the apply would take it over. Decided again once cached.
            info!(kind, workload = %workload_name, eru = %name, "Eru exists but is not cached yet; deciding again in 1 s");
            return Ok(Some(Duration::from_secs(1)));
        }
        AutoAction::Apply(eru) => {
            // an apply the API refused is not retried until the annotations (the spec) change
            let attempt = format!("refused:{}", serde_json::to_string(&eru.spec)?);
            let refused_before = context
                .reported
                .lock()
                .expect("reported lock")
                .get(&workload.uid().unwrap_or_default())
                .is_some_and(|p| p.starts_with(&attempt));
            if refused_before {
                return Ok(None);
            }
            match api
                .patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&*eru))
                .await
            {
                Ok(_) => {
                    context.resolved(workload.as_ref());
                    info!(kind, workload = %workload_name, eru = %name, schedule = %eru.spec.schedule, "automatic Eru applied")
                }
                Err(kube::Error::Api(status)) if status.code == 422 || status.code == 400 => {
                    // the annotation's schedule or time zone is refused by the CRD schema
                    let note = format!("cannot create Eru {name} from annotations: {}", status.message);
                    if context.report(workload.as_ref(), format!("{attempt} {note}")) {
                        ctx.publish(
                            workload.as_ref(),
                            EventType::Warning,
                            "EruInvalid",
                            "AutoCreate",
                            Some(note),
                        );
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        AutoAction::Delete => match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => info!(kind, workload = %workload_name, eru = %name, "automatic Eru deleted"),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => return Err(e.into()),
        },
        AutoAction::Conflict(note) => {
            if context.report(workload.as_ref(), format!("conflict:{note}")) {
                ctx.publish(
                    workload.as_ref(),
                    EventType::Warning,
                    "EruConflict",
                    "AutoCreate",
                    Some(note),
                )
            }
        }
        AutoAction::Nothing => context.resolved(workload.as_ref()),
    }
    Ok(None)
}

#[cfg(test)]
mod tests;
