//! Unit tests of the audit: the verdict over hand-written rows (each slot written out here, not
//! derived from the schedule code), the counters' cross-check, the operator's facts.

use chrono::TimeZone;
use serde_json::json;

use super::*;
use crate::journal::{EpochRow, JsonText, LedgerRow, OperatorRun, SlotRow};

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
            result: result.into(),
            reason: Some(reason.into()),
            window_start: None,
            window_end: None,
            evaluated_at: Ts(first),
            note: None,
        },
        restart_decided_at: fired.then_some(Ts(first)),
        restart_patched_at: fired.then_some(Ts(first)),
        restart_finished_at: None,
        restart_outcome: fired.then(|| "succeeded".into()),
        restart_reason: None,
        restart_attempts: fired.then_some(0),
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
        (e.not_restarted[0].reason.as_str(), e.not_restarted[0].slots),
        ("suspended", 3)
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
        outcome: "in_progress".into(),
        reason: None,
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
    let run_row = |id: i64, instance: &str, from: DateTime<Utc>, to: DateTime<Utc>| OperatorRun {
        id,
        started_at: Ts(from),
        heartbeat_at: Ts(to),
        stopped_at: None,
        version: "test".into(),
        instance: instance.into(),
    };
    let mut r = rows(accounted_rows());
    r.runs = vec![
        run_row(1, "a", t(0, 0), t(3, 10)),
        run_row(2, "b", t(5, 40), t(10, 0)),
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
fn a_window_must_be_ordered_and_at_most_a_month() {
    let p = |since: DateTime<Utc>, until: DateTime<Utc>| AuditParams {
        since: Some(Time(since)),
        until: Some(Time(until)),
        ..AuditParams::default()
    };
    assert!(p(t(5, 0), t(5, 0)).window(t(9, 0)).is_err());
    assert!(p(t(5, 0), t(4, 0)).window(t(9, 0)).is_err());
    assert!(p(t(0, 0) - Duration::days(32), t(0, 0)).window(t(9, 0)).is_err());
    assert_eq!(p(t(1, 0), t(2, 0)).window(t(9, 0)).unwrap(), (t(1, 0), t(2, 0)));
    let default = AuditParams::default().window(t(9, 0)).unwrap();
    assert_eq!(default, (t(9, 0) - Duration::hours(24), t(9, 0)));
}
