#!/usr/bin/env bash
# test.sh — what CI runs: set up, build with warnings as errors and run the whole test suite with
# CTest (MPI tests under mpirun when OpenMPI is installed; GPU tests report skipped without a GPU);
# build the Doxygen reference (warnings fail it) and execute every notebook; run the simulator,
# engine, fault and CPU-thread tests and two shapes of the emulated CUDA kernels again under
# ThreadSanitizer; build and run the whole suite under AddressSanitizer +
# UndefinedBehaviorSanitizer; then replay the fuzz corpora and fuzz each libFuzzer target for
# ZL_FUZZ_SECONDS (default 60), the targets side by side.
# Properties run 300 cases each (override with RC_PARAMS, e.g. RC_PARAMS="max_success=2000").
# Arguments go to the ci and asan ctest runs (e.g. -R Sim).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export RC_PARAMS="${RC_PARAMS:-max_success=300}"
jobs="$(nproc)"
fuzz_seconds="${ZL_FUZZ_SECONDS:-60}"

cmake --preset ci >/dev/null
cmake --build --preset ci -j "$jobs"
ctest --preset ci -j "$jobs" "$@"
# The API reference: an undocumented public declaration is a Doxygen warning, and fails here.
cmake --build --preset ci --target docs
# Every notebook, top to bottom, on the ci build's binary.
ZEROLAB_BIN="build/ci/zerolab" bash scripts/notebooks.sh

cmake --preset tsan >/dev/null
cmake --build --preset tsan -j "$jobs" --target test_core test_sim test_engines test_features test_faults test_sim_direct test_detached test_model test_cuda_emulation
ctest --preset tsan -j "$jobs" -R '^(DType|Rng|Buffer|Sim|Equivalence|Features|Accelerator|Detached|Ledgers|TrainFaults|NonFinite|FaultCli|CpuThreads|CudaEmulation/.*/B(2_T5|1_T64)_)' "$@"

# Peak-RSS bounds do not hold under ASan, whose shadow memory and quarantine are resident too.
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs"
ctest --preset asan -j "$jobs" -E 'PeakRss' "$@"

bash scripts/setup.sh fuzz
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$jobs"
ctest --preset fuzz
# New inputs go to build/fuzz/found/<target> (merge them into tests/fuzz/corpus/<target> with
# -merge=1); a crash leaves its input in build/fuzz/artifacts/ and fails the script.
pids=()
targets=(fuzz_safetensors fuzz_train_args fuzz_ds_config)
for target in "${targets[@]}"; do
  mkdir -p "build/fuzz/found/$target" build/fuzz/artifacts
  "build/fuzz/tests/fuzz/$target" -max_total_time="$fuzz_seconds" -timeout=10 -print_final_stats=1 \
    -dict="tests/fuzz/$target.dict" -artifact_prefix="build/fuzz/artifacts/$target-" \
    "build/fuzz/found/$target" "tests/fuzz/corpus/$target" >"build/fuzz/$target.log" 2>&1 &
  pids+=($!)
done
status=0
for i in "${!targets[@]}"; do
  if wait "${pids[$i]}"; then
    echo "fuzz: ${targets[$i]}: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "build/fuzz/${targets[$i]}.log" | grep -o '[0-9]*$') runs in ${fuzz_seconds} s, no failure"
  else
    status=1
    echo "fuzz: ${targets[$i]} failed; its log ends:" >&2
    tail -n 40 "build/fuzz/${targets[$i]}.log" >&2
  fi
done
exit "$status"
