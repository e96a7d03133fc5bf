//! The fleet's limits: how many restarts may be in flight at once, across the operator
//! (`--max-concurrent-restarts`) and per namespace (`--max-concurrent-restarts-per-namespace`),
//! and how many may begin per second (`--restart-rate`, `--restart-pace`: [`super::pace`]).
//!
//! A restart holds a place from the pass that decides it until the pass that sees its rollout
//! end (or gives it up). A due slot that finds no place, or no token of the pace, waits in the
//! queue, in slot order: a freed place goes to the first waiting slot whose namespace has room,
//! and that Eru is reconciled at once to take it; a token goes to the first waiting slot with a
//! place, reserved for it by the pacer ([`Fleet::pace`]) before that Eru is reconciled. A slot
//! still waiting at its starting deadline is recorded `skipped/fleet_capacity` by its own pass.
//! The queue lives in memory: after a restart of the operator, restarts in flight are counted
//! again from the journal before any place is given.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Mutex,
};

use chrono::{DateTime, Utc};
use kube::runtime::reflector::ObjectRef;
use tokio::{sync::mpsc, time::Instant};

pub use super::core::messages::Grant;
use super::{
    CachedEru,
    pace::{Pace, PaceConfig, Why},
};

/// The pacer reserves no token for a slot whose deadline is closer than this.
const RESERVE_MARGIN: chrono::Duration = chrono::Duration::milliseconds(250);

/// The caps and the pace; `None` is unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Limits {
    pub total: Option<usize>,
    pub per_namespace: Option<usize>,
    pub pace: Option<PaceConfig>,
}

impl Limits {
    /// Whether nothing is capped or paced.
    pub fn unlimited(&self) -> bool {
        self.total.is_none() && self.per_namespace.is_none() && self.pace.is_none()
    }
}

/// A waiting slot.
#[derive(Clone, Debug)]
struct Waiter {
    namespace: String,
    name: String,
    deadline: DateTime<Utc>,
}

#[derive(Debug, Default)]
struct Inner {
    /// uid → namespace of each restart in flight.
    active: HashMap<String, String>,
    per_namespace: HashMap<String, usize>,
    /// (slot, uid) → waiter, in slot order.
    waiting: BTreeMap<(DateTime<Utc>, String), Waiter>,
    /// uid → the slot it waits with.
    waiting_slot: HashMap<String, DateTime<Utc>>,
    pace: Option<Pace>,
}

/// The fleet's places and queue.
#[derive(Debug)]
pub struct Fleet {
    limits: Limits,
    inner: Mutex<Inner>,
    /// Erus to reconcile now: a place freed up for them, or the pacer reserved them one.
    wake: mpsc::UnboundedSender<ObjectRef<CachedEru>>,
    /// Tells the pacer a slot waits (or a place freed up).
    waits: tokio::sync::Notify,
}

impl Inner {
    fn hold(&mut self, uid: &str, namespace: &str) {
        if self
            .active
            .insert(uid.to_string(), namespace.to_string())
            .is_none()
        {
            *self.per_namespace.entry(namespace.to_string()).or_default() += 1;
        }
    }

    fn leave(&mut self, uid: &str) -> bool {
        if let Some(slot) = self.waiting_slot.remove(uid) {
            self.waiting.remove(&(slot, uid.to_string()));
        }
        let Some(namespace) = self.active.remove(uid) else {
            return false;
        };
        if let Some(n) = self.per_namespace.get_mut(&namespace) {
            *n -= 1;
            if *n == 0 {
                self.per_namespace.remove(&namespace);
            }
        }
        true
    }

