# syntax=docker/dockerfile:1.7
#
# Multi-stage build of eru-operator.

# ---- build ------------------------------------------------------------------
FROM rust:1.95-bookworm AS build
WORKDIR /src

# Dependency layer: build against a dummy crate with the real manifest and
# lock file, so the dependencies are cached until Cargo.toml/Cargo.lock change.
COPY Cargo.toml Cargo.lock ./
RUN mkdir src \
 && echo 'fn main() {}' > src/main.rs \
 && touch src/lib.rs
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    cargo build --release --locked

# The real sources. migrations/ is needed at compile time: sqlx::migrate!
# embeds the SQL files into the binary.
COPY src/ src/
COPY migrations/ migrations/
# Make the sources newer than the dummy build so cargo rebuilds our crate.
RUN touch src/main.rs src/lib.rs
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    cargo build --release --locked

# ---- runtime ----------------------------------------------------------------
# distroless/cc: glibc + libgcc, no shell. The image's "nonroot" user is 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/eru-operator /usr/local/bin/eru-operator
USER 65532:65532
# The root filesystem can be read-only: the binary writes only to the
# journal volume (the SQLite database and its -wal/-shm files).
VOLUME /var/lib/eru
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/eru-operator"]
CMD ["run", "--database", "/var/lib/eru/eru.db"]
