//! The audit of a window: for each Eru, the slots its spec produced under the epochs in force,
//! how the journal accounts them (restarted, by outcome; missed or skipped, by reason with their
//! windows and notes) and a verdict that each is accounted exactly once — computed from the
//! journal's rows, beside the ledger's running counters so the two cross-check each other; plus
//! the operator's own facts of the window (runs, downtime, leader handovers, journal outages,
//! cluster-wide blackouts). `GET /audit`, `eru-operator audit` and the `/ui` pages all show this
//! one computation ([`audit`], pure; [`read`] fetches its rows).

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Duration, DurationRound, Utc};
use serde::Deserialize;
use utoipa::IntoParams;

mod operator;
mod report;
mod text;

use operator::operator_facts;

pub use report::*;

use super::{
    QueryError, Window,
    params::{Namespace, ObjectName, TargetName, Time},
};
use crate::{
    eru::core::{
        blackout::Blackout,
        hold::Held,
        ledger::EpochSpec,
        schedule::{Schedule, eru_seed},
    },
    journal::{AuditReading, AuditRows, Journal, SlotRecordRow, TallyRow, Ts},
    vocab::{Outcome, Reason, SlotResult},
};

/// The longest window an audit reads.
pub const MAX_WINDOW_DAYS: i64 = 31;
/// The window when none is given: the last day.
pub const DEFAULT_WINDOW_HOURS: i64 = 24;
/// Slot records an audit reads at most; past it the audit says it is incomplete.
pub const RECORD_CAP: usize = 200_000;
/// Slots of one Eru an audit enumerates at most (a per-second schedule over a month has 2.6 M).
pub const SLOT_CAP: usize = 100_000;
/// The work one audit does at most, all Erus together: slots enumerated plus records read (the
/// per-Eru [`SLOT_CAP`] alone let a namespace of every-second Erus take seconds of CPU and
/// hundreds of MB per request). Checked inside the loops; past it the audit stops and says so
/// (an incomplete verdict naming the Erus not audited). A day of 1,000 hourly Erus is 48,000;
/// 31 days of them 744,000 slots and the [`RECORD_CAP`] records.
pub const WORK_BUDGET: usize = 1_000_000;
/// Instants listed per finding (the counts are complete).
const LIST_CAP: usize = 20;
/// Windows and notes listed per reason.
const DETAIL_CAP: usize = 10;

/// Query parameters of `GET /audit` (and the `/ui` pages).
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AuditParams {
    /// Namespace of the Eru.
    #[param(inline)]
    pub namespace: Option<Namespace>,
    /// Name of the Eru.
    #[param(inline)]
    pub name: Option<ObjectName>,
    /// Only slots of this workload: a Deployment's name, or `StatefulSet/<name>`, `DaemonSet/<name>`.
    #[param(inline)]
    pub target: Option<TargetName>,
    /// Start of the window (RFC 3339, inclusive); 24 hours before `until` when omitted. At most
    /// 31 days before `until`.
    #[param(inline)]
    pub since: Option<Time>,
    /// End of the window (RFC 3339, exclusive); now when omitted. After `since`. Slots after
    /// now are not counted: they have not come.
    #[param(inline)]
    pub until: Option<Time>,
}

impl AuditParams {
    /// The window `[since, until)`, or why it is refused; each bound rounded up to the
    /// millisecond, the journal's precision (the same instants: a slot is a whole millisecond),
    /// so the audit's `since - 1 ms` is the instant just before the window.
    pub fn window(&self, now: DateTime<Utc>) -> Result<(DateTime<Utc>, DateTime<Utc>), QueryError> {
        let ms = |t: DateTime<Utc>| t.duration_round_up(Duration::milliseconds(1)).unwrap_or(t);
        let until = ms(self.until.map_or(now, |t| t.0));
        let since = ms(self
            .since
            .map_or(until - Duration::hours(DEFAULT_WINDOW_HOURS), |t| t.0));
        if since >= until {
            return Err(QueryError::Invalid(format!(
                "since ({}) must be before until ({})",
                Ts(since),
                Ts(until)
            )));
        }
        if until - since > Duration::days(MAX_WINDOW_DAYS) {
            return Err(QueryError::Invalid(format!(
                "the window from since to until is {} days; an audit reads at most {MAX_WINDOW_DAYS} days",
                (until - since).num_days()
            )));
        }
        Ok((since, until))
    }
}