    /// The waiters a place is free for now, in slot order (at most one per free place, and at
    /// most `tokens` of them).
    fn next_in_line(
        &self,
        limits: &Limits,
        now: DateTime<Utc>,
        tokens: Option<usize>,
    ) -> Vec<(String, Waiter)> {
        let mut taken: HashMap<&str, usize> = HashMap::new();
        let mut chosen = Vec::new();
        for ((_, uid), w) in &self.waiting {
            if w.deadline < now {
                continue;
            }
            if tokens.is_some_and(|n| chosen.len() >= n) {
                break;
            }
            let total = self.active.len() + chosen.len();
            if limits.total.is_some_and(|max| total >= max) {
                break;
            }
            let ns = self.per_namespace.get(w.namespace.as_str()).copied().unwrap_or(0)
                + taken.get(w.namespace.as_str()).copied().unwrap_or(0);
            if limits.per_namespace.is_some_and(|max| ns >= max) {
                continue;
            }
            *taken.entry(&w.namespace).or_default() += 1;
            chosen.push((uid.clone(), w.clone()));
        }
        chosen
    }
}

impl Fleet {
    /// A fleet with `limits`; the receiver yields Erus to reconcile because a place freed up.
    pub fn new(limits: Limits) -> (Self, mpsc::UnboundedReceiver<ObjectRef<CachedEru>>) {
        let (wake, rx) = mpsc::unbounded_channel();
        let inner = Inner {
            pace: limits.pace.map(|config| Pace::new(config, Instant::now())),
            ..Inner::default()
        };
        (
            Self {
                limits,
                inner: Mutex::new(inner),
                wake,
                waits: tokio::sync::Notify::new(),
            },
            rx,
        )
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Asks for a place for the restart of `slot` of the Eru `uid`. Granted when it already
    /// holds one, or when it is first in line (slot order) among the waiters with room.
    pub fn request(
        &self,
        uid: &str,
        namespace: &str,
        name: &str,
        slot: DateTime<Utc>,
        deadline: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Grant {
        if self.limits.unlimited() {
            return Grant::Granted;
        }
        let mut inner = self.inner.lock().expect("fleet lock");
        if inner.active.contains_key(uid) {
            return Grant::Granted;
        }
        if let Some(old) = inner.waiting_slot.insert(uid.to_string(), slot) {
            inner.waiting.remove(&(old, uid.to_string()));
        }
        let waiter = Waiter {
            namespace: namespace.to_string(),
            name: name.to_string(),
            deadline,
        };
        inner.waiting.insert((slot, uid.to_string()), waiter);
        let first = |inner: &Inner, tokens| {
            inner
                .next_in_line(&self.limits, now, tokens)
                .into_iter()
                .any(|(u, _)| u == uid)
        };
        // next_in_line gives places only where the caps leave room, and tokens (without caps
        // every waiter has a place: not asked, a burst of N waiters would cost N² here)
        let capped = self.limits.total.is_some() || self.limits.per_namespace.is_some();
        let has_place = !capped || first(&inner, None);
        let tokens = inner.pace.as_mut().map(|p| p.available(Instant::now()));
        if has_place && (tokens.is_none() || first(&inner, tokens)) {
            if let Some(pace) = inner.pace.as_mut() {
                pace.take(Instant::now());
            }
            inner.waiting_slot.remove(uid);
            inner.waiting.remove(&(slot, uid.to_string()));
            inner.hold(uid, namespace);
            return Grant::Granted;
        }
        if has_place && let Some(pace) = inner.pace.as_mut() {
            // the pace is the limit: it knows, and the pacer hands the next token on
            pace.refused();
            self.waits.notify_one();
        }
        let ahead = inner.waiting.range(..(slot, uid.to_string())).count();
        Grant::Queued {
            ahead,
            in_flight: inner.active.len(),
            paced: has_place,
        }
    }

    /// Counts a restart in flight (one restored from the journal, or still rolling out) without
    /// asking: it already runs.
    pub fn hold(&self, uid: &str, namespace: &str) {
        if self.limits.unlimited() {
            return;
        }
        let mut inner = self.inner.lock().expect("fleet lock");
        if let Some(slot) = inner.waiting_slot.remove(uid) {
            inner.waiting.remove(&(slot, uid.to_string()));
        }
        inner.hold(uid, namespace);
    }

    /// The Eru `uid` neither restarts nor waits: its place (or its turn) goes to the next in line,
    /// who are woken.
    pub fn leave(&self, uid: &str, now: DateTime<Utc>) {
        if self.limits.unlimited() {
            return;
        }
        let mut inner = self.inner.lock().expect("fleet lock");
        let waited = inner.waiting_slot.contains_key(uid);
        if inner.leave(uid) || waited {
            if inner.pace.is_some() {
                // the pacer reserves places as its tokens come
                self.waits.notify_one();
                return;
            }
            for (_, w) in inner.next_in_line(&self.limits, now, None) {
                let _ = self.wake.send(ObjectRef::new(&w.name).within(&w.namespace));
            }
        }
    }

    /// The pace now (restarts per second) and why, if there is one.
    pub fn pace_now(&self) -> Option<(f64, Why)> {
        let inner = self.inner.lock().expect("fleet lock");
        inner.pace.as_ref().map(|p| (p.rate(), p.why()))
    }

    /// A restart patch answered after `latency` (`throttled`: a 429 among its answers): the
    /// adaptive pace learns from it.
    pub fn patched(&self, latency: std::time::Duration, throttled: bool) {
        let mut inner = self.inner.lock().expect("fleet lock");
        if let Some(pace) = inner.pace.as_mut() {
            pace.observe(latency, throttled, Instant::now());
        }
    }

    /// The pacer, for as long as the operator leads (a fleet without a pace returns at once):
    /// as tokens come, reserves a place for each of the first waiters in line and wakes them, so
    /// that no later slot takes a token an earlier one waits for; `report` is told the pace
    /// after every round.
    pub async fn pace(&self, report: impl Fn(f64, Why)) {
        const TICK: std::time::Duration = std::time::Duration::from_secs(1);
        if self.limits.pace.is_none() {
            return;
        }
        loop {
            let wait = self.pace_round(Utc::now());
            if let Some((rate, why)) = self.pace_now() {
                report(rate, why);
            }
            match wait {
                Some(wait) => tokio::time::sleep(wait).await,
                // nothing waits: a slot that queues (or a tick, for the adaptive judgment) wakes it
                None => {
                    let _ = tokio::time::timeout(TICK, self.waits.notified()).await;
                }
            }
        }
    }

    /// One round of the pacer at `at`: reserves and wakes; how long until the next token, if
    /// slots still wait for one.
    fn pace_round(&self, at: DateTime<Utc>) -> Option<std::time::Duration> {
        // a token is not reserved for a slot whose deadline is this close: its pass could not
        // patch in time, and it would be recorded as noticed late; waiting, it is recorded
        // `fleet_capacity`, which is what held it
        let at = at + RESERVE_MARGIN;
        let mut inner = self.inner.lock().expect("fleet lock");
        let now = Instant::now();
        let pace = inner.pace.as_mut()?;
        pace.judge(now);
        let tokens = pace.available(now);
        let chosen = inner.next_in_line(&self.limits, at, Some(tokens));
        for (uid, w) in &chosen {
            if let Some(pace) = inner.pace.as_mut() {
                pace.take(now);
            }
            if let Some(slot) = inner.waiting_slot.remove(uid) {
                inner.waiting.remove(&(slot, uid.clone()));
            }
            inner.hold(uid, &w.namespace);
            let _ = self.wake.send(ObjectRef::new(&w.name).within(&w.namespace));
        }
        let pending = !inner.next_in_line(&self.limits, at, Some(1)).is_empty();
        let pace = inner.pace.as_mut()?;
        if pending {
            // a slot with a place still waits for a token: the pace is the limit. A queued slot's
            // pass asks again only when something else wakes it (usually nothing does before
            // its turn or its deadline), so this round tells the adaptive pace, which rises
            // only when it was the limit
            pace.refused();
        }
        pending.then(|| pace.next_token_in(now).max(std::time::Duration::from_millis(1)))
    }

    /// The slot the Eru `uid` waits with, if it waits.
    pub fn waiting(&self, uid: &str) -> Option<DateTime<Utc>> {
        self.inner
            .lock()
            .expect("fleet lock")
            .waiting_slot
            .get(uid)
            .copied()
    }

    /// How many slots wait, and how many restarts are in flight.
    pub fn sizes(&self) -> (usize, usize) {
        let inner = self.inner.lock().expect("fleet lock");
        (inner.waiting.len(), inner.active.len())
    }
}

#[cfg(test)]
mod tests {
    use chrono::{Duration, TimeZone};

    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 23, 3, 0, 0).unwrap() + Duration::seconds(s)
    }

