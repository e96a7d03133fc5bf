//! Unit tests of the slot ledger: epochs, deadlines, downtime, lost journals and the budget.

use chrono::TimeZone;

use super::*;
use crate::journal::SlotResult;

fn t(h: u32, m: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, h, m, s).unwrap()
}

fn spec(schedule: &str) -> EpochSpec {
    EpochSpec {
        schedule: schedule.into(),
        time_zone: None,
        suspend: false,
        suspend_note: None,
        starting_deadline_seconds: 300,
        target: "web".into(),
        jitter_seconds: 0,
        blackouts: Vec::new(),
        dry_run: false,
    }
}

fn epoch(generation: i64, from: DateTime<Utc>, spec: EpochSpec) -> Epoch {
    Epoch {
        generation,
        from,
        spec,
    }
}

fn every_minute() -> Vec<Epoch> {
    vec![epoch(1, t(0, 0, 0), spec("* * * * *"))]
}

fn span(after: DateTime<Utc>, now: DateTime<Utc>, downtime: &[Window]) -> Span<'_> {
    Span {
        downtime,
        ..Span::new(after, now)
    }
}

fn reasons(a: &Accounting) -> Vec<(DateTime<Utc>, Reason)> {
    a.records.iter().map(|r| (r.first, r.reason)).collect()
}

#[test]
fn on_time_slot_is_due_and_nothing_missed() {
    let a = account(
        &every_minute(),
        &span(t(3, 0, 0), t(3, 1, 0) + Duration::milliseconds(100), &[]),
    );
    let due = a.due.unwrap();
    assert_eq!(due.slot, t(3, 1, 0));
    assert_eq!(due.deadline, t(3, 6, 0), "slot + startingDeadlineSeconds");
    assert_eq!(due.target, "web");
    assert!(a.records.is_empty() && !a.more);
}

#[test]
fn downtime_slots_are_operator_down_and_latest_catches_up() {
    // operator down from 03:00:30 to 03:10:05; slots 03:01..03:10; deadline 5 min
    let window = (t(3, 0, 30), t(3, 10, 5));
    let a = account(&every_minute(), &span(t(3, 0, 0), t(3, 10, 5), &[window]));
    assert_eq!(
        a.due.unwrap().slot,
        t(3, 10, 0),
        "the latest slot within the deadline runs once"
    );
    assert_eq!(a.records.len(), 9);
    assert!(
        a.records
            .iter()
            .all(|r| r.reason == Reason::OperatorDown && r.window == Some(window))
    );
    assert_eq!(a.records[0].first, t(3, 1, 0));
    assert_eq!(a.records[8].first, t(3, 9, 0));
}

#[test]
fn latest_past_deadline_is_missed_too() {
    let mut epochs = every_minute();
    epochs[0].spec.starting_deadline_seconds = 30;
    let a = account(&epochs, &span(t(3, 0, 0), t(3, 10, 40), &[]));
    assert_eq!(a.due, None, "03:10 is 40 s old with a 30 s deadline");
    assert_eq!(a.records.len(), 10);
    assert!(a.records.iter().all(|r| r.reason == Reason::PastDeadline));
}

#[test]
fn a_suspended_epoch_is_skipped_even_when_no_pass_ran_during_it() {
    // */5 s; suspended at 03:00:12, resumed at 03:00:41; one pass after it all, at 03:00:46
    let every_5s = spec("*/5 * * * * *");
    let suspended = EpochSpec {
        suspend: true,
        ..every_5s.clone()
    };
    let epochs = [
        epoch(1, t(2, 0, 0), every_5s.clone()),
        epoch(2, t(3, 0, 12), suspended),
        epoch(3, t(3, 0, 41), every_5s),
    ];
    let a = account(&epochs, &span(t(3, 0, 10), t(3, 0, 46), &[]));
    assert_eq!(
        reasons(&a),
        [
            (t(3, 0, 15), Reason::Suspended),
            (t(3, 0, 20), Reason::Suspended),
            (t(3, 0, 25), Reason::Suspended),
            (t(3, 0, 30), Reason::Suspended),
            (t(3, 0, 35), Reason::Suspended),
            (t(3, 0, 40), Reason::Suspended),
        ]
    );
    assert_eq!(
        a.due.unwrap().slot,
        t(3, 0, 45),
        "only a slot after the resume runs"
    );
}

#[test]
fn a_suspensions_note_is_kept_on_its_slots_and_only_on_them() {
    // suspended with a note at 03:00:12, the note changed at 03:00:26, resumed at 03:00:41
    let every_5s = spec("*/5 * * * * *");
    let noted = |note: &str| EpochSpec {
        suspend: true,
        suspend_note: Some(note.into()),
        ..every_5s.clone()
    };
    let epochs = [
        epoch(1, t(2, 0, 0), every_5s.clone()),
        epoch(2, t(3, 0, 12), noted("INC-42: the database migration")),
        epoch(3, t(3, 0, 26), noted("INC-42: extended")),
        epoch(4, t(3, 0, 41), every_5s),
    ];
    let a = account(&epochs, &span(t(3, 0, 6), t(3, 0, 51), &[]));
    let notes: Vec<(DateTime<Utc>, Reason, Option<&str>)> = a
        .records
        .iter()
        .map(|r| (r.first, r.reason, r.note.as_deref()))
        .collect();
    let first = Some("INC-42: the database migration");
    let second = Some("INC-42: extended");
    assert_eq!(
        notes,
        [
            (t(3, 0, 10), Reason::Superseded, None),
            (t(3, 0, 15), Reason::Suspended, first),
            (t(3, 0, 20), Reason::Suspended, first),
            (t(3, 0, 25), Reason::Suspended, first),
            (t(3, 0, 30), Reason::Suspended, second),
            (t(3, 0, 35), Reason::Suspended, second),
            (t(3, 0, 40), Reason::Suspended, second),
            (t(3, 0, 45), Reason::Superseded, None),
        ]
    );
    assert_eq!(a.due.unwrap().slot, t(3, 0, 50));
}

