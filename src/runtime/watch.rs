//! Watch streams and their caches.
//!
//! kube-runtime's `Store::wait_until_ready` keeps a single waker: when two tasks wait on one
//! store at once, one of them is never woken (and a `Controller` itself waits on its main store
//! before it starts). So nothing here waits on a `Store`: each reflector stream announces its
//! initial listing on a `watch` channel instead, which any number of tasks can wait on.
//!
//! Caches are lean: objects lose their managedFields (but for the entries a caller keeps, without
//! their field sets) and the last-applied annotation before they enter a store, and a [`Shared`]
//! cache is one watch and one store that several controllers subscribe to. A [`Shared`] cache's
//! store is the runtime's own [`Cache`] (no key beside each object); the PodSet and Memcached
//! controllers' watches ([`watched`]) keep kube's reflector `Store`, which kube's `Controller`
//! reads (they hold only their own objects).

use std::{
    collections::{HashMap, HashSet},
    fmt::Debug,
};

use std::sync::Arc;

use futures::{Stream, StreamExt, stream::BoxStream};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, ObjectMeta};
use kube::{
    Api, Client, Resource,
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, watch};

use super::{
    cache::{Cache, Filler},
    shutdown_requested,
};
use crate::memory::key_hash;

/// The annotation `kubectl apply` keeps the whole last applied object in; no controller reads it.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Makes an object's metadata lean: no last-applied annotation, and of the managedFields only the
/// entries `keep` wants, each with its field set reduced to the list of its top-level keys
/// (`["f:spec"]`, see [`super::top_level_fields`]) so a reader can still tell what kind of write it
/// was, and when; their apiVersion and fieldsType go (nothing reads them).
pub fn lean_meta(meta: &mut ObjectMeta, keep: impl Fn(&ManagedFieldsEntry) -> bool) {
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            meta.annotations = None; // an emptied map may keep its node
        }
    }
    if let Some(entries) = meta.managed_fields.as_mut() {
        entries.retain(|e| keep(e));
        for e in entries.iter_mut() {
            e.api_version = None;
            e.fields_type = None;
            if let Some(FieldsV1(fields @ serde_json::Value::Object(_))) = e.fields_v1.as_mut() {
                // a one-key JSON map takes a whole B-tree node (~600 bytes); a list of keys, its keys
                let keys = fields
                    .as_object()
                    .into_iter()
                    .flat_map(|f| f.keys())
                    .map(|k| serde_json::Value::String(k.clone()))
                    .collect();
                *fields = serde_json::Value::Array(keys);
            }
        }
        if entries.is_empty() {
            meta.managed_fields = None;
        } else {
            entries.shrink_to_fit();
        }
    }
}

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

/// How a deletion-tracking watch tells what left: a `Delete` says so; a relist (the watch was
/// down) says it by omission, so the objects cached when it began are kept (the store still
/// holds them until it ends) and those the new listing lacks are gone. Nothing is kept between
/// relists (a map of every object's uid, namespace and name took ~170 bytes an object).
struct Seen<K>(Option<Vec<Arc<K>>>);

impl<K> Default for Seen<K> {
    fn default() -> Self {
        Self(None)
    }
}

