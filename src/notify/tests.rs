use chrono::{TimeZone, Utc};

use super::*;
use crate::eru::core::{hold::Held, ledger::SlotRecord};

fn object(namespace: &str) -> ObjectKey {
    ObjectKey {
        kind: "Eru",
        namespace: namespace.into(),
        name: "web".into(),
        uid: "u-1".into(),
    }
}

const FILE: &str = r#"
sinks:
  - name: oncall
    type: slack
    url: https://hooks.slack.example/services/T0/B0/s3cret
  - name: audit
    type: webhook
    url: http://receiver.example/eru
    hmacSecret: k3y
routes:
  - sink: oncall
    events: [restart_failed, slot_missed]
    reasons: [operator_down]
    namespaces: [prod]
  - sink: audit
    selector: {matchLabels: {team: payments}}
  - sink: audit
"#;

#[test]
fn a_file_is_read_and_its_routes_pick_events_once_per_sink() {
    let notifier = Notifier::parse(FILE).unwrap();
    assert_eq!(notifier.sink_names().collect::<Vec<_>>(), ["audit", "oncall"]);
    let slot = Utc.with_ymd_and_hms(2026, 11, 27, 3, 0, 0).unwrap();
    let missed = SlotRecord {
        first: slot,
        last: slot + chrono::Duration::hours(2),
        count: 3,
        reason: Reason::OperatorDown,
        window: None,
        target: "Deployment/web".into(),
        note: None,
    };
    let skipped = SlotRecord::one(
        slot + chrono::Duration::hours(3),
        Reason::Suspended,
        None,
        "Deployment/web",
    );
    let records = [
        EruRecord::Slots(vec![missed, skipped]),
        EruRecord::Finished {
            slot,
            outcome: Outcome::Failed,
            finished_at: None,
            patched_at: slot,
            reason: Some("progress deadline exceeded".into()),
        },
    ];
    let labels = BTreeMap::from([("team".to_string(), "payments".to_string())]);
    let notices = notifier.notices(&object("prod"), Some(&labels), (&records, None), slot);
    let got: Vec<(String, String, String)> = notices
        .iter()
        .map(|n| (n.sink.clone(), n.key(), n.reason.clone().unwrap_or_default()))
        .collect();
    assert_eq!(
        got,
        [
            (
                "audit".into(),
                "prod/web/2026-11-27T03:00:00.000Z/slot_missed".into(),
                "operator_down".into()
            ),
            (
                "oncall".into(),
                "prod/web/2026-11-27T03:00:00.000Z/slot_missed".into(),
                "operator_down".into()
            ),
            (
                "audit".into(),
                "prod/web/2026-11-27T06:00:00.000Z/slot_skipped".into(),
                "suspended".into()
            ),
            (
                "audit".into(),
                "prod/web/2026-11-27T03:00:00.000Z/restart_failed".into(),
                "progress deadline exceeded".into()
            ),
            (
                "oncall".into(),
                "prod/web/2026-11-27T03:00:00.000Z/restart_failed".into(),
                "progress deadline exceeded".into()
            ),
        ]
    );
    assert_eq!(
        (notices[0].slot_count, notices[0].last_slot),
        (3, slot + chrono::Duration::hours(2))
    );
    // another namespace: the on-call route does not pick it; the catch-all route does
    let elsewhere = notifier.notices(&object("dev"), None, (&records, None), slot);
    assert!(elsewhere.iter().all(|n| n.sink == "audit"), "{elsewhere:?}");
    assert_eq!(elsewhere.len(), 3);
}

#[test]
fn a_selector_route_needs_the_erus_labels() {
    let file = "sinks: [{name: a, type: webhook, url: 'http://r/x'}]\nroutes: [{sink: a, selector: {matchLabels: {team: x}}}]";
    let notifier = Notifier::parse(file).unwrap();
    let slot = Utc.with_ymd_and_hms(2026, 11, 27, 3, 0, 0).unwrap();
    let records = [EruRecord::Slots(vec![SlotRecord::one(
        slot,
        Reason::EruDeleted,
        None,
        "Deployment/web",
    )])];
    assert!(
        notifier
            .notices(&object("prod"), None, (&records, None), slot)
            .is_empty(),
        "deleted: no labels"
    );
    let labels = BTreeMap::from([("team".to_string(), "x".to_string())]);
    assert_eq!(
        notifier
            .notices(&object("prod"), Some(&labels), (&records, None), slot)
            .len(),
        1
    );
}

