//! Unit tests of the audit: the verdict over hand-written rows (each slot written out here, not
//! derived from the schedule code), the counters' cross-check, the operator's facts.

use chrono::TimeZone;
use serde_json::json;

use super::*;
use crate::journal::{EpochRow, JsonText, LedgerRow, OperatorRun, SlotRow, TallyRow};
use crate::vocab::{Outcome, Reason, SlotResult};

fn t(m: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, 3, m, s).unwrap()
}

fn ledger(cursor: DateTime<Utc>, fired: i64, missed: i64) -> LedgerRow {
    LedgerRow {
        uid: "u1".into(),
        namespace: "ns".into(),
        name: "web".into(),
        accounted_through: Some(Ts(cursor)),
        fired_slots: fired,
        missed_slots: missed,
        ..LedgerRow::default()
    }
}

fn epoch(generation: i64, from: DateTime<Utc>, schedule: &str, suspend: bool) -> EpochRow {
    EpochRow {
        uid: "u1".into(),
        generation,
        effective_from: Ts(from),
        observed_at: Ts(from),
        spec: JsonText(
            json!({"schedule": schedule, "suspend": suspend, "startingDeadlineSeconds": 300, "target": "web"}),
        ),
    }
}

fn record(
    id: i64,
    first: DateTime<Utc>,
    last: DateTime<Utc>,
    count: i64,
    result: &str,
    reason: &str,
) -> SlotRecordRow {
    let fired = result == "fired";
    SlotRecordRow {
        record: SlotRow {
            id,
            uid: "u1".into(),
            namespace: "ns".into(),
            name: "web".into(),
            target: "web".into(),
            slot: Ts(first),
            last_slot: Ts(last),
            slot_count: count,
            result: SlotResult::parse(result).expect("a slot result"),
            reason: Some(Reason::parse(reason).expect("a reason")),
            window_start: None,
            window_end: None,
            evaluated_at: Ts(first),
            note: None,
        },
        restart_decided_at: fired.then_some(Ts(first)),
        restart_patched_at: fired.then_some(Ts(first)),
        restart_finished_at: None,
        restart_outcome: fired.then_some(Outcome::Succeeded),
        restart_reason: None,
        restart_attempts: fired.then_some(0),
        restart_reverted_at: None,
    }
}

/// An operator run of `instance` from `from` to its last heartbeat `to`, not stopped.
fn operator_run(id: i64, instance: &str, from: DateTime<Utc>, to: DateTime<Utc>) -> OperatorRun {
    OperatorRun {
        id,
        started_at: Ts(from),
        heartbeat_at: Ts(to),
        stopped_at: None,
        version: "test".into(),
        instance: instance.into(),
    }
}

fn one(m: u32, result: &str, reason: &str) -> SlotRecordRow {
    record(i64::from(m), t(m, 0), t(m, 0), 1, result, reason)
}

/// Every minute from 03:00:30 on: slots 03:01 .. 03:09 in [03:00, 03:10); accounted through 03:08.
fn rows(records: Vec<SlotRecordRow>) -> AuditRows {
    AuditRows {
        ledgers: vec![ledger(t(8, 0), 5, 3)],
        epochs: vec![epoch(1, t(0, 30), "* * * * *", false)],
        records,
        ..AuditRows::default()
    }
}

fn accounted_rows() -> Vec<SlotRecordRow> {
    let mut records: Vec<_> = (1..=5).map(|m| one(m, "fired", "scheduled")).collect();
    records.push(record(6, t(6, 0), t(8, 0), 3, "skipped", "suspended"));
    records
}

/// [`accounted_rows`] with one finding of each kind: 03:03 without a record, 03:04 twice, a record
/// at 03:04:30, off the schedule.
fn unaccounted_rows() -> Vec<SlotRecordRow> {
    let mut records = accounted_rows();
    records.remove(2); // 03:03: no record
    records.push(record(99, t(4, 0), t(4, 0), 1, "skipped", "target_paused")); // 03:04 twice
    records.push(record(98, t(4, 30), t(4, 30), 1, "fired", "scheduled")); // off the schedule
    records
}

fn run(rows: AuditRows, totals: Option<Vec<(String, i64, i64)>>) -> Audit {
    audit(rows, totals, (t(0, 0), t(10, 0)), t(10, 0), &[], None)
}

#[test]
fn every_slot_once_is_accounted_and_counted_by_outcome_and_reason() {
    let a = run(rows(accounted_rows()), Some(vec![("u1".into(), 5, 3)]));
    let e = &a.erus[0];
    assert_eq!(e.slots, 9, "03:01 .. 03:09");
    assert_eq!((e.fired.total, e.fired.succeeded), (5, 5));
    assert_eq!(e.not_restarted.len(), 1);
    assert_eq!(
        (e.not_restarted[0].reason, e.not_restarted[0].slots),
        (Some(Reason::Suspended), 3)
    );
    assert_eq!(e.pending, 1, "03:09 is after the cursor");
    assert!(e.accounted && a.verdict.accounted, "{}", a.verdict.summary);
    assert!(e.counters.as_ref().unwrap().agree);
    assert_eq!(
        (a.verdict.slots, a.verdict.fired, a.verdict.not_restarted),
        (9, 5, 3)
    );
    assert!(
        a.verdict.summary.starts_with("Every one of the 9 slots"),
        "{}",
        a.verdict.summary
    );
}

#[test]
fn the_restart_in_flight_is_pending_not_unaccounted() {
    let mut r = rows(accounted_rows());
    r.ledgers[0].accounted_through = Some(Ts(t(9, 0)));
    r.open = vec![crate::journal::RestartRow {
        id: 1,
        uid: "u1".into(),
        namespace: "ns".into(),
        name: "web".into(),
        target: "web".into(),
        slot: Ts(t(9, 0)),
        decided_at: Ts(t(9, 0)),
        patched_at: None,
        deadline_at: None,
        attempts: 0,
        last_error: None,
        next_attempt_at: None,
        finished_at: None,
        outcome: Outcome::InProgress,
        reason: None,
        reverted_by: None,
        reverted_at: None,
        silence_id: None,
        silence_until: None,
        silence_expired_at: None,
        landed_generation: None,
    }];
    let a = run(r, None);
    assert_eq!((a.erus[0].pending, a.erus[0].unaccounted.count), (1, 0));
    assert!(a.verdict.accounted);
}

