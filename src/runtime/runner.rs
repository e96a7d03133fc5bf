//! A controller's runner of its own, in place of kube-runtime's `Controller`, for the Eru and the
//! automatic-Eru controllers: their shared caches are the runtime's own [`Cache`], and kube's
//! `Controller` reads only kube's reflector `Store`. kube's scheduler keeps every trigger and requeue in a delay queue, a map and a
//! set that never shrink: after the initial listing or one slot that 10,000 Erus share, ~7.4 MB
//! stayed allocated for as long as the process ran. Here an object waits for its instant in
//! [`Wakes`], and the queue of objects due holds each once and gives its capacity back after a
//! burst.
//!
//! What it keeps of kube's runner: an object is passed at most once at a time (a trigger that
//! comes while its pass runs queues one pass more, after it), at most `concurrency` passes run at
//! once, a trigger for an object gone from the cache is dropped, and on shutdown no pass starts
//! while those running finish. Unlike kube's, each pass is a task of its own, so every worker
//! thread runs passes, and a pass that panics is logged and retried, not the controller's end.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    future::Future,
    sync::Arc,
    time::Duration,
};

use futures::{Stream, StreamExt};
use kube::{Resource, runtime::reflector::ObjectRef};
use tokio::task::{Id, JoinSet};
use tracing::{debug, error, warn};

use super::{
    Context,
    cache::Cache,
    driver::{instrumented, retry_delay},
    wakes::Wakes,
};
use crate::Result;
use crate::memory::{shrink_after_burst, shrink_set_after_burst};

/// How long after a pass that panicked its object is passed again.
const AFTER_PANIC: Duration = Duration::from_secs(5);

/// The objects due and the passes running, by object. Pure bookkeeping.
#[derive(Debug)]
struct Queue<K: Resource<DynamicType = ()>> {
    /// Objects due, in the order they came; each once (`queued`).
    order: VecDeque<ObjectRef<K>>,
    queued: HashSet<ObjectRef<K>>,
    /// The running passes' objects, by task.
    running: HashMap<Id, ObjectRef<K>>,
    busy: HashSet<ObjectRef<K>>,
    /// Running objects that came due again meanwhile: passed once more after.
    again: HashSet<ObjectRef<K>>,
}

impl<K: Resource<DynamicType = ()>> Default for Queue<K> {
    fn default() -> Self {
        Self {
            order: VecDeque::new(),
            queued: HashSet::new(),
            running: HashMap::new(),
            busy: HashSet::new(),
            again: HashSet::new(),
        }
    }
}

impl<K: Resource<DynamicType = ()>> Queue<K> {
    /// `object` is due (once, however often it comes before its pass starts).
    fn push(&mut self, object: ObjectRef<K>) {
        if self.queued.insert(object.clone()) {
            self.order.push_back(object);
        }
    }

    /// The next object whose pass may start: not one running (that one is kept for after).
    fn next(&mut self) -> Option<ObjectRef<K>> {
        while let Some(object) = self.order.pop_front() {
            self.queued.remove(&object);
            if self.busy.contains(&object) {
                self.again.insert(object);
                continue;
            }
            return Some(object);
        }
        // the burst is over: give back what it took
        if self.order.capacity() > 64 {
            self.order.shrink_to_fit();
        }
        shrink_set_after_burst(&mut self.queued);
        shrink_set_after_burst(&mut self.again);
        None
    }

    fn started(&mut self, task: Id, object: ObjectRef<K>) {
        self.busy.insert(object.clone());
        self.running.insert(task, object);
    }

    /// The pass of `task` ended; returns its object.
    fn finished(&mut self, task: Id) -> Option<ObjectRef<K>> {
        let object = self.running.remove(&task)?;
        self.busy.remove(&object);
        if self.again.remove(&object) {
            self.push(object.clone());
        }
        shrink_after_burst(&mut self.running);
        Some(object)
    }

    fn running(&self) -> usize {
        self.running.len()
    }
}

/// Runs `pass` on the objects of `store` as `triggers` and `wakes` bring them, at most
/// `concurrency` at once, until `shutdown` resolves and the passes running have finished. No
/// pass starts before `ready` resolves (the caches' initial listings). A pass sets its object's
/// next wake-up itself ([`Wakes::wake_at`], or [`guarded`] after a failure).
pub async fn run<K, Fut>(
    store: Cache<K>,
    wakes: Wakes,
    triggers: impl Stream<Item = ObjectRef<K>> + Send,
    concurrency: usize,
    ready: impl Future<Output = ()>,
    shutdown: impl Future<Output = ()>,
    pass: impl Fn(Arc<K>) -> Fut,
) where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let concurrency = concurrency.max(1);
    let mut triggers = std::pin::pin!(futures::stream::select(triggers, wakes.due_stream::<K>()));
    let (mut ready, mut shutdown) = (std::pin::pin!(ready), std::pin::pin!(shutdown));
    let mut queue = Queue::<K>::default();
    let mut passes = JoinSet::new();
    // triggers are taken (and each object queued once) from the start; passes wait for `ready`
    let (mut open, mut started) = (true, false);
    loop {
        while started && open && queue.running() < concurrency {
            let Some(object) = queue.next() else { break };
            match store.get(&object) {
                Some(obj) => {
                    let task = passes.spawn(pass(obj)).id();
                    queue.started(task, object);
                }
                None => debug!(object = %object, "gone before its queued pass"),
            }
        }
        if !open && passes.is_empty() {
            return;
        }
        tokio::select! {
            Some(done) = passes.join_next_with_id(), if !passes.is_empty() => {
                let (task, panicked) = match done {
                    Ok((task, ())) => (task, None),
                    Err(failed) => (failed.id(), Some(failed)),
                };
                let object = queue.finished(task);
                if let (Some(failed), Some(object)) = (panicked, object) {
                    error!(object = %object, error = %failed, "a pass panicked; passed again in 5 s");
                    let namespace = object.namespace.as_deref().unwrap_or_default();
                    wakes.wake_in(namespace, &object.name, AFTER_PANIC);
                }
            }
            trigger = triggers.next(), if open => match trigger {
                Some(object) => queue.push(object),
                None => open = false,
            },
            () = &mut ready, if !started => started = true,
            () = &mut shutdown, if open => open = false,
        }
    }
}

/// One pass of `namespace`/`name` as a runner runs it: only the leader acts (a standby's caches
/// stay warm, and it passes every object when promoted); the pass runs in the span kube's
/// controller gave each (its log lines name their object) and is instrumented; a failed one is
/// passed again after the runtime's retry delay, and one that asks to be passed again after a
/// delay is.
pub async fn guarded(
    ctx: &Context,
    kind: &'static str,
    wakes: &Wakes,
    (namespace, name): (&str, &str),
    pass: impl Future<Output = Result<Option<Duration>>>,
) {
    if !ctx.leadership.is_leader() {
        return;
    }
    let span = tracing::info_span!("reconciling object", object = %format_args!("{namespace}/{name}"));
    match tracing::Instrument::instrument(instrumented(ctx, kind, pass), span).await {
        Ok(None) => {}
        Ok(Some(after)) => wakes.wake_in(namespace, name, after),
        Err(error) => {
            warn!(kind, %namespace, %name, error = %error, "reconcile failed");
            wakes.wake_in(namespace, name, retry_delay(&error));
        }
    }
}

#[cfg(test)]
mod tests;
