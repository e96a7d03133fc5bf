//! `resume`: resumes an Eru paused on failure (`spec.failurePolicy`) by setting its
//! `mtsre.meitu.com/resume` annotation to the pause's `since` (`status.pausedOnFailure.since`),
//! with server-side apply as field manager `kubectl-eru-resume` (the manager the journal records
//! as who resumed it; its own, so `run-now`'s apply, which owns only the run-now annotation, never
//! removes it, nor this one the run-now token). The operator resumes the pause at its next pass; a value naming another instant
//! resumes nothing, so the annotation left behind never lifts a later pause.

use chrono::SecondsFormat;
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use serde_json::json;

use crate::eru::{Eru, core::pause::RESUME_ANNOTATION};

/// The field manager of the annotation this command sets.
pub const FIELD_MANAGER: &str = "kubectl-eru-resume";

/// What `resume` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Resumed {
    /// The annotation now names the pause of this instant (RFC 3339).
    Asked(String),
    /// The Eru is not paused on failure: nothing was changed.
    NotPaused,
}

/// Resumes the pause of the Eru `namespace/name`, if it is paused.
pub async fn resume(namespace: &str, name: &str) -> Result<Resumed, String> {
    let client = Client::try_default()
        .await
        .map_err(|e| format!("no cluster to talk to (kubeconfig or in-cluster): {e}"))?;
    let erus: Api<Eru> = Api::namespaced(client, namespace);
    let eru = erus.get(name).await.map_err(|e| match e {
        kube::Error::Api(s) if s.code == 404 => format!("Eru {namespace}/{name} not found"),
        e => format!("cannot read Eru {namespace}/{name}: {e}"),
    })?;
    let Some(pause) = eru.status.and_then(|s| s.paused_on_failure) else {
        return Ok(Resumed::NotPaused);
    };
    let since = pause.since.to_rfc3339_opts(SecondsFormat::Secs, true);
    let patch = json!({
        "apiVersion": "mtsre.meitu.com/v1",
        "kind": "Eru",
        "metadata": {"name": name, "annotations": {RESUME_ANNOTATION: since}},
    });
    let params = PatchParams::apply(FIELD_MANAGER).force();
    erus.patch(name, &params, &Patch::Apply(patch))
        .await
        .map_err(|e| format!("cannot annotate Eru {namespace}/{name}: {e}"))?;
    Ok(Resumed::Asked(since))
}
