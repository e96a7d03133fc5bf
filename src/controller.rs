//! The shared controller [`Context`] and the start-up of `eru-operator run`: journal, HTTP API,
//! CRD readiness, the three controllers and the journal heartbeat.

use std::{
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use anyhow::Context as _;
use chrono::Utc;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client, Config, Resource, ResourceExt,
    api::{Patch, PatchParams},
    config::{KubeConfigOptions, Kubeconfig},
    runtime::{
        controller::Action,
        events::{Event, EventType, Recorder, Reporter},
        wait::{await_condition, conditions},
    },
};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::{
    Error, Result,
    config::RunArgs,
    crds,
    journal::{Appended, Entry, Journal, NewTransition, ObjectKey},
    machine::{StatusMemo, Transition},
    metrics::Metrics,
};

/// Field manager for server-side apply, and the controller name in Events.
pub const MANAGER: &str = "eru-operator";

/// Operator-wide settings the reconcilers read.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Only this namespace is watched, when set.
    pub namespace: Option<String>,
    /// Schedule for Erus created from a Deployment annotation without a schedule.
    pub default_schedule: String,
    /// Image of memcached Deployments.
    pub memcached_image: String,
}

/// What every reconcile gets: clients and the shared journal, metrics and Event recorder.
pub struct Context {
    pub client: Client,
    pub journal: Journal,
    pub metrics: Metrics,
    pub recorder: Recorder,
    pub settings: Settings,
    /// Statuses written but maybe not yet in the watch caches.
    pub statuses: StatusMemo,
}

/// The journal identity of an object.
pub fn object_key<K: Resource>(kind: &'static str, obj: &K) -> ObjectKey {
    ObjectKey {
        kind,
        namespace: obj.meta().namespace.clone().unwrap_or_default(),
        name: obj.meta().name.clone().unwrap_or_default(),
        uid: obj.meta().uid.clone().unwrap_or_default(),
    }
}

impl Context {
    /// An `Api` for the kind in one namespace.
    pub fn api<K>(&self, namespace: &str) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// The one path by which transitions leave a machine: journal them (with whatever else this
    /// pass records) in one transaction, count them, and emit an Event for each. A replay that
    /// journals nothing new counts and emits nothing.
    pub async fn commit<K>(
        &self,
        kind: &'static str,
        obj: &K,
        transitions: &[Transition],
        mut entry: Entry,
    ) -> Result<Appended>
    where
        K: Resource<DynamicType = ()>,
    {
        let object = object_key(kind, obj);
        let observed = obj.meta().resource_version.clone().unwrap_or_default();
        let now = Utc::now();
        entry
            .transitions
            .extend(transitions.iter().map(|t| NewTransition {
                object: object.clone(),
                observed: observed.clone(),
                from: t.from,
                to: t.to,
                event: t.event,
                at: now,
                detail: serde_json::json!({}),
            }));
        if entry.is_empty() {
            return Ok(Appended::default());
        }
        let timer = self.metrics.journal_write.start_timer();
        let appended = self.journal.append(&entry).await;
        timer.observe_duration();
        let appended = appended?;
        if appended.transitions == 0 {
            return Ok(appended);
        }
        for t in transitions {
            self.metrics
                .transitions
                .with_label_values(&[kind, t.from, t.to])
                .inc();
            let note = format!("{} → {} on {}", t.from, t.to, t.event);
            self.publish(obj, EventType::Normal, t.to, t.event, Some(note))
                .await;
        }
        Ok(appended)
    }

    /// Writes `status` with server-side apply (unless it is what the object already has) and
    /// remembers it until the watch cache catches up.
    pub async fn apply_status<K, S>(
        &self,
        obj: &K,
        kind: &'static str,
        known: Option<&S>,
        status: &S,
    ) -> Result<()>
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
        S: serde::Serialize + PartialEq,
    {
        if known == Some(status) {
            return Ok(());
        }
        let api: Api<K> = self.api(&obj.namespace().unwrap_or_default());
        let patch = serde_json::json!({"apiVersion": K::api_version(&()), "kind": kind, "status": status});
        api.patch_status(
            &obj.name_any(),
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(patch),
        )
        .await?;
        let uid = obj.meta().uid.clone().unwrap_or_default();
        self.statuses
            .remember(&uid, &obj.resource_version().unwrap_or_default(), status);
        Ok(())
    }

