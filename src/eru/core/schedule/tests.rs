use chrono::TimeZone;

use super::*;

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
}

fn next(expr: &str, tz: Option<&str>, after: DateTime<Utc>, n: usize) -> Vec<String> {
    Schedule::parse(expr, tz)
        .unwrap()
        .upcoming(after, n)
        .iter()
        .map(|t| t.to_rfc3339())
        .collect()
}

#[test]
fn weekday_numbers_follow_crontab() {
    // 2026-11-22 is a Sunday.
    let sunday = utc(2026, 11, 22, 12, 0, 0);
    assert_eq!(next("0 9 * * 1", None, sunday, 1), ["2026-11-23T09:00:00+00:00"]);
    assert_eq!(next("0 9 * * 0", None, sunday, 1), ["2026-11-29T09:00:00+00:00"]);
    assert_eq!(next("0 9 * * 7", None, sunday, 1), ["2026-11-29T09:00:00+00:00"]);
    assert_eq!(
        next("0 9 * * mon", None, sunday, 1),
        next("0 9 * * 1", None, sunday, 1)
    );
    assert_eq!(
        next("0 9 * * SAT", None, sunday, 1),
        ["2026-11-28T09:00:00+00:00"]
    );
}

#[test]
fn names_ranges_lists_and_steps() {
    let t = utc(2026, 1, 1, 0, 0, 0);
    assert_eq!(
        next("0 0 1 feb,jun *", None, t, 2),
        ["2026-02-01T00:00:00+00:00", "2026-06-01T00:00:00+00:00"]
    );
    assert_eq!(
        next("*/20 9-10 * * *", None, t, 4),
        [
            "2026-01-01T09:00:00+00:00",
            "2026-01-01T09:20:00+00:00",
            "2026-01-01T09:40:00+00:00",
            "2026-01-01T10:00:00+00:00"
        ]
    );
    assert_eq!(
        next("0 0 * * mon-fri", None, utc(2026, 1, 2, 12, 0, 0), 1),
        ["2026-01-05T00:00:00+00:00"]
    );
}

#[test]
fn macros() {
    let t = utc(2026, 11, 22, 12, 30, 0);
    assert_eq!(next("@hourly", None, t, 1), ["2026-11-22T13:00:00+00:00"]);
    assert_eq!(next("@daily", None, t, 1), ["2026-11-23T00:00:00+00:00"]);
    assert_eq!(next("@weekly", None, t, 1), ["2026-11-29T00:00:00+00:00"]);
    assert_eq!(next("@monthly", None, t, 1), ["2026-12-01T00:00:00+00:00"]);
    assert_eq!(next("@yearly", None, t, 1), ["2027-01-01T00:00:00+00:00"]);
    assert_eq!(next("@annually", None, t, 1), next("@yearly", None, t, 1));
}

#[test]
fn day_of_month_or_day_of_week() {
    // both restricted: the 13th OR a Friday (2026-11-13 is a Friday, 2026-11-20 too)
    let t = utc(2026, 11, 1, 0, 0, 0);
    assert_eq!(
        next("0 0 13 * fri", None, t, 3),
        [
            "2026-11-06T00:00:00+00:00",
            "2026-11-13T00:00:00+00:00",
            "2026-11-20T00:00:00+00:00"
        ]
    );
    // one restricted: only that one
    assert_eq!(next("0 0 13 * *", None, t, 1), ["2026-11-13T00:00:00+00:00"]);
}