/// What an audit reads beside the window's accounting.
#[derive(Clone, Copy, Debug)]
pub struct Reads {
    /// Each Eru's running counters against its rows (one kept row per Eru).
    pub counters: bool,
    /// Every column of each record, for a page to draw (else only what the audit counts).
    pub records: bool,
}

impl Reads {
    /// `GET /audit` and the CLI: the counters, no record drawn.
    pub const REPORT: Reads = Reads {
        counters: true,
        records: false,
    };
    /// The fleet's page: its records, drawn.
    pub const FLEET_PAGE: Reads = Reads {
        counters: false,
        records: true,
    };
    /// An Eru's page: its records and its counters.
    pub const ERU_PAGE: Reads = Reads {
        counters: true,
        records: true,
    };
}

/// Reads what an audit of `p` needs from the journal, as `reads` asks, and audits it.
pub async fn read(
    journal: &Journal,
    p: &AuditParams,
    now: DateTime<Utc>,
    blackouts: &[Blackout],
    reads: Reads,
) -> Result<Audit, QueryError> {
    let (since, until) = p.window(now)?;
    let object = (
        p.namespace.as_ref().map(|n| n.0.as_str()),
        p.name.as_ref().map(|n| n.0.as_str()),
    );
    let target = p.target.as_ref().map(|t| t.0.as_str());
    let reading = AuditReading {
        cap: RECORD_CAP,
        totals: reads.counters,
        records: reads.records,
    };
    let mut rows = (journal.audit_rows(since, until, object, target, reading)).await?;
    let totals = rows.totals.take();
    let mut audit = audit(rows, totals, (since, until), now, blackouts, target);
    // the manual runs of the window, apart from the slots (bounded like a listing)
    let runs = journal
        .manual_runs(object.0, (since, until), MANUAL_RUN_CAP as i64)
        .await?;
    for run in runs.into_iter().take(MANUAL_RUN_CAP) {
        let eru = audit.erus.iter_mut().find(|e| e.uid == run.uid);
        if let Some(eru) = eru.filter(|e| object.1.is_none_or(|name| e.name == name)) {
            eru.manual_runs.push(ManualRunItem {
                token: run.token,
                requested_by: run.requested_by,
                requested_at: run.requested_at,
                outcome: run.outcome,
                patched_at: run.patched_at,
                finished_at: run.finished_at,
                reason: run.reason,
            });
        }
    }
    Ok(audit)
}

/// Manual runs an audit lists at most, all Erus together.
pub const MANUAL_RUN_CAP: usize = 1_000;

