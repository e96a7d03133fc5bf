//! The audit as pages a person reads after an outage: `GET /ui` (every Eru of a window on one
//! timeline) and `GET /ui/eru/{namespace}/{name}` (one Eru's slots, times and epochs). A page is a
//! pure function of an [`Audit`]: fetch → view → render (HTML + inline SVG and CSS, no script, no
//! external asset: clusters are often air-gapped). Colour is never the only signal: every outcome
//! has its shape, every reason class its pattern, and every mark a `<title>` for hover text.

use chrono::{DateTime, Duration, Utc};
use maud::{DOCTYPE, Markup, PreEscaped, html};
use serde::Deserialize;

mod timeline;

use timeline::{legend, timeline};

use crate::{
    history::{
        audit::{Audit, AuditParams, EruAudit},
        params::{Namespace, ObjectName, TargetName, Time},
    },
    journal::{SlotRecordRow, Ts},
    vocab::{Outcome, Reason, SlotResult},
};

/// Erus one page draws at most; the table still lists the numbers of all of them.
pub const ROW_CAP: usize = 2_000;
/// Marks (restarts and spans) one page draws at most.
pub const MARK_CAP: usize = 60_000;
/// The timeline's width in pixels, and the label column's.
const WIDTH: f64 = 1000.0;
const LABEL: f64 = 240.0;
const ROW: f64 = 22.0;
const AXIS: f64 = 28.0;

/// Query parameters of the pages: the audit's, a preset window and a reason to show.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageParams {
    pub namespace: Option<Namespace>,
    pub name: Option<ObjectName>,
    pub target: Option<TargetName>,
    pub since: Option<Time>,
    pub until: Option<Time>,
    /// `1h`, `24h`, `7d` or `30d` before `until` (when `since` is not given).
    pub window: Option<Preset>,
    /// Only slots not restarted for this reason.
    pub reason: Option<Reason>,
}

/// The preset windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum Preset {
    #[serde(rename = "1h")]
    Hour,
    #[serde(rename = "24h")]
    Day,
    #[serde(rename = "7d")]
    Week,
    #[serde(rename = "30d")]
    Month,
}

