//! The restart pace: how many restarts may begin per second across the operator
//! (`--restart-rate`, `--restart-pace`), so that an SRE chooses how hard a fleet restart presses
//! the API server and everyone else who uses it.
//!
//! A pace is a token bucket the fleet queue ([`super::fleet`]) draws from: a due slot that finds
//! a free place but no token waits in the same slot-ordered queue as a slot that finds no place,
//! and is recorded `skipped/fleet_capacity` by its own pass if its starting deadline passes
//! first. The pace never drops, delays past a deadline or reorders a slot by itself.
//!
//! - **Fixed** (`--restart-rate R`): at most R restarts begin per second, in bursts of at most a
//!   tenth of a second's worth.
//! - **Adaptive** (`--restart-pace adaptive`, with `--restart-rate` as its ceiling): additive
//!   increase, multiplicative decrease on the restart patches' own latency. Each second with
//!   patches is judged once: a 429 among them, or their latency (a moving average) above
//!   [`SLOW`] times its idle baseline (the lowest such average of the last five minutes), halves
//!   the pace, at most once in [`HOLD`] for latency; a second in which slots waited for a token
//!   and that saw neither raises it by a tenth (at least 1). A burst begins at [`START`] a
//!   second; the pace never goes below [`FLOOR`] or above the ceiling, and after a minute without
//!   patches it starts again from [`START`].
//!
//!   It does not double to find the ceiling, as TCP's slow start does: the patches are cheap, the
//!   rollouts they start are not, and the patches' latency rises only once the rollouts queue.
//!   A burst that doubled from 20 a second sent 1,978 restarts in its first 10 s on two cores
//!   (docs/performance.md, "The restart pace"), and the queue it left slowed the API server's
//!   other clients for a minute after. After a halving the patches stay slow until that queue
//!   drains, so halving again every second went down to near [`FLOOR`]: [`HOLD`] lets it drain.

use std::{collections::VecDeque, time::Duration};

use tokio::time::Instant;

/// Restarts per second an adaptive pace begins a burst with (or its ceiling, if lower).
pub const START: f64 = 20.0;
/// The adaptive pace's ceiling without `--restart-rate`.
pub const ADAPTIVE_CEILING: f64 = 500.0;
/// The adaptive pace never goes lower.
pub const FLOOR: f64 = 1.0;
/// Patch latency (moving average) above this multiple of its idle baseline counts as the API
/// server slowing down.
pub const SLOW: f64 = 4.0;
/// How often the adaptive pace is judged.
const INTERVAL: Duration = Duration::from_secs(1);
/// After a halving (for latency or a 429), a halving for latency waits this long: the patches
/// stay slow while the rollouts queued before it drain. (A 429 halves at once.)
pub const HOLD: Duration = Duration::from_secs(3);
/// How long the baseline remembers: five buckets of a minute.
const BUCKET: Duration = Duration::from_secs(60);
const BUCKETS: usize = 5;
/// Without a patch this long, the next burst starts again from [`START`].
const IDLE: Duration = Duration::from_secs(60);
/// Weight of a new sample in the moving average.
const ALPHA: f64 = 0.3;

/// What the pace is set to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PaceConfig {
    /// Most restarts begun per second: the fixed pace, or the adaptive pace's ceiling.
    pub rate: f64,
    pub adaptive: bool,
}

/// Why the pace is what it is (`eru_restart_pace_why{why}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum Why {
    /// The configured rate (fixed), or the adaptive pace at its ceiling.
    Ceiling,
    /// Adaptive, starting a burst (or raising while nothing slowed down).
    Rising,
    /// Adaptive, lowered: the patches' latency rose above [`SLOW`] × its baseline.
    Latency,
    /// Adaptive, lowered: the API server answered 429.
    Throttled,
}

/// A token bucket whose rate the adaptive mode moves.
#[derive(Debug)]
pub struct Pace {
    config: PaceConfig,
    rate: f64,
    why: Why,
    tokens: f64,
    refilled: Instant,
    /// Adaptive: when the pace was last halved.
    lowered: Option<Instant>,
    /// Adaptive: the current interval's start, and what it saw.
    interval: Instant,
    samples: u32,
    throttled: bool,
    /// A request found no token, or slots still waited after the pacer's round, in this
    /// interval (the pace was the limit).
    limited: bool,
    average: Option<f64>,
    last_sample: Option<Instant>,
    /// (bucket start, lowest average judged in it), newest last.
    baseline: VecDeque<(Instant, f64)>,
}

impl Pace {
    pub fn new(config: PaceConfig, now: Instant) -> Self {
        let rate = if config.adaptive {
            START.min(config.rate)
        } else {
            config.rate
        };
        let mut pace = Self {
            config,
            rate,
            why: Why::Ceiling,
            tokens: 0.0,
            refilled: now,
            lowered: None,
            interval: now,
            samples: 0,
            throttled: false,
            limited: false,
            average: None,
            last_sample: None,
            baseline: VecDeque::new(),
        };
        pace.why = pace.at_rate_why();
        pace.tokens = pace.burst();
        pace
    }

