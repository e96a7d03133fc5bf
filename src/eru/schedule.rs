//! Pure cron and slot math: parsing a crontab expression in a time zone, and enumerating its slots.
//! `eru-operator schedule` and the controller use exactly this code.
//!
//! Grammar: 5 crontab fields (minute hour day-of-month month day-of-week; 0 and 7 are Sunday;
//! names like `mon` and `jan`; ranges, lists, steps), an optional leading seconds field, or one of
//! `@yearly @annually @monthly @weekly @daily @midnight @hourly`. When both day fields are
//! restricted a day matches if either does (as in cron and Kubernetes CronJobs).
//!
//! Daylight saving time (the rules of the Open Cron Pattern Specification, which croner follows):
//! a slot whose wall-clock time falls in a spring-forward gap runs once, at the first valid instant
//! after the gap; a slot in a fall-back overlap runs once, at its first occurrence.

use chrono::{DateTime, Utc};
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
        Ok(Self { cron, tz })
    }

    /// The first slot strictly after `t`.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron
            .find_next_occurrence(&t.with_timezone(&self.tz), false)
            .ok()
            .map(|s| s.with_timezone(&Utc))
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