    fn fleet(
        total: Option<usize>,
        per_namespace: Option<usize>,
    ) -> (Fleet, mpsc::UnboundedReceiver<ObjectRef<CachedEru>>) {
        Fleet::new(Limits {
            total,
            per_namespace,
            pace: None,
        })
    }

    #[test]
    fn unlimited_grants_everything() {
        let (f, _) = fleet(None, None);
        for i in 0..100 {
            assert_eq!(
                f.request(&i.to_string(), "ns", "e", t(0), t(300), t(0)),
                Grant::Granted
            );
        }
        assert_eq!(f.sizes(), (0, 0));
    }

    #[test]
    fn cap_queues_in_slot_order_and_hands_places_on() {
        let (f, mut woken) = fleet(Some(2), None);
        assert_eq!(f.request("a", "ns", "a", t(0), t(300), t(0)), Grant::Granted);
        assert_eq!(f.request("b", "ns", "b", t(0), t(300), t(0)), Grant::Granted);
        // the same Eru asking again keeps its place
        assert_eq!(f.request("a", "ns", "a", t(0), t(300), t(1)), Grant::Granted);
        // c (slot 10) asks before d (slot 5): d is still first in line
        assert!(matches!(
            f.request("c", "ns", "c", t(10), t(310), t(10)),
            Grant::Queued {
                ahead: 0,
                in_flight: 2,
                paced: false,
            }
        ));
        assert!(matches!(
            f.request("d", "ns", "d", t(5), t(305), t(11)),
            Grant::Queued { ahead: 0, .. }
        ));
        assert_eq!(f.waiting("c"), Some(t(10)));
        f.leave("a", t(20));
        assert_eq!(woken.try_recv().unwrap().name, "d", "the earliest slot is woken");
        assert!(woken.try_recv().is_err(), "one place, one waiter woken");
        // c cannot jump the queue while d has not taken its place
        assert!(matches!(
            f.request("c", "ns", "c", t(10), t(310), t(21)),
            Grant::Queued { ahead: 1, .. }
        ));
        assert_eq!(f.request("d", "ns", "d", t(5), t(305), t(22)), Grant::Granted);
        assert_eq!(f.sizes(), (1, 2));
    }

