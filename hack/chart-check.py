#!/usr/bin/env python3
"""Compares what `helm template` renders with the repository's other sources (hack/chart-check.sh
runs it; no cluster):

  chart-check.py same RENDERED MANIFEST... [--args FLAG=VALUE]
      the rendered objects and the manifests' objects are equal, object by object, once the labels
      only Helm adds are dropped (helm.sh/chart, app.kubernetes.io/instance, …/version,
      …/managed-by, and helm.sh/* annotations) and the CRDs (controllers checks them) and the
      Namespace, which `helm install --create-namespace` or deploy/namespace.yaml makes, are left
      aside; --args: the manifests' Deployment passes VALUE after FLAG instead of its own (the
      chart's value set differs from deploy/'s by that argument)
  chart-check.py controllers RENDERED "CONTROLLER..."
      the rendered CRDs are exactly those of the optional controllers named, each the committed
      crds/<controller>/<controller>.yaml kept on uninstall (helm.sh/resource-policy: keep); and
      without PodSet no ClusterRole may create or delete Pods, without Memcached none may create
      or delete Deployments (the Eru install's least privilege)
  chart-check.py monitoring RENDERED VALUES [RULES_OUT]
      what the chart renders with VALUES (ci/monitoring-values.yaml): the PrometheusRule carries
      exactly the groups hack/prometheusrule.py makes of deploy/alerts/eru-operator.rules.yaml with
      the same job, cluster and runbook base; the dashboard ConfigMap holds
      dashboards/eru-operator.json with the sidecar label grafana_dashboard: "1"; the
      ServiceMonitor scrapes the Service's port (https) as the job, keeps the operator's labels
      (honorLabels), sends the scraper's token from its Secret (no bearerTokenFile) and verifies
      the certificate of the cert-manager Certificate with its CA as the Service's DNS name; the
      scraper ServiceAccount, its token Secret and the metricsReaders are bound to the ClusterRole
      that may get /metrics (eru-metrics-reader); writes the PrometheusRule's groups to RULES_OUT as
      a rules file (for promtool)
  chart-check.py plain RENDERED
      no object carries prometheus.io/* annotations (the defaults)
  chart-check.py disjoint RENDERED RENDERED...
      the renders of several releases (each in a namespace of its own) share no object: no
      cluster-scoped one but the CRDs (one per cluster: crds/ is skipped when present; an optional
      controller's belongs to the first release that turns it on), and none in a namespace they
      both write to (the dashboard's); every object without a namespace is of a cluster-scoped
      kind (a namespaced one would land in whatever namespace `kubectl apply` is given)
"""
import json
import pathlib
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "hack"))
import prometheusrule  # noqa: E402  (hack/prometheusrule.py: the rules' selector options)

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


def with_args(docs, overrides):
    """The Deployments of `docs` with each FLAG's value replaced (`overrides`: FLAG → VALUE)."""
    for o in docs:
        if o["kind"] != "Deployment":
            continue
        for c in o["spec"]["template"]["spec"]["containers"]:
            args = c.get("args", [])
            for i, a in enumerate(args[:-1]):
                if a in overrides:
                    args[i + 1] = overrides[a]
    return docs


def same(rendered, manifests, overrides=None):
    chart = index(objects(rendered))
    plain = index(with_args([o for m in manifests for o in objects(m)], overrides or {}))
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


