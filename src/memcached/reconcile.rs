//! Memcached reconcile, on the runtime's pass: observe (Memcached, its Deployment and Pods from
//! watch caches) → the machine → journal → act (finalizer, server-side apply of the Deployment,
//! cleanup; the apply's result fed back) → status.

use std::{future::Future, sync::Arc, time::Duration};

use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
    runtime::{
        Controller,
        controller::Action,
        events::EventType,
        reflector::{ObjectRef, Store},
        watcher,
    },
};
use serde_json::json;
use tokio::sync::watch;

use super::{
    Memcached, MemcachedStatus,
    machine::{
        MemcachedAction, MemcachedEvent, MemcachedMachine, Observation, State, desired_deployment, in_sync,
        restore,
    },
};
use crate::{
    Error, Result,
    conditions::condition,
    machine::{Decision, Phase, dispatch, step},
    runtime::{
        Context, api_message,
        deployment::DeploymentView,
        drive,
        pass::{self, Steps},
        shutdown_requested,
        watch::{Synced, watched, watched_with_deletions},
    },
};

const KIND: &str = "Memcached";
/// Field manager of the Deployment a Memcached owns. The set of fields it applies never shrinks,
/// so Deployments that an earlier version applied as `eru-operator` need no migration: that
/// manager's shared ownership can never keep a field this one stopped applying.
pub const DEPLOYMENT_MANAGER: &str = "eru-operator-memcached";
/// Reason of the `Degraded` condition while the Deployment cannot be applied.
const APPLY_FAILED: &str = "ApplyFailed";
/// Pinned default memcached image (overridden by `MEMCACHED_IMAGE`).
pub const DEFAULT_IMAGE: &str = "memcached:1.6.39-alpine";
/// Finalizer of the operator-sdk sample.
pub const FINALIZER: &str = "cache.example.com/finalizer";
const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
const SELECTOR: &str = "app.kubernetes.io/name=memcached,app.kubernetes.io/managed-by=eru-operator";

pub struct MemcachedContext {
    ctx: Arc<Context>,
    deployments: Store<Deployment>,
    pods: Store<Pod>,
    caches_synced: (Synced, Synced),
}

/// Builds the Memcached controller; returns it and a future that resolves once its caches
/// synced. Its Deployments and Pods are cached whole, but only those a Memcached owns (by label):
/// the pod template is compared to revert drift.
pub fn controller(
    ctx: Arc<Context>,
    shutdown: watch::Receiver<bool>,
) -> (impl Future<Output = ()> + use<>, impl Future<Output = ()> + use<>) {
    let namespace = &ctx.settings.namespace;
    let (memcacheds, gone) =
        watched_with_deletions::<Memcached>(&ctx.client, namespace, watcher::Config::default());
    let deployments = watched::<Deployment>(
        &ctx.client,
        namespace,
        watcher::Config::default().labels(SELECTOR),
    );
    let pods = watched::<Pod>(
        &ctx.client,
        namespace,
        watcher::Config::default().labels(SELECTOR),
    );
    let controller = Controller::for_stream(memcacheds.stream, memcacheds.store)
        .owns_stream(deployments.stream)
        .watches_stream(pods.stream, |pod: Pod| {
            let namespace = pod.namespace();
            pod.labels()
                .get(INSTANCE_LABEL)
                .zip(namespace)
                .map(|(name, ns)| ObjectRef::<Memcached>::new(name).within(&ns))
        })
        .graceful_shutdown_on(shutdown_requested(shutdown));
    let synced = {
        let caches = (memcacheds.synced, deployments.synced.clone(), pods.synced.clone());
        async move {
            futures::join!(caches.0.wait(), caches.1.wait(), caches.2.wait());
        }
    };
    let context = Arc::new(MemcachedContext {
        ctx,
        deployments: deployments.store.clone(),
        pods: pods.store,
        caches_synced: (deployments.synced.clone(), pods.synced),
    });
    // the finalizer's cleanup pass forgets it too; this also covers a forced removal
    let forgetting = {
        let ctx = context.ctx.clone();
        async move { ctx.forget_gone(KIND, gone, |_| {}).await }
    };
    let run = drive(
        controller,
        KIND,
        context.ctx.clone(),
        context,
        pass::run::<MemcachedContext>,
    );
    (
        async move {
            futures::join!(run, forgetting);
        },
        synced,
    )
}

/// One Memcached pass between its steps: what was observed, the machine and what it decided.
pub struct MemcachedPlan {
    known: Option<MemcachedStatus>,
    observation: Observation,
    /// The Deployment it should own.
    desired: Deployment,
    state: State,
    decision: Decision<MemcachedAction>,
    /// The API's message if applying the Deployment failed in this pass.
    apply_error: Option<String>,
}

