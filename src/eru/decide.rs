//! Step 2 of the Eru pass, pure: the observation as events, fed through the machine restored from
//! the journal (a restart in flight) and the status (the idle phase). The result is the new state
//! and a [`Decision`](crate::machine::Decision): transitions, records for the journal, actions for
//! the cluster.
//!
//! The order within a pass: the spec's epoch and the ledger cursor; the restart in flight (landed?
//! rolled out?); the spec's state; the slots since the cursor; the restart that has not landed
//! (patch, wait, or give up); the spec's state again (a restart that ended frees the Eru).

use chrono::{DateTime, Duration, Utc};
use tracing::debug;

use super::{
    CachedEru,
    ledger::{self, Epoch, Span, Window, effective_from},
    machine::{
        EruDecision, EruEvent, EruMachine, EruRecord, Gate, InFlight, Pending, Seed, SlotsDue, State,
        Template, restore,
    },
    observe::Observed,
    target::{DEFAULT_ROLLOUT_TIMEOUT_SECONDS, Verdict},
};
use crate::machine::{EventName, Phase, step};

/// What one pass decided.
#[derive(Debug)]
pub struct Pass {
    pub state: State,
    pub decision: EruDecision,
    /// More slots are due than one pass accounts for: come back at once.
    pub backlog: bool,
    /// When the restart in flight needs the next look (a retry, its deadline, its rollout's
    /// timeout), if one is in flight.
    pub wake: Option<DateTime<Utc>>,
    /// A stretch whose slots could not be accounted (their spec is unknown), to report.
    pub gap: Option<Window>,
    /// When the restart being rolled out landed (for its duration).
    pub patched_at: Option<DateTime<Utc>>,
    /// How long a rollout may take.
    pub rollout_timeout: Duration,
    /// When the next restart is due (the next slot plus its jitter, or a passed slot whose
    /// jittered instant is still ahead).
    pub next_fire: Option<DateTime<Utc>>,
}

impl Pass {
    /// The restart this pass decided and has yet to patch, with its deadline: it needs a place
    /// in the fleet (see [`super::fleet`]).
    pub fn starts(&self) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        let State::Restarting { restart } = &self.state else {
            return None;
        };
        self.decision.records.iter().find_map(|r| match r {
            EruRecord::Decided { slot, deadline, .. } if *slot == restart.slot => Some((*slot, *deadline)),
            _ => None,
        })
    }
}

