//! The plan's [`ORDER`], proven: each scenario holds in that order, and every swap of two steps
//! that must keep their places breaks a named scenario. The neighbouring pairs no scenario tells
//! apart are listed as free, so the table in `plan.rs` says no more than is shown here.

use super::*;
use crate::eru::core::{
    observed::Shown,
    run::{Asked, RunRecord},
};
use crate::vocab::RunOutcome;

/// One pass in `order`, the fleet giving the place a due slot asks for: the state it ends in,
/// and all it decided.
fn pass(o: &Observed, order: [Step; 10]) -> (State, EruDecision) {
    let mut plan = plan_in(o.clone(), order);
    let mut decision = plan.take();
    if plan.state.asks_place().is_some() {
        plan.after(Fed::Place(Grant::Granted));
        let more = plan.take();
        decision.records.extend(more.records);
        decision.actions.extend(more.actions);
    }
    (plan.state.clone(), decision)
}

fn check(ok: bool, what: &str, decision: &EruDecision) -> Result<(), String> {
    match ok {
        true => Ok(()),
        false => Err(format!(
            "{what}: records {:?}, actions {:?}",
            decision.records, decision.actions
        )),
    }
}

fn slot_reason(decision: &EruDecision, slot: DateTime<Utc>) -> Option<Reason> {
    decision.records.iter().find_map(|r| match r {
        EruRecord::Slots(records) => records.iter().find(|s| s.first == slot).map(|s| s.reason),
        EruRecord::GaveUp { record, .. } if record.first == slot => Some(record.reason),
        _ => None,
    })
}

fn decided(decision: &EruDecision, at: DateTime<Utc>) -> bool {
    (decision.records.iter()).any(|r| matches!(r, EruRecord::Decided { slot, .. } if *slot == at))
}

/// A restart of 03:05 rolling out, done now (the target settled carrying it), and the slot of
/// 03:06 due: the rollout's end frees the Eru, and the slot is restarted.
fn a_rollout_that_ended_frees_the_eru_for_the_slot_due_now(order: [Step; 10]) -> Result<(), String> {
    let e = eru("* * * * *", 1);
    let mut o = observed(&e, t(6, 0) + Duration::milliseconds(3), Some(t(5, 0)));
    rolling_out_at_5(&mut o);
    let mut open = open((t(5, 0), "web", t(10, 0)), t(5, 0));
    open.patched_at = Some(t(5, 0));
    o.journal.open_restart = Some(open);
    let (_, decision) = pass(&o, order);
    let finished = (decision.records.iter()).any(
        |r| matches!(r, EruRecord::Finished { slot, outcome: Outcome::Succeeded, .. } if *slot == t(5, 0)),
    );
    check(
        finished && decided(&decision, t(6, 0)) && slot_reason(&decision, t(6, 0)).is_none(),
        "03:05 succeeded and 03:06 restarted, not skipped as concurrent_rollout",
        &decision,
    )
}

/// The Eru suspended since its last pass (which showed it Waiting), and a slot due: skipped for
/// the suspension, never started.
fn a_slot_due_while_suspended_is_skipped_for_it(order: [Step; 10]) -> Result<(), String> {
    let e = eru("* * * * *", 1);
    let mut o = observed(&e, t(6, 0) + Duration::milliseconds(3), Some(t(5, 0)));
    o.cluster.spec.suspend = true;
    o.cluster.shown = Some(Shown {
        phase: Some("Waiting".into()),
        ..Shown::default()
    });
    let (_, decision) = pass(&o, order);
    check(
        slot_reason(&decision, t(6, 0)) == Some(Reason::Suspended) && !decided(&decision, t(6, 0)),
        "03:06 skipped as suspended",
        &decision,
    )
}

/// The restart of 03:05 decided, not landed (its deadline 03:10 still ahead), holding a silence,
/// and the slot of 03:06 due: 03:05 is superseded, no patch is asked for it in the pass that
/// gives it up, and its silence is expired once the fleet answered 03:06 (the records of the
/// pass's first half are journaled by then: only the machine's state still tells that 03:05
/// ended; mutation: `||` → `&&` in `Plan::expire_silence`).
fn a_restart_superseded_in_a_pass_is_not_patched_in_it(order: [Step; 10]) -> Result<(), String> {
    let e = eru("* * * * *", 1);
    let mut o = observed(&e, t(6, 0) + Duration::milliseconds(3), Some(t(5, 0)));
    let mut open = open((t(5, 0), "web", t(10, 0)), t(5, 0));
    open.silence = Some("s1".into());
    o.journal.open_restart = Some(open);
    let (_, decision) = pass(&o, order);
    let patched_old = (decision.actions.iter())
        .any(|a| matches!(a, EruAction::PatchRestart { slot, .. } if *slot == t(5, 0)));
    let expired = (decision.actions.iter())
        .any(|a| matches!(a, EruAction::ExpireSilence { slot, .. } if *slot == t(5, 0)));
    check(
        slot_reason(&decision, t(5, 0)) == Some(Reason::Superseded)
            && !patched_old
            && expired
            && decided(&decision, t(6, 0)),
        "03:05 superseded (not patched, its silence expired), 03:06 restarted",
        &decision,
    )
}

