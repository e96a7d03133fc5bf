//! The Memcached state machine and the pure rules it uses: the desired Deployment and whether the
//! live one drifted from it. No I/O here.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        apps::v1::{Deployment, DeploymentSpec},
        core::v1::{
            Capabilities, Container, ContainerPort, PodSecurityContext, PodSpec, PodTemplateSpec,
            SeccompProfile, SecurityContext,
        },
    },
    apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta},
};
use kube::{Resource, ResourceExt};
use statig::prelude::*;

use super::Memcached;
use crate::{
    machine::{Decision, EventName, Phase},
    runtime::deployment::DeploymentView,
};

/// The memcached command line (operator-sdk's sample).
pub const COMMAND: [&str; 4] = ["memcached", "-m=64", "-o", "modern"];
const VERBOSE: &str = "-v";

/// Everything a Memcached decision needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observation {
    pub size: i32,
    pub deleting: bool,
    pub has_finalizer: bool,
    /// `None`: the Deployment does not exist.
    pub deployment: Option<DeploymentView>,
    /// The fields the operator manages match the desired Deployment.
    pub in_sync: bool,
    /// The apply that degraded the Memcached in an earlier pass (its `Degraded` condition with
    /// reason `ApplyFailed`): while it lasts, a pass that applies again stays `Degraded` until the
    /// apply succeeds.
    pub apply_failure: Option<String>,
}

/// Events of a Memcached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemcachedEvent {
    Observed(Observation),
    /// The pass applied the Deployment; `error` is the API's message if that failed.
    Applied {
        error: Option<String>,
    },
}

impl EventName for MemcachedEvent {
    fn name(&self) -> &'static str {
        match self {
            MemcachedEvent::Applied { error: Some(_) } => "ApplyFailed",
            MemcachedEvent::Applied { error: None } => "Applied",
            MemcachedEvent::Observed(o) if o.deleting => "DeletionRequested",
            MemcachedEvent::Observed(o) if o.deployment.is_none() => "DeploymentMissing",
            MemcachedEvent::Observed(o) if !o.in_sync => "DeploymentDrifted",
            MemcachedEvent::Observed(_) => "DeploymentObserved",
        }
    }
}

/// What the reconciler is asked to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemcachedAction {
    AddFinalizer,
    /// Server-side apply the desired Deployment (creates it, or reverts drift).
    ApplyDeployment,
    /// Emit the cleanup Event and remove the finalizer.
    Cleanup,
}

/// The Memcached machine.
#[derive(Default)]
pub struct MemcachedMachine;

#[state_machine(
    initial = "State::creating()",
    state(derive(Debug, Clone, PartialEq, Eq)),
    after_transition = "Self::after_transition"
)]
impl MemcachedMachine {
    #[state(superstate = "observing")]
    fn creating() -> Outcome<State> {
        Super
    }

    #[state(superstate = "observing")]
    fn scaling() -> Outcome<State> {
        Super
    }

    #[state(superstate = "observing")]
    fn available() -> Outcome<State> {
        Super
    }

    /// The Deployment cannot be applied, or its rollout exceeded its progress deadline.
    #[state(superstate = "observing")]
    fn degraded(event: &MemcachedEvent) -> Outcome<State> {
        match event {
            MemcachedEvent::Applied { error: None } => Transition(State::scaling()),
            _ => Super,
        }
    }

    /// Terminal: cleanup runs until the finalizer is gone.
    #[state]
    fn deleting(event: &MemcachedEvent, context: &mut Decision<MemcachedAction>) -> Outcome<State> {
        if let MemcachedEvent::Observed(observation) = event
            && observation.has_finalizer
        {
            context.act(MemcachedAction::Cleanup);
        }
        Handled
    }

    #[superstate]
    fn observing(event: &MemcachedEvent, context: &mut Decision<MemcachedAction>) -> Outcome<State> {
        match event {
            MemcachedEvent::Observed(observation) => Transition(plan(observation, context)),
            // the apply failed in this pass: phase and condition say so in this pass
            MemcachedEvent::Applied { error: Some(_) } => Transition(State::degraded()),
            MemcachedEvent::Applied { error: None } => Handled,
        }
    }

