//! Unit tests of the target views: gates, rollout verdicts and the slot a template carries.

use chrono::{Duration, TimeZone};
use serde_json::json;

use super::*;
use crate::eru::core::{messages::Gate, target::Verdict};

fn t(s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, 3, 0, s).unwrap()
}

fn deployment(annotation: Option<&str>, status: serde_json::Value) -> Deployment {
    let annotations = annotation.map(|a| json!({ RESTARTED_AT_ANNOTATION: a }));
    serde_json::from_value(json!({
        "metadata": {"name": "web", "generation": 2},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"annotations": annotations}, "spec": {"containers": []}}
        },
        "status": status
    }))
    .unwrap()
}

fn settled() -> serde_json::Value {
    json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3})
}

#[test]
fn settled_deployment_is_open_and_done() {
    let view = view_deployment(&deployment(Some("2026-11-22T03:00:10Z"), settled()));
    assert_eq!(view.template_slot, Some(t(10)));
    assert_eq!(view.gate(), Gate::Open);
    assert_eq!(
        view.verdict(t(10), t(10), t(20), Duration::seconds(600)),
        Verdict::Done
    );
    // the template carries another slot: this restart's rollout has not been seen yet
    assert_eq!(
        view.verdict(t(20), t(20), t(21), Duration::seconds(600)),
        Verdict::Progressing
    );
}

#[test]
fn old_replicas_or_stale_generation_are_not_done() {
    let mut status = settled();
    status["replicas"] = json!(4);
    let view = view_deployment(&deployment(Some("2026-11-22T03:00:10Z"), status));
    assert_eq!(view.gate(), Gate::Unhealthy);
    assert_eq!(
        view.verdict(t(10), t(10), t(20), Duration::seconds(600)),
        Verdict::Progressing
    );
    let mut stale = settled();
    stale["observedGeneration"] = json!(1);
    assert!(!view_deployment(&deployment(Some("2026-11-22T03:00:10Z"), stale)).settled);
}

#[test]
fn deadline_and_timeout_fail() {
    let mut status = settled();
    status["availableReplicas"] = json!(1);
    status["conditions"] =
        json!([{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]);
    let view = view_deployment(&deployment(Some("2026-11-22T03:00:10Z"), status));
    assert!(matches!(
        view.verdict(t(10), t(10), t(20), Duration::seconds(600)),
        Verdict::Failed(_)
    ));
    let slow = view_deployment(&deployment(
        Some("2026-11-22T03:00:10Z"),
        json!({"observedGeneration": 2}),
    ));
    assert_eq!(
        slow.verdict(t(10), t(10), t(15), Duration::seconds(30)),
        Verdict::Progressing
    );
    assert!(matches!(
        slow.verdict(t(10), t(10), t(50), Duration::seconds(30)),
        Verdict::Failed(_)
    ));
}

#[test]
fn paused_is_gated_first() {
    let mut d = deployment(None, settled());
    d.spec.as_mut().unwrap().paused = Some(true);
    assert_eq!(view_deployment(&d).gate(), Gate::Paused);
    assert_eq!(view_deployment(&d).rollout_timeout_seconds, 600);
}

fn statefulset(strategy: serde_json::Value, status: serde_json::Value) -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "generation": 3},
        "spec": {
            "replicas": 2,
            "serviceName": "web",
            "selector": {"matchLabels": {"app": "web"}},
            "updateStrategy": strategy,
            "template": {"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: "2026-11-22T03:00:10Z"}},
                         "spec": {"containers": []}}
        },
        "status": status
    }))
    .unwrap()
}

fn statefulset_settled() -> serde_json::Value {
    json!({"observedGeneration": 3, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2,
           "availableReplicas": 2, "currentReplicas": 2,
           "currentRevision": "web-7f9c", "updateRevision": "web-7f9c"})
}

