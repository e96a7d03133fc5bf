#!/usr/bin/env python3
"""Writes dashboards/eru-operator.json (Grafana, datasource as a variable).

The panels' PromQL is a contract with src/metrics.rs; tests/observability.rs evaluates every
expression against a real Prometheus scraping the operator and requires data for each panel.
Run: python3 hack/dashboard.py
"""
import json
import pathlib

DS = {"type": "prometheus", "uid": "${datasource}"}


def panel(pid, title, kind, x, y, w, h, targets, unit=None, description=""):
    p = {
        "id": pid,
        "title": title,
        "description": description,
        "type": kind,
        "datasource": DS,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "targets": [
            {"refId": chr(65 + i), "datasource": DS, "expr": expr, "legendFormat": legend,
             **({"instant": True, "format": "table"} if kind == "table" else {})}
            for i, (expr, legend) in enumerate(targets)
        ],
        "fieldConfig": {"defaults": {"unit": unit} if unit else {}, "overrides": []},
        "options": {},
    }
    return p


panels = [
    panel(1, "Restarts by Eru and outcome", "timeseries", 0, 0, 12, 8,
          [('sum by (namespace, name, outcome) (increase(eru_restarts_total[$__rate_interval]))',
            "{{namespace}}/{{name}} {{outcome}}")],
          description="Rolling restarts finished per interval."),
    panel(2, "Restart duration", "timeseries", 12, 0, 12, 8,
          [('histogram_quantile(0.5, sum by (le) (rate(eru_restart_duration_seconds_bucket[$__rate_interval])))', "p50"),
           ('histogram_quantile(0.95, sum by (le) (rate(eru_restart_duration_seconds_bucket[$__rate_interval])))', "p95")],
          unit="s", description="From the restart patch to the end of the rollout."),
    panel(3, "Failed restarts (range)", "stat", 0, 8, 6, 6,
          [('sum(increase(eru_restarts_total{outcome="failed"}[$__range]))', "failed")]),
    panel(4, "Missed and skipped slots by reason", "timeseries", 6, 8, 18, 6,
          [('sum by (result, reason) (increase(eru_slots_total{result=~"missed|skipped"}[$__rate_interval]))',
            "{{result}} {{reason}}")],
          description="Slots that were not restarted: missed (operator down, past deadline) or skipped (suspended, gates)."),
    panel(5, "Fire lateness", "timeseries", 0, 14, 12, 8,
          [('histogram_quantile(0.5, sum by (le) (rate(eru_fire_lateness_seconds_bucket[$__rate_interval])))', "p50"),
           ('histogram_quantile(0.99, sum by (le) (rate(eru_fire_lateness_seconds_bucket[$__rate_interval])))', "p99")],
          unit="s", description="From the scheduled slot to the restart patch."),
    panel(6, "Upcoming restarts", "table", 12, 14, 12, 8,
          [('eru_next_fire_timestamp_seconds * 1000', "{{namespace}}/{{name}}")],
          unit="dateTimeAsIso", description="Next scheduled slot of every Eru."),
    panel(7, "Objects by phase", "timeseries", 0, 22, 12, 8,
          [('sum by (kind, phase) (eru_objects)', "{{kind}} {{phase}}")]),
    panel(8, "State transitions", "timeseries", 12, 22, 12, 8,
          [('sum by (kind, from, to) (increase(eru_state_transitions_total[$__rate_interval]))', "{{kind}} {{from}}→{{to}}")]),
    panel(9, "Reconcile errors", "timeseries", 0, 30, 12, 8,
          [('sum by (kind, category) (rate(eru_reconcile_errors_total[$__rate_interval]))', "{{kind}} {{category}}")],
          unit="ops"),
    panel(10, "Reconcile latency p95", "timeseries", 12, 30, 12, 8,
          [('histogram_quantile(0.95, sum by (le, kind) (rate(eru_reconcile_duration_seconds_bucket[$__rate_interval])))',
            "{{kind}}")], unit="s"),
    panel(11, "Reconciles", "timeseries", 0, 38, 12, 8,
          [('sum by (kind, result) (rate(eru_reconcile_total[$__rate_interval]))', "{{kind}} {{result}}")], unit="ops"),
    panel(12, "Journal write latency", "timeseries", 12, 38, 12, 8,
          [('histogram_quantile(0.5, sum by (le) (rate(eru_journal_write_seconds_bucket[$__rate_interval])))', "p50"),
           ('histogram_quantile(0.99, sum by (le) (rate(eru_journal_write_seconds_bucket[$__rate_interval])))', "p99")],
          unit="s"),
    panel(13, "Operator build", "stat", 0, 46, 6, 4,
          [('max by (version) (eru_build_info)', "{{version}}")]),
    panel(14, "Fleet: queued slots and restarts in flight", "timeseries", 6, 46, 9, 8,
          [('max(eru_restarts_queued)', "queued"), ('max(eru_restarts_in_flight)', "in flight")],
          description="Due slots waiting for a place under --max-concurrent-restarts, and the restarts holding the places (0 when uncapped)."),
    panel(15, "Fleet skips: blackout, fleet capacity, dry run", "timeseries", 15, 46, 9, 8,
          [('sum by (namespace, name, reason) (increase(eru_slots_total{reason=~"blackout|fleet_capacity|dry_run"}[$__rate_interval]))',
            "{{namespace}}/{{name}} {{reason}}")],
          description="Slots skipped on purpose: inside a blackout window, out of fleet capacity by their deadline, or journaled by a dry run."),
    panel(16, "Health gates: held slots", "timeseries", 0, 54, 12, 8,
          [('max(eru_held_slots)', "held"),
           ('sum by (reason) (increase(eru_slots_total{reason=~"blocking_pods|alert_firing|gate_unknown"}[$__rate_interval]))',
            "skipped {{reason}}")],
          description="Due slots a health gate holds now (blocking pods, a firing alert, an unknown answer), and the held slots skipped at their deadline. Which Erus: eru_held_since_timestamp_seconds, /audit, the page."),
    panel(17, "Health gate evaluations", "timeseries", 12, 54, 12, 8,
          [('sum by (gate, result) (increase(eru_gate_evaluations_total[$__rate_interval]))', "{{gate}} {{result}}")],
          description="Each gate asked for a due slot, by answer: open, closed (the slot is held), unknown (Prometheus or the API server did not answer)."),
    panel(18, "API server pushback: 429 answers and dropped Events", "timeseries", 0, 62, 24, 8,
          [('sum by (request) (increase(eru_api_throttled_total[$__rate_interval]))', "429 to {{request}}"),
           ('sum(increase(eru_events_dropped_total[$__rate_interval]))', "Events dropped")],
          description="The API server's 429 answers (API Priority and Fairness: the operator's priority level had no seat and no queue place) by request: restart patches are sent again after the Retry-After until their slot's deadline, statuses up to 8 times, Events never. Events dropped: the queue was full or the answer was 429. Sustained 429s to restart patches: docs/operations.md, \"A fleet restart and the API server\"."),
]

dashboard = {
    "__inputs": [{"name": "DS_PROMETHEUS", "label": "Prometheus", "type": "datasource", "pluginId": "prometheus"}],
    "title": "ERU operator",
    "uid": "eru-operator",
    "tags": ["eru", "kubernetes", "operator"],
    "timezone": "utc",
    "schemaVersion": 39,
    "version": 1,
    "refresh": "30s",
    "time": {"from": "now-6h", "to": "now"},
    "templating": {"list": [{
        "name": "datasource", "label": "Datasource", "type": "datasource", "query": "prometheus",
        "current": {}, "hide": 0, "refresh": 1, "regex": "",
    }]},
    "annotations": {"list": []},
    "panels": panels,
}

out = pathlib.Path(__file__).resolve().parent.parent / "dashboards" / "eru-operator.json"
out.write_text(json.dumps(dashboard, indent=2, ensure_ascii=False) + "\n")
print(f"wrote {out}")
