#!/usr/bin/env bash
# A real local Kubernetes control plane, built from Go modules (no Docker, no downloads
# other than the Go module proxy): etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, and kwok managing fake Nodes so Pods become Running and Ready; with
# --real-node also one real Node beside them, whose Pods really run (see "The real node" below).
#
#   hack/cluster.sh up [--nodes N] [--real-node]
#                                    build once (cached), start, return when API and nodes are Ready
#   hack/cluster.sh env              print `export` lines: KUBECONFIG and PATH (cached kubectl first)
#   hack/cluster.sh status           what runs, by component
#   hack/cluster.sh down             stop exactly what `up` started (by PID), remove its state
#   hack/cluster.sh build            only build the binaries into the cache
#   hack/cluster.sh build-node       only build the real node's kubelet, kube-proxy and crictl
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
#
# The real node (--real-node): a kubelet and kube-proxy built from k8s.io/kubernetes at
# K8S_VERSION like the control plane (cached in their own folder), Debian's containerd, runc and
# CNI plugins (hack/deps.sh), the pause image built here (hack/image.sh pause), no registry:
# images reach the node by `hack/cluster.sh load IMAGE...` (podman save | ctr images import).
# Its Pods get addresses on a bridge of their own (10.87.0.0/24, the host is .1); the API server
# then listens on the bridge's address (not 127.0.0.1), so that the Pods reach it through the
# `kubernetes` Service, which kube-proxy (iptables) forwards. The Node is tainted
# eru-operator/real-node=true:NoSchedule and labelled eru-operator/real-node=true: only Pods that
# tolerate and select it run there, kwok keeps every other Pod (it manages only the Nodes
# annotated kwok.x-k8s.io/node=fake). One real node per machine at a time (its bridge, address
# and kube-proxy's iptables chains are the host's). Root is required.
#   hack/cluster.sh load [--name NAME] IMAGE...   import images (podman's, hack/image.sh) into the
#                                                 node's containerd
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/versions.env source-path=SCRIPTDIR/..
source "$repo/hack/versions.env"

cache_root=${ERU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eru}
bin_dir="$cache_root/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}-kwok-${KWOK_VERSION}"
name=${ERU_CLUSTER_NAME:-eru}
nodes=1
real_node=""
load_images=()
node_bin_dir="$cache_root/node-k8s-${K8S_VERSION}-crictl-${CRICTL_VERSION}"
# the real node's Pod network: a bridge of its own, the host's address on it is .1
node_bridge=eru-node0
node_subnet=10.87.0.0/24
node_ip=10.87.0.1
node_taint=eru-operator/real-node
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
    --real-node) real_node=1; shift ;;
    -*) die "unknown argument: $1 (see the header of $0)" ;;
    *) load_images+=("$1"); shift ;;
  esac