#[test]
fn a_missing_a_doubled_and_an_unscheduled_record_fail_the_verdict() {
    let mut missing = accounted_rows();
    missing.remove(2); // 03:03
    let a = run(rows(missing), None);
    assert_eq!(a.erus[0].unaccounted.count, 1);
    assert_eq!(a.erus[0].unaccounted.slots, [Ts(t(3, 0))]);
    // and says where they may have gone (mutation: the note's `> 0` → `<`)
    let note = a.erus[0].note.as_deref().unwrap_or_default();
    assert!(
        note.starts_with(
            "slots up to the cursor without a record in this journal: 1 (the first at 2026-11-22T03:03:00"
        ),
        "{note}"
    );
    assert!(!a.verdict.accounted);
    assert!(
        a.verdict.summary.starts_with("Not every slot"),
        "{}",
        a.verdict.summary
    );

    let mut doubled = accounted_rows();
    doubled.push(record(99, t(4, 0), t(4, 0), 1, "skipped", "target_paused"));
    let a = run(rows(doubled), None);
    assert_eq!(a.erus[0].duplicated.slots, [Ts(t(4, 0))]);
    assert!(!a.verdict.accounted);

    let mut outside = accounted_rows();
    outside.push(record(98, t(4, 30), t(4, 30), 1, "fired", "scheduled"));
    let a = run(rows(outside), None);
    assert_eq!(a.erus[0].outside_schedule.slots, [Ts(t(4, 30))]);
    assert!(!a.verdict.accounted);
}

/// `GET /audit` and the CLI count what the journal reads of each record ([`TallyRow`]s, by
/// Eru); the pages count the whole records they draw: the same audit either way, findings,
/// outcomes, reasons, windows and notes included.
#[test]
fn counted_records_audit_as_the_whole_ones() {
    let mut records = unaccounted_rows();
    records[0].restart_reverted_at = Some(Ts(t(1, 30)));
    records[1].restart_outcome = Some(Outcome::Failed);
    let suspended = &mut records[4].record;
    (suspended.window_start, suspended.window_end) = (Some(Ts(t(5, 50))), Some(Ts(t(8, 10))));
    suspended.note = Some("a deploy freeze".into());
    let totals = || Some(vec![("u1".to_string(), 5, 3)]);
    let whole = run(rows(records.clone()), totals());
    let counted = AuditRows {
        tallies: vec![("u1".into(), records.iter().map(TallyRow::from).collect())],
        ..rows(Vec::new())
    };
    let counted = run(counted, totals());
    assert_eq!(
        serde_json::to_value(&counted).unwrap(),
        serde_json::to_value(&whole).unwrap()
    );
    assert!(!whole.verdict.accounted && whole.erus[0].fired.reverted == 1);
    let suspended = (whole.erus[0].not_restarted.iter()).find(|n| n.reason == Some(Reason::Suspended));
    assert_eq!(suspended.unwrap().notes, ["a deploy freeze"]);
    assert_eq!(
        (whole.erus[0].records.len(), counted.erus[0].records.len()),
        (records.len(), 0),
        "only the pages keep the records whole"
    );
}

#[test]
fn the_table_and_markdown_name_the_slots_a_failing_verdict_refers_to() {
    let records = unaccounted_rows();
    let a = run(rows(records), None);
    assert!(!a.verdict.accounted);
    for (format, text) in [("table", a.table()), ("markdown", a.markdown())] {
        for line in [
            "ns/web: 1 without a record: 2026-11-22T03:03:00.000Z",
            "ns/web: 1 recorded twice: 2026-11-22T03:04:00.000Z",
            "ns/web: 1 records outside the schedule: 2026-11-22T03:04:30.000Z",
        ] {
            assert!(text.contains(line), "the {format} names it ({line}):\n{text}");
        }
    }
    let fine = run(rows(accounted_rows()), None);
    assert!(
        !fine.table().contains("not accounted exactly once"),
        "{}",
        fine.table()
    );
    assert!(!fine.markdown().contains("Not accounted exactly once"));
}

#[test]
fn counters_short_of_the_rows_fail_and_counters_past_them_are_reported() {
    let a = run(rows(accounted_rows()), Some(vec![("u1".into(), 6, 3)]));
    let c = a.erus[0].counters.as_ref().unwrap();
    assert!(!c.agree && c.note.as_deref().unwrap().contains("inconsistent"));
    assert!(!a.verdict.accounted, "rows the counters do not count");
    let a = run(rows(accounted_rows()), Some(vec![("u1".into(), 4, 3)]));
    let c = a.erus[0].counters.as_ref().unwrap();
    assert!(!c.agree && c.note.as_deref().unwrap().contains("retention"));
    assert!(a.verdict.accounted, "pruned rows do not unaccount a slot");
    assert_eq!(a.verdict.counter_mismatches, 1);
    assert!(
        a.verdict.summary.contains("counters differ"),
        "{}",
        a.verdict.summary
    );
}

#[test]
fn slots_follow_each_epoch_in_force() {
    // every minute until 03:04:30, then every other minute: 03:01 03:02 03:03 03:04 03:06 03:08
    let mut r = rows(vec![]);
    r.epochs.push(epoch(2, t(4, 30), "*/2 * * * *", false));
    let a = run(r, None);
    let e = &a.erus[0];
    assert_eq!(e.slots, 6);
    assert_eq!(e.unaccounted.count, 6, "none recorded, all up to the cursor");
    assert_eq!(e.epochs.len(), 2);
    assert_eq!(e.epochs[1].schedule, "*/2 * * * *");
}

#[test]
fn a_deleted_eru_produces_no_slot_after_its_deletion() {
    let mut r = rows(accounted_rows()[..3].to_vec());
    r.ledgers[0].accounted_through = Some(Ts(t(3, 0)));
    r.ledgers[0].deleted_at = Some(Ts(t(3, 20)));
    let a = run(r, None);
    assert_eq!(a.erus[0].slots, 3, "03:01 .. 03:03");
    assert!(a.verdict.accounted, "{}", a.verdict.summary);
}