impl Preset {
    const ALL: [(Preset, &'static str); 4] = [
        (Preset::Hour, "1h"),
        (Preset::Day, "24h"),
        (Preset::Week, "7d"),
        (Preset::Month, "30d"),
    ];

    fn length(self) -> Duration {
        match self {
            Preset::Hour => Duration::hours(1),
            Preset::Day => Duration::hours(24),
            Preset::Week => Duration::days(7),
            Preset::Month => Duration::days(30),
        }
    }
}

impl PageParams {
    /// The audit's parameters: a preset becomes `since`.
    pub fn audit_params(&self, now: DateTime<Utc>) -> AuditParams {
        let until = self.until;
        let since = self.since.or_else(|| {
            let preset = self.window?;
            Some(Time(until.map_or(now, |u| u.0) - preset.length()))
        });
        AuditParams {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            target: self.target.clone(),
            since,
            until,
        }
    }
}

/// The page of every Eru in the window; `fleet` is (waiting, in flight) now.
pub fn fleet_page(audit: &Audit, params: &PageParams, fleet: (i64, i64)) -> Markup {
    let erus: Vec<&EruAudit> = audit
        .erus
        .iter()
        .filter(|e| (params.reason).is_none_or(|r| e.not_restarted.iter().any(|n| n.reason == Some(r))))
        .collect();
    let title = "ERU audit";
    page(
        title,
        html! {
            header {
                h1 { "Restart audit" }
                p.window { "Window " (audit.since) " – " (audit.until) " (UTC)" }
                (presets(params))
                (filters(params))
            }
            (verdict(audit))
            (operator(audit, fleet))
            section aria-label="timeline" {
                h2 { "Timeline" }
                (legend())
                (timeline(audit, &erus, params.reason, true))
            }
            section aria-label="numbers" {
                h2 { "Every Eru" }
                (numbers(&erus))
            }
        },
    )
}

/// The page of one Eru.
pub fn eru_page(audit: &Audit, eru: &EruAudit) -> Markup {
    let title = format!("{}/{} — ERU audit", eru.namespace, eru.name);
    page(
        &title,
        html! {
            header {
                p { a href=(format!("/ui?since={}&until={}", audit.since, audit.until)) { "← every Eru" } }
                h1 { (eru.namespace) "/" (eru.name) }
                p.window { "Window " (audit.since) " – " (audit.until) " (UTC) · uid " code { (eru.uid) } }
            }
            section.verdict.(if eru.accounted { "ok" } else { "bad" }) aria-label="verdict" {
                p {
                    (if eru.accounted { "✔ Every slot is accounted exactly once." } else { "✘ Not every slot is accounted exactly once." })
                }
                @if let Some(note) = &eru.note { p.note { (note) } }
                @if let Some(c) = &eru.counters {
                    p { "Running counters over the whole journal: " (c.fired_slots) " fired, " (c.missed_slots)
                        " missed or skipped; its rows: " (c.rows_fired) " and " (c.rows_not_fired) ". "
                        (if c.agree { "They agree." } else { "They differ: " })
                        @if let Some(n) = &c.note { (n) } }
                }
            }
            section aria-label="timeline" {
                (legend())
                (timeline(audit, &[eru], None, false))
            }
            section aria-label="numbers" { (numbers(&[eru])) }
            section aria-label="epochs" {
                h2 { "Spec epochs in force" }
                table.epochs {
                    thead { tr { th { "generation" } th { "effective from" } th { "schedule" } th { "time zone" } th { "suspend" } th { "target" } } }
                    tbody {
                        @for e in &eru.epochs {
                            tr { td { (e.generation) } td { (e.effective_from) } td { code { (e.schedule) } }
                                 td { (e.time_zone.as_deref().unwrap_or("UTC")) } td { @if e.suspend { "yes" @if let Some(n) = &e.suspend_note { ": " (n) } } @else { "no" } } td { (e.target) } }
                        }
                    }
                }
            }
            section aria-label="slots" {
                h2 { "Slots" }
                table.slots {
                    thead { tr { th { "slot" } th { "slots" } th { "result" } th { "reason" } th { "window" } th { "note" }
                                 th { "decided" } th { "patched" } th { "finished" } th { "restart" } } }
                    tbody {
                        @for r in &eru.records { (slot_row(r)) }
                    }
                }
                @if eru.in_flight.is_some() || eru.pending > 0 {
                    p { (eru.pending) " slots after the ledger's cursor are not accounted yet"
                        @if let Some(slot) = eru.in_flight { " (the restart of " (slot) " is in flight)" } "." }
                }
                @if let Some(h) = &eru.held {
                    p.held data-held=(h.reason) {
                        b { "Held now: " } "the slot " (h.slot) " waits for its health gates (" (h.reason) "): " (h.note)
                        "; held since " (h.since) ", last asked " (h.checked_at) ". It runs when they open before "
                        (h.deadline) ", or is recorded skipped " (h.reason) "."
                    }
                }
            }
        },
    )
}

/// A page telling why its parameters were refused.
pub fn refused(message: &str) -> Markup {
    page(
        "ERU audit: bad request",
        html! {
            h1 { "This audit cannot be shown" }
            p.error role="alert" { (message) }
            p { a href="/ui" { "The last 24 hours of every Eru" } }
        },
    )
}

fn page(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                title { (title) }
                style { (PreEscaped(CSS)) }
            }
            body { main { (body) } }
        }
    }
}

