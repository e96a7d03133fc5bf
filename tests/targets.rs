//! StatefulSet and DaemonSet targets end to end, against the local cluster (kwok nodes) with the
//! operator under `deploy/` RBAC: each restart lands on the pod template and its rollout is
//! judged from the kind's own status; a StatefulSet that a pod-template change would not roll
//! (`OnDelete`, a partition) is skipped `target_not_rollable` with why, and never patched; an
//! annotated StatefulSet or DaemonSet gets an automatic Eru.

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::{
    Operator, TestNamespace, client,
    eru::{create_eru, deployment, items, merge, settle, status, time},
    ledger::{Ledger, ON_SCHEDULE, Workload, check, every},
    wait_for,
};
use eru_operator::eru::{Eru, RESTART_MANAGER, RESTARTED_AT_ANNOTATION};
use k8s_openapi::{
    api::{
        apps::v1::{DaemonSet, StatefulSet},
        core::v1::{Node, Pod},
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

/// A pod template of pause containers labelled `app: <name>`, tolerating any taint.
fn template(name: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": name}},
        "spec": {
            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}],
            "tolerations": [{"operator": "Exists"}]
        }
    })
}

/// Creates a StatefulSet of `replicas` pause Pods with `extra` merged into it.
async fn statefulset(client: &Client, ns: &str, name: &str, replicas: i32, extra: Value) -> StatefulSet {
    let mut body = json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            // every revision is kept, so the ledger check can count them
            "revisionHistoryLimit": 1000,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": template(name)
        }
    });
    merge(&mut body, extra);
    let api: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
    api.create(&PostParams::default(), &serde_json::from_value(body).unwrap())
        .await
        .unwrap()
}

/// Creates a DaemonSet of pause Pods with `extra` merged into it.
async fn daemonset(client: &Client, ns: &str, name: &str, extra: Value) -> DaemonSet {
    let mut body = json!({
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}}, "template": template(name),
                 "revisionHistoryLimit": 1000}
    });
    merge(&mut body, extra);
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), ns);
    api.create(&PostParams::default(), &serde_json::from_value(body).unwrap())
        .await
        .unwrap()
}

/// Waits until the StatefulSet has `replicas` ready and available Pods of its current revision.
async fn statefulset_ready(api: &Api<StatefulSet>, name: &str, replicas: i32) {
    wait_for(
        &format!("statefulset {name} ready"),
        Duration::from_secs(60),
        || async {
            let s = api.get(name).await.ok()?.status?;
            (s.ready_replicas == Some(replicas)
                && s.available_replicas == Some(replicas)
                && s.current_revision.is_some()
                && s.current_revision == s.update_revision)
                .then_some(())
        },
    )
    .await;
}

/// The kwok Nodes of the cluster (fake nodes, where the DaemonSet's Pods must land).
async fn kwok_nodes(client: &Client) -> Vec<String> {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    nodes
        .items
        .iter()
        .filter(|n| n.annotations().get("kwok.x-k8s.io/node").map(String::as_str) == Some("fake"))
        .map(|n| n.name_any())
        .collect()
}

/// Waits until the DaemonSet runs one available Pod on every kwok Node; returns how many.
async fn daemonset_ready(client: &Client, api: &Api<DaemonSet>, name: &str) -> i32 {
    let nodes = kwok_nodes(client).await;
    assert!(!nodes.is_empty(), "the cluster has kwok nodes");
    wait_for(
        &format!("daemonset {name} on every kwok node"),
        Duration::from_secs(60),
        || async {
            let s = api.get(name).await.ok()?.status?;
            (s.desired_number_scheduled == nodes.len() as i32
                && s.number_available == Some(s.desired_number_scheduled)
                && s.number_ready == s.desired_number_scheduled)
                .then_some(s.desired_number_scheduled)
        },
    )
    .await
}

/// The slot a workload's pod template carries.
fn template_slot(meta: Option<&ObjectMeta>) -> Option<DateTime<Utc>> {
    let annotations = meta?.annotations.as_ref()?;
    Some(
        DateTime::parse_from_rfc3339(annotations.get(RESTARTED_AT_ANNOTATION)?)
            .ok()?
            .with_timezone(&Utc),
    )
}

/// Whether the restart manager has ever written to the object.
fn restart_manager_wrote(meta: &ObjectMeta) -> bool {
    meta.managed_fields
        .iter()
        .flatten()
        .any(|e| e.manager.as_deref() == Some(RESTART_MANAGER))
}

