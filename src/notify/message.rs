//! A message: one Eru's pending events for one sink, shaped for it (a JSON webhook, signed when
//! it has a key; Slack's `{"text": …}`), and its sending.

use std::time::Duration;

use serde::Serialize;

use super::{Sink, SinkKind};
use crate::journal::{NoticeRow, Ts};
use crate::vocab::{NoticeEvent, SlotResult};

/// Longest a receiver may take to answer one message.
pub(super) const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// The webhook's body.
#[derive(Serialize)]
struct Body<'a> {
    /// `eru-operator`: what sent it.
    source: &'static str,
    eru: EruRef<'a>,
    /// One line per event, as Slack shows them.
    summary: String,
    events: Vec<EventItem<'a>>,
}

#[derive(Serialize)]
struct EruRef<'a> {
    namespace: &'a str,
    name: &'a str,
    uid: &'a str,
}

/// One event: `key` (`namespace/name/slot/event`) is the same on every delivery of it.
#[derive(Serialize)]
struct EventItem<'a> {
    key: &'a str,
    event: NoticeEvent,
    slot: Ts,
    last_slot: Ts,
    slot_count: i64,
    reason: Option<&'a str>,
    note: Option<&'a str>,
    /// When it was journaled.
    at: Ts,
}

/// One line about a run of events alike (one event, reason and note), `rows` oldest first.
fn line(rows: &[&NoticeRow]) -> String {
    let (first, last) = (rows[0], rows[rows.len() - 1]);
    let why = first
        .reason
        .as_deref()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    let what = match first.event {
        NoticeEvent::RestartSucceeded => "restart succeeded",
        NoticeEvent::RestartFailed => "restart failed",
        NoticeEvent::RestartAbandoned => "restart abandoned",
        NoticeEvent::SlotMissed => SlotResult::Missed.as_str(),
        NoticeEvent::SlotSkipped => SlotResult::Skipped.as_str(),
        NoticeEvent::SlotHeld => "held by a health gate",
        NoticeEvent::WindowUnaccounted => "not accounted",
        NoticeEvent::RunSucceeded => "manual run succeeded",
        NoticeEvent::RunFailed => "manual run failed",
        NoticeEvent::RunAbandoned => "manual run abandoned",
        NoticeEvent::RunRefused => "manual run refused",
        NoticeEvent::PausedOnFailure => "paused on failure",
    };
    let count: i64 = rows.iter().map(|r| r.slot_count).sum();
    let slots = if first.event == NoticeEvent::PausedOnFailure {
        format!("since {}", first.slot)
    } else if first.event.of_a_run() {
        format!("ended {}", first.slot)
    } else if count > 1 || first.event == NoticeEvent::WindowUnaccounted {
        format!("{count} slots {} to {}", first.slot, last.last_slot)
    } else {
        format!("slot {}", first.slot)
    };
    let note = first
        .note
        .as_deref()
        .map(|n| format!(": {n}"))
        .unwrap_or_default();
    format!("{slots}: {what}{why}{note}")
}

/// The summary of `rows` (one Eru's, oldest first): its name, then a line per run of events
/// alike (an outage's slots, missed for one reason, are one line).
fn summary(rows: &[NoticeRow]) -> String {
    let first = &rows[0];
    let mut text = format!("Eru {}/{}:", first.namespace, first.name);
    let alike = |a: &NoticeRow, b: &NoticeRow| (a.event, &a.reason, &a.note) == (b.event, &b.reason, &b.note);
    let mut run: Vec<&NoticeRow> = Vec::new();
    for row in rows {
        if run.last().is_some_and(|last| !alike(last, row)) {
            text.push_str(&format!("\n- {}", line(&run)));
            run.clear();
        }
        run.push(row);
    }
    text.push_str(&format!("\n- {}", line(&run)));
    text
}

/// The body of the message of `rows` (one Eru's, non-empty) to `sink`.
pub(super) fn body(sink: &Sink, rows: &[NoticeRow]) -> String {
    let first = &rows[0];
    match sink.kind {
        SinkKind::Slack => serde_json::json!({ "text": summary(rows) }).to_string(),
        SinkKind::Webhook => serde_json::to_string(&Body {
            source: "eru-operator",
            eru: EruRef {
                namespace: &first.namespace,
                name: &first.name,
                uid: &first.uid,
            },
            summary: summary(rows),
            events: rows
                .iter()
                .map(|r| EventItem {
                    key: &r.key,
                    event: r.event,
                    slot: r.slot,
                    last_slot: r.last_slot,
                    slot_count: r.slot_count,
                    reason: r.reason.as_deref(),
                    note: r.note.as_deref(),
                    at: r.created_at,
                })
                .collect(),
        })
        .expect("a message serializes"),
    }
}

