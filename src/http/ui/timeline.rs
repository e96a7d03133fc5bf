//! The timeline of the audit pages: one SVG, a row per Eru drawn over its life, restart marks
//! shaped by outcome, spans patterned by reason, the operator's downtime within each row's life,
//! and bands across every row for what precedes the journal, when the journal took no writes and
//! the cluster-wide blackouts.

use chrono::{DateTime, Duration, Utc};
use maud::{Markup, html};

use super::{AXIS, LABEL, MARK_CAP, ROW, ROW_CAP, WIDTH, shorten};
use crate::{
    history::audit::{Audit, EruAudit},
    journal::SlotRecordRow,
    vocab::{Outcome, Reason, SlotResult},
};

pub(super) fn legend() -> Markup {
    html! {
        figure.legend aria-label="legend" {
            svg width="1270" height="24" role="img" aria-label="legend" {
                (defs())
                g transform="translate(8,12)" { (outcome_mark(Outcome::Succeeded, 0.0, 0.0, None)) }
                text x="20" y="16" { (Outcome::Succeeded) }
                g transform="translate(100,12)" { (outcome_mark(Outcome::Failed, 0.0, 0.0, None)) }
                text x="112" y="16" { (Outcome::Failed) }
                g transform="translate(170,12)" { (outcome_mark(Outcome::Abandoned, 0.0, 0.0, None)) }
                text x="182" y="16" { (Outcome::Abandoned) }
                g transform="translate(262,12)" { (outcome_mark(Outcome::InProgress, 0.0, 0.0, None)) }
                text x="274" y="16" { "in progress" }
                rect x="360" y="6" width="14" height="12" class=(SlotResult::Missed) {}
                text x="380" y="16" { (SlotResult::Missed) }
                rect x="440" y="6" width="14" height="12" class=(SlotResult::Skipped) {}
                text x="460" y="16" { (SlotResult::Skipped) }
                rect x="525" y="4" width="14" height="16" class="band down" {}
                text x="545" y="16" { "operator down" }
                rect x="640" y="4" width="14" height="16" class="band outage" {}
                text x="660" y="16" { "journal outage" }
                rect x="760" y="4" width="14" height="16" class="band blackout" {}
                text x="780" y="16" { (Reason::Blackout) }
                rect x="850" y="7" width="10" height="10" class="mark held" {}
                text x="866" y="16" { "held by a gate" }
                rect x="980" y="4" width="14" height="16" class="band nojournal" {}
                text x="1000" y="16" { "no journal" }
                path class="mark manual succeeded" d="M1086 6l6 6-6 6-6-6z" {}
                text x="1096" y="16" { "manual run" }
                circle.mark.reverted cx="1186" cy="12" r="7" {}
                text x="1198" y="16" { "reverted" }
            }
        }
    }
}

fn defs() -> Markup {
    html! {
        defs {
            pattern id="p-missed" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)" {
                rect width="6" height="6" class="missed-bg" {}
                line x1="0" y1="0" x2="0" y2="6" class="missed-line" {}
            }
            pattern id="p-skipped" width="5" height="5" patternUnits="userSpaceOnUse" {
                rect width="5" height="5" class="skipped-bg" {}
                circle cx="2.5" cy="2.5" r="1" class="skipped-dot" {}
            }
            pattern id="p-down" width="8" height="8" patternUnits="userSpaceOnUse" patternTransform="rotate(-45)" {
                line x1="0" y1="0" x2="0" y2="8" class="down-line" {}
            }
            pattern id="p-outage" width="8" height="8" patternUnits="userSpaceOnUse" {
                line x1="0" y1="4" x2="8" y2="4" class="outage-line" {}
            }
            pattern id="p-blackout" width="6" height="6" patternUnits="userSpaceOnUse" {
                circle cx="3" cy="3" r="1.2" class="blackout-dot" {}
            }
        }
    }
}

/// A coordinate, to a tenth of a pixel (a page draws tens of thousands: `1041.6666666666667`
/// would make it half again as large).
#[derive(Clone, Copy)]
struct Px(f64);

