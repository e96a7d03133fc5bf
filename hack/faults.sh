#!/usr/bin/env bash
# The fault tests (tests/faults.rs), one at a time, on a control plane and a PostgreSQL server of
# their own (both named "faults"): they restart them. Taken down on exit, also when a test fails.
# hack/test.sh runs it beside the other end-to-end suites.
#
#   hack/faults.sh [--also SUITE]... [-- <test binary args>]   (e.g. -- fault_journal_disk_full)
#
#   --also SUITE   another test binary (tests/SUITE.rs) that needs a cluster to itself, run on
#                  this one after the fault tests: hack/test.sh gives it tests/apf.rs (its
#                  FlowSchema throttles every operator of the cluster), which would otherwise hold
#                  the main cluster alone at the end of the run
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
extra=() also=()
while [ $# -gt 0 ]; do
  case "$1" in
    --also) also+=("${2:?--also needs a suite}"); shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "unknown argument: $1 (see the header of $0)" >&2; exit 1 ;;
  esac
done
trap 'hack/cluster.sh down --name faults || true; hack/postgres.sh stop --name faults || true' EXIT
hack/cluster.sh up --name faults
hack/postgres.sh start --name faults
eval "$(hack/cluster.sh env --name faults)"
eval "$(hack/postgres.sh env --name faults)"
# every suite runs, also after one failed; the exit status says whether any did
status=0
ERU_TEST_CLUSTER=faults ERU_TEST_POSTGRES_NAME=faults \
  hack/suites.sh --name faults --jobs 1 --threads 1 faults -- "${extra[@]}" || status=1
for suite in "${also[@]}"; do
  hack/suites.sh --name "$suite" "$suite" -- "${extra[@]}" || status=1
done
exit "$status"
