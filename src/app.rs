//! Start-up wiring of `eru-operator run`: the journal, the HTTP API, the Kubernetes client, the
//! wait for the CRDs, this process's term ([`term`]: election, run record, heartbeats), journal
//! [`retention`] and the controllers of the three kinds. The only module besides `main.rs` that
//! imports the kinds, `http` and `config`.

use std::{
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use anyhow::Context as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client, Config, ResourceExt,
    config::{KubeConfigOptions, Kubeconfig},
    runtime::{
        wait::{await_condition, conditions},
        watcher,
    },
};
use tokio::sync::watch;
use tracing::{info, warn};

mod retention;
mod term;

use retention::retention;
use term::{Term, elect, finish, lead};

use crate::{
    config::{Controller, RunArgs},
    crds, eru,
    journal::{ActorLock, Journal, WriterLock, is_postgres_url, redact},
    memcached,
    memory::{trim_heap, trim_heap_every},
    metrics::Metrics,
    podset,
    runtime::{
        Context, MANAGER, Readiness, Settings,
        events::{Ahead, EventQueue, Reporter},
        leader::{LeaderOnlyLayer, Leadership},
        shutdown_requested,
        status::{StatusMemo, StatusWriter},
        urgent::Urgent,
        watch::Shared,
    },
};

/// `eru-operator run`.
/// The Eru controller's operator-wide options; a bad blackouts file stops the start with why.
fn eru_options(args: &RunArgs) -> anyhow::Result<eru::pass::context::Options> {
    let blackouts = eru::cluster_blackouts::ClusterBlackouts::load(args.blackouts_file.clone())
        .map_err(|e| anyhow::anyhow!("--blackouts-file: {e}"))?;
    let limits = eru::fleet::Limits {
        total: args.max_concurrent_restarts.map(|n| n as usize),
        per_namespace: args.max_concurrent_restarts_per_namespace.map(|n| n as usize),
        pace: crate::config::restart_pace(args.restart_pace, args.restart_rate)
            .map_err(|e| anyhow::anyhow!(e))?,
    };
    if let Some(pace) = limits.pace {
        info!(
            per_second = pace.rate,
            adaptive = pace.adaptive,
            "restarts are paced"
        );
    }
    if args.dry_run {
        info!("dry run: no Eru patches anything; slots are journaled as dry_run");
    }
    Ok(eru::pass::context::Options {
        limits,
        dry_run: args.dry_run,
        blackouts: Arc::new(blackouts),
        gates: eru::gates::GateOptions {
            prometheus_url: args.prometheus_url.clone(),
            poll: args.gate_poll_interval,
            cache_ttl: args.gate_cache_ttl,
        },
        notifications: notifications(args)?,
        silencer: Arc::new(eru::silence::Silencer::new(args.alertmanager_url.clone())),
    })
}

/// The notifications file's sinks and routes; a bad file stops the start with why (never a URL
/// or a key: the file is a Secret's).
fn notifications(args: &RunArgs) -> anyhow::Result<Option<eru::pass::context::Notifications>> {
    let Some(path) = &args.notifications_file else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("--notifications-file {}: {e}", path.display()))?;
    let notifier = crate::notify::Notifier::parse(&text)
        .map_err(|e| anyhow::anyhow!("--notifications-file {}: {e}", path.display()))?;
    info!(sinks = ?notifier.sink_names().collect::<Vec<_>>(), "notifications configured");
    Ok(Some(eru::pass::context::Notifications {
        notifier: Arc::new(notifier),
        wake: Arc::new(tokio::sync::Notify::new()),
    }))
}

pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let eru_options = eru_options(&args)?;
    // the slots health gates hold now: the Eru controller keeps them, the HTTP API's audit shows them
    let holds = eru::pass::context::Holds::default();
    let metrics = Metrics::new();
    let leadership = term::leadership(&args);
    let Opened {
        journal,
        _writer,
        _actor,
    } = open(&args, &metrics, &leadership).await?;
    let readiness = journal_open(&leadership);
    let instance = instance(&args);

    let shutdown = shutdown_channel();
    let Clients { client, writer } = clients(&args, &metrics, &leadership).await?;
    // restart patches in flight: status writes, Events and the HTTP API's queries let them go first
    let urgent = Urgent::default();
    let http = http_api(
        &args,
        crate::http::AppState {
            journal: journal.clone(),
            metrics: metrics.clone(),
            readiness: readiness.clone(),
            blackouts: eru_options.blackouts.clone(),
            holds: holds.clone(),
        },
        &client,
        &instance,
        urgent.clone(),
        shutdown.clone(),
    )
    .await?;
    let (term, elector) = elect(&args, &client, &instance, &leadership);
    let ctx = context(
        &args,
        &writer,
        &journal,
        &metrics,
        instance,
        urgent,
        &leadership,
        &readiness,
    );
    // the term: journaled (with the one it took over) before anything acts, then heartbeats
    let leader = Term {
        journal: journal.clone(),
        leadership: leadership.clone(),
        readiness: readiness.clone(),
        metrics,
        identity: elector.as_ref().map(|e| e.identity.clone()),
        heartbeat: Duration::from_secs(args.heartbeat_seconds),
    };
    let term = tokio::spawn(lead(leader, term, shutdown.clone()));

    if !crds_established(&client, &args.controllers, &shutdown).await? {
        finish(&journal, term, elector).await?;
        return Ok(());
    }
    readiness.crds.store(true, Ordering::Relaxed);

    let leader_tasks = leader_tasks(&args, &eru_options, &journal, &ctx, &leadership, &shutdown);
    let Tasks { running, syncing } = self::controllers(&args, &ctx, &client, &shutdown, eru_options, holds);
    let synced = synced(syncing, &readiness);
    let trimming = tokio::spawn(trim_heap_every(Duration::from_secs(60), shutdown.clone()));
    futures::join!(futures::future::join_all(running), synced);

    futures::future::join_all(leader_tasks).await;
    let _ = trimming.await;
    let _ = http.await;
    finish(&journal, term, elector).await?;
    journal.close().await;
    info!("stopped cleanly");
    Ok(())
}

/// What only the leader does beside the controllers: journal retention, and the notifications'
/// delivery (with `--notifications-file`).
fn leader_tasks(
    args: &RunArgs,
    eru_options: &eru::pass::context::Options,
    journal: &Journal,
    ctx: &Context,
    leadership: &Leadership,
    shutdown: &watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let retention = retention(
        journal.clone(),
        leadership.clone(),
        args.retention,
        shutdown.clone(),
    );
    let mut tasks = vec![tokio::spawn(retention)];
    let Some(n) = eru_options.notifications.clone() else {
        return tasks;
    };
    let delivery = crate::notify::deliver::Delivery {
        journal: journal.clone(),
        metrics: crate::notify::deliver::NotifyMetrics::new(ctx.metrics.registry(), &n.notifier),
        notifier: n.notifier,
        leadership: leadership.clone(),
        wake: n.wake,
        max_age: args.notification_max_age,
        backoff_max: args.notification_backoff_max,
        outbox_max: args.notification_outbox_max,
    };
    let delivery = crate::notify::deliver::deliver(delivery, shutdown.clone());
    tasks.push(tokio::spawn(delivery));
    tasks
}

/// What `/readyz` asks, once the journal is open: the leadership, then the CRDs and caches.
fn journal_open(leadership: &Leadership) -> Readiness {
    let readiness = Readiness {
        leader: leadership.clone(),
        ..Readiness::default()
    };
    readiness.journal.store(true, Ordering::Relaxed);
    readiness
}

/// The API server's clients.
struct Clients {
    /// The Lease's, the CRD wait's and the HTTP API's access reviews: any process, leader or not.
    client: Client,
    /// The controllers': every write refused unless this process leads at that instant.
    writer: Client,
}

async fn clients(args: &RunArgs, metrics: &Metrics, leadership: &Leadership) -> anyhow::Result<Clients> {
    Ok(Clients {
        client: client(args, metrics.api_throttled.clone(), None).await?,
        writer: client(args, metrics.api_throttled.clone(), Some(leadership.clone())).await?,
    })
}

/// This process's name in Events and the Lease: `--instance`, else the pod's name.
fn instance(args: &RunArgs) -> String {
    args.instance
        .clone()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "eru-operator".to_string())
}