    #[test]
    fn per_namespace_cap_lets_other_namespaces_pass() {
        let (f, mut woken) = fleet(Some(3), Some(1));
        assert_eq!(f.request("a", "one", "a", t(0), t(300), t(0)), Grant::Granted);
        assert!(matches!(
            f.request("b", "one", "b", t(0), t(300), t(0)),
            Grant::Queued { .. }
        ));
        assert_eq!(
            f.request("c", "two", "c", t(1), t(300), t(1)),
            Grant::Granted,
            "another namespace has room"
        );
        f.leave("a", t(5));
        let next = woken.try_recv().unwrap();
        assert_eq!(
            (next.name.as_str(), next.namespace.as_deref()),
            ("b", Some("one"))
        );
    }

    #[test]
    fn expired_waiters_do_not_block_the_line_and_leaving_forgets_the_turn() {
        let (f, _) = fleet(Some(1), None);
        assert_eq!(f.request("a", "ns", "a", t(0), t(300), t(0)), Grant::Granted);
        assert!(matches!(
            f.request("late", "ns", "late", t(1), t(10), t(1)),
            Grant::Queued { .. }
        ));
        f.leave("a", t(20));
        // "late" is past its deadline: the next one takes the place
        assert_eq!(f.request("b", "ns", "b", t(15), t(315), t(21)), Grant::Granted);
        f.leave("late", t(22));
        assert_eq!(f.waiting("late"), None);
        // holding (a restored restart) counts against the cap
        f.hold("r", "ns");
        assert_eq!(f.sizes(), (0, 2));
    }

