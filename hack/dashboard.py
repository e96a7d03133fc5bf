#!/usr/bin/env python3
"""Writes dashboards/eru-operator.json (Grafana).

Variables: datasource, job (the operator's scrape job: every query selects it), namespace and Eru
(multi-value, "All" by default: every per-Eru query selects them). Built to stay readable at
1,000 Erus: per-Eru panels are top-10 tables or per-namespace rollups, never a line per Eru.
Panels for the operator itself: the leader, the journal (up, write errors), process CPU and RSS.
Panels behind an alert link to its runbook section.

The panels' PromQL is a contract with src/metrics.rs and src/eru/metrics.rs; tests/alerts.rs
checks the shape (every query selects the variables), tests/observability.rs evaluates every
query against a real Prometheus scraping the operator through the chart's ServiceMonitor, and
requires data keyed by the Erus' own namespaces and names.
Run: python3 hack/dashboard.py
"""
import json
import pathlib

DS = {"type": "prometheus", "uid": "${datasource}"}
RUNBOOKS = "https://github.com/meitu/eru-operator/blob/main/docs/runbooks.md"
# the operator's series, and an Eru's (the namespace and Eru variables)
J = 'job=~"$job"'
E = 'job=~"$job", namespace=~"$namespace", name=~"$eru"'


def panel(title, kind, w, h, targets, unit=None, description="", runbook=None, merge=False):
    p = {
        "title": title,
        "description": description,
        "type": kind,
        "datasource": DS,
        "gridPos": {"w": w, "h": h},
        "targets": [
            {"refId": chr(65 + i), "datasource": DS, "expr": expr, "legendFormat": legend,
             **({"instant": True, "format": "table"} if kind == "table" else {})}
            for i, (expr, legend) in enumerate(targets)
        ],
        "fieldConfig": {"defaults": {"unit": unit} if unit else {}, "overrides": []},
        "options": {},
    }
    if kind == "table":
        # one row per series (or per namespace, merged across the queries), no Time column
        p["transformations"] = ([{"id": "merge", "options": {}}] if merge else []) + [
            {"id": "organize", "options": {"excludeByName": {"Time": True}}}]
        p["options"] = {"showHeader": True, "sortBy": [{"displayName": "Value", "desc": True}]}
    if runbook:
        p["links"] = [{"title": f"Runbook: {runbook}", "url": f"{RUNBOOKS}#{runbook.lower()}", "targetBlank": True}]
    return p


def row(title):
    return {"type": "row", "title": title, "collapsed": False, "panels": [], "gridPos": {"w": 24, "h": 1}}


