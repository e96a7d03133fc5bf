#!/usr/bin/env bash
# The project's test command (README, .ci/run): unit and integration tests, then the end-to-end
# tests against a real local control plane that this script brings up with hack/cluster.sh and
# always takes down again, also when a test fails. The journal's tests run on SQLite and on a
# local PostgreSQL (hack/postgres.sh), started here and stopped with the cluster; the silences'
# on a local Alertmanager (hack/alertmanager.sh), likewise.
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

# Each step's wall time, printed as a table when the script exits (green or not), so that the
# next slow step shows itself: `step NAME` ends the running step and begins NAME.
start=$SECONDS
step_name="system packages (hack/deps.sh)" step_start=$SECONDS
steps=()
step() {
  steps+=("$((SECONDS - step_start))|$step_name")
  step_name=$1 step_start=$SECONDS
  echo "== $1"
}
step_table() {
  steps+=("$((SECONDS - step_start))|$step_name")
  echo "== wall time by step (s; $((SECONDS - start)) s in all)"
  local row
  for row in "${steps[@]}"; do printf '%6s  %s\n' "${row%%|*}" "${row#*|}"; done
}

# Suites that run beside the steps that follow them, each with its output in a log of its own,
# printed whole when it fails (its tail when it passes); their wall times join the table.
background_pids=() background_names=() background_logs=() background_starts=()
background() { # background TITLE COMMAND...
  local title=$1 log
  shift
  log=$(mktemp --suffix .log)
  echo "== started in the background: $title (log: $log)"
  # its own wall time, into the log's last line (the table reads it back)
  # shellcheck disable=SC2016 # expanded by the inner bash
  setsid bash -c 'start=$SECONDS; "$@"; status=$?; echo "== (background) $((SECONDS - start)) s"; exit $status' \
    background "$@" >"$log" 2>&1 &
  background_pids+=("$!") background_names+=("$title") background_logs+=("$log")
  background_starts+=("$SECONDS")
}
join_background() { # join_background INDEX: waits for that background suite; fails if it did
  local i=$1 status=0 took
  wait "${background_pids[$i]}" || status=$?
  took=$(sed -n 's/^== (background) \([0-9]*\) s$/\1/p' "${background_logs[$i]}" | tail -n1)
  steps+=("${took:-?}|(background, from $((background_starts[i] - start)) s on) ${background_names[$i]}")
  if [ "$status" = 0 ]; then
    echo "== passed: ${background_names[$i]}; its log's end:"
    tail -n 15 "${background_logs[$i]}"
  else
    echo "== FAILED (exit $status): ${background_names[$i]}; its whole log:"
    cat "${background_logs[$i]}"
  fi
  rm -f "${background_logs[$i]}"
  unset "background_pids[$i]"
  return "$status"
}
finish_background() { # waits for every background suite; fails if one did
  local i all=0
  for i in "${!background_pids[@]}"; do join_background "$i" || all=1; done
  background_pids=()
  return "$all"
}
# Build caches live outside the clone so fresh clones (CI) reuse them.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eru/target}
hack/deps.sh

cluster=${ERU_TEST_CLUSTER:-test}
postgres_name="test"  # hack/postgres.sh --name
# What this script started, taken down on exit however it exits (the exit status is kept).
started_cluster="" started_postgres="" started_alertmanager=""
cleanup() {
  # a background suite still running (this script failed before it ended) is stopped first
  local pid
  for pid in "${background_pids[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
  for pid in "${background_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  step_table
  [ -z "$started_cluster" ] || hack/cluster.sh down --name "$cluster" || true
  [ -z "$started_postgres" ] || hack/postgres.sh stop --name "$postgres_name" || true
  [ -z "$started_alertmanager" ] || hack/alertmanager.sh stop --name test || true
}
trap cleanup EXIT

# The Go-built tools (Helm, helm-unittest, prometheus-operator, Prometheus, the control plane, the
# real node's kubelet and crictl: in the order the steps need them) are cached after the first
# run and take about 12 minutes to build cold alone (40 beside the Rust builds, niced): they are
# built beside the Rust steps that follow, niced, so that on a fresh machine their module
# downloads and builds fill what the Rust builds and tests leave of the two cores. A warm run
# finds them all built at once. Each is built under a lock, so a step that needs a tool before
# this reaches it waits for it or builds it itself.
# shellcheck disable=SC2016 # expanded by the inner bash
background "the Go-built tools, prebuilt (cached after the first run)" nice -n 10 bash -c '
  set -e
  own_clusters=$([ "${ERU_USE_EXISTING_CLUSTER:-}" = 1 ] || echo yes)
  hack/helm.sh >/dev/null
  hack/helm-unittest.sh >/dev/null
  hack/prometheus-operator.sh >/dev/null
  hack/prometheus.sh >/dev/null
  [ -z "$own_clusters" ] || hack/cluster.sh build
  [ -z "$own_clusters" ] || hack/cluster.sh build-node'

