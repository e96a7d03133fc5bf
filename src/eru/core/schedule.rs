//! Pure cron and slot math: parsing a crontab expression in a time zone, and enumerating its slots.
//! `eru-operator schedule` and the controller use exactly this code.
//!
//! Grammar: 5 crontab fields (minute hour day-of-month month day-of-week; 0 and 7 are Sunday;
//! names like `mon` and `jan`; ranges, lists, steps), an optional leading seconds field, or one of
//! `@yearly @annually @monthly @weekly @daily @midnight @hourly`. When both day fields are
//! restricted a day matches if either does (as in cron and Kubernetes CronJobs).
//!
//! Hashed fields (`H`, as in Jenkins): `H`, `H/N`, `H(A-B)` and `H(A-B)/N`, alone or in a comma
//! list, in any field, stand for a value derived from a seed (an Eru's `namespace/name`, see
//! [`eru_seed`]), so that many Erus with the same schedule spread over the range instead of
//! restarting in the same second. [`resolve`] replaces them by concrete values before anything
//! else is parsed, so macros, day fields and daylight saving time work on the result as on any
//! schedule. The values come from `field_hash`; they are part of the product contract (a changed
//! hash would move every user's restarts) and pinned by a test.
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

use super::hash::{fnv1a64, splitmix64};

/// What the API server checks of a schedule: a macro, or 5 or 6 whitespace-separated fields of
/// crontab characters (and `H(a-b)` of hashed fields). The full grammar is checked by the operator (phase Invalid).
pub const SCHEDULE_PATTERN: &str = r"^\s*(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|[0-9A-Za-z*/,?#()-]+(\s+[0-9A-Za-z*/,?#()-]+){4,5})\s*$";