    fn paced(rate: f64, total: Option<usize>) -> (Fleet, mpsc::UnboundedReceiver<ObjectRef<CachedEru>>) {
        paced_as(
            PaceConfig {
                rate,
                adaptive: false,
            },
            total,
        )
    }

    /// An adaptive pace under the default ceiling.
    fn adaptive(total: Option<usize>) -> (Fleet, mpsc::UnboundedReceiver<ObjectRef<CachedEru>>) {
        paced_as(
            PaceConfig {
                rate: crate::eru::pace::ADAPTIVE_CEILING,
                adaptive: true,
            },
            total,
        )
    }

    fn paced_as(
        pace: PaceConfig,
        total: Option<usize>,
    ) -> (Fleet, mpsc::UnboundedReceiver<ObjectRef<CachedEru>>) {
        Fleet::new(Limits {
            total,
            per_namespace: None,
            pace: Some(pace),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn the_pace_hands_its_tokens_out_in_slot_order_and_never_past_a_deadline() {
        let ms = std::time::Duration::from_millis;
        let (f, mut woken) = paced(2.0, None);
        // one token to begin with (a tenth of a second's worth, at least one)
        assert_eq!(f.request("a", "ns", "a", t(0), t(300), t(0)), Grant::Granted);
        // c asks before b, b's slot is earlier: both wait for the pace, b first in line
        assert!(matches!(
            f.request("c", "ns", "c", t(10), t(20), t(0)),
            Grant::Queued {
                paced: true,
                ahead: 0,
                ..
            }
        ));
        assert!(matches!(
            f.request("b", "ns", "b", t(5), t(300), t(0)),
            Grant::Queued {
                paced: true,
                ahead: 0,
                ..
            }
        ));
        // the next token in half a second: the pacer says so, then reserves it for b and wakes it
        assert_eq!(f.pace_round(t(0)), Some(ms(500)));
        assert!(woken.try_recv().is_err());
        tokio::time::advance(ms(500)).await;
        assert_eq!(f.pace_round(t(0)), Some(ms(500)), "c still waits");
        assert_eq!(woken.try_recv().unwrap().name, "b");
        assert_eq!(f.waiting("b"), None);
        // b's pass takes the place reserved for it; a new slot cannot jump the line
        assert_eq!(f.request("b", "ns", "b", t(5), t(300), t(1)), Grant::Granted);
        assert!(matches!(
            f.request("d", "ns", "d", t(30), t(330), t(1)),
            Grant::Queued { ahead: 1, .. }
        ));
        // c's deadline passes before the next token: the token goes to d, never to c
        tokio::time::advance(ms(500)).await;
        assert_eq!(f.pace_round(t(21)), None, "nothing with a live deadline waits");
        assert_eq!(woken.try_recv().unwrap().name, "d");
        assert!(woken.try_recv().is_err());
        assert_eq!(
            f.waiting("c"),
            Some(t(10)),
            "c's own pass records it fleet_capacity"
        );
        assert_eq!(f.pace_now(), Some((2.0, Why::Ceiling)));
        // a slot whose deadline is a moment away gets no token reserved: its pass could not
        // patch in time (mutation: the margin dropped)
        assert!(matches!(
            f.request("e", "ns", "e", t(40), t(60), t(59)),
            Grant::Queued { paced: true, .. }
        ));
        tokio::time::advance(ms(500)).await;
        let late = t(60) - chrono::Duration::milliseconds(100);
        assert_eq!(f.pace_round(late), None);
        assert!(woken.try_recv().is_err());
        assert_eq!(f.waiting("e"), Some(t(40)));
    }

    /// Runs the pacer through the seconds `from..to` of paused time, a round every 100 ms; each
    /// slot it wakes patches, answered after `latency`.
    async fn pace_through(
        f: &Fleet,
        woken: &mut mpsc::UnboundedReceiver<ObjectRef<CachedEru>>,
        (from, to): (i64, i64),
        latency: std::time::Duration,
    ) {
        for second in from..to {
            for _ in 0..10 {
                tokio::time::advance(std::time::Duration::from_millis(100)).await;
                f.pace_round(t(second));
                while woken.try_recv().is_ok() {
                    f.patched(latency, false);
                }
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_adaptive_pace_comes_back_up_while_its_slots_wait_in_line() {
        let ms = std::time::Duration::from_millis;
        let (f, mut woken) = adaptive(None);
        // 2,000 slots due at once: the first burst's tokens are granted, the rest wait in line
        // and never ask again (the pacer wakes each in turn)
        for i in 0..2000 {
            if f.request(&format!("e{i}"), "ns", &format!("e{i}"), t(0), t(3600), t(0)) == Grant::Granted {
                f.patched(ms(5), false);
            }
        }
        pace_through(&f, &mut woken, (0, 3), ms(5)).await;
        // the API server slows down: the pace halves to its floor
        pace_through(&f, &mut woken, (3, 30), ms(100)).await;
        assert_eq!(f.pace_now(), Some((crate::eru::pace::FLOOR, Why::Latency)));
        // and recovers: the pace is the limit of the slots still in line, so it rises again
        // (mutation: the pacer not telling the pace it was the limit left it at its floor)
        pace_through(&f, &mut woken, (30, 60), ms(5)).await;
        let (rate, why) = f.pace_now().unwrap();
        assert!(rate >= 20.0, "the pace stayed at {rate} a second ({why:?})");
        assert_eq!(why, Why::Rising);
        assert!(
            f.sizes().0 > 0,
            "slots still wait: the pace, not the line, was the limit"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_adaptive_pace_does_not_rise_while_a_full_cap_holds_the_line() {
        let (f, mut woken) = adaptive(Some(1));
        assert_eq!(f.request("a", "ns", "a", t(0), t(3600), t(0)), Grant::Granted);
        for i in 0..100 {
            let name = format!("e{i}");
            let grant = f.request(&name, "ns", &name, t(0), t(3600), t(0));
            assert!(matches!(grant, Grant::Queued { paced: false, .. }));
        }
        let before = f.pace_now();
        // patches answer fast, slots wait: for the cap's place, not for a token (mutation: the
        // pacer telling the pace it was the limit whenever anything waits)
        for second in 1..=10 {
            tokio::time::advance(std::time::Duration::from_secs(1)).await;
            f.patched(std::time::Duration::from_millis(5), false);
            f.pace_round(t(second));
        }
        assert_eq!(f.pace_now(), before, "the cap, not the pace, was the limit");
        assert!(woken.try_recv().is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn under_a_cap_and_a_pace_a_place_is_needed_and_a_token() {
        let (f, mut woken) = paced(100.0, Some(1));
        assert_eq!(f.request("a", "ns", "a", t(0), t(300), t(0)), Grant::Granted);
        // tokens there are, a place there is not: queued for the cap, not the pace
        assert!(matches!(
            f.request("b", "ns", "b", t(1), t(300), t(1)),
            Grant::Queued { paced: false, .. }
        ));
        tokio::time::advance(std::time::Duration::from_secs(1)).await;
        assert_eq!(f.pace_round(t(2)), None, "no place: the pacer waits for one");
        assert!(woken.try_recv().is_err());
        f.leave("a", t(3));
        assert!(woken.try_recv().is_err(), "the pacer hands the place on");
        f.pace_round(t(3));
        assert_eq!(woken.try_recv().unwrap().name, "b");
        assert_eq!(f.sizes(), (0, 1));
    }
}
