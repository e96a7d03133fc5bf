//! Erus created from Deployment annotations: `mtsre.meitu.com/eru: "true"` asks for an Eru named
//! after the Deployment, owned by it and labelled as managed by the operator; its schedule and
//! time zone come from `mtsre.meitu.com/eru-schedule` and `mtsre.meitu.com/eru-timezone` (or
//! `--default-schedule`); `mtsre.meitu.com/eru-suspend: "true"` suspends it. Removing the
//! annotation, or any value but "true", deletes that Eru. A user-made Eru of the same name is never
//! touched: the conflict is reported with an Event. Such Events (and `EruInvalid`, for annotations
//! the CRD schema refuses) are emitted when the problem appears or changes, not on every update of
//! the Deployment's status; a refused apply is not retried until the annotations change.

use std::{
    collections::{BTreeMap, HashMap},
    future::Future,
    hash::{DefaultHasher, Hash, Hasher},
    sync::{Arc, Mutex},
};

use k8s_openapi::api::apps::v1::Deployment;
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, ObjectMeta, Patch, PatchParams},
    runtime::{
        Controller,
        controller::Action,
        events::EventType,
        reflector::{ObjectRef, Store},
    },
};
use tokio::sync::watch;
use tracing::info;

use super::{
    AUTO_ANNOTATION, AUTO_SCHEDULE_ANNOTATION, AUTO_SUSPEND_ANNOTATION, AUTO_TIMEZONE_ANNOTATION,
    DEFAULT_STARTING_DEADLINE_SECONDS, Eru, EruSpec, Target, TargetKind,
};
use crate::{
    Result,
    runtime::{
        Context, MANAGER, drive, shutdown_requested,
        watch::{Shared, Synced, only_changes},
    },
};

/// Label marking Erus the operator created.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", MANAGER);

/// What to do about one Deployment's automatic Eru.
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

fn is_ours(eru: &Eru, deployment: &Deployment) -> bool {
    eru.labels().get(MANAGED_BY.0).map(String::as_str) == Some(MANAGED_BY.1)
        && eru
            .owner_references()
            .iter()
            .any(|o| Some(&o.uid) == deployment.meta().uid.as_ref())
}

/// The automatic Eru a Deployment asks for.
pub fn desired(deployment: &Deployment, default_schedule: &str) -> Eru {
    let annotations = deployment.annotations();
    let spec = EruSpec {
        schedule: annotations
            .get(AUTO_SCHEDULE_ANNOTATION)
            .cloned()
            .unwrap_or_else(|| default_schedule.to_string()),
        time_zone: annotations.get(AUTO_TIMEZONE_ANNOTATION).cloned(),
        target: Target {
            kind: TargetKind::Deployment,
            name: deployment.name_any(),
        },
        suspend: annotations.get(AUTO_SUSPEND_ANNOTATION).map(String::as_str) == Some("true"),
        starting_deadline_seconds: DEFAULT_STARTING_DEADLINE_SECONDS,
        rollout_timeout_seconds: None,
        jitter_seconds: None,
        blackouts: Vec::new(),
        dry_run: false,
    };
    let mut eru = Eru::new(&deployment.name_any(), spec);
    eru.metadata = ObjectMeta {
        name: Some(deployment.name_any()),
        namespace: deployment.namespace(),
        labels: Some(BTreeMap::from([(
            MANAGED_BY.0.to_string(),
            MANAGED_BY.1.to_string(),
        )])),
        owner_references: deployment.controller_owner_ref(&()).map(|o| vec![o]),
        ..ObjectMeta::default()
    };
    eru
}

/// Decides what to do for `deployment`, given the Eru of the same name if one exists.
pub fn decide(deployment: &Deployment, existing: Option<&Eru>, default_schedule: &str) -> AutoAction {
    let wanted = deployment.annotations().get(AUTO_ANNOTATION).map(String::as_str) == Some("true");
    match existing {
        Some(eru) if !is_ours(eru, deployment) => {
            if wanted {
                AutoAction::Conflict(format!(
                    "an Eru named {} already exists and is not managed by the operator; it is left as it is",
                    eru.name_any()
                ))
            } else {
                AutoAction::Nothing
            }
        }
        Some(eru) if wanted => {
            let want = desired(deployment, default_schedule);
            if eru.spec == want.spec {
                AutoAction::Nothing
            } else {
                AutoAction::Apply(Box::new(want))
            }
        }
        Some(_) => AutoAction::Delete,
        None if wanted => AutoAction::Apply(Box::new(desired(deployment, default_schedule))),
        None => AutoAction::Nothing,
    }
}

struct AutoContext {
    ctx: Arc<Context>,
    erus: Store<Eru>,
    erus_synced: Synced,
    /// Per Deployment uid, the problem last reported (a conflict, or the apply the API refused):
    /// reported again only when it changes. Entries exist only while a problem does.
    reported: Mutex<HashMap<String, String>>,
}

