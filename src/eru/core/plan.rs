//! Step 2 of the Eru pass, pure: the plan. What was observed becomes events, fed through the
//! machine restored from the journal (a restart in flight) and the status (the idle phase); the
//! [`Plan`] holds the new state and what it decided — transitions, records for the journal,
//! actions for the cluster — plus the one instant the Eru needs its next pass. What acting brings
//! back (the fleet's answer, the restart patch's result) is fed in with [`Plan::after`], in the
//! same pass.
//!
//! The order of one plan: the spec's epochs and the ledger cursor ([`start`]), then the steps of
//! [`ORDER`], each fed to the machine in turn; where the due slot asks the fleet for a place, the
//! pass stops after [`Step::Account`] and goes on with the answer ([`Plan::after`]).

use chrono::{DateTime, Duration, Utc};

use super::{
    hold::{self, Held},
    ledger::{self, Epoch, Span, Window},
    machine::{EruMachine, InFlight, State, restore, retry_delay},
    messages::{EruAction, EruDecision, EruEvent, EruRecord, Gate, Grant, Pending, SlotsDue, Template},
    observed::{Observed, RunSeen},
    pause::{self, Pause},
    restart::{Cause, Restart},
    run::{Blocked, ManualRun, RunDue, template_value},
    target::DEFAULT_ROLLOUT_TIMEOUT_SECONDS,
};
use crate::machine::step;
use start::ledger_start;

/// A due slot waiting for a place in the fleet (`--max-concurrent-restarts`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Queued {
    pub slot: DateTime<Utc>,
    /// It is recorded `skipped/fleet_capacity` if it has not started by then.
    pub deadline: DateTime<Utc>,
    /// Slots waiting before it.
    pub ahead: usize,
    /// Restarts holding the places.
    pub in_flight: usize,
    /// A place was free: the restart pace held it.
    pub paced: bool,
    /// The token of the manual run that waits (then `slot` is when it was asked), if a run does.
    pub run: Option<String>,
}

impl Queued {
    /// What it waits for, in words.
    pub fn waits_for(&self) -> &'static str {
        match self.paced {
            true => "its turn under the restart pace (--restart-rate)",
            false => "a restart place",
        }
    }

    /// What waits, in words: the slot, or the manual run.
    pub fn what(&self) -> String {
        match &self.run {
            Some(token) => format!("manual run {token:?}"),
            None => format!("slot {}", super::schedule::slot_text(self.slot)),
        }
    }
}

/// How many passed slots [`Plan::upcoming`] looks at for a restart still ahead (a jitter longer
/// than the schedule's period has many).
const UPCOMING_LOOKBACK: usize = 64;

/// A slot to come: its restart instant and the blackout that will skip it, if one covers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upcoming {
    pub slot: DateTime<Utc>,
    pub restart_at: DateTime<Utc>,
    pub blackout: Option<String>,
}

/// What acting on a plan brought back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fed {
    /// The fleet's answer for the slot the plan asked a place for ([`EruAction::AskPlace`]).
    Place(Grant),
    /// The restart patch landed.
    Patched {
        at: DateTime<Utc>,
        /// The target's generation in the patch's answer.
        generation: Option<i64>,
    },
    /// The restart patch failed with the API's message.
    PatchFailed { message: String, at: DateTime<Utc> },
    /// An Alertmanager silence was created for the restart about to be patched.
    Silenced { id: String, until: DateTime<Utc> },
    /// The silence of the restart of `slot` was expired.
    SilenceExpired { slot: DateTime<Utc>, at: DateTime<Utc> },
}

/// One step a pass feeds the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The restart in flight: did its patch land, how does its rollout go?
    Track,
    /// The silence of the journal's restart in flight, once that restart ended.
    ExpireSilence,
    /// The spec's state: valid (suspended or not), invalid, or without target.
    Spec,
    /// The slots since the cursor: recorded, or the due one started.
    Account,
    /// The restart that has not landed: patched (after its backoff), or given up.
    Pending,
    /// The latest restart, ended, undone since by another field manager.
    Reverted,
    /// The waiting manual run the Eru no longer asks for.
    Withdrawn,
    /// The manual run the Eru asks for.
    RunNow,
}

