//! Eru reconcile, one pass:
//! observe (Eru, target from the watch cache, the journal's open restart, cursor and operator
//! runs) → events (spec, restart tracking, slots due) → machine → journal (transitions, slots,
//! restarts in one transaction) → act (restart patch, Events) → status → requeue at the next slot.

use std::{future::Future, sync::Arc, time::Duration as StdDuration};

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use k8s_openapi::api::apps::v1::Deployment;
use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
    runtime::{
        Controller,
        controller::Action,
        events::EventType,
        reflector::{ObjectRef, Store},
        watcher,
    },
};
use serde_json::json;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::{
    Eru, EruStatus, LastRestart, RESTARTED_AT_ANNOTATION,
    accounting::{Span, account, downtime},
    machine::{EruCommand, EruEvent, EruMachine, Gate, RestartOutcome, SlotsDue, State, restore},
    schedule::Schedule,
    target::{TargetView, Verdict, view_deployment},
};
use crate::{
    Result,
    conditions::condition,
    controller::{Context, MANAGER, drive, object_key, shutdown_requested, watch_util},
    journal::{Entry, EruSummary, FinishedRestart, NewRestart, NewSlot, SlotResult, parse_ts},
    machine::{Decision, EventName, Phase, step},
};

const KIND: &str = "Eru";
/// Requeue margin after a slot, so the slot is due when the reconcile runs.
const SLOT_MARGIN: StdDuration = StdDuration::from_millis(100);
/// Test-only failpoint: hang right after the restart patch (the e2e test SIGKILLs the operator
/// there to prove a slot is never restarted twice).
const FAILPOINT_ENV: &str = "ERU_FAILPOINT";

struct EruContext {
    ctx: Arc<Context>,
    deployments: Store<Deployment>,
    deployments_synced: watch_util::Synced,
}

/// Builds the Eru controller; returns it and a future that resolves once its caches synced.
pub fn controller(
    ctx: Arc<Context>,
    shutdown: watch::Receiver<bool>,
) -> (impl Future<Output = ()>, impl Future<Output = ()>) {
    let namespace = &ctx.settings.namespace;
    let (erus, eru_stream, erus_synced) = watch_util::reflect(
        watch_util::api_for::<Eru>(&ctx.client, namespace),
        watcher::Config::default(),
    );
    let (deployments, deployment_stream, deployments_synced) = watch_util::reflect(
        watch_util::api_for::<Deployment>(&ctx.client, namespace),
        watcher::Config::default(),
    );
    let eru_store = erus.clone();
    let controller = Controller::for_stream(eru_stream, erus)
        .watches_stream(deployment_stream, move |deployment: Deployment| {
            // every Eru that targets this Deployment
            let (namespace, name) = (deployment.namespace(), deployment.name_any());
            eru_store
                .state()
                .iter()
                .filter(|eru| eru.namespace() == namespace && eru.spec.target.name == name)
                .map(|eru| ObjectRef::from_obj(eru.as_ref()))
                .collect::<Vec<_>>()
        })
        .graceful_shutdown_on(shutdown_requested(shutdown));
    let synced = {
        let deployments_synced = deployments_synced.clone();
        async move {
            futures::join!(erus_synced.wait(), deployments_synced.wait());
        }
    };
    let context = Arc::new(EruContext {
        ctx,
        deployments,
        deployments_synced,
    });
    let run = drive(controller, KIND, context.ctx.clone(), context, reconcile);
    (run, synced)
}