/// Decides one pass for `eru` from what was observed.
pub fn decide(eru: &CachedEru, observed: &Observed) -> Pass {
    let name = eru.metadata.name.as_deref().unwrap_or_default();
    let now = observed.now;
    let known = observed.known.as_ref();
    let mut decision = EruDecision::default();
    let feed = |state: State, event: &EruEvent, decision: &mut EruDecision| {
        let from = state.phase();
        let to = step(EruMachine, state, event, decision);
        debug!(eru = %name, event = event.name(), from, to = to.phase(), slot = ?to.slot(), "dispatched");
        to
    };

    // The journal's ledger, or what the cluster remembers of a lost one.
    let remembered = known.filter(|s| status_cursor(s).is_some());
    if observed.ledger.is_none()
        && let Some(status) = remembered
    {
        decision.record(EruRecord::Seed(Seed {
            accounted_through: status_cursor(status),
            missed_slots: status.missed_slots,
            last_missed: status.last_missed_time,
            last_success: status.last_successful_time,
            last_failure: status.last_failure_time,
        }));
    }
    let (epochs, new_epoch) = epochs(observed);
    if let Some(epoch) = new_epoch {
        decision.record(EruRecord::Epoch(epoch));
    }
    let journaled = observed
        .ledger
        .as_ref()
        .and_then(|l| l.accounted_through.as_deref())
        .and_then(crate::journal::parse_ts);
    let mut cursor = cursor(observed);
    // slots before the first epoch this journal knows have no known spec: report, move past
    let gap = epochs
        .first()
        .map(|e| e.from)
        .filter(|from| *from > cursor)
        .map(|from| (cursor, from));
    if let Some((_, to)) = gap {
        cursor = to;
    }
    if journaled.is_none_or(|j| cursor > j) {
        decision.record(EruRecord::Advance(cursor));
    }
    let (mut downtime, before_first) = ledger::downtime(&observed.runs, cursor);
    let unrecorded = match before_first {
        // the Eru was accounted before, by a journal this operator cannot read
        Some(window) if observed.ledger.is_none() && remembered.is_some() => Some(window),
        Some(window) => {
            downtime.insert(0, window);
            None
        }
        None => None,
    };

    // The restart in flight: the journal's, or one a lost journal left rolling out.
    let mut state = restore(known.and_then(|s| s.phase.as_deref()), in_flight(observed));
    let mut tracked = observed
        .open_restart
        .as_ref()
        .map(|o| (o.restart.target.clone(), o.patched_at.unwrap_or(o.decided_at)));
    if observed.open_restart.is_none()
        && let Some((slot, target, patched_at)) = rolling_out_unjournaled(eru, observed)
    {
        decision.record(EruRecord::Decided {
            slot,
            deadline: slot + Duration::seconds(eru.spec.starting_deadline_seconds),
            target: target.clone(),
        });
        decision.record(EruRecord::Patched {
            slot,
            at: patched_at,
            target: target.clone(),
        });
        state = State::RollingOut { slot };
        tracked = Some((target, patched_at));
    }
    let rollout_timeout = rollout_timeout(eru, observed, tracked.as_ref().map(|t| t.0.as_str()));
    for _ in 0..2 {
        let view = tracked
            .as_ref()
            .and_then(|(target, _)| observed.targets.get(target));
        let event = match &state {
            State::Restarting { restart } => view
                .and_then(|v| v.landed_at(restart.slot, now))
                .map(|at| EruEvent::RestartPatched { at }),
            State::RollingOut { slot } => {
                let patched_at = tracked.as_ref().map_or(now, |t| t.1);
                Some(match view {
                    None => EruEvent::TargetGone,
                    Some(v) => match v.verdict(*slot, patched_at, now, rollout_timeout) {
                        Verdict::Done => EruEvent::RolloutDone {
                            finished_at: v.finished_at(patched_at, now),
                        },
                        Verdict::Failed(reason) => EruEvent::RolloutFailed {
                            finished_at: now,
                            reason,
                        },
                        Verdict::Progressing => EruEvent::RolloutProgressed,
                    },
                })
            }
            _ => None,
        };
        let Some(event) = event else { break };
        if let EruEvent::RestartPatched { at } = event
            && let Some(t) = tracked.as_mut()
        {
            t.1 = at;
        }
        let settled = matches!(event, EruEvent::RolloutProgressed);
        state = feed(state, &event, &mut decision);
        if settled || state.slot().is_none() {
            break;
        }
    }

    // The spec's state, then the slots since the cursor.
    let spec_event = match (&observed.schedule, observed.target()) {
        (Err(e), _) => EruEvent::SpecInvalid { reason: e.clone() },
        (Ok(_), None) => EruEvent::TargetMissing,
        (Ok(_), Some(_)) => EruEvent::SpecReady {
            suspend: eru.spec.suspend,
        },
    };
    state = feed(state, &spec_event, &mut decision);
    let span = Span {
        after: cursor,
        now,
        downtime: &downtime,
        unrecorded,
        journal_outages: &observed.journal_outages,
        uid: &observed.uid,
        seed: &observed.seed,
        cluster_blackouts: &observed.cluster_blackouts,
        queued: observed.queued,
    };
    let mut accounting = ledger::account(&epochs, &span);
    if let Some(due) = accounting.due.as_mut() {
        due.dry_run |= observed.dry_run_all;
    }
    let next_fire = accounting.held_until.or_else(|| {
        let slot = observed.schedule.as_ref().ok()?.next_after(now)?;
        Some(observed.spec.fire_at(&observed.uid, slot))
    });
    if !accounting.records.is_empty() || accounting.due.is_some() {
        let target = accounting
            .due
            .as_ref()
            .and_then(|d| observed.targets.get(&d.target));
        let template = accounting.due.as_ref().and_then(|d| {
            let landed_at = target?.landed_at(d.slot, now)?;
            Some(Template {
                slot: d.slot,
                landed_at,
            })
        });
        let slots = SlotsDue {
            gate: target.map_or(Gate::Missing, |t| t.gate()),
            gate_note: target.and_then(|t| t.gate_note()),
            template,
            records: accounting.records,
            due: accounting.due,
            capacity: observed.capacity,
            journal_outages: observed.journal_outages.clone(),
        };
        state = feed(state, &EruEvent::SlotsDue(slots), &mut decision);
    }

    // A restart that has not landed: patch it (after its backoff), or give it up.
    let mut wake = None;
    if let State::Restarting { restart } = &state {
        let view = observed.targets.get(&restart.target);
        let (blocked, note) = if eru.spec.suspend {
            (Some(ledger::Reason::Suspended), None)
        } else if observed.schedule.is_err() {
            (Some(ledger::Reason::SpecInvalid), None)
        } else {
            (
                view.map_or(Gate::Missing, |v| v.gate()).reason(),
                view.and_then(|v| v.gate_note()),
            )
        };
        let open = observed
            .open_restart
            .as_ref()
            .filter(|o| o.restart.slot == restart.slot);
        let retry_at = open.and_then(|o| o.next_attempt_at);
        let decided_at = open.map_or(now, |o| o.decided_at);
        let pending = Pending {
            now,
            blocked,
            note,
            retry_due: retry_at.is_none_or(|at| at <= now),
            downtime: downtime.iter().find(|w| w.1 > decided_at).copied(),
            journal_outage: ledger::overlapping(&observed.journal_outages, restart.slot, restart.deadline),
        };
        let deadline = restart.deadline;
        state = feed(state, &EruEvent::RestartPending(pending), &mut decision);
        if state.slot().is_some() {
            wake = Some(
                retry_at
                    .filter(|at| *at > now)
                    .map_or(deadline, |at| at.min(deadline))
                    + Duration::milliseconds(1),
            );
        }
    }
    if let (State::RollingOut { .. }, Some((_, patched_at))) = (&state, &tracked) {
        wake = Some(*patched_at + rollout_timeout + Duration::seconds(1));
    } else if let State::RollingOut { .. } = &state {
        wake = Some(now + rollout_timeout + Duration::seconds(1));
    }
    // a restart that ended in this pass frees the Eru for the spec's state
    state = feed(state, &spec_event, &mut decision);
    Pass {
        state,
        decision,
        backlog: accounting.more,
        wake,
        gap,
        patched_at: tracked.map(|t| t.1),
        rollout_timeout,
        next_fire,
    }
}

