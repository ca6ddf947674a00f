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
# Every preset compiles through ccache (CMakeLists.txt; setup.sh installs it), which keys objects
# on paths relative to the clone: once any clone on this machine has built a preset, another
# clone's build of it is mostly links. The script ends with each phase's time and the cache's
# hits and misses (CCACHE_MAXSIZE, default 20G here, bounds the cache).
set -euo pipefail
cd "$(dirname "$0")/.."

# Each phase's wall time, printed at the end (also when a phase fails).
phase_names=()
phase_seconds=()
phase_start=$SECONDS
phase_name=""
phase() {
  local now=$SECONDS
  if [ -n "$phase_name" ]; then
    phase_names+=("$phase_name")
    phase_seconds+=($((now - phase_start)))
  fi
  phase_name="$1"
  phase_start=$now
}
report_phases() {
  local status=$?
  phase ""
  echo "test.sh: time by phase (s)"
  for i in "${!phase_names[@]}"; do
    printf '  %-22s %5d\n' "${phase_names[$i]}" "${phase_seconds[$i]}"
  done
  printf '  %-22s %5d\n' "total" "$SECONDS"
  if command -v ccache >/dev/null; then
    echo "test.sh: compiler cache: $(ccache --print-stats 2>/dev/null | awk -F'\t' '$1=="direct_cache_hit"||$1=="preprocessed_cache_hit"{h+=$2} $1=="cache_miss"{m=$2} END{printf "%d hits, %d misses", h, m}')"
  fi
  exit "$status"
}
trap report_phases EXIT

phase setup
bash scripts/setup.sh
bash scripts/setup.sh fuzz
export RC_PARAMS="${RC_PARAMS:-max_success=300}"
jobs="$(nproc)"
fuzz_seconds="${ZL_FUZZ_SECONDS:-60}"
# The compiler cache keeps every preset's objects; a warm cache makes each build mostly links.
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-20G}"
ccache --zero-stats >/dev/null

phase "ci build"
cmake --preset ci >/dev/null
cmake --build --preset ci -j "$jobs"
phase "ci tests"
ctest --preset ci -j "$jobs" "$@"
# The API reference: an undocumented public declaration is a Doxygen warning, and fails here.
phase docs
cmake --build --preset ci --target docs
# Every notebook, top to bottom, on the ci build's binary.
phase notebooks
ZEROLAB_BIN="build/ci/zerolab" bash scripts/notebooks.sh

phase "tsan build"
cmake --preset tsan >/dev/null
cmake --build --preset tsan -j "$jobs" --target test_core test_sim test_engines test_features test_faults test_sim_direct test_detached test_model test_cuda_emulation
phase "tsan tests"
ctest --preset tsan -j "$jobs" -R '^(DType|Rng|Buffer|Sim|Equivalence|Features|Accelerator|Detached|Ledgers|TrainFaults|NonFinite|FaultCli|CpuThreads|EmbeddingEmulated|CudaEmulation/.*/B(2_T5|1_T64)_)' "$@"

# Peak-RSS bounds do not hold under ASan, whose shadow memory and quarantine are resident too.
phase "asan build"
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs"
phase "asan tests"
ctest --preset asan -j "$jobs" -E 'PeakRss' "$@"

phase "fuzz build"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$jobs"
phase "fuzz corpora"
ctest --preset fuzz
phase "fuzzing"
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
