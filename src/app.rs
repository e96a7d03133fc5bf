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
    config::RunArgs,
    crds, eru,
    journal::{Journal, WriterLock, is_postgres_url, redact},
    machine::StatusMemo,
    memcached,
    memory::{trim_heap, trim_heap_every},
    metrics::Metrics,
    podset,
    runtime::{
        Context, MANAGER, Readiness, Settings,
        events::{Ahead, EventQueue, Reporter},
        shutdown_requested,
        status::StatusWriter,
        urgent::Urgent,
        watch::Shared,
    },
};

/// `eru-operator run`.
/// The Eru controller's operator-wide options; a bad blackouts file stops the start with why.
fn eru_options(args: &RunArgs) -> anyhow::Result<eru::context::Options> {
    let blackouts = eru::blackout::ClusterBlackouts::load(args.blackouts_file.clone())
        .map_err(|e| anyhow::anyhow!("--blackouts-file: {e}"))?;
    let limits = eru::fleet::Limits {
        total: args.max_concurrent_restarts.map(|n| n as usize),
        per_namespace: args.max_concurrent_restarts_per_namespace.map(|n| n as usize),
    };
    if args.dry_run {
        info!("dry run: no Eru patches anything; slots are journaled as dry_run");
    }
    Ok(eru::context::Options {
        limits,
        dry_run: args.dry_run,
        blackouts: Arc::new(blackouts),
        gates: eru::gates::GateOptions {
            prometheus_url: args.prometheus_url.clone(),
            poll: args.gate_poll_interval,
            cache_ttl: args.gate_cache_ttl,
        },
        holds: Default::default(),
    })
}

pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    // one operator process per SQLite file, held until this process ends (replicas sharing a
    // PostgreSQL journal are kept apart by the leader Lease instead)
    let _writer = if is_postgres_url(&args.database) {
        None
    } else {
        Some(WriterLock::acquire(std::path::Path::new(&args.database))?)
    };
    let eru_options = eru_options(&args)?;
    let journal = Journal::connect(&args.database).await?;
    // without leader election, one process acts on a PostgreSQL journal: its advisory lock
    let _actor = if is_postgres_url(&args.database) && !args.leader_elect {
        Some(journal.lock_actor().await?)
    } else {
        None
    };
    let metrics = Metrics::new();
    let batches = metrics.journal_batch.clone();
    journal.observe_batches(Box::new(move |size, _| batches.observe(size as f64)));
    let readiness = Readiness::default();
    readiness.journal.store(true, Ordering::Relaxed);
    let instance = args
        .instance
        .clone()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "eru-operator".to_string());
    info!(database = %redact(&args.database), backend = journal.backend().as_str(), "journal open");

    let shutdown = shutdown_channel();
    let client = client(&args, metrics.api_throttled.clone()).await?;
    // restart patches in flight: status writes, Events and the HTTP API's queries let them go first
    let urgent = Urgent::default();
    let http = http_api(
        &args,
        crate::http::AppState {
            journal: journal.clone(),
            metrics: metrics.clone(),
            readiness: readiness.clone(),
            blackouts: eru_options.blackouts.clone(),
            holds: eru_options.holds.clone(),
        },
        &client,
        &instance,
        urgent.clone(),
        shutdown.clone(),
    )
    .await?;
    let (leadership, term, elector) = elect(&args, &client, &instance);
    let reporter = Reporter {
        controller: MANAGER.into(),
        instance,
    };
    // the order of writes under pressure: restart patches, then statuses, then Events
    let statuses = Urgent::default();
    let memo = Arc::new(StatusMemo::default());
    let ctx = Arc::new(Context {
        client: client.clone(),
        journal: journal.clone(),
        metrics: metrics.clone(),
        events: EventQueue::spawn(
            client.clone(),
            reporter,
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
        status_writer: StatusWriter::spawn(client.clone(), urgent.clone(), statuses, memo),
        urgent,
        leadership: leadership.clone(),
        readiness: readiness.clone(),
    });
    // the term: journaled (with the one it took over) before anything acts, then heartbeats
    let term = tokio::spawn(lead(
        Term {
            journal: journal.clone(),
            leadership: leadership.clone(),
            readiness: readiness.clone(),
            metrics,
            identity: elector.as_ref().map(|e| e.identity.clone()),
            heartbeat: Duration::from_secs(args.heartbeat_seconds),
        },
        term,
        shutdown.clone(),
    ));

    tokio::select! {
        waited = wait_for_crds(&client) => waited?,
        _ = shutdown_requested(shutdown.clone()) => {
            finish(&journal, term, elector).await?;
            return Ok(());
        }
    }
    readiness.crds.store(true, Ordering::Relaxed);
    info!("CRDs established; starting controllers");

    let retention = tokio::spawn(retention(
        journal.clone(),
        leadership.clone(),
        args.retention,
        shutdown.clone(),
    ));
    // one lean cache of each workload kind and one of Erus, shared by the controllers that read
    // them
    let namespace = &args.namespace;
    let deployments = Shared::new(
        &client,
        namespace,
        watcher::Config::default(),
        eru::workloads::lean_deployment,
    );
    let statefulsets = Shared::new(
        &client,
        namespace,
        watcher::Config::default(),
        eru::workloads::lean_statefulset,
    );
    let daemonsets = Shared::new(
        &client,
        namespace,
        watcher::Config::default(),
        eru::workloads::lean_daemonset,
    );
    let workloads = eru::context::Workloads {
        deployments: &deployments,
        statefulsets: &statefulsets,
        daemonsets: &daemonsets,
    };
    let mut erus = Shared::new(
        &client,
        namespace,
        watcher::Config::default(),
        eru::CachedEru::lean,
    );
    let (podsets, podsets_synced) = podset::reconcile::controller(ctx.clone(), shutdown.clone());
    let (memcacheds, memcacheds_synced) = memcached::reconcile::controller(ctx.clone(), shutdown.clone());
    let (auto, auto_synced) = eru::auto::controller(ctx.clone(), shutdown.clone(), workloads, &mut erus);
    let (eru_controller, erus_synced) =
        eru::reconcile::controller(ctx.clone(), shutdown.clone(), &mut erus, workloads, eru_options);
    let caches = async {
        futures::join!(
            deployments.run(shutdown.clone()),
            statefulsets.run(shutdown.clone()),
            daemonsets.run(shutdown.clone()),
            erus.run(shutdown.clone())
        );
    };
    let synced = {
        let caches = readiness.caches.clone();
        async move {
            futures::join!(podsets_synced, memcacheds_synced, erus_synced, auto_synced);
            caches.store(true, Ordering::Relaxed);
            info!("watch caches synced; ready");
            trim_heap();
        }
    };
    let trimming = tokio::spawn(trim_heap_every(Duration::from_secs(60), shutdown.clone()));
    futures::join!(caches, podsets, memcacheds, eru_controller, auto, synced);

    let _ = retention.await;
    let _ = trimming.await;
    let _ = http.await;
    finish(&journal, term, elector).await?;
    journal.close().await;
    info!("stopped cleanly");
    Ok(())
}