#[test]
fn fired_slots_and_dry_runs_are_not_events() {
    let notifier =
        Notifier::parse("sinks: [{name: a, type: webhook, url: 'http://r/x'}]\nroutes: [{sink: a}]").unwrap();
    let slot = Utc.with_ymd_and_hms(2026, 11, 27, 3, 0, 0).unwrap();
    let records = [
        EruRecord::Slots(vec![SlotRecord::one(
            slot,
            Reason::Scheduled,
            None,
            "Deployment/web",
        )]),
        EruRecord::Finished {
            slot,
            outcome: Outcome::DryRun,
            finished_at: None,
            patched_at: slot,
            reason: None,
        },
    ];
    assert!(
        notifier
            .notices(&object("prod"), None, (&records, None), slot)
            .is_empty()
    );
}

/// A manual run's end is an event like a restart's, keyed by its token; a withdrawn run is
/// refused; a dry run's is none (nothing was patched).
#[test]
fn a_manual_runs_end_is_an_event_keyed_by_its_token() {
    use crate::eru::core::run::RunRecord;
    use crate::vocab::RunOutcome;
    let notifier =
        Notifier::parse("sinks: [{name: a, type: webhook, url: 'http://r/x'}]\nroutes: [{sink: a}]").unwrap();
    let now = Utc.with_ymd_and_hms(2026, 11, 27, 3, 0, 0).unwrap();
    let ended = |token: &str, outcome| {
        EruRecord::Run(RunRecord::Ended {
            token: token.into(),
            outcome,
            at: Some(now),
            reason: Some("the rollout finished".into()),
        })
    };
    let records = [
        ended("deploy-42", RunOutcome::Succeeded),
        ended("deploy-43", RunOutcome::DryRun),
        EruRecord::Run(RunRecord::Withdrawn {
            token: "deploy-44".into(),
            reason: "the annotation was removed".into(),
        }),
    ];
    let notices = notifier.notices(&object("prod"), None, (&records, None), now);
    let keys: Vec<(String, NoticeEvent, Option<&str>)> = (notices.iter())
        .map(|n| (n.key(), n.event, n.reason.as_deref()))
        .collect();
    assert_eq!(
        keys,
        [
            (
                "prod/web/run/deploy-42/run_succeeded".to_string(),
                NoticeEvent::RunSucceeded,
                Some("the rollout finished")
            ),
            (
                "prod/web/run/deploy-44/run_refused".to_string(),
                NoticeEvent::RunRefused,
                Some("the annotation was removed")
            ),
        ]
    );
    assert!(notices.iter().all(|n| n.slot() == now));
}

#[test]
fn a_bad_file_is_refused_with_why_and_never_its_secrets() {
    let cases = [
        (
            "sinks: [{name: A, type: slack, url: 'https://h/s3cret'}]",
            "lower-case",
        ),
        (
            "sinks: [{name: a, type: slack, url: 'ftp://h/s3cret'}]",
            "not an http",
        ),
        (
            "sinks: [{name: a, type: slack, url: 'https://h/s3cret', hmacSecret: k}]",
            "webhook sinks only",
        ),
        (
            "sinks: [{name: a, type: webhook, url: 'https://h/s3cret'}, {name: a, type: webhook, url: 'https://h/s3cret'}]",
            "named twice",
        ),
        (
            "sinks: [{name: a, type: webhook, url: 'https://h/s3cret'}]\nroutes: [{sink: b}]",
            "no sink is named \"b\"",
        ),
        (
            "sinks: [{name: a, type: webhook, url: 'https://h/s3cret'}]\nroutes: [{sink: a, events: [slot_lost]}]",
            "routes",
        ),
        (
            "sinks: [{name: a, type: pager, url: 'https://h/s3cret'}]",
            "unknown variant",
        ),
        (
            "sinks: [{name: a, type: webhook, url: 'https://h/s3cret', extra: 1}]",
            "unknown field",
        ),
    ];
    for (file, why) in cases {
        let error = Notifier::parse(file).unwrap_err();
        assert!(error.contains(why), "{file}: {error}");
        assert!(
            !error.contains("s3cret"),
            "{file}: the error shows the URL: {error}"
        );
    }
    let shown = format!("{:?}", Notifier::parse(FILE).unwrap());
    assert!(!shown.contains("s3cret") && !shown.contains("k3y"), "{shown}");
}

