//! PodSet reconcile, on the runtime's pass: observe (PodSet + Pods from the watch cache) → the
//! machine → journal → act (create, delete, adopt, release Pods; the result fed back) → status.

use std::{
    collections::HashMap,
    future::Future,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use chrono::DateTime;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Resource, ResourceExt,
    api::DeleteParams,
    runtime::{
        Controller,
        controller::Action,
        events::EventType,
        reflector::{ObjectRef, Store},
        watcher,
    },
};
use tokio::sync::watch;

use super::{
    PodSet, PodSetStatus,
    machine::{
        Cached, Expected, Observation, PodSetAction, PodSetEvent, PodSetMachine, PodView, Scaling, State,
        restore,
    },
    pods::{create_pods, is_controller_ref, set_controller},
};
use crate::{
    Result,
    conditions::condition,
    machine::{Decision, Phase, dispatch, step},
    runtime::{
        Context, api_message, drive,
        pass::{self, Steps},
        shutdown_requested,
        watch::{Gone, Synced, watched, watched_with_deletions},
    },
};

pub use super::pods::POD_LABEL;

const KIND: &str = "PodSet";

/// Per-controller state besides the shared context.
pub struct PodSetContext {
    ctx: Arc<Context>,
    pods: Store<Pod>,
    pods_synced: Synced,
    expectations: Mutex<HashMap<String, Expected>>,
}

/// Builds the PodSet controller; returns it and a future that resolves once its caches synced.
pub fn controller(
    ctx: Arc<Context>,
    shutdown: watch::Receiver<bool>,
) -> (impl Future<Output = ()>, impl Future<Output = ()>) {
    let namespace = &ctx.settings.namespace;
    let (podsets, gone) =
        watched_with_deletions::<PodSet>(&ctx.client, namespace, watcher::Config::default());
    let pods = watched::<Pod>(
        &ctx.client,
        namespace,
        watcher::Config::default().labels(POD_LABEL),
    );
    let controller = Controller::for_stream(podsets.stream, podsets.store)
        .watches_stream(pods.stream, |pod: Pod| {
            // the label names the PodSet; a controller reference covers a relabelled Pod
            let namespace = pod.namespace().unwrap_or_default();
            let labelled = pod.labels().get(POD_LABEL).cloned();
            let controller = pod
                .owner_references()
                .iter()
                .find(|o| o.controller == Some(true) && o.kind == KIND)
                .map(|o| o.name.clone());
            labelled
                .into_iter()
                .chain(controller)
                .map(|name| ObjectRef::<PodSet>::new(&name).within(&namespace))
                .collect::<Vec<_>>()
        })
        .graceful_shutdown_on(shutdown_requested(shutdown));
    let synced = {
        let (podsets_synced, pods_synced) = (podsets.synced, pods.synced.clone());
        async move {
            futures::join!(podsets_synced.wait(), pods_synced.wait());
        }
    };
    let context = Arc::new(PodSetContext {
        ctx,
        pods: pods.store,
        pods_synced: pods.synced,
        expectations: Mutex::default(),
    });
    // a PodSet has no finalizer: its deletion is seen on the watch
    let forgetting = {
        let context = context.clone();
        async move {
            let forget_expectations = |g: &Gone| {
                context
                    .expectations
                    .lock()
                    .expect("expectations lock")
                    .remove(&g.uid);
            };
            context.ctx.forget_gone(KIND, gone, forget_expectations).await;
        }
    };
    let run = drive(
        controller,
        KIND,
        context.ctx.clone(),
        context,
        pass::run::<PodSetContext>,
    );
    (
        async move {
            futures::join!(run, forgetting);
        },
        synced,
    )
}

fn view(pod: &Pod) -> PodView {
    let status = pod.status.as_ref();
    PodView {
        name: pod.name_any(),
        scheduled: pod.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some(),
        phase: status
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Pending".into()),
        ready: status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
        created: pod
            .metadata
            .creation_timestamp
            .as_ref()
            .and_then(|t| DateTime::from_timestamp(t.0.as_second(), 0)),
    }
}