    fn after_transition(&mut self, from: &State, to: &State, context: &mut Decision<MemcachedAction>) {
        context.transition(from, to);
    }
}

impl Phase for State {
    fn phase(&self) -> &'static str {
        match self {
            State::Creating {} => "Creating",
            State::Scaling {} => "Scaling",
            State::Available {} => "Available",
            State::Degraded {} => "Degraded",
            State::Deleting {} => "Deleting",
        }
    }
}

/// Restores the state named by `status.phase`.
pub fn restore(phase: Option<&str>) -> State {
    match phase {
        Some("Scaling") => State::Scaling {},
        Some("Available") => State::Available {},
        Some("Degraded") => State::Degraded {},
        Some("Deleting") => State::Deleting {},
        _ => State::Creating {},
    }
}

fn plan(observation: &Observation, decision: &mut Decision<MemcachedAction>) -> State {
    if observation.deleting {
        if observation.has_finalizer {
            decision.act(MemcachedAction::Cleanup);
        }
        return State::Deleting {};
    }
    if !observation.has_finalizer {
        decision.act(MemcachedAction::AddFinalizer);
    }
    let failing = observation.apply_failure.is_some();
    let Some(deployment) = &observation.deployment else {
        decision.act(MemcachedAction::ApplyDeployment);
        return if failing {
            State::Degraded {}
        } else {
            State::Creating {}
        };
    };
    if !observation.in_sync {
        decision.act(MemcachedAction::ApplyDeployment);
        return if failing {
            State::Degraded {}
        } else {
            State::Scaling {}
        };
    }
    if deployment.deadline_exceeded {
        return State::Degraded {};
    }
    if deployment.settled_at(observation.size) {
        State::Available {}
    } else {
        State::Scaling {}
    }
}

/// Labels of the memcached Deployment and its Pods.
pub fn labels(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), "memcached".to_string()),
        ("app.kubernetes.io/instance".to_string(), name.to_string()),
        (
            "app.kubernetes.io/managed-by".to_string(),
            crate::runtime::MANAGER.to_string(),
        ),
    ])
}

fn command() -> Vec<String> {
    COMMAND.iter().chain([&VERBOSE]).map(|s| s.to_string()).collect()
}