/// The Memcached's steps of the runtime's pass ([`pass::run`]).
impl Steps for MemcachedContext {
    type Object = Memcached;
    type Plan = MemcachedPlan;
    type Action = MemcachedAction;
    type Fed = MemcachedEvent;

    async fn plan(&self, memcached: &Arc<Memcached>) -> Result<Option<MemcachedPlan>> {
        futures::join!(self.caches_synced.0.wait(), self.caches_synced.1.wait());
        let namespace = memcached.namespace().unwrap_or_default();
        let desired = desired_deployment(memcached, &self.ctx.settings.memcached_image);
        let live = (self.deployments).get(&ObjectRef::new(&memcached.name_any()).within(&namespace));
        let known = self.ctx.statuses.current(
            &memcached.uid().unwrap_or_default(),
            &memcached.resource_version().unwrap_or_default(),
            memcached.status.as_ref(),
        );
        let observation = Observation {
            size: memcached.spec.size,
            deleting: memcached.meta().deletion_timestamp.is_some(),
            has_finalizer: memcached.finalizers().iter().any(|f| f == FINALIZER),
            deployment: live.as_deref().map(DeploymentView::of),
            in_sync: live.as_deref().is_some_and(|d| in_sync(d, &desired)),
            apply_failure: known.as_ref().and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == "Degraded" && c.status == "True" && c.reason == APPLY_FAILED)
                    .map(|c| c.message.clone())
            }),
        };
        let phase = known.as_ref().and_then(|s| s.phase.as_deref());
        let event = MemcachedEvent::Observed(observation.clone());
        let (state, decision) = dispatch(MemcachedMachine, restore(phase), &event);
        Ok(Some(MemcachedPlan {
            known,
            observation,
            desired,
            state,
            decision,
            apply_error: None,
        }))
    }

    async fn commit(
        &self,
        memcached: &Arc<Memcached>,
        plan: &mut MemcachedPlan,
    ) -> Result<Vec<MemcachedAction>> {
        let decided = std::mem::take(&mut plan.decision);
        self.ctx
            .commit(KIND, memcached.as_ref(), &decided.transitions)
            .await?;
        Ok(decided.actions)
    }

    async fn act(
        &self,
        memcached: &Arc<Memcached>,
        plan: &MemcachedPlan,
        actions: Vec<MemcachedAction>,
    ) -> Result<Vec<MemcachedEvent>> {
        let (ctx, namespace, name) = (
            &self.ctx,
            memcached.namespace().unwrap_or_default(),
            memcached.name_any(),
        );
        let api: Api<Memcached> = ctx.api(&namespace);
        let mut results = Vec::new();
        for command in &actions {
            match command {
                MemcachedAction::AddFinalizer => {
                    let mut finalizers = memcached.finalizers().to_vec();
                    finalizers.push(FINALIZER.into());
                    set_finalizers(&api, memcached, finalizers).await.into_result()?;
                }
                MemcachedAction::ApplyDeployment => {
                    let deployments: Api<Deployment> = ctx.api(&namespace);
                    let params = PatchParams::apply(DEPLOYMENT_MANAGER).force();
                    let applied = deployments
                        .patch(&name, &params, &Patch::Apply(&plan.desired))
                        .await;
                    let error = applied.err().map(|e| api_message(&e));
                    if let Some(message) = &error {
                        let note = Some(message.clone());
                        ctx.publish(
                            memcached.as_ref(),
                            EventType::Warning,
                            "ApplyFailed",
                            "ApplyDeployment",
                            note,
                        );
                    }
                    // the apply's result goes back into the machine in this pass
                    results.push(MemcachedEvent::Applied { error });
                }
                MemcachedAction::Cleanup => {
                    let finalizers = (memcached.finalizers().iter())
                        .filter(|f| *f != FINALIZER)
                        .cloned()
                        .collect();
                    // Announced by the pass whose patch removed the finalizer, or may have (an
                    // error but a conflict: if it landed, no pass comes back to say so). A
                    // second pass on a cached copy that still holds it (its removal not yet
                    // watched) gets a 404 or a 409 and says nothing.
                    let patched = set_finalizers(&api, memcached, finalizers).await;
                    if let FinalizersSet::Replaced | FinalizersSet::Unknown(_) = patched {
                        let note =
                            format!("Custom Resource {name} is being deleted from the namespace {namespace}");
                        ctx.publish(
                            memcached.as_ref(),
                            EventType::Warning,
                            "Deleting",
                            "Finalize",
                            Some(note),
                        );
                    }
                    patched.into_result()?;
                }
            }
        }
        Ok(results)
    }

    fn after(plan: &mut MemcachedPlan, fed: MemcachedEvent) {
        if let MemcachedEvent::Applied { error } = &fed {
            plan.apply_error.clone_from(error);
        }
        let state = std::mem::replace(&mut plan.state, State::Creating {});
        plan.state = step(MemcachedMachine, state, &fed, &mut plan.decision);
    }

    async fn finish(&self, memcached: &Arc<Memcached>, plan: MemcachedPlan) -> Result<Action> {
        if plan.observation.deleting {
            self.ctx.forget(KIND, memcached.as_ref());
            return Ok(Action::await_change());
        }
        let uid = memcached.uid().unwrap_or_default();
        self.ctx.metrics.set_phase(KIND, &uid, plan.state.phase());
        let known = plan.known.as_ref();
        let status = status(
            memcached,
            known,
            &self.pods,
            &plan.state,
            &plan.observation,
            plan.apply_error,
        );
        self.ctx.apply_status(memcached.as_ref(), known, &status);
        Ok(Action::requeue(Duration::from_secs(300)))
    }
}

