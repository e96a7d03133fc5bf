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

/// Whether this process acts, checked where it matters: immediately before every cluster write
/// (the controllers' client refuses writes otherwise, [`LeaderOnlyLayer`]) and every journal
/// append, and for `eru_leader` and `/readyz`. One way only: a leader that loses the Lease exits.
///
/// With leader election, leading is a deadline, not a flag: this process leads while *now* (its
/// monotonic clock) is before the renew deadline of its last successful renewal. A process frozen
/// longer than that (SIGSTOP, a stalled VM) leads no more the instant it resumes, before its renew
/// loop runs and exits it: a pass that was in flight when the freeze began writes nothing.
#[derive(Clone, Debug)]
pub struct Leadership {
    /// The term is journaled and the controllers may act ([`Leadership::promote`]).
    acting: Arc<watch::Sender<bool>>,
    /// With leader election: how long a renewal keeps this process leading, and until when the
    /// last one does.
    lease: Option<Arc<LeaseClock>>,
}

#[derive(Debug)]
struct LeaseClock {
    renew_deadline: Duration,
    until: std::sync::Mutex<Option<Instant>>,
}

impl Default for Leadership {
    /// A standby of no election: never acts (the state of a process before it is wired).
    fn default() -> Self {
        Self {
            acting: Arc::new(watch::Sender::new(false)),
            lease: None,
        }
    }
}

impl Leadership {
    /// A process that acts from the start (leader election off).
    pub fn leader() -> Self {
        Self {
            acting: Arc::new(watch::Sender::new(true)),
            lease: None,
        }
    }

    /// A candidate under leader election: a standby until it holds the Lease
    /// ([`Leadership::renewed`]) and [`Leadership::promote`] lets it act; it leads while its last
    /// renewal is younger than `renew_deadline`.
    pub fn elected(renew_deadline: Duration) -> Self {
        Self {
            acting: Arc::new(watch::Sender::new(false)),
            lease: Some(Arc::new(LeaseClock {
                renew_deadline,
                until: std::sync::Mutex::new(None),
            })),
        }
    }

    /// A renewal (or the acquisition) that began at `at` succeeded: leading until `at` plus the
    /// renew deadline.
    pub fn renewed(&self, at: Instant) {
        if let Some(lease) = &self.lease {
            let mut until = lease.until.lock().unwrap_or_else(|e| e.into_inner());
            let new = at + lease.renew_deadline;
            *until = Some(until.map_or(new, |u| u.max(new)));
        }
    }

    /// Whether this process acts now.
    pub fn is_leader(&self) -> bool {
        *self.acting.borrow()
            && self.lease.as_ref().is_none_or(|lease| {
                let until = *lease.until.lock().unwrap_or_else(|e| e.into_inner());
                until.is_some_and(|until| Instant::now() < until)
            })
    }

    /// `Ok` if this process acts now, else why `what` must not be done.
    pub fn check(&self, what: &str) -> crate::Result<()> {
        if self.is_leader() {
            Ok(())
        } else {
            Err(crate::Error::NotLeader(what.to_string()))
        }
    }

    /// From now on this process acts (while its lease holds).
    pub fn promote(&self) {
        self.acting.send_replace(true);
    }

    /// Whether the term began: the flag [`Leadership::promote`] sets, whatever the lease's clock
    /// says now.
    fn promoted_flag(&self) -> bool {
        *self.acting.borrow()
    }

    /// Resolves once this process acts (at once if it does).
    pub async fn acquired(&self) {
        let _ = self.acting.subscribe().wait_for(|leader| *leader).await;
    }

    /// Yields once when a standby becomes the leader (never for a process that acted from the
    /// start): the controllers then reconcile every object their caches hold.
    pub fn promoted(&self) -> impl futures::Stream<Item = ()> + Send + use<> {
        let this = self.clone();
        let was_standby = !self.promoted_flag();
        futures::stream::once(async move {
            if was_standby {
                this.acquired().await;
            } else {
                futures::future::pending::<()>().await;
            }
        })
    }
}

/// A layer for the controllers' client: a request that writes (any verb but GET, HEAD and
/// OPTIONS) is refused, before it leaves the process, unless this process leads at that instant.
/// It sits innermost, below the retry of throttled requests: a retry is checked again. With
/// `None` it lets everything through (a client any process may use).
#[derive(Clone, Debug)]
pub struct LeaderOnlyLayer(pub Option<Leadership>);

impl<S> tower::Layer<S> for LeaderOnlyLayer {
    type Service = LeaderOnly<S>;