#[test]
fn the_operator_facts_show_downtime_handovers_and_outages() {
    let mut r = rows(accounted_rows());
    r.runs = vec![
        operator_run(1, "a", t(0, 0), t(3, 10)),
        operator_run(2, "b", t(5, 40), t(10, 0)),
    ];
    r.outages = vec![crate::journal::OutageRow {
        id: 1,
        run_id: Some(2),
        started_at: Ts(t(7, 0)),
        ended_at: Ts(t(7, 30)),
    }];
    let a = run(r, None);
    let op = &a.operator;
    assert_eq!(
        op.downtime,
        [Window {
            start: Ts(t(3, 10)),
            end: Ts(t(5, 40))
        }]
    );
    assert_eq!(op.handovers.len(), 1);
    assert_eq!(
        (op.handovers[0].from.as_str(), op.handovers[0].to.as_str()),
        ("a", "b")
    );
    assert_eq!(
        op.journal_outages,
        [Window {
            start: Ts(t(7, 0)),
            end: Ts(t(7, 30))
        }]
    );
}

#[test]
fn the_window_before_the_journals_first_run_is_not_downtime() {
    let run_row = |id: i64, from: DateTime<Utc>, to: DateTime<Utc>, stopped: bool| OperatorRun {
        stopped_at: stopped.then_some(Ts(to)),
        ..operator_run(id, "a", from, to)
    };
    // a fresh install: the journal's first run started at 03:04:30, inside the window
    let mut r = rows(accounted_rows());
    r.runs = vec![run_row(1, t(4, 30), t(9, 50), false)];
    let a = run(r, None);
    assert_eq!(a.operator.downtime, [], "a brand-new install was not down");
    assert_eq!(
        a.operator.no_journal,
        Some(Window {
            start: Ts(t(0, 0)),
            end: Ts(t(4, 30))
        })
    );
    assert!(
        a.table().contains("no journal: before 2026-11-22T03:04:30.000Z"),
        "{}",
        a.table()
    );
    // a run before the window: the journal covers all of it; the gap after it is downtime
    let mut r = rows(accounted_rows());
    r.runs = vec![
        run_row(1, t(0, 0) - Duration::hours(1), t(2, 0), false),
        run_row(2, t(4, 30), t(9, 50), false),
    ];
    let a = run(r, None);
    assert_eq!(a.operator.no_journal, None);
    assert_eq!(
        a.operator.downtime,
        [Window {
            start: Ts(t(2, 0)),
            end: Ts(t(4, 30))
        }]
    );
    // no run at all: the journal knows nothing of the window, and says so
    let a = run(rows(accounted_rows()), None);
    assert_eq!(
        (a.operator.downtime.len(), a.operator.no_journal.is_some()),
        (0, true)
    );
    // stopped and not started again: down from its stop
    let mut r = rows(accounted_rows());
    r.runs = vec![run_row(1, t(1, 0), t(5, 0), true)];
    let a = run(r, None);
    assert_eq!(
        a.operator.downtime,
        [Window {
            start: Ts(t(5, 0)),
            end: Ts(t(10, 0))
        }]
    );
}

#[test]
fn a_window_must_be_ordered_and_at_most_a_month() {
    let p = |since: DateTime<Utc>, until: DateTime<Utc>| AuditParams {
        since: Some(Time(since)),
        until: Some(Time(until)),
        ..AuditParams::default()
    };
    assert!(p(t(5, 0), t(5, 0)).window(t(9, 0)).is_err());
    assert!(p(t(5, 0), t(4, 0)).window(t(9, 0)).is_err());
    assert!(p(t(0, 0) - Duration::days(32), t(0, 0)).window(t(9, 0)).is_err());
    // a month exactly is allowed (mutation: `>` → `>=`)
    let month = p(t(0, 0) - Duration::days(31), t(0, 0)).window(t(9, 0));
    assert_eq!(month.unwrap(), (t(0, 0) - Duration::days(31), t(0, 0)));
    // to the millisecond, rounded up: the same instants of a journal that keeps milliseconds
    let now = t(9, 0) + Duration::microseconds(400);
    let (since, until) = AuditParams::default().window(now).unwrap();
    let next_ms = t(9, 0) + Duration::milliseconds(1);
    assert_eq!((since, until), (next_ms - Duration::hours(24), next_ms));
    assert_eq!(p(t(1, 0), t(2, 0)).window(t(9, 0)).unwrap(), (t(1, 0), t(2, 0)));
    let default = AuditParams::default().window(t(9, 0)).unwrap();
    assert_eq!(default, (t(9, 0) - Duration::hours(24), t(9, 0)));
}

#[test]
fn a_forged_record_ending_before_it_starts_is_a_finding_not_a_panic() {
    // 03:05 .. 03:03: a last slot before the first (the journal's triggers refuse it since
    // migration 0008; an older or hand-edited journal may hold one)
    let mut forged = accounted_rows();
    forged.push(record(97, t(5, 0), t(3, 0), 1, "missed", "operator_down"));
    let a = run(rows(forged), Some(vec![("u1".into(), 5, 3)]));
    let e = &a.erus[0];
    assert_eq!(e.invalid.count, 1);
    assert_eq!(e.invalid.slots, [Ts(t(5, 0))]);
    assert_eq!(
        (e.unaccounted.count, e.duplicated.count, e.outside_schedule.count),
        (0, 0, 0),
        "the other rows still account every slot once"
    );
    assert!(!e.accounted && !a.verdict.accounted);
    assert_eq!(a.verdict.invalid, 1);
    assert!(
        a.verdict
            .summary
            .contains("1 records breaking the journal's invariant"),
        "{}",
        a.verdict.summary
    );
    assert!(
        e.note.as_deref().unwrap().contains("forged or corrupted"),
        "{:?}",
        e.note
    );
    assert!(a.table().contains("records breaking the journal's invariant"));
}

/// `n` Erus of `schedule`, each with an epoch from before the window and no record.
fn fleet(n: usize, schedule: &str) -> AuditRows {
    let mut rows = AuditRows::default();
    for i in 0..n {
        let uid = format!("u{i}");
        rows.ledgers.push(LedgerRow {
            uid: uid.clone(),
            name: format!("web-{i:03}"),
            ..ledger(t(0, 0), 0, 0)
        });
        rows.epochs.push(EpochRow {
            uid,
            ..epoch(1, t(0, 0) - Duration::days(1), schedule, true)
        });
    }
    rows
}