fn presets(params: &PageParams) -> Markup {
    let link = |preset: &str| {
        let mut query = vec![format!("window={preset}")];
        if let Some(n) = &params.namespace {
            query.push(format!("namespace={}", n.0));
        }
        if let Some(n) = &params.name {
            query.push(format!("name={}", n.0));
        }
        format!("/ui?{}", query.join("&"))
    };
    html! {
        nav.presets aria-label="window" {
            "Last: "
            @for (preset, label) in Preset::ALL {
                a href=(link(label)) aria-current=[(params.window == Some(preset)).then_some("true")] { (label) } " "
            }
        }
    }
}

fn filters(params: &PageParams) -> Markup {
    let value = |v: Option<String>| v.unwrap_or_default();
    html! {
        form.filters method="get" action="/ui" {
            label { "Namespace " input name="namespace" value=(value(params.namespace.as_ref().map(|n| n.0.clone()))); }
            label { "Name " input name="name" value=(value(params.name.as_ref().map(|n| n.0.clone()))); }
            label { "Reason "
                select name="reason" {
                    option value="" { "any" }
                    @for r in Reason::not_restarted() {
                        option value=(r.as_str()) selected[params.reason == Some(r)] { (r.as_str()) }
                    }
                }
            }
            @if let Some(since) = &params.since { input type="hidden" name="since" value=(Ts(since.0)); }
            @if let Some(until) = &params.until { input type="hidden" name="until" value=(Ts(until.0)); }
            @if let Some(w) = params.window {
                input type="hidden" name="window" value=(Preset::ALL.iter().find(|p| p.0 == w).map_or("24h", |p| p.1));
            }
            button type="submit" { "Filter" }
        }
    }
}

fn verdict(audit: &Audit) -> Markup {
    let v = &audit.verdict;
    html! {
        section.verdict.(if v.accounted { "ok" } else { "bad" }) aria-label="verdict" {
            p.summary { (if v.accounted { "✔ " } else { "✘ " }) (v.summary) }
            dl.counts {
                dt { "Erus" } dd data-count="erus" { (v.erus) }
                dt { "Slots" } dd data-count="slots" { (v.slots) }
                dt { "Restarted" } dd data-count=(SlotResult::Fired) { (v.fired) }
                dt { "Missed or skipped" } dd data-count="not_restarted" { (v.not_restarted) }
                dt { "Not yet accounted" } dd data-count="pending" { (v.pending) }
                dt { "Without a record" } dd data-count="unaccounted" { (v.unaccounted) }
                dt { "Recorded twice" } dd data-count="duplicated" { (v.duplicated) }
                dt { "Outside the schedule" } dd data-count="outside_schedule" { (v.outside_schedule) }
                @if v.invalid > 0 {
                    dt { "Records breaking the journal's invariant" } dd data-count="invalid" { (v.invalid) }
                }
                @if v.not_audited > 0 {
                    dt { "Erus not audited (work budget spent)" } dd data-count="not_audited" { (v.not_audited) }
                }
            }
            p.small { "Running counters are cross-checked against the rows on each Eru's page and in /audit." }
        }
    }
}

fn operator(audit: &Audit, (waiting, in_flight): (i64, i64)) -> Markup {
    let op = &audit.operator;
    let windows = |ws: &[crate::history::Window]| -> Markup {
        html! { @if ws.is_empty() { "none" } @else { @for (i, w) in ws.iter().enumerate() { @if i > 0 { "; " } span.window { (w.start) " – " (w.end) } } } }
    };
    html! {
        section.operator aria-label="operator" {
            h2 { "The operator" }
            ul {
                @if let Some(w) = &op.no_journal {
                    li data-fact="no_journal" { b { "No journal before " (w.end) ": " }
                        "this journal holds nothing of " span.window { (w.start) " – " (w.end) }
                        " (its first run started after it, or none yet): not downtime, unknown to it" }
                }
                li data-fact="downtime" { b { "Down: " } (windows(&op.downtime)) }
                li data-fact="journal_outages" { b { "Journal took no writes: " } (windows(&op.journal_outages)) }
                li data-fact="handovers" { b { "Leader handovers: " }
                    @if op.handovers.is_empty() { "none" }
                    @for h in &op.handovers { span { (h.at) " " (h.from) " → " (h.to) } " " } }
                li data-fact="runs" { b { "Runs: " } (op.runs.len()) }
                li data-fact="blackouts" { b { "Cluster-wide blackouts: " }
                    @if op.cluster_blackouts.is_empty() { "none" }
                    @for b in &op.cluster_blackouts { span { (b.name.as_deref().unwrap_or("unnamed")) " (" (b.spec) ") " } } }
                li data-fact="fleet" { b { "Fleet now: " } (in_flight) " restarts in flight, " (waiting) " due slots waiting for a place, "
                    span data-count="held" { (audit.verdict.held) } " held by health gates" }
                li data-fact="notifications" { b { "Notifications now: " } (op.notifications.summary()) }
            }
        }
    }
}

