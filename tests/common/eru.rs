//! Eru fixtures of the end-to-end tests: Deployments and Erus to create, and what to read back
//! (status, the restart annotation, journal listings, Events).

use std::time::Duration;

use chrono::{DateTime, Utc};
use eru_operator::eru::{Eru, EruStatus, RESTARTED_AT_ANNOTATION};
use k8s_openapi::api::{apps::v1::Deployment, events::v1::Event};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

use super::{
    Operator, kubectl,
    ledger::{SlotRecord, every, slot_records},
    wait_for,
};

/// A Deployment of `replicas` pause Pods labelled `app: <name>`, with `extra` merged into it.
pub async fn deployment(client: &Client, ns: &str, name: &str, replicas: i32, extra: Value) -> Deployment {
    let mut body = json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            // every rollout's ReplicaSet is kept, so the ledger check can count them
            "revisionHistoryLimit": 1000,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}
            }
        }
    });
    merge(&mut body, extra);
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    api.create(&PostParams::default(), &serde_json::from_value(body).unwrap())
        .await
        .unwrap()
}

/// Merges `from` into `into` (objects key by key, anything else replaced).
pub fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (slot, v) => *slot = v,
    }
}

/// Waits until the Deployment has `replicas` replicas, all available.
pub async fn wait_ready(api: &Api<Deployment>, name: &str, replicas: i32) {
    wait_for(
        &format!("deployment {name} ready"),
        Duration::from_secs(60),
        || async {
            let s = api.get(name).await.ok()?.status?;
            (s.available_replicas == Some(replicas) && s.replicas == Some(replicas)).then_some(())
        },
    )
    .await;
}

/// Waits until the Deployment `name` has rolled out: its controller saw the latest spec, and all
/// `replicas` are updated and available, no old one left.
pub async fn wait_settled(api: &Api<Deployment>, name: &str, replicas: i32) {
    wait_for(
        &format!("deployment {name} rolled out"),
        Duration::from_secs(60),
        || async {
            let d = api.get(name).await.ok()?;
            let s = d.status?;
            (s.observed_generation == d.metadata.generation
                && s.updated_replicas == Some(replicas)
                && s.available_replicas == Some(replicas)
                && s.replicas == Some(replicas))
            .then_some(())
        },
    )
    .await;
}

/// Creates an Eru with `spec`.
pub async fn create_eru(client: &Client, ns: &str, name: &str, spec: Value) -> kube::Result<Eru> {
    let api: Api<Eru> = Api::namespaced(client.clone(), ns);
    let eru: Eru = serde_json::from_value(json!({
        "apiVersion": "mtsre.meitu.com/v1", "kind": "Eru", "metadata": {"name": name}, "spec": spec
    }))
    .unwrap();
    api.create(&PostParams::default(), &eru).await
}

/// Sends an Eru as raw JSON, so the API server (not serde) judges it.
pub async fn create_raw_eru(
    client: &Client,
    ns: &str,
    name: &str,
    spec: Value,
) -> kube::Result<DynamicObject> {
    let resource = ApiResource::erase::<Eru>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "mtsre.meitu.com/v1", "kind": "Eru", "metadata": {"name": name}, "spec": spec
    }))
    .unwrap();
    api.create(&PostParams::default(), &object).await
}

/// The Eru's status, if it has one.
pub async fn status(api: &Api<Eru>, name: &str) -> Option<EruStatus> {
    api.get(name).await.ok()?.status
}

/// When the API server created the Eru `name` (whole seconds): its first spec took effect then.
pub async fn created(erus: &Api<Eru>, name: &str) -> DateTime<Utc> {
    let eru = erus.get(name).await.unwrap();
    let at = eru.metadata.creation_timestamp.expect("a creationTimestamp").0;
    DateTime::from_timestamp(at.as_second(), 0).unwrap()
}