impl AutoContext {
    /// Records `problem` for `deployment`; true if it differs from the one last reported.
    fn report(&self, deployment: &Deployment, problem: String) -> bool {
        let uid = deployment.uid().unwrap_or_default();
        let mut reported = self.reported.lock().expect("reported lock");
        reported.insert(uid, problem.clone()).as_ref() != Some(&problem)
    }

    /// Forgets what was reported for `deployment` (the problem is gone).
    fn resolved(&self, deployment: &Deployment) {
        let uid = deployment.uid().unwrap_or_default();
        self.reported.lock().expect("reported lock").remove(&uid);
    }
}

/// The controller that keeps automatic Erus in line with Deployment annotations, on the shared
/// Deployment and Eru caches. A Deployment is reconciled when its `mtsre.meitu.com/eru*`
/// annotations change (not on every status update), and when its automatic Eru is edited or
/// deleted.
pub fn controller(
    ctx: Arc<Context>,
    shutdown: watch::Receiver<bool>,
    deployments: &Shared<Deployment>,
    erus: &mut Shared<Eru>,
) -> (impl Future<Output = ()> + use<>, impl Future<Output = ()> + use<>) {
    let annotations_change = only_changes(deployments.subscribe(), |d: &Deployment| {
        let mut hasher = DefaultHasher::new();
        d.annotations()
            .iter()
            .filter(|(k, _)| k.starts_with(AUTO_ANNOTATION))
            .for_each(|entry| entry.hash(&mut hasher));
        hasher.finish()
    });
    let spec_changes = only_changes(erus.subscribe(), |eru: &Eru| {
        eru.metadata.generation.unwrap_or(0) as u64
    });
    // an automatic Eru is named after its Deployment: a deleted one asks that Deployment again
    let deleted = futures::stream::unfold(erus.deletions(), |mut gone| async move {
        let g = gone.recv().await?;
        Some((ObjectRef::<Deployment>::new(&g.name).within(&g.namespace), gone))
    });
    let controller = Controller::for_shared_stream(annotations_change, deployments.store.clone())
        .owns_shared_stream(spec_changes)
        .reconcile_on(deleted)
        .graceful_shutdown_on(shutdown_requested(shutdown));
    let synced = {
        let (deployments_synced, erus_synced) = (deployments.synced.clone(), erus.synced.clone());
        async move {
            futures::join!(deployments_synced.wait(), erus_synced.wait());
        }
    };
    let context = Arc::new(AutoContext {
        ctx,
        erus: erus.store.clone(),
        erus_synced: erus.synced.clone(),
        reported: Mutex::default(),
    });
    let run = drive(
        controller,
        "EruAutoCreate",
        context.ctx.clone(),
        context,
        reconcile,
    );
    (run, synced)
}