fn numbers(erus: &[&EruAudit]) -> Markup {
    html! {
        table.numbers {
            thead { tr {
                th { "Eru" } th { "slots" } th { "restarted" } th { "missed or skipped" } th { "not yet accounted" }
                th { "without a record" } th { "twice" } th { "outside schedule" } th { "accounted" }
            } }
            tbody {
                @for e in erus {
                    tr data-eru=(format!("{}/{}", e.namespace, e.name)) {
                        td { (e.namespace) "/" (e.name) }
                        td data-count="slots" { (e.slots) }
                        td data-count=(SlotResult::Fired) { (e.fired.total)
                            @if e.fired.total > 0 {
                                " (" (e.fired.succeeded) " succeeded"
                                @if e.fired.failed > 0 { ", " (e.fired.failed) " failed" }
                                @if e.fired.abandoned > 0 { ", " (e.fired.abandoned) " abandoned" }
                                @if e.fired.in_progress > 0 { ", " (e.fired.in_progress) " in progress" }
                                @if e.fired.reverted > 0 { "; " (e.fired.reverted) " reverted" }
                                ")"
                            }
                        }
                        td data-count="not_restarted" {
                            @if e.not_restarted.is_empty() { "0" }
                            @for n in &e.not_restarted {
                                @let reason = n.reason.map_or("(no reason)", Reason::as_str);
                                span data-reason=(reason) { (n.slots) " " (reason) } " "
                            }
                        }
                        td data-count="pending" { (e.pending) }
                        td data-count="unaccounted" { (e.unaccounted.count) }
                        td data-count="duplicated" { (e.duplicated.count) }
                        td data-count="outside_schedule" { (e.outside_schedule.count) }
                        td { (if e.accounted { "yes" } else { "NO" }) }
                    }
                }
            }
        }
    }
}

fn slot_row(r: &SlotRecordRow) -> Markup {
    let s = &r.record;
    let time = |t: Option<Ts>| t.map_or("–".to_string(), |t| t.to_string());
    html! {
        tr data-kind=(s.result) {
            td { (s.slot) } td { (s.slot_count) } td { (s.result) } td { (s.reason.filter(|_| s.result != SlotResult::Fired).map_or("–", Reason::as_str)) }
            td { @if let (Some(a), Some(b)) = (s.window_start, s.window_end) { (a) " – " (b) } @else { "–" } }
            td { (s.note.as_deref().unwrap_or("–")) }
            td { (time(r.restart_decided_at)) } td { (time(r.restart_patched_at)) } td { (time(r.restart_finished_at)) }
            td { (r.restart_outcome.map_or("–", Outcome::as_str)) }
        }
    }
}

/// A label that fits the label column.
fn shorten(label: &str) -> String {
    const MAX: usize = 32;
    if label.chars().count() <= MAX {
        label.to_string()
    } else {
        let head: String = label.chars().take(MAX - 1).collect();
        format!("{head}…")
    }
}

/// The pages' style: light and dark (`prefers-color-scheme`), no external asset.
const CSS: &str = include_str!("ui/style.css");
