#!/usr/bin/env bash
# Prints the path of a helm-unittest binary of the pinned version (hack/versions.env), building it
# once from the Go module proxy into the cache (no GitHub download, no `helm plugin install`),
# as hack/helm.sh does for helm. Later calls only print the path.
#
#   "$(hack/helm-unittest.sh)" --strict charts/eru-operator     # runs charts/eru-operator/tests/*_test.yaml
#
# The binary is the plugin's own command (`helm unittest` runs it); run directly it needs no helm
# and no plugin directory: it renders the chart with the Helm library it is built with.
# Its go.mod replaces a dependency (yaml-jsonpath with helm-unittest's fork), which `go install
# module@version` refuses and a wrapper module would ignore: the module's own source is built in a
# copy, so the replacement applies (GOFLAGS=-mod=mod lets go fill in go.sum's gaps).
#
# Environment: ERU_CACHE, the cache root (default ${XDG_CACHE_HOME:-~/.cache}/eru).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/versions.env source-path=SCRIPTDIR/..
source "$repo/hack/versions.env"

cache_root=${ERU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eru}
bin_dir="$cache_root/helm-unittest-${HELM_UNITTEST_VERSION}"
binary="$bin_dir/helm-unittest"
say() { printf '[helm-unittest] %s\n' "$*" >&2; }

if [ ! -x "$binary" ]; then
  command -v go >/dev/null || { say "error: go is required to build helm-unittest (Go >= 1.26)"; exit 1; }
  mkdir -p "$cache_root"
  # One build at a time (a second caller waits, then finds the binary).
  exec 9>"$cache_root/.helm-unittest-build.lock"
  flock 9
  if [ ! -x "$binary" ]; then
    start=$SECONDS
    tmp="$bin_dir.tmp.$$"
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp/src" "$tmp/bin"
    say "building helm-unittest $HELM_UNITTEST_VERSION into $bin_dir (a few minutes on 2 cores; cached afterwards)"
    module=github.com/helm-unittest/helm-unittest
    dir=$(go mod download -json "$module@$HELM_UNITTEST_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
    [ -n "$dir" ] || { say "error: go mod download $module@$HELM_UNITTEST_VERSION found no source"; exit 1; }
    cp -R "$dir/." "$tmp/src" && chmod -R u+w "$tmp/src"
    # the Kubernetes version its renders assume: its client-go's, as hack/helm.sh's helm (the
    # library's fallback, 1.20, is below the chart's kubeVersion)
    minor=$(sed -n 's/^[[:space:]]*k8s.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$tmp/src/go.mod")
    [ -n "$minor" ] || { say "error: no k8s.io/client-go in helm-unittest's go.mod"; exit 1; }
    ld="-s -w -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor"
    (
      cd "$tmp/src"
      CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="-mod=mod -trimpath" GOWORK=off \
        go build -ldflags "$ld" -o "$tmp/bin/helm-unittest" ./cmd/helm-unittest
    ) >&2
    rm -rf "$bin_dir" && mkdir -p "$bin_dir" && mv "$tmp/bin/helm-unittest" "$binary"
    say "built helm-unittest $HELM_UNITTEST_VERSION in $((SECONDS - start)) s"
  fi
fi
echo "$binary"
