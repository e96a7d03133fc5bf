//! Unit tests of the PodSet machine and its rules: planning, deletion ranking, slow start,
//! expectations, and action failures fed back in the same pass.

use chrono::TimeZone;

use super::*;
use crate::machine::dispatch;

fn pod(name: &str, scheduled: bool, phase: &str, ready: bool, minute: u32) -> PodView {
    PodView {
        name: name.into(),
        scheduled,
        phase: phase.into(),
        ready,
        created: Some(Utc.with_ymd_and_hms(2026, 11, 22, 3, minute, 0).unwrap()),
    }
}

fn observed(desired: i32, active: Vec<PodView>) -> PodSetEvent {
    PodSetEvent::Observed(Observation {
        desired,
        active,
        expectations_met: true,
        ..Observation::default()
    })
}

#[test]
fn scale_up_from_nothing() {
    let (state, decision) = dispatch(PodSetMachine, restore(None), &observed(3, vec![]));
    assert_eq!(state, State::ScalingUp {});
    assert_eq!(decision.actions, vec![PodSetAction::Create { count: 3 }]);
    assert_eq!(decision.transitions[0].from, "Pending");
    assert_eq!(decision.transitions[0].to, "ScalingUp");
    assert_eq!(decision.transitions[0].event, "Observed");
}

#[test]
fn ready_pods_make_it_stable_and_unready_progressing() {
    let (state, decision) = dispatch(
        PodSetMachine,
        State::ScalingUp {},
        &observed(1, vec![pod("a", true, "Running", true, 0)]),
    );
    assert_eq!(state, State::Stable {});
    assert!(decision.actions.is_empty());
    let (state, _) = dispatch(
        PodSetMachine,
        State::ScalingUp {},
        &observed(1, vec![pod("a", true, "Pending", false, 0)]),
    );
    assert_eq!(state, State::Progressing {});
}

#[test]
fn staying_stable_journals_nothing() {
    let (state, decision) = dispatch(
        PodSetMachine,
        State::Stable {},
        &observed(1, vec![pod("a", true, "Running", true, 0)]),
    );
    assert_eq!(state, State::Stable {});
    assert!(
        decision.transitions.is_empty(),
        "self-transitions are not journaled"
    );
}

#[test]
fn scale_down_deletes_by_rank() {
    let pods = vec![
        pod("old-ready", true, "Running", true, 0),
        pod("new-ready", true, "Running", true, 5),
        pod("unready", true, "Running", false, 1),
        pod("pending", true, "Pending", false, 2),
        pod("unscheduled", false, "Pending", false, 3),
    ];
    let (state, decision) = dispatch(PodSetMachine, State::Stable {}, &observed(2, pods));
    assert_eq!(state, State::ScalingDown {});
    assert_eq!(
        decision.actions,
        vec![PodSetAction::Delete {
            names: vec!["unscheduled".into(), "pending".into(), "unready".into()]
        }]
    );
}

#[test]
fn deletion_order_prefers_newest_among_equals() {
    let pods = vec![
        pod("a", true, "Running", true, 0),
        pod("b", true, "Running", true, 9),
    ];
    assert_eq!(deletion_order(&pods), ["b", "a"]);
}

#[test]
fn unmet_expectations_hold_the_count_but_not_adoption() {
    let event = PodSetEvent::Observed(Observation {
        desired: 3,
        orphans: vec!["orphan".into()],
        expectations_met: false,
        ..Observation::default()
    });
    let (state, decision) = dispatch(PodSetMachine, State::ScalingUp {}, &event);
    assert_eq!(state, State::ScalingUp {});
    assert_eq!(
        decision.actions,
        vec![PodSetAction::Adopt {
            names: vec!["orphan".into()]
        }]
    );
}

#[test]
fn failure_degrades_and_retries() {
    let event = PodSetEvent::Observed(Observation {
        desired: 2,
        expectations_met: true,
        failure: Some("exceeded quota".into()),
        ..Observation::default()
    });
    let (state, decision) = dispatch(PodSetMachine, State::ScalingUp {}, &event);
    assert_eq!(state, State::Degraded {});
    assert_eq!(decision.actions, vec![PodSetAction::Create { count: 2 }]);
    let (state, decision) = dispatch(PodSetMachine, State::Degraded {}, &event);
    assert_eq!(state, State::Degraded {});
    assert!(
        decision.transitions.is_empty(),
        "a retry while degraded journals nothing"
    );
}

#[test]
fn an_action_failure_degrades_in_the_same_pass_and_success_recovers() {
    let failed = PodSetEvent::Acted {
        failure: Some("exceeded quota".into()),
        scaling: Some(Scaling::Up),
    };
    let (state, decision) = dispatch(PodSetMachine, State::ScalingUp {}, &failed);
    assert_eq!(state, State::Degraded {});
    assert_eq!(decision.transitions[0].event, "ActionFailed");
    let (state, _) = dispatch(PodSetMachine, State::Degraded {}, &failed);
    assert_eq!(state, State::Degraded {});
    let succeeded = PodSetEvent::Acted {
        failure: None,
        scaling: Some(Scaling::Up),
    };
    let (state, decision) = dispatch(PodSetMachine, State::Degraded {}, &succeeded);
    assert_eq!(state, State::ScalingUp {});
    assert_eq!(decision.transitions[0].event, "ActionsSucceeded");
    let (state, decision) = dispatch(PodSetMachine, State::Stable {}, &succeeded);
    assert_eq!(state, State::Stable {});
    assert!(decision.transitions.is_empty());
}

#[test]
fn strays_are_released() {
    let event = PodSetEvent::Observed(Observation {
        desired: 0,
        strays: vec!["relabelled".into()],
        expectations_met: true,
        ..Observation::default()
    });
    let (state, decision) = dispatch(PodSetMachine, State::Stable {}, &event);
    assert_eq!(state, State::Stable {});
    assert_eq!(
        decision.actions,
        vec![PodSetAction::Release {
            names: vec!["relabelled".into()]
        }]
    );
}

#[test]
fn slow_start_doubles_and_clips() {
    assert_eq!(slow_start_batches(0), Vec::<usize>::new());
    assert_eq!(slow_start_batches(1), [1]);
    assert_eq!(slow_start_batches(10), [1, 2, 4, 3]);
    assert_eq!(slow_start_batches(15), [1, 2, 4, 8]);
    assert_eq!(slow_start_batches(500).iter().sum::<usize>(), 500);
}

#[test]
fn expectations() {
    let start = Instant::now();
    let mut expected = Expected::new(start);
    expected.creates.insert("a".into());
    expected.deletes.insert("b".into());
    let cache = |present_a, b| move |n: &str| if n == "a" { present_a } else { b };
    assert!(!expected.met(cache(Cached::Absent, Cached::Deleting), start));
    assert!(!expected.met(cache(Cached::Present, Cached::Present), start));
    assert!(expected.met(cache(Cached::Present, Cached::Deleting), start));
    assert!(expected.met(cache(Cached::Present, Cached::Absent), start));
    // stale expectations expire instead of blocking forever
    assert!(expected.met(
        cache(Cached::Absent, Cached::Present),
        start + EXPECTATIONS_TIMEOUT
    ));
}

#[test]
fn restore_round_trips_every_phase() {
    for state in [
        State::Pending {},
        State::ScalingUp {},
        State::ScalingDown {},
        State::Progressing {},
        State::Stable {},
        State::Degraded {},
    ] {
        assert_eq!(restore(Some(state.phase())), state);
    }
    assert_eq!(restore(Some("Bogus")), State::Pending {});
}
