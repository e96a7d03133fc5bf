//! Watch streams and their caches.
//!
//! kube-runtime's `Store::wait_until_ready` keeps a single waker: when two tasks wait on one
//! store at once, one of them is never woken (and a `Controller` itself waits on its main store
//! before it starts). So nothing here waits on a `Store`: each reflector stream announces its
//! initial listing on a `watch` channel instead, which any number of tasks can wait on.

use std::fmt::Debug;

use futures::{Stream, StreamExt};
use kube::{
    Api, Client, Resource,
    runtime::{
        WatchStreamExt,
        reflector::{self, Store},
        watcher,
    },
};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

/// Resolves once a reflector's initial listing is in its store.
#[derive(Clone, Debug)]
pub struct Synced(watch::Receiver<bool>);

impl Synced {
    /// Waits until the cache holds the initial listing (at once if it already does).
    pub async fn wait(&self) {
        let _ = self.0.clone().wait_for(|synced| *synced).await;
    }
}

/// A watched cache of `K`: the store, the stream that feeds it (it must be polled, e.g. as a
/// controller's trigger) and its [`Synced`] signal.
pub struct Watched<K: Resource<DynamicType = ()> + 'static, S> {
    pub store: Store<K>,
    pub stream: S,
    pub synced: Synced,
}

/// Watches `K` in the operator's scope (`namespace`, else cluster-wide) with `config`.
pub fn watched<K>(
    client: &Client,
    namespace: &Option<String>,
    config: watcher::Config,
) -> Watched<K, impl Stream<Item = Result<K, watcher::Error>> + Send + 'static>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    let api = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let (store, writer) = reflector::store();
    let (tx, rx) = watch::channel(false);
    let stream = watcher(api, config)
        .default_backoff()
        .reflect(writer)
        .inspect(move |event| {
            if let Ok(watcher::Event::InitDone) = event {
                let _ = tx.send(true);
            }
        })
        .touched_objects();
    Watched {
        store,
        stream,
        synced: Synced(rx),
    }
}
