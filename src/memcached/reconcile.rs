//! Memcached reconcile: observe (Memcached, its Deployment and Pods from watch caches) → event →
//! machine → journal → act (finalizer, server-side apply of the Deployment, cleanup) → status.

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
        DeploymentView, MemcachedCommand, MemcachedEvent, MemcachedMachine, Observation, desired_deployment,
        in_sync, restore,
    },
};
use crate::{
    Error, Result,
    conditions::condition,
    controller::{Context, MANAGER, drive, shutdown_requested, watch_util},
    journal::Entry,
    machine::{Phase, dispatch},
};

const KIND: &str = "Memcached";
/// Pinned default memcached image (overridden by `MEMCACHED_IMAGE`).
pub const DEFAULT_IMAGE: &str = "memcached:1.6.39-alpine";
/// Finalizer of the operator-sdk sample.
pub const FINALIZER: &str = "cache.example.com/finalizer";
const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
const SELECTOR: &str = "app.kubernetes.io/name=memcached,app.kubernetes.io/managed-by=eru-operator";

struct MemcachedContext {
    ctx: Arc<Context>,
    deployments: Store<Deployment>,
    pods: Store<Pod>,
    caches_synced: (watch_util::Synced, watch_util::Synced),
}

/// Builds the Memcached controller; returns it and a future that resolves once its caches synced.
pub fn controller(
    ctx: Arc<Context>,
    shutdown: watch::Receiver<bool>,
) -> (impl Future<Output = ()>, impl Future<Output = ()>) {
    let namespace = &ctx.settings.namespace;
    let (memcacheds, memcached_stream, memcacheds_synced) = watch_util::reflect(
        watch_util::api_for::<Memcached>(&ctx.client, namespace),
        watcher::Config::default(),
    );
    let (deployments, deployment_stream, deployments_synced) = watch_util::reflect(
        watch_util::api_for::<Deployment>(&ctx.client, namespace),
        watcher::Config::default().labels(SELECTOR),
    );
    let (pods, pod_stream, pods_synced) = watch_util::reflect(
        watch_util::api_for::<Pod>(&ctx.client, namespace),
        watcher::Config::default().labels(SELECTOR),
    );
    let controller = Controller::for_stream(memcached_stream, memcacheds)
        .owns_stream(deployment_stream)
        .watches_stream(pod_stream, |pod: Pod| {
            let namespace = pod.namespace();
            pod.labels()
                .get(INSTANCE_LABEL)
                .zip(namespace)
                .map(|(name, ns)| ObjectRef::<Memcached>::new(name).within(&ns))
        })
        .graceful_shutdown_on(shutdown_requested(shutdown));
    let synced = {
        let (deployments_synced, pods_synced) = (deployments_synced.clone(), pods_synced.clone());
        async move {
            futures::join!(
                memcacheds_synced.wait(),
                deployments_synced.wait(),
                pods_synced.wait()
            );
        }
    };
    let context = Arc::new(MemcachedContext {
        ctx,
        deployments,
        pods,
        caches_synced: (deployments_synced, pods_synced),
    });
    let run = drive(controller, KIND, context.ctx.clone(), context, reconcile);
    (run, synced)
}

fn view(deployment: &Deployment) -> DeploymentView {
    let status = deployment.status.clone().unwrap_or_default();
    DeploymentView {
        replicas: status.replicas.unwrap_or(0),
        updated: status.updated_replicas.unwrap_or(0),
        ready: status.ready_replicas.unwrap_or(0),
        available: status.available_replicas.unwrap_or(0),
        caught_up: status.observed_generation >= deployment.metadata.generation,
        deadline_exceeded: status
            .conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Progressing" && c.reason.as_deref() == Some("ProgressDeadlineExceeded")),
    }
}

