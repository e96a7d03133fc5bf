#!/usr/bin/env bash
# Checks the Helm chart charts/eru-operator against everything else (hack/test.sh runs it):
#
#   hack/chart-check.sh sync     copy crds/, the alert rules and the dashboard into the chart
#   hack/chart-check.sh static   no cluster: the chart's copies are current; appVersion is
#                                Cargo.toml's version; helm lint --strict (defaults and every
#                                ci/*-values.yaml); the defaults and the HA
#                                values render exactly deploy/operator.yaml and deploy/ha/operator.yaml
#                                (+ deploy/rbac.yaml, deploy/flowcontrol.yaml), and with the optional
#                                controllers on also deploy/podset/ and deploy/memcached/ and their
#                                CRDs; the monitoring objects carry the alert rules
#                                (promtool checks them) and the dashboard; three releases, everything
#                                on, share no object; the schema refuses typos and the operator
#                                refuses what it cannot run; the chart's unit tests
#                                (charts/eru-operator/tests/*_test.yaml, helm-unittest) pass
#   hack/chart-check.sh cluster  against $KUBECONFIG (hack/test.sh's cluster, before the e2e tests
#                                install anything): the default, HA and extras value sets pass
#                                kubectl apply --dry-run=server; `helm install` (watchNamespace set) creates
#                                the CRDs, RBAC and a Deployment that becomes available, and its
#                                ServiceAccount may patch workloads in the watched namespace only
#                                (kubectl auth can-i, --list in another namespace); the previous chart version
#                                (hack/testdata/charts/) installed as a second release, its CRD applied as
#                                NOTES.txt says and `helm upgrade`d to this one, runs beside the
#                                first (no shared object; uninstalling one leaves the other whole);
#                                `helm uninstall` and the CRDs' deletion leave the cluster as it was
#
# helm comes from hack/helm.sh, helm-unittest from hack/helm-unittest.sh (each built once from the
# Go module proxy, cached).
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
# the Eru's CRD into crds/ (Helm installs it always); the optional controllers' into files/crds/
# (templates/crds.yaml renders each only with its controller on)
copies+=("crds/eru.yaml:$chart/crds/eru.yaml")
for crd in crds/*/*.yaml; do copies+=("$crd:$chart/files/crds/$(basename "$crd")"); done

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
  for copy in "$chart"/files/crds/*.yaml; do
    [ -e "crds/$(basename "$copy" .yaml)/$(basename "$copy")" ] || die "$copy has no source in crds/: remove it"
  done
  # the image's default tag is appVersion: the operator's version
  local app_version cargo_version
  app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$chart/Chart.yaml")
  cargo_version=$(sed -n '0,/^version = /s/^version = "\(.*\)"$/\1/p' Cargo.toml)
  [ "$app_version" = "$cargo_version" ] || die "$chart/Chart.yaml's appVersion $app_version is not Cargo.toml's version $cargo_version"
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

  python3 hack/chart-check.py plain "$tmp/default.yaml"
  python3 hack/chart-check.py plain "$tmp/ha.yaml"
  # the optional controllers: off by default (no CRD, no role that creates Pods); each on renders
  # exactly its deploy/ folder beside the Eru install, and its CRD
  python3 hack/chart-check.py controllers "$tmp/default.yaml" ""
  render --set controllers.podset.enabled=true --set controllers.memcached.enabled=true >"$tmp/all.yaml"
  python3 hack/chart-check.py same "$tmp/all.yaml" deploy/operator.yaml deploy/rbac.yaml deploy/flowcontrol.yaml \
    deploy/podset/rbac.yaml deploy/memcached/rbac.yaml --args 'eru-operator:--controllers=eru,podset,memcached'
  python3 hack/chart-check.py controllers "$tmp/all.yaml" "podset memcached"

  python3 hack/prometheusrule.py --check >&2
  render -f "$chart/ci/monitoring-values.yaml" >"$tmp/monitoring.yaml"
  python3 hack/chart-check.py monitoring "$tmp/monitoring.yaml" "$chart/ci/monitoring-values.yaml" "$tmp/rules.yaml"
  promtool check rules "$tmp/rules.yaml" >/dev/null
  say "promtool check rules: the chart's PrometheusRule passes"
  # the other ways to give the ServiceMonitor a CA, and skipping verification only when asked
  render --set serviceMonitor.enabled=true --set serviceMonitor.tls.caSecret.name=trust \
    --show-only templates/servicemonitor.yaml | grep -q 'name: trust' || die "serviceMonitor.tls.caSecret is not the ServiceMonitor's CA"
  render --set serviceMonitor.enabled=true --set http.tls.secretName=tls --set http.tls.caKey=ca.pem \
    --show-only templates/servicemonitor.yaml | grep -q 'key: ca.pem' || die "http.tls.caKey is not the ServiceMonitor's CA"
  render --set serviceMonitor.enabled=true --set serviceMonitor.tls.insecureSkipVerify=true \
    --show-only templates/servicemonitor.yaml | grep -q 'insecureSkipVerify: true' || die "serviceMonitor.tls.insecureSkipVerify is not rendered"

  # Releases side by side (each in its own namespace, everything on): no shared object, cluster-scoped
  # or in the dashboard's namespace; eru-operator keeps deploy/'s names, the others prefix theirs.
  local release everything=(-f "$chart/ci/monitoring-values.yaml" --set controllers.podset.enabled=true
    --set controllers.memcached.enabled=true --set replicas=2 --set journal.postgres.existingSecret=eru-journal)
  for release in eru-operator:eru-system prod:team-a eru:team-b; do
    "$helm" template "${release%%:*}" "$chart" --namespace "${release##*:}" "${everything[@]}" >"$tmp/release-${release%%:*}.yaml"
  done
  python3 hack/chart-check.py disjoint "$tmp"/release-*.yaml >&2

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
  refuse "a ServiceMonitor that cannot verify the self-signed certificate" --set serviceMonitor.enabled=true
  refuse "a Certificate without the Secret it writes" --set http.tls.certManager.enabled=true \
    --set http.tls.certManager.issuerRef.name=ca
  refuse "a job that is not a plain label value" --set 'serviceMonitor.job=a"b'
  refuse "a token audience with a comma" --set 'http.tokenAudiences[0]=a,b'
  refuse "an access-review level without seats" --set apiPriority.reviewsConcurrencyShares=0
  refuse "a controller the binary lacks" --set controllers.replicaset.enabled=true
  refuse "a probe pointed elsewhere" --set livenessProbe.httpGet.path=/
  refuse "a digest that is not algorithm:hex" --set image.digest=latest
  say "the schema and templates refuse 17 bad value sets"

  # The chart's unit tests (helm-unittest; charts/eru-operator/tests/*_test.yaml).
  local unittest start=$SECONDS
  unittest=$(hack/helm-unittest.sh)
  if ! "$unittest" --strict --color=false "$chart" >"$tmp/unittest.out" 2>&1; then
    cat "$tmp/unittest.out" >&2
    die "helm-unittest: the chart's unit tests fail"
  fi
  say "helm-unittest $(grep -E '^(Test Suites|Tests):' "$tmp/unittest.out" | tr -s ' ' | paste -sd ' ') in $((SECONDS - start)) s"
}

# The previous chart version, as released, unpacked into DIR/charts/: the newest package in
# hack/testdata/charts/ of another version than Chart.yaml's (`helm package` of each release is
# kept there, so the check needs no git history: CI may clone shallow).
previous_chart() {
  local dir=$1 current package version
  current=$(sed -n 's/^version: *//p' "$chart/Chart.yaml")
  package=$(find hack/testdata/charts -name 'eru-operator-*.tgz' ! -name "eru-operator-$current.tgz" | sort -V | tail -n 1)
  [ -n "$package" ] || die "no chart package of a version before $current in hack/testdata/charts/ (helm package the released chart there)"
  mkdir -p "$dir/charts"
  tar -xzf "$package" -C "$dir/charts"
  version=$(sed -n 's/^version: *//p' "$dir/$chart/Chart.yaml")
  [ "$version" != "$current" ] || die "$package is the current version $current"
  say "the previous chart version: $version ($package)"
}

