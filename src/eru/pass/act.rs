//! Step 4 of the Eru pass: the plan's actions — a place in the fleet, the restart patch, Events.
//! What they bring back (the fleet's answer, the patch's result) goes back to the plan ([`Fed`]),
//! which decides what follows in the same pass.

use crate::runtime::lean::{DaemonSet, Deployment, StatefulSet};
use chrono::{DateTime, Utc};
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams},
    runtime::events::EventType,
};
use serde_json::json;
use tracing::{info, warn};

use super::context::EruContext;
use crate::eru::{
    CachedEru, RESTART_MANAGER, RESTARTED_AT_ANNOTATION, RUN_MANAGER, SilenceOnUnknown, Target, TargetKind,
    core::{
        machine::State,
        messages::EruAction,
        plan::Fed,
        restart::Restart,
        run::{RUN_ANNOTATION, template_value},
        schedule::slot_text,
    },
    silence,
    workloads::Workload,
};
use crate::failpoint;
use crate::runtime::{
    api_message,
    throttle::{self, Budget, Class},
};

/// Test-only failpoints here (`crate::failpoint`; docs/development.md):
/// - `hang-after-restart-patch`: hang right after a restart (or manual run) patch (the e2e tests
///   SIGKILL the operator there to prove a slot or a token is never restarted twice);
/// - `stop-before-restart-patch`: the first restart patch is decided and journaled, then the
///   process stops itself (SIGSTOP) just before sending it; the test freezes it past its lease
///   and resumes it (SIGCONT) to prove a process that lost its lead in a freeze patches nothing.
fn stop_before_patch_failpoint() {
    failpoint::stop_once(failpoint::STOP_BEFORE_RESTART_PATCH);
}

/// `hang-after-restart-patch`: never returns (the test SIGKILLs the process).
async fn hang_after_patch_failpoint() {
    if failpoint::armed("hang-after-restart-patch") {
        warn!("failpoint hang-after-restart-patch: waiting to be killed");
        std::future::pending::<()>().await;
    }
}

/// Performs `action` for `eru`, whose plan is in `state`; returns what the plan must hear back.
pub async fn act(context: &EruContext, eru: &CachedEru, state: &State, action: &EruAction) -> Vec<Fed> {
    match action {
        EruAction::PatchRestart { slot, target } => match state {
            State::Restarting { restart }
                if restart.slot() == Some(*slot) && Utc::now() <= restart.deadline =>
            {
                // the silence first: held or not, the patch follows its onUnknown
                let mut fed = Vec::new();
                if let Some(failed) = silence(context, eru, restart, *slot, &mut fed).await {
                    fed.push(failed);
                    return fed;
                }
                fed.extend(patch(context, eru, restart, *slot, target).await);
                fed
            }
            _ => Vec::new(),
        },
        EruAction::ExpireSilence { slot, id } => expire(context, eru, *slot, id).await.into_iter().collect(),
        other => act_once(context, eru, state, other).await.into_iter().collect(),
    }
}

/// Creates the Alertmanager silence of `restart` (`spec.silence`) unless the journal holds one
/// that still covers the rollout (an earlier try's; one that lapsed or would lapse before the
/// rollout may end is replaced: a silence is a short lease, `silence::end`): on success, adds
/// what the plan must hear (its id and end) to `fed`; when it cannot be created, `Hold` answers
/// the patch failed (tried again after the backoff, given up at the deadline with why),
/// `Proceed` goes on without it (a `SilenceFailed` Event).
async fn silence(
    context: &EruContext,
    eru: &CachedEru,
    restart: &Restart,
    slot: DateTime<Utc>,
    fed: &mut Vec<Fed>,
) -> Option<Fed> {
    let spec = eru.spec.silence.as_deref()?;
    let uid = eru.uid().unwrap_or_default();
    let namespace = eru.namespace().unwrap_or_default();
    // as long as the rollout may take (the Eru's timeout, else the target's own, as the plan
    // judges it) and a minute, from now: the patch is sent next
    let timeout = eru.spec.rollout_timeout_seconds.unwrap_or_else(|| {
        (context.targets.view(&namespace, &restart.target))
            .map_or(crate::eru::core::target::DEFAULT_ROLLOUT_TIMEOUT_SECONDS, |v| {
                v.rollout_timeout_seconds
            })
    });
    if let Ok(Some(row)) = context.ctx.journal.restart(&uid, slot).await
        && row.silence_id.is_some()
        && (row.silence_until).is_some_and(|until| silence::still_holds(*until, Utc::now(), timeout))
    {
        return None; // created by an earlier try, and it lasts
    }
    // a standby creates nothing (its patch is refused alike)
    context.ctx.leadership.check("the silence").ok()?;
    let matchers = silence::matchers(&eru.spec, &namespace);
    let until = silence::end(Utc::now(), timeout);
    let comment = format!(
        "eru {namespace}/{}: restart of slot {} ({}); expired when its rollout ends",
        eru.name_any(),
        slot_text(slot),
        restart.target
    );
    match context.options.silencer.create(&matchers, until, comment).await {
        Ok(id) => {
            info!(eru = %eru.name_any(), slot = %slot_text(slot), silence = %id, "silence created");
            fed.push(Fed::Silenced { id, until });
            None
        }
        Err(e) if spec.on_unknown == SilenceOnUnknown::Proceed => {
            let note = format!(
                "restart of slot {} goes on unsilenced (silence.onUnknown: Proceed): {e}",
                slot_text(slot)
            );
            warn!(eru = %eru.name_any(), %note, "silence not created");
            (context.ctx).publish(eru, EventType::Warning, "SilenceFailed", "Restart", Some(note));
            None
        }
        Err(e) => {
            let message = format!("no Alertmanager silence (silence.onUnknown: Hold holds the patch): {e}");
            warn!(eru = %eru.name_any(), slot = %slot_text(slot), error = %message, "restart patch held");
            Some(Fed::PatchFailed {
                message,
                at: Utc::now(),
            })
        }
    }
}

