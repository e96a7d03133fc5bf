#!/usr/bin/env bash
# Prints the path of a prometheus-operator binary of the pinned version (hack/versions.env),
# building it once from the Go module proxy into the cache, like hack/helm.sh does for Helm, with
# the module's own CRDs (example/prometheus-operator-crd/) copied beside it. Later calls only
# print the path.
#
#   "$(hack/prometheus-operator.sh)" --kubeconfig ...   the operator (cmd/operator)
#   hack/prometheus-operator.sh crds                    the folder of its CRDs
#
# tests/observability.rs runs it out of cluster against the local control plane, so that the
# chart's ServiceMonitor is turned into Prometheus configuration by the real thing.
# Environment: ERU_CACHE, the cache root (default ${XDG_CACHE_HOME:-~/.cache}/eru).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/versions.env source-path=SCRIPTDIR/..
source "$repo/hack/versions.env"

module=github.com/prometheus-operator/prometheus-operator
cache_root=${ERU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eru}
bin_dir="$cache_root/prometheus-operator-${PROMETHEUS_OPERATOR_VERSION}"
binary="$bin_dir/prometheus-operator"
say() { printf '[prometheus-operator] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

if [ ! -x "$binary" ] || [ ! -s "$bin_dir/crds/monitoring.coreos.com_servicemonitors.yaml" ]; then
  command -v go >/dev/null || die "go is required to build prometheus-operator (Go >= 1.26)"
  mkdir -p "$cache_root"
  # One build at a time (a second caller waits, then finds the binary).
  exec 9>"$cache_root/.prometheus-operator-build.lock"
  flock 9
  if [ ! -x "$binary" ] || [ ! -s "$bin_dir/crds/monitoring.coreos.com_servicemonitors.yaml" ]; then
    start=$SECONDS
    tmp="$bin_dir.tmp.$$"
    work=$(mktemp -d)
    trap 'rm -rf "$tmp" "$work"' EXIT
    mkdir -p "$tmp/crds"
    say "building prometheus-operator $PROMETHEUS_OPERATOR_VERSION into $bin_dir (a few minutes on 2 cores; cached afterwards)"
    export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-trimpath
    (
      cd "$work"
      # its go.mod replaces pkg/apis/monitoring and pkg/client with local folders, so `go install
      # module@version` refuses it: a wrapper module takes their published twins of the same version
      go mod init example.invalid/prometheus-operator >/dev/null 2>&1
      go get -tool "$module/cmd/operator@$PROMETHEUS_OPERATOR_VERSION" >/dev/null 2>&1 ||
        die "could not resolve $module@$PROMETHEUS_OPERATOR_VERSION from the Go module proxy"
      go build -ldflags "-s -w -X github.com/prometheus/common/version.Version=${PROMETHEUS_OPERATOR_VERSION#v}" \
        -o "$tmp/prometheus-operator" "$module/cmd/operator" >&2
    )
    dir=$(go mod download -json "$module@$PROMETHEUS_OPERATOR_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
    [ -s "$dir/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml" ] ||
      die "no CRDs in $dir/example/prometheus-operator-crd"
    cp "$dir"/example/prometheus-operator-crd/*.yaml "$tmp/crds/"
    chmod -R u+w "$tmp"
    rm -rf "$bin_dir" && mv "$tmp" "$bin_dir"
    say "built prometheus-operator $PROMETHEUS_OPERATOR_VERSION in $((SECONDS - start)) s; cache size $(du -sh "$bin_dir" | cut -f1)"
  fi
fi
case "${1:-}" in
  "") echo "$binary" ;;
  crds) echo "$bin_dir/crds" ;;
  *) die "usage: hack/prometheus-operator.sh [crds]" ;;
esac