/// Turns the cluster as cached into an observation.
fn observe(
    podset: &PodSet,
    known: Option<&PodSetStatus>,
    pods: &[Arc<Pod>],
    expectations_met: bool,
) -> Observation {
    let namespace = podset.namespace();
    let mut observation = Observation {
        desired: podset.spec.replicas,
        expectations_met,
        failure: replica_failure(known),
        ..Observation::default()
    };
    for pod in pods.iter().filter(|p| p.namespace() == namespace) {
        let matches = pod.labels().get(POD_LABEL) == Some(&podset.name_any());
        let controller = pod.owner_references().iter().find(|o| o.controller == Some(true));
        match (controller, matches) {
            (Some(owner), true) if is_controller_ref(owner, podset) => {
                let counted = pod.metadata.deletion_timestamp.is_none()
                    && matches!(
                        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
                        None | Some("Pending" | "Running")
                    );
                if counted {
                    observation.active.push(view(pod));
                }
            }
            (Some(owner), false) if is_controller_ref(owner, podset) => {
                observation.strays.push(pod.name_any())
            }
            (None, true) if pod.metadata.deletion_timestamp.is_none() => {
                observation.orphans.push(pod.name_any())
            }
            _ => {}
        }
    }
    observation.active.sort_by(|a, b| a.name.cmp(&b.name));
    observation
}

fn replica_failure(status: Option<&PodSetStatus>) -> Option<String> {
    status?
        .conditions
        .iter()
        .find(|c| c.type_ == "ReplicaFailure" && c.status == "True")
        .map(|c| c.message.clone())
}

/// One PodSet pass between its steps: what was observed, the machine and what it decided.
pub struct PodSetPlan {
    known: Option<PodSetStatus>,
    observation: Observation,
    state: State,
    decision: Decision<PodSetAction>,
    /// The first failure of this pass's actions.
    failure: Option<String>,
}

/// The PodSet's steps of the runtime's pass ([`pass::run`]).
impl Steps for PodSetContext {
    type Object = PodSet;
    type Plan = PodSetPlan;
    type Action = PodSetAction;
    type Fed = PodSetEvent;

    async fn plan(&self, podset: &Arc<PodSet>) -> Result<Option<PodSetPlan>> {
        // an unsynced Pod cache would look empty and make the PodSet create duplicates
        self.pods_synced.wait().await;
        let uid = podset.uid().unwrap_or_default();
        if podset.meta().deletion_timestamp.is_some() {
            // Pods go with their owner through garbage collection.
            self.expectations.lock().expect("expectations lock").remove(&uid);
            self.ctx.forget(KIND, podset.as_ref());
            return Ok(None);
        }
        let pods = self.pods.state();
        let expectations_met = self.expectations_met(podset, &uid, &pods);
        let known = self.ctx.statuses.current(
            &uid,
            &podset.resource_version().unwrap_or_default(),
            podset.status.as_ref(),
        );
        let observation = observe(podset, known.as_ref(), &pods, expectations_met);
        let phase = known.as_ref().and_then(|s| s.phase.as_deref());
        let event = PodSetEvent::Observed(observation.clone());
        let (state, decision) = dispatch(PodSetMachine, restore(phase), &event);
        Ok(Some(PodSetPlan {
            known,
            observation,
            state,
            decision,
            failure: None,
        }))
    }

    async fn commit(&self, podset: &Arc<PodSet>, plan: &mut PodSetPlan) -> Result<Vec<PodSetAction>> {
        let decided = std::mem::take(&mut plan.decision);
        self.ctx
            .commit(KIND, podset.as_ref(), &decided.transitions)
            .await?;
        Ok(decided.actions)
    }

    async fn act(
        &self,
        podset: &Arc<PodSet>,
        _plan: &PodSetPlan,
        actions: Vec<PodSetAction>,
    ) -> Result<Vec<PodSetEvent>> {
        let scaling = actions.iter().find_map(|a| match a {
            PodSetAction::Create { .. } => Some(Scaling::Up),
            PodSetAction::Delete { .. } => Some(Scaling::Down),
            _ => None,
        });
        let failure = self.scale(podset, actions).await;
        // the actions' result goes back into the machine in this pass
        Ok(vec![PodSetEvent::Acted { failure, scaling }])
    }

    fn after(plan: &mut PodSetPlan, fed: PodSetEvent) {
        if let PodSetEvent::Acted { failure, .. } = &fed {
            plan.failure.clone_from(failure);
        }
        let state = std::mem::replace(&mut plan.state, State::Pending {});
        plan.state = step(PodSetMachine, state, &fed, &mut plan.decision);
    }