#[test]
fn an_audit_stops_at_its_work_budget_and_says_which_erus_it_left_out() {
    // every second for 12 hours: 43,200 slots an Eru; the budget holds 23 of them
    let (since, until) = (t(0, 0), t(0, 0) + Duration::hours(12));
    let a = audit(fleet(40, "* * * * * *"), None, (since, until), until, &[], None);
    let per_eru = 43_200;
    let whole = WORK_BUDGET / (per_eru + 1);
    let audited = a.erus.len();
    // the whole ones, then one the budget ran out in (enumerated as far as it went, and so labelled)
    assert_eq!(audited, whole + 1, "{}", a.verdict.summary);
    assert_eq!(a.verdict.not_audited, 40 - audited);
    assert!(
        a.erus[..whole]
            .iter()
            .all(|e| e.slots == per_eru as i64 && e.complete)
    );
    let last = &a.erus[whole];
    assert!(!last.complete && last.slots < per_eru as i64);
    assert!(
        last.note.as_deref().unwrap().contains("narrow the window"),
        "{:?}",
        last.note
    );
    assert!(!a.verdict.complete);
    assert!(
        a.verdict.summary.contains("work budget")
            && a.verdict.summary.contains(&format!("{} more Erus", 40 - audited)),
        "{}",
        a.verdict.summary
    );
    // a fleet within the budget: whole
    let a = audit(fleet(10, "* * * * * *"), None, (since, until), until, &[], None);
    assert_eq!(
        (a.erus.len(), a.verdict.not_audited, a.verdict.complete),
        (10, 0, true)
    );
}

#[test]
fn an_enumeration_cut_short_audits_up_to_its_last_slot_and_finds_nothing_after_it() {
    // a month of every second is 2.6 M slots: one Eru's enumeration stops at SLOT_CAP, and its
    // records after the last enumerated slot are not findings
    let (since, until) = (t(0, 0), t(0, 0) + Duration::days(30));
    let mut rows = fleet(1, "* * * * * *");
    let late = until - Duration::hours(1);
    let mut r = record(1, late, late, 1, "skipped", "suspended");
    r.record.uid = "u0".into();
    rows.records.push(r);
    let a = audit(rows, None, (since, until), until, &[], None);
    let e = &a.erus[0];
    assert_eq!(e.slots, SLOT_CAP as i64);
    assert!(!e.complete && !a.verdict.complete);
    assert_eq!(e.outside_schedule.count, 0, "{:?}", e.note);
    assert!(
        e.note.as_deref().unwrap().contains("narrow the window"),
        "{:?}",
        e.note
    );
}

#[test]
fn slots_after_now_are_not_enumerated_but_a_record_past_now_still_counts() {
    // the window runs to 03:10, the audit is at 03:05: 03:06 .. 03:09 have not come
    let a = audit(
        rows(accounted_rows()[..5].to_vec()),
        None,
        (t(0, 0), t(10, 0)),
        t(5, 30),
        &[],
        None,
    );
    let e = &a.erus[0];
    assert_eq!((e.slots, e.fired.total, e.pending), (5, 5, 0), "{:?}", e.note);
    // a leader whose clock ran ahead recorded 03:07 (03:06 is unaccounted up to the cursor)
    let mut records = accounted_rows()[..5].to_vec();
    records.push(one(7, "fired", "scheduled"));
    let e = &audit(rows(records), None, (t(0, 0), t(10, 0)), t(5, 30), &[], None).erus[0];
    assert_eq!((e.slots, e.fired.total), (7, 6));
    assert_eq!((e.outside_schedule.count, e.unaccounted.count), (0, 1));
    // a day of every-second slots a thousand years on: nothing to enumerate, nothing to find
    let (since, until) = (
        t(0, 0) + Duration::days(365_000),
        t(0, 0) + Duration::days(365_001),
    );
    let mut rows = fleet(1, "* * * * * *");
    rows.ledgers[0].accounted_through = None;
    let a = audit(rows, None, (since, until), t(10, 0), &[], None);
    assert_eq!(
        (a.verdict.slots, a.verdict.pending, a.verdict.complete),
        (0, 0, true)
    );
}

/// An Eru is listed when it lived in the window: its first epoch before the window's end, and not
/// deleted before the window's start (deleted at the start: listed, it lived that instant); one
/// that did not, and has no record there, is left out. (Mutations of that test: `&&` → `||`,
/// `<` → `<=`, `>=` → `<`.)
#[test]
fn an_eru_is_listed_when_it_lived_in_the_window() {
    let listed = |from: DateTime<Utc>, deleted: Option<DateTime<Utc>>| {
        let mut r = rows(vec![]);
        r.epochs[0].effective_from = Ts(from);
        r.ledgers[0].deleted_at = deleted.map(Ts);
        !run(r, None).erus.is_empty()
    };
    let (start, end) = (t(0, 0), t(10, 0));
    assert!(listed(t(0, 30), None));
    assert!(listed(end - Duration::seconds(1), None));
    assert!(!listed(end, None), "its first epoch at the window's end");
    let before = start - Duration::hours(1);
    assert!(listed(before, Some(start)), "deleted at the window's start");
    assert!(
        !listed(before, Some(start - Duration::seconds(1))),
        "deleted before it"
    );
}

/// The manual runs of the window, each on its own Eru, with or without a name asked for.
/// (Mutations in `read`: the run's Eru found by `uid ==` → `!=`, and the name's `==` → `!=`.)
#[tokio::test]
async fn each_manual_run_is_listed_on_its_own_eru() {
    use crate::journal::{Entry, NewSlot, ObjectKey, RunChange};
    let journal = Journal::open_in_memory().await.unwrap();
    let object = |name: &str, uid: &str| ObjectKey {
        kind: "Eru",
        namespace: "ns".into(),
        name: name.into(),
        uid: uid.into(),
    };
    let mut entry = Entry::default();
    for (i, (name, uid)) in [("api", "u2"), ("web", "u1")].into_iter().enumerate() {
        entry.slots.push(NewSlot {
            object: object(name, uid),
            target: name.into(),
            slot: t(1, 0),
            last_slot: t(1, 0),
            slot_count: 1,
            result: SlotResult::Skipped,
            reason: Reason::TargetPaused,
            window: None,
            note: None,
            evaluated_at: t(1, 0),
        });
        entry.runs.push(RunChange::Requested {
            object: object(name, uid),
            target: name.into(),
            token: format!("run-{name}"),
            requested_by: Some("kubectl-annotate".into()),
            requested_at: t(2 + i as u32, 0),
            deadline_at: t(7, 0),
            reason: None,
        });
    }
    journal.append(&entry).await.unwrap();
    let p = |name: Option<&str>| AuditParams {
        namespace: Some(Namespace("ns".into())),
        name: name.map(|n| ObjectName(n.into())),
        since: Some(Time(t(0, 0))),
        until: Some(Time(t(10, 0))),
        ..AuditParams::default()
    };
    let tokens = |a: &Audit| -> Vec<(String, Vec<String>)> {
        (a.erus.iter())
            .map(|e| {
                (
                    e.name.clone(),
                    e.manual_runs.iter().map(|r| r.token.clone()).collect(),
                )
            })
            .collect()
    };
    let all = read(&journal, &p(None), t(10, 0), &[], Reads::REPORT)
        .await
        .unwrap();
    let mut listed = tokens(&all);
    listed.sort();
    assert_eq!(
        listed,
        [
            ("api".to_string(), vec!["run-api".to_string()]),
            ("web".to_string(), vec!["run-web".to_string()])
        ]
    );
    let web = read(&journal, &p(Some("web")), t(10, 0), &[], Reads::REPORT)
        .await
        .unwrap();
    assert_eq!(tokens(&web), [("web".to_string(), vec!["run-web".to_string()])]);
}