layout = [
    row("Operator"),
    panel("Leader", "timeseries", 6, 6,
          [(f'max by (instance) (eru_leader{{{J}}})', "{{instance}}")],
          description="1 on the replica that acts (holds the Lease, or runs without leader election), 0 on a standby; exactly one should be 1.",
          runbook="EruScheduleOverdue"),
    panel("Journal up", "timeseries", 6, 6,
          [(f'min by (instance) (eru_journal_up{{{J}}})', "{{instance}}")],
          description="1 while the journal takes writes; 0 since a write failed (nothing is restarted without its record).",
          runbook="EruJournalUnwritable"),
    panel("Journal write errors", "timeseries", 6, 6,
          [(f'sum by (instance) (increase(eru_journal_write_errors_total{{{J}}}[$__rate_interval]))', "{{instance}}")],
          description="Failed journal writes (appends, heartbeats): the signal behind EruJournalUnwritable.",
          runbook="EruJournalUnwritable"),
    panel("Scraped, and the build", "timeseries", 6, 6,
          [(f'up{{{J}}}', "up {{instance}}"), (f'max by (instance, version) (eru_build_info{{{J}}})', "{{instance}} {{version}}")],
          description="1 while Prometheus scrapes the operator (EruOperatorDown fires after 5 minutes at 0), and the version each replica runs.",
          runbook="EruOperatorDown"),
    panel("CPU", "timeseries", 12, 7,
          [(f'rate(process_cpu_seconds_total{{{J}}}[$__rate_interval])', "{{instance}}")],
          unit="short", description="CPU seconds per second (cores) of each replica's process. A fleet restart is a burst (docs/performance.md)."),
    panel("Memory (RSS)", "timeseries", 12, 7,
          [(f'process_resident_memory_bytes{{{J}}}', "{{instance}}")],
          unit="bytes", description="Resident memory of each replica's process; compare with the pod's limit (docs/operations.md, Sizing)."),
    row("Erus (the namespace and Eru variables apply)"),
    panel("By namespace (range)", "table", 12, 9,
          [(f'count by (namespace) (eru_restarts_total{{{E}, outcome="succeeded"}})', "Erus"),
           (f'sum by (namespace) (increase(eru_restarts_total{{{E}, outcome="succeeded"}}[$__range]))', "restarted"),
           (f'sum by (namespace) (increase(eru_restarts_total{{{E}, outcome="failed"}}[$__range]))', "failed"),
           (f'sum by (namespace) (increase(eru_slots_total{{{E}, result="missed"}}[$__range]))', "missed"),
           (f'sum by (namespace) (increase(eru_slots_total{{{E}, result="skipped"}}[$__range]))', "skipped")],
          merge=True,
          description="Per namespace: its Erus, and their restarts and slots over the dashboard's range."),
    panel("Restarts by namespace and outcome", "timeseries", 12, 9,
          [(f'sum by (namespace, outcome) (increase(eru_restarts_total{{{E}}}[$__rate_interval]))',
            "{{namespace}} {{outcome}}")],
          description="Rolling restarts finished per interval, per namespace."),
    panel("Top 10 Erus: failed restarts (range)", "table", 8, 8,
          [(f'topk(10, sum by (namespace, name) (increase(eru_restarts_total{{{E}, outcome="failed"}}[$__range])))', "")],
          description="The Erus whose rollouts failed most often over the range.",
          runbook="EruRestartFailed"),
    panel("Top 10 Erus: missed and skipped slots (range)", "table", 8, 8,
          [(f'topk(10, sum by (namespace, name, result, reason) (increase(eru_slots_total{{{E}, result=~"missed|skipped"}}[$__range])))', "")],
          description="Slots not restarted, by Eru and reason, over the range.",
          runbook="EruSlotsMissed"),
    panel("Rolling out now, longest first", "table", 8, 8,
          [(f'topk(10, time() - max by (namespace, name) (eru_rollout_started_timestamp_seconds{{{E}}}))', "")],
          unit="s", description="How long each Eru's rollout in progress has run (EruRolloutStuck fires at 30 minutes).",
          runbook="EruRolloutStuck"),
    panel("Held by a health gate, longest first", "table", 8, 8,
          [(f'topk(10, time() - max by (namespace, name) (eru_held_since_timestamp_seconds{{{E}}}))', "")],
          unit="s", description="How long each held slot has waited for its gates (EruSlotHeldLong fires at 30 minutes). Why: the Eru's status.held, /audit.",
          runbook="EruSlotHeldLong"),
    panel("Next restarts, soonest first", "table", 8, 8,
          [(f'bottomk(10, max by (namespace, name) (eru_next_fire_timestamp_seconds{{{E}}})) * 1000', "")],
          unit="dateTimeAsIso", description="The next scheduled slots (EruScheduleOverdue fires when one is 10 minutes past).",
          runbook="EruScheduleOverdue"),
    panel("Missed and skipped slots by reason", "timeseries", 8, 8,
          [(f'sum by (result, reason) (increase(eru_slots_total{{{E}, result=~"missed|skipped"}}[$__rate_interval]))',
            "{{result}} {{reason}}")],
          description="Slots that were not restarted: missed (operator down, past deadline) or skipped (suspended, gates, blackouts).",
          runbook="EruSlotsMissed"),
    panel("Fleet skips by namespace: blackout, fleet capacity, dry run", "timeseries", 12, 8,
          [(f'sum by (namespace, reason) (increase(eru_slots_total{{{E}, reason=~"blackout|fleet_capacity|dry_run"}}[$__rate_interval]))',
            "{{namespace}} {{reason}}")],
          description="Slots skipped on purpose: inside a blackout window, out of fleet capacity by their deadline, or journaled by a dry run."),
    panel("Health gates: held slots, and held slots skipped", "timeseries", 12, 8,
          [(f'max(eru_held_slots{{{J}}})', "held"),
           (f'sum by (reason) (increase(eru_slots_total{{{E}, reason=~"blocking_pods|pdb_blocked|alert_firing|gate_unknown"}}[$__rate_interval]))',
            "skipped {{reason}}")],
          description="Due slots a health gate holds now (blocking pods, a PodDisruptionBudget at zero, a firing alert, an unknown answer), and the held slots skipped at their deadline.",
          runbook="EruSlotHeldLong"),
    row("Restarts and the fleet"),
    panel("Restart duration", "timeseries", 8, 8,
          [(f'histogram_quantile(0.5, sum by (le) (rate(eru_restart_duration_seconds_bucket{{{J}}}[$__rate_interval])))', "p50"),
           (f'histogram_quantile(0.95, sum by (le) (rate(eru_restart_duration_seconds_bucket{{{J}}}[$__rate_interval])))', "p95")],
          unit="s", description="From the restart patch to the end of the rollout, all Erus."),
    panel("Fire lateness", "timeseries", 8, 8,
          [(f'histogram_quantile(0.5, sum by (le) (rate(eru_fire_lateness_seconds_bucket{{{J}}}[$__rate_interval])))', "p50"),
           (f'histogram_quantile(0.99, sum by (le) (rate(eru_fire_lateness_seconds_bucket{{{J}}}[$__rate_interval])))', "p99")],
          unit="s", description="From the scheduled slot to the restart patch, all Erus."),
    panel("Fleet: queued slots and restarts in flight", "timeseries", 8, 8,
          [(f'max(eru_restarts_queued{{{J}}})', "queued"), (f'max(eru_restarts_in_flight{{{J}}})', "in flight")],
          description="Due slots waiting for a place under --max-concurrent-restarts, and the restarts holding the places (0 when uncapped)."),
    panel("Objects by phase", "timeseries", 8, 8,
          [(f'sum by (kind, phase) (eru_objects{{{J}}})', "{{kind}} {{phase}}")]),
    panel("State transitions", "timeseries", 8, 8,
          [(f'sum by (kind, from, to) (increase(eru_state_transitions_total{{{J}}}[$__rate_interval]))', "{{kind}} {{from}}→{{to}}")]),
    panel("Health gate evaluations", "timeseries", 8, 8,
          [(f'sum by (gate, result) (increase(eru_gate_evaluations_total{{{J}}}[$__rate_interval]))', "{{gate}} {{result}}")],
          description="Each gate asked for a due slot, by answer: open, closed (the slot is held), unknown (Prometheus or the API server did not answer)."),
    row("Reconciles, the journal and the API server"),
    panel("Reconcile errors", "timeseries", 8, 8,
          [(f'sum by (kind, category) (rate(eru_reconcile_errors_total{{{J}}}[$__rate_interval]))', "{{kind}} {{category}}")],
          unit="ops", runbook="EruReconcileErrors"),
    panel("Reconciles", "timeseries", 8, 8,
          [(f'sum by (kind, result) (rate(eru_reconcile_total{{{J}}}[$__rate_interval]))', "{{kind}} {{result}}")], unit="ops"),
    panel("Reconcile latency p95", "timeseries", 8, 8,
          [(f'histogram_quantile(0.95, sum by (le, kind) (rate(eru_reconcile_duration_seconds_bucket{{{J}}}[$__rate_interval])))',
            "{{kind}}")], unit="s"),
    panel("Journal write latency", "timeseries", 12, 8,
          [(f'histogram_quantile(0.5, sum by (le) (rate(eru_journal_write_seconds_bucket{{{J}}}[$__rate_interval])))', "p50"),
           (f'histogram_quantile(0.99, sum by (le) (rate(eru_journal_write_seconds_bucket{{{J}}}[$__rate_interval])))', "p99")],
          unit="s"),
    panel("API server pushback: 429 answers and dropped Events", "timeseries", 12, 8,
          [(f'sum by (request) (increase(eru_api_throttled_total{{{J}}}[$__rate_interval]))', "429 to {{request}}"),
           (f'sum(increase(eru_events_dropped_total{{{J}}}[$__rate_interval]))', "Events dropped")],
          description="The API server's 429 answers (API Priority and Fairness: the operator's priority level had no seat and no queue place) by request: restart patches are sent again after the Retry-After until their slot's deadline, statuses up to 8 times, Events never. Events dropped: the queue was full or the answer was 429. Sustained 429s to restart patches: docs/operations.md, \"A fleet restart and the API server\"."),
    panel("Manual runs and reverted restarts", "timeseries", 24, 8,
          [(f'sum by (outcome) (increase(eru_manual_runs_total{{{J}}}[$__rate_interval]))', "manual run {{outcome}}"),
           (f'sum(increase(eru_restarts_reverted_total{{{J}}}[$__rate_interval]))', "restarts reverted")],
          description="Manual runs (mtsre.meitu.com/run-now, docs/eru.md \"Run now\") by how they ended; refused: not started by their deadline, or the Eru was suspended. Restarts reverted: another field manager removed or replaced mtsre.meitu.com/restartedAt after the patch, so the pods rolled a second time (the audit and /history name who; docs/gitops.md has the Argo CD and Flux settings that stop it)."),
    row("Notifications"),
    panel("Notification delivery", "timeseries", 16, 8,
          [(f'sum by (sink) (increase(eru_notifications_delivered_total{{{J}}}[$__rate_interval]))', "delivered to {{sink}}"),
           (f'sum by (sink) (increase(eru_notifications_retried_total{{{J}}}[$__rate_interval]))', "retried to {{sink}}"),
           (f'sum by (sink, reason) (increase(eru_notifications_dropped_total{{{J}}}[$__rate_interval]))', "dropped to {{sink}}: {{reason}}")],
          description="Notification events a receiver took, whose sending failed and is tried again (1 s, doubling, up to --notification-backoff-max), and given up: expired (older than --notification-max-age), outbox_full, unknown_sink. Only with --notifications-file (docs/operations.md, \"Notifications\").",
          runbook="EruNotificationsDropped"),
    panel("Notifications pending by sink", "timeseries", 8, 8,
          [(f'max by (sink) (eru_notifications_pending{{{J}}})', "{{sink}}")],
          description="Notification events in the outbox not delivered yet, per sink (the leader sets them every 2 s). Each sink is delivered on its own lane: one growing is that sink's receiver (slow, down or refusing); the operator log names the sink and the error. Over all sinks beyond --notification-outbox-max, the oldest are dropped (outbox_full)."),
    panel("Oldest pending notification by sink", "timeseries", 12, 8,
          [(f'max by (sink) (eru_notifications_oldest_pending_age_seconds{{{J}}})', "{{sink}}")],
          unit="s",
          description="How long the oldest undelivered notification event of each sink has waited since it was journaled (0: none pending). Climbing steadily: the receiver takes nothing; at --notification-max-age (24 h) its events are dropped (expired).",
          runbook="EruNotificationsDropped"),
    panel("Failed notification attempts by sink", "timeseries", 12, 8,
          [(f'sum by (sink) (rate(eru_notifications_failed_attempts_total{{{J}}}[$__rate_interval]))', "{{sink}}")],
          unit="ops",
          description="Messages a receiver did not take (no answer within 10 s, refused, not 2xx), per sink. After a failure the sink's lane pauses on its own backoff (1 s, doubling, up to --notification-backoff-max): steady failures and nothing delivered is a receiver that is down; deliveries with few failures, a slow one."),
]