#[test]
fn day_fields_follow_kubernetes_cronjobs() {
    assert_eq!(
        normalize_day_fields(&["0", "0", "*/14", "*", "sun"]),
        "0 0 1-31/14 * 0"
    );
    assert_eq!(
        normalize_day_fields(&["0", "0", "*", "*", "1/2"]),
        "0 0 * * 1-6/2"
    );
    assert_eq!(
        normalize_day_fields(&["0", "0", "*", "*", "*/2,5"]),
        "0 0 * * 0-6/2,5"
    );
    assert_eq!(
        normalize_day_fields(&["0", "0", "0", "*/1", "*", "mon-fri"]),
        "0 0 0 */1 * 1-5"
    );
    assert_eq!(
        normalize_day_fields(&["0", "0", "*", "*", "SUN-sun"]),
        "0 0 * * 0-0"
    );
    assert!(
        Schedule::parse("0 0 * * sat-sun", None).is_err(),
        "CronJobs refuse a backwards range"
    );
    // 2026-11-22 is a Sunday: `1/2` is Mon, Wed, Fri, never Sunday-as-7
    let t = utc(2026, 11, 21, 12, 0, 0);
    assert_eq!(
        next("0 9 * * 1/2", None, t, 3),
        [
            "2026-11-23T09:00:00+00:00",
            "2026-11-25T09:00:00+00:00",
            "2026-11-27T09:00:00+00:00"
        ]
    );
    // `*/14` restricts the day of month, so it ORs with a restricted day of week
    assert_eq!(
        next("0 0 */14 * sun", None, utc(2026, 11, 2, 0, 0, 0), 2),
        ["2026-11-08T00:00:00+00:00", "2026-11-15T00:00:00+00:00"]
    );
}

#[test]
fn leap_day() {
    assert_eq!(
        next("0 0 29 2 *", None, utc(2026, 1, 1, 0, 0, 0), 2),
        ["2028-02-29T00:00:00+00:00", "2032-02-29T00:00:00+00:00"]
    );
}

#[test]
fn six_fields_have_seconds() {
    assert_eq!(
        next("*/10 * * * * *", None, utc(2026, 11, 22, 3, 0, 5), 3),
        [
            "2026-11-22T03:00:10+00:00",
            "2026-11-22T03:00:20+00:00",
            "2026-11-22T03:00:30+00:00"
        ]
    );
}

#[test]
fn spring_forward_gap_runs_once_after_the_gap() {
    // America/New_York 2026-03-08: 02:00 EST jumps to 03:00 EDT (07:00 UTC).
    assert_eq!(
        next(
            "30 2 * * *",
            Some("America/New_York"),
            utc(2026, 3, 7, 12, 0, 0),
            2
        ),
        ["2026-03-08T07:00:00+00:00", "2026-03-09T06:30:00+00:00"]
    );
    // Europe/Berlin 2026-03-29: 02:00 CET jumps to 03:00 CEST (01:00 UTC).
    assert_eq!(
        next("30 2 * * *", Some("Europe/Berlin"), utc(2026, 3, 28, 12, 0, 0), 2),
        ["2026-03-29T01:00:00+00:00", "2026-03-30T00:30:00+00:00"]
    );
}

#[test]
fn fall_back_overlap_runs_once() {
    // America/New_York 2026-11-01: 01:00-02:00 happens twice (EDT, then EST).
    assert_eq!(
        next(
            "30 1 * * *",
            Some("America/New_York"),
            utc(2026, 10, 31, 12, 0, 0),
            2
        ),
        ["2026-11-01T05:30:00+00:00", "2026-11-02T06:30:00+00:00"]
    );
    // Europe/Berlin 2026-10-25: 02:00-03:00 happens twice (CEST, then CET).
    assert_eq!(
        next(
            "30 2 * * *",
            Some("Europe/Berlin"),
            utc(2026, 10, 24, 12, 0, 0),
            2
        ),
        ["2026-10-25T00:30:00+00:00", "2026-10-26T01:30:00+00:00"]
    );
}

