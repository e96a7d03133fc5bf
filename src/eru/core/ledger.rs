//! The slot ledger, pure: every slot after the cursor ends up either due (to restart now) or
//! recorded as missed/skipped with a reason, each under the spec that was in force at that slot.
//!
//! Specs are journaled as **epochs**: the fields that decide slots (schedule, time zone, suspend,
//! starting deadline, target) of one generation, with the instant it took effect. An epoch covers
//! `(from, next epoch's from]`: a new schedule never produces slots before it took effect, a
//! suspended stretch is `skipped/suspended` even if no reconcile ran during it, a slot while
//! no operator ran is `operator_down` whatever the spec became afterwards, and a slot while the
//! operator ran but its journal took no writes is `journal_unavailable`.
//!
//! Work per pass is bounded: at most [`SLOT_BUDGET`] slots are enumerated and at most
//! [`RECORD_CAP`] get a record of their own; the rest are summarized (one record with a count per
//! reason, window and target), and a larger backlog continues in the next pass from where this
//! one stopped.

use std::borrow::Cow;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use super::{
    blackout::{Blackout, Blackouts},
    hash::{fnv1a64, splitmix64},
    hold::Held,
    schedule::{Schedule, slot_text},
};
pub use crate::vocab::Reason;

/// Slots enumerated per pass at most.
pub const SLOT_BUDGET: usize = 20_000;
/// Individual slot records per pass at most; the rest are summarized.
pub const RECORD_CAP: usize = 50;

/// A stretch of time `(start, end]`: when no operator ran, what no readable journal covers, when
/// the journal took no writes.
pub type Window = (DateTime<Utc>, DateTime<Utc>);

/// Whether `slot` falls in `window`.
fn within(window: &Window, slot: DateTime<Utc>) -> bool {
    window.0 < slot && slot <= window.1
}

/// The first of `windows` that `at` falls in.
fn containing(windows: &[Window], at: DateTime<Utc>) -> Option<Window> {
    windows.iter().find(|w| within(w, at)).copied()
}

/// The first of `windows` that overlaps `(from, to]`.
pub fn overlapping(windows: &[Window], from: DateTime<Utc>, to: DateTime<Utc>) -> Option<Window> {
    windows.iter().find(|w| w.0 < to && from < w.1).copied()
}

/// One record: a single slot (`count == 1`) or a summarized run of slots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotRecord {
    pub first: DateTime<Utc>,
    pub last: DateTime<Utc>,
    pub count: i64,
    pub reason: Reason,
    pub window: Option<Window>,
    /// The workload the slot's epoch named.
    pub target: String,
    /// What the reason alone does not say (the blackout, why the target is not rollable).
    pub note: Option<String>,
}

impl SlotRecord {
    /// A record of one slot.
    pub fn one(slot: DateTime<Utc>, reason: Reason, window: Option<Window>, target: &str) -> Self {
        Self {
            first: slot,
            last: slot,
            count: 1,
            reason,
            window,
            target: target.to_string(),
            note: None,
        }
    }

    /// The same record with `note`.
    pub fn noted(self, note: impl Into<String>) -> Self {
        Self {
            note: Some(note.into()),
            ..self
        }
    }
}

/// The fields of a spec that decide its slots, as journaled with each epoch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EpochSpec {
    pub schedule: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    #[serde(default)]
    pub suspend: bool,
    /// Why it is suspended (`spec.suspendNote`), kept on its suspended slots' records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend_note: Option<String>,
    pub starting_deadline_seconds: i64,
    /// The target's journal key ([`crate::eru::Target::key`]): a Deployment's name, or `Kind/name`.
    pub target: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub jitter_seconds: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blackouts: Vec<Blackout>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

impl EpochSpec {
    /// The schedule, if it parses (an invalid spec has no slots); `seed` (the Eru's
    /// `namespace/name`) resolves `H`.
    pub fn schedule(&self, seed: &str) -> Option<Schedule> {
        Schedule::parse_for(&self.schedule, self.time_zone.as_deref(), seed).ok()
    }

    /// When the restart of `slot` is due: the slot plus its jitter offset for the Eru `uid`.
    pub fn fire_at(&self, uid: &str, slot: DateTime<Utc>) -> DateTime<Utc> {
        slot + jitter_offset(uid, slot, self.jitter_seconds)
    }
}