#[test]
fn the_newest_slot_of_a_suspended_epoch_never_runs() {
    let suspended = EpochSpec {
        suspend: true,
        ..spec("* * * * *")
    };
    let a = account(
        &[epoch(1, t(0, 0, 0), suspended)],
        &span(t(3, 0, 0), t(3, 3, 0), &[]),
    );
    assert_eq!(a.due, None);
    assert_eq!(a.slot_count(), 3);
    assert!(
        a.records
            .iter()
            .all(|r| r.reason == Reason::Suspended && r.reason.result() == SlotResult::Skipped)
    );
}

#[test]
fn a_new_schedule_has_no_slots_before_it_took_effect() {
    // created with a yearly schedule at 03:00:00, edited to */5 s at 03:00:25
    let epochs = [
        epoch(1, t(3, 0, 0), spec("0 0 1 1 *")),
        epoch(2, t(3, 0, 25), spec("*/5 * * * * *")),
    ];
    let a = account(
        &epochs,
        &span(t(3, 0, 0), t(3, 0, 25) + Duration::milliseconds(40), &[]),
    );
    assert!(a.records.is_empty(), "{:?}", a.records);
    assert_eq!(
        a.due, None,
        "03:00:25 is the edit itself: the old epoch, which has no slot there"
    );
    let a = account(
        &epochs,
        &span(t(3, 0, 0), t(3, 0, 30) + Duration::milliseconds(40), &[]),
    );
    assert!(a.records.is_empty());
    assert_eq!(a.due.unwrap().slot, t(3, 0, 30));
}

#[test]
fn an_outage_is_operator_down_whatever_the_spec_became() {
    // down 03:00:00..03:01:00; the schedule was edited at 03:00:30 while the operator was down
    let epochs = [
        epoch(1, t(2, 0, 0), spec("*/20 * * * * *")),
        epoch(2, t(3, 0, 30), spec("*/15 * * * * *")),
    ];
    let window = (t(3, 0, 0), t(3, 1, 0));
    let a = account(&epochs, &span(t(3, 0, 0), t(3, 1, 0), &[window]));
    assert_eq!(
        reasons(&a),
        [
            (t(3, 0, 20), Reason::OperatorDown),
            (t(3, 0, 45), Reason::OperatorDown),
        ],
        "03:00:20 of the old schedule, 03:00:45 of the new; 03:00:40 of the old never existed"
    );
    assert_eq!(a.due.unwrap().slot, t(3, 1, 0));
}

#[test]
fn each_epoch_keeps_its_own_deadline_and_target() {
    let mut old = spec("*/10 * * * * *");
    old.starting_deadline_seconds = 60;
    let mut new = spec("*/10 * * * * *");
    new.starting_deadline_seconds = 5;
    new.target = "api".into();
    let epochs = [epoch(1, t(2, 0, 0), old), epoch(2, t(3, 0, 15), new)];
    let a = account(&epochs, &span(t(3, 0, 0), t(3, 0, 24), &[]));
    assert_eq!(a.records.len(), 1);
    assert_eq!(a.records[0].target, "web");
    assert_eq!(
        a.records[0].reason,
        Reason::Superseded,
        "03:00:10 could still run (60 s deadline), but only the newest slot does"
    );
    let due = a.due.unwrap();
    assert_eq!((due.slot, due.target.as_str()), (t(3, 0, 20), "api"));
    assert_eq!(due.deadline, t(3, 0, 25));
    let late = account(&epochs, &span(t(3, 0, 0), t(3, 0, 26), &[]));
    assert_eq!(late.due, None, "03:00:20 is past the new epoch's 5 s deadline");
}

#[test]
fn an_invalid_epoch_has_no_slots() {
    let epochs = [
        epoch(1, t(2, 0, 0), spec("* * * * *")),
        epoch(2, t(3, 0, 30), spec("61 * * * *")),
        epoch(3, t(3, 5, 30), spec("* * * * *")),
    ];
    let a = account(&epochs, &span(t(3, 0, 0), t(3, 6, 0), &[]));
    assert!(a.records.is_empty(), "{:?}", a.records);
    assert_eq!(a.due.unwrap().slot, t(3, 6, 0));
}

#[test]
fn a_lost_journal_records_its_stretch_as_journal_lost() {
    let unrecorded = (t(3, 0, 0), t(3, 2, 30));
    let a = account(
        &every_minute(),
        &Span {
            unrecorded: Some(unrecorded),
            ..Span::new(t(3, 0, 0), t(3, 4, 0))
        },
    );
    assert_eq!(
        reasons(&a),
        [
            (t(3, 1, 0), Reason::JournalLost),
            (t(3, 2, 0), Reason::JournalLost),
            (t(3, 3, 0), Reason::Superseded),
        ]
    );
    assert_eq!(a.records[0].window, Some(unrecorded));
    assert_eq!(Reason::JournalLost.result(), SlotResult::Missed);
}

