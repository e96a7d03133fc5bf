//! Notifications (`--notifications-file`): what happened to each slot, sent to webhooks and Slack
//! at least once. The file (mounted from a Secret: its URLs and signing keys are never logged)
//! names the sinks and the routes that pick events for them. A pass that journals a slot record
//! or a restart's end writes the events its routes pick into the journal's outbox in the same
//! transaction ([`Notifier::notices`]); the leader's delivery task sends them
//! ([`deliver::deliver`]): a lane per sink, one message per Eru, retried with backoff.

use std::{collections::BTreeMap, sync::Arc};

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{Selector, SelectorExt};
use serde::Deserialize;

use crate::{
    eru::core::{
        hold::Held, ledger::SlotRecord, messages::EruRecord, pause::Pause, run::RunRecord,
        schedule::slot_text as text,
    },
    journal::{NewNotice, NoticeOf, ObjectKey},
    vocab::{NoticeEvent, Outcome, Reason, RunOutcome},
};

pub mod deliver;
mod message;

/// The longest sink name (it is a metric label and part of every outbox row).
const SINK_NAME_MAX: usize = 63;

/// A sink's kind: how a message is shaped.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SinkKind {
    /// JSON: the Eru and its events, each with its idempotency key; signed when `hmacSecret` is set.
    Webhook,
    /// Slack's incoming webhooks: `{"text": …}`.
    Slack,
}

/// Where messages go.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Sink {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: SinkKind,
    /// Never logged nor shown: a Slack URL is its own credential.
    pub url: String,
    /// The key of the `X-Eru-Signature: sha256=<hex HMAC of the body>` header (webhooks only).
    #[serde(default)]
    pub hmac_secret: Option<String>,
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sink")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("url", &"***")
            .field("hmac_secret", &self.hmac_secret.as_ref().map(|_| "***"))
            .finish()
    }
}

/// Which events go to a sink. Every field narrows; an absent one matches all.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Route {
    pub sink: String,
    #[serde(default)]
    pub events: Option<Vec<NoticeEvent>>,
    /// Slot events with one of these reasons (restart events have none and always pass).
    #[serde(default)]
    pub reasons: Option<Vec<Reason>>,
    #[serde(default)]
    pub namespaces: Option<Vec<String>>,
    /// The Eru's labels (a deleted Eru's records match only a route without one).
    #[serde(default)]
    pub selector: Option<LabelSelector>,
    /// `slot_held` once a health gate has held the slot this long (`30m`, `90s`, `2h`; default
    /// 30m, when the `EruSlotHeldLong` alert fires).
    #[serde(default)]
    pub held_longer_than: Option<String>,
}

/// How long a slot is held before a route without `heldLongerThan` sends `slot_held`.
const HELD_DEFAULT: chrono::Duration = chrono::Duration::minutes(30);

/// The file: sinks and routes.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    sinks: Vec<Sink>,
    #[serde(default)]
    routes: Vec<Route>,
}

/// A route, its selector and hold threshold read.
#[derive(Clone, Debug)]
struct Compiled {
    route: Route,
    selector: Option<Selector>,
    held_after: chrono::Duration,
}

/// The sinks and routes, checked.
#[derive(Clone, Debug)]
pub struct Notifier {
    sinks: Arc<BTreeMap<String, Sink>>,
    routes: Vec<Compiled>,
}

/// One event, before routing.
pub(crate) struct Event {
    of: NoticeOf,
    event: NoticeEvent,
    /// The slot's reason (a slot record's; a hold's gate), which a route's `reasons` filter.
    reason: Option<Reason>,
    /// The outbox's reason text: the slot's reason, or why a restart ended so.
    pub(crate) why: Option<String>,
    last_slot: DateTime<Utc>,
    count: i64,
    note: Option<String>,
    /// How long the slot has been held (`slot_held` only).
    held_for: Option<chrono::Duration>,
}

