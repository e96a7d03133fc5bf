//! The operator's promise checked from the cluster's side, the one check every Eru scenario ends
//! with: every slot of the spec in force (written out by the test, never computed by the
//! operator's code) has exactly one ledger record (`/slots`, every page); every fired slot's
//! patch is on the workload — one rollout (a ReplicaSet, or a ControllerRevision) carrying the
//! slot in `restartedAt`, and the pod template carries the newest one — and the workload carries
//! no slot that has no fired record. Revisions the workload's controller dropped to its history
//! limit may only be the oldest, each standing for at most one of the oldest fired slots.
//!
//! [`violations`] says what is wrong (empty when nothing is), so a test can prove the check
//! fails on a forged journal; [`check`] waits a generous while for the operator to account the
//! last slots and panics with the violations if they stay.

use std::{collections::BTreeMap, fmt, time::Duration};

use chrono::{DateTime, Utc};
use eru_operator::eru::{RESTARTED_AT_ANNOTATION, core::run::RUN_ANNOTATION};
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet};
use kube::{Api, Client, Resource, ResourceExt, api::ListParams};
use serde_json::Value;

use super::{Operator, eru::Accounted};

/// One record of `/slots`: a slot, or a summary of `slot_count` slots from `slot` to `last_slot`.
#[derive(Clone)]
pub struct SlotRecord {
    pub slot: DateTime<Utc>,
    pub last_slot: DateTime<Utc>,
    pub slot_count: i64,
    /// `fired`, `missed` or `skipped`.
    pub result: String,
    pub reason: Option<String>,
    pub window: Option<(DateTime<Utc>, DateTime<Utc>)>,
    pub note: Option<String>,
    pub evaluated_at: DateTime<Utc>,
    /// The record as served.
    pub raw: Value,
}

impl fmt::Debug for SlotRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.raw)
    }
}

fn parse_time(value: &Value) -> Option<DateTime<Utc>> {
    Some(
        DateTime::parse_from_rfc3339(value.as_str()?)
            .ok()?
            .with_timezone(&Utc),
    )
}

impl SlotRecord {
    fn parse(raw: Value) -> Result<Self, String> {
        let at = |key: &str| parse_time(&raw[key]).ok_or_else(|| format!("{key} is no time: {raw}"));
        Ok(Self {
            slot: at("slot")?,
            last_slot: at("last_slot")?,
            slot_count: raw["slot_count"]
                .as_i64()
                .ok_or_else(|| format!("no slot_count: {raw}"))?,
            result: raw["result"].as_str().unwrap_or_default().to_string(),
            reason: raw["reason"].as_str().map(str::to_string),
            window: parse_time(&raw["window"]["start"]).zip(parse_time(&raw["window"]["end"])),
            note: raw["note"].as_str().map(str::to_string),
            evaluated_at: at("evaluated_at")?,
            raw,
        })
    }

    /// Whether this record stands for `slot` (a summary for every slot from `slot` to
    /// `last_slot`).
    pub fn covers(&self, slot: DateTime<Utc>) -> bool {
        self.slot <= slot && slot <= self.last_slot
    }

    pub fn fired(&self) -> bool {
        self.result == "fired"
    }

    /// When the slot's restart patch landed, if it did.
    pub fn patched_at(&self) -> Option<DateTime<Utc>> {
        parse_time(&self.raw["restart"]["patched_at"])
    }

    /// The restart attempt's outcome, if one was decided.
    pub fn outcome(&self) -> Option<&str> {
        self.raw["restart"]["outcome"].as_str()
    }

    /// The record as [`Accounted`].
    pub fn accounted(&self) -> Accounted {
        if self.fired() {
            Accounted::Fired(self.outcome().unwrap_or_default().to_string())
        } else {
            Accounted::Missed {
                reason: self.reason.clone().unwrap_or_default(),
                window: self.window,
            }
        }
    }
}

/// Every record of the Eru `name` in the operator's ledger, newest first: every page of
/// `/slots`, following `next_cursor` until it is null (never truncated).
pub fn slot_records(operator: &Operator, name: &str) -> Result<Vec<SlotRecord>, String> {
    slot_records_of(operator, name, None)
}