#[test]
fn slots_before_the_first_known_epoch_are_not_enumerated() {
    let epochs = [epoch(2, t(3, 2, 30), spec("* * * * *"))];
    let a = account(&epochs, &span(t(3, 0, 0), t(3, 3, 0), &[]));
    assert!(a.records.is_empty());
    assert_eq!(a.due.as_ref().unwrap().slot, t(3, 3, 0));
}

#[test]
fn a_month_of_seconds_is_bounded_per_pass() {
    let start = t(0, 0, 0);
    let epochs = [epoch(1, start, spec("* * * * * *"))];
    let now = start + Duration::days(30);
    let window = (start, now);
    let a = account(&epochs, &span(start, now, &[window]));
    assert!(a.more, "the backlog continues in the next pass");
    assert_eq!(a.due, None, "nothing runs until the backlog reaches now");
    assert_eq!(
        a.slot_count(),
        SLOT_BUDGET as i64,
        "every enumerated slot is accounted"
    );
    assert_eq!(a.records.len(), RECORD_CAP + 1, "the cap plus one summary");
    let summary = a.records.last().unwrap();
    assert_eq!(summary.count, (SLOT_BUDGET - RECORD_CAP) as i64);
    assert_eq!(summary.first, start + Duration::seconds(RECORD_CAP as i64 + 1));
    assert_eq!(summary.last, start + Duration::seconds(SLOT_BUDGET as i64));

    // passes resume from the last accounted slot until they reach now
    let mut after = summary.last;
    let mut passes = 1;
    let mut total = a.slot_count();
    loop {
        let next = account(&epochs, &span(after, now, &[window]));
        total += next.slot_count() + next.due.as_ref().map_or(0, |_| 1);
        passes += 1;
        if !next.more {
            assert_eq!(
                next.due.unwrap().slot,
                now,
                "the final pass reaches the latest slot"
            );
            break;
        }
        after = next.records.last().unwrap().last;
    }
    assert_eq!(total, 30 * 86_400, "every slot accounted exactly once");
    assert_eq!(passes, (30 * 86_400usize).div_ceil(SLOT_BUDGET));
}

#[test]
fn summaries_split_by_reason_and_window() {
    let epochs = [epoch(1, t(0, 0, 0), spec("* * * * * *"))];
    let w1 = (t(3, 0, 0), t(3, 1, 0));
    let w2 = (t(3, 2, 0), t(3, 3, 0));
    let now = t(3, 3, 0) + Duration::seconds(400);
    let a = account(&epochs, &span(t(3, 0, 0), now, &[w1, w2]));
    assert_eq!(a.due.as_ref().unwrap().slot, now);
    assert_eq!(a.slot_count() + 1, 180 + 400);
    let groups: Vec<_> = a.records[RECORD_CAP..]
        .iter()
        .map(|r| (r.reason, r.window))
        .collect();
    assert_eq!(
        groups,
        [
            (Reason::OperatorDown, Some(w1)),
            (Reason::PastDeadline, None),
            (Reason::OperatorDown, Some(w2)),
            (Reason::PastDeadline, None),
            (Reason::Superseded, None),
        ]
    );
}

#[test]
fn downtime_from_runs() {
    let runs = [
        (t(1, 0, 0), t(2, 0, 0)),
        (t(3, 0, 0), t(3, 30, 0)),
        (t(3, 30, 0), t(4, 0, 0)),
    ];
    assert_eq!(
        downtime(&runs, t(1, 0, 0)),
        (vec![(t(2, 0, 0), t(3, 0, 0))], None)
    );
    assert_eq!(
        downtime(&runs, t(0, 30, 0)),
        (vec![(t(2, 0, 0), t(3, 0, 0))], Some((t(0, 30, 0), t(1, 0, 0))))
    );
}

#[test]
fn an_epoch_takes_effect_when_the_api_recorded_the_write_within_bounds() {
    let now = t(3, 0, 30);
    assert_eq!(
        effective_from(Some(t(3, 0, 25)), Some(t(3, 0, 0)), now),
        t(3, 0, 25)
    );
    assert_eq!(
        effective_from(None, Some(t(3, 0, 0)), now),
        now,
        "unknown: when it was seen"
    );
    assert_eq!(
        effective_from(Some(t(2, 0, 0)), Some(t(3, 0, 0)), now),
        t(3, 0, 0),
        "never before the previous epoch"
    );
    assert_eq!(
        effective_from(Some(t(4, 0, 0)), None, now),
        now,
        "never after now"
    );
}

fn jittered(schedule: &str, jitter: i64) -> EpochSpec {
    EpochSpec {
        jitter_seconds: jitter,
        ..spec(schedule)
    }
}

#[test]
fn jitter_is_deterministic_within_its_bound_and_spread() {
    let mut buckets = [0usize; 10];
    for i in 0..10_000 {
        let uid = format!("4f1c2a9e-0000-4000-8000-{i:012}");
        let slot = t(3, 0, 0) + Duration::minutes(i % 7);
        let offset = jitter_offset(&uid, slot, 600);
        assert_eq!(
            offset,
            jitter_offset(&uid, slot, 600),
            "the same uid and slot, the same offset"
        );
        assert!(
            offset >= Duration::zero() && offset < Duration::seconds(600),
            "{offset}"
        );
        buckets[(offset.num_milliseconds() / 60_000) as usize] += 1;
    }
    // 10,000 offsets over ten one-minute buckets: each within ±15 % of 1,000
    assert!(buckets.iter().all(|b| (850..=1150).contains(b)), "{buckets:?}");
    // another slot of the same Eru gets its own offset; no jitter is no offset
    let uid = "4f1c2a9e-0000-4000-8000-000000000001";
    assert_ne!(
        jitter_offset(uid, t(3, 0, 0), 600),
        jitter_offset(uid, t(4, 0, 0), 600)
    );
    assert_eq!(jitter_offset(uid, t(3, 0, 0), 0), Duration::zero());
}