    /// Emits a Kubernetes Event about `obj`. Best effort: a failure is logged, never returned.
    pub async fn publish<K>(
        &self,
        obj: &K,
        type_: EventType,
        reason: &str,
        action: &str,
        note: Option<String>,
    ) where
        K: Resource<DynamicType = ()>,
    {
        let event = Event {
            type_,
            reason: reason.to_string(),
            note,
            action: action.to_string(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &obj.object_ref(&())).await {
            warn!(object = %obj.name_any(), reason, error = %e, "could not publish Event");
        }
    }
}

/// Runs one reconcile with its duration, result and error category recorded.
pub async fn instrumented(
    ctx: &Context,
    kind: &'static str,
    reconcile: impl Future<Output = Result<Action>>,
) -> Result<Action> {
    let _timer = ctx.metrics.reconcile_timer(kind);
    let result = reconcile.await;
    let outcome = if result.is_ok() { "success" } else { "error" };
    ctx.metrics.reconciles.with_label_values(&[kind, outcome]).inc();
    if let Err(e) = &result {
        ctx.metrics
            .reconcile_errors
            .with_label_values(&[kind, e.category()])
            .inc();
    }
    result
}

/// Runs a controller: every reconcile instrumented ([`instrumented`]), failures requeued by
/// [`retry_after`] and logged. `context` is the controller's own state; `ctx` the shared one.
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
    controller
        .run(
            move |obj, context| {
                let ctx = ctx.clone();
                async move { instrumented(&ctx, kind, reconcile(obj, context)).await }
            },
            |_, error, _| retry_after(error),
            context,
        )
        .for_each(move |result| async move {
            if let Err(e) = result {
                warn!(kind, error = %e, "reconcile failed");
            }
        })
}

/// Requeue policy after a failed reconcile: soon for conflicts, later for the rest.
pub fn retry_after(error: &Error) -> Action {
    match error.category() {
        "conflict" => Action::requeue(Duration::from_millis(500)),
        _ => Action::requeue(Duration::from_secs(5)),
    }
}

/// Readiness of the process, reported by `/readyz`.
#[derive(Clone, Debug, Default)]
pub struct Readiness {
    pub journal: Arc<AtomicBool>,
    pub crds: Arc<AtomicBool>,
    pub caches: Arc<AtomicBool>,
}

impl Readiness {
    /// Ready once the journal is open, the CRDs are established and the watch caches synced.
    pub fn is_ready(&self) -> bool {
        self.journal.load(Ordering::Relaxed)
            && self.crds.load(Ordering::Relaxed)
            && self.caches.load(Ordering::Relaxed)
    }
}

/// A Kubernetes client from `--kubeconfig`, or inferred ($KUBECONFIG, ~/.kube/config, in-cluster).
async fn client(args: &RunArgs) -> anyhow::Result<Client> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("loading kubeconfig {}", path.display()))?
        }
        None => Config::infer()
            .await
            .context("no Kubernetes configuration found (use --kubeconfig)")?,
    };
    Client::try_from(config).context("building the Kubernetes client")
}

/// Waits until every CRD of the operator is Established, logging what it waits for.
async fn wait_for_crds(client: &Client) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (_, crd) in crds::all() {
        let name = crd.name_any();
        loop {
            let established = await_condition(api.clone(), &name, conditions::is_crd_established());
            match tokio::time::timeout(Duration::from_secs(10), established).await {
                Ok(Ok(_)) => break,
                Ok(Err(e)) => warn!(crd = %name, error = %e, "cannot read CRD; retrying"),
                Err(_) => {
                    warn!(crd = %name, "waiting for CRD to be established; is it installed? (kubectl apply -f crds/)")
                }
            }
        }
    }
    Ok(())
}

/// A future that completes on SIGTERM or Ctrl-C, shared by every task through a watch channel.
fn shutdown_channel() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .expect("installing the SIGTERM handler");
            tokio::select! {
                _ = ctrl_c => {},
                _ = term.recv() => {},
            }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        info!("shutdown requested");
        let _ = tx.send(true);
    });
    rx
}

