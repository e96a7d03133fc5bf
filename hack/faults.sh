#!/usr/bin/env bash
# The fault tests (tests/faults.rs), one at a time, on a control plane and a PostgreSQL server of
# their own (both named "faults"): they restart them. Taken down on exit, also when a test fails.
# hack/test.sh runs it beside the other end-to-end suites.
#
#   hack/faults.sh [-- <test binary args>]   (e.g. -- fault_journal_disk_full)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
extra=()
[ "${1:-}" = "--" ] && { shift; extra=("$@"); }
trap 'hack/cluster.sh down --name faults || true; hack/postgres.sh stop --name faults || true' EXIT
hack/cluster.sh up --name faults
hack/postgres.sh start --name faults
eval "$(hack/cluster.sh env --name faults)"
eval "$(hack/postgres.sh env --name faults)"
ERU_TEST_CLUSTER=faults ERU_TEST_POSTGRES_NAME=faults \
  hack/suites.sh --name faults --jobs 1 --threads 1 faults -- "${extra[@]}"
