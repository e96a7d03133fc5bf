//! The blocking-pod gate (pods matching an Eru's `gates.blockingPodSelector` that have not
//! finished, listed from the API server), and the target's own pods (its pod template's labels,
//! the running pods they select) that the PodDisruptionBudget gate and the need conditions read.

use super::*;

impl Gatekeeper {
    /// The blocking-pod gate of `selector`, in `pods_in` (a cluster-wide gate: `None`, the
    /// namespaces the operator watches): closed with the pods named, open (`None`), or unknown
    /// (the API server did not answer: a pod gate has no proceed option).
    pub(super) async fn pod_gate(
        &self,
        selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
        pods_in: Option<&str>,
    ) -> Result<Option<Answer>, String> {
        let scope = pods_in.or(self.watched.as_deref());
        let answer = self.blocking_pods(scope, selector).await;
        self.count(
            GateKind::BlockingPods,
            answer.as_ref().map(|pods| !pods.is_empty()),
        );
        let pods = answer.map_err(|error| format!("listing blocking pods failed: {error}"))?;
        if pods.is_empty() {
            return Ok(None);
        }
        let place = match (pods_in, scope) {
            (Some(_), Some(ns)) => format!("in {ns}"),
            (None, Some(ns)) => format!("in {ns} (cluster-wide gate)"),
            (_, None) => "in the cluster (cluster-wide gate)".to_string(),
        };
        Ok(Some(Answer::Closed {
            reason: Reason::BlockingPods,
            note: format!("blocking pods running {place}: {}", some_of(&pods, NAMED)),
        }))
    }

    /// The unfinished pods in `namespace` (every namespace: `None`) matching `selector`, by name
    /// (`namespace/name` across namespaces).
    pub(super) async fn blocking_pods(
        &self,
        namespace: Option<&str>,
        selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    ) -> Result<Vec<String>, String> {
        let selector = Selector::try_from(selector.clone()).map_err(|e| e.to_string())?;
        let key = (namespace.unwrap_or_default().to_string(), selector.to_string());
        let ttl = self.options.cache_ttl;
        if let Some(answer) = self.pods.get(&key, ttl) {
            return answer;
        }
        let api: Api<Pod> = match namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        };
        let params = ListParams::default()
            .labels_from(&selector)
            .fields("status.phase!=Succeeded,status.phase!=Failed")
            .limit(50);
        let answer = match api.list_metadata(&params).await {
            Ok(list) => Ok(list
                .items
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter_map(|p| match namespace {
                    Some(_) => p.metadata.name,
                    None => Some(format!("{}/{}", p.metadata.namespace?, p.metadata.name?)),
                })
                .collect::<Vec<_>>()),
            Err(e) => Err(e.to_string()),
        };
        self.pods.keep(key, answer, ttl)
    }

    /// The running pods of the target (`kind`, `name`) in `namespace` (those its pod template's
    /// labels select, not finished, not being deleted) and when each was created.
    pub(super) async fn pod_starts(
        &self,
        namespace: &str,
        kind: TargetKind,
        name: &str,
    ) -> Result<Vec<(String, chrono::DateTime<chrono::Utc>)>, String> {
        let labels = self.template_labels(namespace, kind, name).await?;
        if labels.is_empty() {
            return Err(format!(
                "the pod template of {kind:?}/{name} has no labels to find its pods by"
            ));
        }
        let selector: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let params = ListParams::default()
            .labels(&selector.join(","))
            .fields("status.phase!=Succeeded,status.phase!=Failed");
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let pods = api.list_metadata(&params).await.map_err(|e| e.to_string())?;
        Ok((pods.items.into_iter())
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| {
                Some((
                    p.metadata.name?,
                    time_of(p.metadata.creation_timestamp.as_ref()?)?,
                ))
            })
            .collect())
    }

    /// The pod template's labels of the workload `kind`/`name` in `namespace` (what a budget's
    /// selector is matched against: the labels its pods carry).
    pub(super) async fn template_labels(
        &self,
        namespace: &str,
        kind: TargetKind,
        name: &str,
    ) -> Result<std::collections::BTreeMap<String, String>, String> {
        use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
        let client = self.client.clone();
        let template = match kind {
            TargetKind::Deployment => (Api::<Deployment>::namespaced(client, namespace).get(name).await)
                .map(|d| d.spec.map(|s| s.template)),
            TargetKind::StatefulSet => (Api::<StatefulSet>::namespaced(client, namespace).get(name).await)
                .map(|d| d.spec.map(|s| s.template)),
            TargetKind::DaemonSet => (Api::<DaemonSet>::namespaced(client, namespace).get(name).await)
                .map(|d| d.spec.map(|s| s.template)),
        }
        .map_err(|e| e.to_string())?;
        Ok(template.and_then(|t| t.metadata?.labels).unwrap_or_default())
    }
}
