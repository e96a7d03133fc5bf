//! Lease leader election (`coordination.k8s.io/v1`), client-go's algorithm with its defaults:
//! only the holder of one Lease acts (controllers, heartbeats, journal and cluster writes); every
//! other replica is a hot standby whose caches stay warm.
//!
//! - A candidate tries every retry period. It takes the Lease when nobody holds it, or when the
//!   holder's record has not changed for the holder's lease duration *as this process observed
//!   it* (its own monotonic clock: clocks of different machines are never compared).
//! - The holder renews every retry period. If no renewal has succeeded for the renew deadline
//!   (shorter than the lease duration), leadership is lost: [`campaign`] returns [`Lost`] and the
//!   process exits (fail-stop, like kube-controller-manager), before any standby can take over.
//!   A write that raced it (a conflict: another process holds the Lease) is the same.
//! - On a clean shutdown the holder releases the Lease (duration one second, holder kept so the
//!   next leader knows whose term ended), so a rolling update hands over at once.
//!
//! The crates that do this (kube-lease-manager 0.13 fits kube 5; kube-leader-election targets
//! kube 4, kubert's lease kube 1.1) model a lease as duration and grace, without client-go's
//! renew deadline, which is what makes losing the Lease stop every write before it can expire.

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::{Api, Client, api::PostParams};
use tokio::{
    sync::watch,
    time::{Instant, sleep_until, timeout_at},
};
use tracing::{info, warn};

use super::shutdown_requested;

/// Where the Lease lives, who this process is, and client-go's three durations.
#[derive(Clone, Debug)]
pub struct LeaseSettings {
    pub name: String,
    pub namespace: String,
    /// Unique per process (a restarted container is a new candidate).
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

/// A leader's term as the Lease recorded it: who held it, since when, and its last renewal (the
/// last instant that leader is proven to have been alive).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Term {
    pub holder: String,
    pub acquired: Option<DateTime<Utc>>,
    pub renewed: DateTime<Utc>,
}

/// Whether this process acts. One way only: a leader that loses the Lease exits.
#[derive(Clone, Debug)]
pub struct Leadership {
    tx: Arc<watch::Sender<bool>>,
}

impl Leadership {
    /// A process that acts from the start (leader election off).
    pub fn leader() -> Self {
        Self {
            tx: Arc::new(watch::Sender::new(true)),
        }
    }

    /// A standby until [`Leadership::promote`].
    pub fn standby() -> Self {
        Self {
            tx: Arc::new(watch::Sender::new(false)),
        }
    }

    pub fn is_leader(&self) -> bool {
        *self.tx.borrow()
    }

    /// From now on this process acts.
    pub fn promote(&self) {
        self.tx.send_replace(true);
    }

    /// Resolves once this process acts (at once if it does).
    pub async fn acquired(&self) {
        let _ = self.tx.subscribe().wait_for(|leader| *leader).await;
    }

    /// Yields once when a standby becomes the leader (never for a process that acted from the
    /// start): the controllers then reconcile every object their caches hold.
    pub fn promoted(&self) -> impl futures::Stream<Item = ()> + Send + use<> {
        let this = self.clone();
        let was_standby = !self.is_leader();
        futures::stream::once(async move {
            if was_standby {
                this.acquired().await;
            } else {
                futures::future::pending::<()>().await;
            }
        })
    }
}

/// Leadership was lost: the process must stop acting now.
#[derive(Debug)]
pub struct Lost(pub String);

/// The Lease record as last observed, and when (this process's clock).
struct Observed {
    spec: LeaseSpec,
    at: Instant,
}

/// What one try gave.
enum Attempt {
    /// This process holds the Lease; `previous` is the term it took over, if it just did.
    Held { previous: Option<Term> },
    /// Another process holds it, until at least `until` (this process's clock).
    Taken { holder: String, until: Instant },
}

/// Takes the Lease and keeps it: sends the previous term on `acquired` once this process holds
/// it, then renews until shutdown (releasing it) or until it is lost.
pub async fn campaign(
    client: Client,
    settings: LeaseSettings,
    acquired: tokio::sync::oneshot::Sender<Option<Term>>,
    stop: watch::Receiver<bool>,
) -> Result<(), Lost> {
    let api: Api<Lease> = Api::namespaced(client, &settings.namespace);
    let mut observed: Option<Observed> = None;
    let mut acquired = Some(acquired);
    let mut renewed: Option<Instant> = None;
    let mut waiting_for: Option<String> = None;
    loop {
        let started = Instant::now();
        // a holder's try may take until its deadline; a candidate's, one renew deadline
        let deadline = renewed.map_or(started + settings.renew_deadline, |r| r + settings.renew_deadline);
        let attempt = tokio::select! {
            attempt = timeout_at(deadline, try_acquire_or_renew(&api, &settings, &mut observed)) => attempt,
            _ = shutdown_requested(stop.clone()) => {
                if renewed.is_some() {
                    release(&api, &settings).await;
                }
                return Ok(());
            }
        };
        let next = match attempt {
            Ok(Ok(Attempt::Held { previous })) => {
                renewed = Some(started);
                if let Some(tx) = acquired.take() {
                    info!(lease = %settings.name, identity = %settings.identity, previous = ?previous.as_ref().map(|t| &t.holder), "acquired the lease");
                    let _ = tx.send(previous);
                }
                started + settings.retry_period
            }
            Ok(Ok(Attempt::Taken { holder, until })) => {
                if renewed.is_some() {
                    return Err(Lost(format!("the lease is held by {holder}")));
                }
                if waiting_for.as_ref() != Some(&holder) {
                    info!(lease = %settings.name, %holder, "standing by: the lease is held");
                    waiting_for = Some(holder);
                }
                // try again after a retry period, or the moment the holder's lease expires
                (started + jittered(settings.retry_period))
                    .min(until.max(started + Duration::from_millis(50)))
            }
            Ok(Err(e)) => {
                warn!(lease = %settings.name, error = %e, "leader election: cannot read or write the lease");
                started + settings.retry_period
            }
            Err(_) => {
                warn!(lease = %settings.name, "leader election: the lease request timed out");
                Instant::now()
            }
        };
        if let Some(r) = renewed
            && Instant::now() >= r + settings.renew_deadline
        {
            return Err(Lost(format!(
                "no renewal succeeded for {:?} (the renew deadline)",
                settings.renew_deadline
            )));
        }
        let next = renewed.map_or(next, |r| next.min(r + settings.renew_deadline));
        tokio::select! {
            _ = sleep_until(next) => {}
            _ = shutdown_requested(stop.clone()) => {
                if renewed.is_some() {
                    release(&api, &settings).await;
                }
                return Ok(());
            }
        }
    }
}

