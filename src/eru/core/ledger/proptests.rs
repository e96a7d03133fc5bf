//! A property test of the ledger's accounting ([`account`]): random schedules, epochs (edits,
//! suspensions), downtimes, journal outages and passes (each pass accounting from the cursor the
//! previous one left) → every slot of the spec in force exactly one record or due, none outside
//! the schedule, each with the reason the rules give it, and the totals equal to the slots.
//!
//! The expected slots are written out here from the schedule's fields (these seconds of these
//! minutes of the wall clock of the Eru's time zone, minute by minute on the timeline: both
//! passes of a repeated half hour, none of a skipped one, as docs/eru.md promises every-hour
//! patterns), never taken from [`Schedule`]; the reasons from the rules of the module docs.

use std::collections::BTreeMap;

use chrono::{Offset, TimeZone};
use chrono_tz::Tz;
use proptest::prelude::*;

use super::*;

/// One epoch as generated: when it begins (ms after the base), its seconds, its minutes (`None`:
/// every minute), suspended, its starting deadline.
type EpochCase = (i64, Vec<u32>, Option<Vec<u32>>, bool, i64);

/// 15 minutes before Lord Howe Island's clocks go back half an hour (2027-04-04 02:00 LHDT,
/// +11:00 → 01:30 LHST, +10:30) and 75 before Sydney's go back an hour (03:00 AEDT → 02:00 AEST):
/// the six-hour and five-day stretches cross both.
fn base() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2027, 4, 3, 14, 45, 0).unwrap()
}

/// The Erus' time zones: none (UTC), whole-hour and odd offsets, two changes in the stretch.
const ZONES: [Option<Tz>; 6] = [
    None,
    Some(Tz::Asia__Kolkata),
    Some(Tz::Asia__Kathmandu),
    Some(Tz::America__St_Johns),
    Some(Tz::Australia__Lord_Howe),
    Some(Tz::Australia__Sydney),
];

/// The wall clock's minute of the hour at `at` (a whole minute of the timeline) in `zone`.
fn wall_minute(zone: Option<Tz>, at: i64) -> u32 {
    let offset = zone.map_or(0, |tz| {
        let utc = DateTime::from_timestamp(at, 0).unwrap().naive_utc();
        i64::from(tz.offset_from_utc_datetime(&utc).fix().local_minus_utc())
    });
    ((at + offset).rem_euclid(3600) / 60) as u32
}

fn ms(at: i64) -> DateTime<Utc> {
    base() + Duration::milliseconds(at)
}