# The operator's image (hack/image.sh build, as hack/real-node-e2e.sh asks for it later), likewise
# from the start: its base images' downloads and its compile fill the gaps the steps below leave
# (built by the real node's step, cold, it was the run's last 523 s: 2026-11-29); that step
# then finds it built (one build at a time, under a lock).
if [ "${ERU_USE_EXISTING_CLUSTER:-}" != 1 ]; then
  # (best effort: the real node's step builds it again, and fails the run if that fails too)
  background "the operator's image, prebuilt (hack/image.sh build --profile dev --tag e2e)" \
    nice -n 10 bash -c 'hack/image.sh build --profile dev --tag e2e ||
      echo "== the early build failed; hack/real-node-e2e.sh builds the image again"'
fi

step "shellcheck, import layering, the vocabulary in one place, function lengths"
shellcheck hack/*.sh .ci/run  # .shellcheckrc: follow sourced files
python3 hack/imports.py --self-test
python3 hack/imports.py
python3 hack/vocabulary.py
python3 hack/lengths.py
step "cargo fmt --check"
cargo fmt --all -- --check
# Clippy's lints (-D warnings) on every build of this run rather than a `cargo clippy` of its own:
# cargo hands the workspace's own crates to clippy's driver (what `cargo clippy` does, with the
# same arguments), which lints and then compiles them, so the tests' build is the lint. The
# dependencies are compiled once: `cargo clippy` checks each a second time, in a mode no build
# shares (about 300 s of a cold run on 2 cores). Every cargo command below, the background suites'
# too, inherits these, and a build without them would compile the crate again.
RUSTC_WORKSPACE_WRAPPER="$(rustc --print sysroot)/bin/clippy-driver"
CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__" # cargo-clippy's encoding of `-- -D warnings`
export RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
[ -x "$RUSTC_WORKSPACE_WRAPPER" ] || { echo "no clippy-driver beside rustc: rustup component add clippy" >&2; exit 1; }
if [ -z "${ERU_TEST_POSTGRES_URL:-}" ]; then
  step "PostgreSQL for the journal's tests (hack/postgres.sh)"
  started_postgres=1
  hack/postgres.sh start --name "$postgres_name"
  eval "$(hack/postgres.sh env --name "$postgres_name")"
fi
if [ "${ERU_USE_EXISTING_CLUSTER:-}" != 1 ]; then
  # The test cluster comes up beside the unit tests (a control plane at rest costs little CPU),
  # with the chart's checks on it, which must run before the e2e tests install the CRDs: the
  # end-to-end step waits for it. (The control plane's binaries: built by the job above, under
  # a lock, or by hack/cluster.sh itself.)
  started_cluster=1
  # shellcheck disable=SC2016 # expanded by the inner bash
  background "the test cluster: the cold path of hack/cluster.sh up (empty cache and state), hack/cluster.sh up, then the Helm chart on it: dry-run=server of three value sets, helm install, helm upgrade from the previous chart version, two releases side by side (hack/cold-up-check.sh, hack/chart-check.sh cluster)" bash -c '
    set -e
    nice -n 10 hack/cluster.sh build # (a no-op once cached; niced like the job above, cold)
    hack/cold-up-check.sh
    hack/cluster.sh up --name "$1"
    eval "$(hack/cluster.sh env --name "$1")"
    hack/chart-check.sh cluster' _ "$cluster"
  cluster_job=$((${#background_pids[@]} - 1))
fi
step "clippy's lints and the unit and integration tests (no cluster; the journal's on SQLite and PostgreSQL)"
# The property tests on a fixed seed (the same cases every run: a failure is the change's), then
# once more on a random one, printed: rerun with PROPTEST_RNG_SEED=<it> to get its cases back. A
# failure's shrunk case is also kept in proptest-regressions/ (tests/*.proptest-regressions) and
# tried first from then on: commit it.
PROPTEST_RNG_SEED=${PROPTEST_RNG_SEED:-20261125} cargo test --locked --all-targets
seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
step "the property tests again, PROPTEST_RNG_SEED=$seed"
# by name: a renamed property test would match nothing, so the count is checked
proptests=(every_slot_is_accounted_once slots_are_what_the_docs_promise no_query_string_produces_a_5xx)
out=$(PROPTEST_RNG_SEED=$seed cargo test --locked --lib --test http -- --quiet "${proptests[@]}" 2>&1) \
  || { printf '%s\n' "$out"; exit 1; }
ran=$(printf '%s\n' "$out" | awk '/^test result: ok\./ { n += $4 } END { print n + 0 }')
[ "$ran" = "${#proptests[@]}" ] || { printf '%s\n' "$out"; echo "ran $ran property tests, not ${#proptests[@]}: one was renamed?" >&2; exit 1; }
echo "$ran property tests passed"
step "docs: links and runbook anchors (hack/docs-check.py)"
# the binary the tests built: a `cargo build --bin` of its own would resolve the dependencies'
# features without the tests' (tokio's test-util, say) and compile half of them again
python3 hack/docs-check.py --bin "$CARGO_TARGET_DIR/debug/eru-operator"

step "Helm chart: lint, renders deploy/, monitoring objects, schema (hack/chart-check.sh static)"
hack/chart-check.sh static
step "Python tools of the contract tests (hack/pytools.sh)"
hack/pytools.sh >/dev/null
step "prometheus-operator and Prometheus of the observability test (hack/prometheus-operator.sh, hack/prometheus.sh)"
hack/prometheus-operator.sh >/dev/null
hack/prometheus.sh >/dev/null

if [ "${ERU_USE_EXISTING_CLUSTER:-}" != 1 ]; then
  step "the control plane's binaries (hack/cluster.sh build)"
  hack/cluster.sh build
  # The end-to-end suites overlap: most of their time is spent waiting for slots. Beside the main
  # cluster's suites (hack/suites.sh), in the background and each on a cluster of its own: the
  # fault tests (they restart their control plane and database server) and the image with the
  # real node (niced: its build must not starve the operators of the tests beside it; their HTTP
  # queries run at nice 19, --http-query-class auto for a plain process, so a build outranks them
  # without starving them).
  # (then tests/apf.rs, alone on that cluster: its FlowSchema throttles every operator there)
  background "fault tests, then API Priority and Fairness (hack/faults.sh --also apf: tests/faults.rs, tests/apf.rs on a cluster of their own)" \
    hack/faults.sh --also apf -- "${extra[@]}"
  background "the image and the real node (hack/real-node-e2e.sh)" nice -n 10 hack/real-node-e2e.sh -- "${extra[@]}"
  step "waiting for the test cluster and the chart's checks on it"
  join_background "$cluster_job" || exit 1
  eval "$(hack/cluster.sh env --name "$cluster")"
fi
[ -n "${KUBECONFIG:-}" ] || { echo "KUBECONFIG is not set" >&2; exit 1; }
[ "${ERU_USE_EXISTING_CLUSTER:-}" != 1 ] ||
  echo "(fault tests and the real node skipped: they need clusters of their own, which an existing cluster is not)"
step "Alertmanager for the silences' tests (hack/alertmanager.sh)"
started_alertmanager=1
hack/alertmanager.sh start --name test
eval "$(hack/alertmanager.sh env --name test)"

# Tests are selected by file (one test binary each), never by a substring of their names: every
# file of tests/ with ignored (end-to-end) tests but faults.rs, apf.rs and real_node.rs (above, on
# clusters of their own), and the Eru, ledger, fleet and targets suites again on a PostgreSQL
# journal.
suites=()
for file in tests/*.rs; do
  name=$(basename "$file" .rs)
  case "$name" in faults | real_node | apf) continue ;; esac
  grep -q '#\[ignore' "$file" && suites+=("$name")
done
suites+=(eru@postgres ledger@postgres fleet@postgres targets@postgres)
failed=()
step "end-to-end tests against $KUBECONFIG, three test binaries at a time (hack/suites.sh)"
hack/suites.sh --jobs 3 "${suites[@]}" -- "${extra[@]}" || failed+=("end-to-end tests")
if [ "${ERU_USE_EXISTING_CLUSTER:-}" = 1 ]; then
  # no cluster of its own for it here: its FlowSchema throttles every operator of this one, alone
  step "API Priority and Fairness (tests/apf.rs), alone on the cluster"
  hack/suites.sh --name apf apf -- "${extra[@]}" || failed+=("tests/apf.rs")
fi
step "the background suites"
finish_background || failed+=("the background suites")
[ ${#failed[@]} -eq 0 ] || { echo "== failed: ${failed[*]}" >&2; exit 1; }
echo "== all tests passed in $((SECONDS - start)) s"