/// Whether the CRDs of the controllers to run are established (false: a stop was asked first).
async fn crds_established(
    client: &Client,
    controllers: &[Controller],
    shutdown: &watch::Receiver<bool>,
) -> anyhow::Result<bool> {
    tokio::select! {
        waited = wait_for_crds(client, controllers) => waited?,
        _ = shutdown_requested(shutdown.clone()) => return Ok(false),
    }
    let names: Vec<&str> = controllers.iter().map(|c| c.as_str()).collect();
    info!(controllers = %names.join(","), "CRDs established; starting controllers");
    Ok(true)
}

/// Ends when every controller's caches synced, and marks the process ready then.
async fn synced(syncing: Vec<Task>, readiness: &Readiness) {
    let caches = readiness.caches.clone();
    futures::future::join_all(syncing).await;
    caches.store(true, Ordering::Relaxed);
    info!("watch caches synced; ready");
    trim_heap();
}

/// The journal, with the locks that keep a second operator from writing it: one process per
/// SQLite file, held until this process ends (replicas sharing a PostgreSQL journal are kept apart
/// by the leader Lease instead; without leader election, PostgreSQL's advisory lock).
struct Opened {
    journal: Journal,
    _writer: Option<WriterLock>,
    _actor: Option<ActorLock>,
}

async fn open(args: &RunArgs, metrics: &Metrics, leadership: &Leadership) -> anyhow::Result<Opened> {
    let _writer = if is_postgres_url(&args.database) {
        None
    } else {
        Some(WriterLock::acquire(std::path::Path::new(&args.database))?)
    };
    let journal = Journal::connect(&args.database).await?;
    let _actor = if is_postgres_url(&args.database) && !args.leader_elect {
        Some(journal.lock_actor().await?)
    } else {
        None
    };
    let batches = metrics.journal_batch.clone();
    journal.observe_batches(Box::new(move |size, _| batches.observe(size as f64)));
    // nothing is journaled by a process that does not lead at that instant
    journal.guard_writes({
        let leadership = leadership.clone();
        Box::new(move || leadership.is_leader())
    });
    info!(database = %redact(&args.database), backend = journal.backend().as_str(), "journal open");
    Ok(Opened {
        journal,
        _writer,
        _actor,
    })
}

/// The controllers' shared context: the leader-guarded client, the journal, the Event queue and
/// the status writer, in the order of writes under pressure.
#[allow(clippy::too_many_arguments)]
fn context(
    args: &RunArgs,
    writer: &Client,
    journal: &Journal,
    metrics: &Metrics,
    instance: String,
    urgent: Urgent,
    leadership: &Leadership,
    readiness: &Readiness,
) -> Arc<Context> {
    // the order of writes under pressure: restart patches, then statuses, then Events
    let statuses = Urgent::default();
    let memo = Arc::new(StatusMemo::default());
    Arc::new(Context {
        client: writer.clone(),
        journal: journal.clone(),
        metrics: metrics.clone(),
        events: EventQueue::spawn(
            writer.clone(),
            Reporter {
                controller: MANAGER.into(),
                instance,
            },
            Ahead {
                urgent: urgent.clone(),
                statuses: statuses.clone(),
            },
            metrics.events_dropped.clone(),
        ),
        settings: Settings {
            namespace: args.namespace.clone(),
            default_schedule: args.default_schedule.clone(),
            memcached_image: args.memcached_image.clone(),
            concurrency: args.concurrency,
        },
        statuses: memo.clone(),
        status_writer: StatusWriter::spawn(writer.clone(), urgent.clone(), statuses, memo),
        urgent,
        leadership: leadership.clone(),
        readiness: readiness.clone(),
    })
}

/// What the controllers run (their watch caches included), and what ends when their caches synced.
struct Tasks {
    running: Vec<Task>,
    syncing: Vec<Task>,
}

type Task = std::pin::Pin<Box<dyn Future<Output = ()>>>;

/// The controllers `--controllers` names, each with its watch caches.
fn controllers(
    args: &RunArgs,
    ctx: &Arc<Context>,
    client: &Client,
    shutdown: &watch::Receiver<bool>,
    eru_options: eru::pass::context::Options,
    holds: eru::pass::context::Holds,
) -> Tasks {
    let mut tasks = Tasks {
        running: Vec::new(),
        syncing: Vec::new(),
    };
    if args.runs(Controller::Podset) {
        let (run, synced) = podset::reconcile::controller(ctx.clone(), shutdown.clone());
        tasks.running.push(Box::pin(run));
        tasks.syncing.push(Box::pin(synced));
    }
    if args.runs(Controller::Memcached) {
        let (run, synced) = memcached::reconcile::controller(ctx.clone(), shutdown.clone());
        tasks.running.push(Box::pin(run));
        tasks.syncing.push(Box::pin(synced));
    }
    if args.runs(Controller::Eru) {
        eru_controllers(args, ctx, client, shutdown, eru_options, holds, &mut tasks);
    }
    tasks
}

