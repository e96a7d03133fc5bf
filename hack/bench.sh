#!/usr/bin/env bash
# Benchmarks (release build): prints medians and ratios. Machines here are noisy: compare
# ratios and medians across runs, never single figures.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eru/target}
cargo bench --locked --bench journal