/// The HTTP API on `--http-address`: plain, or HTTPS (`--tls-cert-file`, or self-signed with
/// `--http-auth kubernetes`), behind its bounds and access checks.
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
            auth::Auth,
            limits::Guard,
            queries::QueryThread,
            tls::{Certificate, Source},
        },
    };
    let auth = (args.http_auth == HttpAuth::Kubernetes).then(|| Auth::new(client.clone()));
    let source = match (&args.tls_cert_file, &args.tls_key_file) {
        (Some(cert), Some(key)) => Some(Source::Files {
            cert: cert.clone(),
            key: key.clone(),
        }),
        // the names a client inside the cluster or through a port-forward uses
        _ if auth.is_some() => Some(Source::SelfSigned(vec![
            "localhost".into(),
            "127.0.0.1".into(),
            instance.into(),
            "eru-operator".into(),
            format!("eru-operator.{}.svc", args.leader_elect_namespace),
            format!("eru-operator.{}.svc.cluster.local", args.leader_elect_namespace),
        ])),
        _ => None,
    };
    let tls = match source {
        Some(source) => {
            let certificate = Certificate::load(source)?;
            let acceptor = certificate.acceptor()?;
            tokio::spawn(Arc::clone(&certificate).watch(shutdown_requested(shutdown.clone())));
            Some(acceptor)
        }
        None => None,
    };
    // the journal's queries on a low-priority thread, through connections of their own
    state.journal = state.journal.with_own_readers(u32::from(args.http_max_queries));
    let guard = Guard::new(
        auth,
        usize::from(args.http_max_queries),
        args.http_request_timeout,
    );
    let thread = QueryThread::start().context("starting the HTTP API's query thread")?;
    let guard = Arc::new(guard.behind(thread, urgent));
    let listener = tokio::net::TcpListener::bind(args.http_address)
        .await
        .with_context(|| format!("binding the HTTP API to {}", args.http_address))?;
    info!(
        address = %args.http_address,
        tls = tls.is_some(),
        auth = ?args.http_auth,
        "HTTP API listening"
    );
    let app = crate::http::router_with(state, guard);
    Ok(tokio::spawn(crate::http::serve::serve(
        listener,
        app,
        tls,
        shutdown_requested(shutdown),
    )))
}

/// A Kubernetes client from `--kubeconfig`, or inferred ($KUBECONFIG, ~/.kube/config, in-cluster),
/// whose 429 answers are retried as [`crate::runtime::throttle`] says (counted in `throttled`).
async fn client(args: &RunArgs, throttled: prometheus::IntCounterVec) -> anyhow::Result<Client> {
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
    // tower's retry clones the service it wraps: a buffer in front of kube's boxed stack
    Ok(stack
        .with_layer(&tower::buffer::BufferLayer::new(1024))
        .with_layer(&tower::retry::RetryLayer::new(
            crate::runtime::throttle::Throttled::new(throttled),
        ))
        .build())
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