/// The Eru controller and the automatic Erus' controller, over one lean cache of each workload
/// kind and one of Erus that both read.
fn eru_controllers(
    args: &RunArgs,
    ctx: &Arc<Context>,
    client: &Client,
    shutdown: &watch::Receiver<bool>,
    eru_options: eru::pass::context::Options,
    holds: eru::pass::context::Holds,
    tasks: &mut Tasks,
) {
    let namespace = &args.namespace;
    let deployments = Shared::new(
        client,
        namespace,
        watcher::Config::default(),
        eru::workloads::lean_deployment,
    );
    let statefulsets = Shared::new(
        client,
        namespace,
        watcher::Config::default(),
        eru::workloads::lean_statefulset,
    );
    let daemonsets = Shared::new(
        client,
        namespace,
        watcher::Config::default(),
        eru::workloads::lean_daemonset,
    );
    let workloads = eru::pass::context::Workloads {
        deployments: &deployments,
        statefulsets: &statefulsets,
        daemonsets: &daemonsets,
    };
    let mut erus = Shared::new(
        client,
        namespace,
        watcher::Config::default(),
        eru::CachedEru::lean,
    );
    let (auto, auto_synced) = eru::auto::controller(ctx.clone(), shutdown.clone(), workloads, &mut erus);
    let (eru_controller, erus_synced) = eru::pass::reconcile::controller(
        ctx.clone(),
        shutdown.clone(),
        &mut erus,
        workloads,
        eru_options,
        holds,
    );
    let caches = {
        let shutdown = shutdown.clone();
        async move {
            futures::join!(
                deployments.run(shutdown.clone()),
                statefulsets.run(shutdown.clone()),
                daemonsets.run(shutdown.clone()),
                erus.run(shutdown.clone())
            );
        }
    };
    tasks.running.push(Box::pin(caches));
    tasks.running.push(Box::pin(eru_controller));
    tasks.running.push(Box::pin(auto));
    tasks.syncing.push(Box::pin(erus_synced));
    tasks.syncing.push(Box::pin(auto_synced));
}

/// The HTTP API on `--http-address`: plain, or HTTPS (`--tls-cert-file`, or self-signed with
/// `--http-auth kubernetes`), behind its bounds and access checks; and the probes on
/// `--probe-address` if given.
async fn http_api(
    args: &RunArgs,
    mut state: crate::http::AppState,
    client: &Client,
    instance: &str,
    urgent: Urgent,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    use crate::{
        config::HttpAuth,
        http::{
            auth::{Auth, AuthOptions},
            limits::Guard,
            queries::{Class, QueryThread},
        },
    };
    let auth = (args.http_auth == HttpAuth::Kubernetes).then(|| {
        let options = AuthOptions {
            audiences: args.http_token_audiences.clone(),
            max_reviews: usize::from(args.http_max_reviews),
            caller_reviews: args.http_caller_reviews,
        };
        Auth::new(client.clone(), options, &state.metrics)
    });
    let tls = http_tls(args, auth.is_some(), instance, &shutdown)?;
    if let Some(address) = args.probe_address {
        probes(address, state.clone(), shutdown.clone())?;
    }
    // the journal's queries on a low-priority thread, through connections of their own
    state.journal = state.journal.with_own_readers(u32::from(args.http_max_queries));
    let guard = Guard::new(
        auth,
        usize::from(args.http_max_queries),
        args.http_request_timeout,
    );
    let (class, why) = Class::chosen(args.http_query_class, std::process::id());
    let thread = QueryThread::start(class, why).context("starting the HTTP API's query thread")?;
    let guard = Arc::new(guard.behind(thread, urgent));
    let listener = std::net::TcpListener::bind(args.http_address)
        .with_context(|| format!("binding the HTTP API to {}", args.http_address))?;
    info!(
        address = %args.http_address,
        tls = tls.is_some(),
        auth = ?args.http_auth,
        "HTTP API listening"
    );
    let app = crate::http::router_with(state, guard);
    // on a thread of its own: a crowd of callers never queues among the reconciles' tasks
    let stopped = crate::http::serve::spawn(
        listener,
        app,
        tls,
        args.http_max_connections as usize,
        shutdown_requested(shutdown),
    )
    .context("starting the HTTP API's thread")?;
    Ok(tokio::spawn(async move {
        let _ = stopped.await;
    }))
}

