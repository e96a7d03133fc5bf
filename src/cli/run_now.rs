//! `run-now`: asks an Eru for one manual run by setting its `mtsre.meitu.com/run-now` annotation
//! to a new token, with server-side apply as field manager `kubectl-eru` (the manager the run's
//! record names). The operator does the rest, through the fleet cap and the gates.

use chrono::{DateTime, Utc};
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use serde_json::json;

use crate::eru::{Eru, core::run::Asked, core::run::RUN_ANNOTATION};

/// The field manager of the annotation this command sets.
pub const FIELD_MANAGER: &str = "kubectl-eru";

/// A fresh token: the time asked, to the millisecond.
pub fn new_token(now: DateTime<Utc>) -> String {
    format!("manual-{}", now.format("%Y%m%dT%H%M%S%.3fZ"))
}

/// Sets `token` (checked like the operator checks it) on the Eru `namespace/name`; returns the
/// token set.
pub async fn run_now(namespace: &str, name: &str, token: &str) -> Result<String, String> {
    let token = Asked::token(token)?;
    let client = Client::try_default()
        .await
        .map_err(|e| format!("no cluster to talk to (kubeconfig or in-cluster): {e}"))?;
    let erus: Api<Eru> = Api::namespaced(client, namespace);
    let patch = json!({
        "apiVersion": "mtsre.meitu.com/v1",
        "kind": "Eru",
        "metadata": {"name": name, "annotations": {RUN_ANNOTATION: token}},
    });
    // an Eru that does not exist is not created by the apply: asked for by name first
    erus.get_metadata(name).await.map_err(|e| match e {
        kube::Error::Api(s) if s.code == 404 => format!("Eru {namespace}/{name} not found"),
        e => format!("cannot read Eru {namespace}/{name}: {e}"),
    })?;
    let params = PatchParams::apply(FIELD_MANAGER).force();
    erus.patch(name, &params, &Patch::Apply(patch))
        .await
        .map_err(|e| format!("cannot annotate Eru {namespace}/{name}: {e}"))?;
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_token_is_one_the_operator_takes() {
        let at = "2026-11-27T06:01:02.345Z".parse().unwrap();
        let token = new_token(at);
        assert_eq!(token, "manual-20261127T060102.345Z");
        assert_eq!(Asked::token(&token), Ok(token.clone()));
    }
}