#[test]
fn a_jittered_slot_is_due_at_its_offset_and_its_deadline_counts_from_there() {
    let spec = jittered("0 3 * * *", 600);
    let uid = "u-jitter";
    let fire = spec.fire_at(uid, t(3, 0, 0));
    assert!(fire > t(3, 0, 0) && fire < t(3, 10, 0));
    let epochs = vec![epoch(1, t(0, 0, 0), spec)];
    let span_at = |now| Span {
        uid,
        ..Span::new(t(2, 0, 0), now)
    };
    // after the slot, before its offset: nothing due, nothing recorded, held until the instant
    let early = account(&epochs, &span_at(fire - Duration::milliseconds(1)));
    assert_eq!(
        (early.due, early.records.len(), early.held_until),
        (None, 0, Some(fire))
    );
    let on_time = account(&epochs, &span_at(fire));
    let due = on_time.due.unwrap();
    assert_eq!(
        (due.slot, due.deadline),
        (t(3, 0, 0), fire + Duration::seconds(300))
    );
    let late = account(&epochs, &span_at(fire + Duration::seconds(301)));
    assert_eq!(reasons(&late), vec![(t(3, 0, 0), Reason::PastDeadline)]);
}

#[test]
fn blackout_skips_exactly_its_slots_and_names_the_window() {
    // every minute; blackout every day 03:02 for 3 minutes: 03:02, 03:03, 03:04 are skipped
    let spec = EpochSpec {
        blackouts: vec![crate::eru::Blackout {
            name: Some("deploy-freeze".into()),
            schedule: Some("2 3 * * *".into()),
            duration_seconds: Some(180),
            start: None,
            end: None,
        }],
        ..spec("* * * * *")
    };
    let epochs = vec![epoch(1, t(0, 0, 0), spec)];
    let a = account(&epochs, &span(t(3, 0, 0), t(3, 6, 0), &[]));
    assert_eq!(a.due.unwrap().slot, t(3, 6, 0));
    let blackout: Vec<_> = a
        .records
        .iter()
        .filter(|r| r.reason == Reason::Blackout)
        .collect();
    assert_eq!(
        blackout.iter().map(|r| r.first).collect::<Vec<_>>(),
        vec![t(3, 2, 0), t(3, 3, 0), t(3, 4, 0)]
    );
    assert!(
        blackout
            .iter()
            .all(|r| r.window == Some((t(3, 2, 0), t(3, 5, 0))))
    );
    assert_eq!(
        blackout[0].note.as_deref(),
        Some(
            "blackout \"deploy-freeze\" (spec.blackouts[0]) from 2026-11-22T03:02:00Z to 2026-11-22T03:05:00Z"
        )
    );
    // the others were superseded by the next minute (within the deadline)
    assert!(
        a.records
            .iter()
            .filter(|r| r.reason != Reason::Blackout)
            .all(|r| r.reason == Reason::Superseded)
    );
    // a due slot inside the window is recorded, not due
    let inside = account(&epochs, &span(t(3, 2, 30), t(3, 3, 0), &[]));
    assert_eq!(
        (&inside.due, reasons(&inside)),
        (&None, vec![(t(3, 3, 0), Reason::Blackout)])
    );
}

#[test]
fn cluster_blackouts_apply_and_suspension_wins() {
    let freeze = crate::eru::Blackout {
        name: Some("black-friday".into()),
        schedule: None,
        duration_seconds: None,
        start: Some(t(3, 0, 30)),
        end: Some(t(3, 2, 30)),
    };
    let cluster = [freeze];
    let a = account(
        &every_minute(),
        &Span {
            cluster_blackouts: &cluster,
            ..Span::new(t(3, 0, 0), t(3, 3, 0))
        },
    );
    assert_eq!(a.due.as_ref().unwrap().slot, t(3, 3, 0));
    assert_eq!(
        reasons(&a),
        vec![(t(3, 1, 0), Reason::Blackout), (t(3, 2, 0), Reason::Blackout)]
    );
    assert!(
        a.records[0]
            .note
            .as_deref()
            .unwrap()
            .starts_with("cluster blackout \"black-friday\"")
    );
    let suspended = vec![epoch(
        1,
        t(0, 0, 0),
        EpochSpec {
            suspend: true,
            ..spec("* * * * *")
        },
    )];
    let s = account(
        &suspended,
        &Span {
            cluster_blackouts: &cluster,
            ..Span::new(t(3, 0, 0), t(3, 2, 0))
        },
    );
    assert!(s.records.iter().all(|r| r.reason == Reason::Suspended));
}