/// The audit of `[since, until)` from its rows (pure).
pub fn audit(
    rows: AuditRows,
    totals: Option<Vec<(String, i64, i64)>>,
    (since, until): (DateTime<Utc>, DateTime<Utc>),
    now: DateTime<Utc>,
    blackouts: &[Blackout],
    target: Option<&str>,
) -> Audit {
    let totals: Option<HashMap<String, (i64, i64)>> =
        totals.map(|t| t.into_iter().map(|(uid, f, n)| (uid, (f, n))).collect());
    let mut epochs: HashMap<&str, Vec<&crate::journal::EpochRow>> = HashMap::new();
    for e in &rows.epochs {
        epochs.entry(&e.uid).or_default().push(e);
    }
    let mut records = by_eru(rows.tallies, rows.records);
    // the restart in flight of each Eru (one at most): a map, not a scan of them per Eru
    let open: HashMap<&str, Ts> = rows.open.iter().map(|r| (r.uid.as_str(), r.slot)).collect();
    let window = Span {
        since,
        until,
        now,
        target,
    };
    let mut work = Work {
        memo: SlotMemo::default(),
        budget: Budget(WORK_BUDGET),
    };
    let mut erus = Vec::new();
    let mut not_audited = 0;
    for ledger in &rows.ledgers {
        let deleted_at = ledger.deleted_at.map(|t| t.0);
        let eru_epochs = epochs.remove(ledger.uid.as_str()).unwrap_or_default();
        let first = eru_epochs.first().map(|e| e.effective_from.0);
        let lived_in_window = first.is_none_or(|f| f < until) && deleted_at.is_none_or(|d| d >= since);
        let eru_records = records.remove(&ledger.uid).unwrap_or_default();
        if !lived_in_window && eru_records.0.is_empty() {
            continue;
        }
        // its records must fit what is left, with a slot to enumerate; else it is not audited
        // (nor any after it: a page of Erus half audited would mislead more than a short one)
        if not_audited > 0 || !work.budget.reserve(eru_records.0.len() + 1) {
            not_audited += 1;
            continue;
        }
        let in_flight = open.get(ledger.uid.as_str()).copied();
        let counters = totals.as_ref().map(|t| {
            let (rows_fired, rows_not_fired) = t.get(&ledger.uid).copied().unwrap_or_default();
            counters(
                ledger.fired_slots,
                ledger.missed_slots,
                rows_fired,
                rows_not_fired,
            )
        });
        erus.push(audit_eru(
            ledger,
            &eru_epochs,
            eru_records,
            &window,
            in_flight,
            counters,
            &mut work,
        ));
    }
    let mut operator = operator_facts(&rows.runs, &rows.outages, (since, until), now, blackouts);
    operator.notifications = rows.outbox.clone();
    let verdict = verdict(&erus, !rows.truncated, not_audited);
    Audit {
        since: Ts(since),
        until: Ts(until),
        verdict,
        operator,
        erus,
    }
}

/// Each Eru's records (by uid): counted, and whole when a page read them to draw.
fn by_eru(
    tallies: Vec<(String, Vec<TallyRow>)>,
    whole: Vec<SlotRecordRow>,
) -> HashMap<String, (Vec<TallyRow>, Vec<SlotRecordRow>)> {
    let mut records: HashMap<String, (Vec<TallyRow>, Vec<SlotRecordRow>)> = tallies
        .into_iter()
        .map(|(uid, t)| (uid, (t, Vec::new())))
        .collect();
    for r in whole {
        let (tallies, drawn) = records.entry(r.record.uid.clone()).or_default();
        tallies.push(TallyRow::from(&r));
        drawn.push(r);
    }
    records
}

/// The audited window, the instant of the audit and its target filter.
struct Span<'a> {
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    now: DateTime<Utc>,
    target: Option<&'a str>,
}

fn audit_eru(
    ledger: &crate::journal::LedgerRow,
    epoch_rows: &[&crate::journal::EpochRow],
    (tallies, records): (Vec<TallyRow>, Vec<SlotRecordRow>),
    window: &Span<'_>,
    in_flight: Option<Ts>,
    counters: Option<Counters>,
    work: &mut Work,
) -> EruAudit {
    let seed = eru_seed(&ledger.namespace, &ledger.name);
    let mut notes = Vec::new();
    let epochs = read_epochs(epoch_rows, &mut notes);
    let end = enumerated_until(ledger, &tallies, window);
    let (expected, complete) = expected_slots(&epochs, &seed, window, end, work);
    // an enumeration cut short audits the slots up to its last one: records after it are not
    // findings (their slots were not enumerated)
    let horizon = (!complete).then(|| expected.last().copied().unwrap_or(window.since));
    if !complete {
        notes.push(format!(
            "more slots in the window than the audit enumerates ({} of at most {SLOT_CAP} per Eru, \
             {WORK_BUDGET} slots and records per audit): the slots up to {} are audited; narrow the window",
            expected.len(),
            Ts(horizon.unwrap_or(window.since))
        ));
    }
    let Tally {
        cover,
        fired,
        reasons,
        outside,
        invalid,
    } = tally(&tallies, &expected, horizon, window);
    let cursor = ledger.accounted_through.map(|t| t.0);
    let (unaccounted, duplicated, pending) = coverage(&expected, &cover, in_flight, cursor);
    if invalid.count > 0 {
        notes.push(format!(
            "records breaking the journal's invariant: {} (a last slot before the first, or no slot; \
             the first at {}): forged or corrupted rows, left out of the accounting",
            invalid.count, invalid.slots[0]
        ));
    }
    if unaccounted.count > 0 {
        notes.push(format!(
            "slots up to the cursor without a record in this journal: {} (the first at {}), as a \
             journal started after a slot (a replaced or lost one) holds none of it",
            unaccounted.count, unaccounted.slots[0]
        ));
    }
    let short = counters.as_ref().is_some_and(|c| !c.agree && short_counters(c));
    let accounted =
        unaccounted.count == 0 && duplicated.count == 0 && outside.count == 0 && invalid.count == 0 && !short;
    EruAudit {
        namespace: ledger.namespace.clone(),
        name: ledger.name.clone(),
        uid: ledger.uid.clone(),
        accounted_through: ledger.accounted_through,
        deleted_at: ledger.deleted_at,
        epochs: epoch_items(&epochs, window),
        slots: expected.len() as i64,
        fired,
        not_restarted: reasons.into_values().collect(),
        pending,
        in_flight,
        held: None,
        manual_runs: Vec::new(),
        unaccounted,
        duplicated,
        outside_schedule: outside,
        invalid,
        counters,
        accounted,
        complete,
        note: (!notes.is_empty()).then(|| notes.join("; ")),
        records,
    }
}