/// Expires the silence `id` of the restart of `slot`; what the plan must hear once it is
/// (nothing when it could not be: it lapses at its own end, which the journal holds).
async fn expire(context: &EruContext, eru: &CachedEru, slot: DateTime<Utc>, id: &str) -> Option<Fed> {
    match context.options.silencer.expire(id).await {
        Ok(()) => {
            info!(eru = %eru.name_any(), slot = %slot_text(slot), silence = %id, "silence expired");
            Some(Fed::SilenceExpired { slot, at: Utc::now() })
        }
        Err(e) => {
            warn!(eru = %eru.name_any(), slot = %slot_text(slot), silence = %id, error = %e, "silence not expired; it lapses at its end");
            None
        }
    }
}

/// The actions with one answer at most.
async fn act_once(context: &EruContext, eru: &CachedEru, state: &State, action: &EruAction) -> Option<Fed> {
    let publish = |reason, action, note| {
        context
            .ctx
            .publish(eru, EventType::Warning, reason, action, Some(note))
    };
    match action {
        EruAction::PatchRestart { .. } | EruAction::ExpireSilence { .. } => None, // see [`act`]
        EruAction::PatchRun { token, target } => match state {
            State::Restarting { restart } if restart.cause.run().is_some_and(|r| r.token == *token) => {
                patch_run(context, eru, restart, token, target).await
            }
            _ => None,
        },
        EruAction::ReportBadRun { reason } => {
            publish("InvalidRunNow", "Validate", reason.clone());
            None
        }
        EruAction::ReportInvalid { reason } => {
            publish("InvalidSpec", "Validate", reason.clone());
            None
        }
        EruAction::ReportTargetMissing => {
            let note = format!(
                "{} {} not found in namespace {}",
                eru.spec.target.kind.as_str(),
                eru.spec.target.name,
                eru.namespace().unwrap_or_default()
            );
            publish("TargetMissing", "Observe", note);
            None
        }
        EruAction::Hold(held) => {
            // told once, on the pass that first holds it
            if held.since == held.checked_at {
                let note = format!(
                    "slot {} held by a health gate ({}): {}; it runs when the gates open",
                    slot_text(held.slot),
                    held.reason.as_str(),
                    held.note
                );
                info!(eru = %eru.name_any(), %note, "slot held");
                publish("Held", "Gate", note);
            }
            None
        }
        EruAction::AskPlace { slot, deadline } => {
            let grant = context.fleet.request(
                &eru.uid().unwrap_or_default(),
                &eru.namespace().unwrap_or_default(),
                &eru.name_any(),
                *slot,
                *deadline,
                Utc::now(),
            );
            Some(Fed::Place(grant))
        }
        EruAction::ReportGap { from, to } => {
            let note = gap_note(*from, *to);
            warn!(eru = %eru.name_any(), %note, "ledger gap");
            publish("LedgerGap", "Account", note);
            None
        }
    }
}

/// Sends the restart patch of `slot` to `target`, unless `restart` (the plan's restart in
/// flight) is no longer that slot's or its deadline passed while the pass was journaling (never
/// patched then: the next pass gives it up). A throttled patch is sent again after the API
/// server's Retry-After, never past the deadline (then the 429 is the failed patch the journal
/// records).
async fn patch(
    context: &EruContext,
    eru: &CachedEru,
    restart: &Restart,
    slot: DateTime<Utc>,
    target: &str,
) -> Option<Fed> {
    if restart.slot() != Some(slot) || Utc::now() > restart.deadline {
        return None;
    }
    let until = (restart.deadline - Utc::now()).to_std().unwrap_or_default();
    let budget = Budget {
        class: Class::Restart,
        until: Some(tokio::time::Instant::now() + until),
    };
    stop_before_patch_failpoint();
    // the client refuses it too; said here, with the slot, for whoever reads the log
    if let Err(e) = context.ctx.leadership.check("the restart patch") {
        warn!(eru = %eru.name_any(), slot = %slot_text(slot), error = %e, "restart patch not sent");
        return None;
    }
    let result = timed(
        context,
        throttle::within(budget, patch_restart(context, eru, target, slot)),
    )
    .await;
    let at = Utc::now();
    Some(match result {
        Ok(generation) => {
            info!(eru = %eru.name_any(), slot = %slot_text(slot), "restart patched");
            hang_after_patch_failpoint().await;
            Fed::Patched { at, generation }
        }
        Err(e) => {
            let message = api_message(&e);
            warn!(eru = %eru.name_any(), slot = %slot_text(slot), error = %message, "restart patch failed");
            Fed::PatchFailed { message, at }
        }
    })
}

