#!/usr/bin/env bash
# The install path end to end (issue 39): the operator's image built from ./Dockerfile as
# committed, with Debian's podman (hack/image.sh); the image run by podman; a cluster with a real
# node (hack/cluster.sh up --real-node); the images imported into the node's containerd; then
# tests/real_node.rs: the chart installs the image as a Pod as the README's Install says, a real
# workload is restarted gracefully, the operator's Pod is deleted between slots. hack/test.sh runs
# it last; the cluster is taken down on exit, also when a step fails.
#
#   hack/real-node-e2e.sh [--profile P] [-- <cargo test args>]
#
#   --profile P   the Dockerfile's CARGO_PROFILE (default dev: CI's, a fraction of release's
#                 build time; release is what users build and run)
# Environment: ERU_REAL_NODE_CLUSTER, the cluster's name (default real-node). Needs root.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
profile=dev
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile=${2:?--profile needs a cargo profile}; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "unknown argument: $1 (see the header of $0)" >&2; exit 1 ;;
  esac
done
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eru/target}
cluster=${ERU_REAL_NODE_CLUSTER:-real-node}
image=localhost/eru-operator:e2e
start=$SECONDS
step_start=$SECONDS
step() { # step TITLE: prints the time the previous step took, then the title
  [ $SECONDS -eq "$start" ] || echo "   ($((SECONDS - step_start)) s)"
  step_start=$SECONDS
  echo "== $*"
}
cleanup() { hack/cluster.sh down --name "$cluster" || true; }
trap cleanup EXIT

step "the base images and podman build of ./Dockerfile (hack/image.sh build --profile $profile)"
hack/image.sh build --profile "$profile" --tag e2e
web=$(hack/image.sh web)

step "the image runs: podman run $image --help"
run=(hack/image.sh podman run --rm --ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
help=$("${run[@]}" --network none "$image" --help)
printf '%s\n' "$help" | head -n 3

step "a cluster with a real node (hack/cluster.sh up --real-node --name $cluster)"
hack/cluster.sh up --real-node --name "$cluster"
eval "$(hack/cluster.sh env --name "$cluster")"

step "the image as a container against the cluster: podman run ... run --kubeconfig, until /readyz"
kubectl apply -f crds/ >/dev/null
# the journal's volume, owned by the image's user 65532, holds a kubeconfig with its keys inline
journal=$(mktemp -d)
kubectl config view --raw --flatten >"$journal/kubeconfig"
chmod 600 "$journal/kubeconfig"
chown -R 65532:65532 "$journal"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${run[@]}" -d --name "eru-e2e-$cluster" --replace --network host --read-only \
  -v "$journal:/var/lib/eru" "$image" \
  run --kubeconfig /var/lib/eru/kubeconfig --database /var/lib/eru/eru.db --http-address "127.0.0.1:$port" >/dev/null
ready=""
for _ in $(seq 120); do
  if curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then ready=1; break; fi
  sleep 0.5
done
if [ -z "$ready" ]; then
  hack/image.sh podman logs "eru-e2e-$cluster" >&2 || true
  hack/image.sh podman stop -t 0 "eru-e2e-$cluster" >/dev/null || true
  echo "the operator's container did not become ready" >&2
  exit 1
fi
curl -fsS "http://127.0.0.1:$port/readyz"
echo
# a clean stop (SIGTERM) within 30 s; --rm removes the container
hack/image.sh podman stop -t 30 "eru-e2e-$cluster" >/dev/null
rm -rf "$journal"

step "the images into the real node's containerd (hack/cluster.sh load)"
hack/cluster.sh load --name "$cluster" "$image" "$web"

step "tests/real_node.rs on the real node"
ERU_IMAGE=$image ERU_WEB_IMAGE=$web \
  hack/suites.sh --name real-node --jobs 1 --threads 1 real_node -- "${extra[@]}"
step "done in $((SECONDS - start)) s"