#[test]
fn a_slot_that_waited_for_a_place_past_its_deadline_is_fleet_capacity() {
    let waited = account(
        &every_minute(),
        &Span {
            queued: Some(t(3, 1, 0)),
            ..Span::new(t(3, 0, 0), t(3, 6, 30))
        },
    );
    // 03:01 waited and passed its deadline; 03:02..03:05 were superseded; 03:06 is due
    assert_eq!(waited.records[0].reason, Reason::FleetCapacity);
    assert!(waited.records[1..].iter().all(|r| r.reason == Reason::Superseded));
    assert_eq!(waited.due.unwrap().slot, t(3, 6, 0));
    // a slot that did not wait stays past_deadline
    let not = account(&every_minute(), &Span::new(t(3, 0, 0), t(3, 6, 30)));
    assert_eq!(not.records[0].reason, Reason::PastDeadline);
}

#[test]
fn dry_run_epochs_mark_the_due_slot() {
    let epochs = vec![epoch(
        1,
        t(0, 0, 0),
        EpochSpec {
            dry_run: true,
            ..spec("* * * * *")
        },
    )];
    assert!(
        account(&epochs, &span(t(3, 0, 0), t(3, 1, 0), &[]))
            .due
            .unwrap()
            .dry_run
    );
    assert!(
        !account(&every_minute(), &span(t(3, 0, 0), t(3, 1, 0), &[]))
            .due
            .unwrap()
            .dry_run
    );
}

#[test]
fn slots_in_a_journal_outage_are_journal_unavailable_not_past_deadline_or_superseded() {
    // */5 s; the journal took no writes from 03:00:01 (its last write that worked) to 03:00:13
    // (the first that worked again); the first pass after it runs at 03:00:16
    let outage = (t(3, 0, 1), t(3, 0, 13));
    let outages = [outage];
    for deadline in [2, 300] {
        let mut every_5s = spec("*/5 * * * * *");
        every_5s.starting_deadline_seconds = deadline;
        let epochs = [epoch(1, t(2, 0, 0), every_5s)];
        let a = account(
            &epochs,
            &Span {
                journal_outages: &outages,
                ..Span::new(t(3, 0, 0), t(3, 0, 16))
            },
        );
        assert_eq!(
            reasons(&a),
            [
                (t(3, 0, 5), Reason::JournalUnavailable),
                (t(3, 0, 10), Reason::JournalUnavailable),
            ],
            "deadline {deadline} s: was past_deadline (2 s) or superseded (300 s) before"
        );
        assert!(a.records.iter().all(|r| r.window == Some(outage)));
        assert_eq!(
            a.due.unwrap().slot,
            t(3, 0, 15),
            "the newest slot, after the outage, runs"
        );
    }
    assert_eq!(Reason::JournalUnavailable.result(), SlotResult::Missed);
    assert_eq!(Reason::JournalUnavailable.as_str(), "journal_unavailable");
}

#[test]
fn a_journal_outage_holds_its_slots_only_and_yields_to_downtime_suspension_and_blackouts() {
    let mut every_5s = spec("*/5 * * * * *");
    every_5s.starting_deadline_seconds = 2;
    let epochs = [epoch(1, t(2, 0, 0), every_5s.clone())];
    // (start, end]: a slot at its start is not in it, one at its end is; one after is late
    let outages = [(t(3, 0, 5), t(3, 0, 10))];
    let a = account(
        &epochs,
        &Span {
            journal_outages: &outages,
            ..Span::new(t(3, 0, 0), t(3, 0, 19))
        },
    );
    assert_eq!(
        reasons(&a),
        [
            (t(3, 0, 5), Reason::PastDeadline),
            (t(3, 0, 10), Reason::JournalUnavailable),
            (t(3, 0, 15), Reason::PastDeadline),
        ]
    );
    // no operator ran (a process that died in the outage loses its window in memory; a
    // journaled one may overlap the next downtime): operator_down first
    let down = [(t(3, 0, 7), t(3, 0, 12))];
    let a = account(
        &epochs,
        &Span {
            downtime: &down,
            journal_outages: &outages,
            ..Span::new(t(3, 0, 0), t(3, 0, 11))
        },
    );
    assert_eq!(reasons(&a), [(t(3, 0, 5), Reason::PastDeadline)]);
    let a = account(
        &epochs,
        &Span {
            downtime: &down,
            journal_outages: &outages,
            ..Span::new(t(3, 0, 0), t(3, 0, 19))
        },
    );
    assert_eq!(a.records[1].reason, Reason::OperatorDown);
    assert_eq!(a.records[1].window, Some(down[0]));
    // a lost journal's stretch is journal_lost first
    let a = account(
        &epochs,
        &Span {
            unrecorded: Some((t(3, 0, 0), t(3, 0, 12))),
            journal_outages: &outages,
            ..Span::new(t(3, 0, 0), t(3, 0, 19))
        },
    );
    assert_eq!(a.records[1].reason, Reason::JournalLost);
    // suspended and blacked-out slots would not have run anyway
    let suspended = [epoch(
        1,
        t(2, 0, 0),
        EpochSpec {
            suspend: true,
            ..every_5s.clone()
        },
    )];
    let a = account(
        &suspended,
        &Span {
            journal_outages: &outages,
            ..Span::new(t(3, 0, 5), t(3, 0, 11))
        },
    );
    assert_eq!(reasons(&a), [(t(3, 0, 10), Reason::Suspended)]);
    let freeze = [crate::eru::Blackout {
        name: Some("freeze".into()),
        schedule: None,
        duration_seconds: None,
        start: Some(t(3, 0, 0)),
        end: Some(t(3, 1, 0)),
    }];
    let a = account(
        &epochs,
        &Span {
            journal_outages: &outages,
            cluster_blackouts: &freeze,
            ..Span::new(t(3, 0, 5), t(3, 0, 11))
        },
    );
    assert_eq!(reasons(&a), [(t(3, 0, 10), Reason::Blackout)]);
}

