#!/usr/bin/env bash
# Scale measurements (examples/scale.rs): N Deployments and N Erus due at one slot on a local
# cluster named "scale" with enough kwok nodes, against the release build; in the same run the
# physical limit (N bare restart applies from a tight loop of the same client) and M CronJobs due
# at one minute. Prints a table (README "Scale").
#
#   hack/scale.sh N [--cronjobs M] [--concurrency C] [--controller-qps Q] [--keep]
#     M defaults to min(N, 1000); --keep leaves the cluster up afterwards.
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
qps=""
[ "$n" -le 1000 ] || qps=500
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --cronjobs) cronjobs=${2:?--cronjobs needs a number}; shift 2 ;;
    --keep) keep=1; shift ;;
    --controller-qps) qps=${2:?--controller-qps needs a number}; shift 2 ;;
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
kubectl wait --for=condition=Established --timeout=60s -f crds/ >/dev/null
echo "== measuring N=$n (CronJobs: $cronjobs, kwok nodes: $nodes, controller-manager QPS: ${qps:-20 (default)})"
"$CARGO_TARGET_DIR/release/examples/scale" "$n" --operator "$CARGO_TARGET_DIR/release/eru-operator" \
  --cronjobs "$cronjobs" "${extra[@]}"
