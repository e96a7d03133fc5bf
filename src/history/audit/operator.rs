//! The operator's own facts of an audited window: its runs, when none ran, leader handovers,
//! journal outages and the cluster-wide blackouts.

use chrono::{DateTime, Duration, Utc};

use super::{BlackoutItem, Handover, OperatorFacts, RunItem};
use crate::{
    eru::core::{blackout::Blackout, ledger, schedule::Schedule},
    history::Window,
    journal::{OperatorRun, OutageRow, Ts},
};

/// What the operator did in `[since, until)`. `runs` are those alive in it and the last one
/// before it, as the journal holds them: a first run that started after `since` is the
/// journal's first (else the one before it would be there), and the stretch before it is what
/// the journal does not know, not downtime.
pub(super) fn operator_facts(
    runs: &[OperatorRun],
    outages: &[OutageRow],
    (since, until): (DateTime<Utc>, DateTime<Utc>),
    now: DateTime<Utc>,
    blackouts: &[Blackout],
) -> OperatorFacts {
    let clip = |(start, end): (DateTime<Utc>, DateTime<Utc>)| {
        let (start, end) = (start.max(since), end.min(until));
        (start < end).then_some(Window {
            start: Ts(start),
            end: Ts(end),
        })
    };
    let spans: Vec<(DateTime<Utc>, DateTime<Utc>)> =
        runs.iter().map(|r| (r.started_at.0, r.heartbeat_at.0)).collect();
    // before the journal's first run there is no operator to speak of: not downtime, "no journal"
    let (gaps, before_first) = ledger::downtime(&spans, since);
    let mut downtime: Vec<Window> = gaps.into_iter().filter_map(clip).collect();
    let no_journal = if runs.is_empty() {
        clip((since, until.min(now)))
    } else {
        before_first.and_then(clip)
    };
    if let Some(last) = runs.iter().max_by_key(|r| r.heartbeat_at)
        && let Some(stopped) = last.stopped_at
    {
        // stopped and not started again: down since
        downtime.extend(clip((stopped.0, until.min(now))));
    }
    let handovers = runs
        .windows(2)
        .filter(|w| w[0].instance != w[1].instance)
        .filter(|w| w[1].started_at.0 >= since && w[1].started_at.0 < until)
        .map(|w| Handover {
            at: w[1].started_at,
            from: w[0].instance.clone(),
            to: w[1].instance.clone(),
        })
        .collect();
    OperatorFacts {
        runs: runs
            .iter()
            .map(|r| RunItem {
                instance: r.instance.clone(),
                version: r.version.clone(),
                started_at: r.started_at,
                last_heartbeat: r.heartbeat_at,
                stopped_at: r.stopped_at,
            })
            .collect(),
        downtime,
        no_journal,
        handovers,
        journal_outages: outages
            .iter()
            .filter_map(|o| clip((o.started_at.0, o.ended_at.0)))
            .collect(),
        cluster_blackouts: blackouts.iter().map(|b| blackout_item(b, since, until)).collect(),
        notifications: Default::default(),
    }
}

/// A cluster-wide blackout's windows in `[since, until)` (at most 500).
fn blackout_item(b: &Blackout, since: DateTime<Utc>, until: DateTime<Utc>) -> BlackoutItem {
    let mut windows = Vec::new();
    let spec = match (&b.schedule, b.duration_seconds, b.start, b.end) {
        (Some(schedule), Some(seconds), _, _) => {
            let length = Duration::seconds(seconds);
            // `H` differs per Eru: those windows are in each Eru's blackout records
            if !schedule.contains('H')
                && let Ok(parsed) = Schedule::parse(schedule, None)
            {
                for open in parsed.slots_between(since - length, until).take(500) {
                    windows.push(Window {
                        start: Ts(open.max(since)),
                        end: Ts((open + length).min(until)),
                    });
                }
            }
            format!("{schedule} for {seconds} s")
        }
        (_, _, Some(start), Some(end)) => {
            if start < until && end > since {
                windows.push(Window {
                    start: Ts(start.max(since)),
                    end: Ts(end.min(until)),
                });
            }
            format!("{} to {}", Ts(start), Ts(end))
        }
        _ => "(incomplete)".into(),
    };
    BlackoutItem {
        name: b.name.clone(),
        spec,
        windows,
    }
}