/// The steps of one pass, in order, and why each comes where it does. The unit tests of
/// `plan/tests/order.rs` prove it: every swap marked *guarded* below breaks a named scenario, and
/// the neighbouring swaps marked *free* break none.
pub const ORDER: [Step; 10] = [
    // guarded, before Account: a rollout that ended frees the Eru for the slot due now, which is
    // restarted, not skipped as concurrent_rollout
    Step::Track,
    // free: the silence of a restart Track ended is expired now or at the second ExpireSilence,
    // in this pass either way
    Step::ExpireSilence,
    // guarded, before Account: a slot due while the Eru is suspended, invalid or without target
    // is skipped for that, never started
    Step::Spec,
    // the slots since the cursor. A due slot may ask the fleet for a place: the pass stops here
    // ([`ASKS_PLACE_AFTER`]) and goes on with the answer
    Step::Account,
    // guarded, after Account: a restart not landed is superseded by the newer due slot first, so
    // no patch is asked for it in the pass that gives it up
    Step::Pending,
    // guarded, after Pending: a restart given up in this pass has its silence expired in it (no
    // later pass would: the restart is no longer open)
    Step::ExpireSilence,
    // guarded, after Pending: a restart given up in this pass frees the Eru to follow its spec
    // now (shown Suspended, not Waiting); guarded before RunNow: a run asked then is refused
    Step::Spec,
    // free: a revert of the latest restart is told once nothing is in flight
    Step::Reverted,
    // free: a waiting run no longer asked for is refused, in this pass whatever its place here
    Step::Withdrawn,
    // last (guarded after the second Spec): the manual run asked, only if no slot asks for a
    // place in this pass
    Step::RunNow,
];

/// The steps of [`ORDER`] before the fleet's answer for a due slot: a pass whose due slot asks
/// for a place stops after them.
pub const ASKS_PLACE_AFTER: usize = 4;

/// One pass's plan for an Eru.
#[derive(Debug)]
pub struct Plan {
    observed: Observed,
    pub state: State,
    /// What was decided and not yet taken for the journal ([`Plan::take`]).
    decision: EruDecision,
    /// More slots are due than one pass accounts for: come back at once.
    pub backlog: bool,
    /// When the next restart is due (the next slot plus its jitter, or a passed slot whose
    /// jittered instant is still ahead).
    pub next_fire: Option<DateTime<Utc>>,
    /// The due slot the fleet has no place for yet.
    pub queued: Option<Queued>,
    /// The due slot a health gate holds.
    pub held: Option<Held>,
    /// The API's message if the restart patch failed in this pass.
    pub patch_error: Option<String>,
    /// The silence of the journal's restart in flight was asked to be expired in this pass.
    silence_expiry: bool,
    /// When the manual run that waits for a gate, a blackout or a place needs its next look,
    /// if one waits: its deadline, or sooner (the blackout's end, the gate poll).
    pub run_waits: Option<DateTime<Utc>>,
    /// The instant of what the plan last heard: the observation, then a patch's result.
    at: DateTime<Utc>,
    /// How long the rollout being tracked may take.
    rollout_timeout: Duration,
    /// The spec's state, fed before the slots and again once a restart may have ended.
    spec_event: EruEvent,
    /// When no operator ran, since the cursor.
    downtime: Vec<Window>,
    /// Where the ledger starts this pass: its cursor, the window no record covers (a lost
    /// journal's), and the epochs in force.
    start: (DateTime<Utc>, Option<Window>, Vec<Epoch>),
    /// The steps, in [`ORDER`] (another order only in the tests that prove it matters).
    order: [Step; 10],
    /// The pause on failure in force, once a Spec step found one (tripped, journaled or shown),
    /// and whether it was resumed in this pass.
    pause: Option<Pause>,
    resumed: bool,
}

/// Plans one pass from what was observed.
pub fn plan(observed: Observed) -> Plan {
    plan_in(observed, ORDER)
}