    fn layer(&self, inner: S) -> Self::Service {
        LeaderOnly {
            inner,
            leadership: self.0.clone(),
        }
    }
}

/// See [`LeaderOnlyLayer`].
#[derive(Clone, Debug)]
pub struct LeaderOnly<S> {
    inner: S,
    leadership: Option<Leadership>,
}

impl<S, B> tower::Service<http::Request<B>> for LeaderOnly<S>
where
    S: tower::Service<http::Request<B>, Error = tower::BoxError>,
{
    type Response = S::Response;
    type Error = tower::BoxError;
    type Future =
        futures::future::Either<S::Future, std::future::Ready<Result<S::Response, tower::BoxError>>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        use http::Method;
        let reads = matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS);
        if !reads
            && let Some(leadership) = &self.leadership
            && let Err(e) = leadership.check(&format!("{} {}", request.method(), request.uri().path()))
        {
            return futures::future::Either::Right(std::future::ready(Err(Box::new(e))));
        }
        futures::future::Either::Left(self.inner.call(request))
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
/// it, then renews until shutdown (releasing it) or until it is lost. Every renewal extends
/// `leadership`'s deadline.
pub async fn campaign(
    client: Client,
    settings: LeaseSettings,
    leadership: Leadership,
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
                leadership.renewed(started);
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Patch, PatchParams};
    use tower::Layer;

    use super::*;

    /// A client whose requests pass `layer` to an API server that answers every request with a
    /// ConfigMap and counts what reached it.
    fn client(layer: LeaderOnlyLayer, reached: Arc<AtomicUsize>) -> Client {
        let service = tower::service_fn(move |_request: http::Request<kube::client::Body>| {
            reached.fetch_add(1, Ordering::SeqCst);
            async move {
                let object = serde_json::json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "web", "namespace": "ns", "resourceVersion": "1"},
                });
                Ok::<_, tower::BoxError>(http::Response::new(kube::client::Body::from(
                    object.to_string().into_bytes(),
                )))
            }
        });
        Client::new(layer.layer(service), "ns")
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_whose_renew_deadline_passed_refuses_a_write_already_in_flight() {
        let leadership = Leadership::elected(Duration::from_secs(10));
        assert!(!leadership.is_leader(), "a candidate is a standby");
        leadership.renewed(Instant::now());
        assert!(
            !leadership.is_leader(),
            "holding the Lease is not enough before the term begins"
        );
        leadership.promote();
        assert!(leadership.is_leader());

        let reached = Arc::new(AtomicUsize::new(0));
        let guarded = client(LeaderOnlyLayer(Some(leadership.clone())), reached.clone());
        let api: Api<ConfigMap> = Api::namespaced(guarded, "ns");
        let patch = serde_json::json!({"metadata": {"annotations": {"a": "b"}}});
        let params = PatchParams::apply("test");
        api.patch("web", &params, &Patch::Merge(&patch)).await.unwrap();
        assert_eq!(reached.load(Ordering::SeqCst), 1, "a leader's write is sent");

        // a pass decides its write while leading, then the process is frozen past the deadline
        let merge = Patch::Merge(&patch);
        let write = api.patch("web", &params, &merge);
        tokio::time::advance(Duration::from_secs(10)).await;
        let refused = write.await.expect_err("the write is refused");
        assert_eq!(
            crate::Error::Kube(refused).category(),
            crate::error::Category::NotLeader
        );
        assert_eq!(
            reached.load(Ordering::SeqCst),
            1,
            "nothing reached the API server"
        );
        assert!(!leadership.is_leader(), "eru_leader and /readyz read 0 at once");
        assert!(leadership.check("a journal write").is_err());

        // reads go on (a standby's caches stay warm); a renewal makes it lead again
        api.get("web").await.unwrap();
        assert_eq!(reached.load(Ordering::SeqCst), 2);
        leadership.renewed(Instant::now());
        assert!(leadership.is_leader());
        tokio::time::advance(Duration::from_millis(9_999)).await;
        assert!(leadership.is_leader(), "1 ms before the deadline");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(!leadership.is_leader(), "at the deadline");
    }

    #[test]
    fn without_leader_election_a_process_leads_from_the_start_and_for_ever() {
        let leadership = Leadership::leader();
        assert!(leadership.is_leader());
        leadership.renewed(Instant::now());
        assert!(leadership.is_leader());
        assert!(!Leadership::default().is_leader(), "unwired: a standby");
    }
}