/// client-go's `tryAcquireOrRenew`: one read and at most one write (create or replace at the
/// read's resourceVersion, so of two candidates only one wins).
async fn try_acquire_or_renew(
    api: &Api<Lease>,
    settings: &LeaseSettings,
    observed: &mut Option<Observed>,
) -> kube::Result<Attempt> {
    let now = Timestamp::now();
    let Some(mut lease) = api.get_opt(&settings.name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(settings.name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(spec(settings, now, now, 0)),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(created) => {
                *observed = created.spec.map(|spec| Observed {
                    spec,
                    at: Instant::now(),
                });
                Ok(Attempt::Held { previous: None })
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(Attempt::Taken {
                holder: "another candidate".into(),
                until: Instant::now(),
            }),
            Err(e) => Err(e),
        };
    };
    let current = lease.spec.clone().unwrap_or_default();
    if observed.as_ref().is_none_or(|o| o.spec != current) {
        *observed = Some(Observed {
            spec: current.clone(),
            at: Instant::now(),
        });
    }
    let holder = current.holder_identity.clone().unwrap_or_default();
    let mine = holder == settings.identity;
    let duration = Duration::from_secs(current.lease_duration_seconds.unwrap_or(0).max(0) as u64);
    let until = observed.as_ref().map_or_else(Instant::now, |o| o.at + duration);
    if !holder.is_empty() && !mine && Instant::now() < until {
        return Ok(Attempt::Taken { holder, until });
    }
    let transitions = current.lease_transitions.unwrap_or(0);
    let (acquired, transitions) = if mine {
        (current.acquire_time.as_ref().map_or(now, |t| t.0), transitions)
    } else {
        (now, transitions + 1)
    };
    lease.spec = Some(spec(settings, acquired, now, transitions));
    match api.replace(&settings.name, &PostParams::default(), &lease).await {
        Ok(replaced) => {
            *observed = replaced.spec.map(|spec| Observed {
                spec,
                at: Instant::now(),
            });
            let previous = (!mine && !holder.is_empty()).then(|| Term {
                holder,
                acquired: current.acquire_time.as_ref().and_then(|t| utc(t.0)),
                renewed: current
                    .renew_time
                    .as_ref()
                    .and_then(|t| utc(t.0))
                    .unwrap_or_else(Utc::now),
            });
            Ok(Attempt::Held { previous })
        }
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(Attempt::Taken {
            holder: "another candidate".into(),
            until: Instant::now(),
        }),
        Err(e) => Err(e),
    }
}

fn spec(settings: &LeaseSettings, acquired: Timestamp, renewed: Timestamp, transitions: i32) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(settings.identity.clone()),
        lease_duration_seconds: Some(settings.lease_duration.as_secs().max(1) as i32),
        acquire_time: Some(MicroTime(acquired)),
        renew_time: Some(MicroTime(renewed)),
        lease_transitions: Some(transitions),
        ..LeaseSpec::default()
    }
}

/// Hands the Lease over: a one-second lease from now, the holder kept (the next leader records
/// this term), so a standby takes over within about a second.
async fn release(api: &Api<Lease>, settings: &LeaseSettings) {
    let released = async {
        let Some(mut lease) = api.get_opt(&settings.name).await? else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_default();
        if spec.holder_identity.as_deref() != Some(settings.identity.as_str()) {
            return Ok(());
        }
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        api.replace(&settings.name, &PostParams::default(), &lease)
            .await
            .map(drop)
    };
    match tokio::time::timeout(settings.renew_deadline, released).await {
        Ok(Ok(())) => info!(lease = %settings.name, "released the lease"),
        Ok(Err(e)) => warn!(lease = %settings.name, error = %e, "could not release the lease"),
        Err(_) => warn!(lease = %settings.name, "releasing the lease timed out"),
    }
}

fn utc(t: Timestamp) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(t.as_second(), t.subsec_nanosecond().max(0) as u32)
}

/// A candidate's retry period with up to 20 % added (client-go's jitter factor 1.2), so standbys
/// do not try in lockstep.
fn jittered(period: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    period + period.mul_f64(f64::from(nanos % 1000) / 5000.0)
}