#[test]
fn statefulset_settles_on_its_own_status() {
    let rolling = json!({"type": "RollingUpdate"});
    let view = view_statefulset(&statefulset(rolling.clone(), statefulset_settled()));
    assert_eq!(view.template_slot, Some(t(10)));
    assert_eq!(view.gate(), Gate::Open);
    assert_eq!(view.rollout_timeout_seconds, DEFAULT_ROLLOUT_TIMEOUT_SECONDS);
    assert_eq!(
        view.verdict(t(10), t(10), t(20), Duration::seconds(600)),
        Verdict::Done
    );
    // each of these means the rollout is still going (or the controller has not looked)
    for (field, value) in [
        ("observedGeneration", json!(2)),
        ("updateRevision", json!("web-85d1")),
        ("updatedReplicas", json!(1)),
        ("replicas", json!(3)),
        ("readyReplicas", json!(1)),
        ("availableReplicas", json!(1)),
    ] {
        let mut status = statefulset_settled();
        status[field] = value;
        let view = view_statefulset(&statefulset(rolling.clone(), status));
        assert!(!view.settled, "{field}");
        assert_eq!(view.gate(), Gate::Unhealthy, "{field}");
        assert_eq!(
            view.verdict(t(10), t(10), t(20), Duration::seconds(600)),
            Verdict::Progressing,
            "{field}"
        );
    }
    // a revision the controller has not set yet is not compared
    let mut status = statefulset_settled();
    status.as_object_mut().unwrap().remove("currentRevision");
    assert!(view_statefulset(&statefulset(rolling, status)).settled);
    // no status at all: a new StatefulSet
    assert!(!view_statefulset(&statefulset(json!(null), json!(null))).settled);
}

#[test]
fn statefulset_on_delete_or_partitioned_is_not_rollable() {
    let on_delete = view_statefulset(&statefulset(json!({"type": "OnDelete"}), statefulset_settled()));
    assert_eq!(on_delete.gate(), Gate::NotRollable);
    assert_eq!(
        on_delete.gate_note().as_deref(),
        Some("StatefulSet web uses updateStrategy OnDelete: a pod-template change rolls no pod")
    );
    let partitioned = view_statefulset(&statefulset(
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}),
        statefulset_settled(),
    ));
    assert_eq!(partitioned.gate(), Gate::NotRollable);
    assert_eq!(
        partitioned.not_rollable.as_deref(),
        Some(
            "StatefulSet web uses updateStrategy RollingUpdate with partition 1: \
             pods below ordinal 1 would not be restarted"
        )
    );
    // partition 0, or one not above the first ordinal, rolls every pod
    let zero = view_statefulset(&statefulset(
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
        statefulset_settled(),
    ));
    assert_eq!(zero.gate(), Gate::Open);
    let mut from_five = statefulset(
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 5}}),
        statefulset_settled(),
    );
    from_five.spec.as_mut().unwrap().ordinals = serde_json::from_value(json!({"start": 5})).unwrap();
    assert_eq!(view_statefulset(&from_five).gate(), Gate::Open);
    // made not rollable during our rollout: it cannot finish, so it fails at once
    let mut status = statefulset_settled();
    status["updateRevision"] = json!("web-85d1");
    let stuck = view_statefulset(&statefulset(json!({"type": "OnDelete"}), status));
    assert!(matches!(
        stuck.verdict(t(10), t(10), t(11), Duration::seconds(600)),
        Verdict::Failed(reason) if reason.contains("OnDelete")
    ));
    // not ours: the gate says it, the verdict does not
    assert_eq!(
        stuck.verdict(t(20), t(20), t(21), Duration::seconds(600)),
        Verdict::Progressing
    );
}

fn daemonset(strategy: serde_json::Value, status: serde_json::Value) -> DaemonSet {
    serde_json::from_value(json!({
        "metadata": {"name": "agent", "generation": 2},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "updateStrategy": strategy,
            "template": {"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: "2026-11-22T03:00:10Z"}},
                         "spec": {"containers": []}}
        },
        "status": status
    }))
    .unwrap()
}

fn daemonset_settled() -> serde_json::Value {
    json!({"observedGeneration": 2, "desiredNumberScheduled": 3, "currentNumberScheduled": 3,
           "updatedNumberScheduled": 3, "numberAvailable": 3, "numberReady": 3,
           "numberMisscheduled": 0})
}

