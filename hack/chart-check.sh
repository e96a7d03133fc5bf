#!/usr/bin/env bash
# Checks the Helm chart charts/eru-operator against everything else (hack/test.sh runs it):
#
#   hack/chart-check.sh sync     copy crds/, the alert rules and the dashboard into the chart
#   hack/chart-check.sh static   no cluster: the chart's copies are current; helm lint --strict
#                                (defaults and every ci/*-values.yaml); the defaults and the HA
#                                values render exactly deploy/operator.yaml and deploy/ha/operator.yaml
#                                (+ deploy/rbac.yaml); the monitoring objects carry the alert rules
#                                (promtool checks them) and the dashboard; the schema refuses typos
#                                and the operator refuses what it cannot run
#   hack/chart-check.sh cluster  against $KUBECONFIG (hack/test.sh's cluster, before the e2e tests
#                                install anything): both value sets pass kubectl apply
#                                --dry-run=server; `helm install` creates the CRDs, RBAC and a
#                                Deployment that becomes available; `helm uninstall` and the CRDs'
#                                deletion leave the cluster as it was
#
# helm comes from hack/helm.sh (built once from the Go module proxy, cached).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
chart=charts/eru-operator
say() { printf '[chart] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# The files the chart carries as copies (Helm reads only files inside the chart): source → copy.
copies=(
  "deploy/alerts/eru-operator.rules.yaml:$chart/files/eru-operator.rules.yaml"
  "dashboards/eru-operator.json:$chart/dashboards/eru-operator.json"
)
for crd in crds/*.yaml; do copies+=("$crd:$chart/crds/$(basename "$crd")"); done

sync() {
  local pair
  for pair in "${copies[@]}"; do cp "${pair%%:*}" "${pair##*:}"; done
  say "copied ${#copies[@]} files into $chart"
}

static() {
  local pair copy helm tmp
  for pair in "${copies[@]}"; do
    cmp -s "${pair%%:*}" "${pair##*:}" || die "${pair##*:} differs from ${pair%%:*}: run hack/chart-check.sh sync"
  done
  for copy in "$chart"/crds/*.yaml; do
    [ -e "crds/$(basename "$copy")" ] || die "$copy has no source in crds/: remove it"
  done
  helm=$(hack/helm.sh)
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN

  "$helm" lint --strict "$chart" >/dev/null
  for values in "$chart"/ci/*-values.yaml; do
    "$helm" lint --strict "$chart" -f "$values" >/dev/null
  done
  say "helm lint --strict: the defaults and $(printf '%s ' "$chart"/ci/*-values.yaml)pass"

  render() { "$helm" template eru-operator "$chart" --namespace eru-system "$@"; }
  render >"$tmp/default.yaml"
  python3 hack/chart-check.py same "$tmp/default.yaml" deploy/operator.yaml deploy/rbac.yaml deploy/flowcontrol.yaml
  render -f "$chart/ci/ha-values.yaml" >"$tmp/ha.yaml"
  python3 hack/chart-check.py same "$tmp/ha.yaml" deploy/ha/operator.yaml deploy/rbac.yaml deploy/flowcontrol.yaml

  render -f "$chart/ci/monitoring-values.yaml" >"$tmp/monitoring.yaml"
  python3 hack/chart-check.py monitoring "$tmp/monitoring.yaml" \
    https://example.com/eru-operator/docs/runbooks.md "$tmp/rules.yaml"
  promtool check rules "$tmp/rules.yaml" >/dev/null
  say "promtool check rules: the chart's PrometheusRule passes"

  # What must not install: a typo (the schema), and what the operator cannot run (the templates).
  refuse() { # refuse WHY ARGS...: rendering with ARGS must fail
    local why=$1
    shift
    if render "$@" >/dev/null 2>"$tmp/err"; then die "the chart accepts $why ($*)"; fi
  }
  refuse "an unknown value" --set replica=2
  refuse "a misspelt nested value" --set fleet.maxConcurentRestarts=5
  refuse "a wrong type" --set-string replicas=two
  refuse "a log format the binary lacks" --set log.format=yaml
  refuse "two replicas on one SQLite file" --set replicas=2
  refuse "two replicas without leader election" --set replicas=2 --set leaderElection.enabled=false \
    --set journal.postgres.existingSecret=eru-journal
  refuse "an API auth mode the binary lacks" --set http.auth=basic
  refuse "a priority level without seats" --set apiPriority.nominalConcurrencyShares=0
  refuse "a half-specified blackout" --set 'fleet.blackouts[0].name=x' --set 'fleet.blackouts[0].start=2026-01-01T00:00:00Z'
  say "the schema and templates refuse 9 bad value sets"
}

cluster() {
  local helm tmp ns=eru-chart release=eru-chart-e2e
  [ -n "${KUBECONFIG:-}" ] || die "KUBECONFIG is not set"
  helm=$(hack/helm.sh)
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  kubectl get crd erus.mtsre.meitu.com >/dev/null 2>&1 &&
    die "the CRDs are already installed: run this on a cluster without them (it checks that helm creates them)"

  kubectl create namespace "$ns" >/dev/null
  for values in default ha; do
    "$helm" template eru-operator "$chart" --namespace "$ns" -f "$chart/ci/$values-values.yaml" >"$tmp/$values.yaml"
    kubectl apply --dry-run=server -n "$ns" -f "$tmp/$values.yaml" >"$tmp/$values.out"
    say "kubectl apply --dry-run=server, $values values: $(wc -l <"$tmp/$values.out") objects accepted"
  done

  # The install as a user runs it. No PersistentVolume provisioner here: the journal on an emptyDir.
  "$helm" install "$release" "$chart" --namespace "$ns" --set journal.persistence.enabled=false \
    --wait --timeout 120s >/dev/null
  local fullname=$release-eru-operator
  for crd in erus.mtsre.meitu.com podsets.k8stest.justin0u0.com memcacheds.cache.example.com; do
    kubectl wait --for=condition=Established --timeout=60s "crd/$crd" >/dev/null
  done
  kubectl get -n "$ns" "serviceaccount/$fullname" "service/$fullname" "configmap/$release-eru-blackouts" \
    "rolebinding/$fullname-leader-election" >/dev/null
  kubectl get "clusterrole/$fullname" "clusterrolebinding/$fullname" "clusterrole/$fullname-leader-election" >/dev/null
  kubectl rollout status -n "$ns" "deployment/$fullname" --timeout=60s >/dev/null
  # The RBAC it created is what the operator needs: its ServiceAccount may restart a Deployment.
  [ "$(kubectl auth can-i patch deployments --as "system:serviceaccount:$ns:$fullname" -A)" = yes ] ||
    die "the chart's ServiceAccount cannot patch Deployments"
  say "helm install: CRDs Established, RBAC, ServiceAccount, Service, ConfigMap; deployment/$fullname available"

  "$helm" uninstall "$release" --namespace "$ns" --wait >/dev/null
  kubectl delete namespace "$ns" --wait=false >/dev/null
  # Helm never deletes CRDs; the e2e tests after this install their own.
  kubectl delete -f crds/ --wait=true >/dev/null
  say "helm uninstall; CRDs deleted"
}

case "${1:-}" in
  sync) sync ;;
  static) static ;;
  cluster) cluster ;;
  *) die "usage: hack/chart-check.sh sync|static|cluster (see its header)" ;;
esac