/// [`plan`], the steps in `order`.
fn plan_in(observed: Observed, order: [Step; 10]) -> Plan {
    let mut decision = EruDecision::default();
    let (cursor, downtime, unrecorded, epochs) = ledger_start(&observed, &mut decision);
    let mut state = restore(
        observed.cluster.shown.as_ref().and_then(|s| s.phase.as_deref()),
        in_flight(&observed),
    );
    if let Some(adopt) = rolling_out_unjournaled(&observed) {
        // a lost journal's restart: taken over, so its end is recorded
        feed(&mut state, &mut decision, &adopt);
    }
    let mut plan = Plan {
        rollout_timeout: rollout_timeout(&observed, &state),
        spec_event: spec_event(&observed),
        at: observed.now,
        observed,
        state,
        decision,
        backlog: false,
        next_fire: None,
        queued: None,
        held: None,
        patch_error: None,
        run_waits: None,
        silence_expiry: false,
        downtime,
        start: (cursor, unrecorded, epochs),
        order,
        pause: None,
        resumed: false,
    };
    plan.steps(..ASKS_PLACE_AFTER);
    // a due slot asking the fleet for a place (EruAction::AskPlace) concludes with the answer
    if plan.state.asks_place().is_none() {
        plan.steps(ASKS_PLACE_AFTER..);
    }
    plan
}

impl Plan {
    /// Feeds back what acting brought, deciding what follows in this same pass.
    pub fn after(&mut self, fed: Fed) {
        match fed {
            Fed::Place(grant) => {
                let Some((slot, deadline)) = self.state.asks_place() else {
                    return;
                };
                let run = (self.state.asking()).and_then(|r| Some(r.cause.run()?.token.clone()));
                if let Grant::Queued {
                    ahead,
                    in_flight,
                    paced,
                } = grant
                {
                    self.queued = Some(Queued {
                        slot,
                        deadline,
                        ahead,
                        in_flight,
                        paced,
                        run,
                    });
                }
                self.feed(&EruEvent::Place {
                    granted: grant == Grant::Granted,
                });
                self.steps(ASKS_PLACE_AFTER..);
            }
            Fed::Patched { at, generation } => {
                self.at = at;
                self.feed(&EruEvent::RestartPatched { at, generation });
            }
            Fed::Silenced { id, until } => self.feed(&EruEvent::Silenced { id, until }),
            Fed::SilenceExpired { slot, at } => self.feed(&EruEvent::SilenceExpired { slot, at }),
            Fed::PatchFailed { message, at } => {
                self.at = at;
                let failures = match &self.state {
                    State::Restarting { restart } => restart.attempts + 1,
                    _ => 1,
                };
                self.patch_error = Some(message.clone());
                let retry_at = at + retry_delay(failures);
                self.feed(&EruEvent::PatchFailed {
                    message,
                    at,
                    retry_at,
                });
            }
        }
    }

    /// What was decided since the last take: to journal (transitions and records) and then to
    /// act on (actions).
    pub fn take(&mut self) -> EruDecision {
        std::mem::take(&mut self.decision)
    }

    /// When the Eru needs its next pass: at once with a backlog (`None` then means "now");
    /// else the next restart or what the restart in flight waits for, whichever comes first.
    pub fn wake(&self) -> Option<DateTime<Utc>> {
        let in_flight = self.state.wake(self.observed.now, self.rollout_timeout);
        // waiting for a place: woken when one frees up, else at the deadline to record it
        let queued = self
            .queued
            .as_ref()
            .map(|q| q.deadline + Duration::milliseconds(1));
        // held: the gates are asked again at the poll interval, and the slot recorded at its
        // deadline (never a hot loop: the answers are cached, the poll is at least a second)
        let held = self
            .held
            .as_ref()
            .map(|h| h.wake(self.observed.now, self.gate_poll()));
        [self.next_fire, in_flight, queued, held, self.run_waits]
            .into_iter()
            .flatten()
            .min()
    }

    /// The next restart the status shows: none while suspended or paused on failure (its slots
    /// are still woken for, so they are journaled skipped as they pass).
    pub fn next_restart(&self) -> Option<DateTime<Utc>> {
        self.next_fire
            .filter(|_| !self.observed.cluster.spec.suspend && self.paused().is_none())
    }