/// Once an Eru does not fit what is left of the work budget, no Erus after it are audited, even
/// one small enough to fit (a page of Erus half audited would mislead more than a short one).
/// (Mutation: `not_audited > 0` → `<`.)
#[test]
fn no_eru_is_audited_after_the_first_that_did_not_fit() {
    // 23 every-second Erus take 23 × 43,201 of the budget (993,623); 6,377 are left
    let (since, until) = (t(0, 0), t(0, 0) + Duration::hours(12));
    let mut rows = fleet(25, "* * * * * *");
    rows.ledgers.truncate(23);
    rows.epochs.truncate(23);
    // the 24th has 7,000 records: it does not fit; the 25th, daily and without a record, would
    for (i, schedule) in [(23, "0 0 * * *"), (24, "0 0 * * *")] {
        let uid = format!("u{i}");
        rows.ledgers.push(LedgerRow {
            uid: uid.clone(),
            name: format!("web-{i:03}"),
            ..ledger(t(0, 0), 0, 0)
        });
        rows.epochs.push(EpochRow {
            uid,
            ..epoch(1, t(0, 0) - Duration::days(1), schedule, true)
        });
    }
    for id in 0..7_000 {
        let at = since + Duration::seconds(id);
        let mut r = record(id, at, at, 1, "skipped", "suspended");
        r.record.uid = "u23".into();
        rows.records.push(r);
    }
    let a = audit(rows, None, (since, until), until, &[], None);
    assert_eq!(a.erus.len(), 23, "{}", a.verdict.summary);
    assert!(a.erus.iter().all(|e| e.complete));
    assert_eq!(a.verdict.not_audited, 2);
    assert!(!a.verdict.complete);
}

/// The epochs listed are those in force in the window: an epoch covers `(from, next epoch's
/// from]`, so the one superseded exactly at the window's start is listed (it produced the slot at
/// that instant), and one from the window's end on is not. (Mutations in `epoch_items`: `<` →
/// `<=`, `i + 1` → `i * 1`, and the start's bound, which was `>` and left out the epoch that
/// produced the window's first slot.)
#[test]
fn the_epochs_listed_are_those_in_force_in_the_window() {
    let mut r = rows(vec![]);
    r.epochs = vec![
        epoch(1, t(0, 0) - Duration::hours(2), "* * * * *", false),
        epoch(2, t(0, 0) - Duration::hours(1), "* * * * *", false),
        epoch(3, t(0, 0), "*/2 * * * *", false),
        epoch(4, t(5, 0), "*/3 * * * *", false),
        epoch(5, t(10, 0) - Duration::milliseconds(1), "* * * * *", false),
    ];
    let a = audit(r, None, (t(0, 0), t(10, 0)), t(20, 0), &[], None);
    let e = &a.erus[0];
    let listed: Vec<i64> = e.epochs.iter().map(|e| e.generation).collect();
    assert_eq!(
        listed,
        [2, 3, 4],
        "5, from the window's last millisecond, covers none of it"
    );
    // 03:00 (generation 2's last), 03:02 03:04 (3), 03:06 03:09 (4)
    assert_eq!(e.slots, 5, "{:?}", e.note);
}

/// An enumeration cut short counts the record of its last enumerated slot (mutation: the horizon's
/// `>` → `>=`, which left it out).
#[test]
fn a_record_at_the_last_enumerated_slot_is_counted() {
    let (since, until) = (t(0, 0), t(0, 0) + Duration::days(30));
    let mut rows = fleet(1, "* * * * * *");
    let last = since + Duration::seconds(SLOT_CAP as i64 - 1);
    let mut r = record(1, last, last, 1, "skipped", "suspended");
    r.record.uid = "u0".into();
    rows.records.push(r);
    let a = audit(rows, None, (since, until), until, &[], None);
    let e = &a.erus[0];
    assert!(!e.complete);
    let counted: i64 = e.not_restarted.iter().map(|n| n.slots).sum();
    assert_eq!((counted, e.outside_schedule.count), (1, 0), "{:?}", e.note);
}

/// The restarts of the window by outcome, and the reverted among them (counted by their outcome
/// too). (Mutations in `tally`: an outcome's arm deleted, its `+=` → `-=` or `*=`.)
#[test]
fn restarts_are_counted_by_outcome_and_the_reverted_among_them() {
    let mut records = accounted_rows();
    records[1].restart_outcome = Some(Outcome::Failed);
    records[2].restart_outcome = Some(Outcome::Abandoned);
    records[3].restart_outcome = None; // its rollout still runs
    records[4].restart_reverted_at = Some(Ts(t(5, 30)));
    records.push(record(9, t(9, 0), t(9, 0), 1, "fired", "scheduled"));
    records[6].restart_outcome = Some(Outcome::Failed);
    let e = &run(rows(records), None).erus[0];
    let f = &e.fired;
    assert_eq!(
        (
            f.total,
            f.succeeded,
            f.failed,
            f.abandoned,
            f.in_progress,
            f.reverted
        ),
        (6, 2, 2, 1, 1, 1)
    );
    assert!(e.accounted, "{:?}", e.note);
}

