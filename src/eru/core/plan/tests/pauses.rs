//! Pause on failure in the plan: the row trips it in the pass the last restart fails, the slot
//! due then is skipped with the pause's note, only the pause's own `since` resumes it, a spec
//! edit does not, and a journal that lost it keeps it from the status.

use super::*;
use crate::eru::core::pause::{Ended, Pause, Resume};

/// An hourly-at-:05 Eru with `pauseAfter` 2 whose restart of 03:05 rolls out past its timeout
/// at 03:10 (the pods never become ready), one earlier restart failed.
fn failing_at_10() -> Observed {
    let eru = eru("5,10 3 * * *", 1);
    let mut o = observed(&eru, t(10, 0), Some(t(5, 0)));
    o.cluster.pause_after = Some(2);
    rolling_out_at_5(&mut o);
    let view = o.cluster.targets.get_mut("web").unwrap();
    (view.settled, view.rollout_timeout_seconds) = (false, 60);
    let mut restart = open((t(5, 0), "web", t(10, 0)), t(5, 0));
    restart.patched_at = Some(t(5, 0));
    o.journal.open_restart = Some(restart);
    o.journal.pauses.ended = vec![Ended {
        slot: t(0, 0),
        outcome: Outcome::Failed,
        reason: Some("progress deadline exceeded".into()),
    }];
    o
}

fn paused(records: &[EruRecord]) -> Option<&Pause> {
    records.iter().find_map(|r| match r {
        EruRecord::Paused(p) => Some(p),
        _ => None,
    })
}

#[test]
fn the_restart_that_completes_the_row_pauses_the_eru_and_the_slot_due_then_is_skipped() {
    let o = failing_at_10();
    let pass = decide(&eru("5,10 3 * * *", 1), &o);
    assert_eq!(pass.state, State::PausedOnFailure {});
    let records = &pass.decision.records;
    assert!(
        records.iter().any(|r| matches!(
            r,
            EruRecord::Finished {
                outcome: Outcome::Failed,
                ..
            }
        )),
        "{records:?}"
    );
    let pause = paused(records).expect("tripped");
    assert_eq!(pause.since, t(10, 0));
    assert!(
        pause.why.contains("slot 2026-11-22T03:05:00Z failed"),
        "{}",
        pause.why
    );
    assert!(
        pause.why.contains("slot 2026-11-22T03:00:00Z failed"),
        "{}",
        pause.why
    );
    // 03:10 is due in this very pass: skipped for the pause, with its note; nothing is decided
    assert_eq!(records_of(&pass), [(t(10, 0), Reason::PausedOnFailure)]);
    let note = skipped_note(&pass).unwrap();
    assert!(
        note.starts_with("paused on failure since 2026-11-22T03:10:00Z"),
        "{note}"
    );
    assert!(
        !pass
            .decision
            .records
            .iter()
            .any(|r| matches!(r, EruRecord::Decided { .. }))
    );
    // one failure short of the row: no pause; the slot meets the target mid-rollout, as any slot
    let mut short = failing_at_10();
    short.journal.pauses.ended[0].outcome = Outcome::Succeeded;
    let pass = decide(&eru("5,10 3 * * *", 1), &short);
    assert!(paused(&pass.decision.records).is_none());
    assert_eq!(pass.state, State::Waiting {});
    assert_eq!(records_of(&pass), [(t(10, 0), Reason::TargetUnhealthy)]);
}

/// A paused Eru as the next pass sees it: the journal's open pause and the status's phase.
fn paused_at(now: DateTime<Utc>) -> Observed {
    let eru = eru("*/5 * * * *", 1);
    let mut o = observed(&eru, now, Some(t(10, 0)));
    o.cluster.pause_after = Some(2);
    let pause = Pause {
        since: t(10, 0),
        why: "2 restarts in a row ended failed".into(),
    };
    o.cluster.shown = Some(shown(&EruStatus {
        phase: Some("PausedOnFailure".into()),
        accounted_through: Some(t(10, 0)),
        paused_on_failure: Some(crate::eru::PausedOnFailure {
            since: pause.since,
            why: pause.why.clone(),
        }),
        ..EruStatus::default()
    }));
    o.journal.pauses.latest = Some((pause, None));
    o
}

fn records_of(pass: &Pass) -> Vec<(DateTime<Utc>, Reason)> {
    records(pass)
}

fn skipped_note(pass: &Pass) -> Option<String> {
    pass.decision.records.iter().find_map(|r| match r {
        EruRecord::Slots(slots) => slots.iter().find_map(|s| s.note.clone()),
        _ => None,
    })
}