/// The jitter offset of the restart of `slot` for the Eru `uid`: in `[0, jitter_seconds)` with
/// millisecond resolution, the same for the same uid and slot in every process (a stable hash,
/// never a random number), so an operator restarted mid-slot waits for the same instant.
pub fn jitter_offset(uid: &str, slot: DateTime<Utc>, jitter_seconds: i64) -> Duration {
    if jitter_seconds <= 0 {
        return Duration::zero();
    }
    let mut key = uid.as_bytes().to_vec();
    key.extend(slot.timestamp_millis().to_le_bytes());
    let hash = splitmix64(fnv1a64(&key), 1);
    Duration::milliseconds((hash % (jitter_seconds as u64 * 1000)) as i64)
}

/// One generation's spec and the instant it took effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Epoch {
    pub generation: i64,
    pub from: DateTime<Utc>,
    pub spec: EpochSpec,
}

/// When a new generation took effect: when the API server recorded the spec's last write
/// (`written_at`, from managedFields; second precision), else when the operator saw it (`now`) —
/// never before the previous epoch (`floor`), never after `now`.
pub fn effective_from(
    written_at: Option<DateTime<Utc>>,
    floor: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> DateTime<Utc> {
    let at = written_at.unwrap_or(now).min(now);
    floor.map_or(at, |floor| at.max(floor.min(now)))
}

/// The slot to restart now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Due {
    pub slot: DateTime<Utc>,
    /// The restart is never patched after this instant (its restart instant — the slot plus
    /// its jitter — plus `startingDeadlineSeconds`).
    pub deadline: DateTime<Utc>,
    pub target: String,
    /// Journal it as `dry_run`; patch nothing.
    pub dry_run: bool,
}

/// The outcome of accounting `(after, now]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Accounting {
    /// The latest slot, still within its starting deadline, of an unsuspended epoch.
    pub due: Option<Due>,
    /// Slots not restarted, oldest first.
    pub records: Vec<SlotRecord>,
    /// The backlog was larger than the budget: account again right away.
    pub more: bool,
    /// A slot that has passed but whose restart instant (jitter) has not: accounting stopped
    /// before it, to come back then.
    pub held_until: Option<DateTime<Utc>>,
}

impl Accounting {
    /// How many slots the records stand for.
    pub fn slot_count(&self) -> i64 {
        self.records.iter().map(|r| r.count).sum()
    }
}

/// Inputs of [`account`] besides the epochs.
#[derive(Clone, Debug)]
pub struct Span<'a> {
    /// The cursor: every slot up to it is accounted (exclusive start).
    pub after: DateTime<Utc>,
    pub now: DateTime<Utc>,
    /// Windows when no operator ran, oldest first.
    pub downtime: &'a [Window],
    /// A stretch no readable journal covers although the Eru was accounted before it.
    pub unrecorded: Option<Window>,
    /// Windows when the operator ran but its journal took no writes, oldest first.
    pub journal_outages: &'a [Window],
    /// The Eru's uid (its jitter) and `namespace/name` (`H` in its schedules).
    pub uid: &'a str,
    pub seed: &'a str,
    /// The operator's cluster-wide blackouts.
    pub cluster_blackouts: &'a [Blackout],
    /// The current spec and its blackouts and the cluster's, compiled once for the pass: an
    /// epoch with the same blackouts and time zone reads these, others compile their own.
    pub compiled: Option<(&'a EpochSpec, &'a Blackouts)>,
    /// The slot this Eru has waited for fleet capacity, if it waits.
    pub queued: Option<DateTime<Utc>>,
    /// The slot a health gate held, if one did.
    pub held: Option<&'a Held>,
}

impl<'a> Span<'a> {
    /// `(after, now]` with no downtime, journal outage, blackouts, queue or jitter seed.
    pub fn new(after: DateTime<Utc>, now: DateTime<Utc>) -> Self {
        Self {
            after,
            now,
            downtime: &[],
            unrecorded: None,
            journal_outages: &[],
            uid: "",
            seed: "",
            cluster_blackouts: &[],
            compiled: None,
            queued: None,
            held: None,
        }
    }
}