/// A reason lists its distinct windows and notes, ten of each at most, in the order the records
/// came (its count of slots is complete). (Mutations in `tally`: the caps' `<` → `<=`, `==` or
/// `>`, the `&&` → `||`, the `!` deleted.)
#[test]
fn a_reason_lists_ten_distinct_windows_and_notes_at_most() {
    let mut r = rows(vec![]);
    r.epochs = vec![epoch(1, t(0, 30), "* * * * * *", false)];
    // 24 records, each window and note twice: 12 distinct
    r.records = (0..24u32)
        .map(|i| {
            let mut r = record(i64::from(i), t(1, i), t(1, i), 1, "skipped", "blackout");
            r.record.window_start = Some(Ts(t(2, i / 2)));
            r.record.window_end = Some(Ts(t(3, i / 2)));
            r.record.note = Some(format!("note {}", i / 2));
            r
        })
        .collect();
    let e = &run(r, None).erus[0];
    let blackout = &e.not_restarted[0];
    assert_eq!((blackout.reason, blackout.slots), (Some(Reason::Blackout), 24));
    let starts: Vec<Ts> = blackout.windows.iter().map(|w| w.start).collect();
    assert_eq!(starts, (0..10).map(|i| Ts(t(2, i))).collect::<Vec<_>>());
    let notes: Vec<String> = (0..10).map(|i| format!("note {i}")).collect();
    assert_eq!(blackout.notes, notes);
}

/// An audit of one target counts only the slots of the epochs that restarted it (an Eru retargeted
/// in the window: its slots before, or after). (Mutation: `t != spec.target` → `==`.)
#[test]
fn an_audit_of_a_target_counts_the_slots_of_its_epochs_only() {
    let mut r = rows(vec![]);
    let mut api = epoch(2, t(5, 0), "* * * * *", false);
    api.spec.0["target"] = json!("api");
    r.epochs.push(api);
    let slots = |target: Option<&str>| {
        let a = audit(r.clone(), None, (t(0, 0), t(10, 0)), t(10, 0), &[], target);
        a.erus[0].slots
    };
    assert_eq!(slots(None), 9);
    assert_eq!(slots(Some("web")), 5, "03:01 .. 03:05");
    assert_eq!(slots(Some("api")), 4, "03:06 .. 03:09");
    // and lists the epochs of that target only
    let a = audit(r.clone(), None, (t(0, 0), t(10, 0)), t(10, 0), &[], Some("api"));
    let listed: Vec<i64> = a.erus[0].epochs.iter().map(|e| e.generation).collect();
    assert_eq!(listed, [2]);
}

/// The budget: a reservation takes its units when they fit, and nothing when they do not; a unit
/// is taken while any is left. (Mutations in `Budget::reserve`: `-=` → `+=` or `/=`.)
#[test]
fn the_work_budget_takes_what_it_reserves() {
    let mut budget = Budget(10);
    assert!(budget.reserve(6));
    assert!(!budget.reserve(5), "4 are left");
    assert!(budget.reserve(3));
    assert!(budget.take());
    assert!(!budget.take() && !budget.reserve(1));
}

/// The slot memo enumerates a schedule once per window: further when a larger limit is asked
/// after a run cut short, never again for a smaller one. (Mutations in `SlotMemo::slots`: the
/// `all` flag's `<=` → `>`, and the re-enumeration's guard: `&&` → `||`, `!` deleted, `<=` →
/// `>`.)
#[test]
fn the_slot_memo_enumerates_further_only_when_asked_for_more() {
    let spec: EpochSpec = serde_json::from_value(
        json!({"schedule": "* * * * *", "suspend": false, "startingDeadlineSeconds": 300, "target": "web"}),
    )
    .unwrap();
    let (lo, hi) = (t(0, 0), t(0, 0) + Duration::hours(2)); // 120 slots
    let mut memo = SlotMemo::default();
    assert_eq!(
        memo.slots(&spec, "", lo, hi, 5).len(),
        6,
        "the limit and one more"
    );
    assert_eq!(
        memo.slots(&spec, "", lo, hi, 200).len(),
        120,
        "all, asked for more"
    );
    let mut memo = SlotMemo::default();
    assert_eq!(memo.slots(&spec, "", lo, hi, 100).len(), 101);
    assert_eq!(
        memo.slots(&spec, "", lo, hi, 5).len(),
        101,
        "a smaller limit is served from the longer run"
    );
    assert_eq!(memo.slots(&spec, "", lo, hi, 100).len(), 101);
}

/// Counters short of the rows on either side are inconsistent; counters past them, or equal, are
/// not (mutations in `short_counters`: `<` → `<=` on the restarts, `<` → `>` on the others).
#[test]
fn counters_are_short_when_either_count_is_below_its_rows() {
    let short = |fired, missed, rows_fired, rows_not_fired| {
        short_counters(&counters(fired, missed, rows_fired, rows_not_fired))
    };
    assert!(!short(5, 3, 5, 3));
    assert!(short(5, 3, 6, 3) && short(5, 3, 5, 4) && short(4, 2, 5, 3));
    assert!(!short(5, 4, 5, 3) && !short(6, 3, 5, 3) && !short(6, 4, 5, 3));
}

/// A finding lists its first 20 slots and counts them all (mutation in `add`: `<` → `<=`).
#[test]
fn a_finding_lists_twenty_slots_and_counts_all() {
    let mut finding = Finding::default();
    for m in 0..25 {
        add(&mut finding, Ts(t(m, 0)));
    }
    assert_eq!(finding.count, 25);
    assert_eq!(finding.slots, (0..20).map(|m| Ts(t(m, 0))).collect::<Vec<_>>());
}

/// The verdict's summary names the failing Erus among all, and the invalid records only when
/// there are some; an audit cut short by one Eru's enumeration (not by the budget) says to narrow
/// the window, not that the budget ran out. (Mutations in `verdict`: the failing filter's `!`
/// deleted, `invalid > 0` → `>=`, the budget arm's guard → `true` or `>=`.)
#[test]
fn the_verdict_names_the_failing_erus_and_why_an_audit_is_incomplete() {
    let mut r = rows(unaccounted_rows());
    for (uid, name) in [("u2", "api"), ("u3", "db")] {
        let mut other = ledger(t(8, 0), 0, 0);
        other.uid = uid.into();
        other.name = name.into();
        r.ledgers.push(other);
    }
    let a = run(r, None);
    assert!(
        a.verdict
            .summary
            .ends_with("1 records outside the schedule, in 1 of 3 Erus"),
        "{}",
        a.verdict.summary
    );
    let (since, until) = (t(0, 0), t(0, 0) + Duration::days(30));
    let a = audit(fleet(1, "* * * * * *"), None, (since, until), until, &[], None);
    assert_eq!(a.verdict.not_audited, 0);
    assert!(
        a.verdict
            .summary
            .ends_with("(incomplete: the window holds more than the audit reads; narrow it)"),
        "{}",
        a.verdict.summary
    );
}