#[test]
fn a_slot_that_waited_for_a_place_through_a_journal_outage_is_journal_unavailable() {
    // the queue is in memory and its place was not the cause: the journal took no writes
    let outages = [(t(3, 0, 30), t(3, 6, 10))];
    let a = account(
        &every_minute(),
        &Span {
            queued: Some(t(3, 1, 0)),
            journal_outages: &outages,
            ..Span::new(t(3, 0, 0), t(3, 6, 30))
        },
    );
    assert_eq!(a.records[0].reason, Reason::JournalUnavailable);
    assert!(a.records.iter().all(|r| r.reason == Reason::JournalUnavailable));
    assert_eq!(a.due.unwrap().slot, t(3, 6, 0));
}

#[test]
fn a_slot_a_gate_held_past_its_deadline_has_the_gates_reason_and_note() {
    let held = crate::eru::core::hold::Held::new(
        t(3, 1, 0),
        t(3, 6, 0),
        t(3, 1, 0),
        (Reason::AlertFiring, "alerts firing: HighErrorRate"),
        None,
    );
    let a = account(
        &every_minute(),
        &Span {
            held: Some(&held),
            // the queue cannot claim a slot a gate held (it never asked for a place)
            queued: Some(t(3, 1, 0)),
            ..Span::new(t(3, 0, 0), t(3, 6, 30))
        },
    );
    assert_eq!(a.records[0].reason, Reason::AlertFiring);
    let note = a.records[0].note.as_deref().unwrap();
    assert!(
        note.starts_with("alerts firing: HighErrorRate; held from "),
        "{note}"
    );
    assert!(a.records[1..].iter().all(|r| r.reason == Reason::Superseded));
    assert_eq!(a.due.unwrap().slot, t(3, 6, 0));
}

#[test]
fn a_held_slot_whose_deadline_passed_while_the_operator_was_down_is_operator_down() {
    // held at 03:01 by an alert; the operator down from 03:02 to 03:05: whether the alert
    // cleared in time nobody saw, so the record says the downtime, and the note the hold
    let held = crate::eru::core::hold::Held::new(
        t(3, 1, 0),
        t(3, 6, 0),
        t(3, 1, 30),
        (Reason::AlertFiring, "alerts firing: HighErrorRate"),
        None,
    );
    let downtime = [(t(3, 2, 0), t(3, 5, 30))];
    let a = account(
        &every_minute(),
        &Span {
            held: Some(&held),
            downtime: &downtime,
            ..Span::new(t(3, 0, 0), t(3, 6, 30))
        },
    );
    assert_eq!(a.records[0].reason, Reason::OperatorDown);
    assert_eq!(a.records[0].window, Some(downtime[0]));
    let note = a.records[0].note.as_deref().unwrap();
    assert!(note.contains("gates last checked at"), "{note}");
}

