//! Watch streams and their caches.
//!
//! kube-runtime's `Store::wait_until_ready` keeps a single waker: when two tasks wait on one
//! store at once, one of them is never woken (and a `Controller` itself waits on its main store
//! before it starts). So nothing here waits on a `Store`: each reflector stream announces its
//! initial listing on a `watch` channel instead, which any number of tasks can wait on.

use std::{
    collections::{HashMap, HashSet},
    fmt::Debug,
};

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
use tokio::sync::{mpsc, watch};

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

/// An object that left the cache: deleted (a watch `Delete`), or absent from a relist (deleted
/// while the watch was down). kube-runtime never reconciles an object that left its store, so
/// this is how a kind learns that one of its objects is gone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gone {
    pub uid: String,
    pub namespace: String,
    pub name: String,
}

impl Gone {
    fn of<K: Resource>(obj: &K) -> Self {
        let meta = obj.meta();
        Self {
            uid: meta.uid.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
        }
    }
}

/// What a deletion-tracking watch remembers of each object it has seen (for relists).
#[derive(Default)]
struct Seen(HashMap<String, Gone>);

impl Seen {
    /// Feeds one watch event (after the reflector applied it to `store`); returns what left.
    fn observe<K: Resource<DynamicType = ()> + Clone>(
        &mut self,
        event: &watcher::Event<K>,
        store: &Store<K>,
    ) -> Vec<Gone> {
        match event {
            watcher::Event::Apply(obj) | watcher::Event::InitApply(obj) => {
                let gone = Gone::of(obj);
                self.0.insert(gone.uid.clone(), gone);
                vec![]
            }
            watcher::Event::Delete(obj) => {
                let gone = Gone::of(obj);
                self.0.remove(&gone.uid);
                vec![gone]
            }
            watcher::Event::InitDone => {
                let live: HashSet<String> = store
                    .state()
                    .iter()
                    .filter_map(|o| o.meta().uid.clone())
                    .collect();
                let left: Vec<String> = self
                    .0
                    .keys()
                    .filter(|uid| !live.contains(*uid))
                    .cloned()
                    .collect();
                left.into_iter().filter_map(|uid| self.0.remove(&uid)).collect()
            }
            watcher::Event::Init => vec![],
        }
    }
}

/// A namespaced kind the operator can watch and cache.
pub trait Watchable:
    Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
    + Clone
    + DeserializeOwned
    + Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> Watchable for K where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static
{
}

/// Watches `K` in the operator's scope (`namespace`, else cluster-wide) with `config`.
pub fn watched<K>(
    client: &Client,
    namespace: &Option<String>,
    config: watcher::Config,
) -> Watched<K, impl Stream<Item = Result<K, watcher::Error>> + Send + 'static>
where
    K: Watchable,
{
    watch_objects(client, namespace, config, None)
}

/// [`watched`], and every object that leaves the cache on the returned channel (see [`Gone`]).
/// Only for the kinds the operator owns: it keeps a key per object, which a cache of Deployments
/// or Pods has no use for.
#[allow(clippy::type_complexity)]
pub fn watched_with_deletions<K>(
    client: &Client,
    namespace: &Option<String>,
    config: watcher::Config,
) -> (
    Watched<K, impl Stream<Item = Result<K, watcher::Error>> + Send + 'static>,
    mpsc::UnboundedReceiver<Gone>,
)
where
    K: Watchable,
{
    let (tx, rx) = mpsc::unbounded_channel();
    (watch_objects(client, namespace, config, Some(tx)), rx)
}

fn watch_objects<K>(
    client: &Client,
    namespace: &Option<String>,
    config: watcher::Config,
    deletions: Option<mpsc::UnboundedSender<Gone>>,
) -> Watched<K, impl Stream<Item = Result<K, watcher::Error>> + Send + 'static>
where
    K: Watchable,
{
    let api = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let (store, writer) = reflector::store();
    let (tx, rx) = watch::channel(false);
    let mut seen = Seen::default();
    let reader = store.clone();
    let stream = watcher(api, config)
        .default_backoff()
        .reflect(writer)
        .inspect(move |event| {
            let Ok(event) = event else { return };
            if let watcher::Event::InitDone = event {
                let _ = tx.send(true);
            }
            if let Some(deletions) = &deletions {
                for gone in seen.observe(event, &reader) {
                    // the receiver outlives the stream unless the operator is shutting down
                    let _ = deletions.send(gone);
                }
            }
        })
        .touched_objects();
    Watched {
        store,
        stream,
        synced: Synced(rx),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn object(uid: &str) -> ConfigMap {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("cm-{uid}"), "namespace": "ns", "uid": uid}
        }))
        .unwrap()
    }

    /// Feeds events through a reflector store and [`Seen`], as the watch stream does.
    fn feed(events: Vec<watcher::Event<ConfigMap>>) -> Vec<String> {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let mut seen = Seen::default();
        let mut gone = Vec::new();
        for event in events {
            writer.apply_watcher_event(&event);
            gone.extend(seen.observe(&event, &store).into_iter().map(|g| g.uid));
        }
        gone
    }

    #[test]
    fn deletes_and_objects_missing_from_a_relist_are_gone() {
        use watcher::Event::*;
        let gone = feed(vec![
            Init,
            InitApply(object("a")),
            InitApply(object("b")),
            InitApply(object("c")),
            InitDone,
            Apply(object("d")),
            Delete(object("a")),
            // the watch broke; b and d were deleted meanwhile, with no Delete event
            Init,
            InitApply(object("c")),
            InitApply(object("e")),
            InitDone,
        ]);
        assert_eq!(gone[0], "a");
        let mut relisted = gone[1..].to_vec();
        relisted.sort();
        assert_eq!(relisted, ["b", "d"], "the relist reveals what was deleted unseen");
    }
}