/// Where an Eru's slots stop being enumerated: the window's end, its deletion, or now (a slot
/// after now has not come: not produced yet, nor pending; a window in the future would otherwise
/// enumerate a day of every-second slots for nothing) — but never before a slot its records
/// name (a leader whose clock runs ahead may record one a moment past this replica's now).
fn enumerated_until(
    ledger: &crate::journal::LedgerRow,
    records: &[TallyRow],
    window: &Span<'_>,
) -> DateTime<Utc> {
    let recorded = records.iter().map(|r| r.last_slot.0).max();
    let came = recorded.map_or(window.now, |r| r.max(window.now)) + Duration::milliseconds(1);
    let end = ledger.deleted_at.map_or(window.until, |d| d.0.min(window.until));
    end.min(came)
}

/// The journaled spec epochs, oldest first; an unreadable one, or none, is a note.
fn read_epochs(
    epoch_rows: &[&crate::journal::EpochRow],
    notes: &mut Vec<String>,
) -> Vec<(i64, DateTime<Utc>, EpochSpec)> {
    let epochs: Vec<_> = epoch_rows
        .iter()
        .filter_map(
            |row| match serde_json::from_value::<EpochSpec>(row.spec.0.clone()) {
                Ok(spec) => Some((row.generation, row.effective_from.0, spec)),
                Err(e) => {
                    notes.push(format!(
                        "epoch of generation {} is unreadable: {e}",
                        row.generation
                    ));
                    None
                }
            },
        )
        .collect();
    if epochs.is_empty() {
        notes.push("no spec epoch is journaled: the slots its spec produced are unknown".into());
    }
    epochs
}

/// The epochs in force in the window (of the audited target, when one is asked): each covers
/// `(from, next epoch's from]`, the milliseconds [`expected_slots`] enumerates.
fn epoch_items(epochs: &[(i64, DateTime<Utc>, EpochSpec)], window: &Span<'_>) -> Vec<EpochItem> {
    let tick = Duration::milliseconds(1);
    epochs
        .iter()
        .enumerate()
        .filter(|(_, e)| window.target.is_none_or(|t| t == e.2.target))
        .filter(|(i, e)| e.1 + tick < window.until && epochs.get(i + 1).is_none_or(|n| n.1 >= window.since))
        .map(|(_, (generation, from, spec))| EpochItem {
            generation: *generation,
            effective_from: Ts(*from),
            schedule: spec.schedule.clone(),
            time_zone: spec.time_zone.clone(),
            suspend: spec.suspend,
            suspend_note: spec.suspend_note.clone(),
            target: spec.target.clone(),
        })
        .collect()
}

/// What an Eru's records say of its expected slots.
struct Tally {
    /// How many records cover each expected slot.
    cover: Vec<u32>,
    fired: Fired,
    reasons: BTreeMap<(SlotResult, Option<Reason>), NotRestarted>,
    /// Records of slots the schedule did not produce.
    outside: Finding,
    /// Records that break the journal's invariant.
    invalid: Finding,
}

