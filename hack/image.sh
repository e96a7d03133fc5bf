#!/usr/bin/env bash
# The operator's image built from ./Dockerfile as committed, with Debian's podman and without a
# Docker engine or a registry, plus the base images the Dockerfile names, built here the way their
# upstreams build them (no registry can be pulled from on this project's machines):
#
#   gcr.io/distroless/cc-debian12:nonroot   from Debian bookworm's packages, as distroless/cc is:
#                                           glibc, libgcc, libstdc++, libgomp, libssl3,
#                                           ca-certificates, tzdata, netbase, base-files; the
#                                           users root, nobody and nonroot (65532)
#   buildpack-deps:bookworm (a subset)      a bookworm root file system (debootstrap minbase with
#                                           the compilers the build needs)
#   rust:1.95-bookworm                      that + rustup-init from static.rust-lang.org (checksum
#                                           pinned in hack/versions.env) installing the pinned
#                                           toolchain, as the official rust image's Dockerfile does
#
#   hack/image.sh bases                     build the base images that are missing (cached)
#   hack/image.sh build [--profile P] [--tag T]
#                                           bases, then `podman build` of ./Dockerfile as
#                                           localhost/eru-operator:T (default: dev); P is the
#                                           Dockerfile's CARGO_PROFILE (default release)
#   hack/image.sh pause                     registry.k8s.io/pause from K8S_VERSION's pause.c
#   hack/image.sh web                       the e2e tests' workload: Debian's static busybox
#                                           (httpd), localhost/eru-e2e-web:<busybox version>
#   hack/image.sh save OUT.tar IMAGE...     a docker-archive of images (for `ctr images import`)
#   hack/image.sh podman ARGS...            podman on this script's storage (e.g. `images`)
#   hack/image.sh prune                     drop images no tag keeps (old build layers) and the
#                                           working containers an interrupted build left
#
# Storage: podman's --root is ERU_CACHE/podman (default ~/.cache/eru/podman) and the builds'
# `RUN --mount=type=cache` folders (the Dockerfile's cargo registry and target folder) are in
# ERU_CACHE/podman-tmp, so every clone of the repository (CI's fresh ones too) reuses the base
# images, the Dockerfile's layers and the compiled dependencies. Flags (the ones CI runs):
# --storage-driver vfs, --isolation chroot, --pull=never; `podman run` needs
# --ulimit nofile=1024:1024 --ulimit nproc=1024:1024.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/versions.env source-path=SCRIPTDIR/..
source "$repo/hack/versions.env"