#[test]
fn multi_valued_fields_run_each_wall_clock_time_once_across_dst() {
    let ny = Some("America/New_York");
    // fall back 2026-11-01: 01:00 once (EDT), not twice
    assert_eq!(
        next("0 1,13 * * *", ny, utc(2026, 11, 1, 0, 0, 0), 3),
        [
            "2026-11-01T05:00:00+00:00",
            "2026-11-01T18:00:00+00:00",
            "2026-11-02T06:00:00+00:00"
        ]
    );
    // spring forward 2027-03-14: 02:30 does not exist; it runs at 03:00 EDT, not never
    assert_eq!(
        next("30 2,14 * * *", ny, utc(2027, 3, 14, 0, 0, 0), 2),
        ["2027-03-14T07:00:00+00:00", "2027-03-14T18:30:00+00:00"]
    );
    // Berlin 2027-03-28: 02:15 runs at 03:00 CEST, then 03:15
    assert_eq!(
        next(
            "15 2,3 * * *",
            Some("Europe/Berlin"),
            utc(2027, 3, 27, 12, 0, 0),
            2
        ),
        ["2027-03-28T01:00:00+00:00", "2027-03-28T01:15:00+00:00"]
    );
    // several gap times and a slot right after the gap: one restart at that instant
    assert_eq!(
        next(
            "*/15 2,3 * * *",
            Some("Europe/Berlin"),
            utc(2027, 3, 27, 12, 0, 0),
            2
        ),
        ["2027-03-28T01:00:00+00:00", "2027-03-28T01:15:00+00:00"]
    );
}

#[test]
fn every_hour_patterns_run_every_real_hour() {
    let ny = Some("America/New_York");
    // fall back: 01:30 EDT and 01:30 EST are both real hours
    assert_eq!(
        next("30 * * * *", ny, utc(2026, 11, 1, 4, 0, 0), 4),
        [
            "2026-11-01T04:30:00+00:00",
            "2026-11-01T05:30:00+00:00",
            "2026-11-01T06:30:00+00:00",
            "2026-11-01T07:30:00+00:00"
        ]
    );
    // spring forward: the hour 02:00-03:00 does not exist, so neither does its slot
    assert_eq!(
        next("30 */1 * * *", ny, utc(2027, 3, 14, 5, 0, 0), 3),
        [
            "2027-03-14T05:30:00+00:00",
            "2027-03-14T06:30:00+00:00",
            "2027-03-14T07:30:00+00:00"
        ]
    );
}

/// DST, every pattern, against a brute-force oracle: minute by minute around real
/// transitions in zones with 1-hour, 30-minute (Lord Howe) and southern-hemisphere changes.
mod dst_property {
    use chrono::LocalResult;
    use proptest::prelude::*;

    use super::*;

    const ZONES: [&str; 5] = [
        "America/New_York",
        "Europe/Berlin",
        "Australia/Lord_Howe",
        "Australia/Sydney",
        "America/Santiago",
    ];

    fn transitions(tz: Tz) -> Vec<DateTime<Utc>> {
        let (mut t, end) = (utc(2026, 1, 1, 0, 0, 0), utc(2028, 1, 1, 0, 0, 0));
        let mut out = Vec::new();
        while let Some(at) = first_transition(tz, t, end) {
            out.push(at);
            t = at;
        }
        out
    }

    fn matches(minutes: &[u32], hours: &Option<Vec<u32>>, step: u32, naive: NaiveDateTime) -> bool {
        use chrono::Timelike;
        minutes.contains(&naive.minute())
            && match hours {
                Some(h) => h.contains(&naive.hour()),
                None => naive.hour().is_multiple_of(step),
            }
    }

