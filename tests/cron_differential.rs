//! Differential test of `eru_operator::eru::core::schedule` against robfig/cron v3, the library the Kubernetes
//! CronJob controller uses (run through `hack/crondiff`, built with the machine's Go). A corpus
//! of generated crontab expressions in several time zones must give the same slots.
//!
//! The one deliberate difference is daylight saving time: CronJobs skip a slot that falls in a
//! spring-forward gap and run twice in a fall-back overlap; an Eru runs such a slot exactly once.
//! The general corpus leaves slots within two hours of a transition out (and counts them); a
//! second corpus is made of exactly those hours, around every transition of 2026–2027 in five
//! zones, and every difference found there must be one of the two documented ones. Also
//! deliberate: `7` for Sunday, which robfig refuses; the corpora use 0-6.

use std::{
    io::Write,
    process::{Command, Stdio},
};

use chrono::{DateTime, Duration, Offset, TimeZone, Utc};
use chrono_tz::Tz;
use eru_operator::eru::core::schedule::Schedule;

/// A small deterministic generator (no dependency, same corpus on every run).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

/// One crontab field over `min..=max`, in one of the standard shapes.
fn field(rng: &mut Lcg, min: u64, max: u64, names: &[&str], star_bias: u64) -> String {
    let span = max - min + 1;
    let n = |rng: &mut Lcg| min + rng.below(span);
    let name_or_number = |rng: &mut Lcg, v: u64| {
        if !names.is_empty() && rng.below(3) == 0 {
            names[(v - min) as usize].to_string()
        } else {
            v.to_string()
        }
    };
    match rng.below(7 + star_bias) {
        0 => format!("*/{}", 1 + rng.below(span / 2).max(1)),
        1 => {
            let v = n(rng);
            name_or_number(rng, v)
        }
        2 => {
            let (a, b) = (n(rng), n(rng));
            format!(
                "{}-{}",
                name_or_number(rng, a.min(b)),
                name_or_number(rng, a.max(b))
            )
        }
        3 => {
            let (a, b) = (n(rng), n(rng));
            format!("{}-{}/{}", a.min(b), a.max(b), 1 + rng.below(4))
        }
        4 => {
            let mut values: Vec<u64> = (0..2 + rng.below(3)).map(|_| n(rng)).collect();
            values.sort();
            values.dedup();
            values.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(",")
        }
        5 => format!("{}/{}", n(rng), 1 + rng.below(span / 2).max(1)),
        _ => "*".to_string(),
    }
}

fn expression(rng: &mut Lcg) -> String {
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
    if rng.below(20) == 0 {
        return rng
            .pick(&[
                "@hourly",
                "@daily",
                "@weekly",
                "@monthly",
                "@yearly",
                "@annually",
                "@midnight",
            ])
            .to_string();
    }
    let mut fields = vec![
        field(rng, 0, 59, &[], 1),
        field(rng, 0, 23, &[], 2),
        field(rng, 1, 31, &[], 6),
        field(rng, 1, 12, &MONTHS, 6),
        field(rng, 0, 6, &DAYS, 5),
    ];
    if rng.below(4) == 0 {
        fields.insert(0, field(rng, 0, 59, &[], 1));
    }
    fields.join(" ")
}

/// Whether `t` is within two hours of a UTC-offset change in `tz`.
fn near_transition(tz: Tz, t: DateTime<Utc>) -> bool {
    let offset = |t: DateTime<Utc>| {
        tz.offset_from_utc_datetime(&t.naive_utc())
            .fix()
            .local_minus_utc()
    };
    offset(t - Duration::hours(2)) != offset(t + Duration::hours(2))
}

/// The slots robfig/cron v3 computes for each case `(expression, zone, after)`, `count` each, as
/// `hack/crondiff` prints them (comma-separated RFC 3339, or `ERR <message>`).
fn robfig(cases: &[(String, &str, DateTime<Utc>)], count: usize) -> Vec<String> {
    let input: String = cases
        .iter()
        .map(|(e, z, s)| format!("{e}\t{z}\t{}\t{count}\n", s.to_rfc3339()))
        .collect();
    let mut go = Command::new("go")
        .args(["run", "."])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/hack/crondiff"))
        .env("GOTOOLCHAIN", "local")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("go on PATH (hack/deps.sh checks it)");
    go.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let output = go.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "crondiff failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let theirs: Vec<String> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(theirs.len(), cases.len());
    theirs
}

