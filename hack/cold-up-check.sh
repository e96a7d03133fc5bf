#!/usr/bin/env bash
# The cold path of `hack/cluster.sh up`, checked on every CI run in seconds: an empty cache and an
# empty state folder, the compile step satisfied from binaries built before (ERU_CLUSTER_PREBUILT),
# and everything else exactly as on a fresh machine: the build lock, the temporary folder and its
# trap, moving the cache into place, the first start, a Pod becoming Ready, and `down` leaving no
# process behind. (The first `up` of every fresh machine once died right after the build.)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
prebuilt=$(hack/cluster.sh cache-dir)
hack/cluster.sh build # a no-op once the real cache exists
scratch=$(mktemp -d)
export ERU_CACHE="$scratch/cache" ERU_CLUSTER_STATE="$scratch/state" ERU_CLUSTER_PREBUILT="$prebuilt"
cleanup() {
  hack/cluster.sh down --name cold >/dev/null 2>&1 || true
  rm -rf "$scratch"
}
trap cleanup EXIT

say() { printf '[cold-up-check] %s\n' "$*" >&2; }
fail() { say "FAILED: $*"; exit 1; }

say "cold up with an empty cache ($ERU_CACHE) and state ($ERU_CLUSTER_STATE)"
hack/cluster.sh up --name cold
[ -x "$(hack/cluster.sh cache-dir)/kube-apiserver" ] || fail "the cache was not moved into place"
ls "$ERU_CACHE"/*.tmp.* >/dev/null 2>&1 && fail "a temporary build folder was left in $ERU_CACHE"
eval "$(hack/cluster.sh env --name cold)"
kubectl run cold-check --image=busybox --restart=Never --command -- sleep 3600 >/dev/null
kubectl wait --for=condition=Ready pod/cold-check --timeout=60s >/dev/null || fail "a Pod did not become Ready"
say "a Pod is Ready; a second up is a no-op"
hack/cluster.sh up --name cold
hack/cluster.sh down --name cold
if pgrep -f "$scratch" >/dev/null; then
  pgrep -af "$scratch" >&2
  fail "processes of the cold cluster outlived down"
fi
say "passed"
