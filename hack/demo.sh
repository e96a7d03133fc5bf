#!/usr/bin/env bash
# The local demo (README): a local control plane, the CRDs and RBAC, the operator running with
# its ServiceAccount's permissions and an embedded SQLite journal, and the samples applied.
# The operator runs in the foreground; Ctrl-C stops it (the cluster stays up until
# `hack/cluster.sh down`).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eru/target}
port=${ERU_DEMO_PORT:-8080}
hack/deps.sh

echo "== building the operator"
cargo build --locked --bin eru-operator
hack/cluster.sh up
eval "$(hack/cluster.sh env)"
state="$repo/.cluster/eru"

echo "== installing CRDs and RBAC (the Eru's, and the PodSet and Memcached controllers' for the samples)"
kubectl apply -f crds/ -f crds/podset/ -f crds/memcached/ >/dev/null
kubectl apply -f deploy/namespace.yaml -f deploy/rbac.yaml -f deploy/podset/ -f deploy/memcached/ >/dev/null
kubectl wait --for=condition=Established --timeout=60s -f crds/ >/dev/null  # (wait -f is recursive: every CRD)

# The operator authenticates as eru-system/eru-operator: exactly the RBAC of deploy/rbac.yaml,
# deploy/podset/ and deploy/memcached/.
token=$(kubectl create token eru-operator -n eru-system --duration=24h)
server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
ca=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.certificate-authority}')
cat >"$state/operator.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "$server", certificate-authority: "$ca"}}]
users: [{name: eru-operator, user: {token: "$token"}}]
contexts: [{name: local, context: {cluster: local, user: eru-operator}}]
current-context: local
KC

echo "== starting the operator (journal: $state/eru.db, log: $state/operator.log)"
"$CARGO_TARGET_DIR/debug/eru-operator" run --kubeconfig "$state/operator.kubeconfig" \
  --controllers eru,podset,memcached --database "$state/eru.db" --http-address "127.0.0.1:$port" >"$state/operator.log" 2>&1 &
operator=$!
trap 'kill -TERM $operator 2>/dev/null; wait $operator 2>/dev/null; echo "operator stopped; cluster still up (hack/cluster.sh down)"' EXIT
until curl -fs "http://127.0.0.1:$port/readyz" >/dev/null; do
  kill -0 $operator 2>/dev/null || { tail -n 20 "$state/operator.log"; exit 1; }
  sleep 0.5
done

echo "== applying the samples (namespace default)"
kubectl apply -f deploy/samples/
sleep 5
kubectl get eru,podset,memcached,deployments,pods
cat <<HINT

The operator is running (Ctrl-C stops it). In another shell:
  eval "\$(hack/cluster.sh env)"
  kubectl get eru,podset,memcached          # phases, printer columns
  kubectl describe eru web-sample           # conditions and Events
  open http://localhost:$port/ui            # the audit page: a timeline per Eru, every slot accounted
  curl -s localhost:$port/audit | jq .verdict   # the same audit as JSON
  curl -s localhost:$port/history           # restarts from the journal
  curl -s localhost:$port/missed            # missed and skipped slots
  curl -s localhost:$port/metrics | grep ^eru_
  $CARGO_TARGET_DIR/debug/eru-operator audit --server http://localhost:$port --since 1h
  $CARGO_TARGET_DIR/debug/eru-operator schedule '*/2 * * * *' --count 3   # preview a schedule
HINT
wait $operator
