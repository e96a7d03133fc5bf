# syntax=docker/dockerfile:1.7
#
# Multi-stage build of eru-operator: `docker build -t eru-operator .` (or `podman build`).
#
#   --build-arg CARGO_PROFILE=release   the default: the optimised, stripped, whole-program build
#                                       users run (Cargo.toml's [profile.release])
#   --build-arg CARGO_PROFILE=dev       a debug build in a fraction of the time (the project's CI:
#                                       hack/image.sh build --profile dev)
#
# The dependency layer is cargo-chef's: `cargo chef prepare` reduces the manifest and lock file
# to a recipe (every target the manifest declares, benches and examples included, as a stub), and
# `cargo chef cook` builds the dependencies from it. The layer is rebuilt only when the recipe
# changes (a dependency, a feature, a profile), not when the sources or docs do.
#
# The sources are bind-mounted (read-only, the build context as .dockerignore leaves it) into the
# steps that read them, never copied into a layer: a builder that stores each layer as a full copy
# (podman's vfs) would copy the toolchain and the dependencies' build folder once more for each
# `COPY`. The build folder is /target, outside the mounted /src.

# ---- cargo-chef on the Rust toolchain ----------------------------------------------------------
FROM rust:1.95-bookworm AS chef
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    cargo install cargo-chef --version 0.1.78 --locked
WORKDIR /src
ENV CARGO_TARGET_DIR=/target

# ---- the recipe: the manifest and lock file without the sources ---------------------------------
FROM chef AS planner
RUN --mount=type=bind,target=/src \
    cargo chef prepare --recipe-path /recipe.json

# ---- the dependencies, cached until the recipe changes ------------------------------------------
FROM chef AS cook
ARG CARGO_PROFILE=release
# kept for the build stage: one more step there would be one more copy of this stage
ENV CARGO_PROFILE=$CARGO_PROFILE
COPY --from=planner /recipe.json /recipe.json
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    cargo chef cook --profile "$CARGO_PROFILE" --locked --bin eru-operator --recipe-path /recipe.json

# ---- the operator ---------------------------------------------------------------------------------
FROM cook AS build
# migrations/ is read at compile time (sqlx::migrate! embeds the SQL files), benches/ because the
# manifest declares them: the whole context is mounted.
RUN --mount=type=bind,target=/src \
    --mount=type=cache,target=/usr/local/cargo/registry \
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