fn list(values: &[u32]) -> String {
    values.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

/// The slots of `seconds minutes * * * *` in `zone` in `(after, until]`, by hand: every minute
/// of the timeline whose wall-clock minute is listed, at its listed seconds (every zone's offset
/// is whole minutes).
fn slots(
    seconds: &[u32],
    minutes: &Option<Vec<u32>>,
    zone: Option<Tz>,
    after: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Vec<DateTime<Utc>> {
    let mut out = Vec::new();
    let mut minute = after.timestamp().div_euclid(60) * 60;
    while minute <= until.timestamp() {
        let m = wall_minute(zone, minute);
        if minutes.as_ref().is_none_or(|ms| ms.contains(&m)) {
            for s in seconds {
                let slot = DateTime::from_timestamp(minute + i64::from(*s), 0).unwrap();
                if after < slot && slot <= until {
                    out.push(slot);
                }
            }
        }
        minute += 60;
    }
    out
}

/// Windows `(start, end]` from (start, length) pairs in ms, sorted, overlapping ones dropped.
fn windows(raw: &[(i64, i64)]) -> Vec<Window> {
    let mut raw = raw.to_vec();
    raw.sort_unstable();
    let mut out: Vec<Window> = Vec::new();
    for (start, len) in raw {
        let w = (ms(start), ms(start + len));
        if out.last().is_none_or(|last| last.1 < w.0) {
            out.push(w);
        }
    }
    out
}

/// One case: the stretch (ms), the epochs, downtime and journal outages ((start, length) in ms),
/// the passes (ms), the first cursor (ms), the time zone (of [`ZONES`]).
type Case = (
    i64,
    Vec<EpochCase>,
    Vec<(i64, i64)>,
    Vec<(i64, i64)>,
    Vec<i64>,
    i64,
    usize,
);

/// How one slot was accounted: in which pass (its `now`), and as what.
#[derive(Clone, Debug, PartialEq)]
enum Got {
    Due,
    Record(Reason, Option<Window>),
}

fn cases() -> impl Strategy<Value = Case> {
    // the stretch: an hour, six hours, or five days (enough slots for several passes' budgets)
    prop_oneof![4 => Just(3_600_000i64), 2 => Just(6 * 3_600_000), 1 => Just(5 * 86_400_000)].prop_flat_map(
        |horizon| {
            let epoch = (
                0..horizon,
                prop::collection::btree_set(0u32..60, 1..16).prop_map(|s| s.into_iter().collect::<Vec<_>>()),
                prop_oneof![
                    2 => Just(None),
                    1 => prop::collection::btree_set(0u32..60, 1..8).prop_map(|m| Some(m.into_iter().collect())),
                ],
                prop::bool::weighted(0.3),
                prop_oneof![Just(1i64), Just(5), Just(30), Just(300)],
            );
            let window = (0..horizon, 1i64..1_800_000);
            (
                Just(horizon),
                prop::collection::vec(epoch, 1..5),
                prop::collection::vec(window.clone(), 0..4),
                prop::collection::vec(window, 0..3),
                prop::collection::vec(1..=horizon, 1..8),
                -600_000i64..600_000,
                0..ZONES.len(),
            )
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_slot_is_accounted_once_with_the_reason_its_rules_give(
        (_horizon, raw_epochs, raw_downtime, raw_outages, mut passes, cursor, zone) in cases()
    ) {
        let zone = ZONES[zone];
        // the epochs, oldest first, one per generation (an edit or a suspension each)
        let mut raw_epochs = raw_epochs;
        raw_epochs.sort_by_key(|e| e.0);
        raw_epochs.dedup_by_key(|e| e.0);
        let epochs: Vec<Epoch> = raw_epochs
            .iter()
            .enumerate()
            .map(|(i, (from, seconds, minutes, suspend, deadline))| Epoch {
                generation: i as i64 + 1,
                from: ms(*from),
                spec: EpochSpec {
                    schedule: format!("{} {} * * * *", list(seconds), minutes.as_deref().map_or("*".into(), list)),
                    time_zone: zone.map(|tz| tz.name().to_string()),
                    suspend: *suspend,
                    suspend_note: None,
                    starting_deadline_seconds: *deadline,
                    target: "web".into(),
                    jitter_seconds: 0,
                    blackouts: Vec::new(),
                    dry_run: false,
                },
            })
            .collect();
        let downtime = windows(&raw_downtime);
        let outages = windows(&raw_outages);
        passes.sort_unstable();
        passes.dedup();
        let start = ms(cursor);
        let end = ms(*passes.last().unwrap());

        // what is expected: every slot of each epoch's schedule in (its start, the next's], after
        // the first cursor, up to the last pass; with its epoch
        let mut expected: BTreeMap<DateTime<Utc>, usize> = BTreeMap::new();
        for (i, (_, seconds, minutes, _, _)) in raw_epochs.iter().enumerate() {
            let lo = start.max(epochs[i].from);
            let hi = epochs.get(i + 1).map_or(end, |next| next.from.min(end));
            if lo < hi {
                for slot in slots(seconds, minutes, zone, lo, hi) {
                    prop_assert!(expected.insert(slot, i).is_none(), "{slot} in two epochs");
                }
            }
        }

        // the passes, each from the cursor the one before left, again at once while `more`
        let mut got: BTreeMap<DateTime<Utc>, Vec<(DateTime<Utc>, Got)>> = BTreeMap::new();
        let mut at = start;
        let mut records = 0i64;
        for now in passes.iter().map(|p| ms(*p)) {
            for round in 0.. {
                prop_assert!(round < 100, "no end to the backlog at {now}");
                let span = Span {
                    downtime: &downtime,
                    journal_outages: &outages,
                    ..Span::new(at, now)
                };
                let a = account(&epochs, &span);
                prop_assert_eq!(a.held_until, None, "no jitter, nothing held");
                prop_assert_eq!(a.slot_count(), a.records.iter().map(|r| r.count).sum::<i64>());
                let mut last = at;
                for r in &a.records {
                    prop_assert!(last < r.first && r.first <= r.last && r.last <= now, "out of order: {:?}", a.records);
                    last = r.last;
                    prop_assert!(expected.contains_key(&r.first) && expected.contains_key(&r.last),
                        "a record on no slot of the schedule: {r:?}");
                    let stands_for: Vec<DateTime<Utc>> =
                        expected.range(r.first..=r.last).map(|(s, _)| *s).collect();
                    prop_assert_eq!(stands_for.len() as i64, r.count, "{:?} counts other slots than it covers", r);
                    for slot in stands_for {
                        got.entry(slot).or_default().push((now, Got::Record(r.reason, r.window)));
                    }
                    records += r.count;
                }
                if let Some(due) = &a.due {
                    prop_assert!(last < due.slot && due.slot <= now, "due {due:?} after the records, by {now}");
                    prop_assert!(!a.more, "a slot due although the backlog is not through");
                    prop_assert!(expected.contains_key(&due.slot), "due {due:?} is no slot of the schedule");
                    got.entry(due.slot).or_default().push((now, Got::Due));
                    records += 1;
                    last = due.slot;
                }
                at = at.max(last);
                if !a.more {
                    break;
                }
                prop_assert!(last > span.after, "a pass with more to do that accounted nothing");
            }
        }

        // every slot exactly once; the totals are the slots
        for slot in expected.keys() {
            let n = got.get(slot).map_or(0, Vec::len);
            prop_assert_eq!(n, 1, "slot {} accounted {} times: {:?}", slot, n, got.get(slot));
        }
        prop_assert_eq!(got.len(), expected.len(), "accounted slots outside the schedule");
        prop_assert_eq!(records, expected.len() as i64, "the totals are not the slots");

        // each with the reason the rules give it
        for (slot, i) in &expected {
            let (now, how) = got[slot][0].clone();
            let spec = &epochs[*i].spec;
            let deadline = *slot + Duration::seconds(spec.starting_deadline_seconds);
            let in_time = now <= deadline;
            let down = downtime.iter().find(|w| w.0 < *slot && *slot <= w.1).copied();
            let down_at_deadline = downtime.iter().find(|w| w.0 < deadline && deadline <= w.1).copied();
            let outage = outages.iter().find(|w| w.0 < *slot && *slot <= w.1).copied();
            match how {
                Got::Due => {
                    prop_assert!(!spec.suspend, "{slot} due in a suspension");
                    prop_assert!(in_time, "{slot} due past its deadline at {now}");
                    let newer = expected.range(*slot..).nth(1).map(|(s, _)| *s);
                    prop_assert!(newer.is_none_or(|n| n > now), "{slot} due while {newer:?} had passed at {now}");
                }
                Got::Record(reason, window) => {
                    // docs/eru.md, "Where two reasons hold": the deadline decides
                    let want = if spec.suspend {
                        (Reason::Suspended, None)
                    } else if in_time {
                        match (down, outage) {
                            (Some(w), _) => (Reason::OperatorDown, Some(w)),
                            (None, Some(w)) => (Reason::JournalUnavailable, Some(w)),
                            (None, None) => (Reason::Superseded, None),
                        }
                    } else if let Some(w) = down_at_deadline {
                        (Reason::OperatorDown, Some(down.unwrap_or(w)))
                    } else if let Some(w) = outage {
                        (Reason::JournalUnavailable, Some(w))
                    } else if let Some(w) = down {
                        (Reason::OperatorDown, Some(w))
                    } else {
                        (Reason::PastDeadline, None)
                    };
                    prop_assert_eq!((reason, window), want, "slot {} accounted at {}", slot, now);
                }
            }
        }
    }
}
