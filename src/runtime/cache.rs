//! The store under each shared cache (Deployments, StatefulSets, DaemonSets, Erus), in place of
//! kube-runtime's reflector `Store`. kube's keys each object by a full reference (name, namespace,
//! uid and resource version: a 96-byte key and four strings of its own beside the object's), so at
//! 10,000 Erus and 10,000 Deployments its two tables held ~4.6 MB. Here an entry is the object's
//! pointer, found by a hash of its namespace and name and told apart by the object's own.
//!
//! What it keeps of kube's: an object is replaced whole by each watch event; a (re)list is
//! gathered aside and swapped in once complete, so until then readers see the old listing (the
//! deletion tracking relies on it, [`super::watch`]).

use std::{
    hash::{BuildHasher, RandomState},
    sync::{Arc, RwLock},
};

use hashbrown::HashTable;
use kube::{Resource, runtime::watcher};

/// Objects of kind `K` by namespace and name; cloning shares it. Read side of [`Filler`].
pub struct Cache<K> {
    table: Arc<RwLock<HashTable<Arc<K>>>>,
    /// Keyed at random per cache: names are chosen by namespace editors, who must not be able to
    /// pile their objects into one bucket.
    keys: Arc<RandomState>,
}

impl<K> Clone for Cache<K> {
    fn clone(&self) -> Self {
        Self {
            table: self.table.clone(),
            keys: self.keys.clone(),
        }
    }
}

impl<K> std::fmt::Debug for Cache<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let len = self.table.read().map(|t| t.len()).unwrap_or_default();
        f.debug_struct("Cache").field("objects", &len).finish()
    }
}