impl<K: Resource<DynamicType = ()> + Clone> Seen<K> {
    /// Feeds one watch event, after its store applied it (`listed` reads that store); returns
    /// what left.
    fn observe(&mut self, event: &watcher::Event<K>, listed: impl FnOnce() -> Vec<Arc<K>>) -> Vec<Gone> {
        match event {
            watcher::Event::Apply(_) | watcher::Event::InitApply(_) => vec![],
            watcher::Event::Delete(obj) => vec![Gone::of(obj)],
            // the store swaps the new listing in at `InitDone`: until then it holds the old one
            watcher::Event::Init => {
                self.0 = Some(listed());
                vec![]
            }
            watcher::Event::InitDone => {
                let before = self.0.take().unwrap_or_default();
                let live = uid_hashes(&listed());
                before
                    .iter()
                    .filter(|o| !live.contains(&uid_hash(o.as_ref())))
                    .map(|o| Gone::of(o.as_ref()))
                    .collect()
            }
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
        .modify(|obj: &mut K| lean_meta(obj.meta_mut(), |_| false))
        .reflect(writer)
        .inspect(move |event| {
            let Ok(event) = event else { return };
            if let watcher::Event::InitDone = event {
                let _ = tx.send(true);
            }
            if let Some(deletions) = &deletions {
                for gone in seen.observe(event, || reader.state()) {
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

/// A cache several controllers share: one watch, one lean [`Cache`], a subscription per controller.
/// Subscribe (and ask for deletions or events) before [`Shared::run`] polls the watch.
pub struct Shared<K: Watchable> {
    pub store: Cache<K>,
    pub synced: Synced,
    filler: Filler<K>,
    source: BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>,
    ready: watch::Sender<bool>,
    gone: Vec<mpsc::UnboundedSender<Gone>>,
    hooks: Vec<Hook<K>>,
    stored: Vec<Hook<K>>,
    subscribers: Subscribers<K>,
}

/// The senders of a [`Shared`] cache's subscriptions (see [`Subscription`]). A subscription's
/// channel is unbounded: a relist queues every object once (a reference: its name and namespace)
/// until the controller's runner takes them, which it does at once.
type Subscribers<K> = std::sync::Mutex<Vec<mpsc::UnboundedSender<ObjectRef<K>>>>;

/// A controller's trigger on a [`Shared`] cache: the objects applied, and every object after
/// each (re)list, as they are in the store when taken; one deleted meanwhile is skipped.
///
/// Not kube-runtime's own subscriber (`ReflectHandle`, 5.0): when the object of the reference it
/// takes is gone from the store, it returns `Pending` without a waker, and the trigger then waits
/// for something else to wake its task (another trigger, a requeue timer). An Eru deleted between
/// its status write and the poll stalled its controller's trigger, and an Eru created next was
/// not reconciled for 30 s in an e2e test; on a quiet cluster, until another Eru's slot.
pub struct Subscription<K: Resource<DynamicType = ()> + 'static> {
    refs: mpsc::UnboundedReceiver<ObjectRef<K>>,
    store: Cache<K>,
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> Stream for Subscription<K> {
    type Item = Arc<K>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Arc<K>>> {
        loop {
            match std::task::ready!(self.refs.poll_recv(cx)) {
                Some(reference) => {
                    if let Some(obj) = self.store.get(&reference) {
                        return std::task::Poll::Ready(Some(obj));
                    }
                    // deleted since: take the next one (the receiver registers the waker when
                    // none is left)
                }
                None => return std::task::Poll::Ready(None),
            }
        }
    }
}

/// A function told every event of a [`Shared`] watch.
type Hook<K> = Box<dyn FnMut(&watcher::Event<K>) + Send>;

/// Only the objects whose `key` changed since they were last seen (keyed by uid), and every object
/// the first time: e.g. an object's generation, so that status writes (the operator's own among
/// them) trigger nothing.
pub fn only_changes<K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static>(
    subscription: Subscription<K>,
    key: impl Fn(&K) -> u64 + Send + 'static,
) -> impl Stream<Item = Arc<K>> + Send + 'static {
    relevant_changes(subscription, move |obj| Some(key(obj)))
}

/// [`only_changes`] for a controller that has nothing to do for most objects: `key` is `None`
/// for an object it need not look at, and such an object passes only when it stops being relevant
/// (its key was `Some` when last seen). Only relevant objects are remembered, and deleted ones
/// are forgotten at the next pruning (see [`LastKeys`]).
pub fn relevant_changes<K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static>(
    subscription: Subscription<K>,
    key: impl Fn(&K) -> Option<u64> + Send + 'static,
) -> impl Stream<Item = Arc<K>> + Send + 'static {
    let mut seen = LastKeys::new(subscription.store.clone());
    subscription.filter(move |obj| futures::future::ready(seen.changed(obj.as_ref(), key(obj))))
}

/// The key each object had when last seen, by a hash of its uid (16 bytes an object and the
/// table's overhead, where the uid itself would take 80). A subscription is not told of
/// deletions, so once the table holds a quarter more keys than the store held objects at the
/// last pruning (at least [`LastKeys::SLACK`] more), a new object first has the objects no longer
/// in the store forgotten. So objects that come and go grow the table to at most that, and cost
/// one pass over the store per at least a quarter of it (or 1,024) of objects new to the table;
/// the keys of deleted objects stay until enough new objects come.
///
/// This relies on an object absent from the store being gone for good (uids never return), true
/// of a [`Shared`] cache without a label or field selector: an object that leaves a selector and
/// comes back keeps its uid, and would pass once more as if new (harmless to a controller, which
/// decides from the object).
struct LastKeys<K> {
    keys: HashMap<u64, u64>,
    store: Cache<K>,
    /// The table is pruned when a new object comes and it holds this many keys.
    limit: usize,
}

impl<K: Resource + Clone> LastKeys<K> {
    /// Keys the table may hold beyond the store's objects before it is pruned, at least.
    const SLACK: usize = 1024;

    fn new(store: Cache<K>) -> Self {
        Self {
            keys: HashMap::new(),
            store,
            limit: Self::SLACK,
        }
    }

    /// Whether `obj` passes: its `key` is not what it was when last seen (or it was never seen),
    /// or it stopped being relevant (`None`, after `Some`).
    fn changed(&mut self, obj: &K, key: Option<u64>) -> bool {
        let uid = uid_hash(obj);
        match key {
            Some(value) => {
                if self.keys.len() >= self.limit && !self.keys.contains_key(&uid) {
                    self.forget_gone();
                }
                self.keys.insert(uid, value) != Some(value)
            }
            None => self.keys.remove(&uid).is_some(),
        }
    }

    /// Forgets the keys of objects no longer cached.
    fn forget_gone(&mut self) {
        let live = uid_hashes(&self.store.state());
        self.keys.retain(|uid, _| live.contains(uid));
        // (the store's size, not the keys kept: at a start every key is kept, and a limit of the
        // keys would prune again at each quarter more while the table first fills)
        self.limit = live.len() + (live.len() / 4).max(Self::SLACK);
    }
}

/// The objects a watch event (applied to `store`) triggers: the one applied; every object once a
/// (re)list is swapped in, as kube's own dispatcher does; none for the rest.
fn triggered<K: Resource<DynamicType = ()> + Clone>(
    event: &watcher::Event<K>,
    store: &Cache<K>,
) -> Vec<ObjectRef<K>> {
    match event {
        watcher::Event::Apply(obj) => vec![key_of(obj)],
        watcher::Event::InitDone => store.state().iter().map(|o| key_of(o.as_ref())).collect(),
        watcher::Event::Init | watcher::Event::InitApply(_) | watcher::Event::Delete(_) => vec![],
    }
}

/// The store's key of `obj`: its namespace and name (the uid and version would only add bytes to
/// each queued reference).
pub fn key_of<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectRef<K> {
    let meta = obj.meta();
    let mut key = ObjectRef::new(meta.name.as_deref().unwrap_or_default());
    key.namespace = meta.namespace.clone();
    key
}

/// An object's uid's [`key_hash`]; a collision would cost one skipped trigger.
fn uid_hash<K: Resource>(obj: &K) -> u64 {
    key_hash(obj.meta().uid.as_deref().unwrap_or_default())
}

/// The [`uid_hash`] of each of `objects`.
fn uid_hashes<K: Resource>(objects: &[Arc<K>]) -> HashSet<u64> {
    objects.iter().map(|o| uid_hash(o.as_ref())).collect()
}

impl<K> Shared<K>
where
    K: Watchable,
{
    /// Watches `K` in the operator's scope with `config`; `lean` trims each object before it is
    /// stored.
    pub fn new(
        client: &Client,
        namespace: &Option<String>,
        config: watcher::Config,
        lean: impl FnMut(&mut K) + Send + 'static,
    ) -> Self {
        let api = match namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let (store, filler) = Cache::new();
        let (ready, rx) = watch::channel(false);
        Self {
            store,
            synced: Synced(rx),
            filler,
            source: watcher(api, config).default_backoff().modify(lean).boxed(),
            ready,
            gone: Vec::new(),
            hooks: Vec::new(),
            stored: Vec::new(),
            subscribers: Default::default(),
        }
    }

    /// The objects that change (added, modified, and all of them after a relist), as a
    /// controller's trigger.
    pub fn subscribe(&self) -> Subscription<K> {
        let (tx, refs) = mpsc::unbounded_channel();
        self.subscribers.lock().expect("subscribers lock").push(tx);
        Subscription {
            refs,
            store: self.store.clone(),
        }
    }

    /// The objects that leave the cache (see [`Gone`]).
    pub fn deletions(&mut self) -> mpsc::UnboundedReceiver<Gone> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.gone.push(tx);
        rx
    }

    /// Calls `hook` with every watch event, before the store applies it.
    pub fn on_event(&mut self, hook: impl FnMut(&watcher::Event<K>) + Send + 'static) {
        self.hooks.push(Box::new(hook));
    }

    /// Calls `hook` with every watch event, once the store applied it.
    pub fn on_stored(&mut self, hook: impl FnMut(&watcher::Event<K>) + Send + 'static) {
        self.stored.push(Box::new(hook));
    }

    /// Polls the watch (filling the store, feeding the subscribers) until shutdown.
    pub async fn run(self, shutdown: watch::Receiver<bool>) {
        let Self {
            store,
            mut filler,
            source,
            ready,
            gone,
            mut hooks,
            mut stored,
            subscribers,
            ..
        } = self;
        let subscribers = subscribers.into_inner().expect("subscribers lock");
        let tell = {
            let store = store.clone();
            move |event: &watcher::Event<K>| {
                let refs = triggered(event, &store);
                for tx in &subscribers {
                    // a subscriber gone (its controller stopped) takes nothing
                    refs.iter().for_each(|r| drop(tx.send(r.clone())));
                }
            }
        };
        let mut seen = Seen::default();
        let track = !gone.is_empty();
        let events = source
            .inspect(move |event| {
                if let Ok(event) = event {
                    hooks.iter_mut().for_each(|hook| hook(event));
                }
            })
            .inspect(move |event| {
                let Ok(event) = event else { return };
                filler.apply(event);
                stored.iter_mut().for_each(|hook| hook(event));
                tell(event);
                if let watcher::Event::InitDone = event {
                    let _ = ready.send(true);
                }
                if track {
                    for g in seen.observe(event, || store.state()) {
                        gone.iter().for_each(|tx| drop(tx.send(g.clone())));
                    }
                }
            })
            .for_each(|_| futures::future::ready(()));
        tokio::select! {
            _ = events => {}
            _ = shutdown_requested(shutdown) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::ResourceExt;

    use super::*;

    fn object(uid: &str) -> ConfigMap {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("cm-{uid}"), "namespace": "ns", "uid": uid}
        }))
        .unwrap()
    }

    /// Feeds events through a cache and [`Seen`], as a [`Shared`] watch does.
    fn feed(events: Vec<watcher::Event<ConfigMap>>) -> Vec<String> {
        let (store, mut filler) = Cache::<ConfigMap>::new();
        let mut seen = Seen::default();
        let mut gone = Vec::new();
        for event in events {
            filler.apply(&event);
            gone.extend(seen.observe(&event, || store.state()).into_iter().map(|g| g.uid));
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

    #[tokio::test]
    async fn only_relevant_objects_and_those_that_stop_being_relevant_pass() {
        // (uid, relevant key) as a watch would deliver them
        let updates = [
            ("plain", None),   // never relevant: never passes
            ("auto", Some(1)), // first seen: passes
            ("auto", Some(1)), // unchanged: filtered
            ("plain", None),
            ("auto", Some(2)), // changed: passes
            ("auto", None),    // stopped being relevant: passes once
            ("auto", None),
            ("auto", Some(2)), // relevant again: passes
        ];
        let keys: HashMap<&str, Vec<Option<u64>>> =
            updates.iter().fold(HashMap::new(), |mut m, (uid, key)| {
                m.entry(*uid).or_default().push(*key);
                m
            });
        let next = std::sync::Mutex::new(HashMap::<String, usize>::new());
        let (store, mut writer) = Cache::<ConfigMap>::new();
        let (tx, refs) = mpsc::unbounded_channel();
        for (uid, _) in updates {
            writer.apply(&watcher::Event::Apply(object(uid)));
            tx.send(key_of(&object(uid))).unwrap();
        }
        drop(tx);
        let subscription = Subscription { refs, store };
        let passed: Vec<String> = relevant_changes(subscription, move |cm: &ConfigMap| {
            let uid = cm.metadata.uid.clone().unwrap();
            let mut next = next.lock().unwrap();
            let at = next.entry(uid.clone()).or_default();
            *at += 1;
            keys[uid.as_str()][*at - 1]
        })
        .map(|cm| cm.metadata.uid.clone().unwrap())
        .collect()
        .await;
        assert_eq!(passed, ["auto", "auto", "auto", "auto"]);
    }

    /// Objects that come and go do not grow the table: the keys of deleted objects are forgotten
    /// at its limit, and a cached object's key is kept (seen again unchanged, it does not pass).
    #[test]
    fn the_last_keys_of_deleted_objects_are_forgotten() {
        let (store, mut writer) = Cache::<ConfigMap>::new();
        let mut last = LastKeys::new(store);
        let kept = object("kept");
        writer.apply(&watcher::Event::Apply(kept.clone()));
        assert!(last.changed(&kept, Some(1)), "first seen");
        let slack = LastKeys::<ConfigMap>::SLACK;
        for i in 0..10 * slack {
            let cm = object(&format!("gone-{i}"));
            writer.apply(&watcher::Event::Apply(cm.clone()));
            assert!(last.changed(&cm, Some(1)));
            writer.apply(&watcher::Event::Delete(cm));
        }
        assert!(
            last.keys.len() < 2 * slack,
            "{} keys remembered for 1 cached object after {} came and went",
            last.keys.len(),
            10 * slack
        );
        assert!(!last.changed(&kept, Some(1)), "the cached object's key was kept");
        assert!(last.changed(&kept, Some(2)));
    }

    /// At a start (every object cached before the first is seen), the table keeps every key and
    /// is pruned once as it fills, not at each quarter more: its limit follows the store.
    #[test]
    fn the_last_keys_of_cached_objects_are_kept() {
        let (store, mut writer) = Cache::<ConfigMap>::new();
        let mut last = LastKeys::new(store);
        let n = 5 * LastKeys::<ConfigMap>::SLACK;
        let objects: Vec<ConfigMap> = (0..n).map(|i| object(&format!("live-{i}"))).collect();
        for cm in &objects {
            writer.apply(&watcher::Event::Apply(cm.clone()));
        }
        for cm in &objects {
            assert!(last.changed(cm, Some(1)));
        }
        assert_eq!(last.keys.len(), n, "no cached object's key is forgotten");
        assert_eq!(last.limit, n + n / 4, "one pruning, at the first limit");
        assert!(objects.iter().all(|cm| !last.changed(cm, Some(1))));
    }

    /// Through a subscription, the pruning reads the subscription's own store: a cached object
    /// seen again unchanged after thousands came and went still does not pass, and a deleted
    /// one's key is forgotten.
    /// (Polled outside a runtime: tokio's cooperative budget would end a task's run of receives
    /// after 128.)
    #[test]
    fn only_changes_prunes_against_the_subscriptions_store() {
        let (store, mut writer) = Cache::<ConfigMap>::new();
        let (tx, refs) = mpsc::unbounded_channel();
        let mut passed = Box::pin(only_changes(Subscription { refs, store }, |_: &ConfigMap| 1));
        let mut pass = |cm: &ConfigMap| {
            tx.send(key_of(cm)).unwrap();
            futures::FutureExt::now_or_never(passed.next())
                .flatten()
                .map(|cm| cm.metadata.uid.clone().unwrap())
        };
        let kept = object("kept");
        writer.apply(&watcher::Event::Apply(kept.clone()));
        assert_eq!(pass(&kept).as_deref(), Some("kept"));
        for i in 0..3 * LastKeys::<ConfigMap>::SLACK {
            let cm = object(&format!("gone-{i}"));
            writer.apply(&watcher::Event::Apply(cm.clone()));
            assert!(pass(&cm).is_some());
            writer.apply(&watcher::Event::Delete(cm));
        }
        assert_eq!(pass(&kept), None, "unchanged: filtered");
        // a deleted object's key was forgotten: its uid (were it to return) passes as new
        let first = object("gone-0");
        writer.apply(&watcher::Event::Apply(first.clone()));
        assert_eq!(pass(&first).as_deref(), Some("gone-0"), "forgotten by a pruning");
    }

    /// A reference whose object was deleted before it was taken is skipped, and the subscription
    /// still wakes for the next one (kube-runtime 5.0's subscriber returned `Pending` there
    /// without a waker: the next object waited for an unrelated wake-up).
    #[tokio::test]
    async fn a_subscription_skips_an_object_deleted_meanwhile_and_wakes_for_the_next() {
        let (store, mut writer) = Cache::<ConfigMap>::new();
        let (tx, refs) = mpsc::unbounded_channel();
        let mut subscription = Subscription { refs, store };
        let (deleted, created) = (object("deleted"), object("created"));
        writer.apply(&watcher::Event::Apply(deleted.clone()));
        tx.send(key_of(&deleted)).unwrap();
        writer.apply(&watcher::Event::Delete(deleted));
        let next = tokio::spawn(async move { subscription.next().await.map(|cm| cm.name_any()) });
        // the task took the deleted one's reference and waits
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!next.is_finished());
        writer.apply(&watcher::Event::Apply(created.clone()));
        tx.send(key_of(&created)).unwrap();
        let taken = tokio::time::timeout(std::time::Duration::from_secs(5), next).await;
        assert_eq!(taken.expect("woken").unwrap().as_deref(), Some("cm-created"));
    }

    /// What a subscription is told: an applied object; every object after a relist, not during it;
    /// nothing of a deletion.
    #[test]
    fn a_subscription_is_told_each_applied_object_and_every_one_after_a_relist() {
        let (store, mut writer) = Cache::<ConfigMap>::new();
        let mut told = |event: watcher::Event<ConfigMap>| {
            writer.apply(&event);
            let mut names: Vec<String> = triggered(&event, &store).into_iter().map(|r| r.name).collect();
            names.sort();
            names
        };
        assert_eq!(told(watcher::Event::Apply(object("a"))), ["cm-a"]);
        assert!(told(watcher::Event::Init).is_empty());
        assert!(told(watcher::Event::InitApply(object("a"))).is_empty());
        assert!(told(watcher::Event::InitApply(object("b"))).is_empty());
        assert_eq!(told(watcher::Event::InitDone), ["cm-a", "cm-b"]);
        assert!(told(watcher::Event::Delete(object("a"))).is_empty());
        // the key finds the object in the store
        let key = key_of(&object("b"));
        assert_eq!(key.namespace.as_deref(), Some("ns"));
        assert!(store.get(&key).is_some());
    }
}