fn offset_seconds(tz: Tz, t: DateTime<Utc>) -> i64 {
    tz.offset_from_utc_datetime(&t.naive_utc())
        .fix()
        .local_minus_utc()
        .into()
}

/// Every instant in 2026–2027 at which `tz`'s UTC offset changes.
fn transitions(tz: Tz) -> Vec<DateTime<Utc>> {
    let mut found = Vec::new();
    let mut t = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let end = Utc.with_ymd_and_hms(2028, 1, 1, 0, 0, 0).unwrap();
    while t < end {
        let next = t + Duration::minutes(30);
        if offset_seconds(tz, t) != offset_seconds(tz, next) {
            let (mut lo, mut hi) = (t, next);
            while hi - lo > Duration::seconds(1) {
                let mid = lo + (hi - lo) / 2;
                if offset_seconds(tz, mid) == offset_seconds(tz, t) {
                    lo = mid
                } else {
                    hi = mid
                }
            }
            found.push(hi);
        }
        t = next;
    }
    found
}

/// Expressions whose slots fall in the local hours around a transition at local hour `h`:
/// fixed, multi-valued and ranged hour fields (wall-clock times), and every-hour patterns.
fn around(h: u32, rng: &mut Lcg) -> Vec<String> {
    let hour = |d: i32| (h as i32 + d).rem_euclid(24);
    let minute = rng.below(60);
    vec![
        format!("{minute} {} * * *", hour(0)),
        format!("{minute} {} * * *", hour(-1)),
        format!("0 {} * * *", hour(1)),
        format!("{minute} {},{} * * *", hour(-1), hour(0)),
        format!("0,30 {}-{} * * *", hour(-1).min(hour(1)), hour(-1).max(hour(1))),
        format!("{} {minute} {} * * *", rng.below(60), hour(0)),
        "*/30 * * * *".into(),
        format!("{minute} * * * *"),
        format!("{minute} */2 * * *"),
        "0 */15 * * * *".into(),
    ]
}

/// Around every DST transition of 2026–2027 in five zones (one switching at midnight), the slots of expressions aimed at the hours of the transition agree
/// with robfig/cron v3 except where the README says they differ, and only there:
/// - a wall-clock time in a spring-forward gap: the CronJob skips it; the Eru runs it once, at
///   the first instant after the gap (unless a slot is already there);
/// - a wall-clock time in a fall-back overlap: the CronJob runs it twice; the Eru once, at the
///   first occurrence.
///
/// Every-hour patterns (`*` or `*/N` hours) agree exactly: every real hour, as ISC cron runs them.
#[test]
fn around_dst_transitions_the_only_differences_are_the_documented_ones() {
    const ZONES: [&str; 5] = [
        "America/New_York",
        "Europe/Berlin",
        "Europe/London",
        "Australia/Sydney",
        "America/Santiago",
    ];
    let mut rng = Lcg(0xd57);
    let mut cases = Vec::new();
    let mut windows = Vec::new();
    for zone in ZONES {
        let tz: Tz = zone.parse().unwrap();
        for at in transitions(tz) {
            let before = at - Duration::seconds(1);
            let local_hour = tz.from_utc_datetime(&before.naive_utc()).format("%H").to_string();
            for expr in around(local_hour.parse().unwrap(), &mut rng) {
                cases.push((expr, zone, at - Duration::hours(4)));
                windows.push((tz, at));
            }
        }
    }
    const COUNT: usize = 40;
    let theirs = robfig(&cases, COUNT);
    let (mut slots, mut gap_slots, mut overlap_repeats) = (0, 0, 0);
    let mut unexplained = Vec::new();
    for (((expr, zone, start), (tz, at)), reference) in cases.iter().zip(&windows).zip(&theirs) {
        let ours = Schedule::parse(expr, Some(zone)).unwrap();
        let end = *at + Duration::hours(4);
        let within = |t: &DateTime<Utc>| *t <= end;
        let mine: Vec<DateTime<Utc>> = ours.upcoming(*start, COUNT).into_iter().filter(within).collect();
        let cronjob: Vec<DateTime<Utc>> = reference
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc))
            .filter(within)
            .collect();
        assert!(
            mine.last().is_some_and(|l| *l + Duration::hours(2) > end) || mine.len() < COUNT,
            "{expr}: the window is covered"
        );
        slots += mine.len();
        let shift = offset_seconds(*tz, *at) - offset_seconds(*tz, *at - Duration::seconds(1));
        let wall = |t: DateTime<Utc>| tz.from_utc_datetime(&t.naive_utc()).naive_local();
        for t in mine.iter().filter(|t| !cronjob.contains(t)) {
            // ours only: a gap's wall-clock time, run at the first instant after the gap
            if shift > 0 && *t == *at {
                gap_slots += 1;
            } else {
                unexplained.push(format!("{expr} [{zone}] around {at}: only the Eru has {t}"));
            }
        }
        for t in cronjob.iter().filter(|t| !mine.contains(t)) {
            // theirs only: the second pass of a wall-clock time the overlap repeats
            let first_pass = cronjob.iter().find(|e| *e < t && wall(**e) == wall(*t));
            if shift < 0 && first_pass.is_some_and(|e| mine.contains(e)) {
                overlap_repeats += 1;
            } else {
                unexplained.push(format!("{expr} [{zone}] around {at}: only the CronJob has {t}"));
            }
        }
    }
    eprintln!(
        "{} expressions around DST transitions, {slots} slots: {gap_slots} gap slots run once, \
         {overlap_repeats} overlap repeats run once instead of twice",
        cases.len()
    );
    assert!(
        unexplained.is_empty(),
        "{} unexplained differences:\n{}",
        unexplained.len(),
        unexplained.join("\n")
    );
    assert!(
        gap_slots >= 10 && overlap_repeats >= 10,
        "the corpus reaches both kinds of difference"
    );
}