impl maud::Render for Px {
    fn render_to(&self, buffer: &mut String) {
        use std::fmt::Write;
        // tenths as an integer: `{:.1}` takes the exact (and slow) float formatter
        let tenths = (self.0 * 10.0).round() as i64;
        let sign = if tenths < 0 { "-" } else { "" };
        let _ = write!(buffer, "{sign}{}.{}", tenths.abs() / 10, tenths.abs() % 10);
    }
}

/// `at` as an offset after `slot`: `+1 s`, `+2 min 5 s`, `+3 h 0 min`.
fn after(slot: DateTime<Utc>, at: DateTime<Utc>) -> String {
    offset((at - slot).num_seconds())
}

/// Seconds as `+1 s`, `+2 min 5 s`, `+3 h 0 min`.
fn offset(seconds: i64) -> String {
    let sign = if seconds < 0 { "-" } else { "+" };
    let s = seconds.abs();
    match s {
        0..60 => format!("{sign}{s} s"),
        60..3600 => format!("{sign}{} min {} s", s / 60, s % 60),
        _ => format!("{sign}{} h {} min", s / 3600, s % 3600 / 60),
    }
}

/// A restart's mark: its outcome's shape (and colour, its class), centred on `(x, y)`, with its
/// hover text when it stands for a record (whose slot the text names).
fn outcome_mark(outcome: Outcome, x: f64, y: f64, title: Option<&str>) -> Markup {
    let t = html! { @if let Some(title) = title { title { (title) } } };
    let fired = SlotResult::Fired;
    match outcome {
        Outcome::Succeeded => {
            html! { circle.mark.succeeded cx=(Px(x)) cy=(Px(y)) r="5" data-kind=(fired) data-count="1" { (t) } }
        }
        Outcome::Failed => html! {
            path.mark.failed d=(format!("M{:.1} {:.1}l10 10m0 -10l-10 10", x - 5.0, y - 5.0)) data-kind=(fired) data-count="1" { (t) }
        },
        Outcome::Abandoned => html! {
            polygon.mark.abandoned points=(format!("{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}", x, y - 6.0, x + 6.0, y + 5.0, x - 6.0, y + 5.0))
                data-kind=(fired) data-count="1" { (t) }
        },
        Outcome::InProgress | Outcome::DryRun => html! {
            polygon.mark.in_progress points=(format!("{:.1},{:.1} {:.1},{:.1} {:.1},{:.1} {:.1},{:.1}", x, y - 6.0, x + 6.0, y, x, y + 6.0, x - 6.0, y))
                data-kind=(fired) data-count="1" { (t) }
        },
    }
}

/// The timeline: bands across every row, one row per Eru with its marks.
pub(super) fn timeline(audit: &Audit, erus: &[&EruAudit], reason: Option<Reason>, links: bool) -> Markup {
    let (since, until) = (audit.since.0, audit.until.0);
    let span = (until - since).num_milliseconds().max(1) as f64;
    let x =
        |t: DateTime<Utc>| LABEL + ((t - since).num_milliseconds() as f64 / span * WIDTH).clamp(0.0, WIDTH);
    let drawn = &erus[..erus.len().min(ROW_CAP)];
    let height = AXIS + ROW * drawn.len() as f64 + 6.0;
    // the records each row draws: of the reason asked for, at most MARK_CAP in all
    let mut budget = MARK_CAP;
    let rows: Vec<Vec<&SlotRecordRow>> = drawn
        .iter()
        .map(|eru| {
            let shown: Vec<&SlotRecordRow> = (eru.records.iter())
                .filter(|r| reason.is_none_or(|want| r.record.reason == Some(want)))
                .take(budget)
                .collect();
            budget -= shown.len();
            shown
        })
        .collect();
    let marks = MARK_CAP - budget;
    let op = &audit.operator;
    let band = |class: &str, kind: &str, start: DateTime<Utc>, end: DateTime<Utc>, what: String| {
        let (x0, x1) = (x(start), x(end));
        html! {
            rect class=(format!("band {class}")) x=(x0) y=(AXIS) width=((x1 - x0).max(2.0)) height=(height - AXIS) data-band=(kind) {
                title { (what) }
            }
        }
    };
    html! {
        svg.timeline width=(LABEL + WIDTH + 10.0) height=(height) role="img"
            aria-label=(format!("timeline of {} Erus", drawn.len())) {
            (defs())
            (axis(since, until, &x, height))
            @if let Some(w) = &op.no_journal {
                (band("nojournal", "no_journal", w.start.0, w.end.0, format!("no journal before {}: it holds nothing of this stretch (not downtime)", w.end)))
            }
            @for w in &op.journal_outages {
                (band("outage", "journal_outage", w.start.0, w.end.0, format!("the journal took no writes {} – {}", w.start, w.end)))
            }
            @for b in &op.cluster_blackouts {
                @for w in &b.windows {
                    (band(Reason::Blackout.as_str(), "cluster_blackout", w.start.0, w.end.0,
                        format!("cluster-wide blackout {} {} – {}", b.name.as_deref().unwrap_or(""), w.start, w.end)))
                }
            }
            @for (i, eru) in drawn.iter().enumerate() {
                (eru_row(Row { eru, i, records: &rows[i] }, audit, links, &x))
            }
        }
        @if erus.len() > drawn.len() || budget == 0 {
            p.note role="note" {
                "This window holds more than one page draws: " (drawn.len()) " of " (erus.len()) " Erus and the first "
                (marks) " marks are drawn; the table below has every number. Narrow the window or filter by namespace."
            }
        }
    }
}