/// Waits for the Eru's status to show a succeeded restart; returns its slot.
async fn first_success(erus: &Api<Eru>, name: &str) -> DateTime<Utc> {
    wait_for(
        &format!("a succeeded restart of {name}"),
        Duration::from_secs(90),
        || async {
            status(erus, name)
                .await?
                .last_restart
                .filter(|r| r.outcome == "succeeded")
                .map(|r| r.slot)
        },
    )
    .await
}

/// The Pods of `app`, not being deleted.
async fn live_pods(pods: &Api<Pod>, app: &str) -> Vec<Pod> {
    let list = pods
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap();
    list.items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

/// When a Pod was created.
fn created(pod: &Pod) -> DateTime<Utc> {
    let t = pod.metadata.creation_timestamp.as_ref().unwrap();
    DateTime::from_timestamp(t.0.as_second(), 0).unwrap()
}

/// What the journal says of one Eru's restarts, checked against the workload: every restart is
/// journaled under `target`, each journaled patch changed the pod template once (`generation`
/// counts them), the template carries the last slot, and the last one succeeded after landing.
/// Returns when the last restart landed.
fn check_history(
    operator: &Operator,
    name: &str,
    target: &str,
    meta: &ObjectMeta,
    slot: Option<DateTime<Utc>>,
) -> DateTime<Utc> {
    let rows = items(operator, &format!("/history?name={name}&limit=1000"));
    assert!(!rows.is_empty(), "restarts of {name} journaled");
    assert!(rows.iter().all(|r| r["target"] == target), "{rows:?}");
    // the kind-qualified key filters /history
    let by_target = items(operator, &format!("/history?target={target}&limit=1000"));
    assert_eq!(by_target.len(), rows.len(), "{by_target:?}");
    let patched: Vec<&Value> = rows.iter().filter(|r| !r["patched_at"].is_null()).collect();
    assert_eq!(
        meta.generation,
        Some(1 + patched.len() as i64),
        "each journaled restart patched {target}'s template exactly once: {rows:?}"
    );
    let last = &patched[0]; // newest first
    assert_eq!(
        slot,
        Some(time(&last["slot"])),
        "the template carries the last restart's slot"
    );
    assert!(
        patched.iter().all(|r| r["outcome"] == "succeeded"),
        "every restart of {target} succeeded: {rows:?}"
    );
    let (patched_at, finished_at) = (time(&last["patched_at"]), time(&last["finished_at"]));
    assert!(finished_at >= patched_at, "{last}");
    assert!(restart_manager_wrote(meta), "the patch is the restart manager's");
    patched_at
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn statefulset_and_daemonset_restart_and_roll_out_on_their_own_status() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "targets-roll").await;
    let statefulsets: Api<StatefulSet> = Api::namespaced(client.clone(), &ns.name);
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), &ns.name);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    statefulset(
        &client,
        &ns.name,
        "web",
        2,
        json!({"spec": {"updateStrategy": {"type": "RollingUpdate"}}}),
    )
    .await;
    daemonset(&client, &ns.name, "agent", json!({})).await;
    statefulset_ready(&statefulsets, "web", 2).await;
    let scheduled = daemonset_ready(&client, &daemonsets, "agent").await;
    // the DaemonSet's Pods run on the kwok nodes
    let nodes = kwok_nodes(&client).await;
    let agents = live_pods(&pods, "agent").await;
    assert_eq!(agents.len(), scheduled as usize);
    for pod in &agents {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        assert!(node.is_some_and(|n| nodes.contains(&n)), "{:?}", pod.spec);
    }

    let operator = Operator::start(&client, &ns.name, &[]).await;
    for (name, kind, target) in [("web", "StatefulSet", "web"), ("agent", "DaemonSet", "agent")] {
        create_eru(
            &client,
            &ns.name,
            name,
            json!({"schedule": "*/10 * * * * *", "target": {"kind": kind, "name": target}}),
        )
        .await
        .unwrap();
    }
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let (web_slot, agent_slot) = futures::join!(first_success(&erus, "web"), first_success(&erus, "agent"));
    assert_eq!(web_slot.timestamp() % 10, 0, "on the schedule: {web_slot}");
    assert_eq!(agent_slot.timestamp() % 10, 0, "on the schedule: {agent_slot}");
    // stop further slots, so the workloads hold still for the checks
    let (web_settled, agent_settled) =
        futures::join!(settle(&erus, &operator, "web"), settle(&erus, &operator, "agent"));
    for (name, workload, settled) in [
        ("web", Workload::StatefulSet("web"), web_settled),
        ("agent", Workload::DaemonSet("agent"), agent_settled),
    ] {
        let window = (
            common::eru::created(&erus, name).await + chrono::Duration::seconds(1),
            settled,
        );
        check(
            &client,
            &ns.name,
            &operator,
            &Ledger {
                eru: name,
                workload,
                window,
                slots: every(10, window.0, window.1),
                journal_from: None,
                uid: None,
                journal_until: None,
                expect: Vec::new(),
            },
        )
        .await;
    }

    // the StatefulSet: every journaled patch is on its template, and its rollout is done by
    // its own status: one revision, every replica updated, ready and available, each Pod of
    // the new revision created after the last patch landed
    let sts = statefulsets.get("web").await.unwrap();
    let sts_slot = template_slot(sts.spec.as_ref().and_then(|s| s.template.metadata.as_ref()));
    let landed = check_history(&operator, "web", "StatefulSet/web", &sts.metadata, sts_slot);
    let s = sts.status.clone().unwrap();
    assert_eq!(s.observed_generation, sts.metadata.generation);
    assert_eq!(s.current_revision, s.update_revision, "{s:?}");
    assert_eq!(
        (s.updated_replicas, s.ready_replicas, s.available_replicas),
        (Some(2), Some(2), Some(2))
    );
    let web_pods = live_pods(&pods, "web").await;
    assert_eq!(web_pods.len(), 2);
    for pod in &web_pods {
        assert_eq!(
            pod.labels().get("controller-revision-hash"),
            s.update_revision.as_ref(),
            "{} of the new revision",
            pod.name_any()
        );
        assert!(
            created(pod) >= landed - chrono::Duration::seconds(1),
            "{} restarted",
            pod.name_any()
        );
    }

    // the DaemonSet: the same, by its own status and Pods
    let ds = daemonsets.get("agent").await.unwrap();
    let ds_slot = template_slot(ds.spec.as_ref().and_then(|s| s.template.metadata.as_ref()));
    let landed = check_history(&operator, "agent", "DaemonSet/agent", &ds.metadata, ds_slot);
    let s = ds.status.clone().unwrap();
    assert_eq!(s.observed_generation, ds.metadata.generation);
    assert_eq!(s.desired_number_scheduled, scheduled);
    assert_eq!(
        (s.updated_number_scheduled, s.number_available, s.number_ready),
        (Some(scheduled), Some(scheduled), scheduled)
    );
    let agents = live_pods(&pods, "agent").await;
    assert_eq!(agents.len(), scheduled as usize);
    for pod in &agents {
        let generation = pod.labels().get("pod-template-generation").cloned();
        assert_eq!(generation, ds.metadata.generation.map(|g| g.to_string()));
        assert!(
            created(pod) >= landed - chrono::Duration::seconds(1),
            "{} restarted",
            pod.name_any()
        );
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        assert!(node.is_some_and(|n| nodes.contains(&n)), "on a kwok node");
    }

    // the machine judged each rollout done, and the Erus found their targets
    for name in ["web", "agent"] {
        let transitions = items(&operator, &format!("/transitions?kind=Eru&name={name}"));
        assert!(
            transitions
                .iter()
                .any(|t| t["from"] == "RollingOut" && t["to"] == "Waiting" && t["event"] == "RolloutDone"),
            "{name}: {transitions:?}"
        );
        let s = status(&erus, name).await.unwrap();
        assert!(
            s.conditions
                .iter()
                .any(|c| c.type_ == "TargetFound" && c.status == "True"),
            "{name}: {:?}",
            s.conditions
        );
    }
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn a_statefulset_that_would_not_roll_is_skipped_with_why_and_never_patched() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "targets-notroll").await;
    let statefulsets: Api<StatefulSet> = Api::namespaced(client.clone(), &ns.name);
    statefulset(
        &client,
        &ns.name,
        "ondelete",
        1,
        json!({"spec": {"updateStrategy": {"type": "OnDelete"}}}),
    )
    .await;
    statefulset(
        &client,
        &ns.name,
        "partitioned",
        2,
        json!({"spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}}}),
    )
    .await;
    statefulset_ready(&statefulsets, "ondelete", 1).await;
    statefulset_ready(&statefulsets, "partitioned", 2).await;
    let operator = Operator::start(&client, &ns.name, &[]).await;
    for name in ["ondelete", "partitioned"] {
        create_eru(
            &client,
            &ns.name,
            name,
            json!({"schedule": "*/5 * * * * *", "target": {"kind": "StatefulSet", "name": name}}),
        )
        .await
        .unwrap();
    }
    let skipped = |name: &'static str| {
        let operator = &operator;
        async move {
            let rows = items(
                operator,
                &format!("/missed?name={name}&reason=target_not_rollable"),
            );
            (rows.len() >= 2).then_some(rows)
        }
    };
    let (ondelete, partitioned) = futures::join!(
        wait_for(
            "two target_not_rollable slots of ondelete",
            Duration::from_secs(40),
            || skipped("ondelete")
        ),
        wait_for(
            "two target_not_rollable slots of partitioned",
            Duration::from_secs(40),
            || skipped("partitioned")
        ),
    );
    for (rows, target, note) in [
        (
            &ondelete,
            "StatefulSet/ondelete",
            "StatefulSet ondelete uses updateStrategy OnDelete: a pod-template change rolls no pod".to_string(),
        ),
        (
            &partitioned,
            "StatefulSet/partitioned",
            "StatefulSet partitioned uses updateStrategy RollingUpdate with partition 1: pods below ordinal 1 \
             would not be restarted"
                .to_string(),
        ),
    ] {
        for row in rows.iter() {
            assert_eq!(row["result"], "skipped", "{row}");
            assert_eq!(row["target"], target, "{row}");
            assert_eq!(row["note"], note.as_str(), "{row}");
            assert_eq!(time(&row["slot"]).timestamp() % 5, 0, "{row}");
        }
    }
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    for name in ["ondelete", "partitioned"] {
        // never patched: no restart journaled, the template untouched, the restart manager absent
        assert!(items(&operator, &format!("/history?name={name}")).is_empty());
        let sts = statefulsets.get(name).await.unwrap();
        assert_eq!(sts.metadata.generation, Some(1), "{name} never changed");
        assert!(template_slot(sts.spec.as_ref().and_then(|s| s.template.metadata.as_ref())).is_none());
        assert!(!restart_manager_wrote(&sts.metadata), "{name}");
        let ready = status(&erus, name)
            .await
            .unwrap()
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "TargetNotRollable")
        );
        assert!(ready.message.contains(name), "{}", ready.message);
    }

    // partition 0 rolls every pod: the next slot restarts it, and the rollout succeeds
    let fixed_at = Utc::now();
    statefulsets
        .patch(
            "partitioned",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}})),
        )
        .await
        .unwrap();
    let slot = wait_for(
        "a succeeded restart of partitioned",
        Duration::from_secs(60),
        || async {
            items(&operator, "/history?name=partitioned&outcome=succeeded")
                .first()
                .map(|r| time(&r["slot"]))
        },
    )
    .await;
    assert!(
        slot > fixed_at - chrono::Duration::seconds(5),
        "{slot} after the fix at {fixed_at}"
    );
    let sts = statefulsets.get("partitioned").await.unwrap();
    assert!(template_slot(sts.spec.as_ref().and_then(|s| s.template.metadata.as_ref())) >= Some(slot));
    // the OnDelete one is still skipped, never patched
    let sts = statefulsets.get("ondelete").await.unwrap();
    assert_eq!(sts.metadata.generation, Some(1));
    assert!(items(&operator, "/history?name=ondelete").is_empty());
    const ON_SCHEDULE_OR_NOT_ROLLABLE: &[&str] =
        &["fired", "superseded", "concurrent_rollout", "target_not_rollable"];
    let second = chrono::Duration::seconds(1);
    for name in ["ondelete", "partitioned"] {
        let born = common::eru::created(&erus, name).await;
        let settled = settle(&erus, &operator, name).await;
        let window = (born + chrono::Duration::seconds(1), settled);
        let records = check(
            &client,
            &ns.name,
            &operator,
            &Ledger {
                eru: name,
                workload: Workload::StatefulSet(name),
                window,
                slots: every(5, window.0, window.1),
                journal_from: None,
                uid: None,
                journal_until: None,
                expect: Vec::new(),
            }
            // not rollable: every slot of ondelete (the last may see the settling suspension
            // first), and partitioned's until its fix (the edit's second either way)
            .require(window.0, window.1, "target_not_rollable", &[])
            .expect(
                fixed_at - second,
                window.1,
                if name == "ondelete" {
                    &["target_not_rollable"]
                } else {
                    ON_SCHEDULE_OR_NOT_ROLLABLE
                },
            )
            .expect(
                fixed_at + second,
                window.1,
                if name == "ondelete" {
                    &["target_not_rollable"]
                } else {
                    ON_SCHEDULE
                },
            ),
        )
        .await;
        if name == "ondelete" {
            assert!(
                records
                    .iter()
                    .all(|r| r.reason.as_deref() == Some("target_not_rollable")
                        || r.reason.as_deref() == Some("suspended")),
                "{records:?}"
            );
        }
    }
}

