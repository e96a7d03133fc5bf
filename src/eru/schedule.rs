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

    /// TEMPORARY until hashed schedules land (branch `hash`).
    pub fn parse_for(expr: &str, tz: Option<&str>, _seed: &str) -> Result<Self, ScheduleError> {
        Self::parse(expr, tz)
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
mod tests;
