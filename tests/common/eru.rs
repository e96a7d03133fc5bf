//! Eru fixtures of the end-to-end tests: Deployments and Erus to create, and what to read back
//! (status, the restart annotation, journal listings, Events).

use std::time::Duration;

use chrono::{DateTime, Utc};
use eru::eru::{Eru, EruStatus, RESTARTED_AT_ANNOTATION};
use k8s_openapi::api::{apps::v1::Deployment, events::v1::Event};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

use super::{Operator, get_json, wait_for};

/// A Deployment of `replicas` pause Pods labelled `app: <name>`, with `extra` merged into it.
pub async fn deployment(client: &Client, ns: &str, name: &str, replicas: i32, extra: Value) -> Deployment {
    let mut body = json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
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

/// The `items` of a listing of the operator's HTTP API.
pub fn items(operator: &Operator, path: &str) -> Vec<Value> {
    get_json(&operator.url(path))["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Events about the object named `regarding` with `reason`.
pub async fn events(client: &Client, ns: &str, regarding: &str, reason: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let list = api
        .list(&Default::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
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
/// the operator serves (`/history`, `/missed`); panics on a slot with none or with two.
pub fn accounted(
    operator: &Operator,
    name: &str,
    step: i64,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<(DateTime<Utc>, Accounted)> {
    let restarts = items(operator, &format!("/history?name={name}&limit=1000"));
    let missed = items(operator, &format!("/missed?name={name}&limit=1000"));
    let first = (from.timestamp() + step - 1) / step * step;
    let mut slots = Vec::new();
    for second in (first..=to.timestamp()).step_by(step as usize) {
        let slot = DateTime::from_timestamp(second, 0).unwrap();
        let fired: Vec<&Value> = restarts
            .iter()
            .filter(|r| time(&r["slot"]) == slot && !r["patched_at"].is_null())
            .collect();
        let skipped: Vec<&Value> = missed
            .iter()
            .filter(|m| time(&m["slot"]) <= slot && slot <= time(&m["last_slot"]))
            .collect();
        let record = match (fired.as_slice(), skipped.as_slice()) {
            ([r], []) => Accounted::Fired(r["outcome"].as_str().unwrap_or_default().to_string()),
            ([], [m]) => Accounted::Missed {
                reason: m["reason"].as_str().unwrap_or_default().to_string(),
                window: m["window"]
                    .as_object()
                    .map(|w| (time(&w["start"]), time(&w["end"]))),
            },
            _ => panic!(
                "slot {slot} of {name} must have exactly one record; restarts {fired:?}, missed {skipped:?}"
            ),
        };
        slots.push((slot, record));
    }
    slots
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
