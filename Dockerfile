# syntax=docker/dockerfile:1.7
#
# Multi-stage build of eru-operator: `docker build -t eru-operator .` (or `podman build`).
#
#   --build-arg CARGO_PROFILE=release   the default: the optimised, stripped, whole-program build
#                                       users run (Cargo.toml's [profile.release])
#   --build-arg CARGO_PROFILE=dev       a debug build in a fraction of the time (the project's CI:
#                                       hack/image.sh build --profile dev)
#
# The dependencies' build is kept in a cache mount (`RUN --mount=type=cache`, BuildKit's and
# podman's), not in a layer: cargo's target folder outlives the build, so the next build
# recompiles only what changed (the crate after a source edit; a changed dependency and what
# depends on it, not all of them, after a lock-file change). A layer of dependencies (cargo-chef's
# cook stage, used here before) was rebuilt whole at any change of the manifest, cost a release
# build of cargo-chef itself first, and a builder that stores each layer as a full copy (podman's
# vfs) copied its 2.5 GB once more for each step after it: about half of a build that changed
# only the sources. Pass a cache between CI builders as their tool allows (BuildKit's cache
# mounts are not exported with the image's layers).
#
# The sources are bind-mounted (read-only, the build context as .dockerignore leaves it) into the
# step that reads them, never copied into a layer. The build folder is /target, outside /src.

# ---- the operator ---------------------------------------------------------------------------------
FROM rust:1.95-bookworm AS build
ARG CARGO_PROFILE=release
ENV CARGO_TARGET_DIR=/target
WORKDIR /src
# migrations/ is read at compile time (sqlx::migrate! embeds the SQL files), benches/ because the
# manifest declares them: the whole context is mounted. `sharing=locked`: two builds at once
# (two profiles, two tags) take turns on the target folder rather than corrupt it.
RUN --mount=type=bind,target=/src \
    --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/target,sharing=locked \
    cargo build --profile "$CARGO_PROFILE" --locked --bin eru-operator \
 && dir=$([ "$CARGO_PROFILE" = dev ] && echo debug || echo "$CARGO_PROFILE") \
 && cp "/target/$dir/eru-operator" /eru-operator

# ---- runtime ------------------------------------------------------------------------------------
# distroless/cc: glibc + libgcc, no shell. The image's "nonroot" user is 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /eru-operator /usr/local/bin/eru-operator
USER 65532:65532
# The root filesystem can be read-only: the binary writes only to the
# journal volume (the SQLite database and its -wal/-shm files).
VOLUME /var/lib/eru
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/eru-operator"]
CMD ["run", "--database", "/var/lib/eru/eru.db"]