#[test]
fn a_signature_is_the_hmac_sha256_of_the_body() {
    // RFC 4231, test case 2
    assert_eq!(
        message::signature("Jefe", "what do ya want for nothing?"),
        "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
}

/// Each wait is a random point in the upper half of 1 s, 2 s, 4 s … 300 s, never under 1 s; the
/// waits of many retries spread over that half.
#[test]
fn the_backoff_doubles_to_five_minutes_jittered_in_its_upper_half() {
    let max = std::time::Duration::from_secs(300);
    let ceilings = [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300];
    for (attempts, ceiling) in ceilings.into_iter().enumerate() {
        let ceiling = chrono::Duration::seconds(ceiling);
        let floor = (ceiling / 2).max(chrono::Duration::seconds(1));
        let waits: std::collections::BTreeSet<chrono::Duration> =
            (0..200).map(|_| deliver::backoff(attempts as i64, max)).collect();
        assert!(
            waits.iter().all(|w| (floor..=ceiling).contains(w)),
            "attempt {attempts}: {waits:?} not within {floor}..={ceiling}"
        );
        if ceiling >= chrono::Duration::seconds(4) {
            assert!(
                waits.len() > 100,
                "attempt {attempts}: spread, not one instant: {waits:?}"
            );
        }
    }
    let longest = deliver::backoff(i64::MAX, max);
    assert!((chrono::Duration::seconds(150)..=chrono::Duration::seconds(300)).contains(&longest));
    assert_eq!(deliver::backoff(-1, max), chrono::Duration::seconds(1));
}

#[test]
fn a_hold_is_sent_once_it_lasted_as_long_as_a_route_asks() {
    let file = "sinks: [{name: a, type: webhook, url: 'http://r/x'}, {name: b, type: webhook, url: 'http://r/y'}]\n\
                routes: [{sink: a, heldLongerThan: 10m}, {sink: b, events: [slot_held], reasons: [alert_firing]}]";
    let notifier = Notifier::parse(file).unwrap();
    let slot = Utc.with_ymd_and_hms(2026, 11, 27, 3, 0, 0).unwrap();
    let held = Held::new(
        slot,
        slot + chrono::Duration::hours(1),
        slot,
        (Reason::BlockingPods, "backup-1 runs"),
        None,
    );
    let at = |minutes| slot + chrono::Duration::minutes(minutes);
    let sinks = |minutes| -> Vec<String> {
        (notifier
            .notices(&object("prod"), None, (&[], Some(&held)), at(minutes))
            .into_iter())
        .map(|n| n.sink)
        .collect()
    };
    assert!(sinks(9).is_empty());
    assert_eq!(
        sinks(10),
        ["a"],
        "b's default is 30 minutes, and it wants alert_firing only"
    );
    assert_eq!(sinks(31), ["a"]);
    let notice = &notifier.notices(&object("prod"), None, (&[], Some(&held)), at(12))[0];
    assert_eq!(notice.key(), "prod/web/2026-11-27T03:00:00.000Z/slot_held");
    assert_eq!(notice.reason.as_deref(), Some("blocking_pods"));
    assert_eq!(
        notice.note.as_deref(),
        Some("held since 2026-11-27T03:00:00Z: backup-1 runs")
    );
    let error = Notifier::parse(
        "sinks: [{name: a, type: webhook, url: 'http://r/x'}]\nroutes: [{sink: a, heldLongerThan: 30d}]",
    )
    .unwrap_err();
    assert!(error.contains("heldLongerThan"), "{error}");
}

#[test]
fn a_window_not_accounted_is_one_event_per_sink_keyed_by_its_start() {
    let notifier = Notifier::parse(FILE).unwrap();
    let from = Utc.with_ymd_and_hms(2026, 11, 27, 1, 0, 0).unwrap();
    let to = Utc.with_ymd_and_hms(2026, 11, 27, 3, 0, 0).unwrap();
    let notices = notifier.gap_notices(&object("prod"), None, (from, to), "no journal", to);
    // the catch-all route only: the others pick restart and slot events
    assert_eq!(notices.len(), 1, "{notices:?}");
    let n = &notices[0];
    assert_eq!(
        (n.sink.as_str(), n.event, n.slot(), n.last_slot, n.note.as_deref()),
        (
            "audit",
            NoticeEvent::WindowUnaccounted,
            from,
            to,
            Some("no journal")
        )
    );
    assert_eq!(n.key(), "prod/web/2026-11-27T01:00:00.000Z/window_unaccounted");
}
