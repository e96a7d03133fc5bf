//! The PodSet state machine and the pure rules it uses: which Pods to delete first, slow-start
//! batch sizes and creation/deletion expectations. No I/O here.

use std::{
    cmp::Reverse,
    collections::BTreeSet,
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use statig::prelude::*;

use crate::machine::{Decision, EventName, Phase};

/// What the reconciler saw of one Pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodView {
    pub name: String,
    pub scheduled: bool,
    /// Pending, Running, or anything else (Unknown, Succeeded, Failed).
    pub phase: String,
    pub ready: bool,
    pub created: Option<DateTime<Utc>>,
}

/// Everything a PodSet decision needs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observation {
    pub desired: i32,
    /// Owned, matching Pods that count: not being deleted, phase Pending or Running.
    pub active: Vec<PodView>,
    /// Matching Pods without a controller: to adopt.
    pub orphans: Vec<String>,
    /// Owned Pods whose labels no longer match: to release.
    pub strays: Vec<String>,
    /// Earlier creates and deletes are visible in the cache.
    pub expectations_met: bool,
    /// The failure that degraded the PodSet in an earlier pass (its `ReplicaFailure` condition):
    /// while it lasts, a pass that scales again stays `Degraded` until its actions succeed.
    pub failure: Option<String>,
}

/// Which way a pass scaled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scaling {
    Up,
    Down,
}

/// Events of a PodSet.
#[derive(Clone, Debug, PartialEq)]
pub enum PodSetEvent {
    Observed(Observation),
    /// The pass's actions ran: `failure` is the first API error, `scaling` what was attempted.
    Acted {
        failure: Option<String>,
        scaling: Option<Scaling>,
    },
}

impl EventName for PodSetEvent {
    fn name(&self) -> &'static str {
        match self {
            PodSetEvent::Observed(_) => "Observed",
            PodSetEvent::Acted { failure: Some(_), .. } => "ActionFailed",
            PodSetEvent::Acted { failure: None, .. } => "ActionsSucceeded",
        }
    }
}

/// What the reconciler is asked to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodSetAction {
    /// Create this many Pods, in slow-start batches.
    Create { count: usize },
    /// Delete these Pods.
    Delete { names: Vec<String> },
    /// Add the controller reference to these orphans.
    Adopt { names: Vec<String> },
    /// Remove the controller reference from these Pods.
    Release { names: Vec<String> },
}

/// Most Pods created in one pass (ReplicaSet's burst limit).
pub const BURST_REPLICAS: usize = 500;

/// The PodSet machine.
#[derive(Default)]
pub struct PodSetMachine;

#[state_machine(
    initial = "State::pending()",
    state(derive(Debug, Clone, PartialEq, Eq)),
    after_transition = "Self::after_transition"
)]
impl PodSetMachine {
    /// Never observed yet.
    #[state(superstate = "observing")]
    fn pending() -> Outcome<State> {
        Super
    }

    #[state(superstate = "observing")]
    fn scaling_up() -> Outcome<State> {
        Super
    }

    #[state(superstate = "observing")]
    fn scaling_down() -> Outcome<State> {
        Super
    }

    /// The count is right; some Pods are not Ready yet.
    #[state(superstate = "observing")]
    fn progressing() -> Outcome<State> {
        Super
    }

    #[state(superstate = "observing")]
    fn stable() -> Outcome<State> {
        Super
    }

    /// Creating, deleting, adopting or releasing Pods failed (quota, admission, ...); retried on
    /// every pass, left in the pass whose actions succeed.
    #[state(superstate = "observing")]
    fn degraded(event: &PodSetEvent) -> Outcome<State> {
        match event {
            PodSetEvent::Acted {
                failure: None,
                scaling: Some(Scaling::Up),
            } => Transition(State::scaling_up()),
            PodSetEvent::Acted {
                failure: None,
                scaling: Some(Scaling::Down),
            } => Transition(State::scaling_down()),
            _ => Super,
        }
    }

    #[superstate]
    fn observing(event: &PodSetEvent, context: &mut Decision<PodSetAction>) -> Outcome<State> {
        match event {
            PodSetEvent::Observed(observation) => match plan(observation, context) {
                Some(next) => Transition(next),
                None => Handled,
            },
            // an action failed in this pass: phase and condition say so in this pass
            PodSetEvent::Acted { failure: Some(_), .. } => Transition(State::degraded()),
            PodSetEvent::Acted { failure: None, .. } => Handled,
        }
    }

    fn after_transition(&mut self, from: &State, to: &State, context: &mut Decision<PodSetAction>) {
        context.transition(from, to);
    }
}