/// A slot as users read it (RFC 3339, UTC, seconds).
pub fn slot_text(slot: DateTime<Utc>) -> String {
    slot.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

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

/// A pattern's parse, for its expression, zone and (hashed fields only) seed. A pass parses its
/// Eru's schedule three times or more (the spec's, each epoch's, the ledger's), and Erus share
/// schedules: at 10,000 Erus the parses were 9 % of a cold start's CPU. Emptied when full.
type Parsed =
    std::collections::HashMap<(String, Option<String>, Option<String>), Result<Schedule, ScheduleError>>;
static PARSED: std::sync::LazyLock<std::sync::Mutex<Parsed>> = std::sync::LazyLock::new(Default::default);
/// Parses kept at most (a fleet with hashed fields has one per Eru: they come and go).
const PARSED_AT_MOST: usize = 1024;

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

/// The fields `H` may stand in, in the 6-field order (second first): name, lowest and highest
/// value. As in Jenkins, day-of-month stops at 28 (every month has the day) and day-of-week at 6
/// (7 is Sunday again, which would give Sunday twice the share).
const HASHED_FIELDS: [(&str, u32, u32); 6] = [
    ("second", 0, 59),
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day-of-month", 1, 28),
    ("month", 1, 12),
    ("day-of-week", 0, 6),
];

/// What `parse` says of a schedule with `H`: the value needs a seed it does not have.
const H_NEEDS_A_NAME: &str = "H is resolved from the Eru's namespace/name; preview it with --name NS/NAME";

/// The seed [`validate`] resolves `H` with. Any seed gives the same verdict: every `H` value lies
/// within its field, so only the non-hashed parts can make a resolved schedule invalid.
const VALIDATION_SEED: &str = "eru-operator/validate";

/// The seed of an Eru's hashed fields: its `namespace/name`.
pub fn eru_seed(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The hash of field `field` (0 = second, 1 = minute, ... 5 = day-of-week, whether or not the
/// schedule has a seconds field) under `seed`: output number `field + 1` of a SplitMix64 generator
/// seeded with FNV-1a 64 of the seed's UTF-8 bytes. FNV-1a is a fixed, portable function of the
/// bytes (std's `DefaultHasher` may change between releases and `RandomState` between processes);
/// SplitMix64 mixes its weak low bits (names differing in a last digit) and makes the fields of
/// one seed independent, so an Eru's minute says nothing about its hour.
fn field_hash(seed: &str, field: usize) -> u64 {
    splitmix64(fnv1a64(seed.as_bytes()), field as u64 + 1)
}

/// A plain decimal number (no sign, no names).
fn number(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// One comma-separated part of field `field` (6-field order) with its `H` form, if any, replaced
/// by the value under `hash`: `H` is one value of the field's range, `H(A-B)` one of A..=B,
/// `H/N` and `H(A-B)/N` every N-th value from a hashed offset below N (as `START-END/N`).
fn resolve_part(part: &str, field: usize, hash: u64) -> Result<String, String> {
    let (name, min, max) = HASHED_FIELDS[field];
    if part.starts_with('h') {
        return Err(format!(
            "'{part}' in the {name} field: a hashed value is an upper-case H"
        ));
    }
    let Some(rest) = part.strip_prefix('H') else {
        return Ok(part.to_string());
    };
    let form = || format!("'{part}' in the {name} field: H forms are H, H/N, H(A-B) and H(A-B)/N");
    let (range, step) = match rest.split_once('/') {
        Some((range, step)) => (range, Some(number(step).ok_or_else(form)?)),
        None => (rest, None),
    };
    let (low, high) = if range.is_empty() {
        (min, max)
    } else {
        let inner = range
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .ok_or_else(form)?;
        let (low, high) = inner.split_once('-').ok_or_else(form)?;
        (number(low).ok_or_else(form)?, number(high).ok_or_else(form)?)
    };
    if low < min || high > max {
        return Err(format!(
            "'{part}' in the {name} field: H ranges lie within {min}-{max}"
        ));
    }
    if low > high {
        return Err(format!(
            "'{part}' in the {name} field: the range {low}-{high} ends before it starts"
        ));
    }
    let span = u64::from(high - low + 1);
    // `hash % span` < span <= 60: the casts cannot truncate, and the bias of taking a 64-bit hash
    // modulo at most 60 is below 2^-58
    match step {
        None => Ok((low + (hash % span) as u32).to_string()),
        Some(0) => Err(format!(
            "'{part}' in the {name} field: the step must be at least 1"
        )),
        Some(n) if u64::from(n) > span => Err(format!(
            "'{part}' in the {name} field: the step {n} is larger than the range {low}-{high}"
        )),
        Some(n) => Ok(format!("{}-{high}/{n}", low + (hash % u64::from(n)) as u32)),
    }
}

/// The fields of a (non-macro) expression with each `H` form resolved under `seed`. Without a
/// seed the forms are still checked, with a hash of 0, and a schedule with `H` is then refused.
fn resolve_fields(expr: &str, seed: Option<&str>) -> Result<Vec<String>, ScheduleError> {
    let fields: Vec<&str> = expr.split_whitespace().collect();
    if !(5..=6).contains(&fields.len()) {
        let found = fields.len();
        return Err(invalid(
            expr,
            format!("expected 5 fields (or 6 with seconds), found {found}"),
        ));
    }
    let first = 6 - fields.len(); // 5 fields: no seconds, the first is the minute
    let mut hashed = false;
    let mut resolved = Vec::with_capacity(fields.len());
    for (i, text) in fields.iter().enumerate() {
        let field = first + i;
        let hash = seed.map_or(0, |seed| field_hash(seed, field));
        let parts = text
            .split(',')
            .map(|part| {
                hashed |= part.starts_with('H');
                resolve_part(part, field, hash)
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|reason| invalid(expr, reason))?;
        resolved.push(parts.join(","));
    }
    if hashed && seed.is_none() {
        return Err(invalid(expr, H_NEEDS_A_NAME));
    }
    Ok(resolved)
}

/// The concrete expression `expr` stands for under `seed` (see [`eru_seed`]): each `H` form
/// replaced by its value, fields separated by one space; a macro as it is.
/// `resolve("H 3 * * *", "default/web")` is `35 3 * * *`, today and in every release.
pub fn resolve(expr: &str, seed: &str) -> Result<String, ScheduleError> {
    let trimmed = expr.trim();
    if trimmed.starts_with('@') {
        return Ok(trimmed.to_string());
    }
    Ok(resolve_fields(expr, Some(seed))?.join(" "))
}

/// Checks `expr` in `tz` as [`Schedule::parse_for`] would for any Eru (used for flags such as
/// `--default-schedule`, which have no Eru yet). `H` is allowed.
pub fn validate(expr: &str, tz: Option<&str>) -> Result<(), ScheduleError> {
    Schedule::parse_for(expr, tz, VALIDATION_SEED).map(|_| ())
}

/// A refused expression.
fn invalid(expr: &str, reason: impl Into<String>) -> ScheduleError {
    ScheduleError::Expression {
        expr: expr.to_string(),
        reason: reason.into(),
    }
}

/// The IANA time zone `tz` (UTC when `None`).
fn zone(tz: Option<&str>) -> Result<Tz, ScheduleError> {
    match tz {
        None => Ok(Tz::UTC),
        Some(name) => name
            .parse::<Tz>()
            .map_err(|_| ScheduleError::TimeZone(name.to_string())),
    }
}

impl Schedule {
    /// Parses `expr` in the IANA time zone `tz` (UTC when `None`). A schedule with `H` is refused:
    /// it needs the Eru's name ([`Schedule::parse_for`]).
    pub fn parse(expr: &str, tz: Option<&str>) -> Result<Self, ScheduleError> {
        Self::build(expr, tz, None)
    }

    /// Parses `expr` in `tz` with its `H` forms resolved under `seed` (an Eru's
    /// [`eru_seed`]). Without `H`, the same as [`Schedule::parse`].
    pub fn parse_for(expr: &str, tz: Option<&str>, seed: &str) -> Result<Self, ScheduleError> {
        Self::build(expr, tz, Some(seed))
    }

    /// `parse` (no seed: `H` refused) and `parse_for`, through [`PARSED`].
    fn build(expr: &str, tz: Option<&str>, seed: Option<&str>) -> Result<Self, ScheduleError> {
        // the seed changes only a schedule with hashed fields (`H`; a macro has none)
        let hashed = !expr.trim().starts_with('@') && expr.contains('H');
        let seed = seed.filter(|_| hashed);
        let key = (expr.to_string(), tz.map(str::to_string), seed.map(str::to_string));
        let parsed = || PARSED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(known) = parsed().get(&key) {
            return known.clone();
        }
        // parsed without the lock: two passes may parse the same expression at once, alike
        let built = Self::build_anew(expr, tz, seed);
        let mut kept = parsed();
        if kept.len() >= PARSED_AT_MOST {
            kept.clear();
        }
        kept.insert(key, built.clone());
        built
    }

    fn build_anew(expr: &str, tz: Option<&str>, seed: Option<&str>) -> Result<Self, ScheduleError> {
        let tz = zone(tz)?;
        let trimmed = expr.trim();
        let pattern = if trimmed.starts_with('@') {
            expand_macro(trimmed)
                .ok_or_else(|| invalid(expr, "unknown macro"))?
                .to_string()
        } else {
            let fields = resolve_fields(expr, seed)?;
            normalize_day_fields(&fields.iter().map(String::as_str).collect::<Vec<_>>())
        };
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            // `6/2` means 6-max/2 in cron and Kubernetes CronJobs (tests/cron_differential.rs)
            .sloppy_ranges(true)
            .build()
            .parse(&pattern)
            .map_err(|e| invalid(expr, e.to_string()))?;
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
mod tests;
