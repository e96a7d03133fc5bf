#!/usr/bin/env bash
# A real local Kubernetes control plane, built from Go modules (no Docker, no downloads
# other than the Go module proxy): etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, and kwok managing fake Nodes so Pods become Running and Ready.
#
#   hack/cluster.sh up [--nodes N]   build once (cached), start, return when API and nodes are Ready
#   hack/cluster.sh env              print `export` lines: KUBECONFIG and PATH (cached kubectl first)
#   hack/cluster.sh status           what runs, by component
#   hack/cluster.sh down             stop exactly what `up` started (by PID), remove its state
#   hack/cluster.sh build            only build the binaries into the cache
#   hack/cluster.sh cache-dir        print the folder of the cached binaries
#   hack/cluster.sh restart-control-plane [--down-seconds S]
#                                    stop etcd and kube-apiserver, wait S s (5), start them again
#                                    on the same ports and data (a fault the tests survive)
#
# Options and environment:
#   --name NAME / ERU_CLUSTER_NAME     cluster name (default "eru"); clusters run side by side
#   --controller-qps N                 kube-controller-manager's client QPS (burst 2N) instead of
#                                      its default 20, and N/10 concurrent Deployment syncs (not
#                                      5): scale runs of thousands of Deployments, whose rollouts
#                                      would otherwise queue for many minutes
#   ERU_CLUSTER_STATE                  state root (default <repo>/.cluster); one folder per name
#   ERU_CACHE                          binaries cache root (default ${XDG_CACHE_HOME:-~/.cache}/eru)
#   ERU_CLUSTER_PREBUILT               test seam: take the binaries from this folder instead of
#                                      compiling them (the rest of a cold `up` runs unchanged)
# Versions are pinned in hack/versions.env; the cache folder is keyed by them.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/versions.env source-path=SCRIPTDIR/..
source "$repo/hack/versions.env"

cache_root=${ERU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eru}
bin_dir="$cache_root/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}-kwok-${KWOK_VERSION}"
name=${ERU_CLUSTER_NAME:-eru}
nodes=1
controller_qps=""
down_seconds=5
components=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

say() { printf '[cluster %s] %s\n' "$name" "$*" >&2; }
die() { say "error: $*"; exit 1; }

cmd=${1:-}
[ $# -gt 0 ] && shift
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=${2:?--nodes needs a number}; shift 2 ;;
    --nodes=*) nodes=${1#*=}; shift ;;
    --name) name=${2:?--name needs a value}; shift 2 ;;
    --name=*) name=${1#*=}; shift ;;
    --controller-qps) controller_qps=${2:?--controller-qps needs a number}; shift 2 ;;
    --down-seconds) down_seconds=${2:?--down-seconds needs a number}; shift 2 ;;
    *) die "unknown argument: $1 (see the header of $0)" ;;
  esac
done
[[ "$nodes" =~ ^[1-9][0-9]*$ ]] || die "--nodes must be a positive number, got '$nodes'"
[[ -z "$controller_qps" || "$controller_qps" =~ ^[1-9][0-9]*$ ]] || die "--controller-qps must be a positive number, got '$controller_qps'"
[[ "$name" =~ ^[a-z0-9][a-z0-9-]*$ ]] || die "--name must be lowercase letters, digits and '-', got '$name'"
state="${ERU_CLUSTER_STATE:-$repo/.cluster}/$name"

# ---------------------------------------------------------------------------------------------
# build: every binary into $bin_dir, once. A lock keeps two concurrent `up`s from building twice.
# ---------------------------------------------------------------------------------------------
cached_files=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwok-stages.yaml)
built() {
  local b
  for b in "${cached_files[@]}"; do
    [ -s "$bin_dir/$b" ] || return 1
  done
}

timed() { # timed LABEL cmd...: run a build step, print its elapsed time
  local label=$1 start=$SECONDS
  shift
  say "building $label ..."
  "$@"
  say "built $label in $((SECONDS - start)) s"
}

build_k8s() {
  local work=$1 out=$2 kmod minor ld p
  (
    cd "$work"
    go mod init example.invalid/k8sbins >/dev/null 2>&1
    kmod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
    [ -s "$kmod" ] || die "could not download k8s.io/kubernetes@$K8S_VERSION"
    # k8s.io/kubernetes requires its staging modules at v0.0.0 with local replaces; point every
    # one of them at its published v0.X.Y twin instead.
    sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\) => \./staging/.*#\1#p' "$kmod" |
      while read -r m; do go mod edit "-replace=$m=$m@v0.${K8S_VERSION#v1.}"; done
    if grep '=>' "$kmod" | grep -vq '\./staging/'; then
      die "k8s.io/kubernetes@$K8S_VERSION has non-staging replaces; add them to hack/cluster.sh"
    fi
    grep '^godebug' "$kmod" >>go.mod || true
    go mod edit -require="k8s.io/kubernetes@$K8S_VERSION"
    for c in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
      go mod edit -tool="k8s.io/kubernetes/cmd/$c"
    done
    go mod tidy >/dev/null
    minor=$(cut -d. -f2 <<<"$K8S_VERSION")
    ld="-s -w"
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
    done
    go build -ldflags "$ld" -o "$out/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
  )
}

