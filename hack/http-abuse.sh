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
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eru/target}
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
