//! Step 4 of the Eru pass: the decided actions in the cluster — the restart patch and Events. The
//! patch's result goes back into the machine as an event in the same pass (`RestartPatched`), and
//! what that decides is journaled before the pass goes on.

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::Deployment;
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams},
    runtime::events::EventType,
};
use serde_json::json;
use tracing::{info, warn};

use super::{
    Eru, RESTARTED_AT_ANNOTATION,
    context::EruContext,
    machine::{EruAction, EruDecision, EruEvent, EruMachine, State},
    record::{self, slot_text},
};
use crate::{Result, machine::step, runtime::api_message};

/// Field manager of the restart patch: it owns only the `restartedAt` annotation of a target's pod
/// template, so the apply leaves every other field alone, also on a Deployment another manager
/// applies in full (a Memcached's, under [`crate::memcached`]'s own manager).
pub const RESTART_MANAGER: &str = "eru-operator-restart";

/// Test-only failpoint: hang right after the restart patch (the e2e test SIGKILLs the operator
/// there to prove a slot is never restarted twice).
const FAILPOINT_ENV: &str = "ERU_FAILPOINT";

/// The state after acting, and the API's message if the restart patch failed.
pub struct Acted {
    pub state: State,
    pub patch_error: Option<String>,
}

/// Performs `actions` for `eru`, which the machine left in `state`.
pub async fn act(
    context: &EruContext,
    eru: &Eru,
    mut state: State,
    actions: &[EruAction],
    started_at: DateTime<Utc>,
) -> Result<Acted> {
    let ctx = &context.ctx;
    let mut patch_error = None;
    for action in actions {
        match action {
            EruAction::PatchRestart { slot } => match patch_restart(context, eru, *slot).await {
                Ok(()) => {
                    context
                        .metrics
                        .fire_lateness
                        .observe((Utc::now() - *slot).as_seconds_f64().max(0.0));
                    info!(eru = %eru.name_any(), slot = %slot_text(*slot), "restart patched");
                    if std::env::var(FAILPOINT_ENV).as_deref() == Ok("hang-after-restart-patch") {
                        warn!("failpoint hang-after-restart-patch: waiting to be killed");
                        std::future::pending::<()>().await;
                    }
                    let mut patched = EruDecision::default();
                    state = step(EruMachine, state, &EruEvent::RestartPatched, &mut patched);
                    record::journal(context, eru, &patched, Utc::now(), started_at).await?;
                }
                Err(e) => {
                    let message = api_message(&e);
                    ctx.publish(
                        eru,
                        EventType::Warning,
                        "RestartPatchFailed",
                        "Restart",
                        Some(message.clone()),
                    )
                    .await;
                    patch_error = Some(message);
                }
            },
            EruAction::ReportInvalid { reason } => {
                ctx.publish(
                    eru,
                    EventType::Warning,
                    "InvalidSpec",
                    "Validate",
                    Some(reason.clone()),
                )
                .await
            }
            EruAction::ReportTargetMissing => {
                let note = format!(
                    "Deployment {} not found in namespace {}",
                    eru.spec.target.name,
                    eru.namespace().unwrap_or_default()
                );
                ctx.publish(eru, EventType::Warning, "TargetMissing", "Observe", Some(note))
                    .await
            }
        }
    }
    Ok(Acted { state, patch_error })
}

/// Sets the slot on the target's pod template with server-side apply (only our annotation).
async fn patch_restart(context: &EruContext, eru: &Eru, slot: DateTime<Utc>) -> kube::Result<()> {
    let api: Api<Deployment> = context.ctx.api(&eru.namespace().unwrap_or_default());
    let patch = json!({
        "apiVersion": "apps/v1",
        "kind": eru.spec.target.kind.as_str(),
        "metadata": {"name": eru.spec.target.name},
        "spec": {"template": {"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: slot_text(slot)}}}}
    });
    api.patch(
        &eru.spec.target.name,
        &PatchParams::apply(RESTART_MANAGER).force(),
        &Patch::Apply(patch),
    )
    .await?;
    Ok(())
}
