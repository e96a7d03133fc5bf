//! An audit as a person reads it outside a browser: a text table (the terminal), CSV (a
//! spreadsheet) or Markdown (an incident review).

use std::fmt::Write;

use super::{Audit, EruAudit};
use crate::{
    history::table,
    vocab::{Outcome, Reason},
};

impl Audit {
    /// One row per Eru, then the operator's facts and the verdict.
    pub fn table(&self) -> String {
        let rows: Vec<Vec<String>> = self.erus.iter().map(row).collect();
        let mut out = format!("audit of {} .. {}\n\n", self.since, self.until);
        out.push_str(&table(&HEADERS, &rows));
        out.push('\n');
        let findings = self.findings("  ");
        if !findings.is_empty() {
            out.push_str("not accounted exactly once:\n");
            out.push_str(&findings);
            out.push('\n');
        }
        let runs = self.manual_runs("  ", &|text: &str| text.to_string());
        if !runs.is_empty() {
            out.push_str("manual runs (mtsre.meitu.com/run-now; no slot's):\n");
            out.push_str(&runs);
            out.push('\n');
        }
        out.push_str(&self.facts("", "", &|text: &str| text.to_string()));
        let _ = writeln!(out, "\nverdict: {}", self.verdict.summary);
        out
    }

    /// One line per Eru, with a header (the verdict is the exit status). Every cell is a safe
    /// spreadsheet cell ([`csv_cell`]).
    pub fn csv(&self) -> String {
        let mut out = HEADERS.join(",");
        out.push('\n');
        for eru in &self.erus {
            let cells: Vec<String> = row(eru).iter().map(|c| csv_cell(c)).collect();
            out.push_str(&cells.join(","));
            out.push('\n');
        }
        out
    }

    /// A section to paste into an incident review. Text from the journal and the blackouts file
    /// (names, instances, notes) is escaped ([`md_text`]): it cannot end a table row, a line or
    /// a cell, nor become markup.
    pub fn markdown(&self) -> String {
        let mut out = format!("### Restart audit, {} to {}\n\n", self.since, self.until);
        let mark = if self.verdict.accounted { "✅" } else { "❌" };
        let _ = writeln!(out, "{mark} **{}**\n", md_text(&self.verdict.summary));
        out.push_str(&format!("| {} |\n", HEADERS.join(" | ")));
        out.push_str(&format!("|{}\n", "---|".repeat(HEADERS.len())));
        for eru in &self.erus {
            let cells: Vec<String> = row(eru).iter().map(|c| md_text(c)).collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        out.push('\n');
        let findings = self.findings("- ");
        if !findings.is_empty() {
            out.push_str("Not accounted exactly once:\n\n");
            for line in findings.lines() {
                let _ = writeln!(out, "- {}", md_text(line.trim_start_matches("- ")));
            }
            out.push('\n');
        }
        let runs = self.manual_runs("- ", &md_text);
        if !runs.is_empty() {
            out.push_str("Manual runs (`mtsre.meitu.com/run-now`; no slot's):\n\n");
            out.push_str(&runs);
            out.push('\n');
        }
        out.push_str(&self.facts("- ", "**", &md_text));
        out
    }

    /// The manual runs of the window, a line each, oldest first: which Eru, when, the token, who
    /// asked, and how it went (`text` shows what the journal holds: tokens, managers, reasons).
    fn manual_runs(&self, bullet: &str, text: &dyn Fn(&str) -> String) -> String {
        let mut out = String::new();
        for e in &self.erus {
            for r in e.manual_runs.iter().rev() {
                let by = r
                    .requested_by
                    .as_deref()
                    .map_or(String::new(), |by| format!(" by {}", text(by)));
                let why = r
                    .reason
                    .as_deref()
                    .map_or(String::new(), |why| format!(": {}", text(why)));
                let _ = writeln!(
                    out,
                    "{bullet}{}/{} {} {}{by}: {}{why}",
                    text(&e.namespace),
                    text(&e.name),
                    r.requested_at,
                    text(&format!("{:?}", r.token)),
                    r.outcome
                );
            }
        }
        out
    }

    /// What each failing Eru's verdict refers to, a line per kind of finding: the slots without
    /// a record, recorded twice or outside the schedule (the first of each, as the JSON lists
    /// them), and running counters that disagree with the rows. Empty when every Eru is
    /// accounted.
    fn findings(&self, bullet: &str) -> String {
        let mut out = String::new();
        for e in self.erus.iter().filter(|e| !e.accounted) {
            let eru = format!("{}/{}", e.namespace, e.name);
            for (what, finding) in [
                ("without a record", &e.unaccounted),
                ("recorded twice", &e.duplicated),
                ("records outside the schedule", &e.outside_schedule),
                ("records breaking the journal's invariant", &e.invalid),
            ] {
                if finding.count == 0 {
                    continue;
                }
                let slots: Vec<String> = finding.slots.iter().map(ToString::to_string).collect();
                let more = finding.count - finding.slots.len() as i64;
                let more = if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                };
                let _ = writeln!(
                    out,
                    "{bullet}{eru}: {} {what}: {}{more}",
                    finding.count,
                    slots.join(", ")
                );
            }
            if let Some(c) = e.counters.as_ref().filter(|c| !c.agree) {
                let _ = writeln!(
                    out,
                    "{bullet}{eru}: running counters {} fired / {} missed, rows {} / {}: {}",
                    c.fired_slots,
                    c.missed_slots,
                    c.rows_fired,
                    c.rows_not_fired,
                    c.note.as_deref().unwrap_or("")
                );
            }
        }
        out
    }