impl Notifier {
    /// Reads the notifications file; every sink and route is checked, so a bad file is refused
    /// whole, with what is wrong (never a URL or a secret).
    pub fn parse(text: &str) -> Result<Self, String> {
        let file: File = serde_yaml::from_str(text).map_err(|e| format!("not a notifications file: {e}"))?;
        let mut sinks = BTreeMap::new();
        for sink in file.sinks {
            check_sink(&sink)?;
            if sinks.contains_key(&sink.name) {
                return Err(format!("sink {:?} is named twice", sink.name));
            }
            sinks.insert(sink.name.clone(), sink);
        }
        let mut routes = Vec::new();
        for (i, route) in file.routes.into_iter().enumerate() {
            if !sinks.contains_key(&route.sink) {
                return Err(format!("routes[{i}]: no sink is named {:?}", route.sink));
            }
            let selector = match &route.selector {
                None => None,
                Some(s) => Some(
                    Selector::try_from(s.clone()).map_err(|e| format!("routes[{i}].selector: {}", e.0))?,
                ),
            };
            let held_after = match &route.held_longer_than {
                None => HELD_DEFAULT,
                Some(text) => parse_age(text).ok_or_else(|| {
                    format!("routes[{i}].heldLongerThan: {text:?} is not a duration like 90s, 30m or 2h")
                })?,
            };
            routes.push(Compiled {
                route,
                selector,
                held_after,
            });
        }
        Ok(Self {
            sinks: Arc::new(sinks),
            routes,
        })
    }

    /// The configured sink named `name`.
    pub fn sink(&self, name: &str) -> Option<&Sink> {
        self.sinks.get(name)
    }

    /// The sinks' names (the metrics' label values).
    pub fn sink_names(&self) -> impl Iterator<Item = &str> {
        self.sinks.keys().map(String::as_str)
    }

    /// The outbox rows of `records` of the Eru `object` (labelled `labels`, `None` once
    /// deleted), and of the slot `held` by a health gate: an event per record (a hold's once it
    /// has lasted as long as a route asks), to each sink a route picks it for (once per sink).
    pub fn notices(
        &self,
        object: &ObjectKey,
        labels: Option<&BTreeMap<String, String>>,
        (records, held): (&[EruRecord], Option<&Held>),
        now: DateTime<Utc>,
    ) -> Vec<NewNotice> {
        let held = held.map(|h| Event {
            of: NoticeOf::Held(h.slot),
            event: NoticeEvent::SlotHeld,
            reason: Some(h.reason),
            why: Some(h.reason.as_str().to_string()),
            last_slot: h.slot,
            count: 1,
            note: Some(format!("held since {}: {}", text(h.since), h.note)),
            held_for: Some(now - h.since),
        });
        self.route(object, labels, events(records, now).into_iter().chain(held), now)
    }

    /// The outbox rows of a window of the Eru `object` whose slots cannot be accounted
    /// (`from`..`to`, why in `note`): one per sink a route picks it for.
    pub fn gap_notices(
        &self,
        object: &ObjectKey,
        labels: Option<&BTreeMap<String, String>>,
        (from, to): (DateTime<Utc>, DateTime<Utc>),
        note: &str,
        now: DateTime<Utc>,
    ) -> Vec<NewNotice> {
        let gap = Event {
            of: NoticeOf::Gap(from),
            event: NoticeEvent::WindowUnaccounted,
            reason: None,
            why: None,
            last_slot: to,
            count: 1,
            note: Some(note.to_string()),
            held_for: None,
        };
        self.route(object, labels, std::iter::once(gap), now)
    }

    /// `events` of the Eru `object`, to each sink a route picks each for (once per sink).
    fn route(
        &self,
        object: &ObjectKey,
        labels: Option<&BTreeMap<String, String>>,
        events: impl Iterator<Item = Event>,
        now: DateTime<Utc>,
    ) -> Vec<NewNotice> {
        let mut notices = Vec::new();
        for event in events {
            let mut sinks: Vec<&str> = (self.routes.iter())
                .filter(|c| picks(c, object, labels, &event))
                .map(|c| c.route.sink.as_str())
                .collect();
            sinks.sort_unstable();
            sinks.dedup();
            for sink in sinks {
                notices.push(NewNotice {
                    sink: sink.to_string(),
                    object: object.clone(),
                    of: event.of.clone(),
                    event: event.event,
                    last_slot: event.last_slot,
                    slot_count: event.count,
                    reason: event.why.clone(),
                    note: event.note.clone(),
                    created_at: now,
                });
            }
        }
        notices
    }
}

/// Whether `route` picks `event` of the Eru `object`.
fn picks(
    route: &Compiled,
    object: &ObjectKey,
    labels: Option<&BTreeMap<String, String>>,
    event: &Event,
) -> bool {
    let r = &route.route;
    r.events.as_ref().is_none_or(|e| e.contains(&event.event))
        && event
            .reason
            .is_none_or(|reason| r.reasons.as_ref().is_none_or(|rs| rs.contains(&reason)))
        && r.namespaces
            .as_ref()
            .is_none_or(|n| n.contains(&object.namespace))
        && route
            .selector
            .as_ref()
            .is_none_or(|s| labels.is_some_and(|l| s.matches(l)))
        && event.held_for.is_none_or(|held| held >= route.held_after)
}