#[tokio::test]
#[ignore = "needs the local cluster: hack/test.sh"]
async fn annotated_statefulsets_and_daemonsets_get_automatic_erus() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "targets-auto").await;
    let operator = Operator::start(&client, &ns.name, &[]).await;
    let erus: Api<Eru> = Api::namespaced(client.clone(), &ns.name);
    let statefulsets: Api<StatefulSet> = Api::namespaced(client.clone(), &ns.name);
    let annotated = |schedule: &str| json!({"metadata": {"annotations": {"mtsre.meitu.com/eru": "true", "mtsre.meitu.com/eru-schedule": schedule}}});
    // a Deployment `web` asks first: its Eru is `web`
    let d = deployment(&client, &ns.name, "web", 1, annotated("0 3 * * *")).await;
    let web = wait_for(
        "the Deployment's automatic Eru",
        Duration::from_secs(30),
        || async { erus.get_opt("web").await.ok().flatten() },
    )
    .await;
    assert_eq!(web.owner_references()[0].uid, d.uid().unwrap());
    // a StatefulSet `web` then gets `web-statefulset`, and is restarted by it
    let sts = statefulset(&client, &ns.name, "web", 1, annotated("*/10 * * * * *")).await;
    statefulset_ready(&statefulsets, "web", 1).await;
    let eru = wait_for(
        "the StatefulSet's automatic Eru",
        Duration::from_secs(30),
        || async { erus.get_opt("web-statefulset").await.ok().flatten() },
    )
    .await;
    assert_eq!(
        (
            eru.spec.target.kind.as_str(),
            eru.spec.target.name.as_str(),
            eru.spec.schedule.as_str()
        ),
        ("StatefulSet", "web", "*/10 * * * * *")
    );
    let owner = &eru.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("StatefulSet", sts.uid().unwrap().as_str())
    );
    assert_eq!(eru.labels()["app.kubernetes.io/managed-by"], "eru-operator");
    let slot = first_success(&erus, "web-statefulset").await;
    let row = items(&operator, "/history?name=web-statefulset&outcome=succeeded")
        .into_iter()
        .find(|r| time(&r["slot"]) == slot)
        .expect("the restart in /history");
    assert_eq!(row["target"], "StatefulSet/web");
    let patched = statefulsets.get("web").await.unwrap();
    assert!(template_slot(patched.spec.as_ref().and_then(|s| s.template.metadata.as_ref())) >= Some(slot));
    let window = (
        common::eru::created(&erus, "web-statefulset").await + chrono::Duration::seconds(1),
        Utc::now(),
    );
    check(
        &client,
        &ns.name,
        &operator,
        &Ledger {
            eru: "web-statefulset",
            workload: Workload::StatefulSet("web"),
            window,
            slots: every(10, window.0, window.1),
            journal_from: None,
            uid: None,
            journal_until: None,
            expect: Vec::new(),
        },
    )
    .await;
    // the Deployment's Eru was left alone
    assert_eq!(
        erus.get("web").await.unwrap().spec.target.kind.as_str(),
        "Deployment"
    );

    // a DaemonSet gets one named after it
    let ds = daemonset(&client, &ns.name, "agent", annotated("0 4 * * *")).await;
    let agent = wait_for(
        "the DaemonSet's automatic Eru",
        Duration::from_secs(30),
        || async { erus.get_opt("agent").await.ok().flatten() },
    )
    .await;
    assert_eq!(
        (agent.spec.target.kind.as_str(), agent.spec.target.name.as_str()),
        ("DaemonSet", "agent")
    );
    assert_eq!(agent.owner_references()[0].uid, ds.uid().unwrap());

    // removing the StatefulSet's annotation deletes its Eru, not the Deployment's
    statefulsets
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"mtsre.meitu.com/eru": null}}})),
        )
        .await
        .unwrap();
    wait_for("web-statefulset deleted", Duration::from_secs(30), || async {
        erus.get_opt("web-statefulset")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    let web = erus.get("web").await.unwrap();
    assert_eq!(web.spec.target.kind.as_str(), "Deployment");
    assert_eq!(web.owner_references()[0].uid, d.uid().unwrap());
}