/// The Deployment a Memcached should own.
pub fn desired_deployment(memcached: &Memcached, image: &str) -> Deployment {
    let name = memcached.name_any();
    let labels = labels(&name);
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: memcached.namespace(),
            labels: Some(labels.clone()),
            owner_references: memcached.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(memcached.spec.size),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        run_as_user: Some(1001),
                        seccomp_profile: Some(SeccompProfile {
                            type_: "RuntimeDefault".into(),
                            ..Default::default()
                        }),
                        ..PodSecurityContext::default()
                    }),
                    containers: vec![Container {
                        name: "memcached".into(),
                        image: Some(image.to_string()),
                        image_pull_policy: Some("IfNotPresent".into()),
                        command: Some(command()),
                        // Owned, empty: a server-side apply puts back only the fields it sets, so
                        // arguments or variables someone added (an `args` the command then runs
                        // with) stay unless the operator claims these lists too.
                        args: Some(Vec::new()),
                        env: Some(Vec::new()),
                        ports: Some(vec![ContainerPort {
                            container_port: memcached.spec.container_port,
                            name: Some("memcached".into()),
                            ..ContainerPort::default()
                        }]),
                        security_context: Some(SecurityContext {
                            run_as_non_root: Some(true),
                            run_as_user: Some(1001),
                            allow_privilege_escalation: Some(false),
                            read_only_root_filesystem: Some(true),
                            capabilities: Some(Capabilities {
                                drop: Some(vec!["ALL".into()]),
                                add: None,
                            }),
                            ..SecurityContext::default()
                        }),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

/// Whether the live Deployment carries the desired values of every field the operator manages.
pub fn in_sync(live: &Deployment, desired: &Deployment) -> bool {
    let (Some(live_spec), Some(desired_spec)) = (&live.spec, &desired.spec) else {
        return false;
    };
    let container = |d: &DeploymentSpec| {
        d.template
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .cloned()
    };
    let (Some(live_c), Some(desired_c)) = (container(live_spec), container(desired_spec)) else {
        return false;
    };
    let port = |c: &Container| c.ports.as_ref().and_then(|p| p.first()).map(|p| p.container_port);
    // (an empty list and none are the same: the API server drops empty lists)
    fn list<T>(l: &Option<Vec<T>>) -> &[T] {
        l.as_deref().unwrap_or_default()
    }
    live_spec.replicas == desired_spec.replicas
        && live_c.image == desired_c.image
        && live_c.command == desired_c.command
        && list(&live_c.args) == list(&desired_c.args)
        && list(&live_c.env) == list(&desired_c.env)
        && port(&live_c) == port(&desired_c)
        && live_c.security_context == desired_c.security_context
        && live
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| desired.labels().iter().all(|(k, v)| l.get(k) == Some(v)))
        && live.owner_references().iter().any(|o| o.controller == Some(true))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::EnvVar;

    use super::*;
    use crate::{machine::dispatch, memcached::MemcachedSpec};

    fn memcached(size: i32) -> Memcached {
        let mut m = Memcached::new(
            "cache",
            MemcachedSpec {
                size,
                container_port: 11211,
            },
        );
        m.metadata.namespace = Some("default".into());
        m.metadata.uid = Some("uid-1".into());
        m
    }

    fn observed(size: i32, deployment: Option<DeploymentView>, in_sync: bool) -> MemcachedEvent {
        MemcachedEvent::Observed(Observation {
            size,
            has_finalizer: true,
            deployment,
            in_sync,
            deleting: false,
            apply_failure: None,
        })
    }

    fn settled(n: i32) -> DeploymentView {
        DeploymentView {
            desired: n,
            replicas: n,
            updated: n,
            ready: n,
            available: n,
            caught_up: true,
            ..DeploymentView::default()
        }
    }

    #[test]
    fn a_failed_apply_degrades_in_the_same_pass_and_a_retry_recovers() {
        let (state, decision) = dispatch(
            MemcachedMachine,
            State::Creating {},
            &MemcachedEvent::Applied {
                error: Some("admission webhook denied".into()),
            },
        );
        assert_eq!(state, State::Degraded {});
        assert_eq!(decision.transitions[0].event, "ApplyFailed");
        // the next pass retries and stays Degraded until the apply succeeds
        let retry = MemcachedEvent::Observed(Observation {
            size: 3,
            has_finalizer: true,
            apply_failure: Some("admission webhook denied".into()),
            ..Observation::default()
        });
        let (state, decision) = dispatch(MemcachedMachine, State::Degraded {}, &retry);
        assert_eq!(state, State::Degraded {});
        assert_eq!(decision.actions, vec![MemcachedAction::ApplyDeployment]);
        assert!(decision.transitions.is_empty());
        let (state, _) = dispatch(MemcachedMachine, state, &MemcachedEvent::Applied { error: None });
        assert_eq!(state, State::Scaling {});
    }

    #[test]
    fn missing_deployment_is_created() {
        let event = MemcachedEvent::Observed(Observation {
            size: 3,
            ..Observation::default()
        });
        let (state, decision) = dispatch(MemcachedMachine, restore(None), &event);
        assert_eq!(state, State::Creating {});
        assert_eq!(
            decision.actions,
            vec![MemcachedAction::AddFinalizer, MemcachedAction::ApplyDeployment]
        );
        assert!(
            decision.transitions.is_empty(),
            "Creating → Creating is not a transition"
        );
    }

    #[test]
    fn settled_deployment_is_available() {
        let (state, decision) = dispatch(
            MemcachedMachine,
            State::Creating {},
            &observed(3, Some(settled(3)), true),
        );
        assert_eq!(state, State::Available {});
        assert!(decision.actions.is_empty());
        assert_eq!(decision.transitions[0].event, "DeploymentObserved");
    }

    #[test]
    fn drift_is_reverted() {
        let (state, decision) = dispatch(
            MemcachedMachine,
            State::Available {},
            &observed(3, Some(settled(5)), false),
        );
        assert_eq!(state, State::Scaling {});
        assert_eq!(decision.actions, vec![MemcachedAction::ApplyDeployment]);
        assert_eq!(decision.transitions[0].event, "DeploymentDrifted");
    }

    #[test]
    fn stuck_rollout_is_degraded() {
        let stuck = DeploymentView {
            deadline_exceeded: true,
            available: 1,
            ..settled(3)
        };
        let (state, _) = dispatch(
            MemcachedMachine,
            State::Scaling {},
            &observed(3, Some(stuck), true),
        );
        assert_eq!(state, State::Degraded {});
    }

    #[test]
    fn deletion_cleans_up_once_finalizer_is_there() {
        let event = MemcachedEvent::Observed(Observation {
            deleting: true,
            has_finalizer: true,
            ..Observation::default()
        });
        let (state, decision) = dispatch(MemcachedMachine, State::Available {}, &event);
        assert_eq!(state, State::Deleting {});
        assert_eq!(decision.actions, vec![MemcachedAction::Cleanup]);
        let gone = MemcachedEvent::Observed(Observation {
            deleting: true,
            ..Observation::default()
        });
        let (_, decision) = dispatch(MemcachedMachine, State::Deleting {}, &gone);
        assert!(decision.actions.is_empty());
    }

    #[test]
    fn desired_deployment_follows_the_spec() {
        let deployment = desired_deployment(&memcached(3), "memcached:test");
        let spec = deployment.spec.as_ref().unwrap();
        assert_eq!(spec.replicas, Some(3));
        let container = &spec.template.spec.as_ref().unwrap().containers[0];
        assert_eq!(
            container.command.as_ref().unwrap().join(" "),
            "memcached -m=64 -o modern -v"
        );
        assert_eq!(container.image.as_deref(), Some("memcached:test"));
        assert_eq!(deployment.owner_references()[0].uid, "uid-1");
        assert_eq!(deployment.labels()["app.kubernetes.io/instance"], "cache");
    }

    #[test]
    fn drift_detection() {
        let desired = desired_deployment(&memcached(3), "memcached:test");
        assert!(in_sync(&desired, &desired));
        let mut scaled = desired.clone();
        scaled.spec.as_mut().unwrap().replicas = Some(7);
        assert!(!in_sync(&scaled, &desired));
        let mut reimaged = desired.clone();
        reimaged
            .spec
            .as_mut()
            .unwrap()
            .template
            .spec
            .as_mut()
            .unwrap()
            .containers[0]
            .image = Some("evil".into());
        assert!(!in_sync(&reimaged, &desired));
        // an argument or a variable added beside the command is drift too (it changes what runs)
        fn container(d: &mut Deployment) -> &mut Container {
            &mut d
                .spec
                .as_mut()
                .unwrap()
                .template
                .spec
                .as_mut()
                .unwrap()
                .containers[0]
        }
        let mut argued = desired.clone();
        container(&mut argued).args = Some(vec!["-c".into(), "4096".into()]);
        assert!(!in_sync(&argued, &desired));
        let mut with_env = desired.clone();
        container(&mut with_env).env = Some(vec![EnvVar {
            name: "X".into(),
            ..EnvVar::default()
        }]);
        assert!(!in_sync(&with_env, &desired));
        // as the API server returns it: the empty lists dropped
        let mut stored = desired.clone();
        container(&mut stored).args = None;
        container(&mut stored).env = None;
        assert!(in_sync(&stored, &desired));
    }
}