/// The due slots health gates hold now go on their Erus when they fall in the window (its start
/// included, its end not), and the verdict counts them; with none held, the summary says nothing
/// of them. (Mutations in `with_holds`: the window's `<=` → `>`, `<` → `==`, `>` or `<=`, the
/// `&&` → `||`; the count's `> 0` → `==`, `<` or `>=`.)
#[test]
fn held_slots_in_the_window_go_on_their_erus_and_in_the_verdict() {
    let mut r = rows(accounted_rows());
    for uid in ["u2", "u3", "u4"] {
        let mut other = ledger(t(8, 0), 0, 0);
        other.uid = uid.into();
        other.name = format!("web-{uid}");
        r.ledgers.push(other);
    }
    let hold = |slot: DateTime<Utc>| Held {
        slot,
        since: slot,
        checked_at: slot,
        deadline: slot + Duration::minutes(5),
        reason: Reason::AlertFiring,
        note: "HighLatency is firing".into(),
    };
    let plain = run(r.clone(), None);
    let summary = plain.verdict.summary.clone();
    let none = with_holds(plain, &HashMap::new());
    assert_eq!(
        (none.verdict.held, none.verdict.summary.as_str()),
        (0, summary.as_str())
    );
    let holds = HashMap::from([
        ("u1".to_string(), hold(t(9, 0))),
        ("u2".to_string(), hold(t(0, 0))),
        ("u3".to_string(), hold(t(10, 0))),
        ("u4".to_string(), hold(t(0, 0) - Duration::minutes(1))),
    ]);
    let a = with_holds(run(r, None), &holds);
    let held: Vec<(&str, Option<Ts>)> = (a.erus.iter())
        .map(|e| (e.uid.as_str(), e.held.as_ref().map(|h| h.slot)))
        .collect();
    assert_eq!(
        held,
        [
            ("u1", Some(Ts(t(9, 0)))),
            ("u2", Some(Ts(t(0, 0)))),
            ("u3", None),
            ("u4", None)
        ]
    );
    assert_eq!(a.verdict.held, 2);
    assert!(
        a.verdict
            .summary
            .ends_with("; 2 due slots wait for health gates to open"),
        "{}",
        a.verdict.summary
    );
}

/// The operator's facts clip to the window and leave out what has no length in it: an outage that
/// ended at the window's start, a handover before it or at its end; a cluster-wide blackout shows
/// its windows in it, recurring or absolute. (Mutations in `operator_facts`: the clip's `<` →
/// `<=`, the handovers' `&&` → `||` and `<` → `<=`; in `blackout_item`, either arm deleted.)
#[test]
fn the_operator_facts_clip_to_the_window() {
    let mut r = rows(accounted_rows());
    r.runs = vec![
        operator_run(1, "a", t(0, 0) - Duration::hours(2), t(0, 0) - Duration::hours(1)),
        operator_run(2, "b", t(0, 0) - Duration::minutes(30), t(5, 0)),
        operator_run(3, "c", t(5, 0), t(10, 0)),
        operator_run(4, "d", t(10, 0), t(12, 0)),
    ];
    r.outages = vec![crate::journal::OutageRow {
        id: 1,
        run_id: Some(2),
        started_at: Ts(t(0, 0) - Duration::minutes(20)),
        ended_at: Ts(t(0, 0)),
    }];
    let blackouts = [
        Blackout {
            name: Some("nightly".into()),
            schedule: Some("*/4 * * * *".into()),
            duration_seconds: Some(60),
            start: None,
            end: None,
        },
        Blackout {
            name: Some("freeze".into()),
            schedule: None,
            duration_seconds: None,
            start: Some(t(8, 0)),
            end: Some(t(12, 0)),
        },
    ];
    let a = audit(r, None, (t(0, 0), t(10, 0)), t(10, 0), &blackouts, None);
    let op = &a.operator;
    assert!(op.journal_outages.is_empty(), "{:?}", op.journal_outages);
    let handovers: Vec<(&str, &str)> = (op.handovers.iter())
        .map(|h| (h.from.as_str(), h.to.as_str()))
        .collect();
    assert_eq!(handovers, [("b", "c")]);
    let window = |a: DateTime<Utc>, b: DateTime<Utc>| Window {
        start: Ts(a),
        end: Ts(b),
    };
    let nightly = &op.cluster_blackouts[0];
    assert_eq!(nightly.spec, "*/4 * * * * for 60 s");
    assert_eq!(
        nightly.windows,
        [
            window(t(0, 0), t(1, 0)),
            window(t(4, 0), t(5, 0)),
            window(t(8, 0), t(9, 0))
        ]
    );
    let freeze = &op.cluster_blackouts[1];
    assert_eq!(freeze.windows, [window(t(8, 0), t(10, 0))]);
    assert!(freeze.spec.starts_with("2026-11-22T03:08:00"), "{}", freeze.spec);
    // absolute windows that end at the window's start, or start at its end, show none
    // (mutations: `start < until && end > since`, each comparison and the `&&`)
    let absolute = |start: DateTime<Utc>, end: DateTime<Utc>| Blackout {
        name: None,
        schedule: None,
        duration_seconds: None,
        start: Some(start),
        end: Some(end),
    };
    let edges = [
        absolute(t(0, 0) - Duration::hours(1), t(0, 0)),
        absolute(t(10, 0), t(11, 0)),
        absolute(t(9, 0), t(9, 30)),
    ];
    let a = audit(rows(vec![]), None, (t(0, 0), t(10, 0)), t(10, 0), &edges, None);
    let shown: Vec<usize> = (a.operator.cluster_blackouts.iter())
        .map(|b| b.windows.len())
        .collect();
    assert_eq!(shown, [0, 0, 1]);
}