fn slot_text(slot: DateTime<Utc>) -> String {
    slot.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The journal records for what the machine decided.
fn entry(eru: &Eru, commands: &[EruCommand], now: DateTime<Utc>) -> Entry {
    let object = object_key(KIND, eru);
    let target = eru.spec.target.name.clone();
    let mut entry = Entry::default();
    for command in commands {
        match command {
            EruCommand::RecordSlots(records) => entry.slots.extend(records.iter().map(|r| NewSlot {
                object: object.clone(),
                target: target.clone(),
                slot: r.first,
                last_slot: r.last,
                slot_count: r.count,
                result: r.reason.result(),
                reason: r.reason.as_str(),
                window: r.window,
                evaluated_at: now,
            })),
            EruCommand::RecordFired { slot } => {
                entry.slots.push(NewSlot {
                    object: object.clone(),
                    target: target.clone(),
                    slot: *slot,
                    last_slot: *slot,
                    slot_count: 1,
                    result: SlotResult::Fired,
                    reason: "scheduled",
                    window: None,
                    evaluated_at: now,
                });
                entry.restarts_started.push(NewRestart {
                    object: object.clone(),
                    target: target.clone(),
                    slot: *slot,
                    started_at: now,
                });
            }
            EruCommand::FinishRestart {
                slot,
                outcome,
                finished_at,
                reason,
            } => entry.restarts_finished.push(FinishedRestart {
                uid: object.uid.clone(),
                slot: *slot,
                finished_at: finished_at.unwrap_or(now),
                outcome: outcome.as_str(),
                reason: reason.clone(),
            }),
            EruCommand::PatchRestart { .. }
            | EruCommand::ReportInvalid { .. }
            | EruCommand::ReportTargetMissing => {}
        }
    }
    entry
}

/// The event for a restart in flight, from the target as observed.
fn tracking_event(
    state: &State,
    target: &TargetView,
    started_at: DateTime<Utc>,
    now: DateTime<Utc>,
    timeout: Duration,
) -> Option<EruEvent> {
    match state {
        State::Restarting { slot } if target.template_slot == Some(*slot) => Some(EruEvent::RestartPatched),
        State::Restarting { .. } => Some(EruEvent::RestartPending),
        State::RollingOut { slot } => Some(match target.verdict(*slot, started_at, now, timeout) {
            Verdict::Done => EruEvent::RolloutDone { finished_at: now },
            Verdict::Failed(reason) => EruEvent::RolloutFailed {
                finished_at: now,
                reason,
            },
            Verdict::Progressing => EruEvent::RolloutProgressed,
        }),
        _ => None,
    }
}

async fn reconcile(eru: Arc<Eru>, context: Arc<EruContext>) -> Result<Action> {
    let ctx = &context.ctx;
    // an unsynced cache would show the target as missing and abandon a restart in flight
    context.deployments_synced.wait().await;
    let now = Utc::now();
    let uid = eru.uid().unwrap_or_default();
    let (namespace, name) = (eru.namespace().unwrap_or_default(), eru.name_any());
    if eru.meta().deletion_timestamp.is_some() {
        ctx.statuses.forget(&uid);
        ctx.metrics.forget(KIND, &uid, &namespace, &name);
        return Ok(Action::await_change());
    }

    ctx.metrics.init_eru(&namespace, &name);

    // observe
    let known = ctx.statuses.current(
        &uid,
        &eru.resource_version().unwrap_or_default(),
        eru.status.as_ref(),
    );
    let schedule = Schedule::parse(&eru.spec.schedule, eru.spec.time_zone.as_deref());
    let target = context
        .deployments
        .get(&ObjectRef::new(&eru.spec.target.name).within(&namespace))
        .map(|d| view_deployment(&d));
    let open = ctx.journal.open_restart(&uid).await?;
    let open_slot = open.as_ref().and_then(|r| parse_ts(&r.slot));
    let started_at = open.as_ref().and_then(|r| parse_ts(&r.started_at)).unwrap_or(now);
    let mut state = restore(
        known.as_ref().and_then(|s| s.phase.as_deref()),
        known.as_ref().and_then(|s| s.current_slot),
        open_slot,
    );

    // events → machine
    let mut decision = Decision::default();
    let spec_event = match (&schedule, &target) {
        (Err(e), _) => EruEvent::SpecInvalid {
            reason: e.to_string(),
        },
        (Ok(_), None) => EruEvent::TargetMissing,
        (Ok(_), Some(_)) => EruEvent::SpecReady {
            suspend: eru.spec.suspend,
        },
    };
    state = dispatch_logged(&name, state, &spec_event, &mut decision);
    let timeout = Duration::seconds(eru.spec.rollout_timeout_seconds.unwrap_or_else(|| {
        target
            .as_ref()
            .map_or(600, |t| t.progress_deadline_seconds.into())
    }));
    if let Some(target) = &target {
        for _ in 0..2 {
            // Restarting may become RollingOut and then be judged in the same pass
            let Some(event) = tracking_event(&state, target, started_at, now, timeout) else {
                break;
            };
            let settled = matches!(event, EruEvent::RestartPending | EruEvent::RolloutProgressed);
            state = dispatch_logged(&name, state, &event, &mut decision);
            if settled || state.slot().is_none() {
                break;
            }
        }
    }
    let mut backlog = false;
    if let Ok(schedule) = &schedule {
        let created = eru
            .meta()
            .creation_timestamp
            .as_ref()
            .and_then(|t| DateTime::from_timestamp(t.0.as_second(), 0));
        let after = ctx
            .journal
            .last_accounted_slot(&uid)
            .await?
            .or(created)
            .unwrap_or(now);
        let runs: Vec<_> = ctx
            .journal
            .runs()
            .await?
            .iter()
            .filter_map(|r| Some((parse_ts(&r.started_at)?, parse_ts(&r.heartbeat_at)?)))
            .collect();
        let windows = downtime(&runs, after);
        let span = Span {
            after,
            now,
            starting_deadline: Duration::seconds(eru.spec.starting_deadline_seconds),
            suspended: eru.spec.suspend,
            downtime: &windows,
        };
        let accounting = account(schedule, &span);
        backlog = accounting.more;
        if !accounting.records.is_empty() || accounting.due.is_some() {
            let due = SlotsDue {
                records: accounting.records,
                due: accounting.due,
                gate: target.as_ref().map_or(Gate::Missing, TargetView::gate),
                template_slot: target.as_ref().and_then(|t| t.template_slot),
            };
            state = dispatch_logged(&name, state, &EruEvent::SlotsDue(due), &mut decision);
        }
    }

    // journal, then act
    let appended = ctx
        .commit(
            KIND,
            eru.as_ref(),
            &decision.transitions,
            entry(&eru, &decision.commands, now),
        )
        .await?;
    if appended.slots > 0 || appended.restarts_finished > 0 {
        count(ctx, &namespace, &name, &decision.commands, now, started_at);
    }
    let mut patch_error = None;
    for command in &decision.commands {
        match command {
            EruCommand::PatchRestart { slot } => match patch_restart(ctx, &eru, *slot).await {
                Ok(()) => {
                    ctx.metrics
                        .fire_lateness
                        .observe((Utc::now() - *slot).as_seconds_f64().max(0.0));
                    info!(eru = %name, slot = %slot_text(*slot), "restart patched");
                    if std::env::var(FAILPOINT_ENV).as_deref() == Ok("hang-after-restart-patch") {
                        warn!("failpoint hang-after-restart-patch: waiting to be killed");
                        std::future::pending::<()>().await;
                    }
                    let mut patched = Decision::default();
                    state = dispatch_logged(&name, state, &EruEvent::RestartPatched, &mut patched);
                    ctx.commit(KIND, eru.as_ref(), &patched.transitions, Entry::default())
                        .await?;
                }
                Err(e) => {
                    let message = match &e {
                        kube::Error::Api(s) => s.message.clone(),
                        other => other.to_string(),
                    };
                    ctx.publish(
                        eru.as_ref(),
                        EventType::Warning,
                        "RestartPatchFailed",
                        "Restart",
                        Some(message.clone()),
                    )
                    .await;
                    patch_error = Some(message);
                }
            },
            EruCommand::ReportInvalid { reason } => {
                ctx.publish(
                    eru.as_ref(),
                    EventType::Warning,
                    "InvalidSpec",
                    "Validate",
                    Some(reason.clone()),
                )
                .await
            }
            EruCommand::ReportTargetMissing => {
                let note = format!(
                    "Deployment {} not found in namespace {namespace}",
                    eru.spec.target.name
                );
                ctx.publish(
                    eru.as_ref(),
                    EventType::Warning,
                    "TargetMissing",
                    "Observe",
                    Some(note),
                )
                .await
            }
            EruCommand::FinishRestart {
                slot,
                outcome,
                reason,
                ..
            } if appended.restarts_finished > 0 => {
                let (type_, why) = match outcome {
                    RestartOutcome::Succeeded => (EventType::Normal, "RestartSucceeded"),
                    RestartOutcome::Failed => (EventType::Warning, "RestartFailed"),
                    RestartOutcome::Abandoned => (EventType::Warning, "RestartAbandoned"),
                };
                let mut note = format!("restart of slot {} {}", slot_text(*slot), outcome.as_str());
                if let Some(reason) = reason {
                    note.push_str(&format!(": {reason}"));
                }
                ctx.publish(eru.as_ref(), type_, why, "Restart", Some(note)).await
            }
            _ => {}
        }
    }

    // status
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
    let summary = ctx.journal.eru_summary(&uid).await?;
    let status = status(
        &eru,
        known.as_ref(),
        &state,
        &schedule,
        target.is_some(),
        next,
        &summary,
        patch_error,
    );
    ctx.apply_status(eru.as_ref(), KIND, known.as_ref(), &status)
        .await?;

    Ok(if backlog {
        Action::requeue(StdDuration::from_millis(10))
    } else {
        let mut wake = next;
        if state.slot().is_some() {
            // no Deployment event may come when a rollout stalls: wake up at its deadline
            let deadline = started_at + timeout + Duration::seconds(1);
            wake = Some(wake.map_or(deadline, |n| n.min(deadline)));
        }
        match wake {
            Some(t) => Action::requeue((t - Utc::now()).to_std().unwrap_or_default() + SLOT_MARGIN),
            None => Action::await_change(),
        }
    })
}

/// Feeds one event to the machine, logging what it saw and where it went (debug level).
fn dispatch_logged(name: &str, state: State, event: &EruEvent, decision: &mut Decision<EruCommand>) -> State {
    let from = state.phase();
    let to = step(EruMachine, state, event, decision);
    debug!(eru = %name, event = event.name(), from, to = to.phase(), slot = ?to.slot(), "dispatched");
    to
}

/// Counts journaled slots and finished restarts.
fn count(
    ctx: &Context,
    namespace: &str,
    name: &str,
    commands: &[EruCommand],
    now: DateTime<Utc>,
    started_at: DateTime<Utc>,
) {
    for command in commands {
        match command {
            EruCommand::RecordSlots(records) => {
                for r in records {
                    let labels = [namespace, name, r.reason.result().as_str(), r.reason.as_str()];
                    ctx.metrics
                        .slots
                        .with_label_values(&labels)
                        .inc_by(r.count as u64);
                }
            }
            EruCommand::RecordFired { .. } => {
                ctx.metrics
                    .slots
                    .with_label_values(&[namespace, name, "fired", "scheduled"])
                    .inc();
            }
            EruCommand::FinishRestart {
                outcome, finished_at, ..
            } => {
                ctx.metrics
                    .restarts
                    .with_label_values(&[namespace, name, outcome.as_str()])
                    .inc();
                if *outcome != RestartOutcome::Abandoned {
                    let seconds = (finished_at.unwrap_or(now) - started_at).as_seconds_f64();
                    ctx.metrics.restart_duration.observe(seconds.max(0.0));
                }
            }
            _ => {}
        }
    }
}

/// Sets the slot on the target's pod template with server-side apply (only our annotation).
async fn patch_restart(ctx: &Context, eru: &Eru, slot: DateTime<Utc>) -> kube::Result<()> {
    let api: Api<Deployment> = ctx.api(&eru.namespace().unwrap_or_default());
    let patch = json!({
        "apiVersion": "apps/v1",
        "kind": eru.spec.target.kind.as_str(),
        "metadata": {"name": eru.spec.target.name},
        "spec": {"template": {"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: slot_text(slot)}}}}
    });
    api.patch(
        &eru.spec.target.name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(patch),
    )
    .await?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn status(
    eru: &Eru,
    known: Option<&EruStatus>,
    state: &State,
    schedule: &std::result::Result<Schedule, super::schedule::ScheduleError>,
    target_found: bool,
    next: Option<DateTime<Utc>>,
    summary: &EruSummary,
    patch_error: Option<String>,
) -> EruStatus {
    let previous = known.map(|s| s.conditions.as_slice()).unwrap_or_default();
    let (valid, schedule_message) = match schedule {
        Ok(_) => (true, format!("schedule '{}' is valid", eru.spec.schedule)),
        Err(e) => (false, e.to_string()),
    };
    let target_message = format!("{} {}", eru.spec.target.kind.as_str(), eru.spec.target.name);
    let (ready, ready_reason, ready_message) = if !valid {
        (false, "InvalidSpec", schedule_message.clone())
    } else if !target_found {
        (false, "TargetMissing", format!("{target_message} not found"))
    } else if let Some(error) = patch_error {
        (false, "RestartPatchFailed", error)
    } else if eru.spec.suspend {
        (
            true,
            "Suspended",
            "suspended: slots are recorded as skipped".to_string(),
        )
    } else {
        (
            true,
            "Scheduled",
            next.map_or("no further slots".into(), |n| {
                format!("next restart at {}", slot_text(n))
            }),
        )
    };
    let conditions = vec![
        condition(previous, "Ready", ready, ready_reason, &ready_message, eru),
        condition(
            previous,
            "ScheduleValid",
            valid,
            if valid { "Parsed" } else { "InvalidSchedule" },
            &schedule_message,
            eru,
        ),
        condition(
            previous,
            "TargetFound",
            target_found,
            if target_found { "Found" } else { "NotFound" },
            &format!(
                "{target_message} {}",
                if target_found { "exists" } else { "not found" }
            ),
            eru,
        ),
    ];
    let last_restart = summary.last_restart.as_ref().and_then(|r| {
        let slot = parse_ts(&r.slot)?;
        let started_at = parse_ts(&r.started_at)?;
        let finished_at = r.finished_at.as_deref().and_then(parse_ts);
        Some(LastRestart {
            slot,
            started_at,
            finished_at,
            outcome: r.outcome.clone(),
            duration_seconds: finished_at.map(|f| (f - started_at).as_seconds_f64()),
        })
    });
    EruStatus {
        phase: Some(state.phase().to_string()),
        conditions,
        observed_generation: eru.meta().generation,
        current_slot: state.slot(),
        last_schedule_time: last_restart.as_ref().map(|r| r.slot),
        last_successful_time: summary.last_success,
        last_failure_time: summary.last_failure,
        next_schedule_time: next,
        last_restart,
        missed_slots: summary.missed_slots,
        last_missed_time: summary.last_missed,
    }
}
