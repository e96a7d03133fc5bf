//! This process's term: leader election (`--leader-elect`), the journaled start of its run (and
//! the term it took over), heartbeats while it leads, and the run's end.

use std::time::Duration;

use chrono::Utc;
use kube::Client;
use tokio::sync::{oneshot, watch};
use tracing::{error, info, warn};

use crate::{
    config::RunArgs,
    journal::Journal,
    metrics::Metrics,
    runtime::{
        Readiness,
        leader::{self, Leadership},
        shutdown_requested,
    },
};

/// The leader election of this process, when it is on.
pub(super) struct Elector {
    pub(super) identity: String,
    pub(super) release: watch::Sender<bool>,
    pub(super) task: tokio::task::JoinHandle<()>,
}

/// This process's leadership: a candidate's (a standby until elected) with `--leader-elect`,
/// else one that leads from the start.
pub(super) fn leadership(args: &RunArgs) -> Leadership {
    if args.leader_elect {
        Leadership::elected(args.leader_elect_renew_deadline)
    } else {
        Leadership::leader()
    }
}

/// Starts leader election (`--leader-elect`) for `leadership`: the process is a standby until
/// `term` says which term it took over. Without it the process leads from the start. Losing the
/// Lease ends the process at once (fail-stop), before any standby may take over.
pub(super) fn elect(
    args: &RunArgs,
    client: &Client,
    instance: &str,
    leadership: &Leadership,
) -> (oneshot::Receiver<Option<leader::Term>>, Option<Elector>) {
    let (acquired, term) = oneshot::channel();
    if !args.leader_elect {
        let _ = acquired.send(None);
        return (term, None);
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
    let campaigner = leadership.clone();
    let task = tokio::spawn(async move {
        if let Err(leader::Lost(why)) =
            leader::campaign(client, settings, campaigner, acquired, released).await
        {
            error!(reason = %why, "lost the leader lease: exiting before another replica may take over");
            std::process::exit(1);
        }
    });
    (
        term,
        Some(Elector {
            identity,
            release,
            task,
        }),
    )
}

/// What a term of leadership needs.
pub(super) struct Term {
    pub(super) journal: Journal,
    pub(super) leadership: Leadership,
    pub(super) readiness: Readiness,
    pub(super) metrics: Metrics,
    /// The Lease identity, with leader election on.
    pub(super) identity: Option<String>,
    pub(super) heartbeat: Duration,
}

/// Leads once `acquired` says so: journals the term taken over (what the Lease proves of it) and
/// this process's run, retrying while the journal refuses, then lets the controllers act and
/// journals a heartbeat every `term.heartbeat` until shutdown. Returns the run, if it started.
pub(super) async fn lead(
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
            // the fence first: from now on a predecessor frozen mid-write commits nothing
            let epoch = term.journal.take_fence().await?;
            info!(epoch, "took the journal's leader epoch");
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
    term.leadership.promote();
    let mut tick = tokio::time::interval(term.heartbeat);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if !term.leadership.is_leader() {
                    // the lease lapsed (a freeze): the renew loop ends the process; no proof of
                    // life is written for a process that no longer leads
                    continue;
                }
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

/// After everything else stopped: journals the end of the run, then releases the Lease — also
/// when that last write failed (the standby then need not wait out the lease; the run's end is
/// told by its last heartbeat instead).
pub(super) async fn finish(
    journal: &Journal,
    term: tokio::task::JoinHandle<Option<i64>>,
    elector: Option<Elector>,
) -> anyhow::Result<()> {
    let stopped = match term.await {
        Ok(Some(run_id)) => journal.stop_run(run_id, Utc::now()).await,
        _ => Ok(()),
    };
    if let Some(elector) = elector {
        let _ = elector.release.send(true);
        let _ = elector.task.await;
    }
    Ok(stopped?)
}
