//! Pure cron and slot math: parsing a crontab expression in a time zone, and enumerating its slots.
//! `eru-operator schedule` and the controller use exactly this code.
//!
//! Grammar: 5 crontab fields (minute hour day-of-month month day-of-week; 0 and 7 are Sunday;
//! names like `mon` and `jan`; ranges, lists, steps), an optional leading seconds field, or one of
//! `@yearly @annually @monthly @weekly @daily @midnight @hourly`. When both day fields are
//! restricted a day matches if either does (as in cron and Kubernetes CronJobs).
//!
//! Daylight saving time, for every pattern (single- or multi-valued): the pattern is matched
//! against local wall-clock times (croner on naive times) and each match is placed on the
//! timeline here, one constant-offset stretch at a time:
//! - a pattern with a fixed hour field (`30 2 * * *`, `0 1,13 * * *`, `15 2-4 * * *`) names
//!   wall-clock times: one in a fall-back overlap runs once, at its first occurrence; one in a
//!   spring-forward gap runs once, at the first instant after the gap (where it merges with a slot
//!   that falls on that instant);
//! - a pattern whose hour field is `*` or a step over all hours (`*/2`) runs every real hour, as
//!   ISC cron does: both passes of an overlap, and nothing for the hour a gap removes.

use chrono::{DateTime, Duration, NaiveDateTime, Offset, TimeZone, Utc};
use chrono_tz::Tz;
use croner::{
    Cron,
    parser::{CronParser, Seconds, Year},
};

/// Why a schedule or time zone was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("invalid schedule '{expr}': {reason}")]
    Expression { expr: String, reason: String },
    #[error("unknown time zone '{0}' (use an IANA name such as Europe/Berlin)")]
    TimeZone(String),
}

/// A parsed schedule in its time zone.
#[derive(Debug, Clone)]
pub struct Schedule {
    cron: Cron,
    tz: Tz,
    /// The hour field names wall-clock times (not `*` or `*/N`): see the module docs.
    wall_clock: bool,
}

/// Whether the hour field of a (macro-expanded) pattern is `*` or a step over all hours.
fn every_hour(pattern: &str) -> bool {
    let fields: Vec<&str> = pattern.split_whitespace().collect();
    let hour = if fields.len() == 6 { fields[2] } else { fields[1] };
    hour.split('/').next() == Some("*")
}

/// Seconds east of UTC in `tz` at `t`.
fn offset(tz: Tz, t: DateTime<Utc>) -> i64 {
    i64::from(
        tz.offset_from_utc_datetime(&t.naive_utc())
            .fix()
            .local_minus_utc(),
    )
}

/// The first instant in `(after, until]` where `tz`'s offset differs from the one at `after`.
/// Offsets are sampled a week apart (no zone changes its offset twice within a week), then the
/// change is bisected to the second.
fn first_transition(tz: Tz, after: DateTime<Utc>, until: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let base = offset(tz, after);
    let mut lo = after;
    let hi = loop {
        let probe = (lo + Duration::days(7)).min(until);
        if offset(tz, probe) != base {
            break probe;
        }
        if probe >= until {
            return None;
        }
        lo = probe;
    };
    // transitions fall on whole seconds: bisect on those
    let (mut lo, mut hi) = (lo.timestamp(), hi.timestamp());
    let at = |secs: i64| DateTime::from_timestamp(secs, 0).expect("a time in range");
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if offset(tz, at(mid)) == base {
            lo = mid
        } else {
            hi = mid
        }
    }
    Some(at(hi))
}

/// The crontab equivalent of a macro.
fn expand_macro(expr: &str) -> Option<&'static str> {
    Some(match expr.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        _ => return None,
    })
}

/// Day names as CronJobs number them (sun = 0 ... sat = 6). croner reads `sun` at the end of a
/// range as 7, which turns `sun-sun` into every day and accepts `sat-sun`, which CronJobs refuse.
fn weekday_numbers(field: &str) -> String {
    const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
    let mut out = field.to_ascii_lowercase();
    for (n, day) in DAYS.iter().enumerate() {
        out = out.replace(day, &n.to_string());
    }
    out
}