/// The neighbouring cases of a crash around a slot (docs/eru.md, "Which reason"): which record is
/// true for a slot at 03:01:00 with a 20 s starting deadline, every 30 s, by what the operator had
/// done with it before it died and when an operator ran again. `alive` is the crashed run's last
/// sign of life (the latest of its heartbeat and its journal commits), `back` the next run's start.
#[test]
fn the_record_of_a_slot_around_a_crash_says_what_happened() {
    let ms = Duration::milliseconds;
    let slot = t(3, 1, 0);
    let deadline = slot + Duration::seconds(20);
    let epochs = vec![epoch(1, t(0, 0, 0), {
        let mut s = spec("*/30 * * * * *");
        s.starting_deadline_seconds = 20;
        s
    })];
    // held by a blocking pod at the slot, before the crash at 03:01:00.400
    let held_before = crate::eru::core::hold::Held::new(
        slot,
        deadline,
        slot + ms(5),
        (Reason::BlockingPods, "pods running: backup-0"),
        None,
    );
    // the same hold asked again by the run that started at 03:01:03.8
    let held_again = crate::eru::core::hold::Held::new(
        slot,
        deadline,
        slot + ms(3_900),
        (Reason::BlockingPods, "pods running: backup-0"),
        Some(&held_before),
    );
    struct Case<'a> {
        what: &'a str,
        alive: DateTime<Utc>,
        back: DateTime<Utc>,
        held: Option<&'a crate::eru::core::hold::Held>,
        queued: bool,
        want: Reason,
        window: bool,
        note: Option<&'a str>,
    }
    let cases = [
        Case {
            what: "held, restarted before the deadline, the gates asked again and still closed",
            alive: t(3, 0, 52),
            back: slot + ms(3_800),
            held: Some(&held_again),
            queued: false,
            want: Reason::BlockingPods,
            window: false,
            note: Some("pods running: backup-0; held from 2026-11-22T03:01:00Z"),
        },
        Case {
            what: "held, and no operator ran again until after the deadline",
            alive: slot + ms(5),
            back: deadline + Duration::seconds(5),
            held: Some(&held_before),
            queued: false,
            want: Reason::OperatorDown,
            window: true,
            note: Some("pods running: backup-0; held from"),
        },
        Case {
            what: "not held, due after the last sign of life, no operator until after the deadline",
            alive: t(3, 0, 52),
            back: deadline + Duration::seconds(5),
            held: None,
            queued: false,
            want: Reason::OperatorDown,
            window: true,
            note: None,
        },
        Case {
            what: "not held, the run journaled after the slot (another Eru's restart), then died \
                   and no operator ran at the deadline",
            alive: slot + ms(63),
            back: deadline + Duration::seconds(5),
            held: None,
            queued: false,
            want: Reason::OperatorDown,
            window: true,
            note: Some("stopped before restarting it"),
        },
        Case {
            what: "queued for a fleet place, then the crash, no operator at the deadline",
            alive: slot + ms(63),
            back: deadline + Duration::seconds(5),
            held: None,
            queued: false, // the queue is this process's memory: gone with it
            want: Reason::OperatorDown,
            window: true,
            note: Some("stopped before restarting it"),
        },
        Case {
            what: "due while no operator ran; the next run, started before the deadline, queued \
                   it for a fleet place until its deadline",
            alive: t(3, 0, 52),
            back: slot + ms(2_000),
            held: None,
            queued: true,
            want: Reason::FleetCapacity,
            window: false,
            note: None,
        },
        Case {
            what: "queued for a fleet place until its deadline, no crash",
            alive: t(3, 5, 0),
            back: t(3, 5, 0),
            held: None,
            queued: true,
            want: Reason::FleetCapacity,
            window: false,
            note: None,
        },
        Case {
            what: "an operator ran throughout and did not restart it in time",
            alive: t(3, 5, 0),
            back: t(3, 5, 0),
            held: None,
            queued: false,
            want: Reason::PastDeadline,
            window: false,
            note: None,
        },
    ];
    for c in cases {
        let downtime: Vec<Window> = (c.alive < c.back)
            .then_some((c.alive, c.back))
            .into_iter()
            .collect();
        let a = account(
            &epochs,
            &Span {
                downtime: &downtime,
                held: c.held,
                queued: c.queued.then_some(slot),
                // the pass right after the deadline, before the next slot at 03:01:30
                ..Span::new(t(3, 0, 45), deadline + Duration::seconds(6))
            },
        );
        let record = a
            .records
            .iter()
            .find(|r| r.first == slot)
            .unwrap_or_else(|| panic!("{}: no record of the slot: {a:?}", c.what));
        assert_eq!(record.reason, c.want, "{}: {record:?}", c.what);
        assert_eq!(
            record.window,
            c.window.then(|| downtime[0]),
            "{}: the window is the downtime: {record:?}",
            c.what
        );
        match c.note {
            Some(note) => assert!(
                record.note.as_deref().is_some_and(|n| n.contains(note)),
                "{}: the note says {note:?}: {record:?}",
                c.what
            ),
            None => assert_eq!(record.note, None, "{}", c.what),
        }
    }
}

/// Boundaries of the window comparisons: a downtime window is `(last sign of life, next start]`,
/// so a deadline exactly at the next run's start was not seen by a running operator (operator
/// down), and one exactly at the last sign of life was (past deadline); the same for a slot.
#[test]
fn downtime_windows_are_open_at_their_start_and_closed_at_their_end() {
    let ms = Duration::milliseconds;
    let slot = t(3, 1, 0);
    let deadline = slot + Duration::seconds(20);
    let epochs = vec![epoch(1, t(0, 0, 0), {
        let mut s = spec("*/30 * * * * *");
        s.starting_deadline_seconds = 20;
        s
    })];
    let reason_with = |alive: DateTime<Utc>, back: DateTime<Utc>| {
        let downtime = [(alive, back)];
        let a = account(
            &epochs,
            &Span {
                downtime: &downtime,
                ..Span::new(t(3, 0, 45), deadline + Duration::seconds(6))
            },
        );
        a.records.iter().find(|r| r.first == slot).map(|r| r.reason)
    };
    // the deadline at the window's end (the next run started exactly then), and 1 ms around it
    assert_eq!(reason_with(slot + ms(10), deadline), Some(Reason::OperatorDown));
    assert_eq!(
        reason_with(slot + ms(10), deadline + ms(1)),
        Some(Reason::OperatorDown)
    );
    assert_eq!(
        reason_with(slot + ms(10), deadline - ms(1)),
        Some(Reason::PastDeadline)
    );
    // the deadline at the window's start (the run's last sign of life was then), and around it
    assert_eq!(
        reason_with(deadline, deadline + ms(500)),
        Some(Reason::PastDeadline)
    );
    assert_eq!(
        reason_with(deadline - ms(1), deadline + ms(500)),
        Some(Reason::OperatorDown)
    );
    // the slot itself at a window's start: alive then (and down at the deadline)
    assert_eq!(reason_with(slot, deadline + ms(500)), Some(Reason::OperatorDown));
    assert_eq!(
        reason_with(slot - ms(1), slot + ms(1)),
        Some(Reason::OperatorDown),
        "down at the slot, back 1 ms after it: no operator ran at the slot"
    );
    assert_eq!(
        reason_with(slot - ms(2), slot - ms(1)),
        Some(Reason::PastDeadline),
        "back 1 ms before the slot: an operator ran at the slot and its deadline"
    );
}

fn ms(n: i64) -> Duration {
    Duration::milliseconds(n)
}