#[test]
fn a_pause_holds_through_spec_edits_and_only_its_own_since_resumes_it() {
    let e = eru("*/5 * * * *", 1);
    let o = paused_at(t(15, 0));
    let pass = decide(&e, &o);
    assert_eq!(pass.state, State::PausedOnFailure {});
    assert_eq!(records_of(&pass), [(t(15, 0), Reason::PausedOnFailure)]);
    assert!(paused(&pass.decision.records).is_none(), "journaled already");
    // a spec edit (a new generation, suspended, the policy removed): still paused
    let mut edited = o.clone();
    edited.cluster.generation = 2;
    edited.cluster.spec.suspend = true;
    edited.cluster.pause_after = None;
    let pass = decide(&e, &edited);
    assert_eq!(pass.state, State::PausedOnFailure {});
    assert_eq!(records_of(&pass), [(t(15, 0), Reason::PausedOnFailure)]);
    // an annotation naming another pause resumes nothing
    let mut stale = o.clone();
    stale.cluster.resume = Some(Resume {
        value: "2026-11-22T02:10:00Z".into(),
        by: Some("kubectl-eru".into()),
    });
    assert_eq!(decide(&e, &stale).state, State::PausedOnFailure {});
    // its own since: resumed, journaled with who, and the slot due now restarts
    let mut resumed = o;
    resumed.cluster.resume = Some(Resume {
        value: "2026-11-22T03:10:00Z".into(),
        by: Some("kubectl-eru".into()),
    });
    let pass = decide(&e, &resumed);
    assert!(
        pass.decision.records.iter().any(|r| matches!(
            r,
            EruRecord::Resumed { since, by: Some(by), .. } if *since == t(10, 0) && by == "kubectl-eru"
        )),
        "{:?}",
        pass.decision.records
    );
    assert!(pass.state.in_flight(), "{:?}", pass.state);
    assert!(records_of(&pass).is_empty(), "{:?}", records_of(&pass));
}

#[test]
fn a_journal_that_lost_the_pause_keeps_it_from_the_status_and_a_manual_run_is_refused() {
    let e = eru("*/5 * * * *", 1);
    let mut o = paused_at(t(15, 0));
    o.journal.pauses.latest = None;
    let pass = decide(&e, &o);
    assert_eq!(pass.state, State::PausedOnFailure {});
    assert_eq!(
        paused(&pass.decision.records).map(|p| p.since),
        Some(t(10, 0)),
        "journaled again"
    );
    assert_eq!(records_of(&pass), [(t(15, 0), Reason::PausedOnFailure)]);
    // a manual run asked while paused: refused, saying why
    let mut asked = paused_at(t(16, 0));
    asked.cluster.run = Some(Ok(crate::eru::core::run::Asked {
        token: "fix-1".into(),
        requested_by: None,
        set_at: None,
    }));
    let pass = decide(&e, &asked);
    let refused = pass.decision.records.iter().find_map(|r| match r {
        EruRecord::Run(crate::eru::core::run::RunRecord::Ended {
            outcome: crate::vocab::RunOutcome::Refused,
            reason,
            ..
        }) => Some(reason.clone()),
        _ => None,
    });
    let refused = refused.flatten().unwrap_or_default();
    assert!(
        refused.starts_with("paused_on_failure: the Eru is paused on failure"),
        "{refused}"
    );
    // the journal says it was resumed and the status lags: not paused
    let mut resumed = paused_at(t(15, 0));
    resumed.journal.pauses.latest.as_mut().unwrap().1 = Some(t(12, 0));
    let pass = decide(&e, &resumed);
    assert!(pass.state.in_flight(), "{:?}", pass.state);
    assert!(paused(&pass.decision.records).is_none());
}

#[test]
fn this_passs_ends_count_newest_first_and_a_dry_run_is_no_restart() {
    let finished = |m: u32, outcome: Outcome| EruRecord::Finished {
        slot: t(m, 0),
        patched_at: t(m, 1),
        outcome,
        finished_at: None,
        reason: None,
    };
    let records = [
        finished(5, Outcome::Failed),
        EruRecord::Advance(t(5, 30)),
        finished(6, Outcome::DryRun),
        finished(7, Outcome::Succeeded),
    ];
    let slots: Vec<_> = super::super::ended_now(&records)
        .iter()
        .map(|e| (e.slot, e.outcome))
        .collect();
    assert_eq!(slots, [(t(7, 0), Outcome::Succeeded), (t(5, 0), Outcome::Failed)]);
}

/// A row long enough already (a policy just added) while a restart rolls out: nothing trips
/// until that restart ends, and then its own end counts (mutation: tripping while busy, which
/// would journal a pause the busy machine never enters).
#[test]
fn a_pause_waits_for_the_restart_in_flight_and_counts_its_end() {
    let mut o = failing_at_10();
    o.journal.pauses.ended.push(Ended {
        slot: t(0, 0) - Duration::minutes(5),
        outcome: Outcome::Abandoned,
        reason: None,
    });
    // 03:05:30: the rollout of 03:05 still runs (it times out 60 s after its patch)
    o.now = t(5, 30);
    let pass = decide(&eru("5,10 3 * * *", 1), &o);
    assert!(matches!(pass.state, State::RollingOut { .. }), "{:?}", pass.state);
    assert!(
        paused(&pass.decision.records).is_none(),
        "{:?}",
        pass.decision.records
    );
    // at 03:10 it fails: the row is its end and the two before; tripped in that pass
    let pass = decide(
        &eru("5,10 3 * * *", 1),
        &failing_at_10_with(o.journal.pauses.ended.clone()),
    );
    let pause = paused(&pass.decision.records).expect("tripped");
    assert!(pause.why.starts_with("2 restarts in a row"), "{}", pause.why);
}

fn failing_at_10_with(ended: Vec<Ended>) -> Observed {
    let mut o = failing_at_10();
    o.journal.pauses.ended = ended;
    o
}