/// [`slot_records`] of the Eru `name` with this uid only, if one is given (not a namesake's).
pub fn slot_records_of(
    operator: &Operator,
    name: &str,
    uid: Option<&str>,
) -> Result<Vec<SlotRecord>, String> {
    let mut records = Vec::new();
    let mut cursor: Option<String> = None;
    let of = uid.map_or(String::new(), |uid| format!("&uid={uid}"));
    for _page in 0..10_000 {
        let path = match &cursor {
            None => format!("/slots?name={name}{of}&limit=1000"),
            Some(c) => format!("/slots?name={name}{of}&limit=1000&cursor={c}"),
        };
        let (status, body) = operator.get(&path);
        if status != 200 {
            return Err(format!("GET {path}: {status} {body}"));
        }
        let page: Value = serde_json::from_str(&body).map_err(|e| format!("GET {path}: {e}: {body}"))?;
        for item in page["items"]
            .as_array()
            .ok_or_else(|| format!("GET {path}: no items: {body}"))?
        {
            records.push(SlotRecord::parse(item.clone())?);
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => return Ok(records),
        }
    }
    Err(format!("/slots?name={name} did not end after 10000 pages"))
}

/// The slots of `*/step` in the seconds field (`step` divides 60) in `[from, to]`: every instant
/// on a whole second that is a multiple of `step`. Written out here so no test takes its expected
/// slots from the operator's own schedule code.
pub fn every(step: i64, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    assert!(step > 0 && 60 % step == 0, "*/{step} is not even within a minute");
    let first = from.timestamp().div_euclid(step) * step;
    (first..=to.timestamp())
        .step_by(step as usize)
        .map(|s| DateTime::from_timestamp(s, 0).unwrap())
        .filter(|slot| from <= *slot && *slot <= to)
        .collect()
}

/// The slots of `a,b,c * * * * *` (these seconds of every minute) in `[from, to]`.
pub fn at_seconds(seconds: &[i64], from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    (from.timestamp()..=to.timestamp())
        .filter(|s| seconds.contains(&s.rem_euclid(60)))
        .map(|s| DateTime::from_timestamp(s, 0).unwrap())
        .filter(|slot| from <= *slot && *slot <= to)
        .collect()
}

/// The slots of `minute hour * * *` (UTC) in `[from, to]`.
pub fn daily(hour: u32, minute: u32, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let mut day = from.date_naive();
    let mut slots = Vec::new();
    while day <= to.date_naive() {
        let slot = day.and_hms_opt(hour, minute, 0).unwrap().and_utc();
        if from <= slot && slot <= to {
            slots.push(slot);
        }
        day = day.succ_opt().unwrap();
    }
    slots
}