async fn reconcile(deployment: Arc<Deployment>, context: Arc<AutoContext>) -> Result<Action> {
    let ctx = &context.ctx;
    // an unsynced Eru cache would hide a user's Eru, which must never be overwritten
    context.erus_synced.wait().await;
    if deployment.meta().deletion_timestamp.is_some() {
        context.resolved(&deployment);
        return Ok(Action::await_change()); // its Eru goes with it (owner reference)
    }
    let namespace = deployment.namespace().unwrap_or_default();
    let name = deployment.name_any();
    let existing = context.erus.get(&ObjectRef::new(&name).within(&namespace));
    let api: Api<Eru> = ctx.api(&namespace);
    match decide(&deployment, existing.as_deref(), &ctx.settings.default_schedule) {
        AutoAction::Apply(eru) => {
            // an apply the API refused is not retried until the annotations (the spec) change
            let attempt = format!("refused:{}", serde_json::to_string(&eru.spec)?);
            let refused_before = context
                .reported
                .lock()
                .expect("reported lock")
                .get(&deployment.uid().unwrap_or_default())
                .is_some_and(|p| p.starts_with(&attempt));
            if refused_before {
                return Ok(Action::await_change());
            }
            match api
                .patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&*eru))
                .await
            {
                Ok(_) => {
                    context.resolved(&deployment);
                    info!(deployment = %name, schedule = %eru.spec.schedule, "automatic Eru applied")
                }
                Err(kube::Error::Api(status)) if status.code == 422 || status.code == 400 => {
                    // the annotation's schedule or time zone is refused by the CRD schema
                    let note = format!("cannot create Eru {name} from annotations: {}", status.message);
                    if context.report(&deployment, format!("{attempt} {note}")) {
                        ctx.publish(
                            deployment.as_ref(),
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
            Ok(_) => info!(deployment = %name, "automatic Eru deleted"),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => return Err(e.into()),
        },
        AutoAction::Conflict(note) => {
            if context.report(&deployment, format!("conflict:{note}")) {
                ctx.publish(
                    deployment.as_ref(),
                    EventType::Warning,
                    "EruConflict",
                    "AutoCreate",
                    Some(note),
                )
            }
        }
        AutoAction::Nothing => context.resolved(&deployment),
    }
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::DEFAULT_SCHEDULE;

    fn deployment(annotations: serde_json::Value) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "dep-uid", "annotations": annotations},
            "spec": {"selector": {}, "template": {}}
        }))
        .unwrap()
    }

    #[test]
    fn annotated_deployment_gets_an_owned_labelled_eru() {
        let d = deployment(
            json!({AUTO_ANNOTATION: "true", AUTO_SCHEDULE_ANNOTATION: "0 4 * * *", AUTO_TIMEZONE_ANNOTATION: "Asia/Shanghai"}),
        );
        let AutoAction::Apply(eru) = decide(&d, None, DEFAULT_SCHEDULE) else {
            panic!("expected Apply")
        };
        assert_eq!(eru.spec.schedule, "0 4 * * *");
        assert_eq!(eru.spec.time_zone.as_deref(), Some("Asia/Shanghai"));
        assert_eq!(
            eru.spec.target,
            Target {
                kind: TargetKind::Deployment,
                name: "web".into()
            }
        );
        assert_eq!(eru.owner_references()[0].uid, "dep-uid");
        assert_eq!(eru.labels()[MANAGED_BY.0], MANAGER);
        assert!(is_ours(&eru, &d));
    }

    #[test]
    fn default_schedule_and_updates() {
        let d = deployment(json!({AUTO_ANNOTATION: "true"}));
        let eru = desired(&d, DEFAULT_SCHEDULE);
        // the Eru keeps the H: the controller resolves it from the Eru's namespace/name
        assert_eq!(eru.spec.schedule, "H 3 * * *");
        assert_eq!(crate::eru::schedule::validate(DEFAULT_SCHEDULE, None), Ok(()));
        assert_eq!(decide(&d, Some(&eru), DEFAULT_SCHEDULE), AutoAction::Nothing);
        let edited = deployment(json!({AUTO_ANNOTATION: "true", AUTO_SCHEDULE_ANNOTATION: "*/5 * * * *"}));
        assert!(
            matches!(decide(&edited, Some(&eru), DEFAULT_SCHEDULE), AutoAction::Apply(e) if e.spec.schedule == "*/5 * * * *")
        );
    }

    #[test]
    fn the_suspend_annotation_suspends_the_automatic_eru() {
        let d = deployment(json!({AUTO_ANNOTATION: "true", AUTO_SUSPEND_ANNOTATION: "true"}));
        assert!(desired(&d, DEFAULT_SCHEDULE).spec.suspend);
        let d = deployment(json!({AUTO_ANNOTATION: "true", AUTO_SUSPEND_ANNOTATION: "yes"}));
        assert!(
            !desired(&d, DEFAULT_SCHEDULE).spec.suspend,
            "only \"true\" suspends"
        );
    }

    #[test]
    fn removing_or_changing_the_annotation_deletes_ours() {
        let eru = desired(&deployment(json!({AUTO_ANNOTATION: "true"})), DEFAULT_SCHEDULE);
        assert_eq!(
            decide(&deployment(json!({})), Some(&eru), DEFAULT_SCHEDULE),
            AutoAction::Delete
        );
        assert_eq!(
            decide(
                &deployment(json!({AUTO_ANNOTATION: "false"})),
                Some(&eru),
                DEFAULT_SCHEDULE
            ),
            AutoAction::Delete
        );
        assert_eq!(
            decide(&deployment(json!({})), None, DEFAULT_SCHEDULE),
            AutoAction::Nothing
        );
    }

    #[test]
    fn a_user_made_eru_is_never_overwritten_or_deleted() {
        let spec = EruSpec {
            schedule: "0 1 * * *".into(),
            time_zone: None,
            target: Target {
                kind: TargetKind::Deployment,
                name: "web".into(),
            },
            suspend: false,
            starting_deadline_seconds: 300,
            rollout_timeout_seconds: None,
            jitter_seconds: None,
            blackouts: Vec::new(),
            dry_run: false,
        };
        let user_made = Eru::new("web", spec);
        let d = deployment(json!({AUTO_ANNOTATION: "true"}));
        assert!(matches!(
            decide(&d, Some(&user_made), DEFAULT_SCHEDULE),
            AutoAction::Conflict(_)
        ));
        assert_eq!(
            decide(&deployment(json!({})), Some(&user_made), DEFAULT_SCHEDULE),
            AutoAction::Nothing
        );
    }
}