# grid positions: left to right, a new line when the row is full; ids in order
panels, x, y, line = [], 0, 0, 0
for pid, p in enumerate(layout, start=1):
    w, h = p["gridPos"]["w"], p["gridPos"]["h"]
    if x + w > 24:
        x, y, line = 0, y + line, 0
    p["id"] = pid
    p["gridPos"] = {"x": x, "y": y, "w": w, "h": h}
    x, line = x + w, max(line, h)
    panels.append(p)


def query_variable(name, label, query, multi):
    return {
        "name": name, "label": label, "type": "query", "datasource": DS,
        "query": {"query": query, "refId": f"{name}-variable"}, "definition": query,
        "refresh": 2, "sort": 1, "regex": "", "hide": 0,
        "multi": multi, "includeAll": multi, **({"allValue": ".*"} if multi else {}),
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]} if multi else {},
    }


dashboard = {
    "__inputs": [{"name": "DS_PROMETHEUS", "label": "Prometheus", "type": "datasource", "pluginId": "prometheus"}],
    "title": "ERU operator",
    "uid": "eru-operator",
    "tags": ["eru", "kubernetes", "operator"],
    "timezone": "utc",
    "schemaVersion": 39,
    "version": 2,
    "refresh": "30s",
    "time": {"from": "now-6h", "to": "now"},
    "templating": {"list": [
        {"name": "datasource", "label": "Datasource", "type": "datasource", "query": "prometheus",
         "current": {}, "hide": 0, "refresh": 1, "regex": ""},
        query_variable("job", "Job", "label_values(eru_build_info, job)", False),
        query_variable("namespace", "Namespace", 'label_values(eru_restarts_total{job=~"$job"}, namespace)', True),
        query_variable("eru", "Eru", 'label_values(eru_restarts_total{job=~"$job", namespace=~"$namespace"}, name)', True),
    ]},
    "links": [{"title": "Runbooks", "type": "link", "url": RUNBOOKS, "targetBlank": True, "icon": "doc"}],
    "annotations": {"list": []},
    "panels": panels,
}

out = pathlib.Path(__file__).resolve().parent.parent / "dashboards" / "eru-operator.json"
out.write_text(json.dumps(dashboard, indent=2, ensure_ascii=False) + "\n")
print(f"wrote {out}")
