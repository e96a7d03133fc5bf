#!/usr/bin/env bash
# A mutation score, measured (not a CI step): cargo-mutants changes one operator or expression of
# the listed files at a time (`<=` → `<`, a call removed, a value replaced), rebuilds, and runs
# the unit tests of the library (no cluster); a mutant the tests still pass is "missed". Prints
# caught, missed, unviable and timeouts per file, and the missed mutants. cargo-mutants is
# installed once from crates.io into the cache (like the other tools; no GitHub download).
#
#   hack/mutants.sh [--tests FILTER] [FILE ...] [-- CARGO-MUTANTS ARGS]
#     FILE defaults to the Eru core's ledger and plan (src/eru/core/ledger.rs, src/eru/core/plan.rs,
#     src/eru/core/plan/start.rs); e.g. `hack/mutants.sh src/journal/write.rs -- --shard 0/4`.
#     --tests FILTER runs only the library's tests whose path contains FILTER (e.g. eru::core;
#     repeat it for several: a test matching any runs): the whole library's take a minute, the
#     core's a few seconds. The changed lines only:
#     `git diff BASE -- FILE > d.diff; hack/mutants.sh FILE -- --in-diff d.diff`.
#
# On 2 cores a mutant costs an incremental rebuild of the library's tests (~20-40 s): about a
# hundred mutants an hour. Shard long runs (`-- --shard k/n`). Results: report/mutants.out/ under
# its target directory (~/.cache/eru/target-mutants), or $ERU_MUTANTS_REPORT/mutants.out (a
# folder per piece of work: `--iterate` reads the last run's lists there); docs/development.md
# keeps the figures and the equivalent mutants. Exits 0 when every mutant was caught or timed
# out, 2 when some were missed, and with cargo-mutants' own code when it could not measure
# (4: the tests fail without a mutation).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# a report folder given relative to where the script is called from
report=${ERU_MUTANTS_REPORT:+$(realpath -m "$ERU_MUTANTS_REPORT")}
cd "$repo"
version=27.1.0
cache_root=${ERU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eru}
root="$cache_root/cargo-mutants-$version"
# a target directory of its own: a two-hour run never holds the build lock of the tests' one
export CARGO_TARGET_DIR=${ERU_MUTANTS_TARGET_DIR:-$cache_root/target-mutants}
files=()
extra=()
filter=()
while [ $# -gt 0 ]; do
  case "$1" in
    --tests) filter+=("$2"); shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) files+=("$1"); shift ;;
  esac
done
[ ${#files[@]} -gt 0 ] || files=(src/eru/core/ledger.rs src/eru/core/plan.rs src/eru/core/plan/start.rs)
if [ ! -x "$root/bin/cargo-mutants" ]; then
  start=$SECONDS
  echo "[mutants] installing cargo-mutants $version into $root (once)" >&2
  cargo install --locked --quiet --root "$root" "cargo-mutants@$version"
  echo "[mutants] installed in $((SECONDS - start)) s" >&2
fi
out=${report:-$CARGO_TARGET_DIR/report}
mkdir -p "$out"
args=()
for f in "${files[@]}"; do
  [ -f "$f" ] || { echo "no such file: $f" >&2; exit 2; }
  args+=(--file "$f")
done
start=$SECONDS
# the library's unit tests only (the cluster-free tests of these files live there), without the
# journal's PostgreSQL tests (`::postgres`, `::pg::`, `a_postgres_journal…`: the same queries on
# another backend; they would start a server in the copy of the tree cargo-mutants builds);
# one job (two would share one target folder and wait on its lock: run two files at once as two
# runs, each with its own ERU_MUTANTS_TARGET_DIR and ERU_MUTANTS_REPORT); a mutant that hangs a
# test is a timeout after three times the unmutated tests' time, 20 s at least (the whole
# library's take about 60 s here; a --tests filter's often 1 s: a fixed 180 s made each hanging
# mutant of src/http/auth.rs cost three minutes)
# (`--cargo-arg --lib` for the build too: without it every mutant relinks each integration test,
# the binary and the examples, three times the work)
"$root/bin/cargo-mutants" mutants --jobs 1 --timeout-multiplier 3 --minimum-test-timeout 20 --profile mutants --output "$out" \
  --cargo-arg=--lib "${args[@]}" "${extra[@]}" -- -- "${filter[@]}" --skip ::postgres --skip ::pg:: --skip a_postgres_journal \
  || rc=$?
# 2: some missed, 3: some timed out (caught: the score below counts them so); anything else means
# nothing was measured (4: the tests fail without a mutation, 1: bad arguments)
case ${rc:-0} in
  0|2|3) ;;
  *) echo "cargo-mutants could not measure (exit $rc): $out/mutants.out/debug.log" >&2; exit "$rc" ;;
esac
echo "== mutation score ($((SECONDS - start)) s; $out/mutants.out)"
python3 - "$out/mutants.out" <<'EOF'
import collections
import pathlib
import re
import sys

out = pathlib.Path(sys.argv[1])
per = collections.defaultdict(collections.Counter)
missed = []
for kind in ("caught", "missed", "timeout", "unviable"):
    path = out / f"{kind}.txt"
    for line in path.read_text().splitlines() if path.exists() else []:
        m = re.match(r"([^:]+):\d+", line)
        if m:
            per[m.group(1)][kind] += 1
            if kind == "missed":
                missed.append(line)
print(f'{"file":36} {"caught":>7} {"missed":>7} {"timeout":>8} {"unviable":>9} {"caught of viable":>17}')
for file, c in sorted(per.items()):
    viable = c["caught"] + c["missed"] + c["timeout"]
    score = f'{100 * (c["caught"] + c["timeout"]) / viable:.0f} %' if viable else "-"
    print(f'{file:36} {c["caught"]:7} {c["missed"]:7} {c["timeout"]:8} {c["unviable"]:9} {score:>17}')
for line in missed:
    print("missed: " + line)
EOF
# missed mutants: exit 2 (a script that runs this can tell)
if [ -s "$out/mutants.out/missed.txt" ]; then exit 2; fi
