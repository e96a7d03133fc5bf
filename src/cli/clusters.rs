//! One audit across clusters: `audit --server A --server B …` asks each cluster's operator for
//! the same window and prints a verdict per cluster, then the union. A cluster whose operator
//! cannot be read is a finding of its own, named, never left out. The exit status is the worst
//! of the clusters: 1 when one could not be read (the audit cannot speak for it), else 3 when one
//! does not account every slot exactly once, else 0.

use std::fmt::Write;

use serde::Serialize;

use crate::history::audit::Audit;

/// One cluster's audit, or why it could not be read.
#[derive(Debug, Serialize)]
pub struct ClusterAudit {
    /// The cluster's name: its kubeconfig context when one was given for it, else its server.
    pub cluster: String,
    pub server: String,
    /// Whether its every slot is accounted exactly once (none when it could not be read).
    pub accounted: Option<bool>,
    /// Why it could not be read.
    pub error: Option<String>,
    pub audit: Option<Audit>,
}

impl ClusterAudit {
    pub fn new(cluster: String, server: String, audit: Result<Audit, String>) -> Self {
        let (accounted, error, audit) = match audit {
            Ok(a) => (Some(a.verdict.accounted), None, Some(a)),
            Err(e) => (None, Some(e), None),
        };
        Self {
            cluster,
            server,
            accounted,
            error,
            audit,
        }
    }
}

/// The audits of several clusters, and their union.
#[derive(Debug, Serialize)]
pub struct Clusters {
    /// Every cluster read accounts every slot exactly once, and every cluster was read.
    pub accounted: bool,
    /// The union in a sentence: the slots of all clusters, and which cluster fails and why.
    pub summary: String,
    pub clusters: Vec<ClusterAudit>,
    /// Kubeconfig contexts `--all-contexts` did not audit: they name no operator (no
    /// `eru.mtsre.meitu.com` extension). Not a failure: a context of another kind of cluster.
    pub not_audited: Vec<String>,
}

impl Clusters {
    pub fn new(clusters: Vec<ClusterAudit>, not_audited: Vec<String>) -> Self {
        let unread: Vec<&str> = (clusters.iter())
            .filter(|c| c.error.is_some())
            .map(|c| c.cluster.as_str())
            .collect();
        let failing: Vec<&str> = (clusters.iter())
            .filter(|c| c.accounted == Some(false))
            .map(|c| c.cluster.as_str())
            .collect();
        let read = clusters.iter().filter_map(|c| c.audit.as_ref());
        let (slots, fired, not_restarted, unaccounted, duplicated) =
            read.fold((0, 0, 0, 0, 0), |(s, f, n, u, d), a| {
                let v = &a.verdict;
                (
                    s + v.slots,
                    f + v.fired,
                    n + v.not_restarted,
                    u + v.unaccounted,
                    d + v.duplicated,
                )
            });
        let n = clusters.len();
        let mut summary = format!(
            "{n} cluster{}: {slots} slots, {fired} restarted, {not_restarted} missed or skipped with a reason",
            if n == 1 { "" } else { "s" }
        );
        if unaccounted + duplicated > 0 {
            let _ = write!(summary, ", {unaccounted} without a record, {duplicated} with two");
        }
        if !failing.is_empty() {
            let _ = write!(summary, "; not accounted exactly once in {}", failing.join(", "));
        }
        if !unread.is_empty() {
            let _ = write!(summary, "; could not be read: {}", unread.join(", "));
        }
        if failing.is_empty() && unread.is_empty() {
            summary.push_str("; every slot of every cluster accounted exactly once");
        }
        if !not_audited.is_empty() {
            let _ = write!(
                summary,
                "; not audited (their contexts name no operator): {}",
                not_audited.join(", ")
            );
        }
        Self {
            accounted: failing.is_empty() && unread.is_empty(),
            summary,
            clusters,
            not_audited,
        }
    }

    /// The exit status: the worst of the clusters (1 unread, 3 not accounted, 0).
    pub fn exit(&self) -> u8 {
        if self.clusters.iter().any(|c| c.error.is_some()) {
            1
        } else if self.clusters.iter().any(|c| c.accounted == Some(false)) {
            3
        } else {
            0
        }
    }

    /// Each cluster's table under its name, then the union.
    pub fn table(&self) -> String {
        self.text(
            |c| format!("== cluster {} ({})\n", c.cluster, c.server),
            Audit::table,
            "== all",
        )
    }

    /// Each cluster's Markdown under its heading, then the union.
    pub fn markdown(&self) -> String {
        self.text(
            |c| format!("## Cluster {} ({})\n\n", c.cluster, c.server),
            Audit::markdown,
            "## All",
        )
    }

    fn text(
        &self,
        heading: impl Fn(&ClusterAudit) -> String,
        body: fn(&Audit) -> String,
        all: &str,
    ) -> String {
        let mut out = String::new();
        for c in &self.clusters {
            out.push_str(&heading(c));
            match (&c.audit, &c.error) {
                (Some(audit), _) => out.push_str(&body(audit)),
                (None, error) => {
                    let _ = writeln!(out, "could not be read: {}", error.as_deref().unwrap_or_default());
                }
            }
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "{all} {} cluster{}\nverdict: {}",
            self.clusters.len(),
            if self.clusters.len() == 1 { "" } else { "s" },
            self.summary
        );
        out
    }
}

#[cfg(test)]
mod tests;