impl Phase for State {
    fn phase(&self) -> &'static str {
        match self {
            State::Pending {} => "Pending",
            State::ScalingUp {} => "ScalingUp",
            State::ScalingDown {} => "ScalingDown",
            State::Progressing {} => "Progressing",
            State::Stable {} => "Stable",
            State::Degraded {} => "Degraded",
        }
    }
}

/// Restores the state named by `status.phase` (an unknown or missing phase starts over).
pub fn restore(phase: Option<&str>) -> State {
    match phase {
        Some("ScalingUp") => State::ScalingUp {},
        Some("ScalingDown") => State::ScalingDown {},
        Some("Progressing") => State::Progressing {},
        Some("Stable") => State::Stable {},
        Some("Degraded") => State::Degraded {},
        _ => State::Pending {},
    }
}

/// Decides the commands for an observation and the state to be in; `None` keeps the state.
fn plan(observation: &Observation, decision: &mut Decision<PodSetAction>) -> Option<State> {
    if !observation.orphans.is_empty() {
        decision.act(PodSetAction::Adopt {
            names: observation.orphans.clone(),
        });
    }
    if !observation.strays.is_empty() {
        decision.act(PodSetAction::Release {
            names: observation.strays.clone(),
        });
    }
    if !observation.expectations_met {
        // Earlier creates/deletes are not in the cache yet: counting now could duplicate them.
        return None;
    }
    let desired = observation.desired.max(0) as usize;
    let active = observation.active.len();
    let failed = observation.failure.is_some();
    if active < desired {
        decision.act(PodSetAction::Create {
            count: (desired - active).min(BURST_REPLICAS),
        });
        return Some(if failed {
            State::Degraded {}
        } else {
            State::ScalingUp {}
        });
    }
    if active > desired {
        let names = deletion_order(&observation.active)
            .into_iter()
            .take(active - desired)
            .collect();
        decision.act(PodSetAction::Delete { names });
        return Some(if failed {
            State::Degraded {}
        } else {
            State::ScalingDown {}
        });
    }
    let ready = observation.active.iter().filter(|p| p.ready).count();
    Some(if ready == desired {
        State::Stable {}
    } else {
        State::Progressing {}
    })
}

/// Pod names, the first to delete first (ReplicaSet's ranking): unscheduled before scheduled,
/// Pending before Unknown before Running, not Ready before Ready, newest before oldest.
pub fn deletion_order(pods: &[PodView]) -> Vec<String> {
    let phase_rank = |phase: &str| match phase {
        "Pending" => 0,
        "Running" => 2,
        _ => 1,
    };
    let mut ranked: Vec<&PodView> = pods.iter().collect();
    ranked.sort_by_key(|p| {
        (
            p.scheduled,
            phase_rank(&p.phase),
            p.ready,
            Reverse(p.created),
            p.name.clone(),
        )
    });
    ranked.into_iter().map(|p| p.name.clone()).collect()
}

/// Slow-start batch sizes for creating `count` Pods: 1, 2, 4, ... (the last one clipped), so a
/// failing create (quota, admission) costs one call, not `count`.
pub fn slow_start_batches(count: usize) -> Vec<usize> {
    let mut batches = Vec::new();
    let (mut remaining, mut size) = (count, 1);
    while remaining > 0 {
        let batch = size.min(remaining);
        batches.push(batch);
        remaining -= batch;
        size *= 2;
    }
    batches
}

/// How long unmet expectations are trusted before counting resumes anyway (ReplicaSet: 5 min).
pub const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(300);

/// Pods this operator created or deleted and is waiting to see reflected in its watch cache.
#[derive(Clone, Debug)]
pub struct Expected {
    pub creates: BTreeSet<String>,
    pub deletes: BTreeSet<String>,
    pub since: Instant,
}

/// How a Pod looks in the cache, for expectation checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cached {
    Absent,
    Present,
    Deleting,
}

impl Expected {
    pub fn new(now: Instant) -> Self {
        Self {
            creates: BTreeSet::new(),
            deletes: BTreeSet::new(),
            since: now,
        }
    }

    /// Every create is visible and every delete is gone or going, or they expired.
    pub fn met(&self, cached: impl Fn(&str) -> Cached, now: Instant) -> bool {
        now.duration_since(self.since) >= EXPECTATIONS_TIMEOUT
            || (self.creates.iter().all(|n| cached(n) != Cached::Absent)
                && self.deletes.iter().all(|n| cached(n) != Cached::Present))
    }
}

#[cfg(test)]
mod tests;