/// `sha256=<hex>` of the HMAC-SHA256 of `body` under `secret`.
pub(super) fn signature(secret: &str, body: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
    let tag = ring::hmac::sign(&key, body.as_bytes());
    let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// POSTs `body` to `sink` (blocking). The error never names the URL: a Slack URL is a
/// credential, so it says what failed and how.
pub(super) fn send(agent: &ureq::Agent, sink: &Sink, body: &str) -> Result<(), String> {
    let mut request = agent.post(&sink.url).header("Content-Type", "application/json");
    if let Some(secret) = &sink.hmac_secret {
        request = request.header("X-Eru-Signature", signature(secret, body));
    }
    match request.send(body) {
        Ok(_) => Ok(()),
        Err(ureq::Error::StatusCode(code)) => Err(format!("the receiver answered HTTP {code}")),
        Err(ureq::Error::Timeout(_)) => Err(format!("no answer within {}s", SEND_TIMEOUT.as_secs())),
        Err(ureq::Error::Io(e)) => Err(format!("connection failed: {}", e.kind())),
        Err(ureq::Error::HostNotFound) => Err("the receiver's host was not found".to_string()),
        Err(ureq::Error::ConnectionFailed) => Err("connection failed".to_string()),
        Err(e) => Err(format!("the request failed: {}", hide(&e.to_string(), &sink.url))),
    }
}

/// `text` without `url`, its host or any part of its path (an error's text may quote them).
fn hide(text: &str, url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let mut parts: Vec<&str> = rest.split(['/', '?', '@', '#']).filter(|p| p.len() > 2).collect();
    parts.push(url);
    parts.sort_by_key(|p| std::cmp::Reverse(p.len()));
    parts
        .into_iter()
        .fold(text.to_string(), |text, part| text.replace(part, "***"))
}

#[cfg(test)]
mod tests {
    //! The text people read: a line per run of events alike, the run's slots counted, and the
    //! webhook's body around it, and an error's text without the URL (mutations of `line`,
    //! `summary`, `body` and `hide`).

    use chrono::{TimeZone, Utc};

    use super::{Sink, SinkKind, body, hide, summary};
    use crate::journal::{NoticeRow, Ts};
    use crate::vocab::NoticeEvent;

    fn ts(minute: u32) -> Ts {
        Ts(Utc.with_ymd_and_hms(2026, 11, 29, 3, minute, 0).unwrap())
    }

    /// A row of Eru `ns/web` for the slots `first`..`last` (minutes), `count` of them.
    fn row(event: NoticeEvent, (first, last, count): (u32, u32, i64), reason: Option<&str>) -> NoticeRow {
        NoticeRow {
            id: 0,
            sink: "hook".into(),
            key: format!("ns/web/{first}/{event}"),
            uid: "u-1".into(),
            namespace: "ns".into(),
            name: "web".into(),
            event,
            slot: ts(first),
            last_slot: ts(last),
            slot_count: count,
            reason: reason.map(str::to_string),
            note: None,
            created_at: ts(59),
            attempts: 0,
            next_attempt_at: ts(59),
            last_error: None,
        }
    }

    #[test]
    fn a_line_per_run_of_events_alike_with_its_slots_counted() {
        use NoticeEvent::*;
        let mut noted = row(SlotSkipped, (9, 9, 1), Some("blackout"));
        noted.note = Some("a freeze".into());
        let rows = [
            row(SlotMissed, (1, 2, 2), Some("operator_down")),
            row(SlotMissed, (3, 3, 1), Some("operator_down")),
            row(SlotMissed, (4, 4, 1), Some("journal_unavailable")),
            row(RestartSucceeded, (5, 5, 1), None),
            row(RunFailed, (6, 6, 1), None),
            row(PausedOnFailure, (7, 7, 1), None),
            row(WindowUnaccounted, (8, 8, 1), None),
            noted,
        ];
        let (a, b, c, d, e, f, g, h) = (ts(1), ts(3), ts(4), ts(5), ts(6), ts(7), ts(8), ts(9));
        assert_eq!(
            summary(&rows),
            format!(
                "Eru ns/web:\
                 \n- 3 slots {a} to {b}: missed (operator_down)\
                 \n- slot {c}: missed (journal_unavailable)\
                 \n- slot {d}: restart succeeded\
                 \n- ended {e}: manual run failed\
                 \n- since {f}: paused on failure\
                 \n- 1 slots {g} to {g}: not accounted\
                 \n- slot {h}: skipped (blackout): a freeze"
            )
        );
    }

    #[test]
    fn the_webhook_carries_the_summary_and_every_event_and_slack_the_summary_alone() {
        let rows = [
            row(NoticeEvent::SlotHeld, (1, 1, 1), Some("alert_firing")),
            row(NoticeEvent::RestartFailed, (2, 2, 1), None),
        ];
        let sink = |kind| Sink {
            name: "hook".into(),
            kind,
            url: "http://127.0.0.1/".into(),
            hmac_secret: None,
        };
        let webhook: serde_json::Value =
            serde_json::from_str(&body(&sink(SinkKind::Webhook), &rows)).unwrap();
        assert_eq!(webhook["source"], "eru-operator");
        assert_eq!(
            webhook["eru"],
            serde_json::json!({"namespace": "ns", "name": "web", "uid": "u-1"})
        );
        assert_eq!(webhook["summary"], summary(&rows));
        let events = webhook["events"].as_array().unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(events[0]["event"], "slot_held");
        assert_eq!(events[0]["reason"], "alert_firing");
        assert_eq!(events[1]["key"], rows[1].key);
        let slack: serde_json::Value = serde_json::from_str(&body(&sink(SinkKind::Slack), &rows)).unwrap();
        assert_eq!(slack, serde_json::json!({"text": summary(&rows)}));
        assert!(summary(&rows).contains("held by a health gate (alert_firing)"));
    }

    #[test]
    fn an_error_keeps_its_words_without_the_url_or_any_part_of_it() {
        // parts of two characters or fewer stay (`v1`): hiding them would garble the words
        // around them (mutations: `> 2` → `>= 2`, `== 2`, `< 2`)
        let url = "https://hooks.slack.com/services/v1/T000/B000/s3cr3t";
        let text = "error sending request for url (https://hooks.slack.com/services/v1/T000/B000/s3cr3t): \
                    dns error for hooks.slack.com, path /services/v1/T000/B000/s3cr3t";
        let hidden = hide(text, url);
        assert_eq!(
            hidden,
            "error sending request for url (***): dns error for ***, path /***/v1/***/***/***"
        );
        for part in ["hooks.slack.com", "s3cr3t", "T000", "B000", "services"] {
            assert!(!hidden.contains(part), "{hidden}");
        }
    }
}