/// Sends the patch of the manual run `token` (`run`, the plan's restart in flight) to `target`
/// (its token on the pod template, with its own field manager), unless its deadline passed while
/// the pass was journaling; like [`patch`].
async fn patch_run(
    context: &EruContext,
    eru: &CachedEru,
    run: &Restart,
    token: &str,
    target: &str,
) -> Option<Fed> {
    if Utc::now() > run.deadline {
        return None;
    }
    let until = (run.deadline - Utc::now()).to_std().unwrap_or_default();
    let budget = Budget {
        class: Class::Restart,
        until: Some(tokio::time::Instant::now() + until),
    };
    if let Err(e) = context.ctx.leadership.check("the manual run's patch") {
        warn!(eru = %eru.name_any(), token = %token, error = %e, "manual run patch not sent");
        return None;
    }
    let eru_key = crate::eru::core::schedule::eru_seed(&eru.namespace().unwrap_or_default(), &eru.name_any());
    let value = template_value(&eru_key, token);
    let annotation = (RUN_ANNOTATION, value.as_str());
    let result = timed(
        context,
        throttle::within(
            budget,
            apply_template(context, eru, target, annotation, RUN_MANAGER),
        ),
    )
    .await;
    let at = Utc::now();
    Some(match result {
        Ok(generation) => {
            info!(eru = %eru.name_any(), token = %token, "manual run patched");
            hang_after_patch_failpoint().await;
            Fed::Patched { at, generation }
        }
        Err(e) => {
            let message = api_message(&e);
            warn!(eru = %eru.name_any(), token = %token, error = %message, "manual run patch failed");
            Fed::PatchFailed { message, at }
        }
    })
}

/// Sends a restart's patch (`send`), telling the fleet's pace how long the API server took and
/// whether it answered 429 meanwhile (any restart patch's 429: they share the server).
async fn timed<T>(context: &EruContext, send: impl Future<Output = T>) -> T {
    let throttled = || {
        (context.ctx.metrics.api_throttled)
            .with_label_values(&[Class::Restart.as_str()])
            .get()
    };
    let (before, started) = (throttled(), tokio::time::Instant::now());
    let result = send.await;
    context.fleet.patched(started.elapsed(), throttled() > before);
    result
}

/// What the user is told of slots that cannot be accounted.
pub(super) fn gap_note(from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    format!(
        "slots between {} and {} are not accounted: the journal holds no record of this Eru before {} \
         and its spec changed since the last slot the cluster remembers, so which slots there were is unknown",
        slot_text(from),
        slot_text(to),
        slot_text(to)
    )
}

/// Sets the slot on the pod template of the workload `target` (a journal key:
/// [`Target::key`]) names, with server-side apply (only our annotation).
async fn patch_restart(
    context: &EruContext,
    eru: &CachedEru,
    target: &str,
    slot: DateTime<Utc>,
) -> kube::Result<Option<i64>> {
    let slot = slot_text(slot);
    let annotation = (RESTARTED_AT_ANNOTATION, slot.as_str());
    apply_template(context, eru, target, annotation, RESTART_MANAGER).await
}

/// Sets one annotation on the pod template of the workload `target` names, with server-side
/// apply as `manager` (which owns only that annotation there); the workload's generation in the
/// answer (the template carries the annotation at it).
async fn apply_template(
    context: &EruContext,
    eru: &CachedEru,
    target: &str,
    (key, value): (&str, &str),
    manager: &str,
) -> kube::Result<Option<i64>> {
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
        "spec": {"template": {"metadata": {"annotations": {key: value}}}}
    });
    let params = PatchParams::apply(manager).force();
    let patch = Patch::Apply(patch);
    match kind {
        TargetKind::Deployment => apply::<Deployment>(context, &namespace, &name, &params, &patch).await,
        TargetKind::StatefulSet => apply::<StatefulSet>(context, &namespace, &name, &params, &patch).await,
        TargetKind::DaemonSet => apply::<DaemonSet>(context, &namespace, &name, &params, &patch).await,
    }
}

/// Sends `patch` to the workload `name` of kind `K`; its generation after the patch.
async fn apply<K: Workload>(
    context: &EruContext,
    namespace: &str,
    name: &str,
    params: &PatchParams,
    patch: &Patch<serde_json::Value>,
) -> kube::Result<Option<i64>> {
    let api: Api<K> = context.ctx.api(namespace);
    api.patch(name, params, patch)
        .await
        .map(|patched| patched.meta().generation)
}