/// The workload an Eru restarts.
#[derive(Clone, Copy, Debug)]
pub enum Workload<'a> {
    Deployment(&'a str),
    StatefulSet(&'a str),
    DaemonSet(&'a str),
}

/// The slot a revision's template carries: `Err` with the raw value if it is not a time.
pub type CarriedSlot = Option<Result<DateTime<Utc>, String>>;

/// What the workload shows of its restarts: the slot its pod template carries, and every
/// revision of its template the controller made (a Deployment's ReplicaSets, a StatefulSet's or
/// DaemonSet's ControllerRevisions) with the slot it carries.
#[derive(Debug)]
pub struct Rollouts {
    pub template: Option<DateTime<Utc>>,
    /// (revision number, the slot its template carries — `Err` with the raw value if it is not
    /// a time)
    pub revisions: Vec<(i64, CarriedSlot)>,
    /// The revisions a manual run made (`mtsre.meitu.com/run-now` changed, the slot did not), by
    /// number, with the token: no slot's, so left out of `revisions`' slots.
    pub runs: Vec<(i64, String)>,
}

/// A workload's revisions with their slots, and the manual runs' (number, token).
type Split = (Vec<(i64, CarriedSlot)>, Vec<(i64, String)>);

/// Splits the manual runs' revisions from the slots': a revision whose run token differs from
/// the revision before it (by number) is a run's; its slot is not counted.
fn split_runs(mut revisions: Vec<(i64, CarriedSlot, Option<String>)>) -> Split {
    revisions.sort_by_key(|(n, ..)| *n);
    let mut runs = Vec::new();
    let mut before: Option<String> = None;
    let slots = revisions
        .into_iter()
        .map(|(n, slot, run)| {
            let changed = run.is_some() && run != before;
            before = run.clone();
            match (changed, run) {
                (true, Some(token)) => {
                    runs.push((n, token));
                    (n, None)
                }
                _ => (n, slot),
            }
        })
        .collect();
    (slots, runs)
}

fn slot_of(annotations: Option<&BTreeMap<String, String>>) -> CarriedSlot {
    let value = annotations?.get(RESTARTED_AT_ANNOTATION)?;
    Some(
        DateTime::parse_from_rfc3339(value)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|_| value.clone()),
    )
}

fn owned_by(meta: &kube::api::ObjectMeta, uid: &str) -> bool {
    meta.owner_references.iter().flatten().any(|o| o.uid == uid)
}

/// The workload's template revisions, read from the API server.
pub async fn rollouts(client: &Client, ns: &str, workload: Workload<'_>) -> Result<Rollouts, String> {
    let failed = |what: &str, e: kube::Error| format!("{what} in {ns}: {e}");
    match workload {
        Workload::Deployment(name) => {
            let d = Api::<Deployment>::namespaced(client.clone(), ns)
                .get(name)
                .await
                .map_err(|e| failed(&format!("Deployment {name}"), e))?;
            let uid = d.uid().unwrap_or_default();
            let sets = Api::<ReplicaSet>::namespaced(client.clone(), ns)
                .list(&ListParams::default())
                .await
                .map_err(|e| failed("ReplicaSets", e))?;
            let mut revisions = Vec::new();
            for rs in sets.items.iter().filter(|rs| owned_by(&rs.metadata, &uid)) {
                let revision = rs
                    .annotations()
                    .get("deployment.kubernetes.io/revision")
                    .and_then(|r| r.parse().ok())
                    .ok_or_else(|| format!("ReplicaSet {} has no revision", rs.name_any()))?;
                let template = rs.spec.as_ref().and_then(|s| s.template.as_ref());
                let meta = template.and_then(|t| t.metadata.as_ref());
                let annotations = meta.and_then(|m| m.annotations.as_ref());
                let run = annotations.and_then(|a| a.get(RUN_ANNOTATION)).cloned();
                revisions.push((revision, slot_of(annotations), run));
            }
            let meta = d.spec.as_ref().and_then(|s| s.template.metadata.as_ref());
            let template = slot_of(meta.and_then(|m| m.annotations.as_ref())).and_then(Result::ok);
            let (revisions, runs) = split_runs(revisions);
            Ok(Rollouts {
                template,
                revisions,
                runs,
            })
        }
        Workload::StatefulSet(name) => {
            let s = Api::<StatefulSet>::namespaced(client.clone(), ns)
                .get(name)
                .await
                .map_err(|e| failed(&format!("StatefulSet {name}"), e))?;
            let meta = s.spec.as_ref().and_then(|s| s.template.metadata.as_ref());
            let template = slot_of(meta.and_then(|m| m.annotations.as_ref())).and_then(Result::ok);
            controller_revisions(client, ns, &s, template).await
        }
        Workload::DaemonSet(name) => {
            let d = Api::<DaemonSet>::namespaced(client.clone(), ns)
                .get(name)
                .await
                .map_err(|e| failed(&format!("DaemonSet {name}"), e))?;
            let meta = d.spec.as_ref().and_then(|s| s.template.metadata.as_ref());
            let template = slot_of(meta.and_then(|m| m.annotations.as_ref())).and_then(Result::ok);
            controller_revisions(client, ns, &d, template).await
        }
    }
}

async fn controller_revisions<K: Resource>(
    client: &Client,
    ns: &str,
    owner: &K,
    template: Option<DateTime<Utc>>,
) -> Result<Rollouts, String> {
    let uid = owner.meta().uid.clone().unwrap_or_default();
    let list = Api::<ControllerRevision>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("ControllerRevisions in {ns}: {e}"))?;
    let revisions = list
        .items
        .iter()
        .filter(|r| owned_by(&r.metadata, &uid))
        .map(|r| {
            let data = r.data.as_ref().map(|d| &d.0).unwrap_or(&Value::Null);
            let annotations = &data["spec"]["template"]["metadata"]["annotations"];
            let slot = annotations[RESTARTED_AT_ANNOTATION].as_str().map(|v| {
                DateTime::parse_from_rfc3339(v)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|_| v.to_string())
            });
            (r.revision, slot)
        })
        .collect();
    Ok(Rollouts {
        template,
        revisions,
        runs: Vec::new(),
    })
}

