//! Unit tests of automatic Erus: which workloads get one, the Eru each gets, and annotation edits.

use crate::runtime::lean::{DaemonSet, Deployment, StatefulSet};
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

fn statefulset(annotations: serde_json::Value) -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "sts-uid", "annotations": annotations},
        "spec": {"selector": {}, "template": {}}
    }))
    .unwrap()
}

fn daemonset(annotations: serde_json::Value) -> DaemonSet {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "ds-uid", "annotations": annotations},
        "spec": {"selector": {}, "template": {}}
    }))
    .unwrap()
}

/// An Eru as the cache holds it.
fn cached(eru: &Eru) -> CachedEru {
    let mut cached: CachedEru = serde_json::from_value(serde_json::to_value(eru).unwrap()).unwrap();
    cached.lean();
    cached
}

/// The Erus of a namespace, by name, as cached.
fn erus(erus: &[&Eru]) -> impl Fn(&str) -> Option<Arc<CachedEru>> {
    let by_name: HashMap<String, Arc<CachedEru>> =
        erus.iter().map(|e| (e.name_any(), Arc::new(cached(e)))).collect();
    move |name| by_name.get(name).cloned()
}

/// [`decide`] for a workload whose only possible Eru is `existing`, named like it.
fn decide_one<K: Workload>(workload: &K, existing: Option<&Eru>) -> AutoAction {
    let (name, action) = decide(
        workload,
        erus(&existing.into_iter().collect::<Vec<_>>()),
        DEFAULT_SCHEDULE,
    );
    assert_eq!(name, workload.name_any());
    action
}

/// The automatic Eru of `workload`, as applied.
fn applied<K: Workload>(workload: &K, existing: &[&Eru]) -> Eru {
    match decide(workload, erus(existing), DEFAULT_SCHEDULE) {
        (name, AutoAction::Apply(eru)) => {
            assert_eq!(eru.name_any(), name);
            *eru
        }
        other => panic!("expected Apply, got {other:?}"),
    }
}

#[test]
fn annotated_deployment_gets_an_owned_labelled_eru() {
    let d = deployment(
        json!({AUTO_ANNOTATION: "true", AUTO_SCHEDULE_ANNOTATION: "0 4 * * *", AUTO_TIMEZONE_ANNOTATION: "Asia/Shanghai"}),
    );
    let AutoAction::Apply(eru) = decide_one(&d, None) else {
        panic!("expected Apply")
    };
    assert_eq!(eru.name_any(), "web");
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
    assert_eq!(eru.owner_references()[0].kind, "Deployment");
    assert_eq!(eru.labels()[MANAGED_BY.0], MANAGER);
    assert!(is_ours(&cached(&eru), &d));
}

#[test]
fn annotated_statefulsets_and_daemonsets_get_theirs() {
    let annotations = json!({AUTO_ANNOTATION: "true", AUTO_SCHEDULE_ANNOTATION: "0 4 * * *"});
    let sts = statefulset(annotations.clone());
    let eru = applied(&sts, &[]);
    assert_eq!(eru.name_any(), "web");
    assert_eq!(eru.spec.target.kind, TargetKind::StatefulSet);
    assert_eq!(eru.spec.target.key(), "StatefulSet/web");
    assert_eq!(eru.owner_references()[0].kind, "StatefulSet");
    assert_eq!(eru.owner_references()[0].uid, "sts-uid");
    assert_eq!(decide_one(&sts, Some(&eru)), AutoAction::Nothing);
    assert_eq!(
        decide_one(&statefulset(json!({})), Some(&eru)),
        AutoAction::Delete
    );
    let ds = daemonset(annotations);
    let eru = applied(&ds, &[]);
    assert_eq!(eru.spec.target.kind, TargetKind::DaemonSet);
    assert_eq!(eru.owner_references()[0].kind, "DaemonSet");
    assert_eq!(decide_one(&ds, Some(&eru)), AutoAction::Nothing);
}

#[test]
fn workloads_of_one_name_get_one_eru_each_and_keep_it() {
    let on = json!({AUTO_ANNOTATION: "true"});
    let (d, sts, ds) = (deployment(on.clone()), statefulset(on.clone()), daemonset(on));
    // the Deployment asked first: it has `web`, the StatefulSet gets `web-statefulset`
    let web = applied(&d, &[]);
    let web_sts = applied(&sts, &[&web]);
    assert_eq!(web_sts.name_any(), "web-statefulset");
    assert_eq!(web_sts.spec.target.kind, TargetKind::StatefulSet);
    let web_ds = applied(&ds, &[&web, &web_sts]);
    assert_eq!(web_ds.name_any(), "web-daemonset");
    // each keeps its own: nothing to do, for each, with all three present
    let all = [&web, &web_sts, &web_ds];
    assert_eq!(
        decide(&d, erus(&all), DEFAULT_SCHEDULE),
        ("web".into(), AutoAction::Nothing)
    );
    assert_eq!(
        decide(&sts, erus(&all), DEFAULT_SCHEDULE),
        ("web-statefulset".into(), AutoAction::Nothing)
    );
    assert_eq!(
        decide(&ds, erus(&all), DEFAULT_SCHEDULE),
        ("web-daemonset".into(), AutoAction::Nothing)
    );
    // `web` freed: the StatefulSet keeps `web-statefulset` (an Eru is never renamed)
    assert_eq!(
        decide(&sts, erus(&[&web_sts]), DEFAULT_SCHEDULE),
        ("web-statefulset".into(), AutoAction::Nothing)
    );
    // the other way round: the StatefulSet first, then the Deployment
    let sts_first = applied(&sts, &[]);
    assert_eq!(sts_first.name_any(), "web");
    assert_eq!(applied(&d, &[&sts_first]).name_any(), "web-deployment");
    // the un-annotated StatefulSet deletes its own, never the Deployment's
    let off = statefulset(json!({}));
    assert_eq!(
        decide(&off, erus(&[&web, &web_sts]), DEFAULT_SCHEDULE),
        ("web-statefulset".into(), AutoAction::Delete)
    );
    assert_eq!(
        decide(&off, erus(&[&web]), DEFAULT_SCHEDULE),
        ("web-statefulset".into(), AutoAction::Nothing)
    );
}

