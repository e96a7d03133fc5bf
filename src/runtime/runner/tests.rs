use std::sync::{
    Mutex,
    atomic::{AtomicUsize, Ordering},
};

use chrono::Utc;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::watcher;
use tokio::sync::{mpsc, oneshot};

use super::*;

fn object(name: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.namespace = Some("ns".into());
    cm.metadata.uid = Some(format!("uid-{name}"));
    cm
}

fn reference(name: &str) -> ObjectRef<ConfigMap> {
    ObjectRef::new(name).within("ns")
}

/// A store holding `names`.
fn store_of(names: &[&str]) -> Cache<ConfigMap> {
    let (store, mut filler) = Cache::<ConfigMap>::new();
    for name in names {
        filler.apply(&watcher::Event::Apply(object(name)));
    }
    store
}

fn triggers() -> (
    mpsc::UnboundedSender<ObjectRef<ConfigMap>>,
    impl Stream<Item = ObjectRef<ConfigMap>> + Send,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) });
    (tx, stream)
}

/// Runs `pass` on `store` in a task of its own until the returned sender fires.
fn start<Fut>(
    store: Cache<ConfigMap>,
    wakes: Wakes,
    triggers: impl Stream<Item = ObjectRef<ConfigMap>> + Send + 'static,
    concurrency: usize,
    ready: impl Future<Output = ()> + Send + 'static,
    pass: impl Fn(Arc<ConfigMap>) -> Fut + Send + 'static,
) -> (oneshot::Sender<()>, tokio::task::JoinHandle<()>)
where
    Fut: Future<Output = ()> + Send + 'static,
{
    let (stop, stopped) = oneshot::channel::<()>();
    let shutdown = async {
        let _ = stopped.await;
    };
    let runner = tokio::spawn(run(store, wakes, triggers, concurrency, ready, shutdown, pass));
    (stop, runner)
}

/// A pass that takes `delay`, then writes its object's name into `log`.
fn recorder(
    log: &Arc<Mutex<Vec<String>>>,
    delay: Duration,
) -> impl Fn(Arc<ConfigMap>) -> futures::future::BoxFuture<'static, ()> + Send + 'static {
    let log = log.clone();
    move |cm| {
        let log = log.clone();
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            log.lock().unwrap().push(cm.metadata.name.clone().unwrap());
        })
    }
}

#[test]
fn an_object_due_twice_before_its_pass_is_passed_once_and_one_due_while_running_once_after() {
    let mut queue = Queue::<ConfigMap>::default();
    queue.push(reference("a"));
    queue.push(reference("b"));
    queue.push(reference("a"));
    let a = queue.next().expect("a");
    assert_eq!(a, reference("a"));
    let task = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(async { tokio::spawn(async {}).id() });
    queue.started(task, a);
    // due again while running, twice: kept for after, once
    queue.push(reference("a"));
    queue.push(reference("a"));
    assert_eq!(
        queue.next(),
        Some(reference("b")),
        "the running one is passed over"
    );
    assert_eq!(queue.next(), None);
    assert_eq!(queue.finished(task), Some(reference("a")));
    assert_eq!(queue.next(), Some(reference("a")), "once more after its pass");
    assert_eq!(queue.next(), None);
}

/// A burst's queue gives its capacity back once it drained (mutations: the shrink's comparisons;
/// at exactly 64 `>` and `>=` do the same).
#[test]
fn the_queue_gives_back_a_bursts_capacity() {
    let mut queue = Queue::<ConfigMap>::default();
    for i in 0..10_000 {
        queue.push(reference(&format!("o{i}")));
    }
    while queue.next().is_some() {}
    assert!(queue.order.capacity() <= 64, "order: {}", queue.order.capacity());
    assert!(
        queue.queued.capacity() < 1_000,
        "queued: {}",
        queue.queued.capacity()
    );
}