/// Runs `sql` on the operator's journal (the SQLite file with `sqlite3`, or the PostgreSQL
/// database with `psql`), as someone with access to its disk or server could.
pub fn journal_sql(operator: &Operator, sql: &str) {
    let output = match &operator.database_url {
        Some(url) => std::process::Command::new("psql")
            .args([url.as_str(), "-v", "ON_ERROR_STOP=1", "-qc", sql])
            .output(),
        None => std::process::Command::new("sqlite3")
            .args(["-bail", "-cmd", ".timeout 10000"])
            .arg(&operator.database)
            .arg(sql)
            .output(),
    }
    .expect("psql or sqlite3 on PATH");
    assert!(
        output.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// An RFC 3339 time of a JSON answer.
pub fn time(value: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(value.as_str().unwrap_or_default())
        .unwrap()
        .with_timezone(&Utc)
}

/// The slot a Deployment's pod template carries.
pub fn template_slot(deployment: &Deployment) -> Option<DateTime<Utc>> {
    let annotations = deployment
        .spec
        .as_ref()?
        .template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?;
    Some(
        DateTime::parse_from_rfc3339(annotations.get(RESTARTED_AT_ANNOTATION)?)
            .ok()?
            .with_timezone(&Utc),
    )
}

/// The `items` of a listing of the operator's HTTP API (with the operator's token, if it has one).
pub fn items(operator: &Operator, path: &str) -> Vec<Value> {
    operator.get_json(path)["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Events about the object named `regarding` with `reason`; panics if they cannot be listed (an
/// empty answer must mean "none", never "the API call failed").
pub async fn events(client: &Client, ns: &str, regarding: &str, reason: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let list = api
        .list(&Default::default())
        .await
        .unwrap_or_else(|e| panic!("listing the Events of {ns}: {e}"))
        .items;
    list.into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(regarding))
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

/// A slot as the operator writes it in Events (RFC 3339, UTC, seconds).
pub fn slot_text(slot: DateTime<Utc>) -> String {
    slot.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// How one slot of an Eru is accounted in its operator's journal.
#[derive(Clone, Debug, PartialEq)]
pub enum Accounted {
    /// Restarted: the restart patch landed (its outcome).
    Fired(String),
    /// Missed or skipped, with its reason and, for `operator_down`, its window.
    Missed {
        reason: String,
        window: Option<(DateTime<Utc>, DateTime<Utc>)>,
    },
}

/// Every `*/step`-second slot of `name` in `[from, to]` with its one record, from the journal
/// the operator serves (`/slots`, every page); panics on a slot with none or with two.
pub fn accounted(
    operator: &Operator,
    name: &str,
    step: i64,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<(DateTime<Utc>, Accounted)> {
    let records = slot_records(operator, name).unwrap_or_else(|e| panic!("{e}"));
    every(step, from, to)
        .into_iter()
        .map(|slot| {
            let covering: Vec<&SlotRecord> = records.iter().filter(|r| r.covers(slot)).collect();
            let [record] = covering.as_slice() else {
                panic!("slot {slot} of {name} must have exactly one record: {covering:?}")
            };
            (slot, record.accounted())
        })
        .collect()
}

/// Waits for a succeeded restart of a slot after `after`.
pub async fn succeeded_after(operator: &Operator, name: &str, after: DateTime<Utc>) -> DateTime<Utc> {
    wait_for(
        &format!("a succeeded restart of {name} after {after}"),
        Duration::from_secs(90),
        || async {
            items(operator, &format!("/history?name={name}&outcome=succeeded"))
                .iter()
                .map(|r| time(&r["slot"]))
                .find(|slot| *slot > after)
        },
    )
    .await
}

/// Suspends the Eru and waits until nothing is in progress; returns when it was suspended.
pub async fn settle(erus: &Api<Eru>, operator: &Operator, name: &str) -> DateTime<Utc> {
    let at = Utc::now();
    erus.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": true}})),
    )
    .await
    .unwrap();
    wait_for("no restart in progress", Duration::from_secs(90), || async {
        items(operator, &format!("/history?name={name}&outcome=in_progress"))
            .is_empty()
            .then_some(())
    })
    .await;
    at
}

/// Makes the API server refuse every change of the pod template of the Deployment `name` in `ns`
/// (a ValidatingAdmissionPolicy, "the pod template is frozen") and waits until a dry run is
/// refused. Delete the returned manifest (`kubectl delete -f`) to lift it.
pub async fn freeze_template(deployments: &Api<Deployment>, ns: &str, name: &str) -> tempfile::NamedTempFile {
    let policy = format!("freeze-{ns}");
    let manifest = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": policy},
         "spec": {"failurePolicy": "Fail",
                  "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                                                          "operations": ["UPDATE"], "resources": ["deployments"]}]},
                  "validations": [{"expression": format!("object.metadata.name != '{name}' || object.spec.template == oldObject.spec.template"),
                                   "message": "the pod template is frozen"}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": policy},
         "spec": {"policyName": policy, "validationActions": ["Deny"],
                  "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}}}
    ]});
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), manifest.to_string()).unwrap();
    kubectl(&["apply", "-f", file.path().to_str().unwrap()]);
    // a dry run goes through admission and changes nothing
    wait_for("the policy in force", Duration::from_secs(30), || async {
        let patch = json!({"spec": {"template": {"metadata": {"annotations": {"probe": "x"}}}}});
        let dry_run = PatchParams {
            dry_run: true,
            ..PatchParams::default()
        };
        deployments
            .patch(name, &dry_run, &Patch::Merge(patch))
            .await
            .is_err()
            .then_some(())
    })
    .await;
    file
}

/// FNV-1a 64 of `bytes`, as docs/eru.md defines the operator's hash (offset basis
/// 0xcbf29ce484222325, prime 0x100000001b3). Written out here from the docs, so a test's expected
/// `H` value or jitter is never the operator's own computation.
pub fn documented_fnv1a64(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Output `n` (from 1) of a SplitMix64 generator seeded with `seed`, as docs/eru.md defines it.
pub fn documented_splitmix64(seed: u64, n: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15_u64.wrapping_mul(n));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The value of a bare `H` in field `field` (0 second, 1 minute, 2 hour, ...) of the Eru
/// `namespace/name`, over a range of `width` values from its first, as docs/eru.md ("Hashed
/// schedules") says: FNV-1a 64 of `namespace/name`, one SplitMix64 output per field (output
/// `field + 1`), modulo the width.
pub fn documented_h(namespace: &str, name: &str, field: u64, width: u64) -> u64 {
    let seed = documented_fnv1a64(format!("{namespace}/{name}").into_bytes());
    documented_splitmix64(seed, field + 1) % width
}