    /// Restarts per second now.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    pub fn why(&self) -> Why {
        self.why
    }

    pub fn config(&self) -> PaceConfig {
        self.config
    }

    /// The most tokens the bucket holds: a tenth of a second's worth, at least one.
    fn burst(&self) -> f64 {
        (self.rate / 10.0).max(1.0)
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst());
        self.refilled = now;
    }

    /// Whole tokens available now.
    pub fn available(&mut self, now: Instant) -> usize {
        self.refill(now);
        self.tokens.floor() as usize
    }

    /// Takes a token if there is one; a request that finds none marks the pace as the limit.
    pub fn take(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            self.limited = true;
            false
        }
    }

    /// A request waits for a token (others in line before it took what there was), or slots
    /// with a place still wait after the pacer's round: the pace was the limit.
    pub fn refused(&mut self) {
        self.limited = true;
    }

    /// How long until the next whole token.
    pub fn next_token_in(&mut self, now: Instant) -> Duration {
        self.refill(now);
        let missing = (1.0 - self.tokens).max(0.0);
        Duration::from_secs_f64(missing / self.rate)
    }

    /// A restart patch answered after `latency`; `throttled` if a 429 was among its answers.
    /// A fixed pace ignores it.
    pub fn observe(&mut self, latency: Duration, throttled: bool, now: Instant) {
        if !self.config.adaptive {
            return;
        }
        self.judge(now);
        if self
            .last_sample
            .is_some_and(|at| now.saturating_duration_since(at) >= IDLE)
        {
            self.start_again(now);
        }
        self.last_sample = Some(now);
        let sample = latency.as_secs_f64();
        self.average = Some(self.average.map_or(sample, |a| a + ALPHA * (sample - a)));
        self.samples += 1;
        self.throttled |= throttled;
    }

    /// Judges the interval that ended, if one did (an adaptive pace's tick; also called by
    /// [`Pace::observe`]).
    pub fn judge(&mut self, now: Instant) {
        if !self.config.adaptive || now.saturating_duration_since(self.interval) < INTERVAL {
            return;
        }
        self.refill(now);
        if self.samples > 0 {
            let average = self.average.unwrap_or_default();
            let baseline = self.baseline(now, average);
            tracing::debug!(
                rate = self.rate,
                samples = self.samples,
                average_ms = average * 1e3,
                baseline_ms = baseline * 1e3,
                limited = self.limited,
                throttled = self.throttled,
                "pace judged"
            );
            if self.throttled {
                self.lower(Why::Throttled, now);
            } else if average > SLOW * baseline {
                if self
                    .lowered
                    .is_none_or(|at| now.saturating_duration_since(at) >= HOLD)
                {
                    self.lower(Why::Latency, now);
                }
            } else if self.limited {
                self.raise();
            }
        }
        self.interval = now;
        self.samples = 0;
        self.throttled = false;
        self.limited = false;
    }

    /// The idle baseline: the lowest judged average of the last five minutes (`average`, this
    /// interval's, counts in the current minute's bucket).
    fn baseline(&mut self, now: Instant, average: f64) -> f64 {
        while self
            .baseline
            .front()
            .is_some_and(|(start, _)| now.saturating_duration_since(*start) >= BUCKET * BUCKETS as u32)
        {
            self.baseline.pop_front();
        }
        match self.baseline.back_mut() {
            Some((start, low)) if now.saturating_duration_since(*start) < BUCKET => {
                *low = low.min(average);
            }
            _ => self.baseline.push_back((now, average)),
        }
        self.baseline
            .iter()
            .map(|(_, low)| *low)
            .fold(f64::INFINITY, f64::min)
            .max(1e-4)
    }

    fn lower(&mut self, why: Why, now: Instant) {
        self.rate = (self.rate / 2.0).max(FLOOR);
        self.lowered = Some(now);
        self.tokens = self.tokens.min(self.burst());
        self.why = why;
    }

    fn raise(&mut self) {
        self.rate = (self.rate + (self.rate / 10.0).max(1.0)).min(self.config.rate);
        self.why = self.at_rate_why();
    }

    fn start_again(&mut self, now: Instant) {
        self.rate = START.min(self.config.rate);
        self.lowered = None;
        self.why = self.at_rate_why();
        self.tokens = self.tokens.min(self.burst());
        self.interval = now;
    }

    fn at_rate_why(&self) -> Why {
        if self.rate >= self.config.rate {
            Why::Ceiling
        } else {
            Why::Rising
        }
    }
}

#[cfg(test)]
mod tests;
