#!/usr/bin/env bash
# The HTTP API abused, as installed (examples/http_abuse.rs): the operator as its ServiceAccount
# (deploy/rbac.yaml, deploy/flowcontrol.yaml) with --http-auth kubernetes; N Deployments and N
# Erus due at two slots 3 minutes apart, the first quiet, the second while C clients send a new
# random bearer token with every request and C clients with a valid token (a reader of one
# namespace, deploy/examples/history-reader.yaml's grant) ask for 30-day pages of that namespace,
# which holds H every-second Erus journaled since a month ago. Prints the landed p99 of both slots
# and their ratio (goal ≤ 1.2x), the TokenReviews per second against the cap on reviews in
# flight, the operator's RSS and every answer by status (docs/performance.md). Beside
# hack/http-load.sh, which loads the API with valid, unauthenticated (--http-auth none) readers.
#
#   hack/http-abuse.sh N [--clients C] [--heavy H] [--profile P] [--cluster NAME] [--keep]
#     C defaults to 200, H to 300; P is the cargo profile of the operator (release; `profiling`
#     builds in minutes instead of a fat-LTO quarter hour); NAME the local cluster's (abuse);
#     --keep leaves the cluster up afterwards.
#
#   hack/http-abuse.sh --tenancy [--namespaces M] [--cluster NAME] [--keep]
#     what one authenticated identity may cost (hack/http-tenancy.py; the operator's debug build,
#     no Erus): an identity with no grant sends 100 concurrent /history without namespace=, first
#     on the cluster as it is, then with M (40) namespaces more, than its access-review budget
#     covers; printed: the answers by status, the SubjectAccessReviews the operator sent (its
#     metric) against the budget, a granted reader's answers meanwhile. Then 1,000 idle
#     connections to the API port, and /readyz latencies on the probe port (--probe-address).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eru/target}

# The --tenancy run: a cluster, deploy/'s RBAC, three identities (the operator's ServiceAccount, a
# reader of one namespace, one with no grant), the operator as a process, the measurements.
tenancy() {
  local cluster=abuse keep=0 extra=0 dir api=127.0.0.1:18443 probes=127.0.0.1:18081 pid i
  while [ $# -gt 0 ]; do
    case "$1" in
      --keep) keep=1; shift ;;
      --cluster) cluster=${2:?--cluster needs a name}; shift 2 ;;
      --namespaces) extra=${2:?--namespaces needs a number}; shift 2 ;;
      *) echo "usage: hack/http-abuse.sh --tenancy [--namespaces M] [--cluster NAME] [--keep]" >&2; exit 2 ;;
    esac
  done
  [ "$extra" != 0 ] || extra=40
  dir=$(mktemp -d)
  # the binary where cargo put it (a wrapper may choose the target dir), copied: another build
  # into a shared target dir may replace it meanwhile
  cargo build --locked --bin eru-operator --message-format json |
    python3 -c 'import json, sys; print([m["executable"] for m in map(json.loads, sys.stdin) if m.get("executable")][-1])' \
    >"$dir/built"
  cp "$(cat "$dir/built")" "$dir/eru-operator"
  hack/cluster.sh up --name "$cluster"
  # shellcheck disable=SC2064 # expanded now: the values of this run
  trap "kill \$(cat '$dir/pid' 2>/dev/null) 2>/dev/null; rm -rf '$dir'; [ $keep = 1 ] || hack/cluster.sh down --name '$cluster'" EXIT
  eval "$(hack/cluster.sh env --name "$cluster")"
  kubectl apply -f crds/ >/dev/null
  kubectl apply -f deploy/namespace.yaml -f deploy/rbac.yaml -f deploy/flowcontrol.yaml >/dev/null
  kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Namespace
