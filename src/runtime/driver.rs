//! Running a controller: every reconcile instrumented (duration, result, error category), failures
//! requeued by a fixed policy, and shutdown shared through a watch channel.

use std::{future::Future, sync::Arc, time::Duration};

use kube::{Resource, runtime::controller::Action};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tracing::{debug, warn};

use super::Context;
use crate::{Error, Result};

/// Runs one reconcile with its duration, result and error category recorded.
pub async fn instrumented<T>(
    ctx: &Context,
    kind: &'static str,
    reconcile: impl Future<Output = Result<T>>,
) -> Result<T> {
    let _timer = ctx.metrics.reconcile_timer(kind);
    let result = reconcile.await;
    ctx.metrics
        .count_reconcile(kind, result.as_ref().err().map(Error::category));
    result
}

/// Runs a controller: every reconcile instrumented ([`instrumented`]), failures requeued by
/// [`retry_after`] and logged. `context` is the controller's own state; `ctx` the shared one.
///
/// Only the leader acts: a standby's controller runs (its caches stay warm) but its passes
/// return at once, and when it is promoted every object in its cache is reconciled.
pub fn drive<K, C, Fut>(
    controller: kube::runtime::Controller<K>,
    kind: &'static str,
    ctx: Arc<Context>,
    context: Arc<C>,
    reconcile: fn(Arc<K>, Arc<C>) -> Fut,
) -> impl Future<Output = ()> + Send
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    C: Send + Sync + 'static,
    Fut: Future<Output = Result<Action>> + Send + 'static,
{
    use futures::StreamExt;
    ctx.metrics.init_kind(kind);
    controller
        .reconcile_all_on(ctx.leadership.promoted())
        .run(
            // boxed: the controller keeps a slot per reconcile in flight, and its table keeps the
            // capacity of the largest burst (every object at start), so a slot is a pointer, not
            // the whole future
            move |obj, context| {
                let ctx = ctx.clone();
                Box::pin(async move {
                    if !ctx.leadership.is_leader() {
                        return Ok(Action::await_change());
                    }
                    instrumented(&ctx, kind, reconcile(obj, context)).await
                })
            },
            |_, error, _| retry_after(error),
            context,
        )
        .for_each(move |result| async move {
            match result {
                // a change queued for an object deleted since (its owned objects' deletions
                // come after its own): nothing is left to reconcile, nothing failed
                Err(kube::runtime::controller::Error::ObjectNotFound(obj)) => {
                    debug!(kind, object = %obj, "gone before its queued reconcile");
                }
                Err(e) => warn!(kind, error = %e, "reconcile failed"),
                Ok(_) => {}
            }
        })
}

/// Requeue policy after a failed reconcile: soon for conflicts, later for the rest.
pub fn retry_after(error: &Error) -> Action {
    Action::requeue(retry_delay(error))
}

/// How long after a failed reconcile its object is reconciled again ([`retry_after`]).
pub fn retry_delay(error: &Error) -> Duration {
    match error.category() {
        crate::error::Category::Conflict => Duration::from_millis(500),
        _ => Duration::from_secs(5),
    }
}

/// Resolves when shutdown is requested on `rx`.
pub async fn shutdown_requested(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}
