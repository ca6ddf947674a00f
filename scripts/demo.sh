#!/usr/bin/env bash
# demo.sh — set up, build, and train the demo MLP with DDP on 4 simulated ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target zerolab -j "$(nproc)"
./build/release/zerolab train --engine ddp --world 4 --steps 60 --lr 3e-3 "$@"