/// One Eru's row of the timeline: which it is and the records it draws.
struct Row<'a> {
    eru: &'a EruAudit,
    i: usize,
    records: &'a [&'a SlotRecordRow],
}

/// An Eru's row: its label (a link to its page), its life line, the operator's downtime over it,
/// its blackouts, its records' marks, the slot held and the restart in flight.
fn eru_row(row: Row<'_>, audit: &Audit, links: bool, x: &dyn Fn(DateTime<Utc>) -> f64) -> Markup {
    let Row { eru, .. } = row;
    let (since, until) = (audit.since.0, audit.until.0);
    let op = &audit.operator;
    html! {
        @let y = AXIS + ROW * row.i as f64 + ROW / 2.0;
        g.row data-eru=(format!("{}/{}", eru.namespace, eru.name)) data-accounted=(eru.accounted) {
            @if row.i % 2 == 1 { rect.stripe x="0" y=(y - ROW / 2.0) width=(LABEL + WIDTH) height=(ROW) {} }
            @let label = format!("{}/{}", eru.namespace, eru.name);
            @if links {
                a href=(format!("/ui/eru/{}/{}?since={}&until={}", eru.namespace, eru.name, audit.since, audit.until)) {
                    text.label x="6" y=(y + 4.0) { (shorten(&label)) title { (label) } }
                }
            } @else {
                text.label x="6" y=(y + 4.0) { (shorten(&label)) }
            }
            @if !eru.accounted { text.flag x=(LABEL - 14.0) y=(y + 4.0) { "✘" title { "not every slot accounted once" } } }
            // the row is drawn over the Eru's life in the window only: operator downtime
            // before its creation or after its deletion is none of its business
            @let (born, gone) = life(eru, since, until);
            line.life x1=(x(born)) y1=(y) x2=(x(gone)) y2=(y) {}
            @for w in &op.downtime {
                @if w.start.0 < gone && born < w.end.0 {
                    @let (x0, x1) = (x(w.start.0.max(born)), x(w.end.0.min(gone)));
                    rect class="band down" x=(x0) y=(y - ROW / 2.0) width=((x1 - x0).max(2.0)) height=(ROW) data-band=(Reason::OperatorDown) {
                        title { "operator down " (w.start) " – " (w.end) }
                    }
                }
            }
            // the Eru's own blackout windows, shaded in its row
            @for (start, end, what) in blackouts_of(row.records) {
                rect class="band blackout" x=(x(start)) y=(y - ROW / 2.0) width=((x(end) - x(start)).max(2.0))
                    height=(ROW) data-band=(Reason::Blackout) { title { (what) } }
            }
            (record_marks(row.records, y, x))
            @if let Some(h) = &eru.held {
                rect.mark.held x=(Px(x(h.slot.0) - 5.0)) y=(Px(y - 5.0)) width="10" height="10" data-kind="held" data-reason=(h.reason) {
                    title { "slot " (h.slot) " held since " (h.since) " (" (h.reason) "): " (h.note) "; deadline " (h.deadline) }
                }
            }
            // manual runs are no slot's: a diamond at the instant each was asked
            @for r in &eru.manual_runs {
                @let (cx, cy) = (x(r.requested_at.0.clamp(since, until)), y);
                path class=(format!("mark manual {}", r.outcome)) d=(format!("M{cx:.1} {:.1}l6 6-6 6-6-6z", cy - 6.0))
                    data-kind="manual_run" data-outcome=(r.outcome) {
                    title {
                        "manual run " (format!("{:?}", r.token)) " asked " (r.requested_at)
                        @if let Some(by) = &r.requested_by { " by " (by) }
                        ": " (r.outcome)
                        @if let Some(why) = &r.reason { " (" (why) ")" }
                    }
                }
            }
            @if let Some(slot) = eru.in_flight {
                circle.mark.pending cx=(x(slot.0)) cy=(y) r="5" data-kind="in_flight" {
                    title { "restart of " (slot) " in flight" }
                }
            }
        }
    }
}