#[tokio::test]
async fn at_most_concurrency_passes_run_and_each_object_at_most_once_at_a_time() {
    let names: Vec<String> = (0..12).map(|i| format!("o{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let store = store_of(&refs);
    let (tx, stream) = triggers();
    // every object twice, o0 four times
    for name in names.iter().chain(&names) {
        tx.send(reference(name)).unwrap();
    }
    tx.send(reference("o0")).unwrap();
    tx.send(reference("o0")).unwrap();
    let now = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let passes = Arc::new(Mutex::new(Vec::<String>::new()));
    let running = Arc::new(Mutex::new(HashSet::<String>::new()));
    let (counts, max, log, busy) = (now.clone(), most.clone(), passes.clone(), running.clone());
    let (stop, runner) = start(
        store,
        Wakes::default(),
        stream,
        3,
        async {},
        move |cm: Arc<ConfigMap>| {
            let (counts, max, log, busy) = (counts.clone(), max.clone(), log.clone(), busy.clone());
            async move {
                let name = cm.metadata.name.clone().unwrap();
                if !busy.lock().unwrap().insert(name.clone()) {
                    // a panic here would only be logged by the runner: counted instead
                    counts.fetch_add(1000, Ordering::SeqCst);
                }
                let n = counts.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(n, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                counts.fetch_sub(1, Ordering::SeqCst);
                busy.lock().unwrap().remove(&name);
                log.lock().unwrap().push(name);
            }
        },
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    stop.send(()).unwrap();
    runner.await.expect("no panic");
    assert_eq!(
        most.load(Ordering::SeqCst),
        3,
        "the cap used in full, never passed"
    );
    let passes = passes.lock().unwrap();
    for name in &names {
        let n = passes.iter().filter(|p| *p == name).count();
        // the second trigger of each came before its first pass started or while it ran:
        // one pass, or one more after it; never more than the two
        assert!((1..=2).contains(&n), "{name}: {n} passes");
    }
}

#[tokio::test]
async fn a_trigger_for_an_object_gone_from_the_cache_is_dropped() {
    let store = store_of(&["here"]);
    let (tx, stream) = triggers();
    tx.send(reference("gone")).unwrap();
    tx.send(reference("here")).unwrap();
    let passes = Arc::new(Mutex::new(Vec::<String>::new()));
    let (stop, runner) = start(
        store,
        Wakes::default(),
        stream,
        2,
        async {},
        recorder(&passes, Duration::ZERO),
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.send(()).unwrap();
    runner.await.unwrap();
    assert_eq!(*passes.lock().unwrap(), ["here"]);
}

/// A pass sets its next wake-up; the runner passes the object again then. A pass that panics is
/// passed again after [`AFTER_PANIC`], and the runner goes on.
#[tokio::test]
async fn wake_ups_and_panicked_passes_bring_the_object_back() {
    let store = store_of(&["a", "b"]);
    let (tx, stream) = triggers();
    tx.send(reference("a")).unwrap();
    tx.send(reference("b")).unwrap();
    let wakes = Wakes::default();
    let passes = Arc::new(Mutex::new(Vec::<(String, chrono::DateTime<Utc>)>::new()));
    let (log, timer) = (passes.clone(), wakes.clone());
    let (stop, runner) = start(store, wakes, stream, 2, async {}, move |cm: Arc<ConfigMap>| {
        let (log, timer) = (log.clone(), timer.clone());
        async move {
            let name = cm.metadata.name.clone().unwrap();
            let first = {
                let mut log = log.lock().unwrap();
                log.push((name.clone(), Utc::now()));
                log.iter().filter(|(n, _)| *n == name).count() == 1
            };
            if first && name == "a" {
                timer.wake_at("ns", "a", Utc::now() + chrono::Duration::milliseconds(300));
            }
            if first && name == "b" {
                panic!("a pass that panics");
            }
        }
    });
    tokio::time::sleep(AFTER_PANIC + Duration::from_millis(700)).await;
    stop.send(()).unwrap();
    runner.await.expect("the runner survived the panic");
    let passes = passes.lock().unwrap();
    let of = |name: &str| {
        passes
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, at)| *at)
            .collect::<Vec<_>>()
    };
    let (a, b) = (of("a"), of("b"));
    assert_eq!(a.len(), 2, "{passes:?}");
    assert!(a[1] - a[0] >= chrono::Duration::milliseconds(300), "{a:?}");
    assert_eq!(b.len(), 2, "{passes:?}");
    assert!(
        b[1] - b[0] >= chrono::Duration::from_std(AFTER_PANIC).unwrap(),
        "{b:?}"
    );
}

/// On shutdown no pass starts, and the runner returns once those running finished.
#[tokio::test]
async fn shutdown_lets_the_running_passes_finish_and_starts_none() {
    let store = store_of(&["a", "b"]);
    let (tx, stream) = triggers();
    // b waits behind a (one pass at a time)
    tx.send(reference("a")).unwrap();
    tx.send(reference("b")).unwrap();
    let finished = Arc::new(Mutex::new(Vec::<String>::new()));
    let (stop, runner) = start(
        store,
        Wakes::default(),
        stream,
        1,
        async {},
        recorder(&finished, Duration::from_millis(300)),
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    stop.send(()).unwrap();
    runner.await.unwrap();
    assert_eq!(*finished.lock().unwrap(), ["a"], "a finished, b never started");
    drop(tx);
}

/// No pass starts before the caches are ready; the triggers meanwhile wait.
#[tokio::test]
async fn no_pass_starts_before_ready() {
    let store = store_of(&["a"]);
    let (tx, stream) = triggers();
    tx.send(reference("a")).unwrap();
    let passes = Arc::new(AtomicUsize::new(0));
    let count = passes.clone();
    let (go, ready) = oneshot::channel::<()>();
    let (stop, runner) = start(
        store,
        Wakes::default(),
        stream,
        1,
        async {
            let _ = ready.await;
        },
        move |_| {
            let count = count.clone();
            async move {
                count.fetch_add(1, Ordering::SeqCst);
            }
        },
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(passes.load(Ordering::SeqCst), 0);
    go.send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(passes.load(Ordering::SeqCst), 1);
    stop.send(()).unwrap();
    runner.await.unwrap();
}

/// Triggers are taken before the caches are ready (each object queued once, not a backlog in
/// the channel: with a bounded one the sender would block), no pass starts, and a runner
/// stopped then returns.
#[tokio::test]
async fn before_ready_triggers_are_taken_no_pass_starts_and_a_stop_returns() {
    let store = store_of(&["a"]);
    let (tx, rx) = mpsc::channel::<ObjectRef<ConfigMap>>(8);
    let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) });
    let passes = Arc::new(Mutex::new(Vec::<String>::new()));
    let (stop, runner) = start(
        store,
        Wakes::default(),
        stream,
        1,
        futures::future::pending(),
        recorder(&passes, Duration::ZERO),
    );
    let sent = tokio::time::timeout(Duration::from_secs(5), async {
        for _ in 0..1000 {
            tx.send(reference("a")).await.unwrap();
        }
    })
    .await;
    assert!(sent.is_ok(), "the runner took the triggers before it was ready");
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), runner)
        .await
        .expect("returns though never ready")
        .unwrap();
    assert!(passes.lock().unwrap().is_empty());
}