/// Resolves when shutdown is requested on `rx`.
pub async fn shutdown_requested(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

/// `eru-operator run`.
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let journal = Journal::open(&args.database).await?;
    let metrics = Metrics::new();
    let readiness = Readiness::default();
    readiness.journal.store(true, Ordering::Relaxed);
    let instance = args
        .instance
        .clone()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "eru-operator".to_string());
    let run_id = journal
        .start_run(env!("CARGO_PKG_VERSION"), &instance, Utc::now())
        .await?;
    info!(database = %args.database.display(), run = run_id, "journal open");

    let shutdown = shutdown_channel();
    let listener = tokio::net::TcpListener::bind(args.http_address)
        .await
        .with_context(|| format!("binding the HTTP API to {}", args.http_address))?;
    info!(address = %args.http_address, "HTTP API listening");
    let app = crate::http::router(crate::http::AppState {
        journal: journal.clone(),
        metrics: metrics.clone(),
        readiness: readiness.clone(),
    });
    let http = tokio::spawn(
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown_requested(shutdown.clone()))
            .into_future(),
    );

    let client = client(&args).await?;
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: MANAGER.into(),
            instance: Some(instance),
        },
    );
    let ctx = Arc::new(Context {
        client: client.clone(),
        journal: journal.clone(),
        metrics,
        recorder,
        settings: Settings {
            namespace: args.namespace.clone(),
            default_schedule: args.default_schedule.clone(),
            memcached_image: args.memcached_image.clone(),
        },
        statuses: StatusMemo::default(),
    });

    tokio::select! {
        waited = wait_for_crds(&client) => waited?,
        _ = shutdown_requested(shutdown.clone()) => {
            journal.stop_run(run_id, Utc::now()).await?;
            return Ok(());
        }
    }
    readiness.crds.store(true, Ordering::Relaxed);
    info!("CRDs established; starting controllers");

    let heartbeat = {
        let journal = journal.clone();
        let every = Duration::from_secs(args.heartbeat_seconds);
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tokio::select! {
                    _ = tick.tick() => {
                        if let Err(e) = journal.heartbeat(run_id, Utc::now()).await {
                            warn!(error = %e, "journal heartbeat failed");
                        }
                    }
                    _ = shutdown_requested(stop.clone()) => break,
                }
            }
        })
    };

    let (podsets, podsets_synced) = crate::podset::reconcile::controller(ctx.clone(), shutdown.clone());
    let (memcacheds, memcacheds_synced) =
        crate::memcached::reconcile::controller(ctx.clone(), shutdown.clone());
    let (erus, erus_synced) = crate::eru::reconcile::controller(ctx.clone(), shutdown.clone());
    let (auto, auto_synced) = crate::eru::auto::controller(ctx.clone(), shutdown.clone());
    let synced = {
        let caches = readiness.caches.clone();
        async move {
            futures::join!(podsets_synced, memcacheds_synced, erus_synced, auto_synced);
            caches.store(true, Ordering::Relaxed);
            info!("watch caches synced; ready");
        }
    };
    futures::join!(podsets, memcacheds, erus, auto, synced);

    let _ = heartbeat.await;
    let _ = http.await;
    journal.stop_run(run_id, Utc::now()).await?;
    journal.close().await;
    info!("stopped cleanly");
    Ok(())
}

/// Watch streams and their caches.
///
/// kube-runtime's `Store::wait_until_ready` keeps a single waker: when two tasks wait on one
/// store at once, one of them is never woken (and a `Controller` itself waits on its main store
/// before it starts). So nothing here waits on a `Store`: each reflector stream announces its
/// initial listing on a `watch` channel instead, which any number of tasks can wait on.
pub mod watch_util {
    use std::fmt::Debug;

    use futures::{Stream, StreamExt};
    use kube::runtime::{
        WatchStreamExt,
        reflector::{self, Store},
        watcher,
    };

    use super::*;

    /// An `Api` for the operator's namespace scope.
    pub fn api_for<K>(client: &Client, namespace: &Option<String>) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()> + DeserializeOwned,
    {
        match namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
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

    /// A cache of `K` fed by a watch; the stream must be polled (a controller's trigger).
    pub fn reflect<K>(
        api: Api<K>,
        config: watcher::Config,
    ) -> (
        Store<K>,
        impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
        Synced,
    )
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let (reader, writer) = reflector::store();
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
        (reader, stream, Synced(rx))
    }
}