/// Counts the records against the expected slots (up to `horizon`, when the enumeration was cut
/// short): restarts by outcome, the rest by result and reason, with their windows and notes.
fn tally(
    records: &[TallyRow],
    expected: &[DateTime<Utc>],
    horizon: Option<DateTime<Utc>>,
    window: &Span<'_>,
) -> Tally {
    let mut cover = vec![0u32; expected.len()];
    let mut fired = Fired::default();
    let mut reasons: BTreeMap<(SlotResult, Option<Reason>), NotRestarted> = BTreeMap::new();
    let mut outside = Finding::default();
    let mut invalid = Finding::default();
    for s in records {
        // a row that breaks the journal's invariant (a constraint refuses it since migration
        // 0008; an older journal, or one written by hand, may hold one): a finding, never a
        // slice out of order
        if s.last_slot.0 < s.slot.0 || s.slot_count < 1 {
            add(&mut invalid, s.slot);
            continue;
        }
        if horizon.is_some_and(|h| s.slot.0 > h) {
            continue;
        }
        let lo = expected.partition_point(|t| *t < s.slot.0);
        let hi = expected.partition_point(|t| *t <= s.last_slot.0);
        let in_window = (hi - lo) as i64;
        let produced = lo < hi;
        if !produced && s.slot.0 >= window.since {
            add(&mut outside, s.slot);
        }
        cover[lo..hi].iter_mut().for_each(|c| *c += 1);
        if s.result == SlotResult::Fired {
            fired.total += in_window;
            match s.restart_outcome {
                Some(Outcome::Succeeded) => fired.succeeded += in_window,
                Some(Outcome::Failed) => fired.failed += in_window,
                Some(Outcome::Abandoned) => fired.abandoned += in_window,
                _ => fired.in_progress += in_window,
            }
            if s.reverted {
                fired.reverted += in_window;
            }
        } else {
            let reason = s.reason.and_then(Reason::shown);
            let entry = reasons.entry((s.result, reason)).or_insert_with(|| NotRestarted {
                result: s.result,
                reason,
                slots: 0,
                windows: Vec::new(),
                notes: Vec::new(),
            });
            entry.slots += in_window;
            if let (Some(start), Some(end)) = (s.window_start, s.window_end) {
                let w = Window { start, end };
                if entry.windows.len() < DETAIL_CAP && !entry.windows.contains(&w) {
                    entry.windows.push(w);
                }
            }
            if let Some(note) = &s.note
                && entry.notes.len() < DETAIL_CAP
                && !entry.notes.contains(note)
            {
                entry.notes.push(note.clone());
            }
        }
    }
    Tally {
        cover,
        fired,
        reasons,
        outside,
        invalid,
    }
}

/// The expected slots no record covers (unaccounted up to the `cursor`, else pending; the one in
/// flight is pending), and those covered twice.
fn coverage(
    expected: &[DateTime<Utc>],
    cover: &[u32],
    in_flight: Option<Ts>,
    cursor: Option<DateTime<Utc>>,
) -> (Finding, Finding, i64) {
    let (mut unaccounted, mut duplicated, mut pending) = (Finding::default(), Finding::default(), 0);
    for (slot, n) in expected.iter().zip(cover) {
        match n {
            // the restart in flight: its record comes when its patch lands or it is given up
            0 if in_flight.is_some_and(|f| f.0 == *slot) => pending += 1,
            0 if cursor.is_some_and(|c| *slot <= c) => add(&mut unaccounted, Ts(*slot)),
            0 => pending += 1,
            1 => {}
            _ => add(&mut duplicated, Ts(*slot)),
        }
    }
    (unaccounted, duplicated, pending)
}