async fn reconcile(memcached: Arc<Memcached>, context: Arc<MemcachedContext>) -> Result<Action> {
    let ctx = &context.ctx;
    futures::join!(context.caches_synced.0.wait(), context.caches_synced.1.wait());
    let namespace = memcached.namespace().unwrap_or_default();
    let name = memcached.name_any();
    let image = &ctx.settings.memcached_image;
    let desired = desired_deployment(&memcached, image);
    let live = context.deployments.get(&ObjectRef::new(&name).within(&namespace));
    let observation = Observation {
        size: memcached.spec.size,
        deleting: memcached.meta().deletion_timestamp.is_some(),
        has_finalizer: memcached.finalizers().iter().any(|f| f == FINALIZER),
        deployment: live.as_deref().map(view),
        in_sync: live.as_deref().is_some_and(|d| in_sync(d, &desired)),
    };
    let uid = memcached.uid().unwrap_or_default();
    let known = ctx.statuses.current(
        &uid,
        &memcached.resource_version().unwrap_or_default(),
        memcached.status.as_ref(),
    );
    let phase = known.as_ref().and_then(|s| s.phase.as_deref());
    let (state, decision) = dispatch(
        MemcachedMachine,
        restore(phase),
        &MemcachedEvent::Observed(observation.clone()),
    );
    ctx.commit(KIND, memcached.as_ref(), &decision.transitions, Entry::default())
        .await?;

    let api: Api<Memcached> = ctx.api(&namespace);
    let mut apply_error = None;
    for command in &decision.commands {
        match command {
            MemcachedCommand::AddFinalizer => {
                let mut finalizers = memcached.finalizers().to_vec();
                finalizers.push(FINALIZER.into());
                set_finalizers(&api, &memcached, finalizers).await?;
            }
            MemcachedCommand::ApplyDeployment => {
                let deployments: Api<Deployment> = ctx.api(&namespace);
                if let Err(e) = deployments
                    .patch(
                        &name,
                        &PatchParams::apply(MANAGER).force(),
                        &Patch::Apply(&desired),
                    )
                    .await
                {
                    let message = match &e {
                        kube::Error::Api(s) => s.message.clone(),
                        other => other.to_string(),
                    };
                    ctx.publish(
                        memcached.as_ref(),
                        EventType::Warning,
                        "ApplyFailed",
                        "ApplyDeployment",
                        Some(message.clone()),
                    )
                    .await;
                    apply_error = Some(message);
                }
            }
            MemcachedCommand::Cleanup => {
                let note = format!("Custom Resource {name} is being deleted from the namespace {namespace}");
                ctx.publish(
                    memcached.as_ref(),
                    EventType::Warning,
                    "Deleting",
                    "Finalize",
                    Some(note),
                )
                .await;
                let finalizers = memcached
                    .finalizers()
                    .iter()
                    .filter(|f| *f != FINALIZER)
                    .cloned()
                    .collect();
                set_finalizers(&api, &memcached, finalizers).await?;
            }
        }
    }
    if observation.deleting {
        ctx.statuses.forget(&uid);
        ctx.metrics.forget(KIND, &uid, &namespace, &name);
        return Ok(Action::await_change());
    }
    ctx.metrics.set_phase(KIND, &uid, state.phase());
    let status = status(
        &memcached,
        known.as_ref(),
        &context.pods,
        state.phase(),
        &observation,
        apply_error,
    );
    ctx.apply_status(memcached.as_ref(), KIND, known.as_ref(), &status)
        .await?;
    Ok(Action::requeue(Duration::from_secs(300)))
}

/// Replaces the finalizer list, guarded by the resourceVersion the decision was made on.
async fn set_finalizers(api: &Api<Memcached>, memcached: &Memcached, finalizers: Vec<String>) -> Result<()> {
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
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(Error::from(e)),
    }
}

/// The status to write: Pod names from the cache, counts and conditions from the observation.
fn status(
    memcached: &Memcached,
    known: Option<&MemcachedStatus>,
    pods: &Store<Pod>,
    phase: &str,
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
    let progressing = phase == "Creating" || phase == "Scaling";
    let degraded = phase == "Degraded" || apply_error.is_some();
    let degraded_message = apply_error.unwrap_or_else(|| {
        if deployment.deadline_exceeded {
            "the Deployment exceeded its progress deadline".into()
        } else {
            String::new()
        }
    });
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
            if degraded { "Failing" } else { "AsExpected" },
            &degraded_message,
            memcached,
        ),
    ];
    MemcachedStatus {
        phase: Some(phase.to_string()),
        nodes,
        ready_replicas: deployment.ready,
        available_replicas: deployment.available,
        observed_generation: memcached.meta().generation,
        conditions,
    }
}