/// The stretch of `[since, until)` an Eru lived in, as its journal knows it: from its first spec
/// epoch (its creation, or when this journal first saw it) to its deletion.
fn life(eru: &EruAudit, since: DateTime<Utc>, until: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    let born = eru
        .epochs
        .first()
        .map_or(since, |e| e.effective_from.0.max(since));
    let gone = eru.deleted_at.map_or(until, |d| d.0.min(until));
    (born.min(gone), gone)
}

/// The distinct blackout windows of an Eru's `blackout` records, with their hover text.
fn blackouts_of(records: &[&SlotRecordRow]) -> Vec<(DateTime<Utc>, DateTime<Utc>, String)> {
    let mut windows: Vec<(DateTime<Utc>, DateTime<Utc>, String)> = Vec::new();
    for r in records
        .iter()
        .map(|r| &r.record)
        .filter(|s| s.reason == Some(Reason::Blackout))
    {
        if let (Some(start), Some(end)) = (r.window_start, r.window_end)
            && !windows.iter().any(|w| w.0 == start.0 && w.1 == end.0)
        {
            let name = r.note.as_deref().unwrap_or(Reason::Blackout.as_str());
            windows.push((start.0, end.0, format!("{name}: {start} – {end}")));
        }
    }
    windows
}

/// A row's records as marks, oldest first: a run of restarts that all succeeded, one after the
/// other with no other record between them, is one mark of a circle per slot with one hover
/// text (a day of 1,000 hourly Erus: a few thousand marks instead of 24,000, a page a third as
/// large); every other record is a mark of its own.
fn record_marks(records: &[&SlotRecordRow], y: f64, x: &dyn Fn(DateTime<Utc>) -> f64) -> Markup {
    let succeeded = |r: &&SlotRecordRow| {
        r.record.result == SlotResult::Fired
            && r.restart_outcome == Some(Outcome::Succeeded)
            && r.restart_reverted_at.is_none()
    };
    let mut marks = Vec::new();
    let mut rest = records;
    while let Some(first) = rest.first() {
        let run = if succeeded(first) {
            rest.iter().take_while(|r| succeeded(r)).count()
        } else {
            1
        };
        let (these, after) = rest.split_at(run);
        marks.push(if run > 1 {
            success_run(these, y, x)
        } else {
            record_mark(first, y, x)
        });
        rest = after;
    }
    html! { @for m in marks { (m) } }
}

/// A run of succeeded restarts: a circle per slot in one path (each a line of no length with
/// round caps as wide as the circle), the run's slots and the range of its patch and finish
/// times after their slots in the hover text.
fn success_run(run: &[&SlotRecordRow], y: f64, x: &dyn Fn(DateTime<Utc>) -> f64) -> Markup {
    use maud::Render;
    let mut d = String::with_capacity(run.len() * 12);
    for r in run {
        d.push('M');
        Px(x(r.record.slot.0)).render_to(&mut d);
        d.push(' ');
        Px(y).render_to(&mut d);
        d.push_str("h0");
    }
    // the fastest and the slowest of the run, after their slots
    let range = |at: &dyn Fn(&SlotRecordRow) -> Option<Duration>| {
        let seconds: Vec<i64> = run
            .iter()
            .filter_map(|r| at(r))
            .map(|d| d.num_seconds())
            .collect();
        let (lo, hi) = (*seconds.iter().min()?, *seconds.iter().max()?);
        Some(if lo == hi {
            offset(lo)
        } else {
            format!("{} to {}", offset(lo), offset(hi))
        })
    };
    let (first, last) = (run[0].record.slot, run[run.len() - 1].record.slot);
    let mut title = format!("slots {first} – {last}: {} restarts, each succeeded", run.len());
    if let Some(p) = range(&|r| r.restart_patched_at.map(|t| t.0 - r.record.slot.0)) {
        title.push_str(&format!("; patched {p}"));
    }
    if let Some(f) = range(&|r| r.restart_finished_at.map(|t| t.0 - r.record.slot.0)) {
        title.push_str(&format!("; finished {f}"));
    }
    html! {
        path.mark.succeeded.run d=(d) data-kind=(SlotResult::Fired) data-count=(run.len()) { title { (title) } }
    }
}