/// The text forms: the table lists the manual runs under their heading only when there are
/// some, as the Markdown does; the CSV has a header and a line per Eru. (Mutations in
/// `text.rs`: the two `!` deleted, `Audit::csv` and `Audit::manual_runs` replaced.)
#[test]
fn the_text_forms_list_the_manual_runs_and_the_csv_a_line_per_eru() {
    let plain = run(rows(accounted_rows()), None);
    assert!(!plain.table().contains("manual runs"), "{}", plain.table());
    assert!(!plain.markdown().contains("Manual runs"), "{}", plain.markdown());
    let mut a = run(rows(accounted_rows()), None);
    a.erus[0].manual_runs.push(ManualRunItem {
        token: "deploy-42".into(),
        requested_by: Some("kubectl-annotate".into()),
        requested_at: Ts(t(2, 0)),
        outcome: crate::vocab::RunOutcome::Succeeded,
        patched_at: Some(Ts(t(2, 0))),
        finished_at: Some(Ts(t(3, 0))),
        reason: Some("the rollout finished".into()),
    });
    let line =
        "ns/web 2026-11-22T03:02:00.000Z \"deploy-42\" by kubectl-annotate: succeeded: the rollout finished";
    let table = a.table();
    assert!(
        table.contains(&format!(
            "manual runs (mtsre.meitu.com/run-now; no slot's):\n  {line}\n"
        )),
        "{table}"
    );
    let markdown = a.markdown();
    assert!(
        markdown.contains("Manual runs (`mtsre.meitu.com/run-now`; no slot's):"),
        "{markdown}"
    );
    assert!(
        markdown.contains("- ns/web 2026-11-22T03:02:00.000Z"),
        "{markdown}"
    );
    let csv = a.csv();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 2, "{csv}");
    assert!(lines[0].starts_with("ERU,SLOTS,RESTARTED,"), "{csv}");
    assert!(lines[1].starts_with("ns/web,9,"), "{csv}");
}

/// A finding's line lists the slots the JSON lists and says how many more there are, only when
/// there are more. (Mutations in `Audit::findings`: the `-` → `+` or `/`, the `> 0` → `==` or
/// `<`.)
#[test]
fn a_findings_line_says_how_many_more_slots_it_does_not_list() {
    let mut r = rows(vec![]);
    r.ledgers[0].accounted_through = Some(Ts(t(29, 0)));
    let a = audit(r, None, (t(0, 0), t(30, 0)), t(30, 0), &[], None);
    let table = a.table();
    let line = (table.lines())
        .find(|l| l.contains("without a record"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        line.starts_with("  ns/web: 29 without a record: 2026-11-22T03:01:00.000Z, ")
            && line.ends_with("2026-11-22T03:20:00.000Z and 9 more"),
        "{line}"
    );
    let mut r = rows(vec![]);
    r.ledgers[0].accounted_through = Some(Ts(t(3, 0)));
    let table = audit(r, None, (t(0, 0), t(4, 0)), t(4, 0), &[], None).table();
    let line = (table.lines())
        .find(|l| l.contains("without a record"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(line.ends_with("03:03:00.000Z"), "{line}");
}

/// An Eru's row gives each count, its restarts' outcomes that happened (none at zero) and its
/// reasons; the findings name counters that disagree with the rows, not those that agree; the
/// facts list the operator's runs. (Mutations in `text.rs`: `row` replaced, its outcome filter
/// `> 0` → `==` or `<`; the counters' filter `!` deleted; `listed` replaced.)
#[test]
fn the_text_rows_give_each_count_and_the_findings_only_what_disagrees() {
    let mut records = accounted_rows();
    records[1].restart_outcome = Some(Outcome::Failed);
    let a = run(rows(records), None);
    assert_eq!(
        a.csv().lines().nth(1),
        Some("ns/web,9,\"5 (4 succeeded, 1 failed)\",3 suspended,1,0,0,0,yes")
    );
    let mut missing = accounted_rows();
    missing.remove(2);
    let agreeing = run(rows(missing.clone()), Some(vec![("u1".into(), 5, 3)])).table();
    assert!(!agreeing.contains("running counters"), "{agreeing}");
    let mut r = rows(missing);
    r.runs = vec![operator_run(1, "pod-a", t(0, 0), t(10, 0))];
    let short = run(r, Some(vec![("u1".into(), 6, 3)])).table();
    assert!(
        short.contains("  ns/web: running counters 5 fired / 3 missed, rows 6 / 3: the counters count fewer"),
        "{short}"
    );
    assert!(
        short.contains("operator runs: pod-a (2026-11-22T03:00:00.000Z .. 2026-11-22T03:10:00.000Z)"),
        "{short}"
    );
}

/// The window's end is exclusive also for an epoch followed by one that starts after it
/// (mutation in `expected_slots`: `n.min(end - tick)` → `n.min(end + tick)`, which counted the
/// slot at the window's end).
#[test]
fn the_slot_at_the_windows_end_is_not_counted_before_a_later_epoch() {
    let mut r = rows(vec![]);
    r.epochs.push(epoch(2, t(15, 0), "*/2 * * * *", false));
    let a = audit(r, None, (t(0, 0), t(10, 0)), t(20, 0), &[], None);
    assert_eq!(a.erus[0].slots, 9, "03:01 .. 03:09");
}

/// An Eru's enumeration asks each epoch for what its cap leaves, not more: the second epoch of an
/// Eru whose first gave 60,001 slots is enumerated to the 39,999 left (and one), not to the cap.
/// (Mutation in `expected_slots`: `SLOT_CAP - slots.len()` → `+`, the same slots for up to ten
/// times the work.)
#[test]
fn an_enumeration_asks_each_epoch_for_what_the_cap_leaves() {
    let spec = |schedule: &str| -> EpochSpec {
        serde_json::from_value(
            json!({"schedule": schedule, "suspend": false, "startingDeadlineSeconds": 300, "target": "web"}),
        )
        .unwrap()
    };
    let (since, until) = (t(0, 0), t(0, 0) + Duration::days(30));
    let switch = since + Duration::seconds(60_000);
    let epochs = vec![
        (1, since - Duration::days(1), spec("* * * * * *")),
        (2, switch, spec("*/1 * * * * *")),
    ];
    let window = Span {
        since,
        until,
        now: until,
        target: None,
    };
    let mut work = Work {
        memo: SlotMemo::default(),
        budget: Budget(WORK_BUDGET),
    };
    let (slots, complete) = expected_slots(&epochs, "", &window, until, &mut work);
    assert_eq!((slots.len(), complete), (SLOT_CAP, false));
    let mut enumerated: Vec<usize> = work.memo.0.values().map(|(s, _)| s.len()).collect();
    enumerated.sort_unstable();
    assert_eq!(enumerated, [40_000, 60_001]);
}