    /// What the module docs promise, computed the slow way.
    fn oracle(
        tz: Tz,
        wall_clock: bool,
        test: impl Fn(NaiveDateTime) -> bool,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Vec<DateTime<Utc>> {
        let minute = Duration::minutes(1);
        let mut out = Vec::new();
        if wall_clock {
            let local = |t: DateTime<Utc>| t.with_timezone(&tz).naive_local();
            let (mut n, end) = (local(from) - Duration::hours(3), local(to) + Duration::hours(3));
            while n <= end {
                if test(n) {
                    let mut m = n;
                    let at = loop {
                        match tz.from_local_datetime(&m) {
                            LocalResult::Single(t) => break t,
                            LocalResult::Ambiguous(a, _) => break a,
                            // in a gap: the first wall-clock time after it
                            LocalResult::None => m += minute,
                        }
                    };
                    out.push(at.with_timezone(&Utc));
                }
                n += minute;
            }
        } else {
            let mut t = from;
            while t <= to {
                if test(t.with_timezone(&tz).naive_local()) {
                    out.push(t);
                }
                t += minute;
            }
        }
        out.retain(|t| *t > from && *t <= to);
        out.sort();
        out.dedup();
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        #[test]
        fn slots_are_what_the_docs_promise_around_every_transition(
            zone in 0..ZONES.len(),
            which in 0..4usize,
            minutes in prop::collection::btree_set(0u32..60, 1..4),
            hours in prop_oneof![
                prop::collection::btree_set(0u32..24, 1..4).prop_map(Some),
                Just(None),
            ],
            step in 1u32..5,
        ) {
            let tz: Tz = ZONES[zone].parse().unwrap();
            let at = transitions(tz)[which];
            let minutes: Vec<u32> = minutes.into_iter().collect();
            let hours: Option<Vec<u32>> = hours.map(|h| h.into_iter().collect());
            let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
            let hour_field = match &hours {
                Some(h) => list(h),
                None if step == 1 => "*".to_string(),
                None => format!("*/{step}"),
            };
            let expr = format!("{} {hour_field} * * *", list(&minutes));
            let schedule = Schedule::parse(&expr, Some(ZONES[zone])).unwrap();
            let (from, to) = (at - Duration::hours(30), at + Duration::hours(30));
            let mine: Vec<_> = schedule.slots_between(from, to).collect();
            let expected = oracle(tz, hours.is_some(), |n| matches(&minutes, &hours, step, n), from, to);
            prop_assert_eq!(mine, expected, "{} in {} around {}", expr, ZONES[zone], at);
        }
    }
}

#[test]
fn slots_between_is_half_open_and_lazy() {
    let s = Schedule::parse("* * * * * *", None).unwrap();
    let from = utc(2026, 11, 22, 3, 0, 0);
    let slots: Vec<_> = s.slots_between(from, utc(2026, 11, 22, 3, 0, 3)).collect();
    assert_eq!(
        slots,
        [
            utc(2026, 11, 22, 3, 0, 1),
            utc(2026, 11, 22, 3, 0, 2),
            utc(2026, 11, 22, 3, 0, 3)
        ]
    );
    // a month of seconds is not materialized unless taken
    assert_eq!(
        s.slots_between(from, utc(2026, 12, 22, 3, 0, 0)).take(2).count(),
        2
    );
}

#[test]
fn bad_input_is_a_clear_error() {
    assert!(matches!(
        Schedule::parse("* * *", None),
        Err(ScheduleError::Expression { .. })
    ));
    assert!(matches!(
        Schedule::parse("61 * * * *", None),
        Err(ScheduleError::Expression { .. })
    ));
    assert!(matches!(
        Schedule::parse("@fortnightly", None),
        Err(ScheduleError::Expression { .. })
    ));
    assert!(matches!(
        Schedule::parse("* * * * * * *", None),
        Err(ScheduleError::Expression { .. })
    ));
    assert_eq!(
        Schedule::parse("* * * * *", Some("Mars/Olympus"))
            .unwrap_err()
            .to_string(),
        "unknown time zone 'Mars/Olympus' (use an IANA name such as Europe/Berlin)"
    );
}

/// Hashed fields (`H`): the hash's reference values, the contract's pinned values, ranges,
/// stability and spread over many names, and errors.
mod hashed {
    use super::*;

    /// Names as clusters have them: a few namespaces, numbered Deployments (sequential names are
    /// the hard case for a weak hash: they differ in their last bytes only).
    fn names(n: usize) -> impl Iterator<Item = String> {
        (0..n).map(|i| eru_seed(&format!("team-{}", i % 40), &format!("web-{i}")))
    }

    /// The value of field `at` (0-based in `expr`) of `expr` resolved under `seed`.
    fn field(expr: &str, seed: &str, at: usize) -> String {
        resolve(expr, seed)
            .unwrap()
            .split(' ')
            .nth(at)
            .unwrap()
            .to_string()
    }

