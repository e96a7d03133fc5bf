#!/usr/bin/env bash
# The operator's memory with N Deployments (replicas 0) and N Erus cached (README "Scale" →
# Memory): on a local cluster named "mem" (kept up between runs: creating 10,000 of each takes a
# few minutes), the release build runs on namespace mem-N for S seconds with /metrics scraped
# every 5 s, as Prometheus would; prints its RSS when ready and at the end, and its anonymous part.
#
#   hack/memory.sh N [S]      S defaults to 90
#   hack/cluster.sh down --name mem    when done
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
n=${1:?usage: hack/memory.sh N [SECONDS]}
seconds=${2:-90}
ns="mem-$n"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eru/target}
cargo build --release --locked --bin eru-operator
bin="$CARGO_TARGET_DIR/release/eru-operator"

hack/cluster.sh status --name mem >/dev/null 2>&1 || hack/cluster.sh up --name mem --controller-qps 500
eval "$(hack/cluster.sh env --name mem)"
kubectl apply -f crds/ >/dev/null
kubectl wait --for condition=established --timeout=60s crd/erus.mtsre.meitu.com >/dev/null
# how many Erus the namespace holds, from one short list call (remainingItemCount: a listing of
# 10,000 rows can time out); a count that fails stops the script rather than apply all 20,000
# objects again and measure the operator right after
erus=$(kubectl get --raw "/apis/mtsre.meitu.com/v1/namespaces/$ns/erus?limit=1" |
  python3 -c 'import json, sys
d = json.load(sys.stdin); meta = d["metadata"]
if meta.get("continue") and "remainingItemCount" not in meta:
    sys.exit("the API server gave no remainingItemCount: cannot count the Erus")
print(len(d["items"]) + meta.get("remainingItemCount", 0))')
if [ "$erus" -lt "$n" ]; then
  kubectl create ns "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  echo "creating $n Deployments and $n Erus in $ns"
  python3 - "$n" "$ns" <<'EOF' | kubectl apply --server-side -f - >/dev/null
import json, sys
n, ns = int(sys.argv[1]), sys.argv[2]
items = []
for i in range(n):
    labels = {"app": f"web-{i}"}
    items.append({"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": f"web-{i}", "namespace": ns, "labels": labels},
                  "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                           "template": {"metadata": {"labels": labels},
                                        "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}})
    items.append({"apiVersion": "mtsre.meitu.com/v1", "kind": "Eru",
                  "metadata": {"name": f"web-{i}", "namespace": ns},
                  "spec": {"schedule": "0 0 1 1 *", "target": {"kind": "Deployment", "name": f"web-{i}"}}})
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
EOF
fi

work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin" run --namespace "$ns" --log-level warn --database "$work/journal.db" \
  --http-address "127.0.0.1:$port" >"$work/operator.log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
rss() { awk '/VmRSS/ {printf "%.1f MB", $2 / 1024}' "/proc/$pid/status"; }
start=$SECONDS
until curl -sf "127.0.0.1:$port/readyz" >/dev/null; do
  kill -0 "$pid" 2>/dev/null || { cat "$work/operator.log"; exit 1; }
  sleep 0.2
done
echo "N = $n: ready after $((SECONDS - start)) s, RSS $(rss)"
for _ in $(seq 1 $((seconds / 5))); do
  curl -sf "127.0.0.1:$port/metrics" >/dev/null
  sleep 5
done
echo "N = $n: after ${seconds} s (/metrics every 5 s), RSS $(rss), peak $(awk '/VmHWM/ {printf "%.1f MB", $2 / 1024}' "/proc/$pid/status")"
# the heap is jemalloc's (src/main.rs): its part of the RSS is the anonymous memory; the rest is
# the binary's text and the journal's mapped pages
awk '/RssAnon/ {a = $2} /RssFile/ {f = $2} /RssShmem/ {s = $2}
     END {printf "anonymous %.1f MB (the heap, stacks), file %.1f MB (text, mapped journal)\n", a / 1024, (f + s) / 1024}' \
  "/proc/$pid/status"