cache_root=${ERU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eru}
storage="$cache_root/podman"
runtime_image=gcr.io/distroless/cc-debian12:nonroot
buildpack_image=docker.io/library/buildpack-deps:bookworm
rust_image=docker.io/library/rust:1.95-bookworm
say() { printf '[image] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

podman_() {
  # runroot holds locks and mount state: on /run (cleared at boot), one per storage root
  local run
  run="/run/eru-podman-$(printf '%s' "$storage" | sha256sum | cut -c1-12)"
  # TMPDIR: where the builds' `RUN --mount=type=cache` folders live (buildah-cache/ in it; the
  # Dockerfile's cargo registry and target folder), beside the storage rather than in /var/tmp
  mkdir -p "$cache_root/podman-tmp"
  TMPDIR="$cache_root/podman-tmp" podman --root "$storage" --runroot "$run" --storage-driver vfs \
    --cgroup-manager cgroupfs --events-backend file "$@"
}

# A base image is rebuilt when the function that builds it changes (its text is hashed into the
# image's label eru.recipe), never otherwise.
recipe() { { declare -f "$1"; declare -p RUST_VERSION RUSTUP_VERSION RUSTUP_SHA256 K8S_VERSION PAUSE_VERSION; } | sha256sum | cut -c1-16; }
current() { # current IMAGE FUNCTION: IMAGE exists and was built by FUNCTION as it is now
  [ "$(podman_ image inspect --format '{{index .Labels "eru.recipe"}}' "$1" 2>/dev/null)" = "$(recipe "$2")" ]
}

# The host's CA bundle, bind-mounted read-only into the RUN steps that download (rustup, cargo):
# where egress passes a TLS-intercepting proxy (this project's machines do), its CA is only in the
# host's bundle. Nothing of it lands in a layer; on any other machine it is the same public CAs.
host_ca=/etc/ssl/certs/ca-certificates.crt
network_args() { [ ! -s "$host_ca" ] || echo "--volume=$host_ca:$host_ca:ro"; }

timed() { # timed LABEL cmd...
  local label=$1 start=$SECONDS
  shift
  say "building $label ..."
  "$@"
  say "built $label in $((SECONDS - start)) s"
}

# Debian packages into FOLDER, at the versions bookworm's archive serves today (apt pins them: the
# versions land in the image's /var/lib/dpkg/status.d/, as distroless records them).
debs() { # debs FOLDER PACKAGE...
  local dir=$1
  shift
  mkdir -p "$dir"
  [ -n "$(find /var/lib/apt/lists -name '*_Packages*' -print -quit 2>/dev/null)" ] || apt-get update -qq
  (cd "$dir" && apt-get download -qq -o APT::Sandbox::User=root "$@" >/dev/null) || die "apt-get download $* failed"
}

build_runtime() {
  local work root deb name pkgs=(base-files netbase tzdata ca-certificates libc6 libgcc-s1 libgomp1 libstdc++6 libssl3)
  work=$(mktemp -d)
  root="$work/root"
  debs "$work/debs" "${pkgs[@]}"
  mkdir -p "$root/var/lib/dpkg/status.d"
  for deb in "$work"/debs/*.deb; do
    dpkg-deb -x "$deb" "$root"
    name=$(dpkg-deb -f "$deb" Package)
    dpkg-deb -f "$deb" >"$root/var/lib/dpkg/status.d/$name"
  done
  # what ca-certificates' maintainer script (update-ca-certificates) would make
  mkdir -p "$root/etc/ssl/certs"
  cat "$root"/usr/share/ca-certificates/mozilla/*.crt >"$root/etc/ssl/certs/ca-certificates.crt"
  # distroless's users and groups (base/passwd.bzl): root, nobody, nonroot 65532
  cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOF
  cat >"$root/etc/group" <<'EOF'
root:x:0:
tty:x:5:
staff:x:50:
nobody:x:65534:
nonroot:x:65532:
EOF
  mkdir -p "$root/root" "$root/home/nonroot" "$root/tmp"
  chmod 0700 "$root/root" "$root/home/nonroot"
  chown 65532:65532 "$root/home/nonroot"
  chmod 1777 "$root/tmp"
  # documentation and manual pages: distroless keeps only the copyright files
  find "$root/usr/share/doc" -type f ! -name copyright -delete 2>/dev/null || true
  rm -rf "$root/usr/share/man" "$root/usr/share/info" "$root/usr/share/lintian"
  tar -C "$root" --numeric-owner -c . |
    podman_ import --quiet --change 'USER 65532' --change 'WORKDIR /home/nonroot' \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
      --change "LABEL eru.recipe=$(recipe build_runtime)" - "$runtime_image" >/dev/null
  rm -rf "$work"
}

build_buildpack() {
  command -v debootstrap >/dev/null || die "debootstrap is missing (hack/deps.sh installs it)"
  local work mirror
  work=$(mktemp -d)
  mirror=${ERU_DEBIAN_MIRROR:-http://deb.debian.org/debian}
  debootstrap --variant=minbase --include=ca-certificates,curl,gcc,libc6-dev,make,pkg-config,xz-utils,git \
    bookworm "$work/root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -n 20 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
  # what a container image does not need: the package cache and lists
  rm -rf "$work/root/var/cache/apt/archives/"*.deb "$work/root/var/lib/apt/lists/"*
  tar -C "$work/root" --numeric-owner -c . |
    podman_ import --quiet --change 'CMD ["bash"]' --change "LABEL eru.recipe=$(recipe build_buildpack)" \
      - "$buildpack_image" >/dev/null
  rm -rf "$work"
}

build_rust() {
  local ctx
  ctx=$(mktemp -d)
  # the official image's Dockerfile (rust-lang/docker-rust, bookworm), with rustup pinned here
  cat >"$ctx/Containerfile" <<EOF
FROM $buildpack_image
ENV RUSTUP_HOME=/usr/local/rustup CARGO_HOME=/usr/local/cargo \
    PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    RUST_VERSION=$RUST_VERSION
RUN set -eux; \
    url="https://static.rust-lang.org/rustup/archive/$RUSTUP_VERSION/x86_64-unknown-linux-gnu/rustup-init"; \
    curl -fsSL --retry 3 -o rustup-init "\$url"; \
    echo "$RUSTUP_SHA256 *rustup-init" | sha256sum -c -; \
    chmod +x rustup-init; \
    ./rustup-init -y --no-modify-path --profile minimal --default-toolchain \$RUST_VERSION \
      --default-host x86_64-unknown-linux-gnu; \
    rm rustup-init; \
    chmod -R a+w \$RUSTUP_HOME \$CARGO_HOME; \
    rustup --version; cargo --version; rustc --version
LABEL eru.recipe=$(recipe build_rust)
EOF
  # shellcheck disable=SC2046 # network_args prints one word or none
  podman_ build --isolation chroot --pull=never --layers $(network_args) \
    -t "$rust_image" -f "$ctx/Containerfile" "$ctx" >&2
  rm -rf "$ctx"
}

bases() {
  mkdir -p "$cache_root"
  exec 8>"$cache_root/.image-bases.lock"
  flock 8
  current "$runtime_image" build_runtime || timed "$runtime_image (Debian bookworm packages)" build_runtime
  local rebuilt=""
  if ! current "$buildpack_image" build_buildpack; then
    timed "$buildpack_image (debootstrap bookworm, minbase)" build_buildpack
    rebuilt=1
  fi
  # rust is rebuilt on top of a rebuilt buildpack-deps too
  if [ -n "$rebuilt" ] || ! current "$rust_image" build_rust; then
    timed "$rust_image (rustup $RUSTUP_VERSION, Rust $RUST_VERSION)" build_rust
  fi
}

build() {
  local profile=release tag=dev start=$SECONDS
  while [ $# -gt 0 ]; do
    case "$1" in
      --profile) profile=${2:?--profile needs a cargo profile}; shift 2 ;;
      --tag) tag=${2:?--tag needs a value}; shift 2 ;;
      *) die "unknown argument: $1" ;;
    esac
  done
  bases
  # one build at a time (hack/test.sh starts one early, hack/real-node-e2e.sh asks again): the
  # second waits, then finds every layer built
  exec 7>"$cache_root/.image-build.lock"
  flock 7
  say "podman build of ./Dockerfile as localhost/eru-operator:$tag (CARGO_PROFILE=$profile)"
  # the exact command CI runs (docs/operations.md, The image)
  # shellcheck disable=SC2046 # network_args prints one word or none
  podman_ build --isolation chroot --pull=never --layers $(network_args) --build-arg "CARGO_PROFILE=$profile" \
    -t "localhost/eru-operator:$tag" -f "$repo/Dockerfile" "$repo" >&2
  prune
  say "built localhost/eru-operator:$tag in $((SECONDS - start)) s"
}

# vfs stores every layer as a full copy of its file system: the layers of earlier builds that no
# tag keeps go, and the dependency stage earlier versions of the Dockerfile tagged (cargo-chef's,
# replaced by a cache mount; 2.5 GB each in a cache kept from before).
prune() {
  # A build interrupted (Ctrl-C, a killed CI run) leaves buildah's working containers behind, and
  # they keep their images from being pruned: "image is in use by a container" failed every later
  # build. None of ours runs now (the caller holds the build lock), so they go first.
  local leftover
  leftover=$(podman_ ps -a --external --format '{{.ID}} {{.State}}' | awk '$2 == "Storage" {print $1}')
  if [ -n "$leftover" ]; then
    say "removing $(wc -w <<<"$leftover") working containers an interrupted build left"
    # shellcheck disable=SC2086 # one ID a word
    podman_ rm -f $leftover >/dev/null
  fi
  podman_ rmi -i localhost/eru-operator-cook:dev localhost/eru-operator-cook:release >/dev/null
  podman_ image prune -f >/dev/null
}

pause() {
  local name="registry.k8s.io/pause:$PAUSE_VERSION"
  current "$name" build_pause && return 0
  timed "$name (K8S_VERSION's build/pause/linux/pause.c, gcc -static)" build_pause
}

build_pause() {
  local name="registry.k8s.io/pause:$PAUSE_VERSION" dir ctx
  dir=$(cd /tmp && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [ -s "$dir/build/pause/linux/pause.c" ] || die "no build/pause/linux/pause.c in k8s.io/kubernetes@$K8S_VERSION"
  ctx=$(mktemp -d)
  # upstream's build/pause/Makefile: gcc -Os -Wall -Werror -static -DVERSION=...
  gcc -Os -Wall -Werror -static -DVERSION="$PAUSE_VERSION-eru" -o "$ctx/pause" "$dir/build/pause/linux/pause.c"
  strip "$ctx/pause"
  # upstream's build/pause/Dockerfile
  printf 'FROM scratch\nADD pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\nLABEL eru.recipe=%s\n' \
    "$(recipe build_pause)" >"$ctx/Containerfile"
  podman_ build --isolation chroot --pull=never -t "$name" -f "$ctx/Containerfile" "$ctx" >/dev/null
  rm -rf "$ctx"
}

web_name() { echo "localhost/eru-e2e-web:$(apt-cache policy busybox-static | sed -n 's/^ *Candidate: \(.*\)$/\1/p' | tr ':+~' '---')"; }

web() {
  local name
  name=$(web_name)
  if ! podman_ image exists "$name"; then timed "$name (Debian's busybox-static)" build_web "$name"; fi
  echo "$name"
}

build_web() {
  local ctx
  ctx=$(mktemp -d)
  debs "$ctx/debs" busybox-static
  dpkg-deb -x "$ctx"/debs/busybox-static_*.deb "$ctx/root"
  mkdir -p "$ctx/root/www"
  echo ok >"$ctx/root/www/index.html"
  printf 'FROM scratch\nCOPY root/bin/busybox /bin/busybox\nCOPY root/www /www\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\nUSER 65532:65532\nENTRYPOINT ["/bin/sh"]\n' \
    >"$ctx/Containerfile"
  podman_ build --isolation chroot --pull=never -t "$1" -f "$ctx/Containerfile" "$ctx" >/dev/null
  rm -rf "$ctx"
}

save() {
  local out=${1:?save needs OUT.tar IMAGE...}
  shift
  [ $# -gt 0 ] || die "save needs at least one image"
  podman_ save --quiet --format docker-archive -m -o "$out" "$@" >/dev/null
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  bases) bases ;;
  build) build "$@" ;;
  pause) pause ;;
  web) web ;;
  save) save "$@" ;;
  prune) exec 7>"$cache_root/.image-build.lock"; flock 7; prune ;;
  podman) podman_ "$@" ;;
  *) die "usage: $0 bases|build [--profile P] [--tag T]|pause|web|save OUT.tar IMAGE...|prune|podman ARGS..." ;;
esac
