#!/usr/bin/env bash
# Installs what the tests and the demo need beyond the machine's toolchains (Rust, Go), from
# Debian's packages. Idempotent; installs only what is missing.
set -euo pipefail
missing=()
command -v openssl >/dev/null || missing+=(openssl)
command -v curl >/dev/null || missing+=(curl)
command -v python3 >/dev/null || missing+=(python3)
# the contract tests' tools live in a virtualenv (hack/pytools.sh)
python3 -m venv --help >/dev/null 2>&1 || missing+=(python3-venv)
# the docs and chart checks, hack/prometheusrule.py
python3 -c 'import yaml' 2>/dev/null || missing+=(python3-yaml)
command -v flock >/dev/null || missing+=(util-linux)
command -v promtool >/dev/null || missing+=(prometheus)
# the silence an Eru holds while it restarts is tested against a real Alertmanager (hack/alertmanager.sh)
command -v prometheus-alertmanager >/dev/null || missing+=(prometheus-alertmanager)
command -v shellcheck >/dev/null || missing+=(shellcheck)
command -v pgrep >/dev/null || missing+=(procps)
# jemalloc, the operator's allocator, is built from its C sources (tikv-jemalloc-sys)
command -v make >/dev/null || missing+=(make)
# the audit page is checked in a real browser (tests/audit.rs)
command -v chromium >/dev/null || missing+=(chromium)
# the journal's PostgreSQL backend is tested against a local server (hack/postgres.sh)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
# the image (hack/image.sh): podman builds ./Dockerfile without a Docker engine; debootstrap
# makes the builder's bookworm root file system; gcc (with glibc's static libc) the pause binary
command -v podman >/dev/null || missing+=(podman)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v gcc >/dev/null || missing+=(gcc libc6-dev)
# the real node (hack/cluster.sh up --real-node): containerd, runc, the CNI plugins (bridge,
# host-local, loopback, portmap), iptables and conntrack for kube-proxy
command -v containerd >/dev/null || missing+=(containerd)
command -v runc >/dev/null || missing+=(runc)
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
command -v iptables >/dev/null || missing+=(iptables)
command -v conntrack >/dev/null || missing+=(conntrack)
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${missing[@]}"
fi
command -v cargo >/dev/null || { echo "cargo (Rust >= 1.94) is required" >&2; exit 1; }
command -v go >/dev/null || { echo "go (>= 1.26) is required to build the control plane" >&2; exit 1; }