/// The latest instant a status says is accounted: its cursor, else (a status written before the
/// cursor was kept) its latest restart or missed slot.
fn status_cursor(status: &super::EruStatus) -> Option<DateTime<Utc>> {
    [
        status.accounted_through,
        status.last_restart.as_ref().map(|r| r.slot),
        status.last_missed_time,
    ]
    .into_iter()
    .flatten()
    .max()
}

/// Where accounting resumes: after the latest of the journal's cursor, the status's cursor and —
/// when the journal knows nothing of this Eru — the slot the target's template carries, if it is
/// one of this schedule's (it was restarted, by an operator whose journal is gone). A new Eru
/// starts at its creation.
fn cursor(observed: &Observed) -> DateTime<Utc> {
    let journal = observed
        .ledger
        .as_ref()
        .and_then(|l| l.accounted_through.as_deref())
        .and_then(crate::journal::parse_ts);
    let status = observed.known.as_ref().and_then(status_cursor);
    let template = observed
        .ledger
        .is_none()
        .then(|| observed.target()?.template_slot)
        .flatten()
        .filter(|slot| *slot <= observed.now)
        .filter(|slot| {
            let schedule = observed.schedule.as_ref().ok();
            schedule.and_then(|s| s.next_after(*slot - Duration::seconds(1))) == Some(*slot)
        });
    [journal, status, template]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(observed.created)
}

/// The epochs to account under, oldest first, and the current generation's if it is new. A new
/// generation takes effect when the API server recorded its spec write (clamped between the
/// previous epoch and now); generation 1 at the Eru's creation; the first epoch of an Eru the
/// journal accounted before epochs were kept, at its cursor.
fn epochs(observed: &Observed) -> (Vec<Epoch>, Option<Epoch>) {
    let mut epochs = observed.epochs.clone();
    let latest = epochs.iter().map(|e| e.generation).max();
    if latest.is_some_and(|g| g >= observed.generation) {
        // known (or the cache lags behind a generation already journaled)
        return (epochs, None);
    }
    let from = if observed.generation <= 1 {
        observed.created
    } else if let Some(last) = epochs.last() {
        effective_from(observed.spec_written_at, Some(last.from), observed.now)
    } else if let Some(legacy) = observed
        .ledger
        .as_ref()
        .and_then(|l| l.accounted_through.as_deref())
    {
        let cursor = crate::journal::parse_ts(legacy).unwrap_or(observed.now);
        effective_from(observed.spec_written_at, None, observed.now).min(cursor)
    } else {
        effective_from(observed.spec_written_at, None, observed.now)
    };
    let epoch = Epoch {
        generation: observed.generation,
        from,
        spec: observed.spec.clone(),
    };
    epochs.push(epoch.clone());
    (epochs, Some(epoch))
}

/// The restart in flight, as the journal holds it.
fn in_flight(observed: &Observed) -> Option<InFlight> {
    let open = observed.open_restart.as_ref()?;
    Some(match open.patched_at {
        Some(_) => InFlight::Landed(open.restart.slot),
        None => InFlight::Pending(open.restart.clone()),
    })
}

/// A restart the status shows rolling out whose journal is gone (the journal has no ledger for
/// this Eru) and whose slot the target's template carries: the pass takes it over, so its end is
/// recorded. Its slot, target and when it landed.
fn rolling_out_unjournaled(
    eru: &CachedEru,
    observed: &Observed,
) -> Option<(DateTime<Utc>, String, DateTime<Utc>)> {
    if observed.ledger.is_some() {
        return None;
    }
    let status = observed.known.as_ref()?;
    let last = status
        .last_restart
        .as_ref()
        .filter(|r| r.outcome == "in_progress")?;
    let target = observed.target()?;
    let landed = target.landed_at(last.slot, observed.now)?;
    Some((
        last.slot,
        eru.spec.target.key(),
        last.patched_at.unwrap_or(landed),
    ))
}

/// How long a rollout may take: the spec's, else the tracked target's (a Deployment's progress
/// deadline; 600 s for the other kinds).
fn rollout_timeout(eru: &CachedEru, observed: &Observed, target: Option<&str>) -> Duration {
    Duration::seconds(eru.spec.rollout_timeout_seconds.unwrap_or_else(|| {
        target
            .and_then(|t| observed.targets.get(t))
            .or(observed.target())
            .map_or(DEFAULT_ROLLOUT_TIMEOUT_SECONDS, |t| t.rollout_timeout_seconds)
    }))
}

#[cfg(test)]
mod tests;