/// The newest slot's deadline, exactly (mutation: `span.now <= deadline(fire, i)` → `<` in
/// `account`): a pass exactly at the deadline still restarts the slot, 1 ms before too; 1 ms
/// after, the slot is missed `past_deadline`.
#[test]
fn the_newest_slot_is_due_exactly_at_its_deadline_and_missed_1ms_after() {
    let mut epochs = every_minute();
    epochs[0].spec.starting_deadline_seconds = 30;
    // one slot after 03:00:30: 03:01, its deadline 03:01:30
    let at = |now| account(&epochs, &span(t(3, 0, 30), now, &[]));
    for now in [t(3, 1, 30) - ms(1), t(3, 1, 30)] {
        let a = at(now);
        assert_eq!(a.due.map(|d| d.slot), Some(t(3, 1, 0)), "at {now}");
        assert!(a.records.is_empty(), "at {now}");
    }
    let late = at(t(3, 1, 30) + ms(1));
    assert_eq!(late.due, None);
    assert_eq!(reasons(&late), vec![(t(3, 1, 0), Reason::PastDeadline)]);
}

/// An older slot's deadline, exactly (mutation: `span.now <= deadline` → `<` in `classify`): a
/// slot whose deadline is now could still have run, so the newer slot that runs supersedes it;
/// 1 ms later it is `past_deadline`.
#[test]
fn an_older_slot_at_its_deadline_is_superseded_and_1ms_after_past_deadline() {
    let mut every_10s = spec("*/10 * * * * *");
    every_10s.starting_deadline_seconds = 30;
    let epochs = vec![epoch(1, t(0, 0, 0), every_10s)];
    // slots 03:00:10, :20, :30 and :40 at 03:00:40; :40 runs; :10's deadline is 03:00:40
    let exactly = account(&epochs, &span(t(3, 0, 0), t(3, 0, 40), &[]));
    assert_eq!(exactly.due.as_ref().map(|d| d.slot), Some(t(3, 0, 40)));
    assert_eq!(
        reasons(&exactly),
        vec![
            (t(3, 0, 10), Reason::Superseded),
            (t(3, 0, 20), Reason::Superseded),
            (t(3, 0, 30), Reason::Superseded)
        ]
    );
    let after = account(&epochs, &span(t(3, 0, 0), t(3, 0, 40) + ms(1), &[]));
    assert_eq!(
        reasons(&after),
        vec![
            (t(3, 0, 10), Reason::PastDeadline),
            (t(3, 0, 20), Reason::Superseded),
            (t(3, 0, 30), Reason::Superseded)
        ]
    );
}

/// Overlapping runs (a term the Lease proves beside the run that covers it; mutation: dropping
/// `.max(heartbeat)` in `downtime`): a run inside another is no gap, and the gap after them
/// starts at the latest heartbeat, not the last run's.
#[test]
fn overlapping_runs_leave_a_gap_only_after_the_latest_heartbeat() {
    let runs = [
        (t(1, 0, 0), t(3, 0, 0)),
        (t(2, 0, 0), t(2, 30, 0)),
        (t(3, 30, 0), t(4, 0, 0)),
    ];
    assert_eq!(
        downtime(&runs, t(1, 0, 0)),
        (vec![(t(3, 0, 0), t(3, 30, 0))], None)
    );
}

/// Downtime over an open restart, between its decision and its deadline (what `conclude` asks;
/// mutation: `from < w.1` → `from < w.0` in `overlapping`): a window that began before the
/// decision and outlives it overlaps; one that ended exactly at the decision, or begins exactly
/// at the deadline, does not; 1 ms more of either does.
#[test]
fn downtime_overlaps_an_open_restart_it_outlives_not_one_it_only_touches() {
    let (decided, deadline) = (t(3, 0, 0), t(3, 5, 0));
    let over = |w: Window| overlapping(&[w], decided, deadline);
    assert_eq!(over((t(2, 0, 0), t(3, 1, 0))), Some((t(2, 0, 0), t(3, 1, 0))));
    assert_eq!(over((t(2, 0, 0), decided)), None);
    assert_eq!(
        over((t(2, 0, 0), decided + ms(1))),
        Some((t(2, 0, 0), decided + ms(1)))
    );
    assert_eq!(over((deadline, t(4, 0, 0))), None);
    assert_eq!(
        over((deadline - ms(1), t(4, 0, 0))),
        Some((deadline - ms(1), t(4, 0, 0)))
    );
}

/// An epoch's spec is journaled as JSON and read back for every later accounting (mutation:
/// `is_zero` always true would drop a jitter from the journal, so past slots' restart instants
/// would be read back wrong; always false would write `jitterSeconds: 0` into every row, which
/// older rows and versions do not have).
#[test]
fn an_epoch_spec_reads_back_as_journaled_and_leaves_its_defaults_out() {
    let jittered = EpochSpec {
        jitter_seconds: 600,
        suspend_note: Some("INC-7".into()),
        ..spec("0 3 * * *")
    };
    let json = serde_json::to_value(&jittered).unwrap();
    assert_eq!(json["jitterSeconds"], 600);
    assert_eq!(serde_json::from_value::<EpochSpec>(json).unwrap(), jittered);
    let plain = serde_json::to_value(spec("0 3 * * *")).unwrap();
    assert_eq!(
        plain,
        serde_json::json!({"schedule": "0 3 * * *", "suspend": false, "startingDeadlineSeconds": 300, "target": "web"}),
        "a zero jitter, no blackouts, no dry run and no note are left out"
    );
    assert_eq!(
        serde_json::from_value::<EpochSpec>(plain).unwrap(),
        spec("0 3 * * *")
    );
}