    /// The values a resolved part stands for: `V` or `START-END/N`.
    fn values(part: &str) -> Vec<u32> {
        match part.split_once('/') {
            None => vec![part.parse().unwrap()],
            Some((range, step)) => {
                let (start, end) = range.split_once('-').unwrap();
                let (start, end): (u32, u32) = (start.parse().unwrap(), end.parse().unwrap());
                (start..=end).step_by(step.parse().unwrap()).collect()
            }
        }
    }

    /// Pearson's chi-square statistic of `counts` against a uniform spread.
    fn chi_square(counts: &[u32]) -> f64 {
        let total: u32 = counts.iter().sum();
        let expected = f64::from(total) / counts.len() as f64;
        counts
            .iter()
            .map(|&c| (f64::from(c) - expected).powi(2) / expected)
            .sum()
    }

    #[test]
    fn field_n_is_output_n_plus_1_of_the_generator_seeded_with_the_seeds_fnv() {
        use crate::eru::core::hash::{fnv1a64, splitmix64};
        for n in 0..6u64 {
            assert_eq!(
                field_hash("default/web", n as usize),
                splitmix64(fnv1a64(b"default/web"), n + 1)
            );
        }
    }

    /// The product contract: these values are where users' restarts happen. A change here moves
    /// every hashed schedule of every user; it is never a test to update casually.
    #[test]
    fn hashed_values_are_pinned() {
        // the same values from an independent Python implementation of the definition
        let pinned = [
            ("H 3 * * *", "default/web", "35 3 * * *"),
            ("H 3 * * *", "shop/web", "17 3 * * *"),
            ("H 3 * * *", "default/api", "51 3 * * *"),
            ("H 3 * * *", "kube-system/coredns", "21 3 * * *"),
            ("H H * * *", "default/web", "35 9 * * *"),
            ("H H H * * *", "default/web", "59 35 9 * * *"),
            ("H/15 * * * *", "default/web", "5-59/15 * * * *"),
            ("H(0-29) 2 * * *", "default/web", "5 2 * * *"),
            ("H(0-29)/10 * * * *", "default/web", "5-29/10 * * * *"),
            ("0 0 H H H", "default/web", "0 0 14 10 3"),
            ("H(0-29),H(30-59) H(1-5) * * *", "default/web", "5,35 3 * * *"),
        ];
        for (expr, seed, want) in pinned {
            assert_eq!(resolve(expr, seed).unwrap(), want, "{expr} for {seed}");
        }
    }