    /// The operator's facts, a line each; `text` shows what the journal or the blackouts file
    /// wrote (instances, names, specs).
    fn facts(&self, bullet: &str, strong: &str, text: &dyn Fn(&str) -> String) -> String {
        let op = &self.operator;
        let windows = |ws: &[crate::history::Window]| {
            if ws.is_empty() {
                "none".to_string()
            } else {
                ws.iter()
                    .map(|w| format!("{} .. {}", w.start, w.end))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        let mut out = String::new();
        let runs: Vec<String> = op
            .runs
            .iter()
            .map(|r| format!("{} ({} .. {})", text(&r.instance), r.started_at, r.last_heartbeat))
            .collect();
        let _ = writeln!(out, "{bullet}{strong}operator runs{strong}: {}", listed(&runs));
        if let Some(w) = &op.no_journal {
            let _ = writeln!(
                out,
                "{bullet}{strong}no journal{strong}: before {} (this journal holds nothing of {} .. {}; not downtime)",
                w.end, w.start, w.end
            );
        }
        let _ = writeln!(
            out,
            "{bullet}{strong}operator down{strong}: {}",
            windows(&op.downtime)
        );
        let handovers: Vec<String> = op
            .handovers
            .iter()
            .map(|h| format!("{} {} → {}", h.at, text(&h.from), text(&h.to)))
            .collect();
        let _ = writeln!(
            out,
            "{bullet}{strong}leader handovers{strong}: {}",
            listed(&handovers)
        );
        let _ = writeln!(
            out,
            "{bullet}{strong}journal outages{strong}: {}",
            windows(&op.journal_outages)
        );
        let blackouts: Vec<String> = op
            .cluster_blackouts
            .iter()
            .map(|b| {
                format!(
                    "{} ({})",
                    text(b.name.as_deref().unwrap_or("unnamed")),
                    text(&b.spec)
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "{bullet}{strong}cluster-wide blackouts{strong}: {}",
            listed(&blackouts)
        );
        let _ = writeln!(
            out,
            "{bullet}{strong}notifications now{strong}: {}",
            op.notifications.summary()
        );
        out
    }
}

/// `items` joined by commas, or "none".
fn listed(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

const HEADERS: [&str; 9] = [
    "ERU",
    "SLOTS",
    "RESTARTED",
    "MISSED/SKIPPED",
    "PENDING",
    "UNACCOUNTED",
    "TWICE",
    "OUTSIDE",
    "ACCOUNTED",
];

fn row(e: &EruAudit) -> Vec<String> {
    let fired = &e.fired;
    let mut restarted = fired.total.to_string();
    let outcomes: Vec<String> = [
        (Outcome::Succeeded.as_str(), fired.succeeded),
        (Outcome::Failed.as_str(), fired.failed),
        (Outcome::Abandoned.as_str(), fired.abandoned),
        ("in progress", fired.in_progress),
        ("reverted", fired.reverted),
    ]
    .iter()
    .filter(|(_, n)| *n > 0)
    .map(|(what, n)| format!("{n} {what}"))
    .collect();
    if !outcomes.is_empty() {
        restarted.push_str(&format!(" ({})", outcomes.join(", ")));
    }
    let not: Vec<String> = e
        .not_restarted
        .iter()
        .map(|n| format!("{} {}", n.slots, n.reason.map_or("(no reason)", Reason::as_str)))
        .collect();
    vec![
        format!("{}/{}", e.namespace, e.name),
        e.slots.to_string(),
        restarted,
        if not.is_empty() {
            "0".into()
        } else {
            not.join(", ")
        },
        e.pending.to_string(),
        e.unaccounted.count.to_string(),
        e.duplicated.count.to_string(),
        e.outside_schedule.count.to_string(),
        if e.accounted { "yes".into() } else { "NO".into() },
    ]
}

/// A CSV cell (RFC 4180) that a spreadsheet shows as text: a cell starting with `=`, `+`, `-`,
/// `@`, a tab or a carriage return would be read as a formula (CSV injection: `=HYPERLINK(…)`,
/// `=cmd|…`), so it gets a leading `'` (OWASP's advice); a cell with a comma, a quote or a line
/// break is quoted, its quotes doubled.
fn csv_cell(cell: &str) -> String {
    let cell = if cell.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{cell}")
    } else {
        cell.to_string()
    };
    if cell.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", cell.replace('"', "\"\""))
    } else {
        cell
    }
}

/// Text inside a Markdown table cell or list item: line breaks become spaces (a break would end
/// the row or the item), `|` and Markdown's markup characters are backslash-escaped, `<` and
/// `>` become entities (no raw HTML), so a name or note shows as written and nothing else.
fn md_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\r' | '\n' | '\u{2028}' | '\u{2029}' => out.push(' '),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '|' | '\\' | '`' | '*' | '_' | '[' | ']' | '#' | '!' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_cells_cannot_be_formulas_and_stay_one_cell() {
        for (cell, shown) in [
            ("shop/web", "shop/web"),
            ("=HYPERLINK(\"http://x\")", "\"'=HYPERLINK(\"\"http://x\"\")\""),
            ("+1", "'+1"),
            ("-2+3", "'-2+3"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("\tcmd", "'\tcmd"),
            ("a,b", "\"a,b\""),
            ("two\nlines", "\"two\nlines\""),
            ("\r=1", "\"'\r=1\""),
            ("12", "12"),
        ] {
            assert_eq!(csv_cell(cell), shown, "{cell:?}");
        }
    }

    #[test]
    fn markdown_text_cannot_end_a_row_or_become_markup() {
        assert_eq!(md_text("a|b"), "a\\|b");
        assert_eq!(md_text("line\nbreak\r\nhere"), "line break  here");
        assert_eq!(
            md_text("[x](http://evil) <img src=x> *bold* `code`"),
            "\\[x\\](http://evil) &lt;img src=x&gt; \\*bold\\* \\`code\\`"
        );
        assert_eq!(md_text("operator_down"), "operator\\_down");
        assert!(!md_text("| x |\n| --- |").contains('\n'));
    }
}