/// What each slot of a stretch may be accounted as, written out by the scenario: `fired` (its
/// restart succeeded or is still rolling out), `fired_failed` or `fired_abandoned` (fired, and the
/// rollout ended so), or the reason it was missed or skipped (`operator_down`, `suspended`, ...).
#[derive(Clone, Debug)]
pub struct Expect {
    /// `[from, to]`: the slots it speaks of.
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// (none: the stretch only requires)
    pub accounts: Vec<&'static str>,
    /// At least one slot of the stretch must be accounted so (an outage's `operator_down`): a
    /// scenario that caused it must see it, not only allow it.
    pub required: Option<&'static str>,
}

/// What a slot of a short schedule may be accounted as when the scenario did nothing to it: its
/// restart, or one of the two ways an Eru whose restarts outlast its period honestly gives a slot
/// up on a loaded machine (a newer slot came due first; the previous restart still rolled out).
/// Any other reason (`operator_down`, `past_deadline`, ...) says something happened that the
/// scenario did not cause.
pub const ON_SCHEDULE: &[&str] = &["fired", "superseded", "concurrent_rollout"];

/// How long before a kill a slot may still be `operator_down`: a run's downtime starts at its
/// last heartbeat (every second in the tests, later on a loaded machine), so a slot due between
/// that heartbeat and the kill, which the run did not reach, is accounted to the downtime. That
/// is the truth as the journal can prove it: nothing shows the run alive after its heartbeat.
pub const LAST_HEARTBEAT: chrono::Duration = chrono::Duration::seconds(2);

/// What the record says of its slots, as [`Expect::accounts`] names it.
fn account(r: &SlotRecord) -> String {
    match (r.fired(), r.outcome()) {
        (true, Some(outcome @ ("failed" | "abandoned"))) => format!("fired_{outcome}"),
        (true, _) => "fired".to_string(),
        (false, _) => r
            .reason
            .clone()
            .unwrap_or_else(|| format!("{} without a reason", r.result)),
    }
}

/// What one scenario expects of one Eru.
pub struct Ledger<'a> {
    pub eru: &'a str,
    pub workload: Workload<'a>,
    /// `[from, to]`: the stretch the test knows the spec of.
    pub window: (DateTime<Utc>, DateTime<Utc>),
    /// The slots of the spec in force in `window`, written out by the test ([`every`],
    /// [`at_seconds`]).
    pub slots: Vec<DateTime<Utc>>,
    /// Fired slots up to this instant are not this journal's to account (a journal lost, a
    /// replica with a journal of its own): the workload's rollouts of them are not compared.
    pub journal_from: Option<DateTime<Utc>>,
    /// The Eru's uid, when a namesake had or has the name: only its records are read.
    pub uid: Option<String>,
    /// Fired slots after this instant are another ledger's (the Eru was deleted then, and a
    /// namesake restarts the workload since): their rollouts, and a template carrying one, are
    /// not compared.
    pub journal_until: Option<DateTime<Utc>>,
    /// How the slots are accounted, stretch by stretch: a slot follows the last [`Expect`] that
    /// holds it, and [`ON_SCHEDULE`] if none does.
    pub expect: Vec<Expect>,
}

