//! Start-up wiring of `eru-operator run`: the journal and its run record, the HTTP API, the
//! Kubernetes client, the wait for the CRDs, the journal heartbeat and the controllers of the three
//! kinds. The only module besides `main.rs` that imports the kinds, `http` and `config`.

use std::{
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use anyhow::Context as _;
use chrono::Utc;
use k8s_openapi::{
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    Api, Client, Config, ResourceExt,
    config::{KubeConfigOptions, Kubeconfig},
    runtime::{
        events::{Recorder, Reporter},
        wait::{await_condition, conditions},
        watcher,
    },
};
use tokio::sync::{oneshot, watch};
use tracing::{error, info, warn};

use crate::{
    config::{Retention, RunArgs},
    crds, eru,
    journal::{Journal, WriterLock, is_postgres_url, redact},
    machine::StatusMemo,
    memcached,
    memory::{trim_heap, trim_heap_every},
    metrics::Metrics,
    podset,
    runtime::{
        Context, MANAGER, Readiness, Settings,
        events::EventQueue,
        leader::{self, Leadership},
        lean, shutdown_requested,
        status::StatusWriter,
        urgent::Urgent,
        watch::{Shared, lean_meta},
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
    let (leadership, term, elector) = elect(&args, &client, &instance);
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: MANAGER.into(),
            instance: Some(instance),
        },
    );
    let urgent = Urgent::default();
    let ctx = Arc::new(Context {
        client: client.clone(),
        journal: journal.clone(),
        metrics: metrics.clone(),
        events: EventQueue::spawn(recorder, urgent.clone()),
        settings: Settings {
            namespace: args.namespace.clone(),
            default_schedule: args.default_schedule.clone(),
            memcached_image: args.memcached_image.clone(),
            concurrency: args.concurrency,
        },
        statuses: StatusMemo::default(),
        status_writer: StatusWriter::spawn(client.clone(), urgent.clone()),
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
    let deployments = Shared::new(&client, namespace, watcher::Config::default(), lean_deployment);
    let statefulsets = Shared::new(&client, namespace, watcher::Config::default(), lean_statefulset);
    let daemonsets = Shared::new(&client, namespace, watcher::Config::default(), lean_daemonset);
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

/// The leader election of this process, when it is on.
struct Elector {
    identity: String,
    release: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// Starts leader election (`--leader-elect`): the process is a standby until `term` says which
/// term it took over. Without it the process leads from the start. Losing the Lease ends the
/// process at once (fail-stop), before any standby may take over.
fn elect(
    args: &RunArgs,
    client: &Client,
    instance: &str,
) -> (
    Leadership,
    oneshot::Receiver<Option<leader::Term>>,
    Option<Elector>,
) {
    let (acquired, term) = oneshot::channel();
    if !args.leader_elect {
        let _ = acquired.send(None);
        return (Leadership::leader(), term, None);
    }
    // unique per process: a restarted container must not mistake its predecessor's Lease for its own
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let identity = format!("{instance}_{:x}{nonce:08x}", std::process::id());
    let settings = leader::LeaseSettings {
        name: args.leader_elect_lease_name.clone(),
        namespace: args.leader_elect_namespace.clone(),
        identity: identity.clone(),
        lease_duration: args.leader_elect_lease_duration,
        renew_deadline: args.leader_elect_renew_deadline,
        retry_period: args.leader_elect_retry_period,
    };
    info!(lease = %settings.name, namespace = %settings.namespace, %identity, "leader election on: standing by until this process holds the lease");
    let (release, released) = watch::channel(false);
    let client = client.clone();
    let task = tokio::spawn(async move {
        if let Err(leader::Lost(why)) = leader::campaign(client, settings, acquired, released).await {
            error!(reason = %why, "lost the leader lease: exiting before another replica may take over");
            std::process::exit(1);
        }
    });
    (
        Leadership::standby(),
        term,
        Some(Elector {
            identity,
            release,
            task,
        }),
    )
}

/// What the operator keeps of a workload besides what its lean type declares
/// ([`crate::runtime::lean`]): of the managedFields only the restart manager's entry (when the
/// last restart landed), the `mtsre.meitu.com/` annotations of the object and of its template; no
/// labels or owners. Only the Eru and automatic-Eru controllers read these caches.
fn lean_workload(meta: &mut ObjectMeta, template: Option<&mut lean::Template>) {
    lean_meta(meta, |e| e.manager.as_deref() == Some(eru::RESTART_MANAGER));
    meta.labels = None;
    meta.owner_references = None;
    ours_only(&mut meta.annotations);
    if let Some(template) = template.and_then(|t| t.metadata.as_mut()) {
        ours_only(&mut template.annotations);
    }
}

/// Keeps only the `mtsre.meitu.com/` annotations; none is `None` (an emptied map may keep its
/// node, ~600 bytes).
fn ours_only(annotations: &mut Option<std::collections::BTreeMap<String, String>>) {
    if let Some(map) = annotations.as_mut() {
        map.retain(|k, _| k.starts_with(eru::ANNOTATION_PREFIX));
        if map.is_empty() {
            *annotations = None;
        }
    }
}

/// A Deployment as cached ([`lean_workload`]; its type keeps replicas, paused, the progress
/// deadline, the status counts and what `Progressing` says).
fn lean_deployment(deployment: &mut lean::Deployment) {
    lean_workload(
        &mut deployment.metadata,
        deployment.spec.as_mut().map(|s| &mut s.template),
    );
}

/// A StatefulSet as cached ([`lean_workload`]): replicas, the update strategy (type, partition),
/// the first ordinal and the status counts and revisions.
fn lean_statefulset(statefulset: &mut lean::StatefulSet) {
    lean_workload(
        &mut statefulset.metadata,
        statefulset.spec.as_mut().map(|s| &mut s.template),
    );
    if let Some(status) = statefulset.status.as_mut() {
        status.conditions = None;
    }
}

/// A DaemonSet as cached ([`lean_workload`]): the update strategy and the status counts.
fn lean_daemonset(daemonset: &mut lean::DaemonSet) {
    lean_workload(
        &mut daemonset.metadata,
        daemonset.spec.as_mut().map(|s| &mut s.template),
    );
    if let Some(status) = daemonset.status.as_mut() {
        status.conditions = None;
    }
}

/// What a term of leadership needs.
struct Term {
    journal: Journal,
    leadership: Leadership,
    readiness: Readiness,
    metrics: Metrics,
    /// The Lease identity, with leader election on.
    identity: Option<String>,
    heartbeat: Duration,
}

/// Leads once `acquired` says so: journals the term taken over (what the Lease proves of it) and
/// this process's run, retrying while the journal refuses, then lets the controllers act and
/// journals a heartbeat every `term.heartbeat` until shutdown. Returns the run, if it started.
async fn lead(
    term: Term,
    acquired: oneshot::Receiver<Option<leader::Term>>,
    stop: watch::Receiver<bool>,
) -> Option<i64> {
    let previous = tokio::select! {
        previous = acquired => previous.ok()?,
        _ = shutdown_requested(stop.clone()) => return None,
    };
    let instance = term.identity.clone().unwrap_or_else(|| {
        std::env::var("POD_NAME")
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_else(|_| "eru-operator".into())
    });
    let run_id = loop {
        let started = async {
            if let Some(p) = &previous {
                term.journal
                    .record_term(&p.holder, p.acquired.unwrap_or(p.renewed), p.renewed)
                    .await?;
            }
            term.journal
                .start_run(env!("CARGO_PKG_VERSION"), &instance, Utc::now())
                .await
        };
        match started.await {
            Ok(id) => break id,
            Err(e) => warn!(error = %e, "cannot journal the start of this run; retrying in 2 s"),
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
            _ = shutdown_requested(stop.clone()) => return None,
        }
    };
    if let Some(p) = &previous {
        info!(previous = %p.holder, last_renewed = %p.renewed, run = run_id, "leading: took over the lease");
    } else {
        info!(run = run_id, "leading");
    }
    term.readiness.leader.store(true, Ordering::Relaxed);
    term.metrics.leader.set(1);
    term.leadership.promote();
    let mut tick = tokio::time::interval(term.heartbeat);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let beat = term.journal.heartbeat(run_id, Utc::now()).await;
                term.metrics.journal_wrote(&beat, &term.readiness);
                if let Err(e) = beat {
                    warn!(error = %e, "journal heartbeat failed");
                }
            }
            _ = shutdown_requested(stop.clone()) => break,
        }
    }
    Some(run_id)
}

/// After everything else stopped: journals the end of the run, then releases the Lease.
async fn finish(
    journal: &Journal,
    term: tokio::task::JoinHandle<Option<i64>>,
    elector: Option<Elector>,
) -> anyhow::Result<()> {
    if let Ok(Some(run_id)) = term.await {
        journal.stop_run(run_id, Utc::now()).await?;
    }
    if let Some(elector) = elector {
        let _ = elector.release.send(true);
        let _ = elector.task.await;
    }
    Ok(())
}

/// Prunes journal rows older than `retention` (the leader only), a minute after it leads and then every ten minutes,
/// in batches of 500 rows per table with a pause between them (appends are never held up long).
async fn retention(
    journal: Journal,
    leadership: Leadership,
    retention: Retention,
    stop: watch::Receiver<bool>,
) {
    let Retention(Some(keep)) = retention else { return };
    tokio::select! {
        _ = leadership.acquired() => {}
        _ = shutdown_requested(stop.clone()) => return,
    }
    let mut first = true;
    loop {
        let wait = Duration::from_secs(if first { 60 } else { 600 });
        first = false;
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown_requested(stop.clone()) => return,
        }
        let cutoff = Utc::now() - keep;
        let mut total = 0;
        loop {
            match journal.prune(cutoff, 500).await {
                Ok(pruned) if pruned.total() > 0 => total += pruned.total(),
                Ok(_) => break,
                Err(e) => {
                    warn!(error = %e, "journal retention failed; retried in ten minutes");
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if total > 0 {
            info!(rows = total, cutoff = %cutoff, "journal rows past the retention pruned");
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Leaning a Deployment never changes what a controller reads of it.
    #[test]
    fn a_lean_deployment_reads_the_same() {
        let json = serde_json::json!({
            "metadata": {"name": "web", "namespace": "shop", "generation": 4,
                "labels": {"app": "web", "team": "a"},
                "annotations": {"mtsre.meitu.com/eru": "true", "mtsre.meitu.com/eru-schedule": "H 3 * * *",
                                "deployment.kubernetes.io/revision": "3",
                                "kubectl.kubernetes.io/last-applied-configuration": "{...}"},
                "managedFields": [
                    {"manager": "eru-operator-restart", "operation": "Apply", "time": "2026-11-23T03:00:00Z",
                     "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:template": {}}}},
                    {"manager": "kubectl", "operation": "Update", "time": "2026-11-22T03:00:00Z"}]},
            "spec": {"replicas": 3, "paused": false, "progressDeadlineSeconds": 120,
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"type": "RollingUpdate"},
                "template": {"metadata": {"labels": {"app": "web"},
                                          "annotations": {"mtsre.meitu.com/restartedAt": "2026-11-23T03:00:00Z",
                                                          "prometheus.io/scrape": "true"}},
                             "spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
            "status": {"observedGeneration": 4, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3,
                "availableReplicas": 3, "conditions": [
                    {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                     "message": "Deployment has minimum availability."},
                    {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                     "message": "ReplicaSet \"web-5d4f\" has successfully progressed.",
                     "lastUpdateTime": "2026-11-23T03:00:04Z"}]}
        });
        let full: lean::Deployment = serde_json::from_value(json.clone()).unwrap();
        let api: k8s_openapi::api::apps::v1::Deployment = serde_json::from_value(json).unwrap();
        let mut lean = full.clone();
        lean_deployment(&mut lean);
        let view = crate::runtime::deployment::DeploymentView::of_cached(&lean);
        assert_eq!(view, crate::runtime::deployment::DeploymentView::of(&api));
        assert!(
            view.available_since.is_some(),
            "the last completed rollout is kept"
        );
        assert_eq!(
            eru::target::view_deployment(&lean),
            eru::target::view_deployment(&full)
        );
        let desired =
            |d: &lean::Deployment| serde_json::to_value(eru::auto::desired(d, "web", "0 3 * * *")).unwrap();
        assert_eq!(desired(&lean), desired(&full));
        assert!(lean.metadata.labels.is_none());
        assert_eq!(lean.metadata.annotations.as_ref().map(|a| a.len()), Some(2));
        assert_eq!(lean.metadata.managed_fields.as_ref().map(Vec::len), Some(1));
        let template = lean.spec.as_ref().unwrap().template.clone();
        assert_eq!(template.metadata.unwrap().annotations.map(|a| a.len()), Some(1));
    }

    /// A cached Eru still tells when its spec was last written, by whom it is not kept.
    #[test]
    fn a_lean_eru_keeps_when_its_spec_was_written() {
        let full: eru::Eru = serde_json::from_value(serde_json::json!({
            "apiVersion": "mtsre.meitu.com/v1", "kind": "Eru",
            "metadata": {"name": "web", "namespace": "shop",
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
                "managedFields": [
                    {"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "mtsre.meitu.com/v1",
                     "time": "2026-11-20T00:00:00Z", "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:metadata": {"f:annotations": {}}, "f:spec": {"f:schedule": {}}}},
                    {"manager": "kubectl-edit", "operation": "Update", "time": "2026-11-21T00:00:00Z",
                     "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {}}}},
                    {"manager": "eru-operator", "operation": "Apply", "subresource": "status",
                     "time": "2026-11-22T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]},
            "spec": {"schedule": "0 3 * * *", "target": {"kind": "Deployment", "name": "web"}}
        }))
        .unwrap();
        let mut lean: eru::CachedEru = serde_json::from_value(serde_json::to_value(&full).unwrap()).unwrap();
        lean.lean();
        let written = crate::runtime::managed_at(&full.metadata, crate::runtime::writes_spec);
        assert_eq!(lean.spec_written_at(), written);
        assert_eq!(
            written,
            Some("2026-11-20T00:00:00Z".parse().unwrap()),
            "the spec write, not the later ones"
        );
        assert!(lean.metadata.managed_fields.is_none(), "only its time is kept");
        assert!(
            lean.metadata.annotations.is_none(),
            "only the last-applied annotation was there"
        );
    }

    /// The managedFields and annotations of a workload as the API server sends them.
    fn workload_meta() -> serde_json::Value {
        serde_json::json!({"name": "web", "namespace": "shop", "uid": "u1", "generation": 4,
            "labels": {"app": "web"},
            "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "App", "name": "web", "uid": "o1"}],
            "annotations": {"mtsre.meitu.com/eru": "true", "mtsre.meitu.com/eru-schedule": "H 3 * * *",
                            "kubectl.kubernetes.io/last-applied-configuration": "{...}"},
            "managedFields": [
                {"manager": "eru-operator-restart", "operation": "Apply", "time": "2026-11-23T03:00:00Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:template": {}}}},
                {"manager": "kubectl", "operation": "Update", "time": "2026-11-22T03:00:00Z"}]})
    }

    fn template() -> serde_json::Value {
        serde_json::json!({"metadata": {"labels": {"app": "web"},
                                        "annotations": {"mtsre.meitu.com/restartedAt": "2026-11-23T03:00:00Z",
                                                        "prometheus.io/scrape": "true"}},
                           "spec": {"containers": [{"name": "web", "image": "nginx"}]}})
    }

    /// Leaning a StatefulSet never changes what a controller reads of it.
    #[test]
    fn a_lean_statefulset_reads_the_same() {
        for strategy in [
            serde_json::json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}),
            serde_json::json!({"type": "OnDelete"}),
            serde_json::json!({"type": "RollingUpdate"}),
        ] {
            let full: lean::StatefulSet = serde_json::from_value(serde_json::json!({
                "metadata": workload_meta(),
                "spec": {"replicas": 2, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
                    "updateStrategy": strategy, "template": template(),
                    "volumeClaimTemplates": [{"metadata": {"name": "data"}}]},
                "status": {"observedGeneration": 4, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2,
                    "availableReplicas": 2, "currentReplicas": 2, "currentRevision": "web-1",
                    "updateRevision": "web-1",
                    "conditions": [{"type": "Example", "status": "True", "message": "a long text"}]}
            }))
            .unwrap();
            let mut lean = full.clone();
            lean_statefulset(&mut lean);
            assert_eq!(
                eru::target::view_statefulset(&lean),
                eru::target::view_statefulset(&full)
            );
            let desired = |s: &lean::StatefulSet| {
                serde_json::to_value(eru::auto::desired(s, "web", "0 3 * * *")).unwrap()
            };
            assert_eq!(desired(&lean), desired(&full));
            assert!(lean.metadata.labels.is_none() && lean.metadata.owner_references.is_none());
            assert_eq!(lean.metadata.annotations.as_ref().map(|a| a.len()), Some(2));
            assert_eq!(lean.metadata.managed_fields.as_ref().map(Vec::len), Some(1));
        }
    }

    /// Leaning a DaemonSet never changes what a controller reads of it.
    #[test]
    fn a_lean_daemonset_reads_the_same() {
        for strategy in [
            serde_json::json!({"type": "OnDelete"}),
            serde_json::json!({"type": "RollingUpdate"}),
        ] {
            let full: lean::DaemonSet = serde_json::from_value(serde_json::json!({
                "metadata": workload_meta(),
                "spec": {"selector": {"matchLabels": {"app": "web"}}, "updateStrategy": strategy,
                    "template": template()},
                "status": {"observedGeneration": 4, "desiredNumberScheduled": 3, "currentNumberScheduled": 3,
                    "updatedNumberScheduled": 3, "numberAvailable": 3, "numberReady": 3,
                    "numberMisscheduled": 0}
            }))
            .unwrap();
            let mut lean = full.clone();
            lean_daemonset(&mut lean);
            assert_eq!(
                eru::target::view_daemonset(&lean),
                eru::target::view_daemonset(&full)
            );
            let desired = |d: &lean::DaemonSet| {
                serde_json::to_value(eru::auto::desired(d, "web", "0 3 * * *")).unwrap()
            };
            assert_eq!(desired(&lean), desired(&full));
            assert_eq!(lean.metadata.managed_fields.as_ref().map(Vec::len), Some(1));
        }
    }
}
