#!/usr/bin/env bash
# The HTTP API under load (examples/http_load.rs): N Deployments and N Erus due at the same slots
# every 3 minutes on a local cluster named "load"; the slots alternate quiet and loaded (C clients
# looping on heavy /history, /slots, /missed and /audit queries). Prints each slot's fire lateness
# side by side, the loaded/quiet ratio of the landed p99, the clients' answers by status (README,
# "The HTTP API under load"; docs/performance.md).
#
#   hack/http-load.sh N [--clients C] [--rounds R] [--profile P] [--keep]
#     C defaults to 200, R (pairs of quiet and loaded slots) to 2; P is the cargo profile of the
#     operator (release; `profiling` builds in minutes instead of a fat-LTO quarter hour);
#     --keep leaves the cluster up afterwards.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eru/target}
n=${1:?usage: hack/http-load.sh N [--clients C] [--rounds R] [--profile P] [--keep]}
shift
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "N must be a positive number, got '$n'" >&2; exit 2; }
keep=0
profile=release
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) keep=1; shift ;;
    --profile) profile=${2:?--profile needs a cargo profile}; shift 2 ;;
    *) extra+=("$1"); shift ;;
  esac
done
hack/deps.sh
echo "== build ($profile profile)"
cargo build --profile "$profile" --locked --bin eru-operator --example http_load
# the Deployment controller at 500 QPS: each slot's 1,000 rollouts end well before the next slot
hack/cluster.sh up --name load --controller-qps 500
[ "$keep" = 1 ] || trap 'hack/cluster.sh down --name load' EXIT
eval "$(hack/cluster.sh env --name load)"
kubectl apply -f crds/ >/dev/null
kubectl wait --for=condition=Established --timeout=60s -f crds/eru.yaml >/dev/null
echo "== measuring N=$n"
"$CARGO_TARGET_DIR/$profile/examples/http_load" "$n" --operator "$CARGO_TARGET_DIR/$profile/eru-operator" "${extra[@]}"