    /// The next `count` restarts after now: their slots (a passed one whose jittered instant is
    /// still ahead among them), restart instants and the blackout covering each, if one does;
    /// none while suspended or paused on failure, none for an invalid schedule.
    pub fn upcoming(&self, count: usize) -> Vec<Upcoming> {
        let cluster = &self.observed.cluster;
        let (Ok(schedule), false, None) = (&cluster.schedule, cluster.spec.suspend, self.paused()) else {
            return Vec::new();
        };
        // as the ledger reads them when the slot comes
        let blackouts = &cluster.blackouts;
        let now = self.observed.now;
        // a slot's restart is at most `jitter_seconds` after it: the passed slots of that
        // stretch whose restart is still ahead come first. A jitter longer than the schedule's
        // period puts many passed slots there; past a bounded number the rest are left out and
        // the slots after now follow (each of those is ahead).
        let mut cursor = now - Duration::seconds(cluster.spec.jitter_seconds.max(0));
        let mut upcoming = Vec::with_capacity(count);
        let mut passed = 0;
        while upcoming.len() < count
            && let Some(slot) = schedule.next_after(cursor)
        {
            if slot <= now {
                passed += 1;
                if passed > UPCOMING_LOOKBACK {
                    cursor = now;
                    continue;
                }
            }
            cursor = slot;
            let restart_at = cluster.spec.fire_at(&cluster.uid, slot);
            if restart_at > now {
                upcoming.push(Upcoming {
                    slot,
                    restart_at,
                    blackout: blackouts.find(restart_at).map(|hit| hit.note),
                });
            }
        }
        upcoming
    }

    /// When what was decided since the last take was decided: the records' instant.
    pub fn at(&self) -> DateTime<Utc> {
        self.at
    }

    pub fn observed(&self) -> &Observed {
        &self.observed
    }

    /// How soon a held slot's gates are asked again: at least a second.
    fn gate_poll(&self) -> Duration {
        let poll = self.observed.operator.gate_poll;
        if poll <= Duration::zero() {
            Duration::seconds(hold::DEFAULT_POLL_SECONDS)
        } else {
            poll.max(Duration::seconds(1))
        }
    }

    fn feed(&mut self, event: &EruEvent) {
        feed(&mut self.state, &mut self.decision, event);
    }

    /// Takes the steps `range` of the plan's order.
    fn steps(&mut self, range: impl std::slice::SliceIndex<[Step], Output = [Step]>) {
        let order = self.order;
        for step in &order[range] {
            match step {
                Step::Track => self.track_in_flight(),
                Step::ExpireSilence => self.expire_silence(),
                Step::Spec => self.spec(),
                Step::Account => self.account(),
                Step::Pending => self.conclude_restart(),
                Step::Reverted => self.reverted(),
                Step::Withdrawn => self.withdrawn(),
                Step::RunNow => self.run_now(),
            }
        }
    }

    /// The Eru's state, as a Spec step feeds it: a pause on failure in force (or its resume),
    /// else the spec's. While a restart is in flight the spec's: a pause waits for its end.
    fn spec(&mut self) {
        if self.state.idle()
            && let Some((pause, new)) = self.pause_in_force()
        {
            let o = &self.observed;
            let event = match o.cluster.resume.as_ref().filter(|r| r.resumes(&pause)) {
                Some(resume) => {
                    self.resumed = true;
                    EruEvent::Resumed {
                        pause,
                        journaled: !new,
                        at: o.now,
                        by: resume.by.clone(),
                    }
                }
                None => {
                    self.pause = Some(pause.clone());
                    feed(
                        &mut self.state,
                        &mut self.decision,
                        &EruEvent::Paused { pause, new },
                    );
                    return;
                }
            };
            feed(&mut self.state, &mut self.decision, &event);
        }
        feed(&mut self.state, &mut self.decision, &self.spec_event);
    }