build_etcd() {
  local work=$1 out=$2
  # etcd's server module carries replace directives, so `go install` refuses it: use a wrapper
  # module of its own (keeps etcd's grpc/otel versions out of the Kubernetes build).
  (
    cd "$work"
    go mod init example.invalid/etcdbin >/dev/null 2>&1
    go get -tool "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null 2>&1
    go mod tidy >/dev/null
    go build -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3
  )
}

build_kwok() {
  local out=$1 dir f
  GOBIN="$out" go install -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  # The standalone kwok binary has no stages; take kwokctl's defaults from the module itself.
  dir=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  for f in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease \
    pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
    [ -s "$dir/kustomize/stage/$f.yaml" ] || die "kwok stage $f.yaml not found in $dir"
    cat "$dir/kustomize/stage/$f.yaml"
    printf '\n---\n'
  done >"$out/kwok-stages.yaml"
}

# build runs in a subshell: its EXIT trap (removing the temporary folders) and its exports stay
# inside it. A RETURN trap would not: bash keeps it installed after the function returns, and it
# fired in a later function with `tmp` unset under `set -u`, failing the first `up` of every fresh
# machine (issue 9).
build() (
  built && exit 0
  command -v go >/dev/null || [ -n "${ERU_CLUSTER_PREBUILT:-}" ] ||
    die "go is required to build the control plane (Go >= 1.26)"
  mkdir -p "$cache_root"
  exec 9>"$cache_root/.build.lock"
  say "waiting for the build lock $cache_root/.build.lock" && flock 9
  built && exit 0
  local start=$SECONDS tmp work
  tmp="$bin_dir.tmp.$$"
  work=$(mktemp -d)
  trap 'rm -rf "$tmp" "$work"' EXIT
  mkdir -p "$tmp" "$work/k8s" "$work/etcd"
  if [ -n "${ERU_CLUSTER_PREBUILT:-}" ]; then
    # Test seam (tests/cold_start.sh): the compile step is satisfied from binaries built before,
    # so everything a cold `up` does after compiling runs on every CI run in seconds.
    timed "from $ERU_CLUSTER_PREBUILT (ERU_CLUSTER_PREBUILT)" copy_prebuilt "$ERU_CLUSTER_PREBUILT" "$tmp"
  else
    export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-trimpath
    say "cold build of the control plane into $bin_dir (several minutes on 2 cores; cached afterwards)"
    timed "etcd $ETCD_VERSION" build_etcd "$work/etcd" "$tmp"
    timed "kwok $KWOK_VERSION" build_kwok "$tmp"
    timed "kube-apiserver, kube-controller-manager, kube-scheduler, kubectl $K8S_VERSION" build_k8s "$work/k8s" "$tmp"
  fi
  rm -rf "$bin_dir" && mv "$tmp" "$bin_dir"
  say "control plane built in $((SECONDS - start)) s; cache size $(du -sh "$bin_dir" | cut -f1)"
)

copy_prebuilt() { # copy_prebuilt FROM TO: the same files a build produces
  local b
  for b in "${cached_files[@]}"; do
    [ -s "$1/$b" ] || die "ERU_CLUSTER_PREBUILT=$1 has no $b"
    cp "$1/$b" "$2/$b"
  done
}

# ---------------------------------------------------------------------------------------------
# processes
# ---------------------------------------------------------------------------------------------
pid_of() { cat "$state/pids/$1.pid" 2>/dev/null || true; }

# alive COMPONENT: its recorded PID runs, and it is ours (its command line names our state dir).
alive() {
  local pid
  pid=$(pid_of "$1")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$state"
}

start() { # start COMPONENT BINARY ARGS...: detached from this shell, PID recorded
  local component=$1
  shift
  mkdir -p "$state/pids" "$state/logs"
  # The single quotes are deliberate: the inner bash writes its own PID, then becomes the component.
  # shellcheck disable=SC2016
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$state/pids/$component.pid" "$@" \
    >"$state/logs/$component.log" 2>&1 </dev/null &
  local i
  for i in $(seq 50); do [ -s "$state/pids/$component.pid" ] && return 0; sleep 0.1; done
  die "$component did not start"
}

