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
        #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

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