    /// The pause on failure in force, and whether it is new to the journal: one this pass found
    /// already, the journal's open one, the status's if the journal lacks it (a lost or replaced
    /// journal), or one the restarts that ended in a row trip now.
    fn pause_in_force(&self) -> Option<(Pause, bool)> {
        if self.resumed {
            return None;
        }
        if let Some(pause) = &self.pause {
            return Some((pause.clone(), false));
        }
        let o = &self.observed;
        let journaled = o.journal.pauses.latest.as_ref();
        if let Some((pause, None)) = journaled {
            return Some((pause.clone(), false));
        }
        let shown = o.cluster.shown.as_ref().and_then(|s| s.paused.as_ref());
        if let Some(pause) = shown.filter(|p| journaled.is_none_or(|(j, _)| j.since < p.since)) {
            return Some((pause.clone(), true));
        }
        let row = pause::row(ended_now(&self.decision.records), &o.journal.pauses.ended);
        pause::trip(&row, o.cluster.pause_after?, o.now).map(|p| (p, true))
    }

    /// The pause on failure in force after this pass, if one is.
    pub fn paused(&self) -> Option<&Pause> {
        self.pause.as_ref().filter(|_| !self.resumed)
    }

    /// The silence of the restart in flight, once that restart ended (in this pass, by its
    /// rollout's end or given up): expired now, not at its own end.
    fn expire_silence(&mut self) {
        let Some(open) = self.observed.journal.open_restart.as_ref() else {
            return;
        };
        let Some(id) = &open.silence else {
            return;
        };
        let Some(slot) = open.restart.slot() else {
            return;
        };
        if self.silence_expiry {
            return;
        }
        let ended = self.decision.records.iter().any(|r| {
            matches!(r, EruRecord::Finished { slot: s, .. } | EruRecord::GaveUp { slot: s, .. } if *s == slot)
        });
        if ended || self.state.slot() != Some(slot) {
            self.decision
                .act(EruAction::ExpireSilence { slot, id: id.clone() });
            self.silence_expiry = true;
        }
    }

    /// The restart in flight: did its patch land, and how does its rollout go? (A landing seen
    /// now may be rolled out now too.)
    fn track_in_flight(&mut self) {
        let (o, state, decision) = (&self.observed, &mut self.state, &mut self.decision);
        let (eru, now) = (o.cluster.h_key.as_str(), o.now);
        if let State::Restarting { restart } = &*state
            && let Some(view) = o.cluster.targets.get(&restart.target)
            && let Some(at) = restart.cause.landed_in(view, eru, now)
        {
            // seen carrying its key: the cache is past the patch
            let generation = view.generation;
            feed(state, decision, &EruEvent::RestartPatched { at, generation });
        }
        if let State::RollingOut { rollout } = &*state {
            let view = o.cluster.targets.get(&rollout.target);
            let event = rollout.seen(view, eru, now, self.rollout_timeout);
            feed(state, decision, &event);
        }
    }

    /// The slots since the cursor: recorded, or due.
    fn account(&mut self) {
        let (o, (cursor, unrecorded, epochs)) = (&self.observed, &self.start);
        let (cursor, unrecorded) = (*cursor, *unrecorded);
        let now = o.now;
        let span = Span {
            after: cursor,
            now,
            downtime: &self.downtime,
            unrecorded,
            journal_outages: &o.journal.outages,
            uid: &o.cluster.uid,
            seed: &o.cluster.h_key,
            cluster_blackouts: &o.operator.cluster_blackouts,
            // none compiled when the current spec cannot be used: each epoch compiles its own
            compiled: (o.cluster.schedule.is_ok()).then_some((&o.cluster.spec, &o.cluster.blackouts)),
            queued: o.operator.queued,
            held: o.operator.held.as_ref(),
        };
        let mut accounting = ledger::account(epochs, &span);
        if let Some(due) = accounting.due.as_mut() {
            due.dry_run |= o.operator.dry_run_all;
        }
        self.backlog = accounting.more;
        self.next_fire = accounting.held_until.or_else(|| {
            let slot = o.cluster.schedule.as_ref().ok()?.next_after(now)?;
            Some(o.cluster.spec.fire_at(&o.cluster.uid, slot))
        });
        if accounting.records.is_empty() && accounting.due.is_none() {
            return;
        }
        let target = accounting
            .due
            .as_ref()
            .and_then(|d| o.cluster.targets.get(&d.target));
        let template = accounting.due.as_ref().and_then(|d| {
            let landed_at = target?.landed_at(d.slot, now)?;
            Some(Template {
                slot: d.slot,
                landed_at,
                generation: target?.generation,
            })
        });
        let slots = EruEvent::SlotsDue(SlotsDue {
            gate: target.map_or(Gate::Missing, |t| t.gate()),
            gate_note: target.and_then(|t| t.gate_note()),
            template,
            records: accounting.records,
            due: accounting.due,
            journal_outages: o.journal.outages.clone(),
            health: o.operator.gate.clone(),
            earlier_hold: o.operator.held.clone(),
            need: Box::new(o.operator.need.clone()),
            paused: self.paused().map(pause::note),
            now,
        });
        feed(&mut self.state, &mut self.decision, &slots);
        // a slot the machine held waits, unaccounted: no record, no fleet place, the cursor
        // stays before it
        self.held = self.decision.actions.iter().find_map(|a| match a {
            EruAction::Hold(held) => Some(held.clone()),
            _ => None,
        });
    }