/// The events of journaled records: a slot record not fired (missed or skipped, with its
/// reason), a restart's end, a manual run's end (at `now` unless the record says when).
fn events(records: &[EruRecord], now: DateTime<Utc>) -> Vec<Event> {
    let mut events = Vec::new();
    for record in records {
        match record {
            EruRecord::Slots(slots) => events.extend(slots.iter().filter_map(slot)),
            EruRecord::Finished {
                slot,
                outcome,
                reason,
                ..
            } => events.extend(finished(*slot, *outcome, reason.as_deref())),
            EruRecord::GaveUp { slot, reason, record } => {
                events.extend(finished(*slot, Outcome::Abandoned, Some(reason)));
                events.extend(self::slot(record));
            }
            EruRecord::Run(RunRecord::Ended {
                token,
                outcome,
                at,
                reason,
            }) => events.extend(run(token, *outcome, at.unwrap_or(now), reason.as_deref())),
            EruRecord::Run(RunRecord::Withdrawn { token, reason }) => {
                events.extend(run(token, RunOutcome::Refused, now, Some(reason)));
            }
            EruRecord::Paused(pause) => events.push(paused(pause)),
            _ => {}
        }
    }
    events
}

/// The event of a slot record not fired, with the reason every surface shows
/// ([`Reason::shown`]).
pub(crate) fn slot(r: &SlotRecord) -> Option<Event> {
    let reason = r.reason.shown()?;
    Some(Event {
        of: NoticeOf::Slot(r.first),
        event: NoticeEvent::of_result(reason.result())?,
        reason: Some(reason),
        why: Some(reason.as_str().to_string()),
        last_slot: r.last,
        count: r.count,
        note: r.note.clone(),
        held_for: None,
    })
}

/// The event of a restart that ended with `outcome` (for `why`).
fn finished(slot: DateTime<Utc>, outcome: Outcome, why: Option<&str>) -> Option<Event> {
    Some(Event {
        of: NoticeOf::Finished(slot),
        event: NoticeEvent::of_outcome(outcome)?,
        reason: None,
        why: why.map(str::to_string),
        last_slot: slot,
        count: 1,
        note: None,
        held_for: None,
    })
}

/// The event of a pause on failure: its `since` as its slot, the restarts that tripped it as its
/// note.
fn paused(pause: &Pause) -> Event {
    Event {
        of: NoticeOf::Paused(pause.since),
        event: NoticeEvent::PausedOnFailure,
        reason: Some(Reason::PausedOnFailure),
        why: Some(Reason::PausedOnFailure.as_str().to_string()),
        last_slot: pause.since,
        count: 1,
        note: Some(pause.why.clone()),
        held_for: None,
    }
}

/// The event of the manual run `token` that ended with `outcome` at `ended` (for `why`).
fn run(token: &str, outcome: RunOutcome, ended: DateTime<Utc>, why: Option<&str>) -> Option<Event> {
    Some(Event {
        of: NoticeOf::Run {
            token: token.to_string(),
            ended,
        },
        event: NoticeEvent::of_run(outcome)?,
        reason: None,
        why: why.map(str::to_string),
        last_slot: ended,
        count: 1,
        note: Some(format!("run-now token {token}")),
        held_for: None,
    })
}

/// `90s`, `30m`, `2h`: from a second to a week.
fn parse_age(text: &str) -> Option<chrono::Duration> {
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = text.split_at(split);
    let n: i64 = n.parse().ok()?;
    let seconds = match unit {
        "s" => n,
        "m" => n.checked_mul(60)?,
        "h" => n.checked_mul(3600)?,
        _ => return None,
    };
    (1..=7 * 86_400)
        .contains(&seconds)
        .then(|| chrono::Duration::seconds(seconds))
}

/// A sink as the file may name it: a short DNS label (it is a metric label), an http(s) URL.
fn check_sink(sink: &Sink) -> Result<(), String> {
    let name = &sink.name;
    let label = !name.is_empty()
        && name.len() <= SINK_NAME_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if !label {
        return Err(format!(
            "sink {name:?}: a name is lower-case letters, digits and '-', at most {SINK_NAME_MAX}"
        ));
    }
    if !(sink.url.starts_with("http://") || sink.url.starts_with("https://")) {
        return Err(format!(
            "sink {name:?}: its url is not an http:// or https:// URL"
        ));
    }
    if sink.hmac_secret.is_some() && sink.kind != SinkKind::Webhook {
        return Err(format!("sink {name:?}: hmacSecret signs webhook sinks only"));
    }
    if sink.hmac_secret.as_deref() == Some("") {
        return Err(format!("sink {name:?}: hmacSecret is empty"));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