    #[test]
    fn every_form_stays_in_its_range_and_is_stable() {
        // (field in 6-field order, H form, lowest and highest value it may give, step)
        let forms: &[(usize, &str, u32, u32, u32)] = &[
            (0, "H", 0, 59, 1),
            (0, "H/10", 0, 59, 10),
            (0, "H(30-44)", 30, 44, 1),
            (0, "H(5-55)/7", 5, 55, 7),
            (1, "H", 0, 59, 1),
            (1, "H/1", 0, 59, 1),
            (1, "H/15", 0, 59, 15),
            (1, "H/60", 0, 59, 60),
            (1, "H(0-29)", 0, 29, 1),
            (1, "H(0-29)/10", 0, 29, 10),
            (1, "H(59-59)", 59, 59, 1),
            (2, "H", 0, 23, 1),
            (2, "H/4", 0, 23, 4),
            (2, "H(1-5)", 1, 5, 1),
            (2, "H(8-20)/3", 8, 20, 3),
            (3, "H", 1, 28, 1),
            (3, "H/7", 1, 28, 7),
            (3, "H(10-20)", 10, 20, 1),
            (3, "H(1-28)/28", 1, 28, 28),
            (4, "H", 1, 12, 1),
            (4, "H/3", 1, 12, 3),
            (4, "H/12", 1, 12, 12),
            (4, "H(6-8)", 6, 8, 1),
            (5, "H", 0, 6, 1),
            (5, "H/2", 0, 6, 2),
            (5, "H/7", 0, 6, 7),
            (5, "H(1-5)", 1, 5, 1),
            (5, "H(1-5)/2", 1, 5, 2),
        ];
        // croner sees each distinct resolved expression once (there are at most 60 per form)
        let mut resolved = std::collections::BTreeSet::new();
        for seed in names(10_000) {
            for &(at, form, low, high, step) in forms {
                let mut fields = ["0", "0", "0", "1", "1", "*"];
                fields[at] = form;
                let expr = fields.join(" ");
                let full = resolve(&expr, &seed).unwrap();
                let part = full.split(' ').nth(at).unwrap();
                let got = values(part);
                let context = format!("{expr} for {seed} = {part}");
                assert!(got.iter().all(|v| (low..=high).contains(v)), "{context}");
                if step == 1 && !form.contains('/') {
                    assert_eq!(got.len(), 1, "{context}");
                } else {
                    // every step-th value from an offset below the step, up to the end of the range
                    assert!(got[0] < low + step, "{context}");
                    assert!(got.windows(2).all(|w| w[1] - w[0] == step), "{context}");
                    assert!(got[got.len() - 1] + step > high, "{context}");
                }
                assert_eq!(
                    full,
                    resolve(&expr, &seed).unwrap(),
                    "same seed, same value: {context}"
                );
                resolved.insert(full);
            }
        }
        for expr in resolved {
            Schedule::parse(&expr, None).unwrap_or_else(|e| panic!("{e}"));
        }
    }

    /// 10,000 names over each field's range, for `H` alone and two restricted forms: every bucket
    /// within 30 % of its share, and Pearson's chi-square below its 99.9th percentile (the bounds
    /// are that percentile for k - 1 degrees of freedom). The names are fixed, so this is
    /// deterministic: a failure means the hash changed or is worse than random.
    #[test]
    fn values_spread_uniformly() {
        // (expr, field to count, lowest value, buckets, chi-square bound)
        let cases = [
            ("H * * * * *", 0, 0, 60, 98.32),
            ("H * * * *", 0, 0, 60, 98.32),
            ("0 H * * *", 1, 0, 24, 49.73),
            ("0 0 H * *", 2, 1, 28, 55.48),
            ("0 0 1 H *", 3, 1, 12, 31.26),
            ("0 0 * * H", 4, 0, 7, 22.46),
            ("H(0-29) 3 * * *", 0, 0, 30, 58.30),
            ("H/15 * * * *", 0, 0, 15, 36.12),
        ];
        for (expr, at, low, buckets, bound) in cases {
            let mut counts = vec![0u32; buckets];
            for seed in names(10_000) {
                let first = values(&field(expr, &seed, at))[0];
                counts[(first - low) as usize] += 1;
            }
            let share = 10_000.0 / buckets as f64;
            let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
            let chi = chi_square(&counts);
            eprintln!(
                "{expr}: {buckets} buckets of {share:.1}: min {min}, max {max}, chi-square {chi:.1} (bound {bound})"
            );
            assert!(
                counts
                    .iter()
                    .all(|&c| (f64::from(c) - share).abs() <= 0.3 * share),
                "{expr}: {counts:?}"
            );
            assert!(chi < bound, "{expr}: chi-square {chi:.1} >= {bound}: {counts:?}");
        }
    }

    /// The minute and the hour of one Eru are independent: the joint spread over quarter-hours
    /// and six-hour blocks (16 buckets) is uniform too.
    #[test]
    fn fields_of_one_seed_are_independent() {
        let mut counts = vec![0u32; 16];
        for seed in names(10_000) {
            let resolved = resolve("H H * * *", &seed).unwrap();
            let mut fields = resolved.split(' ').map(|f| f.parse::<usize>().unwrap());
            let (minute, hour) = (fields.next().unwrap(), fields.next().unwrap());
            counts[minute / 15 * 4 + hour / 6] += 1;
        }
        let chi = chi_square(&counts);
        eprintln!("H H * * *: minute quarter x hour block: chi-square {chi:.1} (bound 37.70)");
        assert!(chi < 37.70, "chi-square {chi:.1}: {counts:?}");
    }