fail_component() {
  say "error: $1 exited; last lines of $state/logs/$1.log:"
  tail -n 30 "$state/logs/$1.log" >&2 || true
  stop_all
  exit 1
}

# wait_for COMPONENT SECONDS CHECK...: poll CHECK until it passes; fail if COMPONENT dies.
wait_for() {
  local component=$1 timeout=$2 deadline
  shift 2
  deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    alive "$component" || fail_component "$component"
    [ $SECONDS -lt $deadline ] || { say "error: $component not ready after ${timeout}s"; tail -n 30 "$state/logs/$component.log" >&2; stop_all; exit 1; }
    sleep 0.5
  done
}

stop_component() { # stop_component COMPONENT: TERM, then KILL after 10 s
  local c=$1 pid i
  if alive "$c"; then
    pid=$(pid_of "$c")
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$state/pids/$c.pid"
}

stop_all() {
  local c reversed=()
  for c in "${components[@]}"; do reversed=("$c" "${reversed[@]}"); done
  for c in "${reversed[@]}"; do stop_component "$c"; done
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

pki() {
  local p=$state/pki
  mkdir -p "$p"
  (
    cd "$p"
    openssl req -x509 -newkey rsa:2048 -nodes -days 365 -keyout ca.key -out ca.crt -subj /CN=eru-local-ca
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj /CN=kube-apiserver
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 -out apiserver.crt \
      -extfile <(printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth')
    openssl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr -subj "/O=system:masters/CN=admin"
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 -out admin.crt \
      -extfile <(printf 'extendedKeyUsage=clientAuth')
    openssl genrsa -out sa.key 2048
    openssl rsa -in sa.key -pubout -out sa.pub
  ) >/dev/null 2>&1 || die "openssl failed to generate certificates in $p"
}

kubeconfig() { # kubeconfig PORT
  cat >"$state/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: $name
  cluster: {server: "https://127.0.0.1:$1", certificate-authority: "$state/pki/ca.crt"}
users:
- name: admin
  user: {client-certificate: "$state/pki/admin.crt", client-key: "$state/pki/admin.key"}
contexts:
- name: $name
  context: {cluster: $name, user: admin}
current-context: $name
KC
}

node_manifest() { # node_manifest INDEX
  cat <<NODE
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$1
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels: {kubernetes.io/hostname: kwok-node-$1, kubernetes.io/os: linux, kubernetes.io/arch: amd64, type: kwok}
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
  nodeInfo: {architecture: amd64, operatingSystem: linux, kubeletVersion: fake, kubeProxyVersion: fake,
             bootID: "", containerRuntimeVersion: "", kernelVersion: "", machineID: "", osImage: "", systemUUID: ""}
  phase: Running
NODE
}

kubectl() { "$bin_dir/kubectl" --kubeconfig "$state/kubeconfig" "$@"; }

api_ready() {
  curl -fsS --cacert "$state/pki/ca.crt" --cert "$state/pki/admin.crt" --key "$state/pki/admin.key" \
    "https://127.0.0.1:$(cat "$state/apiserver.port")/readyz"
}

all_alive() {
  local c
  for c in "${components[@]}"; do alive "$c" || return 1; done
}

ensure_nodes() {
  local i
  for i in $(seq 0 $((nodes - 1))); do node_manifest "$i" | kubectl apply -f - >/dev/null; done
  # wait for every node, not just the ones named here (an earlier `up --nodes 3` keeps its nodes)
  local deadline=$((SECONDS + 120))
  until kubectl wait --for=condition=Ready node --all --timeout=5s >/dev/null 2>&1; do
    alive kwok || fail_component kwok
    alive kube-controller-manager || fail_component kube-controller-manager
    [ $SECONDS -lt $deadline ] || { kubectl get nodes >&2; die "nodes not Ready after 120s"; }
  done
  # Pods need the namespace's default ServiceAccount, which the controller-manager creates.
  until kubectl get serviceaccount default -n default >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || die "default ServiceAccount not created after 120s"
    sleep 0.5
  done
}

# etcd and kube-apiserver on the ports and data of $state (up, restart-control-plane)
start_storage_and_api() {
  local etcd_port etcd_peer api_port
  read -r etcd_port etcd_peer <"$state/etcd.ports"
  api_port=$(cat "$state/apiserver.port")
  start etcd "$bin_dir/etcd" --name "$name" --data-dir "$state/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-cluster "$name=http://127.0.0.1:$etcd_peer" --listen-metrics-urls "" \
    --unsafe-no-fsync --quota-backend-bytes 4294967296
  wait_for etcd 60 curl -fsS "http://127.0.0.1:$etcd_port/health"

  start kube-apiserver "$bin_dir/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
    --cert-dir "$state/apiserver" \
    --tls-cert-file "$state/pki/apiserver.crt" --tls-private-key-file "$state/pki/apiserver.key" \
    --client-ca-file "$state/pki/ca.crt" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$state/pki/sa.pub" --service-account-signing-key-file "$state/pki/sa.key" \
    --service-cluster-ip-range 10.96.0.0/12 --authorization-mode RBAC --allow-privileged=true \
    --endpoint-reconciler-type none
  wait_for kube-apiserver 120 api_ready
}

# The control plane's storage and API server stopped for SECONDS, then started again on the same
# ports and data (a fault to survive): clients see connection errors, then a fresh API server.
restart_control_plane() {
  [ -d "$state" ] || die "not running"
  local start=$SECONDS
  stop_component kube-apiserver
  stop_component etcd
  say "etcd and kube-apiserver stopped; starting them again in ${down_seconds}s"
  sleep "$down_seconds"
  start_storage_and_api
  say "etcd and kube-apiserver back in $((SECONDS - start)) s"
}

up() {
  local start=$SECONDS
  build
  if [ -d "$state" ] && all_alive && api_ready >/dev/null 2>&1; then
    say "already up; ensuring $nodes node(s)"
    ensure_nodes
    say "ready (KUBECONFIG=$state/kubeconfig)"
    return 0
  fi
  [ -d "$state" ] && { say "cleaning up a previous, incomplete cluster"; stop_all; rm -rf "$state"; }
  mkdir -p "$state"
  local etcd_port etcd_peer api_port
  etcd_port=$(free_port) etcd_peer=$(free_port) api_port=$(free_port)
  echo "$api_port" >"$state/apiserver.port"
  pki
  kubeconfig "$api_port"

  echo "$etcd_port $etcd_peer" >"$state/etcd.ports"
  start_storage_and_api
  local qps=()
  [ -z "$controller_qps" ] || qps=(--kube-api-qps "$controller_qps" --kube-api-burst $((2 * controller_qps))
    --concurrent-deployment-syncs $((controller_qps / 10 > 5 ? controller_qps / 10 : 5)))
  start kube-controller-manager "$bin_dir/kube-controller-manager" --kubeconfig "$state/kubeconfig" \
    "${qps[@]}" --leader-elect=false --secure-port 0 --root-ca-file "$state/pki/ca.crt" \
    --service-account-private-key-file "$state/pki/sa.key" --cluster-signing-cert-file "$state/pki/ca.crt" \
    --cluster-signing-key-file "$state/pki/ca.key" --concurrent-gc-syncs 5
  start kube-scheduler "$bin_dir/kube-scheduler" --kubeconfig "$state/kubeconfig" \
    --leader-elect=false --secure-port 0
  start kwok "$bin_dir/kwok" --kubeconfig "$state/kubeconfig" --config "$bin_dir/kwok-stages.yaml" \
    --manage-all-nodes=true --cidr 10.244.0.0/16 --node-ip 10.0.0.1 \
    --node-lease-duration-seconds 40 --server-address "127.0.0.1:$(free_port)"
  sleep 1
  local c
  for c in kube-controller-manager kube-scheduler kwok; do alive "$c" || fail_component "$c"; done
  ensure_nodes
  say "ready in $((SECONDS - start)) s with $nodes node(s); use: eval \"\$($0 env --name $name)\""
}

down() {
  if [ ! -d "$state" ]; then
    say "not running"
    return 0
  fi
  stop_all
  rm -rf "$state"
  say "stopped and removed $state"
}

status() {
  [ -d "$state" ] || { say "not running"; return 1; }
  local c rc=0
  for c in "${components[@]}"; do
    if alive "$c"; then echo "$c: running (pid $(pid_of "$c"))"; else echo "$c: not running"; rc=1; fi
  done
  if api_ready >/dev/null 2>&1; then echo "apiserver: ready at https://127.0.0.1:$(cat "$state/apiserver.port")"; else echo "apiserver: not ready"; rc=1; fi
  return $rc
}

env_lines() {
  [ -f "$state/kubeconfig" ] || die "not running; run: $0 up"
  echo "export KUBECONFIG=$state/kubeconfig"
  echo "export PATH=$bin_dir:\$PATH"
}

case "$cmd" in
  up) up ;;
  down) down ;;
  status) status ;;
  env) env_lines ;;
  build) build ;;
  restart-control-plane) restart_control_plane ;;
  cache-dir) echo "$bin_dir" ;;
  *) die "usage: $0 up|down|status|env|build|restart-control-plane|cache-dir [--nodes N] [--down-seconds S] [--name NAME] [--controller-qps N]" ;;
esac
