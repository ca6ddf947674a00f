#!/usr/bin/env bash
# notebooks.sh — executes every notebooks/*.ipynb top to bottom with Debian's Jupyter
# (`jupyter nbconvert --execute`) into a temporary directory, never in place, so the committed
# notebooks stay without outputs. The notebooks run ZEROLAB_BIN if it is set, else build/ci/zerolab
# (build it first: `cmake --preset ci && cmake --build --preset ci -j2`). Fails on the first
# notebook with an error, naming it; prints each notebook's time.
# Arguments: notebooks to run instead of all (e.g. notebooks/03_equivalence.ipynb).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${ZEROLAB_BIN:-}" ]; then
  ZEROLAB_BIN="$PWD/build/ci/zerolab"
fi
if [ ! -x "$ZEROLAB_BIN" ]; then
  echo "notebooks: no zerolab binary at $ZEROLAB_BIN: build it with 'cmake --preset ci && cmake --build --preset ci -j2' or set ZEROLAB_BIN" >&2
  exit 1
fi
# The notebooks run in notebooks/, so a relative path is made absolute here.
ZEROLAB_BIN="$(realpath "$ZEROLAB_BIN")"
export ZEROLAB_BIN
command -v jupyter >/dev/null || { echo "notebooks: jupyter not found: run 'bash scripts/setup.sh'" >&2; exit 1; }

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
if [ $# -gt 0 ]; then notebooks=("$@"); else notebooks=(notebooks/*.ipynb); fi

start_all=$SECONDS
for notebook in "${notebooks[@]}"; do
  start=$SECONDS
  if ! jupyter nbconvert --to notebook --execute --ExecutePreprocessor.timeout=600 \
      --output-dir "$out" "$notebook" >"$out/log" 2>&1; then
    tail -n 30 "$out/log" >&2
    error="$(sed 's/\x1b\[[0-9;]*m//g' "$out/log" | grep -E '^[A-Za-z_.]*(Error|Exception|Binary)[A-Za-z]*:' | tail -n 1 || true)"
    echo "notebooks: $notebook failed: ${error:-see the nbconvert output above}" >&2
    exit 1
  fi
  echo "notebooks: $notebook ran without error in $((SECONDS - start)) s"
done
echo "notebooks: ${#notebooks[@]} notebooks in $((SECONDS - start_all)) s (binary $ZEROLAB_BIN)"