    #[test]
    fn seconds_are_optional_and_share_the_minute_hash() {
        for seed in names(100) {
            let five = resolve("H H * * *", &seed).unwrap();
            let six = resolve("0 H H * * *", &seed).unwrap();
            assert_eq!(format!("0 {five}"), six, "{seed}");
        }
    }

    #[test]
    fn a_hashed_schedule_runs_at_its_resolved_time() {
        let t = utc(2026, 11, 22, 12, 0, 0);
        let hashed = Schedule::parse_for("H 3 * * *", None, "default/web").unwrap();
        assert_eq!(
            hashed.upcoming(t, 2),
            [utc(2026, 11, 23, 3, 35, 0), utc(2026, 11, 24, 3, 35, 0)]
        );
        // DST handling applies to the resolved pattern: 02:H in New York's gap runs after it
        let ny = Schedule::parse_for("H 2 * * *", Some("America/New_York"), "default/web").unwrap();
        assert_eq!(
            ny.upcoming(utc(2026, 3, 7, 12, 0, 0), 1),
            [utc(2026, 3, 8, 7, 0, 0)]
        );
        // H/15: every 15 minutes from the hashed offset (5)
        let quarter = Schedule::parse_for("H/15 * * * *", None, "default/web").unwrap();
        assert_eq!(
            quarter.upcoming(t, 3),
            [
                utc(2026, 11, 22, 12, 5, 0),
                utc(2026, 11, 22, 12, 20, 0),
                utc(2026, 11, 22, 12, 35, 0)
            ]
        );
    }

    #[test]
    fn without_h_parse_for_is_parse() {
        let t = utc(2026, 11, 22, 12, 0, 0);
        for expr in [
            "0 3 * * *",
            "  */20   9-10 * * *  ",
            "0 9 * * THU",
            "0 0 */14 * sun",
            "*/10 * * * * *",
            "30 2,14 * * *",
            "@daily",
            "@hourly",
        ] {
            for tz in [None, Some("America/New_York")] {
                let plain = Schedule::parse(expr, tz).unwrap();
                let seeded = Schedule::parse_for(expr, tz, "default/web").unwrap();
                assert_eq!(plain.upcoming(t, 20), seeded.upcoming(t, 20), "{expr}");
                assert_eq!(plain.wall_clock, seeded.wall_clock, "{expr}");
            }
        }
        for expr in ["* * *", "61 * * * *", "@fortnightly", "0 0 * * sat-sun"] {
            assert_eq!(
                Schedule::parse(expr, None).unwrap_err(),
                Schedule::parse_for(expr, None, "default/web").unwrap_err(),
                "{expr}"
            );
        }
        assert_eq!(resolve("  0   3 * * * ", "default/web").unwrap(), "0 3 * * *");
        assert_eq!(resolve(" @daily ", "default/web").unwrap(), "@daily");
    }

    #[test]
    fn h_needs_a_name_except_to_validate() {
        let err = Schedule::parse("H 3 * * *", None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid schedule 'H 3 * * *': H is resolved from the Eru's namespace/name; \
             preview it with --name NS/NAME"
        );
        assert!(
            Schedule::parse("0 9 * * THU", None).is_ok(),
            "a day name with an H is no H"
        );
        assert_eq!(validate("H 3 * * *", None), Ok(()));
        assert_eq!(validate("H(0-29)/10 H * * *", Some("Europe/Berlin")), Ok(()));
        assert_eq!(validate("0 3 * * *", None), Ok(()));
        assert!(validate("61 * * * *", None).is_err());
        assert!(validate("H(0-60) * * * *", None).is_err());
        assert!(matches!(
            validate("H * * * *", Some("Mars/Olympus")),
            Err(ScheduleError::TimeZone(_))
        ));
        // a bad form is reported as such, not as a missing name
        assert!(
            Schedule::parse("H(9-1) * * * *", None)
                .unwrap_err()
                .to_string()
                .contains("ends before it starts")
        );
    }