    /// The latest manual run, if it still waits while the Eru asks for another token (or none):
    /// refused, saying so.
    fn withdrawn(&mut self) {
        let o = &self.observed;
        let Some(waiting) = o.cluster.shown.as_ref().and_then(|s| s.waiting_run.clone()) else {
            return;
        };
        let now = match &o.cluster.run {
            Some(Ok(asked)) if asked.token == waiting => return,
            Some(Ok(asked)) => Some(asked.token.clone()),
            _ => None,
        };
        let event = EruEvent::RunWithdrawn { token: waiting, now };
        feed(&mut self.state, &mut self.decision, &event);
    }

    /// The latest restart, ended, undone since by another field manager (its slot left the
    /// template): told once (the status then shows it), while no restart is in flight.
    fn reverted(&mut self) {
        let o = &self.observed;
        if self.state.in_flight() || self.state.asks_place().is_some() {
            return;
        }
        let Some(last) = o.cluster.shown.as_ref().and_then(|s| s.last_restart.as_ref()) else {
            return;
        };
        if last.in_progress || last.reverted {
            return;
        }
        let (Some(target), Some(patched_at)) = (&last.target, last.patched_at) else {
            return; // never landed, or a status from before targets were kept
        };
        if let Some(revert) =
            (o.cluster.targets.get(target)).and_then(|v| v.reverted(last.slot, patched_at, None, true))
        {
            let event = EruEvent::Reverted {
                slot: last.slot,
                revert,
                at: o.now,
            };
            feed(&mut self.state, &mut self.decision, &event);
        }
    }

    /// What a restart (or manual run) not landed must know: what blocks it now, whether its
    /// backoff is over, and the outages since it was decided (`decided_at`, else now).
    fn pending(
        &self,
        target: &str,
        decided_at: DateTime<Utc>,
        deadline: DateTime<Utc>,
        next_attempt_at: Option<DateTime<Utc>>,
    ) -> Pending {
        let o = &self.observed;
        let view = o.cluster.targets.get(target);
        let (blocked, note) = if o.cluster.spec.suspend {
            (Some(ledger::Reason::Suspended), None)
        } else if o.cluster.schedule.is_err() || o.cluster.invalid.is_some() {
            (Some(ledger::Reason::SpecInvalid), None)
        } else {
            (
                view.map_or(Gate::Missing, |v| v.gate()).reason(),
                view.and_then(|v| v.gate_note()),
            )
        };
        Pending {
            now: o.now,
            blocked,
            note,
            retry_due: next_attempt_at.is_none_or(|at| at <= o.now),
            // no operator ran between the decision and the deadline at some instant: the patch
            // could not be sent then
            downtime: ledger::overlapping(&self.downtime, decided_at, deadline),
            journal_outage: None,
        }
    }