/// Accounts for the slots in `(span.after, span.now]`, each under the epoch in force at it.
/// `epochs` are oldest first; slots before the first one's `from` are not enumerated (their spec
/// is unknown). A slot counts from its restart instant (the slot plus its jitter): one whose
/// instant is still ahead stops the accounting (it is neither due nor missed yet).
pub fn account(epochs: &[Epoch], span: &Span<'_>) -> Accounting {
    let mut accounting = Accounting::default();
    // (slot, its restart instant, its epoch)
    let mut pending: Vec<(DateTime<Utc>, DateTime<Utc>, usize)> = Vec::new();
    'epochs: for (i, epoch) in epochs.iter().enumerate() {
        let lo = span.after.max(epoch.from);
        let hi = epochs.get(i + 1).map_or(span.now, |next| next.from.min(span.now));
        if lo >= hi {
            continue;
        }
        let Some(schedule) = epoch.spec.schedule(span.seed) else {
            continue;
        };
        for slot in schedule.slots_between(lo, hi) {
            let fire = epoch.spec.fire_at(span.uid, slot);
            if fire > span.now {
                accounting.held_until = Some(fire);
                break 'epochs;
            }
            if pending.len() == SLOT_BUDGET {
                accounting.more = true;
                break 'epochs;
            }
            pending.push((slot, fire, i));
        }
    }
    let blackouts: Vec<Cow<'_, Blackouts>> = epochs.iter().map(|e| blackouts_of(&e.spec, span)).collect();
    let deadline =
        |fire: DateTime<Utc>, i: usize| fire + Duration::seconds(epochs[i].spec.starting_deadline_seconds);
    // The newest slot may still run: if this pass reached `now`, its epoch is not suspended, it
    // is within that epoch's starting deadline and outside every blackout.
    if !accounting.more
        && let Some(&(slot, fire, i)) = pending.last()
    {
        let spec = &epochs[i].spec;
        if !spec.suspend && span.now <= deadline(fire, i) && blackouts[i].find(fire).is_none() {
            accounting.due = Some(Due {
                slot,
                deadline: deadline(fire, i),
                target: spec.target.clone(),
                dry_run: spec.dry_run,
            });
            pending.pop();
        }
    }
    for (slot, fire, i) in pending {
        let spec = &epochs[i].spec;
        let suspended = spec.suspend.then_some(spec.suspend_note.as_deref());
        let (reason, window, note) = classify(span, slot, fire, deadline(fire, i), suspended, &blackouts[i]);
        let record = SlotRecord {
            note,
            ..SlotRecord::one(slot, reason, window, &spec.target)
        };
        push(&mut accounting.records, record);
    }
    accounting
}

/// An epoch's blackouts and the cluster's: those compiled for the pass if its blackouts and time
/// zone are the current spec's, else compiled here ([`Blackouts::in_force`]).
fn blackouts_of<'s>(spec: &EpochSpec, span: &Span<'s>) -> Cow<'s, Blackouts> {
    match span.compiled {
        Some((current, compiled))
            if current.blackouts == spec.blackouts && current.time_zone == spec.time_zone =>
        {
            Cow::Borrowed(compiled)
        }
        _ => Cow::Owned(Blackouts::in_force(
            &spec.blackouts,
            span.cluster_blackouts,
            spec.time_zone.as_deref(),
            span.seed,
        )),
    }
}