    #[test]
    fn bad_h_forms_are_clear_errors() {
        let reason = |expr: &str| match resolve(expr, "default/web") {
            Err(ScheduleError::Expression { reason, .. }) => reason,
            other => panic!("{expr}: {other:?}"),
        };
        assert_eq!(
            reason("H(0-60) * * * *"),
            "'H(0-60)' in the minute field: H ranges lie within 0-59"
        );
        assert_eq!(
            reason("0 0 H(1-31) * *"),
            "'H(1-31)' in the day-of-month field: H ranges lie within 1-28"
        );
        assert_eq!(
            reason("0 0 * * H(1-7)"),
            "'H(1-7)' in the day-of-week field: H ranges lie within 0-6"
        );
        assert_eq!(
            reason("0 0 0 H(0-3) * *"),
            "'H(0-3)' in the day-of-month field: H ranges lie within 1-28"
        );
        assert_eq!(
            reason("H(30-10) * * * *"),
            "'H(30-10)' in the minute field: the range 30-10 ends before it starts"
        );
        assert_eq!(
            reason("H/0 * * * *"),
            "'H/0' in the minute field: the step must be at least 1"
        );
        assert_eq!(
            reason("0 H/25 * * *"),
            "'H/25' in the hour field: the step 25 is larger than the range 0-23"
        );
        assert_eq!(
            reason("H(0-9)/11 * * * *"),
            "'H(0-9)/11' in the minute field: the step 11 is larger than the range 0-9"
        );
        assert_eq!(
            reason("h 3 * * *"),
            "'h' in the minute field: a hashed value is an upper-case H"
        );
        for form in [
            "H5", "HL", "H-5", "H(1-2", "H(1)", "H(a-b)", "H(+1-5)", "H/x", "H/", "H(1-5)/", "H#2",
        ] {
            assert_eq!(
                reason(&format!("{form} * * * *")),
                format!("'{form}' in the minute field: H forms are H, H/N, H(A-B) and H(A-B)/N"),
            );
        }
        assert!(reason("H * *").starts_with("expected 5 fields"));
        // macros are not hashed
        assert!(Schedule::parse_for("@H", None, "default/web").is_err());
    }
}

/// Parses are kept by expression, zone and (hashed fields only) seed: a kept parse is never
/// another Eru's or another zone's.
#[test]
fn a_kept_parse_is_that_of_its_expression_zone_and_seed() {
    let from = utc(2026, 1, 1, 0, 0, 0);
    let slots = |expr: &str, tz: Option<&str>, seed: &str| {
        let schedule = Schedule::parse_for(expr, tz, seed).unwrap();
        (0..3)
            .scan(from, |t, _| {
                *t = schedule.next_after(*t)?;
                Some(*t)
            })
            .collect::<Vec<_>>()
    };
    // each seed its own slots, the second parse (kept) the same as the first
    let seeds: Vec<Vec<_>> = ["ns/a", "ns/b", "ns/c"]
        .iter()
        .map(|seed| slots("H H * * *", None, seed))
        .collect();
    assert_ne!(seeds[0], seeds[1]);
    assert_ne!(seeds[1], seeds[2]);
    for (seed, first) in ["ns/a", "ns/b", "ns/c"].iter().zip(&seeds) {
        assert_eq!(&slots("H H * * *", None, seed), first);
    }
    // the zone is part of it
    assert_ne!(
        slots("0 3 * * *", Some("Asia/Tokyo"), "x"),
        slots("0 3 * * *", None, "x")
    );
    assert_eq!(slots("0 3 * * *", None, "x")[0], utc(2026, 1, 1, 3, 0, 0));
    // a refused expression stays refused, and names itself
    for _ in 0..2 {
        let e = Schedule::parse_for("61 * * * *", None, "x").unwrap_err();
        assert!(e.to_string().contains("61 * * * *"), "{e}");
    }
}