def monitoring(rendered, values_file, rules_out=None):
    values = yaml.safe_load(pathlib.Path(values_file).read_text())
    docs = objects(rendered)
    kinds = {(o["kind"], o["metadata"]["name"]): o for o in docs}
    by_kind = {o["kind"]: o for o in docs}
    problems = []
    sm_values = values.get("serviceMonitor", {})
    job = values.get("prometheusRule", {}).get("job") or sm_values.get("job", "eru-operator")
    cluster = values.get("prometheusRule", {}).get("cluster", "")
    base = values.get("prometheusRule", {}).get("runbookBaseURL", "")
    rules = prometheusrule.configure(prometheusrule.load(), job, cluster, base)
    groups = by_kind.get("PrometheusRule", {}).get("spec", {}).get("groups")
    if groups != rules:
        problems.append(f"the PrometheusRule's groups are not hack/prometheusrule.py --job {job} --cluster '{cluster}' --runbook-base {base}")
    dashboard = None
    for o in docs:
        if o["kind"] == "ConfigMap" and "eru-operator.json" in o.get("data", {}):
            dashboard = o
    if dashboard is None:
        problems.append("no dashboard ConfigMap")
    else:
        if json.loads(dashboard["data"]["eru-operator.json"]) != json.loads((ROOT / "dashboards/eru-operator.json").read_text()):
            problems.append("the dashboard ConfigMap does not hold dashboards/eru-operator.json")
        if dashboard["metadata"].get("labels", {}).get("grafana_dashboard") != "1":
            problems.append('the dashboard ConfigMap lacks the label grafana_dashboard: "1"')
    monitor = by_kind.get("ServiceMonitor")
    if monitor is None:
        problems.append("no ServiceMonitor")
    else:
        name, namespace = monitor["metadata"]["name"], monitor["metadata"]["namespace"]
        endpoint = monitor["spec"]["endpoints"][0]
        service = by_kind.get("Service", {}).get("spec", {}).get("ports", [{}])[0]
        if endpoint.get("port") != "https" or service.get("name") != "https" or service.get("appProtocol") != "https":
            problems.append(f"the ServiceMonitor scrapes port {endpoint.get('port')}, the Service's is {service.get('name')} (appProtocol {service.get('appProtocol')}): both must be https")
        if {"targetLabel": "job", "replacement": sm_values.get("job", "eru-operator")} not in endpoint.get("relabelings", []):
            problems.append(f"the ServiceMonitor does not scrape as job {sm_values.get('job')}")
        if endpoint.get("honorLabels") is not True:
            problems.append("the ServiceMonitor does not keep the operator's labels (honorLabels: true)")
        if "bearerTokenFile" in endpoint or "bearerTokenSecret" in endpoint:
            problems.append("the ServiceMonitor uses a deprecated token field (bearerTokenFile, bearerTokenSecret)")
        token = f"{name}-metrics-scraper-token"
        if endpoint.get("authorization") != {"type": "Bearer", "credentials": {"name": token, "key": "token"}}:
            problems.append(f"the ServiceMonitor's authorization is not the token of Secret {token}")
        secret = kinds.get(("Secret", token))
        scraper = f"{name}-metrics-scraper"
        if not secret or secret.get("type") != "kubernetes.io/service-account-token" or secret["metadata"].get("annotations", {}).get("kubernetes.io/service-account.name") != scraper:
            problems.append(f"no Secret {token} of type kubernetes.io/service-account-token for the ServiceAccount {scraper}")
        if ("ServiceAccount", scraper) not in kinds:
            problems.append(f"no ServiceAccount {scraper}")
        metrics_roles = [
            o["metadata"]["name"]
            for o in docs
            if o["kind"] == "ClusterRole" and o.get("rules") == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
        ]
        if metrics_roles != ["eru-metrics-reader"]:
            problems.append(f"the ClusterRoles that may get /metrics (only) are {metrics_roles}, not [eru-metrics-reader]")
        readers = {
            (s["namespace"], s["name"])
            for o in docs
            if o["kind"] == "ClusterRoleBinding" and o["roleRef"]["name"] == "eru-metrics-reader"
            for s in o["subjects"]
        }
        wanted = {(namespace, scraper)} | {(r["namespace"], r["name"]) for r in values.get("metricsReaders", [])}
        if readers != wanted:
            problems.append(f"eru-metrics-reader is bound to {sorted(readers)}, not {sorted(wanted)}")
        tls = endpoint.get("tlsConfig", {})
        secret_name = values["http"]["tls"]["secretName"]
        if tls.get("insecureSkipVerify") or tls.get("ca") != {"secret": {"name": secret_name, "key": "ca.crt"}}:
            problems.append(f"the ServiceMonitor does not verify the operator with the ca.crt of {secret_name}")
        certificate = by_kind.get("Certificate")
        if not certificate or certificate["spec"]["secretName"] != secret_name or tls.get("serverName") not in certificate["spec"]["dnsNames"]:
            problems.append(f"no Certificate writing {secret_name} for the ServiceMonitor's serverName {tls.get('serverName')}")
    if problems:
        print("monitoring objects:", *problems, sep="\n  ", file=sys.stderr)
        sys.exit(1)
    with open(rules_out, "w") if rules_out else open("/dev/null", "w") as out:
        yaml.safe_dump({"groups": groups}, out, sort_keys=False, width=1000)
    print(f"monitoring objects: PrometheusRule = hack/prometheusrule.py --job {job} --cluster {cluster} (runbook base replaced), dashboard ConfigMap, ServiceMonitor (honorLabels, token Secret, TLS verified), Certificate, eru-metrics-reader bindings")


