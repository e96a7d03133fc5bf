#!/usr/bin/env bash
# Prints the path of a helm binary of the pinned version (hack/versions.env), building it once
# from the Go module proxy into the cache (no GitHub download), like hack/cluster.sh does for the
# control plane. Later calls only print the path.
#
#   "$(hack/helm.sh)" lint --strict charts/eru-operator
#
# Built as Helm's Makefile builds it: `helm template` and `helm lint` assume the Kubernetes version
# of the client-go Helm is built with (1.37 for v3.22.0), not the library's fallback 1.20, which
# the chart's kubeVersion (>=1.29) refuses. A binary built before this (no .kube-version beside
# it) is built again.
#
# Environment: ERU_CACHE, the cache root (default ${XDG_CACHE_HOME:-~/.cache}/eru).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/versions.env source-path=SCRIPTDIR/..
source "$repo/hack/versions.env"

cache_root=${ERU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eru}
bin_dir="$cache_root/helm-${HELM_VERSION}"
helm="$bin_dir/helm"
say() { printf '[helm] %s\n' "$*" >&2; }

if [ ! -x "$helm" ] || [ ! -s "$bin_dir/.kube-version" ]; then
  command -v go >/dev/null || { say "error: go is required to build helm (Go >= 1.26)"; exit 1; }
  mkdir -p "$cache_root"
  # One build at a time (a second caller waits, then finds the binary).
  exec 9>"$cache_root/.helm-build.lock"
  flock 9
  if [ ! -x "$helm" ] || [ ! -s "$bin_dir/.kube-version" ]; then
    start=$SECONDS
    tmp="$bin_dir.tmp.$$"
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp"
    say "building helm $HELM_VERSION into $bin_dir (a few minutes on 2 cores; cached afterwards)"
    # the default Kubernetes version: client-go v0.N.x is Kubernetes 1.N (Helm's Makefile)
    gomod=$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
    minor=$(sed -n 's/^[[:space:]]*k8s.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$gomod")
    [ -n "$minor" ] || { say "error: no k8s.io/client-go in helm $HELM_VERSION's go.mod"; exit 1; }
    ld="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
    for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
      ld+=" -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$minor"
    done
    CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-trimpath GOBIN="$tmp" go install \
      -ldflags "$ld" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
    echo "v1.$minor.0" >"$tmp/.kube-version"
    rm -rf "$bin_dir" && mv "$tmp" "$bin_dir"
    say "built helm $HELM_VERSION in $((SECONDS - start)) s"
  fi
fi
echo "$helm"