#[test]
fn daemonset_settles_on_its_own_status() {
    let rolling = json!({"type": "RollingUpdate"});
    let view = view_daemonset(&daemonset(rolling.clone(), daemonset_settled()));
    assert_eq!(view.gate(), Gate::Open);
    assert_eq!(
        view.verdict(t(10), t(10), t(20), Duration::seconds(600)),
        Verdict::Done
    );
    for (field, value) in [
        ("observedGeneration", json!(1)),
        ("updatedNumberScheduled", json!(2)),
        ("numberAvailable", json!(2)),
        ("numberReady", json!(2)),
        ("numberUnavailable", json!(1)),
        ("desiredNumberScheduled", json!(4)),
    ] {
        let mut status = daemonset_settled();
        status[field] = value;
        let view = view_daemonset(&daemonset(rolling.clone(), status));
        assert!(!view.settled, "{field}");
        assert_eq!(view.gate(), Gate::Unhealthy, "{field}");
    }
    let mut status = daemonset_settled();
    status["numberUnavailable"] = json!(0);
    assert!(view_daemonset(&daemonset(rolling.clone(), status)).settled);
    // past the default timeout (no progress deadline of its own): failed
    let mut status = daemonset_settled();
    status["numberReady"] = json!(1);
    let slow = view_daemonset(&daemonset(rolling, status));
    let timeout = Duration::seconds(slow.rollout_timeout_seconds);
    assert!(matches!(
        slow.verdict(t(10), t(10), t(10) + timeout + Duration::seconds(1), timeout),
        Verdict::Failed(reason) if reason.contains("600 s")
    ));
}

#[test]
fn daemonset_on_delete_is_not_rollable() {
    let view = view_daemonset(&daemonset(json!({"type": "OnDelete"}), daemonset_settled()));
    assert_eq!(view.gate(), Gate::NotRollable);
    assert_eq!(
        view.gate_note().as_deref(),
        Some("DaemonSet agent uses updateStrategy OnDelete: a pod-template change rolls no pod")
    );
    assert_eq!(
        view.gate().reason(),
        Some(crate::eru::core::ledger::Reason::TargetNotRollable)
    );
}

#[test]
fn workloads_that_await_their_controller() {
    let mut status = daemonset_settled();
    status["observedGeneration"] = json!(1);
    assert!(daemonset(json!(null), status).awaits_controller());
    assert!(!daemonset(json!(null), daemonset_settled()).awaits_controller());
    assert!(
        !daemonset(json!(null), json!(null)).awaits_controller(),
        "new: never observed"
    );
    let mut status = statefulset_settled();
    status["observedGeneration"] = json!(2);
    assert!(statefulset(json!(null), status).awaits_controller());
}

/// A Deployment whose template carries `annotation`, with these managedFields.
fn managed(annotation: Option<&str>, fields: serde_json::Value) -> Deployment {
    let annotations = annotation.map(|a| json!({ RESTARTED_AT_ANNOTATION: a }));
    serde_json::from_value(json!({
        "metadata": {"name": "web", "generation": 2, "managedFields": fields},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"annotations": annotations}, "spec": {"containers": []}}
        },
        "status": settled()
    }))
    .unwrap()
}

fn entry(manager: &str, second: u32, fields: serde_json::Value) -> serde_json::Value {
    json!({"manager": manager, "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
           "time": t(second).to_rfc3339_opts(chrono::SecondsFormat::Secs, true), "fieldsV1": fields})
}

fn owns_slot() -> serde_json::Value {
    json!({"f:spec": {"f:template": {"f:metadata": {"f:annotations": {"f:mtsre.meitu.com/restartedAt": {}}}}}})
}

