#!/usr/bin/env bash
# The project's test command (README, .ci/run): unit and integration tests, then the end-to-end
# tests against a real local control plane that this script brings up with hack/cluster.sh and
# always takes down again, also when a test fails. The journal's tests run on SQLite and on a
# local PostgreSQL (hack/postgres.sh), started here and stopped with the cluster.
#
#   hack/test.sh                      everything
#   ERU_USE_EXISTING_CLUSTER=1 hack/test.sh
#                                     e2e tests against $KUBECONFIG instead of a fresh cluster
#   hack/test.sh -- <cargo test args> extra arguments for the e2e run (e.g. a test name)
#   ERU_TEST_POSTGRES_URL=postgres://... hack/test.sh
#                                     the journal's PostgreSQL tests on that server (they create
#                                     and drop databases) instead of a fresh local one
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
extra=()
[ "${1:-}" = "--" ] && { shift; extra=("$@"); }

# Build caches live outside the clone so fresh clones (CI) reuse them.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eru/target}
hack/deps.sh

start=$SECONDS
cluster=${ERU_TEST_CLUSTER:-test}
postgres_name="test"  # hack/postgres.sh --name
# What this script started, taken down on exit however it exits (the exit status is kept).
started_cluster="" started_postgres=""
cleanup() {
  [ -z "$started_cluster" ] || hack/cluster.sh down --name "$cluster" || true
  [ -z "$started_postgres" ] || hack/postgres.sh stop --name "$postgres_name" || true
}
trap cleanup EXIT

echo "== shellcheck, import layering"
shellcheck hack/*.sh .ci/run  # .shellcheckrc: follow sourced files
python3 hack/imports.py
echo "== docs: links and runbook anchors (hack/docs-check.py)"
python3 hack/docs-check.py
echo "== Helm chart: lint, renders deploy/, monitoring objects, schema (hack/chart-check.sh static)"
hack/chart-check.sh static
echo "== cargo fmt --check, clippy"
cargo fmt --all -- --check
cargo clippy --locked --all-targets -- -D warnings
if [ -z "${ERU_TEST_POSTGRES_URL:-}" ]; then
  echo "== PostgreSQL for the journal's tests (hack/postgres.sh)"
  started_postgres=1
  hack/postgres.sh start --name "$postgres_name"
  eval "$(hack/postgres.sh env --name "$postgres_name")"
fi
echo "== unit and integration tests (no cluster; the journal's on SQLite and PostgreSQL)"
cargo test --locked --all-targets

echo "== Python tools of the contract tests (hack/pytools.sh)"
hack/pytools.sh >/dev/null

if [ "${ERU_USE_EXISTING_CLUSTER:-}" != 1 ]; then
  hack/cluster.sh build
  echo "== the cold path of hack/cluster.sh up (empty cache and state, prebuilt binaries)"
  hack/cold-up-check.sh
  started_cluster=1
  hack/cluster.sh up --name "$cluster"
  eval "$(hack/cluster.sh env --name "$cluster")"
  # on the fresh cluster, before the e2e tests install the CRDs: helm must create them
  echo "== Helm chart on the cluster: dry-run=server of both value sets, helm install (hack/chart-check.sh cluster)"
  hack/chart-check.sh cluster
fi
[ -n "${KUBECONFIG:-}" ] || { echo "KUBECONFIG is not set" >&2; exit 1; }
# Tests are selected by file (one test binary each), never by a substring of their names: every
# file of tests/ but faults.rs, which runs alone below.
e2e=()
for file in tests/*.rs; do
  name=$(basename "$file" .rs)
  [ "$name" = faults ] || e2e+=(--test "$name")
done
echo "== end-to-end tests against $KUBECONFIG"
cargo test --locked --no-fail-fast "${e2e[@]}" -- --ignored --test-threads 2 "${extra[@]}"
echo "== the Eru, ledger, fleet and targets end-to-end tests again, on a PostgreSQL journal"
pg_start=$SECONDS
ERU_E2E_JOURNAL=postgres cargo test --locked --no-fail-fast --test eru --test ledger --test fleet --test targets \
  -- --ignored --test-threads 2 "${extra[@]}"
echo "(on PostgreSQL in $((SECONDS - pg_start)) s)"
if [ "${ERU_USE_EXISTING_CLUSTER:-}" != 1 ]; then
  # they restart the control plane and the database server: alone, one at a time
  echo "== fault tests (tests/faults.rs), one at a time"
  skip=()
  [ -n "$started_postgres" ] || { echo "(fault_postgres_restarted skipped: the PostgreSQL server is not ours to restart)"; skip=(--exact --skip fault_postgres_restarted); }
  ERU_TEST_CLUSTER=$cluster ERU_TEST_POSTGRES_NAME=$postgres_name \
    cargo test --locked --no-fail-fast --test faults -- --ignored --test-threads 1 "${skip[@]}" "${extra[@]}"
else
  echo "== fault tests skipped: they restart the control plane, which an existing cluster is not ours to do"
fi
echo "== all tests passed in $((SECONDS - start)) s"