fn key_of<K: Resource>(obj: &K) -> (&str, &str) {
    let meta = obj.meta();
    (
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

impl<K: Resource> Cache<K> {
    /// The hash of the key of a cached object: its namespace (empty for a cluster-wide one) and
    /// name.
    fn hash(&self, namespace: &str, name: &str) -> u64 {
        self.keys.hash_one((namespace, name))
    }

    /// Inserts `obj` in `table`, replacing the object of its namespace and name; returns that
    /// one (for the caller to drop once it let go of the lock).
    fn insert(&self, table: &mut HashTable<Arc<K>>, obj: Arc<K>) -> Option<Arc<K>> {
        let (namespace, name) = key_of(obj.as_ref());
        let at = self.hash(namespace, name);
        match table.find_mut(at, |o| key_of(o.as_ref()) == (namespace, name)) {
            Some(slot) => Some(std::mem::replace(slot, obj)),
            None => {
                table.insert_unique(at, obj, |o| {
                    let (namespace, name) = key_of(o.as_ref());
                    self.hash(namespace, name)
                });
                None
            }
        }
    }

    /// An empty cache and the [`Filler`] that applies a watch's events to it.
    pub fn new() -> (Self, Filler<K>) {
        let cache = Self {
            table: Arc::default(),
            keys: Arc::default(),
        };
        let filler = Filler {
            cache: cache.clone(),
            listing: None,
        };
        (cache, filler)
    }

    /// The object `namespace`/`name` (namespace empty for a cluster-wide object).
    pub fn find(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        let table = self.table.read().expect("cache lock");
        table
            .find(self.hash(namespace, name), |o| {
                key_of(o.as_ref()) == (namespace, name)
            })
            .cloned()
    }

    /// The object `reference` names.
    pub fn get(&self, reference: &kube::runtime::reflector::ObjectRef<K>) -> Option<Arc<K>>
    where
        K: Resource<DynamicType = ()>,
    {
        self.find(
            reference.namespace.as_deref().unwrap_or_default(),
            &reference.name,
        )
    }

    /// Every object cached.
    pub fn state(&self) -> Vec<Arc<K>> {
        self.table.read().expect("cache lock").iter().cloned().collect()
    }

    /// How many objects are cached.
    pub fn len(&self) -> usize {
        self.table.read().expect("cache lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Applies a watch's events to its [`Cache`]: the write side, one per watch.
pub struct Filler<K> {
    cache: Cache<K>,
    /// A (re)list being gathered, swapped in at its end.
    listing: Option<HashTable<Arc<K>>>,
}

impl<K: Resource + Clone> Filler<K> {
    /// Applies `event`: an object applied replaces its namesake, one deleted leaves; a listing is
    /// gathered aside and replaces the whole cache once complete. Readers wait only for the
    /// table's change: objects are copied before the lock is taken and dropped after.
    pub fn apply(&mut self, event: &watcher::Event<K>) {
        let cache = &self.cache;
        match event {
            watcher::Event::Apply(obj) => {
                let obj = Arc::new(obj.clone());
                let replaced = cache.insert(&mut cache.table.write().expect("cache lock"), obj);
                drop(replaced);
            }
            watcher::Event::Delete(obj) => {
                let (namespace, name) = key_of(obj);
                let at = cache.hash(namespace, name);
                let removed = {
                    let mut table = cache.table.write().expect("cache lock");
                    let found = table.find_entry(at, |o| key_of(o.as_ref()) == (namespace, name));
                    found.ok().map(|entry| entry.remove().0)
                };
                drop(removed);
            }
            watcher::Event::Init => self.listing = Some(HashTable::new()),
            watcher::Event::InitApply(obj) => {
                let listing = self.listing.get_or_insert_default();
                cache.insert(listing, Arc::new(obj.clone()));
            }
            watcher::Event::InitDone => {
                let listing = self.listing.take().unwrap_or_default();
                // the old listing is dropped outside the lock
                let _old = std::mem::replace(&mut *cache.table.write().expect("cache lock"), listing);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use watcher::Event::*;

    use super::*;

    fn object(namespace: &str, name: &str, version: &str) -> ConfigMap {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": version}
        }))
        .unwrap()
    }

    fn version(cache: &Cache<ConfigMap>, namespace: &str, name: &str) -> Option<String> {
        cache
            .find(namespace, name)
            .and_then(|o| o.metadata.resource_version.clone())
    }

    #[test]
    fn an_applied_object_replaces_its_namesake_and_a_deleted_one_leaves() {
        let (cache, mut filler) = Cache::new();
        filler.apply(&Apply(object("a", "x", "1")));
        filler.apply(&Apply(object("b", "x", "1")));
        filler.apply(&Apply(object("a", "x", "2")));
        assert_eq!(cache.len(), 2, "one object per namespace and name");
        assert_eq!(version(&cache, "a", "x").as_deref(), Some("2"));
        assert_eq!(version(&cache, "b", "x").as_deref(), Some("1"));
        filler.apply(&Delete(object("a", "x", "3")));
        assert_eq!(version(&cache, "a", "x"), None);
        assert_eq!(
            version(&cache, "b", "x").as_deref(),
            Some("1"),
            "its namesake elsewhere stays"
        );
        // a deletion of what is not cached changes nothing
        filler.apply(&Delete(object("c", "x", "1")));
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn a_relist_replaces_the_whole_cache_once_complete() {
        let (cache, mut filler) = Cache::new();
        for event in [
            Init,
            InitApply(object("a", "x", "1")),
            InitApply(object("a", "y", "1")),
            InitDone,
        ] {
            filler.apply(&event);
        }
        assert_eq!(cache.len(), 2);
        filler.apply(&Init);
        filler.apply(&InitApply(object("a", "y", "2")));
        filler.apply(&InitApply(object("a", "z", "1")));
        // until the listing ends, readers see the old one
        assert_eq!(version(&cache, "a", "x").as_deref(), Some("1"));
        assert_eq!(version(&cache, "a", "z"), None);
        filler.apply(&InitDone);
        let mut names: Vec<String> = cache
            .state()
            .iter()
            .map(|o| o.metadata.name.clone().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["y", "z"], "x was deleted while the watch was down");
        assert_eq!(version(&cache, "a", "y").as_deref(), Some("2"));
        let reference = kube::runtime::reflector::ObjectRef::<ConfigMap>::new("z").within("a");
        assert!(cache.get(&reference).is_some());
    }

    /// An object deleted while a relist is gathered leaves the cache at once, and the listing
    /// decides at its end; a cluster-wide object (no namespace) is found with an empty one.
    #[test]
    fn a_delete_during_a_relist_and_a_cluster_wide_object() {
        let (cache, mut filler) = Cache::new();
        filler.apply(&Apply(object("a", "x", "1")));
        filler.apply(&Apply(object("a", "y", "1")));
        filler.apply(&Init);
        filler.apply(&InitApply(object("a", "y", "2")));
        filler.apply(&Delete(object("a", "x", "2")));
        assert_eq!(
            version(&cache, "a", "x"),
            None,
            "gone from the cache the readers see"
        );
        assert_eq!(version(&cache, "a", "y").as_deref(), Some("1"));
        filler.apply(&InitDone);
        assert_eq!(version(&cache, "a", "y").as_deref(), Some("2"));
        assert_eq!(cache.len(), 1);
        let mut cluster_wide = object("", "z", "1");
        cluster_wide.metadata.namespace = None;
        filler.apply(&Apply(cluster_wide));
        assert_eq!(version(&cache, "", "z").as_deref(), Some("1"));
        let reference = kube::runtime::reflector::ObjectRef::<ConfigMap>::new("z");
        assert!(cache.get(&reference).is_some());
    }

    /// Every object of a listing large enough to grow the table a few times is found by its own
    /// namespace and name.
    #[test]
    fn every_object_of_a_large_listing_is_found_by_its_name() {
        let (cache, mut filler) = Cache::new();
        filler.apply(&Init);
        for i in 0..5_000 {
            filler.apply(&InitApply(object(
                &format!("ns-{}", i % 7),
                &format!("o-{i}"),
                "1",
            )));
        }
        filler.apply(&InitDone);
        assert_eq!(cache.len(), 5_000);
        for i in 0..5_000 {
            let found = cache
                .find(&format!("ns-{}", i % 7), &format!("o-{i}"))
                .expect("cached");
            assert_eq!(found.metadata.name.as_deref(), Some(format!("o-{i}").as_str()));
        }
        assert!(cache.find("ns-0", "o-1").is_none(), "o-1 is in ns-1");
    }
}