metadata: {name: tenancy-a}
---
apiVersion: v1
kind: Namespace
metadata: {name: tenancy-callers}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: reader, namespace: tenancy-callers}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: nobody, namespace: tenancy-callers}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader, namespace: tenancy-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: eru-history-reader}
subjects: [{kind: ServiceAccount, name: reader, namespace: tenancy-callers}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: tenancy-reader-metrics}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: eru-metrics-reader}
subjects: [{kind: ServiceAccount, name: reader, namespace: tenancy-callers}]
YAML
  kubectl config view --raw --minify --flatten >"$dir/operator.kubeconfig"
  KUBECONFIG=$dir/operator.kubeconfig kubectl config set-credentials eru-operator \
    --token="$(kubectl create token eru-operator -n eru-system --duration 2h)" >/dev/null
  KUBECONFIG=$dir/operator.kubeconfig kubectl config set-context --current --user=eru-operator >/dev/null
  "$dir/eru-operator" run --kubeconfig "$dir/operator.kubeconfig" --database "$dir/eru.db" \
    --http-auth kubernetes --http-address "$api" --probe-address "$probes" --log-level warn \
    >"$dir/operator.log" 2>&1 &
  pid=$!
  echo "$pid" >"$dir/pid"
  for i in $(seq 120); do
    curl -sf "http://$probes/readyz" >/dev/null && break
    kill -0 "$pid" || { cat "$dir/operator.log" >&2; exit 1; }
    [ "$i" != 120 ] || { echo "the operator is not ready after 60 s" >&2; exit 1; }
    sleep 0.5
  done
  local nobody reader
  nobody=$(kubectl create token nobody -n tenancy-callers --duration 1h)
  reader=$(kubectl create token reader -n tenancy-callers --duration 1h)
  # a kept cluster's namespaces of an earlier run are not this run's first figure
  kubectl delete namespace -l eru-tenancy=extra --wait=true >/dev/null
  sleep 21
  echo "== $(kubectl get namespaces -o name | wc -l) namespaces"
  python3 hack/http-tenancy.py sweep "https://$api" "$nobody" "$reader" tenancy-a
  for i in $(seq "$extra"); do
    printf 'apiVersion: v1\nkind: Namespace\nmetadata: {name: tenancy-extra-%s, labels: {eru-tenancy: extra}}\n---\n' "$i"
  done |
    kubectl apply -f - >/dev/null
  # the namespace list and the allowances are kept 20 s
  sleep 21
  echo "== $(kubectl get namespaces -o name | wc -l) namespaces"
  python3 hack/http-tenancy.py sweep "https://$api" "$nobody" "$reader" tenancy-a
  echo "== an idle-connection flood"
  python3 hack/http-tenancy.py flood "https://$api" "http://$probes"
}
if [ "${1:-}" = --tenancy ]; then
  shift
  tenancy "$@"
  exit 0
fi
usage="usage: hack/http-abuse.sh N [--clients C] [--heavy H] [--profile P] [--cluster NAME] [--keep]"
n=${1:?$usage}
shift
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "N must be a positive number, got '$n'" >&2; exit 2; }
keep=0
profile=release
cluster=abuse
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) keep=1; shift ;;
    --profile) profile=${2:?--profile needs a cargo profile}; shift 2 ;;
    --cluster) cluster=${2:?--cluster needs a name}; shift 2 ;;
    --clients|--heavy) extra+=("$1" "${2:?$1 needs a number}"); shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
hack/deps.sh
echo "== build ($profile profile)"
cargo build --profile "$profile" --locked --bin eru-operator --example http_abuse
# the Deployment controller at 500 QPS: each slot's 1,000 rollouts end well before the next slot
hack/cluster.sh up --name "$cluster" --controller-qps 500
[ "$keep" = 1 ] || trap 'hack/cluster.sh down --name "$cluster"' EXIT
eval "$(hack/cluster.sh env --name "$cluster")"
kubectl apply -f crds/ >/dev/null
kubectl wait --for=condition=Established --timeout=60s -f crds/eru.yaml >/dev/null
# as installed: the operator's RBAC and its priority levels (the access reviews' below the
# restart patches')
kubectl apply -f deploy/namespace.yaml -f deploy/rbac.yaml -f deploy/flowcontrol.yaml >/dev/null

# the reader: a ServiceAccount granted erus/history in the heavy namespace (and /metrics, which
# the program reads the review counters from)
heavy=abuse-heavy
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Namespace
metadata: {name: $heavy}
---
apiVersion: v1
kind: Namespace
metadata: {name: abuse-readers}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: reader, namespace: abuse-readers}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader, namespace: $heavy}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: eru-history-reader}
subjects: [{kind: ServiceAccount, name: reader, namespace: abuse-readers}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: abuse-reader-metrics}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: eru-metrics-reader}
subjects: [{kind: ServiceAccount, name: reader, namespace: abuse-readers}]
YAML
identities=$(mktemp -d)
trap 'rm -rf "$identities"; [ "$keep" = 1 ] || hack/cluster.sh down --name "$cluster"' EXIT
token=$(kubectl create token eru-operator -n eru-system --duration 6h)
kubectl config view --raw --minify --flatten >"$identities/operator.kubeconfig"
KUBECONFIG=$identities/operator.kubeconfig kubectl config set-credentials eru-operator --token="$token" >/dev/null
KUBECONFIG=$identities/operator.kubeconfig kubectl config set-context --current --user=eru-operator >/dev/null
reader=$(kubectl create token reader -n abuse-readers --duration 6h)
echo "== measuring N=$n"
"$CARGO_TARGET_DIR/$profile/examples/http_abuse" "$n" --operator "$CARGO_TARGET_DIR/$profile/eru-operator" \
  --operator-kubeconfig "$identities/operator.kubeconfig" --reader-token "$reader" --heavy-namespace "$heavy" \
  "${extra[@]}"