/// Reverts: another manager replaced or removed the slot after the patch is named (also from a
/// lean cache); another slot of this operator's (another Eru) is none; during the rollout, a
/// template without the slot and no writer since the patch may be a cache that has not seen it.
#[test]
fn a_restart_another_manager_undid_is_told_with_who_and_when() {
    let mut replaced = managed(
        Some("2026-11-22T03:00:01Z"),
        json!([
            entry(
                "kubectl-create",
                0,
                json!({"f:spec": {"f:replicas": {}, "f:template": {}}})
            ),
            entry("argocd-controller", 30, owns_slot()),
            entry("kubectl-scale", 40, json!({"f:spec": {"f:replicas": {}}})),
        ]),
    );
    // the patch landed at generation 2; the cache shows a later one
    replaced.metadata.generation = Some(3);
    let revert = view_deployment(&replaced)
        .reverted(t(10), t(10), Some(2), false)
        .unwrap();
    assert_eq!(
        (revert.by.as_deref(), revert.at, revert.carries),
        (Some("argocd-controller"), Some(t(30)), Some(t(1))),
        "the newest template writer, not a later replicas-only writer"
    );
    assert_eq!(
        revert.text(t(10)),
        "reverted: the pod template's mtsre.meitu.com/restartedAt (2026-11-22T03:00:10Z) was replaced by \
         2026-11-22T03:00:01Z by argocd-controller at 2026-11-22T03:00:30Z"
    );
    let mut lean = replaced.clone();
    lean_deployment(&mut lean);
    assert_eq!(
        view_deployment(&lean).reverted(t(10), t(10), Some(2), false),
        Some(revert)
    );
    assert!(
        (lean.metadata.managed_fields.as_ref().unwrap().iter())
            .all(|e| e.manager.as_deref() == Some("argocd-controller")),
        "of the others, only the template writer is kept"
    );

    // another Eru's slot, which the restart manager owns, even with a newer template writer (an
    // image changed): no revert
    let other_eru = managed(
        Some("2026-11-22T03:00:20Z"),
        json!([
            entry(RESTART_MANAGER, 20, owns_slot()),
            entry(
                "argocd-controller",
                40,
                json!({"f:spec": {"f:template": {"f:spec": {}}}})
            ),
        ]),
    );
    assert_eq!(
        view_deployment(&other_eru).reverted(t(10), t(10), None, true),
        None
    );
    // removed, no writer since the patch: unknown while rolling out, a revert once it ended
    let removed = managed(
        None,
        json!([entry("kubectl-create", 0, json!({"f:spec": {"f:template": {}}}))]),
    );
    let view = view_deployment(&removed);
    assert_eq!(view.reverted(t(10), t(10), None, false), None);
    let revert = view.reverted(t(10), t(10), None, true).unwrap();
    assert_eq!((revert.by.as_deref(), revert.carries), (None, None));
    assert!(
        revert
            .text(t(10))
            .ends_with("was removed (the managedFields name no writer of it)")
    );
    // still carried: nothing
    let kept = managed(
        Some("2026-11-22T03:00:10Z"),
        json!([entry("argocd-controller", 30, owns_slot())]),
    );
    assert_eq!(view_deployment(&kept).reverted(t(10), t(10), Some(2), true), None);
}

/// A write in the same second as the patch but before it (managedFields times are whole
/// seconds) while the cache has not seen the patch: no revert — the cache's generation is not
/// past the patch's. Once it is (the same write, then the annotation removed), a revert.
#[test]
fn a_write_just_before_the_patch_is_no_revert_while_the_cache_is_behind() {
    // the first restart ever: the template carried no slot before it; another manager wrote the
    // template at 03:00:10 (the same second as the patch at 03:00:10.5)
    let mut behind = managed(
        None,
        json!([entry(
            "kubectl-edit",
            10,
            json!({"f:spec": {"f:template": {"f:spec": {}}}})
        )]),
    );
    behind.metadata.generation = Some(4);
    let patched_at = t(10) + chrono::Duration::milliseconds(500);
    // the patch's answer said generation 5: the cache (4) is behind it
    assert_eq!(
        view_deployment(&behind).reverted(t(10), patched_at, Some(5), false),
        None
    );
    let mut undone = behind.clone();
    undone.metadata.generation = Some(6);
    let revert = view_deployment(&undone)
        .reverted(t(10), patched_at, Some(5), false)
        .unwrap();
    assert_eq!(
        (revert.by.as_deref(), revert.carries),
        (Some("kubectl-edit"), None)
    );
}