/// One record's mark: a restart's outcome shape, or the span of slots not restarted.
fn record_mark(r: &SlotRecordRow, y: f64, x: &dyn Fn(DateTime<Utc>) -> f64) -> Markup {
    let s = &r.record;
    if s.result == SlotResult::Fired {
        let outcome = r.restart_outcome.unwrap_or(Outcome::InProgress);
        // the times after the slot as offsets: shorter to read, and a page draws thousands
        let mut title = format!("slot {}: restarted, {outcome}", s.slot);
        if let Some(at) = r.restart_patched_at {
            title.push_str(&format!("; patched {}", after(s.slot.0, at.0)));
        }
        if let Some(at) = r.restart_finished_at {
            title.push_str(&format!("; finished {}", after(s.slot.0, at.0)));
        }
        let Some(at) = r.restart_reverted_at else {
            return outcome_mark(outcome, x(s.slot.0), y, Some(&title));
        };
        // undone by another field manager (/history names it): the outcome, ringed
        title.push_str(&format!("; reverted, seen {}", after(s.slot.0, at.0)));
        return html! {
            (outcome_mark(outcome, x(s.slot.0), y, Some(&title)))
            circle.mark.reverted cx=(Px(x(s.slot.0))) cy=(Px(y)) r="8" data-kind="reverted" { title { (title) } }
        };
    }
    let reason = s.reason.map_or("", Reason::as_str);
    let mut title = format!("slot {}", s.slot);
    if s.slot_count > 1 {
        title.push_str(&format!(" – {} ({} slots)", s.last_slot, s.slot_count));
    }
    title.push_str(&format!(": {} ({reason})", s.result));
    if let (Some(a), Some(b)) = (s.window_start, s.window_end) {
        title.push_str(&format!("; window {a} – {b}"));
    }
    if let Some(note) = &s.note {
        title.push_str(&format!("; {note}"));
    }
    let (x0, x1) = (x(s.slot.0) - 3.0, x(s.last_slot.0) + 3.0);
    html! {
        rect class=(format!("mark {}", s.result)) x=(Px(x0)) y=(Px(y - 5.0)) width=(Px(x1 - x0)) height="10"
            data-kind=(s.result) data-reason=(reason) data-slot=(s.slot) data-count=(s.slot_count) {
            title { (title) }
        }
    }
}

