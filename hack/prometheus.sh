#!/usr/bin/env bash
# Prints the path of an upstream Prometheus server of the pinned version (hack/versions.env),
# building it once from the Go module proxy into the cache, like hack/helm.sh does for Helm.
# Later calls only print the path.
#
# tests/observability.rs runs it with the configuration prometheus-operator generates from the
# chart's ServiceMonitor, which discovers its targets with kubernetes_sd_configs: Debian's
# `prometheus` package (the other tests' Prometheus) is built without Kubernetes service
# discovery (its NEWS.Debian: "Kubernetes support has been completely removed"). Built with only
# that service discovery (build tags remove_all_sd,enable_kubernetes_sd) and without the web UI's
# assets: the test needs the HTTP API, the scrapes and the rules.
# Environment: ERU_CACHE, the cache root (default ${XDG_CACHE_HOME:-~/.cache}/eru).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/versions.env source-path=SCRIPTDIR/..
source "$repo/hack/versions.env"

module=github.com/prometheus/prometheus
cache_root=${ERU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eru}
bin_dir="$cache_root/prometheus-${PROMETHEUS_VERSION}"
binary="$bin_dir/prometheus"
say() { printf '[prometheus] %s\n' "$*" >&2; }

if [ ! -x "$binary" ]; then
  command -v go >/dev/null || { say "error: go is required to build Prometheus (Go >= 1.26)"; exit 1; }
  mkdir -p "$cache_root"
  # One build at a time (a second caller waits, then finds the binary).
  exec 9>"$cache_root/.prometheus-build.lock"
  flock 9
  if [ ! -x "$binary" ]; then
    start=$SECONDS
    tmp="$bin_dir.tmp.$$"
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp"
    say "building Prometheus $PROMETHEUS_VERSION ($module@$PROMETHEUS_MODULE_VERSION) into $bin_dir (a few minutes on 2 cores; cached afterwards)"
    CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-trimpath GOBIN="$tmp" go install \
      -tags remove_all_sd,enable_kubernetes_sd \
      -ldflags "-s -w -X github.com/prometheus/common/version.Version=${PROMETHEUS_VERSION#v}" \
      "$module/cmd/prometheus@$PROMETHEUS_MODULE_VERSION" >&2
    rm -rf "$bin_dir" && mv "$tmp" "$bin_dir"
    say "built Prometheus $PROMETHEUS_VERSION in $((SECONDS - start)) s; cache size $(du -sh "$bin_dir" | cut -f1)"
  fi
fi
echo "$binary"