/// Why the passed slot `slot` (restart instant `fire`, never started after `deadline`) was not
/// restarted, from what is known of it. The rule of each case (docs/eru.md, "Which reason"):
///
/// 1. its epoch was suspended (the note, if the suspension has one), or a blackout covered its
///    restart instant: that;
/// 2. a health gate held it (the operator saw it due: this process's memory, or `status.held`
///    read back after a restart): `superseded` while its deadline is ahead; else `operator_down`
///    if no operator ran at some instant between the gates' last answer and the deadline (nobody
///    saw whether they opened), else the gate's reason; the note says what held it;
/// 3. its deadline is ahead (a newer slot is due): `operator_down` if it fell while no operator
///    ran, `journal_lost` or `journal_unavailable` if the journal lost it or took no writes then,
///    else `superseded`;
/// 4. no operator ran at its deadline: `operator_down` (with a note when one ran at the slot: it
///    stopped before restarting it);
/// 5. the journal lost it or took no writes at the slot: `journal_lost`, `journal_unavailable`;
/// 6. it waited for a fleet place until its deadline (an operator ran then): `fleet_capacity`;
/// 7. it fell while no operator ran, and the next one, started before the deadline, did not get
///    to it: `operator_down`;
/// 8. else `past_deadline`: an operator ran at the slot and at its deadline and did not restart it.
fn classify(
    span: &Span<'_>,
    slot: DateTime<Utc>,
    fire: DateTime<Utc>,
    deadline: DateTime<Utc>,
    suspended: Option<Option<&str>>,
    blackouts: &Blackouts,
) -> (Reason, Option<Window>, Option<String>) {
    if let Some(note) = suspended {
        return (Reason::Suspended, None, note.map(str::to_string));
    }
    if let Some(hit) = blackouts.find(fire) {
        return (Reason::Blackout, Some(hit.window), Some(hit.note));
    }
    if let Some(held) = span.held.filter(|h| h.slot == slot) {
        if span.now <= deadline {
            return (Reason::Superseded, None, None);
        }
        let note = Some(held.record_note());
        return match overlapping(span.downtime, held.checked_at, deadline) {
            Some(window) => (Reason::OperatorDown, Some(window), note),
            None => (held.reason, None, note),
        };
    }
    let down_at_slot = containing(span.downtime, slot);
    // no journal took the slot's record (nothing is patched without it): whether a newer slot
    // ran or its deadline passed afterwards follows from that
    let unjournaled = || {
        if let Some(window) = span.unrecorded.filter(|w| within(w, slot)) {
            Some((Reason::JournalLost, Some(window), None))
        } else {
            containing(span.journal_outages, slot).map(|w| (Reason::JournalUnavailable, Some(w), None))
        }
    };
    if span.now <= deadline {
        if let Some(window) = down_at_slot {
            return (Reason::OperatorDown, Some(window), None);
        }
        return unjournaled().unwrap_or((Reason::Superseded, None, None));
    }
    if let Some(window) = containing(span.downtime, deadline) {
        let note = down_at_slot.is_none().then(|| {
            format!(
                "an operator ran at the slot, stopped before restarting it and was not running at \
                 its starting deadline {}",
                slot_text(deadline)
            )
        });
        return (Reason::OperatorDown, Some(down_at_slot.unwrap_or(window)), note);
    }
    if let Some(unjournaled) = unjournaled() {
        return unjournaled;
    }
    if span.queued == Some(slot) {
        return (Reason::FleetCapacity, None, None);
    }
    match down_at_slot {
        Some(window) => (Reason::OperatorDown, Some(window), None),
        None => (Reason::PastDeadline, None, None),
    }
}

/// Appends a record: its own while under the cap; past the cap, merged into the last record
/// when that has the same reason, window, target and note (one summary per consecutive group).
fn push(records: &mut Vec<SlotRecord>, record: SlotRecord) {
    if records.len() > RECORD_CAP
        && let Some(last) = records.last_mut()
        && last.reason == record.reason
        && last.window == record.window
        && last.target == record.target
        && last.note == record.note
    {
        last.last = record.last;
        last.count += 1;
        return;
    }
    records.push(record);
}

/// When no operator ran, from journaled runs `(started_at, last sign of life)` oldest first (those
/// overlapping the span, and the one before it): the gaps between one run's last sign of life
/// (the latest of its heartbeats and of the commits of its records) and the next one's start,
/// and, separately, the stretch before the first run if it started after `since` (no run of this
/// journal covers it).
pub fn downtime(
    runs: &[(DateTime<Utc>, DateTime<Utc>)],
    since: DateTime<Utc>,
) -> (Vec<Window>, Option<Window>) {
    let before_first = runs
        .first()
        .filter(|first| first.0 > since)
        .map(|first| (since, first.0));
    // runs may overlap (a term the Lease proves, beside the run a shared journal holds of it):
    // a gap is where no run was alive, after the latest heartbeat so far
    let mut gaps = Vec::new();
    let mut alive_until: Option<DateTime<Utc>> = None;
    for &(started, heartbeat) in runs {
        if let Some(until) = alive_until
            && until < started
        {
            gaps.push((until, started));
        }
        alive_until = Some(alive_until.map_or(heartbeat, |u| u.max(heartbeat)));
    }
    (gaps, before_first)
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