    async fn finish(&self, podset: &Arc<PodSet>, plan: PodSetPlan) -> Result<Action> {
        let uid = podset.uid().unwrap_or_default();
        self.ctx.metrics.set_phase(KIND, &uid, plan.state.phase());
        // Degraded without a failure in this pass: waiting on earlier actions, the earlier failure stands
        let failure = plan.failure.or_else(|| {
            matches!(plan.state, State::Degraded {})
                .then(|| plan.observation.failure.clone())
                .flatten()
        });
        let known = plan.known.as_ref();
        let phase = plan.state.phase();
        let status = status(podset, known, phase, &plan.observation, failure.as_ref());
        self.ctx.apply_status(podset.as_ref(), known, &status);
        Ok(Action::requeue(Duration::from_secs(300)))
    }
}

impl PodSetContext {
    /// Whether the Pods this PodSet's last actions created or deleted are in the cache (else
    /// counting now could duplicate them); forgets the expectations once they are.
    fn expectations_met(&self, podset: &PodSet, uid: &str, pods: &[Arc<Pod>]) -> bool {
        let cached = |name: &str| match pods
            .iter()
            .find(|p| p.name_any() == name && p.namespace() == podset.namespace())
        {
            None => Cached::Absent,
            Some(p) if p.metadata.deletion_timestamp.is_some() => Cached::Deleting,
            Some(_) => Cached::Present,
        };
        let mut expectations = self.expectations.lock().expect("expectations lock");
        let met = expectations
            .get(uid)
            .is_none_or(|e| e.met(cached, Instant::now()));
        if met {
            expectations.remove(uid);
        }
        met
    }

    /// Creates, deletes, adopts and releases Pods; expects what it created and deleted to show up
    /// in the cache; returns (and announces) the first failure.
    async fn scale(&self, podset: &PodSet, actions: Vec<PodSetAction>) -> Option<String> {
        let api: Api<Pod> = self.ctx.api(&podset.namespace().unwrap_or_default());
        let mut failures = Vec::new();
        let mut expected = Expected::new(Instant::now());
        for command in actions {
            match command {
                PodSetAction::Create { count } => {
                    create_pods(&api, podset, count, &mut expected, &mut failures).await
                }
                PodSetAction::Delete { names } => {
                    for name in names {
                        match api.delete(&name, &DeleteParams::default()).await {
                            Ok(_) => {
                                expected.deletes.insert(name);
                            }
                            Err(kube::Error::Api(s)) if s.code == 404 => {}
                            Err(e) => failures.push(format!("deleting pod {name}: {}", api_message(&e))),
                        }
                    }
                }
                PodSetAction::Adopt { names } => {
                    for name in names {
                        if let Err(e) = set_controller(&api, podset, &name, true).await {
                            failures.push(format!("adopting pod {name}: {}", api_message(&e)));
                        }
                    }
                }
                PodSetAction::Release { names } => {
                    for name in names {
                        if let Err(e) = set_controller(&api, podset, &name, false).await {
                            failures.push(format!("releasing pod {name}: {}", api_message(&e)));
                        }
                    }
                }
            }
        }
        if !expected.creates.is_empty() || !expected.deletes.is_empty() {
            let uid = podset.uid().unwrap_or_default();
            self.expectations
                .lock()
                .expect("expectations lock")
                .insert(uid, expected);
        }
        let failure = failures.into_iter().next();
        if let Some(failure) = &failure {
            self.ctx.publish(
                podset,
                EventType::Warning,
                "ReplicaFailure",
                "ScalePods",
                Some(failure.clone()),
            );
        }
        failure
    }
}

/// The status to write: counts and names from the observation, a `ReplicaFailure` condition
/// while creating or deleting Pods fails.
fn status(
    podset: &PodSet,
    known: Option<&PodSetStatus>,
    phase: &str,
    observation: &Observation,
    failure: Option<&String>,
) -> PodSetStatus {
    let mut names: Vec<String> = observation.active.iter().map(|p| p.name.clone()).collect();
    names.sort();
    let ready = observation.active.iter().filter(|p| p.ready).count() as i32;
    let previous = known.map(|s| s.conditions.as_slice()).unwrap_or_default();
    let conditions = match failure {
        Some(message) => vec![condition(
            previous,
            "ReplicaFailure",
            true,
            "FailedCreateOrDelete",
            message,
            podset,
        )],
        None => Vec::new(),
    };
    PodSetStatus {
        phase: Some(phase.to_string()),
        replicas: names.len() as i32,
        ready_replicas: ready,
        available_replicas: ready,
        pod_names: names,
        observed_generation: podset.meta().generation,
        conditions,
    }
}