    /// The manual run the Eru asks for, if the journal has not started or ended it and the
    /// machine is not busy asking a place for a slot: fed to the machine, which starts it,
    /// refuses it, or lets it wait.
    fn run_now(&mut self) {
        let o = &self.observed;
        // a slot (or this run) asks or waits for a place: one request per pass
        if self.state.asks_place().is_some() || self.queued.is_some() {
            return;
        }
        let asked = match &o.cluster.run {
            Some(Ok(asked)) => asked,
            Some(Err(reason)) => {
                self.decision.act(EruAction::ReportBadRun {
                    reason: reason.clone(),
                });
                return;
            }
            None => return,
        };
        if self.state.token() == Some(asked.token.as_str()) {
            return;
        }
        let (run, new, waited) = match &o.journal.run {
            Some(RunSeen::Started) => return,
            Some(RunSeen::Waiting { run, waited }) => (run.clone(), false, waited.clone()),
            None => {
                // asked when its manager wrote it (never later than now)
                let at = asked.set_at.map_or(o.now, |at| at.min(o.now));
                let run = ManualRun {
                    token: asked.token.clone(),
                    requested_by: asked.requested_by.clone(),
                    requested_at: at,
                    deadline: at + Duration::seconds(o.cluster.spec.starting_deadline_seconds.max(0)),
                    target: o.cluster.spec.target.clone(),
                    attempts: 0,
                    last_error: None,
                    next_attempt_at: None,
                };
                (run, true, None)
            }
        };
        // it waited for a place in the fleet (the queue keeps it by when it was asked)
        let waited = match o.operator.queued == Some(run.requested_at) {
            true => Some("fleet_capacity: it waited for a place or a token under the fleet's limits (--max-concurrent-restarts, --restart-rate)".to_string()),
            false => waited,
        };
        let view = o.cluster.targets.get(&run.target);
        let (blocked, opens) = self.run_blocked(&run.target).unzip();
        let due = RunDue {
            landed_at: view.and_then(|v| {
                v.run_landed_at(
                    &template_value(&o.cluster.h_key, &run.token),
                    run.requested_at,
                    o.now,
                )
            }),
            blocked,
            dry_run: o.cluster.spec.dry_run || o.operator.dry_run_all,
            now: o.now,
            waited,
            new,
            run,
        };
        let deadline = due.run.deadline;
        let blocked = due.blocked.is_some() && due.landed_at.is_none() && o.now <= deadline;
        feed(
            &mut self.state,
            &mut self.decision,
            &EruEvent::RunDue(Box::new(due)),
        );
        if matches!(self.state, State::RollingOut { .. }) {
            // its patch had landed (a crash, a lost journal): its rollout may be over already,
            // and no change of the target may come to say so
            self.track_in_flight();
        }
        if blocked && matches!(self.state, State::Waiting {}) {
            // looked at again when what blocks it may be gone (a blackout's end, else the gate
            // poll), refused at its deadline
            let again = opens.flatten().unwrap_or(self.observed.now + self.gate_poll());
            self.run_waits = Some(again.min(deadline) + Duration::milliseconds(1));
        }
    }

    /// What stands in a manual run's way now (the target's gate, a blackout, the health gates),
    /// and when it ends if that is known (a blackout's end).
    fn run_blocked(&self, target: &str) -> Option<(Blocked, Option<DateTime<Utc>>)> {
        let o = &self.observed;
        let view = o.cluster.targets.get(target);
        let gate = view.map_or(Gate::Missing, |v| v.gate());
        if let Some(reason) = gate.reason() {
            let note = view.and_then(|v| v.gate_note());
            return Some((
                (reason, note.unwrap_or_else(|| format!("the target {target}"))),
                None,
            ));
        }
        if let Some(hit) = o.cluster.blackouts.find(o.now) {
            return Some(((ledger::Reason::Blackout, hit.note), Some(hit.window.1)));
        }
        match &o.operator.gate {
            hold::Answer::Closed { reason, note } => Some(((*reason, note.clone()), None)),
            hold::Answer::Open => None,
        }
    }

    /// A restart (or manual run) that has not landed: patch it (after its backoff), or give it
    /// up.
    fn conclude_restart(&mut self) {
        let o = &self.observed;
        if let State::Restarting { restart } = &self.state {
            // a slot's restart was decided when the journal says (else now), and a journal outage
            // from its slot on may have kept it from landing; a manual run counts from when it
            // was asked
            let (decided_at, outage) = match &restart.cause {
                Cause::Slot(slot) => (
                    (o.journal.open_restart.as_ref())
                        .filter(|open| open.restart.slot() == Some(*slot))
                        .map_or(o.now, |open| open.decided_at),
                    ledger::overlapping(&o.journal.outages, *slot, restart.deadline),
                ),
                Cause::Run(ask) => (ask.requested_at, None),
            };
            let mut pending = self.pending(
                &restart.target,
                decided_at,
                restart.deadline,
                restart.next_attempt_at,
            );
            pending.journal_outage = outage;
            feed(
                &mut self.state,
                &mut self.decision,
                &EruEvent::RestartPending(pending),
            );
        }
    }
}

