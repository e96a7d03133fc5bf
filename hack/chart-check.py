#!/usr/bin/env python3
"""Compares what `helm template` renders with the repository's other sources (hack/chart-check.sh
runs it; no cluster):

  chart-check.py same RENDERED MANIFEST...
      the rendered objects and the manifests' objects are equal, object by object, once the labels
      only Helm adds are dropped (helm.sh/chart, app.kubernetes.io/instance, …/version,
      …/managed-by, and helm.sh/* annotations) and the CRDs, which Helm installs from the chart's
      crds/ folder, and the Namespace, which `helm install --create-namespace` or
      deploy/namespace.yaml makes, are left aside
  chart-check.py monitoring RENDERED RUNBOOK_BASE [RULES_OUT]
      the PrometheusRule carries exactly the groups of deploy/alerts/eru-operator.rules.yaml with
      RUNBOOK_BASE as every runbook_url's base, the dashboard ConfigMap holds
      dashboards/eru-operator.json with the sidecar label grafana_dashboard: "1", and the
      ServiceMonitor scrapes port http as job eru-operator (the alert rules' job); writes the
      PrometheusRule's groups to RULES_OUT as a rules file (for promtool)
"""
import json
import pathlib
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
HELM_LABELS = {"helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by"}


def objects(path):
    text = sys.stdin.read() if path == "-" else pathlib.Path(path).read_text()
    return [doc for doc in yaml.safe_load_all(text) if doc]


def strip_helm(value):
    """Drops Helm's own labels and annotations wherever labels or selectors appear."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in ("labels", "matchLabels") and isinstance(item, dict):
                item = {k: v for k, v in item.items() if k not in HELM_LABELS}
            if key == "annotations" and isinstance(item, dict):
                item = {k: v for k, v in item.items() if not k.startswith("helm.sh/")}
                if not item:
                    continue
            if key == "selector" and isinstance(item, dict) and all(isinstance(v, str) for v in item.values()):
                item = {k: v for k, v in item.items() if k not in HELM_LABELS}  # a Service's selector
            out[key] = strip_helm(item)
        return out
    if isinstance(value, list):
        return [strip_helm(v) for v in value]
    return value


def key(obj):
    return (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def index(docs):
    return {key(o): strip_helm(o) for o in docs if o["kind"] not in ("CustomResourceDefinition", "Namespace")}


def diff(a, b, path=""):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a:
                yield f"{path}.{k}: only in the manifests: {json.dumps(b[k])[:200]}"
            elif k not in b:
                yield f"{path}.{k}: only in the chart: {json.dumps(a[k])[:200]}"
            else:
                yield from diff(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from diff(x, y, f"{path}[{i}]")
    elif a != b:
        yield f"{path}: chart {json.dumps(a)[:200]} != manifests {json.dumps(b)[:200]}"


def same(rendered, manifests):
    chart = index(objects(rendered))
    plain = index([o for m in manifests for o in objects(m)])
    problems = []
    for k in sorted(set(chart) | set(plain)):
        if k not in plain:
            problems.append(f"{'/'.join(k)}: rendered by the chart, not in {' '.join(manifests)}")
        elif k not in chart:
            problems.append(f"{'/'.join(k)}: in {' '.join(manifests)}, not rendered by the chart")
        else:
            problems += [f"{'/'.join(k)}{d}" for d in diff(chart[k], plain[k])]
    if problems:
        print(f"the chart and {' '.join(manifests)} differ:", *problems, sep="\n  ", file=sys.stderr)
        sys.exit(1)
    print(f"the chart renders exactly {' + '.join(manifests)}: {len(chart)} objects")


def monitoring(rendered, base):
    docs = {o["kind"]: o for o in objects(rendered)}
    problems = []
    rules = yaml.safe_load((ROOT / "deploy/alerts/eru-operator.rules.yaml").read_text())["groups"]
    for group in rules:
        for rule in group["rules"]:
            url = rule.get("annotations", {}).get("runbook_url")
            if url:
                rule["annotations"]["runbook_url"] = base + "#" + url.partition("#")[2]
    groups = docs.get("PrometheusRule", {}).get("spec", {}).get("groups")
    if groups != rules:
        problems.append("the PrometheusRule's groups are not the rules file's with the runbook base replaced")
    dashboard = None
    for o in objects(rendered):
        if o["kind"] == "ConfigMap" and "eru-operator.json" in o.get("data", {}):
            dashboard = o
    if dashboard is None:
        problems.append("no dashboard ConfigMap")
    else:
        if json.loads(dashboard["data"]["eru-operator.json"]) != json.loads((ROOT / "dashboards/eru-operator.json").read_text()):
            problems.append("the dashboard ConfigMap does not hold dashboards/eru-operator.json")
        if dashboard["metadata"].get("labels", {}).get("grafana_dashboard") != "1":
            problems.append('the dashboard ConfigMap lacks the label grafana_dashboard: "1"')
    monitor = docs.get("ServiceMonitor")
    if monitor is None:
        problems.append("no ServiceMonitor")
    else:
        endpoint = monitor["spec"]["endpoints"][0]
        if endpoint.get("port") != "http" or {"targetLabel": "job", "replacement": "eru-operator"} not in endpoint.get("relabelings", []):
            problems.append("the ServiceMonitor does not scrape port http as job eru-operator")
    if problems:
        print("monitoring objects:", *problems, sep="\n  ", file=sys.stderr)
        sys.exit(1)
    with open(sys.argv[4], "w") if len(sys.argv) > 4 else open("/dev/null", "w") as out:
        yaml.safe_dump({"groups": groups}, out, sort_keys=False, width=1000)
    print("monitoring objects: PrometheusRule = the rules file (runbook base replaced), dashboard ConfigMap, ServiceMonitor")


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "same" and len(sys.argv) >= 4:
        same(sys.argv[2], sys.argv[3:])
    elif mode == "monitoring" and len(sys.argv) >= 4:
        monitoring(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
