//! Eru reconcile: observe the spec → event → machine → journal → act → status, requeued at the
//! next slot.

use std::{future::Future, sync::Arc, time::Duration};

use chrono::Utc;
use futures::StreamExt;
use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
    runtime::{Controller, controller::Action, events::EventType, watcher},
};
use serde_json::json;
use tokio::sync::watch;
use tracing::warn;

use super::{
    Eru, EruStatus,
    machine::{EruCommand, EruEvent, EruMachine, restore},
    schedule::Schedule,
};
use crate::{
    Error, Result,
    conditions::condition,
    controller::{Context, MANAGER, instrumented, retry_after, shutdown_requested, watch_util},
    journal::Entry,
    machine::{Phase, dispatch},
};

const KIND: &str = "Eru";
/// Requeue margin after a slot, so the slot is due when the reconcile runs.
const SLOT_MARGIN: Duration = Duration::from_millis(100);

/// Builds the Eru controller; returns it and a future that resolves once its cache synced.
pub fn controller(
    ctx: Arc<Context>,
    shutdown: watch::Receiver<bool>,
) -> (impl Future<Output = ()>, impl Future<Output = ()>) {
    let erus: Api<Eru> = watch_util::api_for(&ctx.client, &ctx.settings.namespace);
    let controller =
        Controller::new(erus, watcher::Config::default()).graceful_shutdown_on(shutdown_requested(shutdown));
    let store = controller.store();
    let synced = async move {
        let _ = store.wait_until_ready().await;
    };
    let run =
        controller
            .run(
                |eru, ctx: Arc<Context>| async move {
                    instrumented(&ctx.clone(), KIND, reconcile(eru, ctx)).await
                },
                |_, error, _| retry_after(error),
                ctx,
            )
            .for_each(|result| async move {
                if let Err(e) = result {
                    warn!(kind = KIND, error = %e, "reconcile failed");
                }
            });
    (run, synced)
}

async fn reconcile(eru: Arc<Eru>, ctx: Arc<Context>) -> Result<Action> {
    let uid = eru.uid().unwrap_or_default();
    let (namespace, name) = (eru.namespace().unwrap_or_default(), eru.name_any());
    if eru.meta().deletion_timestamp.is_some() {
        ctx.metrics.forget(KIND, &uid, &namespace, &name);
        return Ok(Action::await_change());
    }
    let schedule = Schedule::parse(&eru.spec.schedule, eru.spec.time_zone.as_deref());
    let event = match &schedule {
        Ok(_) => EruEvent::SpecValid {
            suspend: eru.spec.suspend,
        },
        Err(e) => EruEvent::SpecInvalid {
            reason: e.to_string(),
        },
    };
    let phase = eru.status.as_ref().and_then(|s| s.phase.as_deref());
    let (state, decision) = dispatch(EruMachine, restore(phase), &event);
    ctx.commit(KIND, eru.as_ref(), &decision.transitions, Entry::default())
        .await?;
    for command in decision.commands {
        match command {
            EruCommand::ReportInvalid { reason } => {
                ctx.publish(
                    eru.as_ref(),
                    EventType::Warning,
                    "InvalidSpec",
                    "Validate",
                    Some(reason),
                )
                .await
            }
        }
    }

    let now = Utc::now();
    let next = schedule
        .as_ref()
        .ok()
        .filter(|_| !eru.spec.suspend)
        .and_then(|s| s.next_after(now));
    match next {
        Some(t) => ctx
            .metrics
            .next_fire
            .with_label_values(&[&namespace, &name])
            .set(t.timestamp() as f64),
        None => {
            let _ = ctx.metrics.next_fire.remove_label_values(&[&namespace, &name]);
        }
    }
    ctx.metrics.set_phase(KIND, &uid, state.phase());

    let previous = eru.status.clone().unwrap_or_default();
    let (valid, message) = match &schedule {
        Ok(_) => (true, format!("schedule '{}' is valid", eru.spec.schedule)),
        Err(e) => (false, e.to_string()),
    };
    let conditions = vec![
        condition(
            &previous.conditions,
            "ScheduleValid",
            valid,
            if valid { "Parsed" } else { "InvalidSchedule" },
            &message,
            eru.as_ref(),
        ),
        condition(
            &previous.conditions,
            "Ready",
            valid,
            if valid { "Scheduled" } else { "InvalidSpec" },
            &message,
            eru.as_ref(),
        ),
    ];
    let status = EruStatus {
        phase: Some(state.phase().to_string()),
        conditions,
        observed_generation: eru.meta().generation,
        next_schedule_time: next,
        ..previous.clone()
    };
    if eru.status.as_ref() != Some(&status) {
        let api: Api<Eru> = ctx.api(&namespace);
        let patch = json!({"apiVersion": Eru::api_version(&()), "kind": KIND, "status": status});
        api.patch_status(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(patch))
            .await
            .map_err(Error::from)?;
    }
    Ok(match next {
        Some(t) => Action::requeue((t - now).to_std().unwrap_or_default() + SLOT_MARGIN),
        None => Action::await_change(),
    })
}
