//! Step 1 of the Eru pass: what the cluster (watch caches) and the journal say about one Eru.
//! Reads only; everything after this step decides from the returned [`Observed`].

use chrono::{DateTime, Utc};
use kube::{Resource, ResourceExt, runtime::reflector::ObjectRef};

use super::{
    Eru, EruStatus,
    accounting::downtime,
    context::EruContext,
    schedule::{Schedule, ScheduleError},
    target::{TargetView, view_deployment},
};
use crate::{Result, journal::parse_ts};

/// Everything one pass decides from.
#[derive(Clone, Debug)]
pub struct Observed {
    pub now: DateTime<Utc>,
    /// The freshest status this operator knows (its own last write, if the cache lags).
    pub known: Option<EruStatus>,
    pub schedule: Result<Schedule, ScheduleError>,
    /// The target as cached; `None` when it does not exist.
    pub target: Option<TargetView>,
    /// The restart the journal holds open, if any: its slot and when it started.
    pub open_restart: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// Slots up to this instant are accounted for (the journal's cursor, else the creation time).
    pub accounted_until: DateTime<Utc>,
    /// Operator downtime windows after the cursor.
    pub downtime: Vec<(DateTime<Utc>, DateTime<Utc>)>,
}

impl Observed {
    /// When the restart in flight started (now, if the journal has none open).
    pub fn started_at(&self) -> DateTime<Utc> {
        self.open_restart.map_or(self.now, |(_, started)| started)
    }
}

/// Observes `eru` at `now`.
pub async fn observe(context: &EruContext, eru: &Eru, now: DateTime<Utc>) -> Result<Observed> {
    let ctx = &context.ctx;
    let uid = eru.uid().unwrap_or_default();
    let namespace = eru.namespace().unwrap_or_default();
    let known = ctx.statuses.current(
        &uid,
        &eru.resource_version().unwrap_or_default(),
        eru.status.as_ref(),
    );
    let target = context
        .deployments
        .get(&ObjectRef::new(&eru.spec.target.name).within(&namespace))
        .map(|d| view_deployment(&d));
    let open_restart = ctx
        .journal
        .open_restart(&uid)
        .await?
        .and_then(|r| Some((parse_ts(&r.slot)?, parse_ts(&r.started_at)?)));
    let created = eru
        .meta()
        .creation_timestamp
        .as_ref()
        .and_then(|t| DateTime::from_timestamp(t.0.as_second(), 0));
    let accounted_until = ctx
        .journal
        .last_accounted_slot(&uid)
        .await?
        .or(created)
        .unwrap_or(now);
    let runs: Vec<_> = ctx
        .journal
        .runs()
        .await?
        .iter()
        .filter_map(|r| Some((parse_ts(&r.started_at)?, parse_ts(&r.heartbeat_at)?)))
        .collect();
    Ok(Observed {
        now,
        known,
        schedule: Schedule::parse(&eru.spec.schedule, eru.spec.time_zone.as_deref()),
        target,
        open_restart,
        accounted_until,
        downtime: downtime(&runs, accounted_until),
    })
}