/// Every slot the epochs produced in the window, up to `end` (the Eru's deletion), oldest first;
/// `false` if the enumeration stopped at [`SLOT_CAP`] or the audit's `budget` ran out. An epoch
/// covers `(from, next epoch's from]`, as the ledger accounts it.
fn expected_slots(
    epochs: &[(i64, DateTime<Utc>, EpochSpec)],
    seed: &str,
    window: &Span<'_>,
    end: DateTime<Utc>,
    Work { memo, budget }: &mut Work,
) -> (Vec<DateTime<Utc>>, bool) {
    let tick = Duration::milliseconds(1);
    let mut slots = Vec::new();
    for (i, (_, from, spec)) in epochs.iter().enumerate() {
        if window.target.is_some_and(|t| t != spec.target) {
            continue;
        }
        let lo = (window.since - tick).max(*from);
        let next = epochs.get(i + 1).map(|e| e.1);
        let hi = next.map_or(end - tick, |n| n.min(end - tick));
        if lo >= hi {
            continue;
        }
        // an invalid spec produces no slot (each is skipped/spec_invalid if seen)
        let limit = (SLOT_CAP - slots.len()).min(budget.0);
        for &slot in memo.slots(spec, seed, lo, hi, limit) {
            if slots.len() == SLOT_CAP || !budget.take() {
                return (slots, false);
            }
            slots.push(slot);
        }
    }
    (slots, true)
}

/// An audit's shared work: the slots enumerated so far and what is left of its budget.
struct Work {
    memo: SlotMemo,
    budget: Budget,
}

/// What is left of an audit's [`WORK_BUDGET`].
struct Budget(usize);

impl Budget {
    /// One unit of work, if any is left.
    fn take(&mut self) -> bool {
        let left = self.0 > 0;
        self.0 = self.0.saturating_sub(1);
        left
    }

    /// `units` of work at once, if that many are left (else none is taken).
    fn reserve(&mut self, units: usize) -> bool {
        let fits = units <= self.0;
        if fits {
            self.0 -= units;
        }
        fits
    }
}

/// The slots of each distinct (schedule, time zone, `H` seed, interval) an audit enumerates,
/// computed once: a fleet shares a handful of schedules, and most Erus' epochs span the whole
/// window (1,000 hourly Erus: one parse and one enumeration, not 1,000 of each). Each is
/// enumerated only as far as asked (the slots, and whether that was all of them).
#[derive(Default)]
struct SlotMemo(HashMap<SlotKey, (Vec<DateTime<Utc>>, bool)>);

/// (schedule, time zone, `H` seed, after, until)
type SlotKey = (String, Option<String>, String, DateTime<Utc>, DateTime<Utc>);

impl SlotMemo {
    /// The slots of `spec` in `(lo, hi]`, at least the first `limit` + 1 of them (or all); none
    /// if the spec is invalid.
    fn slots(
        &mut self,
        spec: &EpochSpec,
        seed: &str,
        lo: DateTime<Utc>,
        hi: DateTime<Utc>,
        limit: usize,
    ) -> &[DateTime<Utc>] {
        // the seed only places `H` fields
        let seed = if spec.schedule.contains('H') { seed } else { "" };
        let key = (
            spec.schedule.clone(),
            spec.time_zone.clone(),
            seed.to_string(),
            lo,
            hi,
        );
        let enumerate = || {
            let slots: Vec<DateTime<Utc>> =
                Schedule::parse_for(&spec.schedule, spec.time_zone.as_deref(), seed)
                    .map(|s| s.slots_between(lo, hi).take(limit + 1).collect())
                    .unwrap_or_default();
            let all = slots.len() <= limit;
            (slots, all)
        };
        let entry = self.0.entry(key).or_insert_with(enumerate);
        // enumerated for a smaller limit before: again, further
        if !entry.1 && entry.0.len() <= limit {
            *entry = enumerate();
        }
        &entry.0
    }
}

fn add(finding: &mut Finding, slot: Ts) {
    finding.count += 1;
    if finding.slots.len() < LIST_CAP {
        finding.slots.push(slot);
    }
}

/// Counters that count fewer slots than the rows: no retention or seed explains it.
fn short_counters(c: &Counters) -> bool {
    c.fired_slots < c.rows_fired || c.missed_slots < c.rows_not_fired
}

