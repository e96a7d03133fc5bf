//! Unit tests of the pause's row, trip and resume.

use chrono::TimeZone;

use super::*;

fn t(m: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, 3, m, s).unwrap()
}

fn ended(m: u32, outcome: Outcome) -> Ended {
    Ended {
        slot: t(m, 0),
        outcome,
        reason: (outcome != Outcome::Succeeded).then(|| format!("why {m}")),
    }
}

#[test]
fn the_row_runs_from_the_newest_end_back_to_the_first_that_did_not_hurt() {
    let before = [
        ended(4, Outcome::Abandoned),
        ended(3, Outcome::Failed),
        ended(2, Outcome::Succeeded),
        ended(1, Outcome::Failed),
    ];
    let slots = |row: Vec<Ended>| row.iter().map(|e| e.slot).collect::<Vec<_>>();
    assert_eq!(slots(row([], &before)), [t(4, 0), t(3, 0)]);
    // this pass's ends come first
    let now = [ended(7, Outcome::Failed), ended(5, Outcome::Failed)];
    assert_eq!(slots(row(now, &before)), [t(7, 0), t(5, 0), t(4, 0), t(3, 0)]);
    // a success in this pass starts the row again
    let now = [ended(6, Outcome::Succeeded), ended(5, Outcome::Failed)];
    assert!(row(now, &before).is_empty());
}

#[test]
fn a_row_of_pause_after_trips_naming_its_restarts_and_a_shorter_one_does_not() {
    let at = t(9, 0) + chrono::Duration::milliseconds(750);
    let row2 = [ended(8, Outcome::Failed), ended(7, Outcome::Abandoned)];
    assert_eq!(trip(&row2, 3, at), None);
    assert_eq!(trip(&row2, 0, at), None, "0 is no policy");
    let pause = trip(&row2, 2, at).unwrap();
    assert_eq!(pause.since, t(9, 0), "whole seconds, as the status shows it");
    assert_eq!(
        pause.why,
        "2 restarts in a row ended failed or abandoned (failurePolicy.pauseAfter 2), newest first: \
         slot 2026-11-22T03:08:00Z failed (why 8); slot 2026-11-22T03:07:00Z abandoned (why 7)"
    );
    // a long row names its newest five and counts the rest
    let long: Vec<Ended> = (1..=12).rev().map(|m| ended(m, Outcome::Failed)).collect();
    let pause = trip(&long, 8, at).unwrap();
    assert!(pause.why.starts_with("8 restarts in a row"), "{}", pause.why);
    assert!(
        pause.why.contains("slot 2026-11-22T03:12:00Z failed"),
        "{}",
        pause.why
    );
    assert!(!pause.why.contains("03:07:00Z"), "{}", pause.why);
    assert!(pause.why.ends_with("; and 3 earlier"), "{}", pause.why);
    assert!(note(&pause).contains(RESUME_ANNOTATION));
}

#[test]
fn only_the_pauses_own_since_resumes_it() {
    let pause = Pause {
        since: t(9, 0),
        why: String::new(),
    };
    let resume = |value: &str| Resume {
        value: value.into(),
        by: None,
    };
    for value in [
        "2026-11-22T03:09:00Z",
        "2026-11-22T03:09:00.400Z",
        " 2026-11-22T04:09:00+01:00 ",
    ] {
        assert!(resume(value).resumes(&pause), "{value}");
    }
    for value in ["2026-11-22T03:08:00Z", "yes", "", "2026-11-22T03:09:01Z"] {
        assert!(!resume(value).resumes(&pause), "{value}");
    }
}