# The cluster-scoped objects of release $1, as kind/name lines.
cluster_objects() {
  kubectl get clusterroles,clusterrolebindings,flowschemas,prioritylevelconfigurations \
    -l "app.kubernetes.io/instance=$1" -o name | sort
}

cluster() {
  local helm tmp ns=eru-chart release=eru-chart-e2e step
  local old_ns=eru-chart-old old=eru-chart-old
  [ -n "${KUBECONFIG:-}" ] || die "KUBECONFIG is not set"
  helm=$(hack/helm.sh)
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  kubectl get crd erus.mtsre.meitu.com >/dev/null 2>&1 &&
    die "the CRDs are already installed: run this on a cluster without them (it checks that helm creates them)"
  previous_chart "$tmp/previous"

  step=$SECONDS
  kubectl create namespace "$ns" >/dev/null
  for values in default ha extras; do
    "$helm" template eru-operator "$chart" --namespace "$ns" -f "$chart/ci/$values-values.yaml" >"$tmp/$values.yaml"
    kubectl apply --dry-run=server -n "$ns" -f "$tmp/$values.yaml" >"$tmp/$values.out"
    say "kubectl apply --dry-run=server, $values values: $(wc -l <"$tmp/$values.out") objects accepted"
  done
  say "dry runs: $((SECONDS - step)) s"

  # The install as a user runs it. No PersistentVolume provisioner here: the journal on an emptyDir.
  # Each release watches its own namespace: two operators watching the same Erus would both act.
  step=$SECONDS
  "$helm" install "$release" "$chart" --namespace "$ns" --set journal.persistence.enabled=false \
    --set watchNamespace="$ns" --wait --timeout 120s >/dev/null
  local fullname=$release-eru-operator
  kubectl wait --for=condition=Established --timeout=60s crd/erus.mtsre.meitu.com >/dev/null
  # the default install is the Eru controller's: no other CRD
  for crd in podsets.k8stest.justin0u0.com memcacheds.cache.example.com; do
    if kubectl get "crd/$crd" >/dev/null 2>&1; then die "the default install created crd/$crd"; fi
  done
  kubectl get -n "$ns" "serviceaccount/$fullname" "service/$fullname" "configmap/$release-eru-blackouts" \
    "rolebinding/$fullname-leader-election" >/dev/null
  kubectl get "clusterrole/$fullname" "clusterrolebinding/$fullname" "clusterrole/$fullname-leader-election" \
    "clusterrole/$release-eru-view" "clusterrole/$release-eru-history-reader" >/dev/null
  kubectl rollout status -n "$ns" "deployment/$fullname" --timeout=60s >/dev/null
  # The RBAC it created is what the operator needs: its ServiceAccount may restart a Deployment,
  # and with watchNamespace only in that namespace (a Role there; cluster-wide only the HTTP API's
  # reviews, the namespace list and the CRDs' read).
  local sa="system:serviceaccount:$ns:$fullname" kind
  kubectl get -n "$ns" "role/$fullname" "rolebinding/$fullname" >/dev/null
  kubectl create namespace eru-chart-other >/dev/null
  for kind in deployments statefulsets daemonsets; do
    [ "$(kubectl auth can-i patch "$kind" --as "$sa" -n "$ns")" = yes ] ||
      die "the chart's ServiceAccount cannot patch $kind in its watched namespace $ns"
    [ "$(kubectl auth can-i patch "$kind" --as "$sa" -A 2>/dev/null || true)" = no ] ||
      die "with watchNamespace the chart's ServiceAccount may patch $kind cluster-wide"
    [ "$(kubectl auth can-i patch "$kind" --as "$sa" -n eru-chart-other 2>/dev/null || true)" = no ] ||
      die "with watchNamespace the chart's ServiceAccount may patch $kind in another namespace"
  done
  kubectl auth can-i --list --as "$sa" -n eru-chart-other >"$tmp/other-namespace.txt"
  if grep -Eq '^(deployments|statefulsets|daemonsets)\.apps|^erus\.|^pods |^events' "$tmp/other-namespace.txt"; then
    cat "$tmp/other-namespace.txt" >&2
    die "with watchNamespace the chart's ServiceAccount holds namespaced grants outside $ns"
  fi
  kubectl delete namespace eru-chart-other --wait=false >/dev/null
  say "watchNamespace=$ns: patch on deployments/statefulsets/daemonsets in $ns only; kubectl auth can-i --list in another namespace:"
  sed 's/^/[chart]   /' "$tmp/other-namespace.txt" >&2
  # and nothing that runs a Pod as someone else (kubectl auth can-i exits 1 on "no")
  local verb
  for verb in "create pods" "delete deployments" "create deployments" "create pods -n kube-system"; do
    # shellcheck disable=SC2086 # the verb and resource are two words
    [ "$(kubectl auth can-i $verb --as "$sa" -A 2>/dev/null || true)" = no ] ||
      die "the chart's ServiceAccount may $verb"
  done
  say "helm install: the Eru CRD Established (no other), RBAC (no pod create, no deployment create/delete), ServiceAccount, Service, ConfigMap; deployment/$fullname available ($((SECONDS - step)) s)"

  # A second release, from the previous chart version, upgraded to this one as the docs say: the
  # Eru CRD applied first (Helm does not upgrade crds/; NOTES.txt says so), then `helm upgrade
  # --reset-then-reuse-values` (the new defaults under the install's --set values).
  # Its fixed cluster-scoped names (eru-view, …) become the release's, beside the first's.
  step=$SECONDS
  kubectl create namespace "$old_ns" >/dev/null
  "$helm" install "$old" "$tmp/previous/$chart" --namespace "$old_ns" --set journal.persistence.enabled=false \
    --set watchNamespace="$old_ns" >/dev/null
  kubectl get clusterrole/eru-view clusterrole/eru-metrics-reader >/dev/null
  "$helm" show crds "$chart" | kubectl apply --server-side --force-conflicts -f - >/dev/null
  "$helm" upgrade "$old" "$chart" --namespace "$old_ns" --reset-then-reuse-values \
    --wait --timeout 120s >"$tmp/upgrade.out"
  grep -q "Helm did not upgrade the Eru CRD" "$tmp/upgrade.out" || die "helm upgrade's notes do not say how to upgrade the CRD"
  kubectl rollout status -n "$old_ns" "deployment/$old-eru-operator" --timeout=60s >/dev/null
  local role
  for role in metrics-reader history-reader view edit; do
    if kubectl get "clusterrole/eru-$role" >/dev/null 2>&1; then die "helm upgrade left the previous version's clusterrole/eru-$role"; fi
    kubectl get "clusterrole/$old-eru-$role" >/dev/null
  done
  [ "$(kubectl get -n "$old_ns" "service/$old-eru-operator" -o jsonpath='{.spec.ports[0].name}')" = https ] ||
    die "the upgraded Service's port is not named https"
  say "helm upgrade from the previous chart version (CRD applied server-side first): deployment/$old-eru-operator available, clusterrole/eru-view … now $old-eru-view …, port https ($((SECONDS - step)) s)"

  # Side by side: no cluster-scoped object in common; uninstalling one leaves the other's whole.
  step=$SECONDS
  cluster_objects "$release" >"$tmp/first"
  cluster_objects "$old" >"$tmp/second"
  if [ ! -s "$tmp/first" ] || [ ! -s "$tmp/second" ]; then die "a release has no cluster-scoped object labelled as its own"; fi
  [ -z "$(comm -12 "$tmp/first" "$tmp/second")" ] || die "the releases share $(comm -12 "$tmp/first" "$tmp/second" | paste -sd ' ')"
  "$helm" uninstall "$old" --namespace "$old_ns" --wait >/dev/null
  cluster_objects "$release" | cmp -s - "$tmp/first" || die "uninstalling $old took objects of $release"
  [ "$(kubectl auth can-i patch deployments --as "$sa" -n "$ns")" = yes ] ||
    die "uninstalling $old took $release's grants"
  say "side by side: $(wc -l <"$tmp/first") and $(wc -l <"$tmp/second") cluster-scoped objects, none shared; helm uninstall $old left $release's ($((SECONDS - step)) s)"

  "$helm" uninstall "$release" --namespace "$ns" --wait >/dev/null
  kubectl delete namespace "$ns" "$old_ns" --wait=false >/dev/null
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
