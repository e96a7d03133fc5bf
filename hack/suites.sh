#!/usr/bin/env bash
# Runs end-to-end test binaries (tests/NAME.rs) side by side against the cluster of $KUBECONFIG:
# most of an e2e test's time is spent waiting for a slot, so binaries that share nothing but the
# cluster overlap their waits. Each test makes a namespace of its own and runs its operator with
# --namespace, so binaries do not see each other's Erus; a suite that changes what every operator
# of the cluster sees (tests/apf.rs: a FlowSchema for the operators' ServiceAccount) is run alone,
# after this (hack/test.sh).
#
#   hack/suites.sh [--jobs N] [--threads T] [--name LABEL] SUITE... [-- <test binary args>]
#
#   SUITE        NAME (tests/NAME.rs) or NAME@postgres (the same, its operators on a PostgreSQL
#                journal: ERU_E2E_JOURNAL=postgres, on $ERU_TEST_POSTGRES_URL)
#   --jobs N     binaries at once (default 3)
#   --threads T  tests at once within a binary (default 2)
#   --name LABEL the label of this run in the summary (default e2e)
#
# The binaries are built first (one `cargo test --no-run`), then started longest first (their
# last wall times, kept in $CARGO_TARGET_DIR/eru-suite-times.LABEL, else hack/suite-times.LABEL).
# Each one's output goes to a file of
# its own; a line is printed when a binary ends, and the whole output of every failed binary at
# the end, then each failed test's panic, then a table of the binaries with their wall times.
# ERU_SUITE_LOGS=DIR keeps every binary's output in DIR/SUITE.log. Exit status 1 if any failed.
# Why not cargo-nextest: its binaries are GitHub downloads (not reachable here) or a build of
# minutes on a fresh machine, and the grouping needed (a suite alone, suites per cluster) is a
# few lines here.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
jobs=3 threads=2 label=e2e suites=() args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs) jobs=${2:?--jobs needs a number}; shift 2 ;;
    --threads) threads=${2:?--threads needs a number}; shift 2 ;;
    --name) label=${2:?--name needs a label}; shift 2 ;;
    --) shift; args=("$@"); break ;;
    -*) echo "unknown flag: $1 (see the header of $0)" >&2; exit 1 ;;
    *) suites+=("$1"); shift ;;
  esac
done
[ ${#suites[@]} -gt 0 ] || { echo "no suite named (see the header of $0)" >&2; exit 1; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eru/target}
say() { printf '[%s %5ss] %s\n' "$label" "$((SECONDS - start))" "$*"; }
start=$SECONDS

# NAME -> its test executable, from cargo's own report of what it built
tests=()
for suite in "${suites[@]}"; do tests+=(--test "${suite%@postgres}"); done
declare -A binary=()
build_log=$(mktemp)
while IFS=' ' read -r name path; do binary[$name]=$path; done < <(
  cargo test --locked --no-run --message-format=json "${tests[@]}" 2>"$build_log" | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "test" in m["target"]["kind"]:
        print(m["target"]["name"], m["executable"])')
for suite in "${suites[@]}"; do
  [ -n "${binary[${suite%@postgres}]:-}" ] ||
    { cat "$build_log" >&2; echo "no test binary for $suite (cargo test --no-run --test ${suite%@postgres})" >&2; exit 1; }
done
rm -f "$build_log"

# longest first: a long suite started last would be the run's tail. The last wall times come
# from the build folder; hack/suite-times.LABEL (committed, measured in CI) stands in for a fresh
# machine's empty one, where the ~300 s binaries once started last and added minutes.
times_file="$CARGO_TARGET_DIR/eru-suite-times.$label"
declare -A last=()
for file in "$repo/hack/suite-times.$label" "$times_file"; do
  [ -f "$file" ] || continue
  while IFS=' ' read -r suite seconds; do last[$suite]=$seconds; done <"$file"
done
mapfile -t order < <(for suite in "${suites[@]}"; do echo "${last[$suite]:-999} $suite"; done | sort -rn | cut -d' ' -f2)

# each binary's output: kept in $ERU_SUITE_LOGS when it is set, else in a folder removed at the end
logs=${ERU_SUITE_LOGS:-$(mktemp -d)}
mkdir -p "$logs"
declare -A pid_of=() began=() took=() result=()
run() { # run SUITE: its binary in the background, its output in $logs/SUITE.log
  local suite=$1 env=()
  [ "$suite" = "${suite%@postgres}" ] || env=(ERU_E2E_JOURNAL=postgres)
  began[$suite]=$SECONDS
  env "${env[@]}" "${binary[${suite%@postgres}]}" --ignored --test-threads "$threads" "${args[@]}" \
    >"$logs/$suite.log" 2>&1 &
  pid_of[$suite]=$!
}
reap() { # waits for one running suite to end and records it
  local suite status
  wait -n "${pid_of[@]}" || true
  for suite in "${!pid_of[@]}"; do
    kill -0 "${pid_of[$suite]}" 2>/dev/null && continue
    status=0; wait "${pid_of[$suite]}" || status=$?
    unset "pid_of[$suite]"
    took[$suite]=$((SECONDS - began[$suite]))
    # (no such line when the binary died: aborted, killed)
    result[$suite]=$({ grep -E '^test result:' "$logs/$suite.log" || true; } | tail -n1 | sed 's/^test result: //; s/; finished in.*//')
    [ "$status" = 0 ] || result[$suite]="FAILED (exit $status) ${result[$suite]}"
    say "$suite: ${result[$suite]} in ${took[$suite]} s"
  done
}
for suite in "${order[@]}"; do
  while [ ${#pid_of[@]} -ge "$jobs" ]; do reap; done
  say "$suite: started"
  run "$suite"
done
while [ ${#pid_of[@]} -gt 0 ]; do reap; done

failed=()
for suite in "${suites[@]}"; do
  case "${result[$suite]}" in FAILED*) failed+=("$suite") ;; esac
done
for suite in "${failed[@]}"; do
  echo "=================== $suite (${binary[${suite%@postgres}]}), its whole output"
  cat "$logs/$suite.log"
done
# and, after them (near the end, where a reader of a long CI log looks first), why each failed
# test failed
for suite in "${failed[@]}"; do
  echo "== $suite: the failed tests' panics"
  grep -E -A4 "^thread '.*' \(?[0-9]*\)? ?panicked at" "$logs/$suite.log" | grep -v '^stack backtrace:' | cut -c1-400 || true
done
# the wall times, for the next run's order (only of binaries that ran whole, with no filter, and
# passed: one that failed early would be started last next time, and its whole run be the tail)
if [ ${#args[@]} -eq 0 ]; then
  passed=()
  for suite in "${suites[@]}"; do
    case "${result[$suite]}" in FAILED*) ;; *) passed+=("$suite") ;; esac
  done
  { for suite in "${passed[@]}"; do echo "$suite ${took[$suite]}"; done
    [ ! -f "$times_file" ] || awk -v ran="${passed[*]}" \
      'BEGIN { split(ran, r, " "); for (i in r) skip[r[i]] = 1 } !($1 in skip)' "$times_file"
  } >"$times_file.new" && mv "$times_file.new" "$times_file"
fi
echo "== $label: ${#suites[@]} test binaries, $jobs at a time, in $((SECONDS - start)) s"
for suite in "${order[@]}"; do printf '%6s  %-22s %s\n' "${took[$suite]}" "$suite" "${result[$suite]}"; done
[ -n "${ERU_SUITE_LOGS:-}" ] || rm -rf "$logs"
[ ${#failed[@]} -eq 0 ] || { echo "== failed: ${failed[*]}" >&2; exit 1; }
