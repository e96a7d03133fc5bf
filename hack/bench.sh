#!/usr/bin/env bash
# Benchmarks (release build): prints medians and ratios, the journal's figures on SQLite and on
# PostgreSQL side by side. Machines here are noisy: compare ratios and medians across runs, never
# single figures.
#
#   hack/bench.sh                                   PostgreSQL: a local server this script starts
#                                                   (hack/postgres.sh --name bench) and stops
#   ERU_TEST_POSTGRES_URL=postgres://... hack/bench.sh
#                                                   that server instead (databases eru_bench_*
#                                                   are created and dropped there)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eru/target}
# build first: the server does not need to sit idle through a release build
cargo bench --locked --bench journal --bench audit --bench notify --no-run
if [ -z "${ERU_TEST_POSTGRES_URL:-}" ]; then
  trap 'hack/postgres.sh stop --name bench' EXIT
  hack/postgres.sh start --name bench
  eval "$(hack/postgres.sh env --name bench)"
fi
cargo bench --locked --bench journal
# the audit page and /audit at 1,000 Erus and 1 M slot rows (SQLite)
cargo bench --locked --bench audit
# a burst of 10,000 notifications to one webhook, and the prune of 1 M settled rows (SQLite)
cargo bench --locked --bench notify
