//! The pace under tokio's paused clock: every instant is exact.

use std::time::Duration;

use tokio::time::{Instant, advance};

use super::*;

const MS: fn(u64) -> Duration = Duration::from_millis;

fn fixed(rate: f64) -> Pace {
    Pace::new(
        PaceConfig {
            rate,
            adaptive: false,
        },
        Instant::now(),
    )
}

fn adaptive(ceiling: f64) -> Pace {
    Pace::new(
        PaceConfig {
            rate: ceiling,
            adaptive: true,
        },
        Instant::now(),
    )
}

/// Asks for `demand` restarts a second, spread evenly, for `seconds`; every restart taken is
/// patched in `latency` (`throttled`: a 429 among its answers). Returns how many were taken.
async fn drive(pace: &mut Pace, demand: u32, seconds: u32, latency: Duration, throttled: bool) -> u32 {
    let step = Duration::from_secs(1) / demand;
    let mut taken = 0;
    for _ in 0..demand * seconds {
        advance(step).await;
        if pace.take(Instant::now()) {
            taken += 1;
            pace.observe(latency, throttled, Instant::now());
        }
        pace.judge(Instant::now());
    }
    taken
}

#[tokio::test(start_paused = true)]
async fn a_fixed_pace_lets_its_rate_through_and_no_more() {
    let mut pace = fixed(5.0);
    // a burst of one token (a tenth of a second's worth, at least one)
    assert_eq!(pace.available(Instant::now()), 1);
    let taken = drive(&mut pace, 100, 10, MS(5), false).await;
    assert!((49..=51).contains(&taken), "5/s for 10 s, took {taken}");
    // latency and 429s do not move a fixed pace
    drive(&mut pace, 100, 5, MS(5_000), true).await;
    assert_eq!(pace.rate(), 5.0);
    assert_eq!(pace.why(), Why::Ceiling);
    // the next token: a fifth of a second after the last one was taken
    assert!(!pace.take(Instant::now()));
    assert!(pace.next_token_in(Instant::now()) <= MS(200));
}

#[tokio::test(start_paused = true)]
async fn an_adaptive_pace_rises_to_its_ceiling_while_nothing_slows() {
    let mut pace = adaptive(300.0);
    assert_eq!((pace.rate(), pace.why()), (START, Why::Rising));
    // demand of 1,000 a second, every patch at its idle 5 ms: a tenth more each second, not
    // doubling (mutation: TCP's slow start, 20 → 40 → 80)
    drive(&mut pace, 1_000, 2, MS(5), false).await;
    assert!(
        (pace.rate() - 24.2).abs() < 1e-9,
        "20 → 22 → 24.2 in two seconds: {}",
        pace.rate()
    );
    drive(&mut pace, 1_000, 27, MS(5), false).await;
    assert_eq!((pace.rate(), pace.why()), (300.0, Why::Ceiling));
    // never above it
    drive(&mut pace, 1_000, 5, MS(5), false).await;
    assert_eq!(pace.rate(), 300.0);
}

#[tokio::test(start_paused = true)]
async fn an_adaptive_pace_does_not_rise_while_it_is_not_the_limit() {
    let mut pace = adaptive(300.0);
    // 5 a second, below the 20 it allows: it never had to refuse one, so it stays
    drive(&mut pace, 5, 10, MS(5), false).await;
    assert_eq!((pace.rate(), pace.why()), (START, Why::Rising));
}

#[tokio::test(start_paused = true)]
async fn an_adaptive_pace_halves_on_rising_latency_and_comes_back_up() {
    let mut pace = adaptive(300.0);
    drive(&mut pace, 1_000, 30, MS(5), false).await;
    assert_eq!(pace.rate(), 300.0);
    // the API server slows: 40 ms is 8× the idle 5 ms
    drive(&mut pace, 1_000, 1, MS(40), false).await;
    assert_eq!((pace.rate(), pace.why()), (150.0, Why::Latency));
    // still slow: the rollouts queued before the halving drain first (mutation: halving every
    // second went down to the floor while they did)
    drive(&mut pace, 1_000, 2, MS(40), false).await;
    assert_eq!(pace.rate(), 150.0, "one halving in {HOLD:?}");
    drive(&mut pace, 1_000, 1, MS(40), false).await;
    assert_eq!(pace.rate(), 75.0);
    // 15 ms is 3×: not slow. It rises again, a tenth at a time
    drive(&mut pace, 1_000, 1, MS(15), false).await;
    assert_eq!((pace.rate(), pace.why()), (82.5, Why::Rising));
    drive(&mut pace, 1_000, 30, MS(5), false).await;
    assert_eq!((pace.rate(), pace.why()), (300.0, Why::Ceiling));
}

#[tokio::test(start_paused = true)]
async fn an_adaptive_pace_halves_on_429s_whatever_the_latency() {
    let mut pace = adaptive(300.0);
    drive(&mut pace, 1_000, 30, MS(5), false).await;
    drive(&mut pace, 1_000, 1, MS(5), true).await;
    assert_eq!((pace.rate(), pace.why()), (150.0, Why::Throttled));
    // a 429 is the API server saying so: no waiting for a queue to drain
    drive(&mut pace, 1_000, 1, MS(5), true).await;
    assert_eq!(pace.rate(), 75.0);
    // but the patches' latency after it waits out the hold, as after a halving for latency
    drive(&mut pace, 1_000, 1, MS(40), false).await;
    assert_eq!((pace.rate(), pace.why()), (75.0, Why::Throttled));
}

#[tokio::test(start_paused = true)]
async fn an_adaptive_pace_never_goes_below_its_floor() {
    let mut pace = adaptive(300.0);
    drive(&mut pace, 1_000, 20, MS(5_000), true).await;
    assert_eq!(pace.rate(), FLOOR);
    // at the floor a restart still begins every second
    let taken = drive(&mut pace, 100, 10, MS(5_000), true).await;
    assert!((9..=11).contains(&taken), "{taken}");
}

#[tokio::test(start_paused = true)]
async fn after_a_quiet_minute_the_next_burst_starts_from_the_beginning() {
    let mut pace = adaptive(300.0);
    drive(&mut pace, 1_000, 30, MS(5), false).await;
    assert_eq!(pace.rate(), 300.0);
    advance(Duration::from_secs(61)).await;
    pace.observe(MS(5), false, Instant::now());
    assert_eq!((pace.rate(), pace.why()), (START, Why::Rising));
}

#[tokio::test(start_paused = true)]
async fn the_baseline_forgets_after_five_minutes() {
    let mut pace = adaptive(300.0);
    // idle latency 5 ms, then the cluster is slower for good: 30 ms, in bursts a minute apart
    drive(&mut pace, 1_000, 5, MS(5), false).await;
    for _ in 0..6 {
        advance(Duration::from_secs(50)).await;
        drive(&mut pace, 1_000, 5, MS(30), false).await;
    }
    // five minutes on, 30 ms is the baseline: the pace rises to its ceiling again (from where
    // the slow bursts left it: one at a time up to 10, then a tenth at a time)
    drive(&mut pace, 1_000, 60, MS(30), false).await;
    assert_eq!((pace.rate(), pace.why()), (300.0, Why::Ceiling));
}
