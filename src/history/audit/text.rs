//! An audit as a person reads it outside a browser: a text table (the terminal), CSV (a
//! spreadsheet) or Markdown (an incident review).

use std::fmt::Write;

use super::{Audit, EruAudit};
use crate::history::table;

impl Audit {
    /// One row per Eru, then the operator's facts and the verdict.
    pub fn table(&self) -> String {
        let rows: Vec<Vec<String>> = self.erus.iter().map(row).collect();
        let mut out = format!("audit of {} .. {}\n\n", self.since, self.until);
        out.push_str(&table(&HEADERS, &rows));
        out.push('\n');
        out.push_str(&self.facts("", ""));
        let _ = writeln!(out, "\nverdict: {}", self.verdict.summary);
        out
    }

    /// One line per Eru, with a header (the verdict is the exit status).
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

    /// A section to paste into an incident review.
    pub fn markdown(&self) -> String {
        let mut out = format!("### Restart audit, {} to {}\n\n", self.since, self.until);
        let mark = if self.verdict.accounted { "✅" } else { "❌" };
        let _ = writeln!(out, "{mark} **{}**\n", self.verdict.summary);
        out.push_str(&format!("| {} |\n", HEADERS.join(" | ")));
        out.push_str(&format!("|{}\n", "---|".repeat(HEADERS.len())));
        for eru in &self.erus {
            let cells: Vec<String> = row(eru).iter().map(|c| c.replace('|', "\\|")).collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        out.push('\n');
        out.push_str(&self.facts("- ", "**"));
        out
    }

    /// The operator's facts, a line each.
    fn facts(&self, bullet: &str, strong: &str) -> String {
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
            .map(|r| format!("{} ({} .. {})", r.instance, r.started_at, r.last_heartbeat))
            .collect();
        let _ = writeln!(
            out,
            "{bullet}{strong}operator runs{strong}: {}",
            if runs.is_empty() {
                "none".into()
            } else {
                runs.join(", ")
            }
        );
        let _ = writeln!(
            out,
            "{bullet}{strong}operator down{strong}: {}",
            windows(&op.downtime)
        );
        let handovers: Vec<String> = op
            .handovers
            .iter()
            .map(|h| format!("{} {} → {}", h.at, h.from, h.to))
            .collect();
        let _ = writeln!(
            out,
            "{bullet}{strong}leader handovers{strong}: {}",
            if handovers.is_empty() {
                "none".into()
            } else {
                handovers.join(", ")
            }
        );
        let _ = writeln!(
            out,
            "{bullet}{strong}journal outages{strong}: {}",
            windows(&op.journal_outages)
        );
        let blackouts: Vec<String> = op
            .cluster_blackouts
            .iter()
            .map(|b| format!("{} ({})", b.name.as_deref().unwrap_or("unnamed"), b.spec))
            .collect();
        let _ = writeln!(
            out,
            "{bullet}{strong}cluster-wide blackouts{strong}: {}",
            if blackouts.is_empty() {
                "none".into()
            } else {
                blackouts.join(", ")
            }
        );
        out
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
        ("succeeded", fired.succeeded),
        ("failed", fired.failed),
        ("abandoned", fired.abandoned),
        ("in progress", fired.in_progress),
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
        .map(|n| format!("{} {}", n.slots, n.reason))
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

fn csv_cell(cell: &str) -> String {
    if cell.contains([',', '"', '\n']) {
        format!("\"{}\"", cell.replace('"', "\"\""))
    } else {
        cell.to_string()
    }
}
