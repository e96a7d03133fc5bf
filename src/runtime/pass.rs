//! The pass every kind runs, in one order: observe → plan (the machine; pure) → commit (journal) →
//! act (cluster writes, Events) → feed the results back to the plan → commit what that decided
//! → status → requeue. A kind supplies the steps ([`Steps`]); [`run`] is the order.

use std::{future::Future, sync::Arc};

use kube::runtime::controller::Action;

use crate::Result;

/// One kind's steps of a pass.
pub trait Steps: Send + Sync + 'static {
    /// The reconciled object.
    type Object: Send + Sync + 'static;
    /// The machine's state and what it decided, as the pass carries it between steps.
    type Plan: Send;
    /// A cluster write or Event the machine asked for.
    type Action: Send + Sync;
    /// What performing the actions brought back, for the machine.
    type Fed: Send;

    /// Observes the object (caches, journal) and plans: the machine restored and fed what was
    /// observed. `None`: nothing to plan (the object is going away, and was forgotten).
    fn plan(&self, obj: &Arc<Self::Object>) -> impl Future<Output = Result<Option<Self::Plan>>> + Send;

    /// Journals what the plan decided since the last commit (transitions, records; counted and
    /// announced once journaled), and hands over the actions it asked for.
    fn commit(
        &self,
        obj: &Arc<Self::Object>,
        plan: &mut Self::Plan,
    ) -> impl Future<Output = Result<Vec<Self::Action>>> + Send;

    /// Performs the actions; returns what the machine must hear back.
    fn act(
        &self,
        obj: &Arc<Self::Object>,
        plan: &Self::Plan,
        actions: Vec<Self::Action>,
    ) -> impl Future<Output = Result<Vec<Self::Fed>>> + Send;

    /// Feeds one result back to the machine (pure).
    fn after(plan: &mut Self::Plan, fed: Self::Fed);

    /// Writes the status the plan ends in (when it changed) and says when to come back.
    fn finish(
        &self,
        obj: &Arc<Self::Object>,
        plan: Self::Plan,
    ) -> impl Future<Output = Result<Action>> + Send;
}

/// Rounds of act → feed back → commit in one pass at most: a machine that keeps asking for
/// actions after hearing back is decided again by the next pass, never looped in this one.
const ROUNDS: usize = 3;

/// One pass over `obj` with `steps`.
pub async fn run<S: Steps>(obj: Arc<S::Object>, steps: Arc<S>) -> Result<Action> {
    let Some(mut plan) = steps.plan(&obj).await? else {
        return Ok(Action::await_change());
    };
    let mut actions = steps.commit(&obj, &mut plan).await?;
    for _ in 0..ROUNDS {
        if actions.is_empty() {
            break;
        }
        let results = steps.act(&obj, &plan, actions).await?;
        if results.is_empty() {
            break;
        }
        for fed in results {
            S::after(&mut plan, fed);
        }
        actions = steps.commit(&obj, &mut plan).await?;
    }
    steps.finish(&obj, plan).await
}