def controllers(rendered, enabled):
    docs = objects(rendered)
    problems = []
    crds = {o["metadata"]["name"]: o for o in docs if o["kind"] == "CustomResourceDefinition"}
    wanted = {}
    for c in enabled:
        committed = yaml.safe_load((ROOT / "crds" / c / f"{c}.yaml").read_text())
        wanted[committed["metadata"]["name"]] = committed
    if set(crds) != set(wanted):
        problems.append(f"the chart renders the CRDs {sorted(crds)}, not {sorted(wanted)}")
    for name, crd in crds.items():
        annotations = crd["metadata"].pop("annotations", {})
        if annotations.get("helm.sh/resource-policy") != "keep":
            problems.append(f"CRD {name} is not kept on uninstall (helm.sh/resource-policy: keep)")
        if name in wanted and crd != wanted[name]:
            problems.append(f"CRD {name} differs from crds/")
    # what no ClusterRole may grant without the controller that needs it
    forbidden = []
    if "podset" not in enabled:
        forbidden.append(("", "pods", {"create", "delete", "patch", "update", "*"}))
    if "memcached" not in enabled:
        forbidden.append(("apps", "deployments", {"create", "delete", "update", "*"}))
    for o in docs:
        if o["kind"] not in ("ClusterRole", "Role"):
            continue
        for rule in o.get("rules", []):
            for group, resource, verbs in forbidden:
                if group in rule.get("apiGroups", []) and resource in rule.get("resources", []) and verbs & set(rule.get("verbs", [])):
                    problems.append(f"{o['kind']}/{o['metadata']['name']} grants {sorted(verbs & set(rule['verbs']))} on {resource}")
    if problems:
        print("controllers:", *problems, sep="\n  ", file=sys.stderr)
        sys.exit(1)
    print(f"controllers {' '.join(enabled) or '(eru only)'}: their CRDs only, kept on uninstall; no role beyond them")


def plain(rendered):
    found = [
        f"{o['kind']}/{o['metadata']['name']}: {key}"
        for o in objects(rendered)
        for meta in (o.get("metadata", {}), o.get("spec", {}).get("template", {}).get("metadata", {}))
        for key in (meta.get("annotations") or {})
        if key.startswith("prometheus.io/")
    ]
    if found:
        print("prometheus.io annotations (scrapers would get 401s or scrape twice):", *found, sep="\n  ", file=sys.stderr)
        sys.exit(1)


CLUSTER_SCOPED = {
    "ClusterRole", "ClusterRoleBinding", "FlowSchema", "PriorityLevelConfiguration",
    "CustomResourceDefinition", "Namespace", "PriorityClass", "StorageClass", "PersistentVolume",
    "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "APIService",
}


def disjoint(rendered):
    problems = []
    owners = {}
    for path in rendered:
        for o in objects(path):
            name = o["metadata"]["name"]
            if "namespace" not in o["metadata"] and o["kind"] not in CLUSTER_SCOPED:
                problems.append(f"{path}: {o['kind']}/{name} has no namespace")
            if o["kind"] == "CustomResourceDefinition":
                continue
            k = key(o)
            if k in owners:
                problems.append(f"{'/'.join(k)}: rendered by {owners[k]} and {path}")
            owners[k] = path
    if problems:
        print("releases side by side:", *problems, sep="\n  ", file=sys.stderr)
        sys.exit(1)
    scoped = sum(1 for k in owners if k[0] in CLUSTER_SCOPED)
    print(f"releases side by side: {len(rendered)} renders, {len(owners)} objects ({scoped} cluster-scoped, CRDs aside), none shared")


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "same" and len(sys.argv) >= 4:
        rest = sys.argv[3:]
        overrides = {}
        while "--args" in rest:
            i = rest.index("--args")
            flag, value = rest[i + 1].split(":", 1)[-1].split("=", 1)
            overrides[flag] = value
            del rest[i : i + 2]
        same(sys.argv[2], rest, overrides)
    elif mode == "controllers" and len(sys.argv) == 4:
        controllers(sys.argv[2], sys.argv[3].split())
    elif mode == "monitoring" and len(sys.argv) >= 4:
        monitoring(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
    elif mode == "plain" and len(sys.argv) == 3:
        plain(sys.argv[2])
    elif mode == "disjoint" and len(sys.argv) >= 4:
        disjoint(sys.argv[2:])
    else:
        sys.exit(__doc__)