fn axis(since: DateTime<Utc>, until: DateTime<Utc>, x: &dyn Fn(DateTime<Utc>) -> f64, height: f64) -> Markup {
    let span = until - since;
    let step = [
        Duration::seconds(5),
        Duration::seconds(15),
        Duration::seconds(30),
        Duration::minutes(1),
        Duration::minutes(5),
        Duration::minutes(15),
        Duration::hours(1),
        Duration::hours(3),
        Duration::hours(6),
        Duration::days(1),
        Duration::days(7),
    ]
    .into_iter()
    .find(|s| span.num_seconds() / s.num_seconds().max(1) <= 12)
    .unwrap_or(Duration::days(7));
    let first = since.timestamp() - since.timestamp().rem_euclid(step.num_seconds()) + step.num_seconds();
    let ticks: Vec<DateTime<Utc>> = (0..)
        .map(|i| first + i * step.num_seconds())
        .map_while(|s| DateTime::from_timestamp(s, 0).filter(|t| *t < until))
        .take(16)
        .collect();
    let format = if step >= Duration::days(1) {
        "%m-%d"
    } else if step < Duration::minutes(1) {
        "%H:%M:%S"
    } else {
        "%m-%d %H:%M"
    };
    html! {
        g.axis {
            line x1=(LABEL) y1=(AXIS - 2.0) x2=(LABEL + WIDTH) y2=(AXIS - 2.0) {}
            @for t in ticks {
                line.tick x1=(x(t)) y1=(AXIS - 6.0) x2=(x(t)) y2=(height) {}
                // a label that would run past the right edge is left out
                @if x(t) < LABEL + WIDTH - 70.0 {
                    text x=(x(t) + 2.0) y=(AXIS - 10.0) { (t.format(format).to_string()) }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use maud::Render;

    use super::*;
    use crate::journal::{SlotRow, Ts};

    fn record(hour: u32, result: SlotResult, outcome: Option<Outcome>) -> SlotRecordRow {
        let slot = Utc.with_ymd_and_hms(2026, 11, 24, hour, 0, 0).unwrap();
        SlotRecordRow {
            record: SlotRow {
                id: hour.into(),
                uid: "u".into(),
                namespace: "ns".into(),
                name: "web".into(),
                target: "web".into(),
                slot: Ts(slot),
                last_slot: Ts(slot),
                slot_count: 1,
                result,
                reason: (result != SlotResult::Fired).then_some(Reason::TargetPaused),
                window_start: None,
                window_end: None,
                evaluated_at: Ts(slot),
                note: None,
            },
            restart_decided_at: outcome.map(|_| Ts(slot)),
            restart_patched_at: outcome.map(|_| Ts(slot + Duration::seconds(1))),
            restart_finished_at: outcome.map(|_| Ts(slot + Duration::seconds(if hour == 2 { 9 } else { 4 }))),
            restart_outcome: outcome,
            restart_reason: None,
            restart_attempts: outcome.map(|_| 1),
            restart_reverted_at: None,
        }
    }

    #[test]
    fn a_run_of_successes_is_one_mark_counting_its_slots_and_every_other_record_its_own() {
        let (fired, ok) = (SlotResult::Fired, Some(Outcome::Succeeded));
        let records = [
            record(1, fired, ok),
            record(2, fired, ok),
            record(3, fired, ok),
            record(4, SlotResult::Skipped, None),
            record(5, fired, ok),
            record(6, fired, Some(Outcome::Failed)),
            record(7, fired, ok),
            record(8, fired, ok),
        ];
        let rows: Vec<&SlotRecordRow> = records.iter().collect();
        let since = Utc.with_ymd_and_hms(2026, 11, 24, 0, 0, 0).unwrap();
        let x = |t: DateTime<Utc>| (t - since).num_minutes() as f64;
        let html = record_marks(&rows, 10.0, &x).into_string();
        let counts: Vec<&str> = html
            .split(r#"data-kind="fired" data-count=""#)
            .skip(1)
            .map(|rest| &rest[..rest.find('"').unwrap()])
            .collect();
        // 1–3 one run, 5 alone (a failure follows), 6 failed, 7–8 one run
        assert_eq!(counts, ["3", "1", "1", "2"]);
        assert_eq!(html.matches(r#"data-kind="skipped""#).count(), 1);
        // one circle per slot of a run, and the run's hover text with its range of times
        assert_eq!(html.matches("h0").count(), 5);
        assert!(
            html.contains(r#"d="M60.0 10.0h0M120.0 10.0h0M180.0 10.0h0""#),
            "{html}"
        );
        assert!(
            html.contains(
                "slots 2026-11-24T01:00:00.000Z – 2026-11-24T03:00:00.000Z: 3 restarts, each succeeded; \
                 patched +1 s; finished +4 s to +9 s"
            ),
            "{html}"
        );
    }

    #[test]
    fn coordinates_are_written_to_a_tenth() {
        let px = |v: f64| Px(v).render().into_string();
        assert_eq!(px(1041.6666666666667), "1041.7");
        assert_eq!(px(0.04), "0.0");
        assert_eq!(px(-3.25), "-3.3");
        assert_eq!(px(-0.04), "0.0");
        assert_eq!(px(12.0), "12.0");
    }
}