/// Feeds `event` to the machine in `state`, adding to `decision`.
fn feed(state: &mut State, decision: &mut EruDecision, event: &EruEvent) {
    let from = std::mem::replace(state, State::Waiting {});
    *state = step(EruMachine, from, event, decision);
}

/// The spec's state as an event.
fn spec_event(observed: &Observed) -> EruEvent {
    let invalid = observed.cluster.invalid.as_ref();
    match (&observed.cluster.schedule, observed.target()) {
        (Err(e), _) => EruEvent::SpecInvalid { reason: e.clone() },
        (Ok(_), _) if let Some(why) = invalid => EruEvent::SpecInvalid { reason: why.clone() },
        (Ok(_), None) => EruEvent::TargetMissing,
        (Ok(_), Some(_)) => EruEvent::SpecReady {
            suspend: observed.cluster.spec.suspend,
        },
    }
}

/// The restarts of slots that ended in `records` (this pass's), newest first; a dry run's is no
/// restart.
fn ended_now(records: &[EruRecord]) -> Vec<pause::Ended> {
    (records.iter().rev())
        .filter_map(|r| match r {
            EruRecord::Finished {
                slot,
                outcome,
                reason,
                ..
            } if *outcome != crate::vocab::Outcome::DryRun => Some(pause::Ended {
                slot: *slot,
                outcome: *outcome,
                reason: reason.clone(),
            }),
            _ => None,
        })
        .collect()
}

/// The restart (or manual run) in flight, as the journal holds it.
fn in_flight(observed: &Observed) -> Option<InFlight> {
    let (restart, patched_at, generation) = match observed.journal.open_restart.as_ref() {
        Some(open) => (open.restart.clone(), open.patched_at, open.landed_generation),
        None => {
            let open = observed.journal.open_run.as_ref()?;
            (Restart::of_run(&open.run), open.patched_at, None)
        }
    };
    Some(match patched_at {
        Some(at) => InFlight::Landed(restart.landed(at, generation)),
        None => InFlight::Pending(restart),
    })
}

/// A restart the status shows rolling out whose journal is gone (the journal has no ledger for
/// this Eru) and whose slot the target's template carries: the pass takes it over
/// ([`EruEvent::Adopt`]).
fn rolling_out_unjournaled(observed: &Observed) -> Option<EruEvent> {
    if observed.journal.ledger.is_some() || observed.journal.open_restart.is_some() {
        return None;
    }
    let last = observed
        .cluster
        .shown
        .as_ref()?
        .last_restart
        .as_ref()
        .filter(|r| r.in_progress)?;
    let target = observed.target()?;
    let landed = target.landed_at(last.slot, observed.now)?;
    Some(EruEvent::Adopt {
        slot: last.slot,
        target: observed.cluster.spec.target.clone(),
        patched_at: last.patched_at.unwrap_or(landed),
        generation: target.generation,
        deadline: last.slot + Duration::seconds(observed.cluster.spec.starting_deadline_seconds),
    })
}

/// How long a rollout may take: the spec's, else the tracked target's (a Deployment's progress
/// deadline; 600 s for the other kinds).
fn rollout_timeout(observed: &Observed, state: &State) -> Duration {
    let tracked = match state {
        State::Restarting { restart } => Some(&restart.target),
        State::RollingOut { rollout } => Some(&rollout.target),
        _ => None,
    };
    Duration::seconds(observed.cluster.rollout_timeout_seconds.unwrap_or_else(|| {
        tracked
            .and_then(|t| observed.cluster.targets.get(t))
            .or(observed.target())
            .map_or(DEFAULT_ROLLOUT_TIMEOUT_SECONDS, |t| t.rollout_timeout_seconds)
    }))
}

mod start;
#[cfg(test)]
mod tests;
