//! `--since` and `--until` of the CLI: an RFC 3339 time, or a duration before now (`24h`, `30m`,
//! `7d`), as `kubectl logs --since` and `journalctl` take them. Turned into the RFC 3339 time the
//! HTTP API's parameters take, so a duration means the same offline and against a running
//! operator (computed once, on the caller's clock).

use chrono::{DateTime, Duration, SecondsFormat, Utc};

/// The units a duration may have, in seconds.
const UNITS: [(char, i64); 5] = [('s', 1), ('m', 60), ('h', 3600), ('d', 86_400), ('w', 604_800)];

/// `value` as the RFC 3339 time the API takes: an RFC 3339 time as it is (normalised to UTC), a
/// duration (`90s`, `30m`, `24h`, `7d`, `2w`, or a sum such as `1h30m`) as that long before `now`.
pub fn time_arg(value: &str, now: DateTime<Utc>) -> Result<String, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(value) {
        return Ok(t.with_timezone(&Utc).to_rfc3339_opts(SecondsFormat::Millis, true));
    }
    match duration(value) {
        Some(d) => now
            .checked_sub_signed(d)
            .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
            .ok_or_else(|| format!("'{value}' reaches before any time this program can write")),
        None => Err(format!(
            "'{value}' is neither a duration before now (90s, 30m, 24h, 7d, 2w, 1h30m) nor an RFC 3339 \
             time (2026-11-24T00:00:00Z)"
        )),
    }
}

/// A duration such as `24h` or `1h30m`: one or more numbers, each followed by a unit of [`UNITS`].
fn duration(text: &str) -> Option<Duration> {
    let mut total: i64 = 0;
    let mut number = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let (_, seconds) = UNITS.iter().find(|(unit, _)| *unit == c)?;
        let n: i64 = number.parse().ok()?;
        total = total.checked_add(n.checked_mul(*seconds)?)?;
        number.clear();
    }
    // every number has its unit, and there was at least one
    (number.is_empty() && !text.is_empty()).then(|| Duration::try_seconds(total))?
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 24, 12, 0, 0).unwrap()
    }

    #[test]
    fn durations_count_back_from_now() {
        for (value, expected) in [
            ("24h", "2026-11-23T12:00:00.000Z"),
            ("30m", "2026-11-24T11:30:00.000Z"),
            ("7d", "2026-11-17T12:00:00.000Z"),
            ("2w", "2026-11-10T12:00:00.000Z"),
            ("90s", "2026-11-24T11:58:30.000Z"),
            ("1h30m", "2026-11-24T10:30:00.000Z"),
            ("0s", "2026-11-24T12:00:00.000Z"),
        ] {
            assert_eq!(time_arg(value, now()).as_deref(), Ok(expected), "{value}");
        }
    }

    #[test]
    fn rfc_3339_times_are_kept_in_utc() {
        assert_eq!(
            time_arg("2026-11-24T00:00:00Z", now()).as_deref(),
            Ok("2026-11-24T00:00:00.000Z")
        );
        assert_eq!(
            time_arg("2026-11-24T01:00:00+01:00", now()).as_deref(),
            Ok("2026-11-24T00:00:00.000Z")
        );
    }

    #[test]
    fn anything_else_is_refused_saying_what_is_taken() {
        for value in [
            "",
            "24",
            "h",
            "24x",
            "-1h",
            "1.5h",
            "24h ",
            "yesterday",
            "2026-11-24",
        ] {
            let error = time_arg(value, now()).unwrap_err();
            assert!(
                error.contains("neither a duration") && error.contains("RFC 3339"),
                "{value}: {error}"
            );
        }
        assert!(time_arg("99999999999999w", now()).is_err());
    }
}