fn counters(fired_slots: i64, missed_slots: i64, rows_fired: i64, rows_not_fired: i64) -> Counters {
    let agree = fired_slots == rows_fired && missed_slots == rows_not_fired;
    let mut c = Counters {
        fired_slots,
        missed_slots,
        rows_fired,
        rows_not_fired,
        agree,
        note: None,
    };
    if !agree {
        c.note = Some(if short_counters(&c) {
            "the counters count fewer slots than the journal's rows: the journal is inconsistent".into()
        } else {
            "the counters count slots the rows no longer hold: rows pruned by retention, or counts \
             carried over from a lost journal's status"
                .into()
        });
    }
    c
}

fn verdict(erus: &[EruAudit], rows_complete: bool, not_audited: usize) -> Verdict {
    let sum = |f: &dyn Fn(&EruAudit) -> i64| erus.iter().map(f).sum::<i64>();
    let slots = sum(&|e| e.slots);
    let fired = sum(&|e| e.fired.total);
    let not_restarted = sum(&|e| e.not_restarted.iter().map(|n| n.slots).sum());
    let pending = sum(&|e| e.pending);
    let unaccounted = sum(&|e| e.unaccounted.count);
    let duplicated = sum(&|e| e.duplicated.count);
    let outside_schedule = sum(&|e| e.outside_schedule.count);
    let invalid = sum(&|e| e.invalid.count);
    let counter_mismatches = erus
        .iter()
        .filter(|e| e.counters.as_ref().is_some_and(|c| !c.agree))
        .count();
    let complete = rows_complete && not_audited == 0 && erus.iter().all(|e| e.complete);
    let accounted = erus.iter().all(|e| e.accounted);
    let summary = if accounted {
        format!(
            "Every one of the {slots} slots of {} Erus is accounted exactly once: {fired} restarted, \
             {not_restarted} missed or skipped, {pending} not yet due for a record",
            erus.len()
        )
    } else {
        let failing = erus.iter().filter(|e| !e.accounted).count();
        let invalid = if invalid > 0 {
            format!(", {invalid} records breaking the journal's invariant")
        } else {
            String::new()
        };
        format!(
            "Not every slot is accounted exactly once: {unaccounted} without a record, {duplicated} with two, \
             {outside_schedule} records outside the schedule{invalid}, in {failing} of {} Erus",
            erus.len()
        )
    };
    let summary = match (complete, counter_mismatches) {
        (false, _) if not_audited > 0 => format!(
            "{summary} (incomplete: the audit's work budget of {WORK_BUDGET} slots and records ran out; \
             {not_audited} more Erus are not audited: narrow the window, or name a namespace or an Eru)"
        ),
        (false, _) => {
            format!("{summary} (incomplete: the window holds more than the audit reads; narrow it)")
        }
        (true, 0) => summary,
        (true, n) => format!("{summary}; {n} Erus' running counters differ from their rows (see each)"),
    };
    Verdict {
        accounted,
        summary,
        erus: erus.len(),
        slots,
        fired,
        not_restarted,
        pending,
        held: 0,
        unaccounted,
        duplicated,
        outside_schedule,
        invalid,
        counter_mismatches,
        not_audited,
        complete,
    }
}

/// `audit` with the due slots health gates hold now (`holds`, by Eru uid), each on its Eru if
/// it falls in the window, and their number in the verdict (among the pending).
pub fn with_holds(mut audit: Audit, holds: &HashMap<String, Held>) -> Audit {
    let (since, until) = (audit.since.0, audit.until.0);
    for eru in &mut audit.erus {
        eru.held = (holds.get(&eru.uid))
            .filter(|h| since <= h.slot && h.slot < until)
            .map(|h| HeldNow {
                slot: Ts(h.slot),
                since: Ts(h.since),
                checked_at: Ts(h.checked_at),
                deadline: Ts(h.deadline),
                reason: h.reason,
                note: h.note.clone(),
            });
    }
    audit.verdict.held = audit.erus.iter().filter(|e| e.held.is_some()).count();
    if audit.verdict.held > 0 {
        audit.verdict.summary.push_str(&format!(
            "; {} due slots wait for health gates to open",
            audit.verdict.held
        ));
    }
    audit
}

#[cfg(test)]
mod tests;