/// Rewrites the two day-field forms where croner (Vixie cron) and Kubernetes CronJobs
/// (robfig/cron) disagree, so the slots are a CronJob's: `*/S` (S > 1) in a day field is a
/// restriction, not a wildcard (so day-of-month and day-of-week combine with OR), and
/// day-of-week `N/S` steps up to Saturday (6), never to 7. Found by tests/cron_differential.rs.
fn normalize_day_fields(fields: &[&str]) -> String {
    let (dom, dow) = if fields.len() == 6 { (3, 5) } else { (2, 4) };
    let rewrite = |field: &str, min: u32, max: u32, starts_step: bool| -> String {
        field
            .split(',')
            .map(|part| match part.split_once('/') {
                Some((start, step))
                    if (start == "*" || start == "?") && step.parse::<u32>().is_ok_and(|s| s > 1) =>
                {
                    format!("{min}-{max}/{step}")
                }
                Some((start, step))
                    if starts_step && !start.contains('-') && start != "*" && start != "?" =>
                {
                    format!("{start}-{max}/{step}")
                }
                _ => part.to_string(),
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    fields
        .iter()
        .enumerate()
        .map(|(i, f)| match i {
            i if i == dom => rewrite(f, 1, 31, false),
            i if i == dow => rewrite(&weekday_numbers(f), 0, 6, true),
            _ => f.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl Schedule {
    /// Parses `expr` in the IANA time zone `tz` (UTC when `None`).
    pub fn parse(expr: &str, tz: Option<&str>) -> Result<Self, ScheduleError> {
        let tz = match tz {
            None => Tz::UTC,
            Some(name) => name
                .parse::<Tz>()
                .map_err(|_| ScheduleError::TimeZone(name.to_string()))?,
        };
        let trimmed = expr.trim();
        let invalid = |reason: String| ScheduleError::Expression {
            expr: expr.to_string(),
            reason,
        };
        let pattern = if trimmed.starts_with('@') {
            expand_macro(trimmed)
                .ok_or_else(|| invalid("unknown macro".into()))?
                .to_string()
        } else {
            let fields: Vec<&str> = trimmed.split_whitespace().collect();
            if !(5..=6).contains(&fields.len()) {
                let found = fields.len();
                return Err(invalid(format!(
                    "expected 5 fields (or 6 with seconds), found {found}"
                )));
            }
            normalize_day_fields(&fields)
        };
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            // `6/2` means 6-max/2 in cron and Kubernetes CronJobs (tests/cron_differential.rs)
            .sloppy_ranges(true)
            .build()
            .parse(&pattern)
            .map_err(|e| invalid(e.to_string()))?;
        Ok(Self {
            wall_clock: !every_hour(&pattern),
            cron,
            tz,
        })
    }

    /// The first local wall-clock time after `naive` that the pattern matches.
    fn next_match(&self, naive: NaiveDateTime) -> Option<NaiveDateTime> {
        self.cron
            .find_next_occurrence(&naive.and_utc(), false)
            .ok()
            .map(|m| m.naive_utc())
    }

    /// The first slot strictly after `t`.
    ///
    /// Walks the timeline one constant-offset stretch at a time: within a stretch, a wall-clock
    /// match `m` is the instant `m - offset`; at a transition the walk continues with the new
    /// offset, from where the wall clock stands after it (see the module docs for overlaps and
    /// gaps).
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut from = t; // the stretch starts here (exclusive)
        let mut off = offset(self.tz, t);
        // wall-clock times up to and including `floor` are done
        let mut floor = t.naive_utc() + Duration::seconds(off);
        for _ in 0..64 {
            let m = self.next_match(floor)?;
            let candidate = (m - Duration::seconds(off)).and_utc();
            let Some(at) = first_transition(self.tz, from, candidate) else {
                return Some(candidate);
            };
            let new_off = offset(self.tz, at);
            let (old_wall, new_wall) = (
                at.naive_utc() + Duration::seconds(off),
                at.naive_utc() + Duration::seconds(new_off),
            );
            if new_off > off && m < new_wall && self.wall_clock && at > t {
                // a wall-clock time inside the gap: once, at the first instant after it
                return Some(at);
            }
            floor = if new_off < off && self.wall_clock {
                // overlap: its wall-clock times already ran in their first pass
                old_wall - Duration::seconds(1)
            } else {
                new_wall - Duration::seconds(1)
            };
            (from, off) = (at, new_off);
        }
        None
    }

    /// The slots in `(after, until]`, oldest first. Lazy: callers bound how many they take.
    pub fn slots_between(
        &self,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> impl Iterator<Item = DateTime<Utc>> + '_ {
        let mut cursor = after;
        std::iter::from_fn(move || {
            let next = self.next_after(cursor)?;
            (next <= until).then(|| {
                cursor = next;
                next
            })
        })
    }

    /// The next `count` slots after `t`.
    pub fn upcoming(&self, t: DateTime<Utc>, count: usize) -> Vec<DateTime<Utc>> {
        let mut cursor = t;
        let mut slots = Vec::with_capacity(count);
        while slots.len() < count {
            match self.next_after(cursor) {
                Some(next) => {
                    slots.push(next);
                    cursor = next;
                }
                None => break,
            }
        }
        slots
    }
}

#[cfg(test)]
mod tests {
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
}
