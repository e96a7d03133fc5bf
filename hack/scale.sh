#!/usr/bin/env bash
# Scale measurements (examples/scale.rs): N Deployments and N Erus due at one slot on a local
# cluster named "scale" with enough kwok nodes, against the release build; in the same run the
# physical limit (N bare restart applies from a tight loop of the cluster's admin, whom API
# Priority and Fairness exempts) and M CronJobs due at one minute. Prints a table (README "Scale").
#
# The operator runs as its ServiceAccount (deploy/rbac.yaml), as installed. The Erus are due at two
# slots: the first without deploy/flowcontrol.yaml, the second with it; a probe client with an
# identity of its own (ServiceAccount scale-probe/probe, a Role on ConfigMaps in its namespace)
# sends GET, LIST and small PATCH requests at a fixed rate all along, and the table gives its
# latency idle, in each burst and after it (docs/performance.md, "A fleet restart and the other
# clients").
#
#   hack/scale.sh N [--cronjobs M] [--concurrency C] [--controller-qps Q] [--probe-rate R]
#                   [--no-flowcontrol] [--paces P,...] [--keep]
#     M defaults to min(N, 1000); R to 20 requests/s; C (64): the script's own creations and
#     tight-loop applies at once (the operator's passes at once: ERU_CONCURRENCY in the
#     environment); --no-flowcontrol: one slot, no probe;
#     --paces: a slot per restart pace (unlimited, fixed:R, adaptive, adaptive:R), the operator
#     restarted with it before the slot, with the probe and without the FlowSchema (the
#     frontier of docs/performance.md, "The restart pace"); --keep leaves the cluster up afterwards,
#     its namespaces and objects too (the journal, the log and the namespace: the last table
#     rows; delete the namespace before the next run on that cluster, or it measures beside them).
#     Q is kube-controller-manager's client QPS: its default (20) up to N = 1000, like the
#     clusters people run; 500 above, or the Deployment controller alone needs N/10 s to observe
#     N new Deployments and again N/7 s to roll them out (the Eru's figures do not depend on it,
#     the CronJob controller's do: the table says which was used).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eru/target}
n=${1:?usage: hack/scale.sh N [--cronjobs M] [--concurrency C] [--keep]}
shift
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "N must be a positive number, got '$n'" >&2; exit 2; }
cronjobs=$(( n < 1000 ? n : 1000 ))
keep=0
flowcontrol=1
paces=""
qps=""
[ "$n" -le 1000 ] || qps=500
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --cronjobs) cronjobs=${2:?--cronjobs needs a number}; shift 2 ;;
    --keep) keep=1; extra+=(--keep); shift ;;
    --no-flowcontrol) flowcontrol=0; shift ;;
    --controller-qps) qps=${2:?--controller-qps needs a number}; shift 2 ;;
    --paces) paces=${2:?--paces needs a list}; shift 2 ;;
    *) extra+=("$1"); shift ;;
  esac
done
# a kwok node holds 110 Pods; the CronJobs' Jobs each start one (the Erus' targets have none)
nodes=$(( cronjobs / 100 + 1 ))
hack/deps.sh
echo "== release build"
cargo build --release --locked --bin eru-operator --example scale
hack/cluster.sh up --name scale --nodes "$nodes" ${qps:+--controller-qps "$qps"}
[ "$keep" = 1 ] || trap 'hack/cluster.sh down --name scale' EXIT
eval "$(hack/cluster.sh env --name scale)"
kubectl apply -f crds/ >/dev/null
kubectl wait --for=condition=Established --timeout=60s -f crds/eru.yaml >/dev/null

# the two identities: the operator's ServiceAccount as installed, and the probe's
kubectl apply -f deploy/namespace.yaml -f deploy/rbac.yaml >/dev/null
kubectl apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Namespace
metadata: {name: scale-probe}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: probe, namespace: scale-probe}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: probe, namespace: scale-probe}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get, list, create, patch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: probe, namespace: scale-probe}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: probe}
subjects: [{kind: ServiceAccount, name: probe, namespace: scale-probe}]
EOF
identities=$(mktemp -d)
identity() { # identity NAMESPACE SERVICEACCOUNT: a kubeconfig with its token, on stdout its path
  local file="$identities/$2.kubeconfig" token
  token=$(kubectl create token "$2" -n "$1" --duration 6h)
  kubectl config view --raw --minify --flatten >"$file"
  KUBECONFIG=$file kubectl config set-credentials "$2" --token="$token" >/dev/null
  KUBECONFIG=$file kubectl config set-context --current --user="$2" --namespace="$1" >/dev/null
  echo "$file"
}
extra+=(--operator-kubeconfig "$(identity eru-system eru-operator)")
if [ -n "$paces" ]; then
  extra+=(--paces "$paces" --probe-kubeconfig "$(identity scale-probe probe)")
elif [ "$flowcontrol" = 1 ]; then
  extra+=(--flowcontrol deploy/flowcontrol.yaml --probe-kubeconfig "$(identity scale-probe probe)")
fi
echo "== measuring N=$n (CronJobs: $cronjobs, kwok nodes: $nodes, controller-manager QPS: ${qps:-20 (default)})"
"$CARGO_TARGET_DIR/release/examples/scale" "$n" --operator "$CARGO_TARGET_DIR/release/eru-operator" \
  --cronjobs "$cronjobs" "${extra[@]}"
rm -rf "$identities"