/// The API's TLS: `--tls-cert-file`'s certificate (watched for changes), a self-signed one with
/// access checks (`secured`), or none (plain HTTP).
fn http_tls(
    args: &RunArgs,
    secured: bool,
    instance: &str,
    shutdown: &watch::Receiver<bool>,
) -> anyhow::Result<Option<tokio_rustls::TlsAcceptor>> {
    use crate::http::tls::{Certificate, Source};
    let source = match (&args.tls_cert_file, &args.tls_key_file) {
        (Some(cert), Some(key)) => Some(Source::Files {
            cert: cert.clone(),
            key: key.clone(),
        }),
        // the names a client inside the cluster or through a port-forward uses
        _ if secured => Some(Source::SelfSigned(vec![
            "localhost".into(),
            "127.0.0.1".into(),
            instance.into(),
            "eru-operator".into(),
            format!("eru-operator.{}.svc", args.leader_elect_namespace),
            format!("eru-operator.{}.svc.cluster.local", args.leader_elect_namespace),
        ])),
        _ => None,
    };
    let Some(source) = source else {
        return Ok(None);
    };
    let certificate = Certificate::load(source)?;
    let acceptor = certificate.acceptor()?;
    tokio::spawn(Arc::clone(&certificate).watch(shutdown_requested(shutdown.clone())));
    Ok(Some(acceptor))
}

/// The probes on `address`, plain HTTP, on the reconciles' runtime (a wedged runtime fails its
/// liveness probe), apart from the API's listener, thread and connection cap.
fn probes(
    address: std::net::SocketAddr,
    state: crate::http::AppState,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let listener =
        std::net::TcpListener::bind(address).with_context(|| format!("binding the probes to {address}"))?;
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    info!(%address, "probes (/healthz, /readyz) listening");
    let app = crate::http::probes(state);
    tokio::spawn(crate::http::serve::serve_probes(
        listener,
        app,
        shutdown_requested(shutdown),
    ));
    Ok(())
}

/// A Kubernetes client from `--kubeconfig`, or inferred ($KUBECONFIG, ~/.kube/config, in-cluster),
/// whose 429 answers are retried as [`crate::runtime::throttle`] says (counted in `throttled`);
/// with `leader_only`, its writes are refused unless this process leads when each is sent.
async fn client(
    args: &RunArgs,
    throttled: prometheus::IntCounterVec,
    leader_only: Option<Leadership>,
) -> anyhow::Result<Client> {
    let mut config = match &args.kubeconfig {
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
    config.default_retry = false;
    let stack = kube::client::ClientBuilder::try_from(config).context("building the Kubernetes client")?;
    // innermost, so that every retry of a throttled write is checked again
    let stack = stack.with_layer(&LeaderOnlyLayer(leader_only));
    // tower's retry clones the service it wraps: a buffer in front of kube's boxed stack
    Ok(stack
        .with_layer(&tower::buffer::BufferLayer::new(1024))
        .with_layer(&tower::retry::RetryLayer::new(
            crate::runtime::throttle::Throttled::new(throttled),
        ))
        .build())
}

/// Waits until the CRD of every controller that runs is Established, logging what it waits for
/// (never for the CRD of a controller that does not run).
async fn wait_for_crds(client: &Client, controllers: &[Controller]) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds::of(controllers) {
        let name = crd.name_any();
        loop {
            let established = await_condition(api.clone(), &name, conditions::is_crd_established());
            match tokio::time::timeout(Duration::from_secs(10), established).await {
                Ok(Ok(_)) => break,
                Ok(Err(e)) => warn!(crd = %name, error = %e, "cannot read CRD; retrying"),
                Err(_) => {
                    warn!(crd = %name, "waiting for CRD to be established; is it installed? (kubectl apply -f crds/, or drop its controller from --controllers)")
                }
            }
        }
    }
    Ok(())
}

/// A channel that turns true on SIGTERM or Ctrl-C, shared by every task.
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
