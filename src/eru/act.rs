//! Step 4 of the Eru pass: the decided actions in the cluster — the restart patch and Events. The
//! patch's result goes back into the machine as an event in the same pass (`RestartPatched`, or
//! `PatchFailed` with the next try after a backoff), and what that decides is journaled before the
//! pass goes on.

use crate::runtime::lean::{DaemonSet, Deployment, StatefulSet};
use chrono::{DateTime, Utc};
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams},
    runtime::events::EventType,
};
use serde_json::json;
use tracing::{info, warn};

use super::{
    CachedEru, RESTART_MANAGER, RESTARTED_AT_ANNOTATION, Target, TargetKind,
    context::EruContext,
    machine::{EruAction, EruDecision, EruEvent, EruMachine, State, retry_delay},
    record::{self, slot_text},
    target::Workload,
};
use crate::{Result, machine::step, runtime::api_message};

/// Test-only failpoint: hang right after the restart patch (the e2e test SIGKILLs the operator
/// there to prove a slot is never restarted twice).
const FAILPOINT_ENV: &str = "ERU_FAILPOINT";

/// The state after acting, the API's message if the restart patch failed (and when to try
/// again), and when the patch landed if it did.
pub struct Acted {
    pub state: State,
    pub patch_error: Option<String>,
    pub retry_at: Option<DateTime<Utc>>,
    pub patched_at: Option<DateTime<Utc>>,
}

/// Performs `actions` for `eru`, which the machine left in `state`.
pub async fn act(
    context: &EruContext,
    eru: &CachedEru,
    mut state: State,
    actions: &[EruAction],
) -> Result<Acted> {
    let ctx = &context.ctx;
    let mut patch_error = None;
    let mut retry_at = None;
    let mut patched_at = None;
    for action in actions {
        match action {
            EruAction::PatchRestart { slot, target } => {
                let State::Restarting { restart } = &state else {
                    continue;
                };
                if restart.slot != *slot || Utc::now() > restart.deadline {
                    // given up or superseded within this pass, or the deadline passed while the
                    // pass was journaling: never patched (the next pass gives it up)
                    continue;
                }
                let failures = restart.attempts + 1;
                let result = patch_restart(context, eru, target, *slot).await;
                let now = Utc::now();
                let event = match result {
                    Ok(()) => {
                        info!(eru = %eru.name_any(), slot = %slot_text(*slot), "restart patched");
                        if std::env::var(FAILPOINT_ENV).as_deref() == Ok("hang-after-restart-patch") {
                            warn!("failpoint hang-after-restart-patch: waiting to be killed");
                            std::future::pending::<()>().await;
                        }
                        patched_at = Some(now);
                        EruEvent::RestartPatched { at: now }
                    }
                    Err(e) => {
                        let message = api_message(&e);
                        warn!(eru = %eru.name_any(), slot = %slot_text(*slot), error = %message, "restart patch failed");
                        patch_error = Some(message.clone());
                        retry_at = Some(now + retry_delay(failures));
                        EruEvent::PatchFailed {
                            message,
                            at: now,
                            retry_at: now + retry_delay(failures),
                        }
                    }
                };
                let mut result = EruDecision::default();
                state = step(EruMachine, state, &event, &mut result);
                record::journal(context, eru, &result, now, patched_at).await?;
            }
            EruAction::ReportInvalid { reason } => ctx.publish(
                eru,
                EventType::Warning,
                "InvalidSpec",
                "Validate",
                Some(reason.clone()),
            ),
            EruAction::ReportTargetMissing => {
                let note = format!(
                    "{} {} not found in namespace {}",
                    eru.spec.target.kind.as_str(),
                    eru.spec.target.name,
                    eru.namespace().unwrap_or_default()
                );
                ctx.publish(eru, EventType::Warning, "TargetMissing", "Observe", Some(note))
            }
        }
    }
    Ok(Acted {
        state,
        patch_error,
        retry_at,
        patched_at,
    })
}

/// Sets the slot on the pod template of the workload `target` (a journal key:
/// [`Target::key`]) names, with server-side apply (only our annotation).
async fn patch_restart(
    context: &EruContext,
    eru: &CachedEru,
    target: &str,
    slot: DateTime<Utc>,
) -> kube::Result<()> {
    let _urgent = context.ctx.urgent.begin();
    let Some(Target { kind, name }) = Target::from_key(target) else {
        // journaled by an operator that knows more kinds (its gate is closed: never reached)
        let message = format!("unknown target kind in {target}");
        return Err(kube::Error::Api(
            kube::core::Status::failure(&message, "BadRequest")
                .with_code(400)
                .boxed(),
        ));
    };
    let namespace = eru.namespace().unwrap_or_default();
    let patch = json!({
        "apiVersion": "apps/v1",
        "kind": kind.as_str(),
        "metadata": {"name": name},
        "spec": {"template": {"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: slot_text(slot)}}}}
    });
    let params = PatchParams::apply(RESTART_MANAGER).force();
    let patch = Patch::Apply(patch);
    match kind {
        TargetKind::Deployment => apply::<Deployment>(context, &namespace, &name, &params, &patch).await,
        TargetKind::StatefulSet => apply::<StatefulSet>(context, &namespace, &name, &params, &patch).await,
        TargetKind::DaemonSet => apply::<DaemonSet>(context, &namespace, &name, &params, &patch).await,
    }
}

/// Sends `patch` to the workload `name` of kind `K`.
async fn apply<K: Workload>(
    context: &EruContext,
    namespace: &str,
    name: &str,
    params: &PatchParams,
    patch: &Patch<serde_json::Value>,
) -> kube::Result<()> {
    let api: Api<K> = context.ctx.api(namespace);
    api.patch(name, params, patch).await.map(drop)
}