/// The restart of 03:05 decided, not landed, holding a silence, when the Eru is suspended (no
/// slot due), and a manual run asked: the restart is given up as suspended, its silence expired
/// in the same pass, the Eru shown Suspended, and the run refused for the suspension.
fn a_restart_given_up_for_a_suspension_ends_in_the_pass(order: [Step; 10]) -> Result<(), String> {
    let e = eru("* * * * *", 1);
    let mut o = observed(&e, t(5, 10), Some(t(5, 0)));
    o.cluster.spec.suspend = true;
    let mut open = open((t(5, 0), "web", t(10, 0)), t(5, 0));
    open.silence = Some("s1".into());
    o.journal.open_restart = Some(open);
    o.cluster.run = Some(Ok(Asked {
        token: "r".into(),
        requested_by: None,
        set_at: Some(t(5, 9)),
    }));
    let (state, decision) = pass(&o, order);
    let expired = (decision.actions.iter())
        .any(|a| matches!(a, EruAction::ExpireSilence { slot, id } if *slot == t(5, 0) && id == "s1"));
    let refused = decision.records.iter().any(|r| {
        matches!(r, EruRecord::Run(RunRecord::Ended { outcome: RunOutcome::Refused, reason: Some(why), .. })
            if why.contains(Reason::Suspended.as_str()))
    });
    check(
        slot_reason(&decision, t(5, 0)) == Some(Reason::Suspended)
            && expired
            && state == State::Suspended {}
            && refused,
        "given up as suspended, silence expired, Suspended, the run refused",
        &decision,
    )
}

/// Run "old" waits; the Eru now asks for "new": "old" is refused, saying so.
fn a_waiting_run_replaced_is_refused(order: [Step; 10]) -> Result<(), String> {
    let o = super::run_edges::old_replaced_by_new();
    let (_, decision) = pass(&o, order);
    let withdrawn = (decision.records.iter())
        .any(|r| matches!(r, EruRecord::Run(RunRecord::Withdrawn { token, .. }) if token == "old"));
    check(withdrawn, "\"old\" refused", &decision)
}

type Scenario = fn([Step; 10]) -> Result<(), String>;

const SCENARIOS: [(&str, Scenario); 5] = [
    (
        "a_rollout_that_ended_frees_the_eru_for_the_slot_due_now",
        a_rollout_that_ended_frees_the_eru_for_the_slot_due_now,
    ),
    (
        "a_slot_due_while_suspended_is_skipped_for_it",
        a_slot_due_while_suspended_is_skipped_for_it,
    ),
    (
        "a_restart_superseded_in_a_pass_is_not_patched_in_it",
        a_restart_superseded_in_a_pass_is_not_patched_in_it,
    ),
    (
        "a_restart_given_up_for_a_suspension_ends_in_the_pass",
        a_restart_given_up_for_a_suspension_ends_in_the_pass,
    ),
    (
        "a_waiting_run_replaced_is_refused",
        a_waiting_run_replaced_is_refused,
    ),
];

/// The places of [`ORDER`] that must keep their order, and the scenario a swap breaks.
const GUARDED: [(usize, Step, usize, Step, &str); 6] = [
    (
        0,
        Step::Track,
        3,
        Step::Account,
        "a_rollout_that_ended_frees_the_eru_for_the_slot_due_now",
    ),
    (
        2,
        Step::Spec,
        3,
        Step::Account,
        "a_slot_due_while_suspended_is_skipped_for_it",
    ),
    (
        3,
        Step::Account,
        4,
        Step::Pending,
        "a_restart_superseded_in_a_pass_is_not_patched_in_it",
    ),
    (
        4,
        Step::Pending,
        5,
        Step::ExpireSilence,
        "a_restart_given_up_for_a_suspension_ends_in_the_pass",
    ),
    (
        4,
        Step::Pending,
        6,
        Step::Spec,
        "a_restart_given_up_for_a_suspension_ends_in_the_pass",
    ),
    (
        6,
        Step::Spec,
        9,
        Step::RunNow,
        "a_restart_given_up_for_a_suspension_ends_in_the_pass",
    ),
];

/// The neighbouring pairs `(i, i + 1)` of [`ORDER`] whose swap no scenario tells apart. (8, 9):
/// a run asked before the waiting one is withdrawn still sees it withdrawn in the same pass,
/// once the fleet answered (the steps after [`ASKS_PLACE_AFTER`] run again).
const FREE_NEIGHBOURS: [usize; 6] = [0, 1, 5, 6, 7, 8];

fn swapped(i: usize, j: usize) -> [Step; 10] {
    let mut order = ORDER;
    order.swap(i, j);
    order
}

fn failing(order: [Step; 10]) -> Vec<&'static str> {
    (SCENARIOS.iter())
        .filter(|(_, scenario)| scenario(order).is_err())
        .map(|(name, _)| *name)
        .collect()
}

#[test]
fn each_scenario_holds_in_the_plans_order() {
    for (name, scenario) in SCENARIOS {
        if let Err(e) = scenario(ORDER) {
            panic!("{name}: {e}");
        }
    }
}

#[test]
fn every_step_that_must_keep_its_place_is_guarded() {
    for (i, first, j, second, scenario) in GUARDED {
        assert_eq!(
            (ORDER[i], ORDER[j]),
            (first, second),
            "GUARDED names the steps of ORDER"
        );
        let broken = failing(swapped(i, j));
        assert!(
            broken.contains(&scenario),
            "swapping {first:?} ({i}) and {second:?} ({j}) should break {scenario}; it breaks {broken:?}"
        );
    }
    // every neighbouring pair is either guarded or free, as the tables say
    for i in 0..ORDER.len() - 1 {
        let guarded = GUARDED.iter().any(|g| (g.0, g.2) == (i, i + 1));
        let broken = failing(swapped(i, i + 1));
        assert_eq!(
            !broken.is_empty(),
            !FREE_NEIGHBOURS.contains(&i),
            "swapping {:?} ({i}) and {:?} ({}) breaks {broken:?}",
            ORDER[i],
            ORDER[i + 1],
            i + 1
        );
        assert!(
            !guarded || !broken.is_empty(),
            "{i}: guarded, yet no scenario breaks"
        );
    }
}
