//! Which Erus target which workload: kept from the Eru watch's events, so a Deployment,
//! StatefulSet or DaemonSet event finds its Erus with one lookup instead of a scan of every Eru.

use std::{
    collections::{BTreeSet, HashMap, HashSet},
    sync::{Arc, RwLock},
};

use kube::{ResourceExt, runtime::reflector::ObjectRef, runtime::watcher};

use super::{CachedEru, Target, TargetKind};
use crate::memory::{key_hash, shrink_after_burst};

/// A (namespace, name) pair by its [`key_hash`]: with string keys the index took ~400 bytes an
/// Eru (massif, 10,000 Erus). Two pairs colliding would make a workload's event also reconcile
/// an Eru that does not target it, which costs a pass and changes nothing.
type Key = u64;

fn key(namespace: &str, name: &str) -> Key {
    key_hash((namespace, name))
}

#[derive(Debug, Default)]
struct Inner {
    /// (target, Eru) pairs, each by key: a target's Erus are a range (a map of lists took a list
    /// per target, ~200 bytes an Eru with the rest).
    pairs: BTreeSet<(Key, Key)>,
    /// Eru → its target and its name.
    erus: HashMap<Key, (Key, Box<str>)>,
    /// Erus seen since a relist began (the others are gone when it ends).
    relisted: Option<HashSet<Key>>,
}

impl Inner {
    /// Files the Eru `eru` (named `name`) under `target`, or nowhere.
    fn set(&mut self, eru: Key, name: &str, target: Option<Key>) {
        if let Some((old, _)) = self.erus.remove(&eru) {
            self.pairs.remove(&(old, eru));
        }
        if let Some(target) = target {
            self.pairs.insert((target, eru));
            self.erus.insert(eru, (target, name.into()));
        }
        shrink_after_burst(&mut self.erus);
    }
}

/// The index; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Targets(Arc<RwLock<Inner>>);

impl Targets {
    /// Follows one event of the Eru watch.
    pub fn observe(&self, event: &watcher::Event<CachedEru>) {
        let mut inner = self.0.write().expect("target index lock");
        match event {
            watcher::Event::Apply(eru) | watcher::Event::InitApply(eru) => {
                let (ns, n) = (eru.namespace().unwrap_or_default(), eru.name_any());
                let at = key(&ns, &n);
                inner.set(at, &n, Some(key(&ns, &eru.spec.target.key())));
                if let Some(seen) = inner.relisted.as_mut() {
                    seen.insert(at);
                }
            }
            watcher::Event::Delete(eru) => {
                let n = eru.name_any();
                inner.set(key(&eru.namespace().unwrap_or_default(), &n), &n, None)
            }
            watcher::Event::Init => inner.relisted = Some(HashSet::new()),
            watcher::Event::InitDone => {
                if let Some(seen) = inner.relisted.take() {
                    let gone: Vec<Key> = inner
                        .erus
                        .keys()
                        .filter(|k| !seen.contains(*k))
                        .copied()
                        .collect();
                    for eru in gone {
                        inner.set(eru, "", None);
                    }
                }
            }
        }
    }

    /// The Erus in `namespace` that target the workload `name` of `kind`.
    pub fn erus_of(&self, namespace: &str, kind: TargetKind, name: &str) -> Vec<ObjectRef<CachedEru>> {
        let target = key(
            namespace,
            &Target {
                kind,
                name: name.to_string(),
            }
            .key(),
        );
        let inner = self.0.read().expect("target index lock");
        inner
            .pairs
            .range((target, Key::MIN)..=(target, Key::MAX))
            .filter_map(|(_, eru)| inner.erus.get(eru))
            .map(|(_, n)| ObjectRef::new(n).within(namespace))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn eru_of(name: &str, kind: &str, target: &str) -> CachedEru {
        serde_json::from_value(json!({
            "apiVersion": "mtsre.meitu.com/v1", "kind": "Eru",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"schedule": "* * * * *", "target": {"kind": kind, "name": target}}
        }))
        .unwrap()
    }

    fn eru(name: &str, target: &str) -> CachedEru {
        eru_of(name, "Deployment", target)
    }

    fn names_of(index: &Targets, kind: TargetKind, target: &str) -> Vec<String> {
        let refs = index.erus_of("ns", kind, target);
        let mut names: Vec<String> = refs.into_iter().map(|r| r.name).collect();
        names.sort();
        names
    }

    fn names(index: &Targets, target: &str) -> Vec<String> {
        names_of(index, TargetKind::Deployment, target)
    }

    #[test]
    fn follows_applies_retargets_deletes_and_relists() {
        use watcher::Event::*;
        let index = Targets::default();
        for event in [
            Init,
            InitApply(eru("a", "web")),
            InitApply(eru("b", "web")),
            InitDone,
        ] {
            index.observe(&event);
        }
        assert_eq!(names(&index, "web"), ["a", "b"]);
        index.observe(&Apply(eru("b", "api")));
        assert_eq!(
            (names(&index, "web"), names(&index, "api")),
            (vec!["a".into()], vec!["b".into()])
        );
        index.observe(&Delete(eru("a", "web")));
        assert!(names(&index, "web").is_empty());
        // a relist that no longer has b (deleted while the watch was down)
        for event in [Init, InitApply(eru("c", "api")), InitDone] {
            index.observe(&event);
        }
        assert_eq!(names(&index, "api"), ["c"]);
    }

    #[test]
    fn workloads_of_different_kinds_and_the_same_name_have_their_own_erus() {
        use watcher::Event::*;
        let index = Targets::default();
        index.observe(&Apply(eru("d", "web")));
        index.observe(&Apply(eru_of("s", "StatefulSet", "web")));
        index.observe(&Apply(eru_of("a", "DaemonSet", "web")));
        assert_eq!(names(&index, "web"), ["d"]);
        assert_eq!(names_of(&index, TargetKind::StatefulSet, "web"), ["s"]);
        assert_eq!(names_of(&index, TargetKind::DaemonSet, "web"), ["a"]);
        // retargeted to another kind of the same name
        index.observe(&Apply(eru_of("d", "StatefulSet", "web")));
        assert!(names(&index, "web").is_empty());
        assert_eq!(names_of(&index, TargetKind::StatefulSet, "web"), ["d", "s"]);
    }
}