#[test]
fn slots_match_kubernetes_cronjobs() {
    const ZONES: [&str; 5] = [
        "UTC",
        "America/New_York",
        "Europe/Berlin",
        "Asia/Shanghai",
        "Australia/Sydney",
    ];
    const COUNT: usize = 25;
    let mut rng = Lcg(0x005e_ede2_u64);
    let mut cases = Vec::new();
    for i in 0..600 {
        let expr = expression(&mut rng);
        let zone = ZONES[i % ZONES.len()];
        let start = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
            + Duration::minutes(rng.below(3 * 525_600) as i64);
        cases.push((expr, zone, start));
    }
    // a few by hand: names, both day fields, leap days, steps from a value
    for expr in [
        "0 0 29 2 *",
        "0 12 13 * fri",
        "15 10 * * mon-fri",
        "0 */6 1,15 * *",
        "5/15 * * * *",
        "0 0 1 jan-mar sun",
    ] {
        cases.push((
            expr.to_string(),
            "Europe/Berlin",
            Utc.with_ymd_and_hms(2026, 6, 1, 0, 0, 0).unwrap(),
        ));
    }

    let theirs = robfig(&cases, COUNT);
    let (mut compared, mut slots, mut dst_skipped, mut beyond_robfig) = (0, 0, 0, 0);
    let mut mismatches = Vec::new();
    for ((expr, zone, start), reference) in cases.iter().zip(&theirs) {
        let ours = Schedule::parse(expr, Some(zone));
        if let Some(error) = reference.strip_prefix("ERR") {
            mismatches.push(format!(
                "{expr} [{zone}]: robfig refuses ({error}), we {}",
                if ours.is_ok() { "accept" } else { "refuse too" }
            ));
            continue;
        }
        let ours = ours.unwrap_or_else(|e| panic!("{expr} [{zone}]: we refuse what CronJobs accept: {e}"));
        let tz: Tz = zone.parse().unwrap();
        let all_mine = ours.upcoming(*start, COUNT);
        let all_theirs: Vec<DateTime<Utc>> = reference
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc))
            .collect();
        // robfig gives up on a slot more than 5 years after the one before (0 0 29 2 * after
        // 2096: 2100 is no leap year), so its list may end early; ours never may
        if all_mine.len() < all_theirs.len()
            || (all_mine.len() > all_theirs.len() && all_theirs.len() == COUNT)
        {
            mismatches.push(format!(
                "{expr} [{zone}] after {start}: {} slots of ours vs {} of CronJob's",
                all_mine.len(),
                all_theirs.len()
            ));
            continue;
        }
        beyond_robfig += all_mine.len() - all_theirs.len();
        // both lists up to the earlier of their last slots, each without the slots near a DST
        // transition (left out on both sides alike, and counted as such); a slot one side lacks
        // anywhere else is a difference
        let horizon = all_mine.last().copied().min(all_theirs.last().copied());
        let keep = |t: &&DateTime<Utc>| Some(**t) <= horizon && !near_transition(tz, **t);
        let mine: Vec<DateTime<Utc>> = all_mine.iter().filter(keep).copied().collect();
        let reference: Vec<DateTime<Utc>> = all_theirs.iter().filter(keep).copied().collect();
        dst_skipped += all_theirs.iter().filter(|t| near_transition(tz, **t)).count();
        compared += 1;
        let n = mine.len().min(reference.len());
        slots += n;
        if mine.len() != reference.len() {
            mismatches.push(format!(
                "{expr} [{zone}] after {start}: up to {horizon:?}, {} slots of ours vs {} of CronJob's \
                 (DST transitions left out)",
                mine.len(),
                reference.len()
            ));
        } else if mine[..n] != reference[..n] {
            let at = (0..n).find(|&i| mine[i] != reference[i]).unwrap();
            mismatches.push(format!(
                "{expr} [{zone}] after {start}: slot {at}: ours {} vs CronJob {}",
                mine[at], reference[at]
            ));
        }
    }
    eprintln!(
        "compared {compared} expressions, {slots} slots; {dst_skipped} slots near DST transitions left out, \
         {beyond_robfig} after robfig's 5-year search gave up"
    );
    assert!(
        mismatches.is_empty(),
        "{} differences:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    assert!(
        slots > 10_000,
        "the corpus must be substantial, compared {slots} slots"
    );
}

