#!/usr/bin/env bash
# demo.sh — set up, build zerolab and the lessons, train the demo MLP with ZeRO-3 on 4 simulated ranks, then train the
# unsharded reference on the same data and show that both wrote byte-identical parameters.
# Extra arguments go to both runs (e.g. --stage 1, --steps 200).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target zerolab lessons -j "$(nproc)"
out="build/release/demo"
mkdir -p "$out"
args=(--world 4 --steps 100 --lr 3e-3)
./build/release/zerolab train --stage 3 "${args[@]}" --save-final "$out/zero3.safetensors" "$@"
./build/release/zerolab train --engine reference "${args[@]}" --quiet --save-final "$out/reference.safetensors" "$@" >/dev/null
if cmp -s "$out/zero3.safetensors" "$out/reference.safetensors"; then
  echo "ZeRO-3 on 4 ranks and the unsharded reference wrote byte-identical parameters ($out)."
  echo "The lessons are built too: build/release/lessons/lesson_00_memory_math, then 01 to 10."
else
  echo "ZeRO-3 and the reference differ: this is a bug, please report it." >&2
  exit 1
fi
