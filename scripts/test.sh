#!/usr/bin/env bash
# test.sh — set up, build with warnings as errors, run the whole test suite with CTest, then run
# the simulator and engine tests again under ThreadSanitizer. Properties run 300 cases each
# (override with RC_PARAMS, e.g. RC_PARAMS="max_success=2000").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export RC_PARAMS="${RC_PARAMS:-max_success=300}"
jobs="$(nproc)"

cmake --preset ci >/dev/null
cmake --build --preset ci -j "$jobs"
ctest --preset ci -j "$jobs" "$@"

cmake --preset tsan >/dev/null
cmake --build --preset tsan -j "$jobs" --target test_core test_sim test_engines
ctest --preset tsan -j "$jobs" -R '^(DType|Rng|Buffer|Sim|Equivalence|Ledgers)' "$@"
