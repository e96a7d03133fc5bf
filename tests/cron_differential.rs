//! Differential test of `eru::eru::schedule` against robfig/cron v3, the library the Kubernetes
//! CronJob controller uses (run through `hack/crondiff`, built with the machine's Go). A corpus
//! of generated crontab expressions in several time zones must give the same slots.
//!
//! The one deliberate difference is daylight saving time: CronJobs skip a slot that falls in a
//! spring-forward gap and run twice in a fall-back overlap; an Eru runs such a slot exactly once.
//! Slots within two hours of a transition are therefore left out of the comparison (and counted).
//! Also deliberate: `7` for Sunday, which robfig refuses; the corpus uses 0-6.

use std::{
    io::Write,
    process::{Command, Stdio},
};

use chrono::{DateTime, Duration, Offset, TimeZone, Utc};
use chrono_tz::Tz;
use eru::eru::schedule::Schedule;

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

    let input: String = cases
        .iter()
        .map(|(e, z, s)| format!("{e}\t{z}\t{}\t{COUNT}\n", s.to_rfc3339()))
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

    let (mut compared, mut slots, mut dst_skipped) = (0, 0, 0);
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
        let keep = |t: &DateTime<Utc>| !near_transition(tz, *t);
        let mine: Vec<DateTime<Utc>> = ours.upcoming(*start, COUNT).into_iter().filter(keep).collect();
        let reference: Vec<DateTime<Utc>> = reference
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc))
            .filter(keep)
            .collect();
        dst_skipped += COUNT - mine.len().min(reference.len());
        let n = mine.len().min(reference.len());
        compared += 1;
        slots += n;
        if mine[..n] != reference[..n] {
            let at = (0..n).find(|&i| mine[i] != reference[i]).unwrap();
            mismatches.push(format!(
                "{expr} [{zone}] after {start}: slot {at}: ours {} vs CronJob {}",
                mine[at], reference[at]
            ));
        }
    }
    eprintln!(
        "compared {compared} expressions, {slots} slots; {dst_skipped} slots near DST transitions left out"
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