#[test]
fn a_users_eru_is_a_conflict_under_either_name() {
    let user_made = |name: &str| Eru::new(name, desired(&deployment(json!({})), name, "0 1 * * *").spec);
    let sts = statefulset(json!({AUTO_ANNOTATION: "true"}));
    let (_, action) = decide(&sts, erus(&[&user_made("web")]), DEFAULT_SCHEDULE);
    assert!(
        matches!(&action, AutoAction::Conflict(note) if note.contains("not managed by the operator")),
        "{action:?}"
    );
    let web = applied(&deployment(json!({AUTO_ANNOTATION: "true"})), &[]);
    let (name, action) = decide(
        &sts,
        erus(&[&web, &user_made("web-statefulset")]),
        DEFAULT_SCHEDULE,
    );
    assert_eq!(name, "web-statefulset");
    assert!(matches!(action, AutoAction::Conflict(_)), "{action:?}");
}

#[test]
fn erus_map_to_the_workloads_they_may_belong_to() {
    let names = |eru: &str| -> Vec<String> {
        named_by::<StatefulSet>(eru, "ns")
            .into_iter()
            .map(|r| r.name)
            .collect()
    };
    assert_eq!(names("web"), ["web"]);
    assert_eq!(names("web-statefulset"), ["web-statefulset", "web"]);
    assert_eq!(names("web-daemonset"), ["web-daemonset"]);
    assert_eq!(names("-statefulset"), ["-statefulset"]);
}

#[test]
fn default_schedule_and_updates() {
    let d = deployment(json!({AUTO_ANNOTATION: "true"}));
    let eru = desired(&d, "web", DEFAULT_SCHEDULE);
    // the Eru keeps the H: the controller resolves it from the Eru's namespace/name
    assert_eq!(eru.spec.schedule, "H 3 * * *");
    assert_eq!(
        crate::eru::core::schedule::validate(DEFAULT_SCHEDULE, None),
        Ok(())
    );
    assert_eq!(decide_one(&d, Some(&eru)), AutoAction::Nothing);
    let edited = deployment(json!({AUTO_ANNOTATION: "true", AUTO_SCHEDULE_ANNOTATION: "*/5 * * * *"}));
    assert!(
        matches!(decide_one(&edited, Some(&eru)), AutoAction::Apply(e) if e.spec.schedule == "*/5 * * * *")
    );
}

#[test]
fn the_suspend_annotation_suspends_the_automatic_eru() {
    let d = deployment(json!({AUTO_ANNOTATION: "true", AUTO_SUSPEND_ANNOTATION: "true"}));
    assert!(desired(&d, "web", DEFAULT_SCHEDULE).spec.suspend);
    let d = deployment(json!({AUTO_ANNOTATION: "true", AUTO_SUSPEND_ANNOTATION: "yes"}));
    assert!(
        !desired(&d, "web", DEFAULT_SCHEDULE).spec.suspend,
        "only \"true\" suspends"
    );
    // a note: the first 256 characters (the schema's bound), none when empty
    let long = "é".repeat(300);
    let d = deployment(
        json!({AUTO_ANNOTATION: "true", AUTO_SUSPEND_ANNOTATION: "true", AUTO_SUSPEND_NOTE_ANNOTATION: long}),
    );
    let note = desired(&d, "web", DEFAULT_SCHEDULE).spec.suspend_note.unwrap();
    assert_eq!(note, "é".repeat(256));
    let d = deployment(json!({AUTO_ANNOTATION: "true", AUTO_SUSPEND_NOTE_ANNOTATION: ""}));
    assert_eq!(desired(&d, "web", DEFAULT_SCHEDULE).spec.suspend_note, None);
}

#[test]
fn removing_or_changing_the_annotation_deletes_ours() {
    let eru = desired(
        &deployment(json!({AUTO_ANNOTATION: "true"})),
        "web",
        DEFAULT_SCHEDULE,
    );
    assert_eq!(decide_one(&deployment(json!({})), Some(&eru)), AutoAction::Delete);
    assert_eq!(
        decide_one(&deployment(json!({AUTO_ANNOTATION: "false"})), Some(&eru)),
        AutoAction::Delete
    );
    assert_eq!(decide_one(&deployment(json!({})), None), AutoAction::Nothing);
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
        suspend_note: None,
        starting_deadline_seconds: 300,
        rollout_timeout_seconds: None,
        jitter_seconds: None,
        blackouts: Vec::new(),
        dry_run: false,
        gates: None,
        need: None,
        silence: None,
        failure_policy: None,
    };
    let user_made = Eru::new("web", spec);
    let d = deployment(json!({AUTO_ANNOTATION: "true"}));
    assert!(matches!(
        decide_one(&d, Some(&user_made)),
        AutoAction::Conflict(note) if note == "an Eru named web already exists and is not managed by the operator; it is left as it is"
    ));
    assert_eq!(
        decide_one(&deployment(json!({})), Some(&user_made)),
        AutoAction::Nothing
    );
}