impl<'a> Ledger<'a> {
    /// The Eru `eru` restarting the Deployment `deployment`, expecting `slots` in `window`.
    pub fn deployment(
        eru: &'a str,
        deployment: &'a str,
        window: (DateTime<Utc>, DateTime<Utc>),
        slots: Vec<DateTime<Utc>>,
    ) -> Self {
        Self {
            eru,
            workload: Workload::Deployment(deployment),
            window,
            slots,
            journal_from: None,
            uid: None,
            journal_until: None,
            expect: Vec::new(),
        }
    }

    /// The slots in `[from, to]` are accounted as one of `accounts` (see [`Expect`]).
    pub fn expect(mut self, from: DateTime<Utc>, to: DateTime<Utc>, accounts: &[&'static str]) -> Self {
        self.expect.push(Expect {
            from,
            to,
            accounts: accounts.to_vec(),
            required: None,
        });
        self
    }

    /// As [`Ledger::expect`], and at least one of them is accounted as `required`.
    pub fn require(
        mut self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        required: &'static str,
        accounts: &[&'static str],
    ) -> Self {
        let mut accounts = accounts.to_vec();
        accounts.push(required);
        self.expect.push(Expect {
            from,
            to,
            accounts,
            required: Some(required),
        });
        self
    }

    /// At least one slot in `[from, to]` is accounted as `required`, which other stretches
    /// allow.
    pub fn require_some(mut self, from: DateTime<Utc>, to: DateTime<Utc>, required: &'static str) -> Self {
        self.expect.push(Expect {
            from,
            to,
            accounts: Vec::new(),
            required: Some(required),
        });
        self
    }

    /// What the slot may be accounted as.
    fn accounts(&self, slot: DateTime<Utc>) -> Vec<&'static str> {
        let mut accounts = self
            .expect
            .iter()
            .rev()
            .find(|e| e.from <= slot && slot <= e.to && !e.accounts.is_empty())
            .map_or(ON_SCHEDULE, |e| &e.accounts)
            .to_vec();
        // most windows end where the test suspended the Eru to settle it: a slot due just before
        // the suspension reached the operator may have been judged after it
        if slot > self.window.1 - chrono::Duration::seconds(2) {
            accounts.push("suspended");
        }
        accounts
    }
}

/// The records accounting a slot otherwise than `expected` says, and the required accounts no
/// slot has.
fn unexpected(name: &str, expected: &Ledger<'_>, records: &[SlotRecord]) -> Vec<String> {
    let mut wrong = Vec::new();
    for slot in &expected.slots {
        // (a slot with no record or two is reported by the count)
        if let [r] = records.iter().filter(|r| r.covers(*slot)).collect::<Vec<_>>()[..] {
            let allowed = expected.accounts(*slot);
            let account = account(r);
            if !allowed.iter().any(|a| *a == account) {
                wrong.push(format!(
                    "{name}: slot {slot} is accounted {account}, the scenario expects one of {allowed:?}: {r:?}"
                ));
            }
        }
    }
    for e in &expected.expect {
        let Some(required) = e.required else { continue };
        let seen = expected
            .slots
            .iter()
            .filter(|s| e.from <= **s && **s <= e.to)
            .any(|s| records.iter().any(|r| r.covers(*s) && account(r) == required));
        if !seen {
            wrong.push(format!(
                "{name}: no slot from {} to {} is accounted {required}, which the scenario caused",
                e.from, e.to
            ));
        }
    }
    wrong
}

/// Everything that breaks the promise for `expected` (empty if nothing does): a slot of the
/// window with no record or with two, a record of the window on no slot of the schedule or
/// counting other slots than it stands for, a fired slot whose patch did not land or whose
/// rollout the workload does not show exactly once, a landed patch on a slot not fired, a slot on
/// the workload with no fired record, the template not carrying the newest fired slot, a template
/// revision gone or reused.
pub async fn violations(
    client: &Client,
    ns: &str,
    operator: &Operator,
    expected: &Ledger<'_>,
) -> Vec<String> {
    let name = expected.eru;
    let records = match slot_records_of(operator, name, expected.uid.as_deref()) {
        Ok(records) => records,
        Err(e) => return vec![e],
    };
    let mut wrong = Vec::new();
    let (from, to) = expected.window;
    // the ledger side: every slot of the window exactly one record
    for slot in &expected.slots {
        let covering: Vec<&SlotRecord> = records.iter().filter(|r| r.covers(*slot)).collect();
        if covering.len() != 1 {
            wrong.push(format!(
                "{name}: slot {slot} has {} records: {covering:?}",
                covering.len()
            ));
        }
    }
    for r in &records {
        if r.last_slot < r.slot || r.slot_count < 1 || (r.slot_count == 1) != (r.slot == r.last_slot) {
            wrong.push(format!("{name}: a record that contradicts itself: {r:?}"));
        }
        for end in [r.slot, r.last_slot] {
            if from <= end && end <= to && !expected.slots.contains(&end) {
                wrong.push(format!(
                    "{name}: a record on {end}, no slot of the schedule: {r:?}"
                ));
            }
        }
        if from <= r.slot && r.last_slot <= to {
            let inside = expected.slots.iter().filter(|s| r.covers(**s)).count() as i64;
            if inside != r.slot_count {
                wrong.push(format!(
                    "{name}: a record for {} slots stands for {inside} of the schedule: {r:?}",
                    r.slot_count
                ));
            }
        }
    }
    // the reasons: each slot accounted as the scenario expects
    wrong.extend(unexpected(name, expected, &records));
    // the journal's own join: a fired slot's patch landed, no other slot's did
    let mine = |slot: DateTime<Utc>| {
        expected.journal_from.is_none_or(|f| slot > f) && expected.journal_until.is_none_or(|u| slot <= u)
    };
    let mut fired: Vec<DateTime<Utc>> = Vec::new();
    for r in &records {
        match (r.fired(), r.patched_at()) {
            (true, None) => wrong.push(format!(
                "{name}: slot {} fired but no patch landed: {r:?}",
                r.slot
            )),
            (false, Some(at)) => wrong.push(format!(
                "{name}: slot {} is {} but its patch landed at {at}: {r:?}",
                r.slot, r.result
            )),
            _ => {}
        }
        if r.fired() && r.slot_count != 1 {
            wrong.push(format!("{name}: a fired summary record: {r:?}"));
        }
        if r.fired() && mine(r.slot) {
            fired.push(r.slot);
        }
    }
    // the workload side: one rollout per fired slot, and no other slot
    let rollouts = match rollouts(client, ns, expected.workload).await {
        Ok(rollouts) => rollouts,
        Err(e) => {
            wrong.push(e);
            return wrong;
        }
    };
    let mut rolled: BTreeMap<DateTime<Utc>, usize> = BTreeMap::new();
    for (revision, slot) in &rollouts.revisions {
        match slot {
            Some(Ok(slot)) => *rolled.entry(*slot).or_default() += 1,
            Some(Err(value)) => wrong.push(format!(
                "{name}: revision {revision} of {:?} carries {value:?}, no slot",
                expected.workload
            )),
            None => {}
        }
    }
    // The controller keeps `revisionHistoryLimit` old revisions (a Deployment's ReplicaSets: 10
    // by default): the ones before the oldest it kept are gone, and with them the rollouts of the
    // oldest fired slots — at most one fired slot per revision gone, each older than every slot
    // a kept revision shows.
    let mut numbers: Vec<i64> = rollouts.revisions.iter().map(|(n, _)| *n).collect();
    numbers.sort_unstable();
    let gone = numbers.first().map_or(0, |first| first - 1);
    let oldest_kept = rolled.keys().next().copied();
    let mut unseen = 0;
    for slot in &fired {
        let n = rolled.get(slot).copied().unwrap_or(0);
        if n == 0 && oldest_kept.is_some_and(|kept| *slot < kept) && unseen < gone {
            unseen += 1;
            continue;
        }
        if n != 1 {
            wrong.push(format!(
                "{name}: fired slot {slot} rolled {n} times on {:?} (revisions {:?})",
                expected.workload, rollouts.revisions
            ));
        }
    }
    for slot in rolled.keys().filter(|s| mine(**s)) {
        if !fired.contains(slot) {
            wrong.push(format!(
                "{name}: {:?} rolled slot {slot}, which has no fired record",
                expected.workload
            ));
        }
    }
    let newest = fired.iter().max().copied();
    let template_mine = rollouts.template.filter(|s| mine(*s));
    let template_others = rollouts
        .template
        .is_some_and(|s| expected.journal_until.is_some_and(|u| s > u));
    if template_mine != newest && !template_others {
        wrong.push(format!(
            "{name}: {:?} carries {:?}, the newest fired slot is {newest:?}",
            expected.workload, rollouts.template
        ));
    }
    // each template change is a revision of its own, none gone but the oldest (so none was
    // counted short)
    if numbers != (gone + 1..=gone + numbers.len() as i64).collect::<Vec<_>>() {
        wrong.push(format!(
            "{name}: the revisions of {:?} are {numbers:?}, not consecutive: one was reused or is gone",
            expected.workload
        ));
    }
    wrong
}

/// [`violations`] until there are none (the operator accounts the last slots of the window a
/// moment after they pass, and the workload's controller makes the last revision a moment after
/// the patch), at most 60 s; panics with what is still wrong then. Returns the Eru's records.
pub async fn check(client: &Client, ns: &str, operator: &Operator, expected: &Ledger<'_>) -> Vec<SlotRecord> {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let wrong = violations(client, ns, operator, expected).await;
        if wrong.is_empty() {
            return slot_records_of(operator, expected.eru, expected.uid.as_deref()).unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the ledger of {} breaks the promise after 60 s ({} slots in {:?}):\n{}",
            expected.eru,
            expected.slots.len(),
            expected.window,
            wrong.join("\n")
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// What the Eru `eru` restarting `workload` on `*/step` seconds is expected to have, from its
/// creation (a second after: the API server records it to the second) to `to`, every slot
/// [`ON_SCHEDULE`] until the scenario says otherwise ([`Ledger::expect`]).
pub async fn every_since_created<'a>(
    client: &Client,
    ns: &str,
    eru: &'a str,
    workload: Workload<'a>,
    step: i64,
    to: DateTime<Utc>,
) -> Ledger<'a> {
    let erus: Api<eru_operator::eru::Eru> = Api::namespaced(client.clone(), ns);
    let from = super::eru::created(&erus, eru).await + chrono::Duration::seconds(1);
    Ledger {
        eru,
        workload,
        window: (from, to),
        slots: every(step, from, to),
        journal_from: None,
        uid: None,
        journal_until: None,
        expect: Vec::new(),
    }
}

/// [`check`] of [`every_since_created`], every slot [`ON_SCHEDULE`]: the scenarios that did
/// nothing to the Eru but let it run.
pub async fn check_every(
    client: &Client,
    ns: &str,
    operator: &Operator,
    eru: &str,
    workload: Workload<'_>,
    step: i64,
    to: DateTime<Utc>,
) -> Vec<SlotRecord> {
    let expected = every_since_created(client, ns, eru, workload, step, to).await;
    check(client, ns, operator, &expected).await
}

/// [`check`] of the Eru `eru` restarting the Deployment `deployment` on `minute hour * * *`
/// (UTC), from its creation to now: for the scenarios whose daily slot seldom falls in the test,
/// this proves nothing fired that should not (no record off the schedule, no rollout of a slot).
pub async fn check_daily(
    client: &Client,
    ns: &str,
    operator: &Operator,
    eru: &str,
    deployment: &str,
    (hour, minute): (u32, u32),
) -> Vec<SlotRecord> {
    let erus: Api<eru_operator::eru::Eru> = Api::namespaced(client.clone(), ns);
    let from = super::eru::created(&erus, eru).await;
    let to = Utc::now();
    let expected = Ledger::deployment(eru, deployment, (from, to), daily(hour, minute, from, to));
    check(client, ns, operator, &expected).await
}