/// Lord Howe shifts by 30 minutes. robfig/cron steps whole hours near a transition, so there
/// CronJobs misplace wall-clock slots: after the fall-back of 2026-04-05 (02:00 → 01:30) they skip
/// 02:00, which happens once (15:30 UTC); after the spring-forward of 2026-10-04 (02:00 → 02:30)
/// they run 01:56 a second time, at 02:56. The Eru runs each wall-clock time once, where the wall
/// clock shows it (the property test in `src/eru/schedule/tests.rs` checks every minute around
/// these transitions against a brute-force oracle).
#[test]
fn around_a_30_minute_shift_cronjobs_misplace_slots_and_the_eru_follows_the_wall_clock() {
    let zone = "Australia/Lord_Howe";
    let at = |h, m| Utc.with_ymd_and_hms(2026, 4, 4, h, m, 0).unwrap();
    let spring = |h, m| Utc.with_ymd_and_hms(2026, 10, 3, h, m, 0).unwrap();
    let cases = vec![
        ("0 2 * * *".to_string(), zone, at(12, 0)),
        ("56 1 * * *".to_string(), zone, spring(12, 0)),
    ];
    let theirs = robfig(&cases, 2);
    let first = |text: &str| {
        DateTime::parse_from_rfc3339(text.split(',').next().unwrap())
            .unwrap()
            .with_timezone(&Utc)
    };
    let second = |text: &str| {
        DateTime::parse_from_rfc3339(text.split(',').nth(1).unwrap())
            .unwrap()
            .with_timezone(&Utc)
    };
    let ours = |expr: &str, after| Schedule::parse(expr, Some(zone)).unwrap().upcoming(after, 2);
    // 02:00 after the fall-back: the Eru at 15:30 UTC (02:00 +10:30); the CronJob a day later
    assert_eq!(ours("0 2 * * *", at(12, 0))[0], at(15, 30));
    assert_eq!(first(&theirs[0]), at(15, 30) + Duration::days(1));
    // 01:56 before the spring-forward (15:26 UTC); the CronJob runs it again at 15:56 UTC (02:56)
    assert_eq!(
        ours("56 1 * * *", spring(12, 0)),
        [spring(15, 26), spring(14, 56) + Duration::days(1)]
    );
    assert_eq!(
        (first(&theirs[1]), second(&theirs[1])),
        (spring(15, 26), spring(15, 56))
    );
}