/// What a finalizer patch did.
enum FinalizersSet {
    Replaced,
    /// The object is gone (404).
    Gone,
    /// The object changed since the decision (409): nothing was replaced, and the next pass
    /// decides again on the newer copy.
    Conflict(Error),
    /// Any other error: the patch may or may not have landed.
    Unknown(Error),
}

impl FinalizersSet {
    fn into_result(self) -> Result<()> {
        match self {
            Self::Replaced | Self::Gone => Ok(()),
            Self::Conflict(e) | Self::Unknown(e) => Err(e),
        }
    }
}

/// Replaces the finalizer list, guarded by the resourceVersion the decision was made on.
async fn set_finalizers(
    api: &Api<Memcached>,
    memcached: &Memcached,
    finalizers: Vec<String>,
) -> FinalizersSet {
    let patch =
        json!({"metadata": {"resourceVersion": memcached.resource_version(), "finalizers": finalizers}});
    match api
        .patch(
            &memcached.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
    {
        Ok(_) => FinalizersSet::Replaced,
        Err(kube::Error::Api(s)) if s.code == 404 => FinalizersSet::Gone,
        Err(e) if is_conflict(&e) => FinalizersSet::Conflict(Error::from(e)),
        Err(e) => FinalizersSet::Unknown(Error::from(e)),
    }
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// The status to write: Pod names from the cache, counts and conditions from the observation.
fn status(
    memcached: &Memcached,
    known: Option<&MemcachedStatus>,
    pods: &Store<Pod>,
    state: &State,
    observation: &Observation,
    apply_error: Option<String>,
) -> MemcachedStatus {
    let namespace = memcached.namespace();
    let mut nodes: Vec<String> = pods
        .state()
        .iter()
        .filter(|p| p.namespace() == namespace && p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.labels().get(INSTANCE_LABEL) == Some(&memcached.name_any()))
        .map(|p| p.name_any())
        .collect();
    nodes.sort();
    let previous = known.map(|s| s.conditions.clone()).unwrap_or_default();
    let deployment = observation.deployment.clone().unwrap_or_default();
    let size = observation.size;
    let available = deployment.available >= size && observation.deployment.is_some();
    let progressing = matches!(state, State::Creating {} | State::Scaling {});
    let degraded = matches!(state, State::Degraded {});
    // Degraded without an apply in this pass: an earlier apply failure stands until one succeeds
    let apply_error = apply_error.or_else(|| observation.apply_failure.clone().filter(|_| degraded));
    let (degraded_reason, degraded_message) = match apply_error {
        Some(message) => (APPLY_FAILED, message),
        None if degraded && deployment.deadline_exceeded => (
            "ProgressDeadlineExceeded",
            "the Deployment exceeded its progress deadline".into(),
        ),
        None if degraded => ("Failing", String::new()),
        None => ("AsExpected", String::new()),
    };
    let conditions = vec![
        condition(
            &previous,
            "Available",
            available,
            if available {
                "MinimumReplicasAvailable"
            } else {
                "MinimumReplicasUnavailable"
            },
            &format!("{}/{} replicas available", deployment.available, size),
            memcached,
        ),
        condition(
            &previous,
            "Progressing",
            progressing,
            if progressing { "Reconciling" } else { "Reconciled" },
            &format!(
                "Deployment for custom resource ({}) with {} replicas",
                memcached.name_any(),
                size
            ),
            memcached,
        ),
        condition(
            &previous,
            "Degraded",
            degraded,
            degraded_reason,
            &degraded_message,
            memcached,
        ),
    ];
    MemcachedStatus {
        phase: Some(state.phase().to_string()),
        nodes,
        ready_replicas: deployment.ready,
        available_replicas: deployment.available,
        observed_generation: memcached.meta().generation,
        conditions,
    }
}