done
[ "$cmd" = load ] || [ ${#load_images[@]} -eq 0 ] || die "unknown argument: ${load_images[0]} (see the header of $0)"
[[ "$nodes" =~ ^[1-9][0-9]*$ ]] || die "--nodes must be a positive number, got '$nodes'"
[[ -z "$controller_qps" || "$controller_qps" =~ ^[1-9][0-9]*$ ]] || die "--controller-qps must be a positive number, got '$controller_qps'"
[[ "$name" =~ ^[a-z0-9][a-z0-9-]*$ ]] || die "--name must be lowercase letters, digits and '-', got '$name'"
state="${ERU_CLUSTER_STATE:-$repo/.cluster}/$name"
# a cluster started with --real-node keeps it for every later command (status, down, restart-…)
[ -f "$state/real-node" ] && real_node=1

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

build_k8s() { # build_k8s WORK OUT COMMAND...: k8s.io/kubernetes/cmd/COMMAND into OUT
  local work=$1 out=$2 kmod minor ld p c
  shift 2
  local commands=("$@")
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
    for c in "${commands[@]}"; do
      go mod edit -tool="k8s.io/kubernetes/cmd/$c"
    done
    go mod tidy >/dev/null
    minor=$(cut -d. -f2 <<<"$K8S_VERSION")
    ld="-s -w"
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
    done
    go build -ldflags "$ld" -o "$out/" "${commands[@]/#/k8s.io/kubernetes/cmd/}"
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
    timed "kube-apiserver, kube-controller-manager, kube-scheduler, kubectl $K8S_VERSION" \
      build_k8s "$work/k8s" "$tmp" kube-apiserver kube-controller-manager kube-scheduler kubectl
  fi
  rm -rf "$bin_dir" && mv "$tmp" "$bin_dir"
  say "control plane built in $((SECONDS - start)) s; cache size $(du -sh "$bin_dir" | cut -f1)"
)

# The real node's kubelet and kube-proxy, built like the control plane (same wrapper module, same
# pinned version) into a folder of their own: the control plane's cache stays as it is.
node_built() { [ -s "$node_bin_dir/kubelet" ] && [ -s "$node_bin_dir/kube-proxy" ] && [ -s "$node_bin_dir/crictl" ]; }
build_node() (
  node_built && exit 0
  command -v go >/dev/null || die "go is required to build the kubelet (Go >= 1.26)"
  mkdir -p "$cache_root"
  exec 9>"$cache_root/.build-node.lock"
  say "waiting for the build lock $cache_root/.build-node.lock" && flock 9
  node_built && exit 0
  local tmp work
  tmp="$node_bin_dir.tmp.$$"
  work=$(mktemp -d)
  trap 'rm -rf "$tmp" "$work"' EXIT
  mkdir -p "$tmp"
  CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-trimpath \
    timed "kubelet, kube-proxy $K8S_VERSION" build_k8s "$work" "$tmp" kubelet kube-proxy
  CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-trimpath GOBIN="$tmp" \
    timed "crictl $CRICTL_VERSION" go install -ldflags "-s -w" "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
  rm -rf "$node_bin_dir" && mv "$tmp" "$node_bin_dir"
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

# alive COMPONENT: its recorded PID runs, and is ours (its command line names $state: a PID reused
# by another process is not). A process in the middle of its exec (the launcher becoming the
# component) shows an empty command line for an instant: alive, by its PID (a zombie is not).
alive() {
  local pid cmdline
  pid=$(pid_of "$1")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  [ "$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null)" != Z ] || return 1
  cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [ -z "$cmdline" ] || [[ $cmdline == *"$state"* ]]
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
  [ -z "$real_node" ] || stop_node
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
      -extfile <(printf 'subjectAltName=IP:%s,DNS:localhost,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth' "$(api_host)")
    openssl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr -subj "/O=system:masters/CN=admin"
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 -out admin.crt \
      -extfile <(printf 'extendedKeyUsage=clientAuth')
    openssl genrsa -out sa.key 2048
    openssl rsa -in sa.key -pubout -out sa.pub
    if [ -n "$real_node" ]; then
      # the real node's clients: the kubelet as its Node (the Node authorizer's subject), kube-proxy
      # (bound to system:node-proxier by the default RBAC), the API server to the kubelet (logs,
      # port-forward; system:masters, as kubeadm's apiserver-kubelet-client)
      client_cert kubelet "/O=system:nodes/CN=system:node:$(node_name)"
      client_cert kube-proxy /CN=system:kube-proxy
      client_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
    fi
  ) >/dev/null 2>&1 || die "openssl failed to generate certificates in $p"
}

client_cert() { # client_cert NAME SUBJECT (in the pki folder)
  openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 -out "$1.crt" \
    -extfile <(printf 'extendedKeyUsage=clientAuth')
}

# The API server's address: 127.0.0.1, or the real node's bridge address (Pods reach it there).
api_host() { if [ -n "$real_node" ]; then echo "$node_ip"; else echo 127.0.0.1; fi; }
node_name() { echo "$name-real-node"; }

kubeconfig() { # kubeconfig PORT [FILE USER]: the admin's, or USER's (a client certificate of pki/)
  local file=${2:-$state/kubeconfig} user=${3:-admin}
  cat >"$file" <<KC
apiVersion: v1
kind: Config
clusters:
- name: $name
  cluster: {server: "https://$(api_host):$1", certificate-authority: "$state/pki/ca.crt"}
users:
- name: $user
  user: {client-certificate: "$state/pki/$user.crt", client-key: "$state/pki/$user.key"}
contexts:
- name: $name
  context: {cluster: $name, user: $user}
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
    "https://$(api_host):$(cat "$state/apiserver.port")/readyz"
}

all_alive() {
  local c
  for c in "${components[@]}"; do alive "$c" || return 1; done
  if [ -n "$real_node" ]; then
    for c in "${node_components[@]}"; do alive "$c" || return 1; done
  fi
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

# ---------------------------------------------------------------------------------------------
# the real node (--real-node)
# ---------------------------------------------------------------------------------------------
node_components=(containerd kubelet kube-proxy)
ctr_() { ctr --address "$state/containerd/containerd.sock" -n k8s.io "$@"; }
crictl_() { "$node_bin_dir/crictl" --runtime-endpoint "unix://$state/containerd/containerd.sock" --timeout 30s "$@"; }

node_preflight() {
  [ "$(id -u)" = 0 ] || die "--real-node needs root (containerd, the kubelet, iptables)"
  local b owner
  for b in containerd containerd-shim-runc-v2 runc ctr iptables conntrack ip; do
    command -v "$b" >/dev/null || die "$b is missing: run hack/deps.sh"
  done
  for b in bridge host-local loopback; do
    [ -x "/usr/lib/cni/$b" ] || die "the CNI plugin $b is missing (containernetworking-plugins): run hack/deps.sh"
  done
  # one real node per machine: its bridge, address and kube-proxy's iptables chains are the host's
  owner=$(cat "$cache_root/real-node.owner" 2>/dev/null || true)
  if [ -n "$owner" ] && [ "$owner" != "$state" ] && [ -s "$owner/pids/kubelet.pid" ] &&
    tr '\0' ' ' <"/proc/$(cat "$owner/pids/kubelet.pid")/cmdline" 2>/dev/null | grep -qF "$owner"; then
    die "the cluster of $owner runs a real node on this machine: take it down first"
  fi
  mkdir -p "$cache_root"
  echo "$state" >"$cache_root/real-node.owner"
}

# The Pods' bridge with the host's address on it, made before the API server binds that address.
node_network() {
  ip link show "$node_bridge" >/dev/null 2>&1 || ip link add "$node_bridge" type bridge
  ip -4 addr show dev "$node_bridge" | grep -qF "inet $node_ip/" || ip addr add "$node_ip/24" dev "$node_bridge"
  ip link set "$node_bridge" up
}

start_containerd() {
  local d=$state/containerd
  mkdir -p "$d" "$state/cni/net.d"
  # bridge + host-local (addresses kept in the state folder); containerd adds the loopback itself
  cat >"$state/cni/net.d/10-eru.conflist" <<CNI
{"cniVersion": "0.4.0", "name": "eru-$name", "plugins": [
  {"type": "bridge", "bridge": "$node_bridge", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$state/cni/ipam",
            "ranges": [[{"subnet": "$node_subnet", "gateway": "$node_ip"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
CNI
  cat >"$d/config.toml" <<TOML
version = 2
root = "$d/root"
state = "$d/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$d/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$d/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:$PAUSE_VERSION"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # this machine refuses a lower oom_score_adj than the caller's (no CAP_SYS_RESOURCE): runc
  # failed every sandbox ("failed to update /proc/self/oom_score_adj: Permission denied")
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$state/cni/net.d"
TOML
  start containerd containerd --config "$d/config.toml"
  wait_for containerd 60 ctr_ version
  # the sandbox image, built here (no registry to pull it from)
  "$repo/hack/image.sh" pause
  load_into_node "registry.k8s.io/pause:$PAUSE_VERSION"
}

start_kubelet() {
  local d=$state/kubelet api_port port healthz
  api_port=$(cat "$state/apiserver.port")
  mkdir -p "$d/root" "$d/pki"
  kubeconfig "$api_port" "$d/kubeconfig" kubelet
  port=$(free_port) healthz=$(free_port)
  echo "$healthz" >"$state/kubelet.healthz"
  cat >"$d/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
port: $port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $healthz
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $state/pki/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$state/containerd/containerd.sock
# containerd 1.6 does not report its cgroup driver (the CRI's RuntimeConfig): the kubelet's own
# setting is used, cgroupfs as containerd's runc (no systemd here). This machine mounts cgroup v1
# controllers (hybrid): the kubelet refuses v1 unless told otherwise.
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
clusterDomain: cluster.local
registerWithTaints: [{key: $node_taint, value: "true", effect: NoSchedule}]
# images come by import, never by pull: none may be collected, no disk threshold evicts a test Pod
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
rotateCertificates: false
YAML
  start kubelet "$node_bin_dir/kubelet" --config "$d/config.yaml" --kubeconfig "$d/kubeconfig" \
    --root-dir "$d/root" --cert-dir "$d/pki" --hostname-override "$(node_name)" --node-ip "$node_ip" \
    --node-labels "$node_taint=true"
  wait_for kubelet 120 curl -fsS "http://127.0.0.1:$healthz/healthz"
}

start_kube_proxy() {
  local api_port
  api_port=$(cat "$state/apiserver.port")
  kubeconfig "$api_port" "$state/kube-proxy.kubeconfig" kube-proxy
  cat >"$state/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $state/kube-proxy.kubeconfig}
hostnameOverride: $(node_name)
mode: iptables
clusterCIDR: $node_subnet
healthzBindAddress: 127.0.0.1:$(free_port)
metricsBindAddress: 127.0.0.1:$(free_port)
nodePortAddresses: [$node_subnet]
# the host's conntrack settings stay as they are
conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
YAML
  start kube-proxy "$node_bin_dir/kube-proxy" --config "$state/kube-proxy.yaml"
}

start_node() {
  local start=$SECONDS
  start_containerd
  start_kubelet
  start_kube_proxy
  local deadline=$((SECONDS + 120))
  until kubectl wait --for=condition=Ready "node/$(node_name)" --timeout=5s >/dev/null 2>&1; do
    local c
    for c in "${node_components[@]}"; do alive "$c" || fail_component "$c"; done
    [ $SECONDS -lt $deadline ] || { kubectl describe node "$(node_name)" >&2; die "the real node is not Ready after 120s"; }
  done
  node_volumes
  say "real node $(node_name) Ready in $((SECONDS - start)) s (Pods on $node_subnet; taint $node_taint=true:NoSchedule)"
}

# No storage provisioner runs here: static local PersistentVolumes on the real node, folders of
# the state folder, for claims without a StorageClass (the chart's journal claim binds one; the
# kubelet gives the Pod's fsGroup the folder). Retain: a released volume is not handed to another
# claim.
node_volumes() {
  local i
  for i in 1 2 3; do
    mkdir -p "$state/volumes/$i"
    cat <<PV
apiVersion: v1
kind: PersistentVolume
metadata:
  name: $(node_name)-volume-$i
  labels: {$node_taint: "true"}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  local: {path: "$state/volumes/$i"}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [$(node_name)]}]
---
PV
  done | kubectl apply -f - >/dev/null
}

# Images from podman's storage (hack/image.sh) into the node's containerd, by name.
load_into_node() {
  local tar
  tar=$(mktemp --suffix .tar)
  "$repo/hack/image.sh" save "$tar" "$@"
  ctr_ images import "$tar" >/dev/null || { rm -f "$tar"; die "ctr images import of $* failed"; }
  rm -f "$tar"
}

load() {
  { [ -n "$real_node" ] && alive containerd; } || die "no real node runs in this cluster (up --real-node)"
  [ ${#load_images[@]} -gt 0 ] || die "load needs image names (podman's, see hack/image.sh)"
  load_into_node "${load_images[@]}"
  say "loaded ${load_images[*]} into $(node_name)"
}

# The node's Pods taken down through the CRI (their network namespaces and addresses released),
# then its processes, then what the kernel keeps: mounts under the state folder, kube-proxy's
# iptables chains, the bridge.
stop_node() {
  stop_component kube-proxy
  stop_component kubelet
  if alive containerd; then
    crictl_ rmp --all --force >/dev/null 2>&1 || say "crictl rmp failed; the node's Pods may outlive it"
  fi
  stop_component containerd
  [ ! -x "$node_bin_dir/kube-proxy" ] || "$node_bin_dir/kube-proxy" --cleanup >/dev/null 2>&1 || true
  # the kubelet's own chains (KUBE-FIREWALL and its canaries), which kube-proxy leaves
  local ipt t
  for ipt in iptables ip6tables; do
    command -v "$ipt" >/dev/null || continue
    for t in INPUT OUTPUT; do "$ipt" -D "$t" -j KUBE-FIREWALL 2>/dev/null || true; done
    "$ipt" -F KUBE-FIREWALL 2>/dev/null || true
    "$ipt" -X KUBE-FIREWALL 2>/dev/null || true
    for t in mangle nat filter; do "$ipt" -t "$t" -X KUBE-KUBELET-CANARY 2>/dev/null || true; done
    "$ipt" -t mangle -X KUBE-IPTABLES-HINT 2>/dev/null || true
  done
  local m
  findmnt -rn -o TARGET | grep -F "$state/" | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  ip link del "$node_bridge" 2>/dev/null || true
  [ "$(cat "$cache_root/real-node.owner" 2>/dev/null)" != "$state" ] || rm -f "$cache_root/real-node.owner"
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

  local node_flags=(--authorization-mode RBAC --endpoint-reconciler-type none)
  # with a real node: the Node authorizer for its kubelet, the `kubernetes` Service's endpoint (the
  # bridge address) kept by the API server, a client certificate towards the kubelet
  [ -z "$real_node" ] || node_flags=(--authorization-mode "Node,RBAC" --endpoint-reconciler-type lease
    --kubelet-preferred-address-types InternalIP
    --kubelet-client-certificate "$state/pki/apiserver-kubelet-client.crt"
    --kubelet-client-key "$state/pki/apiserver-kubelet-client.key")
  # an audit log of every write to a workload (restart patches, and anything else that changes a
  # Deployment, StatefulSet or DaemonSet): the tests count the restart patches the API server
  # received, whether or not they changed anything (a patch setting the same slot is a no-op)
  cat >"$state/audit-policy.yaml" <<'POLICY'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [patch, update, create, delete]
    resources:
      - group: apps
        resources: [deployments, statefulsets, daemonsets]
  - level: None
POLICY
  start kube-apiserver "$bin_dir/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
    --audit-policy-file "$state/audit-policy.yaml" --audit-log-path "$state/logs/audit.log" \
    --audit-log-maxsize 200 --audit-log-maxbackup 1 \
    --bind-address "$(api_host)" --advertise-address "$(api_host)" --secure-port "$api_port" \
    --cert-dir "$state/apiserver" \
    --tls-cert-file "$state/pki/apiserver.crt" --tls-private-key-file "$state/pki/apiserver.key" \
    --client-ca-file "$state/pki/ca.crt" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$state/pki/sa.pub" --service-account-signing-key-file "$state/pki/sa.key" \
    --service-cluster-ip-range 10.96.0.0/12 --allow-privileged=true "${node_flags[@]}"
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
  if [ -n "$real_node" ] && [ -d "$state" ] && [ ! -f "$state/real-node" ] && api_ready >/dev/null 2>&1; then
    die "this cluster runs without a real node (its API server listens on 127.0.0.1): take it down first"
  fi
  [ -z "$real_node" ] || node_preflight
  build
  [ -z "$real_node" ] || build_node
  if [ -d "$state" ] && all_alive && api_ready >/dev/null 2>&1; then
    say "already up; ensuring $nodes node(s)"
    ensure_nodes
    say "ready (KUBECONFIG=$state/kubeconfig)"
    return 0
  fi
  [ -d "$state" ] && { say "cleaning up a previous, incomplete cluster"; stop_all; rm -rf "$state"; }
  mkdir -p "$state"
  if [ -n "$real_node" ]; then
    touch "$state/real-node"
    node_network
  fi
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
  # A fake node whose lease is not renewed within the grace period turns NotReady, and the node
  # controller marks its Pods not ready; kwok never makes a Running Pod ready again (its pod-ready
  # stage takes only Pending ones), so its Deployments stay unavailable for good. A control-plane
  # outage of the fault tests (restart-control-plane: 20-40 s on a busy machine, then a lease
  # renewal up to 10 s later) came close to the default 50 s and, once over it, left every later
  # slot skipped target_unhealthy. No test needs a node to turn NotReady: 5 minutes.
  start kube-controller-manager "$bin_dir/kube-controller-manager" --kubeconfig "$state/kubeconfig" \
    "${qps[@]}" --leader-elect=false --secure-port 0 --root-ca-file "$state/pki/ca.crt" \
    --node-monitor-grace-period 5m \
    --service-account-private-key-file "$state/pki/sa.key" --cluster-signing-cert-file "$state/pki/ca.crt" \
    --cluster-signing-key-file "$state/pki/ca.key" --concurrent-gc-syncs 5
  start kube-scheduler "$bin_dir/kube-scheduler" --kubeconfig "$state/kubeconfig" \
    --leader-elect=false --secure-port 0
  start kwok "$bin_dir/kwok" --kubeconfig "$state/kubeconfig" --config "$bin_dir/kwok-stages.yaml" \
    --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake --cidr 10.244.0.0/16 --node-ip 10.0.0.1 \
    --node-lease-duration-seconds 40 --server-address "127.0.0.1:$(free_port)"
  sleep 1
  local c
  for c in kube-controller-manager kube-scheduler kwok; do alive "$c" || fail_component "$c"; done
  ensure_nodes
  [ -z "$real_node" ] || start_node
  say "ready in $((SECONDS - start)) s with $nodes node(s)${real_node:+ and a real node}; use: eval \"\$($0 env --name $name)\""
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
  local all=("${components[@]}")
  [ -z "$real_node" ] || all+=("${node_components[@]}")
  for c in "${all[@]}"; do
    if alive "$c"; then echo "$c: running (pid $(pid_of "$c"))"; else echo "$c: not running"; rc=1; fi
  done
  if api_ready >/dev/null 2>&1; then echo "apiserver: ready at https://$(api_host):$(cat "$state/apiserver.port")"; else echo "apiserver: not ready"; rc=1; fi
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
  build-node) build_node ;;
  load) load ;;
  cache-dir) echo "$bin_dir" ;;
  *) die "usage: $0 up|down|status|env|build|build-node|load IMAGE...|restart-control-plane|cache-dir [--nodes N] [--real-node] [--down-seconds S] [--name NAME] [--controller-qps N]" ;;
esac
