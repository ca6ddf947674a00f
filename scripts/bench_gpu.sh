#!/usr/bin/env bash
# bench_gpu.sh — every GPU measurement of docs/performance.md in one command, on one GPU (W = 1):
# the multi-tensor AdamW against the copy bandwidth and torch's fused AdamW (`zerolab bench adam
# --accelerator cuda`, which runs scripts/torch_adamw_bench.py in the same run), GPT-2 124M in
# bf16 with `zerolab train --backend nccl` at ZeRO stages 0-3, and the same model in PyTorch eager
# (scripts/torch_gpt_bench.py), stage 0 again with the exact attention kernels
# (ZL_CUDA_ATTENTION=exact) and in fp16 (`--fp16`: fp16 GEMMs and attention, dynamic loss
# scaling; PyTorch too, with fp16 autocast and GradScaler) and at one sequence of 64 tokens (the
# host's issuing floor), stages 0-3 with `--activation-checkpointing full` at a larger
# micro-batch (32 unless --ckpt-micro-batch says otherwise; 0 skips them), and, where Nsight
# Compute's `ncu` is on the PATH, one DDP step's kernels by name (time and launches). Builds
# nothing.
#
#   scripts/bench_gpu.sh [--zerolab build/gpu/zerolab] [--steps 20] [--warmup 5]
#                        [--micro-batch 8] [--ckpt-micro-batch 32] [--peak-flops 989e12]
#                        [--commit SHA] LOG_DIR
#
# Writes every command's raw output to LOG_DIR, and for notebooks/05_performance.ipynb, each
# named gpu-<date>-<card>-<commit>-* (<card> as h100): -adam.json (the bench command's JSON,
# unedited), -gpt124m.json (the four train runs as `bench step` rows, with tokens/s, MFU, peak
# memory per category, losses, host waits and the time they and the step's end blocked the host;
# the exact-attention, fp16 and floor rows, the checkpointed rows and the torch rows, bf16 and
# fp16) and, with ncu, -kernels.csv (kernel, launches, ms in one step). It prints the rows to add
# to notebooks/data/README.md, which the notebook needs to label them.
# Stops at the first failure, except the profile's (its log says why).
set -euo pipefail

usage() {
  sed -n '/^#   scripts\/bench_gpu.sh/,/LOG_DIR$/p' "$0" | sed 's/^#   //' >&2
  exit 2
}
die() {
  echo "bench_gpu.sh: $*" >&2
  exit 1
}

root=$(cd "$(dirname "$0")/.." && pwd)
zerolab=$root/build/gpu/zerolab
steps=20
warmup=5
micro_batch=8
ckpt_micro_batch=32
commit=
peak_flops=989e12  # H100 SXM, dense bf16
log_dir=
while (($#)); do
  case "$1" in
    --zerolab) zerolab=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --micro-batch) micro_batch=$2; shift 2 ;;
    --ckpt-micro-batch) ckpt_micro_batch=$2; shift 2 ;;
    --commit) commit=$2; shift 2 ;;
    --peak-flops) peak_flops=$2; shift 2 ;;
    -h | --help) usage ;;
    -*) echo "bench_gpu.sh: unknown option $1" >&2; usage ;;
    *) [[ -z $log_dir ]] || usage; log_dir=$1; shift ;;
  esac
done
[[ -n $log_dir ]] || usage
((steps > warmup)) || die "--steps $steps must be more than --warmup $warmup: the first $warmup are not timed"

# ---- what must be there: a GPU, the binary, a Python whose torch sees the GPU ----------------
command -v nvidia-smi >/dev/null || die "no GPU: nvidia-smi is not installed (run this on a GPU machine)"
nvidia-smi -L 2>/dev/null | grep -q '^GPU ' || die "no GPU: nvidia-smi lists none ($(nvidia-smi -L 2>&1 | head -1))"
[[ -x $zerolab ]] || die "$zerolab is not an executable: build it first (docs/performance.md, GPU), or pass --zerolab"
zerolab=$(cd "$(dirname "$zerolab")" && pwd)/$(basename "$zerolab")
python=
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    python=$candidate
    break
  fi
done
[[ -n $python ]] || die "no Python whose torch sees a CUDA GPU (python3, /usr/bin/python3): install torch with CUDA"
train_help=$("$zerolab" train --help)
grep -q 'nccl' <<<"$train_help" || die "$zerolab train has no --backend nccl: build a zerolab with the nccl backend wired into train"
train_device_flags=(--backend nccl)
if grep -q -- '--accelerator' <<<"$train_help"; then train_device_flags+=(--accelerator cuda); fi

mkdir -p "$log_dir"
log_dir=$(cd "$log_dir" && pwd)
date=$(date -u +%Y-%m-%d)
# The files' names: gpu-<date>-<card>-<commit>-*, the card's model as nvidia-smi names it (h100,
# h200, ...) and the commit the binary was built from: --commit, else the working tree's HEAD.
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oiE '[a-z][0-9]{2,3}' |
  head -1 | tr '[:upper:]' '[:lower:]')
[[ -n $commit ]] || commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || true)
prefix=gpu-$date${card:+-$card}${commit:+-$commit}
cd "$root"
{
  echo "date (UTC): $(date -u '+%Y-%m-%d %H:%M')"
  echo "commit: ${commit:-unknown}"
  echo "zerolab: $zerolab"
  echo "python: $python, torch $("$python" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)')"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
  uname -a
} | tee "$log_dir/machine.txt"

# Runs "$@" with stdout to $log_dir/$1.out and stderr to .err (name first), and says how long.
run_logged() {
  local name=$1
  shift
  echo "== $name: $*" | tee -a "$log_dir/commands.txt"
  local started=$SECONDS
  if ! "$@" >"$log_dir/$name.out" 2>"$log_dir/$name.err"; then
    tail -5 "$log_dir/$name.err" >&2
    die "$name failed: $* (logs in $log_dir/$name.out, .err)"
  fi
  echo "$name $((SECONDS - started))" >>"$log_dir/seconds.txt"
}

# ---- AdamW: zerolab's multi-tensor kernel, the copy bandwidth, torch fused, one run ----------
run_logged adam "$zerolab" bench adam --accelerator cuda --repeats 20 --python "$python" --json

# ---- GPT-2 124M, W = 1, bf16: zerolab at stages 0-3, then torch eager ------------------------
# One process is the whole world; RANK, WORLD_SIZE and LOCAL_RANK are what torchrun would set.
for stage in 0 1 2 3; do
  RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 run_logged "train-s$stage" "$zerolab" train --model gpt \
    --preset 124M "${train_device_flags[@]}" --stage "$stage" --bf16 --steps "$steps" \
    --micro-batch "$micro_batch" --metrics "$log_dir/train-s$stage.metrics.jsonl" \
    --summary "$log_dir/train-s$stage.summary.json"
done
RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 ZL_CUDA_ATTENTION=exact run_logged train-s0-exact "$zerolab" \
  train --model gpt --preset 124M "${train_device_flags[@]}" --stage 0 --bf16 --steps "$steps" \
  --micro-batch "$micro_batch" --metrics "$log_dir/train-s0-exact.metrics.jsonl" \
  --summary "$log_dir/train-s0-exact.summary.json"
RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 run_logged train-s0-fp16 "$zerolab" \
  train --model gpt --preset 124M "${train_device_flags[@]}" --stage 0 --fp16 --steps "$steps" \
  --micro-batch "$micro_batch" --metrics "$log_dir/train-s0-fp16.metrics.jsonl" \
  --summary "$log_dir/train-s0-fp16.summary.json"
# ---- stage 0 at one sequence of 64 tokens: kernels too small to hide the host, so its step is about
# the time the host takes to issue a step (the floor under stage 0's). The launches are stage 0's
# but for the LM head and the loss, which take one chunk of rows where 8 x 1024 tokens take 16 ----
RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 run_logged train-s0-floor "$zerolab" \
  train --model gpt --preset 124M "${train_device_flags[@]}" --stage 0 --bf16 --steps "$steps" \
  --micro-batch 1 --block-size 64 --metrics "$log_dir/train-s0-floor.metrics.jsonl" \
  --summary "$log_dir/train-s0-floor.summary.json"
# ---- the same four stages with every block recomputed in backward, at a larger micro-batch -----
if ((ckpt_micro_batch > 0)); then
  for stage in 0 1 2 3; do
    RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 run_logged "train-full-s$stage" "$zerolab" train --model gpt \
      --preset 124M "${train_device_flags[@]}" --stage "$stage" --bf16 --steps "$steps" \
      --micro-batch "$ckpt_micro_batch" --activation-checkpointing full \
      --metrics "$log_dir/train-full-s$stage.metrics.jsonl" \
      --summary "$log_dir/train-full-s$stage.summary.json"
  done
fi
run_logged torch-gpt "$python" scripts/torch_gpt_bench.py --micro-batch "$micro_batch" \
  --seq-len 1024 --steps $((steps - warmup)) --warmup "$warmup" --peak-flops "$peak_flops"
run_logged torch-gpt-fp16 "$python" scripts/torch_gpt_bench.py --micro-batch "$micro_batch" \
  --seq-len 1024 --steps $((steps - warmup)) --warmup "$warmup" --peak-flops "$peak_flops" \
  --dtype float16

# ---- one DDP step's kernels, by name (Nsight Compute, when there) ----------------------------
kernels_csv=
if command -v ncu >/dev/null; then
  echo "== profile: ncu, one DDP step" | tee -a "$log_dir/commands.txt"
  if RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 timeout 300 ncu --clock-control none --csv --page raw \
    --metrics gpu__time_duration.sum --log-file "$log_dir/ncu.csv" "$zerolab" train --model gpt \
    --preset 124M "${train_device_flags[@]}" --stage 0 --bf16 --steps 1 \
    --micro-batch "$micro_batch" >"$log_dir/profile.out" 2>"$log_dir/profile.err"; then
    kernels_csv=$root/notebooks/data/$prefix-kernels.csv
    "$python" - "$log_dir/ncu.csv" "$kernels_csv" <<'PY'
import collections, csv, sys
lines = open(sys.argv[1]).read().splitlines()
start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
rows = list(csv.reader(lines[start:]))
header, units = rows[0], rows[1]
name_at, time_at = header.index("Kernel Name"), header.index("gpu__time_duration.sum")
to_ms = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0,
         "ms": 1.0}[units[time_at]]
def name_of(signature):
    """A kernel's name without its return type, namespaces' anonymous parts, template arguments
    and parameter list: void zl::cuda::(anonymous namespace)::k<64>(float*) -> zl::cuda::k."""
    signature = signature.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    depth, name = 0, ""
    for ch in signature.removeprefix("void "):
        if ch in "<>":
            depth += 1 if ch == "<" else -1
        elif ch == "(" and depth == 0:
            break
        elif depth == 0:
            name += ch
    return name.strip()
ms, calls = collections.Counter(), collections.Counter()
for row in rows[2:]:
    if len(row) <= time_at or not row[time_at]:
        continue
    name = name_of(row[name_at])
    ms[name] += float(row[time_at].replace(",", "")) * to_ms
    calls[name] += 1
total = sum(ms.values())
with open(sys.argv[2], "w") as out:
    out.write("kernel,launches,ms,share\n")
    for name, value in ms.most_common():
        out.write(f"{name},{calls[name]},{value:.3f},{value / total:.4f}\n")
print(f"kernels of one DDP step: {total:.1f} ms in {sum(calls.values())} launches; the largest:")
for name, value in ms.most_common(12):
    print(f"  {value:8.2f} ms {calls[name]:5d}x {name}")
PY
  else
    echo "bench_gpu.sh: the ncu profile failed (see $log_dir/profile.err and ncu.csv); no kernel table" >&2
  fi
fi

# ---- the notebook's files ---------------------------------------------------------------------
"$python" - "$log_dir" "$root/notebooks/data" "$prefix" "$warmup" "$micro_batch" "$peak_flops" \
  "$steps" "$ckpt_micro_batch" <<'PY'
import json, pathlib, shutil, statistics, sys
sys.path.insert(0, "scripts")
from torch_gpt_bench import flops_per_token  # one definition of the FLOPs per token

log, data, prefix = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
date = prefix[len("gpu-"):len("gpu-YYYY-MM-DD")]
warmup, micro_batch, peak_flops, steps = int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7])
ckpt_micro_batch = int(sys.argv[8])
seq_len, n_layer, n_embd = 1024, 12, 768  # the 124M preset
seconds = dict(line.split() for line in (log / "seconds.txt").read_text().splitlines())
adam = json.loads((log / "adam.out").read_text())
torch_gpt = json.loads((log / "torch-gpt.out").read_text())
torch_fp16 = json.loads((log / "torch-gpt-fp16.out").read_text())


def stage_rows(name, batch):
    """The four stages' rows of runs train-<name>s<stage>, each step of `batch` sequences; MFU
    counts the model's FLOPs, not a recomputed forward's."""
    rows = []
    for stage in range(4):
        summary = json.loads((log / f"train-{name}s{stage}.summary.json").read_text())
        metrics = [json.loads(line) for line in
                   (log / f"train-{name}s{stage}.metrics.jsonl").read_text().splitlines()]
        ms = statistics.median(m["step_ms"] for m in metrics[warmup:])
        tokens_per_s = batch * seq_len / (ms / 1e3)
        per_token = flops_per_token(summary["params"], n_layer, n_embd, seq_len)
        memory = summary["ranks"][0]["bytes"]
        rows.append({"stage": stage, "engine": summary["engine"], "ms": ms,
                     "tokens_per_s": tokens_per_s, "mfu": per_token * tokens_per_s / peak_flops,
                     "peak_bytes": memory["total_peak"], "peak_bytes_by_category": memory["peak"],
                     "host_waits": max(m["host_waits"] for m in metrics[warmup:]),
                     # the host's time blocked in those waits and in the step's last synchronize
                     "host_wait_ms": statistics.median(m["host_wait_ms"] for m in metrics[warmup:]),
                     "drain_ms": statistics.median(m["drain_ms"] for m in metrics[warmup:]),
                     "losses": [m["loss"] for m in metrics]})
    for row in rows:
        row["overhead_vs_ddp"] = row["ms"] / rows[0]["ms"]
    return rows


rows = stage_rows("", micro_batch)
full_rows = stage_rows("full-", ckpt_micro_batch) if ckpt_micro_batch > 0 else []


def stage0_row(name, **labels):
    """Stage 0's run `name` (train-<name>.*) as a row: median step ms after warmup, tokens/s, peak."""
    steps_run = [json.loads(line) for line in (log / f"train-{name}.metrics.jsonl").read_text().splitlines()]
    ms = statistics.median(m["step_ms"] for m in steps_run[warmup:])
    summary = json.loads((log / f"train-{name}.summary.json").read_text())
    return {"stage": 0, **labels, "ms": ms, "tokens_per_s": micro_batch * seq_len / (ms / 1e3),
            "peak_bytes": summary["ranks"][0]["bytes"]["total_peak"]}


exact_row = stage0_row("s0-exact", attention="exact")
fp16_row = stage0_row("s0-fp16", precision="fp16")
floor_steps = [json.loads(line) for line in (log / "train-s0-floor.metrics.jsonl").read_text().splitlines()]
floor_row = {"stage": 0, "micro_batch": 1, "seq_len": 64,
             **{name: statistics.median(m[key] for m in floor_steps[warmup:])
                for name, key in (("ms", "step_ms"), ("host_wait_ms", "host_wait_ms"),
                                  ("drain_ms", "drain_ms"))}}
gpt = {"model": "gpt", "preset": "124M", "params": json.loads((log / "train-s0.summary.json").read_text())["params"],
       "world": 1, "steps": steps, "rounds": 1, "accelerator": "cuda", "device": adam["device"],
       "backend": "nccl", "precision": "bf16", "micro_batch": micro_batch, "seq_len": seq_len,
       "warmup": warmup, "flops_per_token": flops_per_token(torch_gpt["params"], n_layer, n_embd, seq_len),
       "peak_flops": peak_flops, "rows": rows, "exact_attention": exact_row, "fp16": fp16_row,
       "issuing_floor": floor_row,
       "torch": torch_gpt, "torch_fp16": torch_fp16}
if full_rows:
    gpt["full_checkpointing"] = {"micro_batch": ckpt_micro_batch, "rows": full_rows}
shutil.copyfile(log / "adam.out", data / f"{prefix}-adam.json")
(data / f"{prefix}-gpt124m.json").write_text(json.dumps(gpt, indent=2) + "\n")
train_seconds = (sum(int(seconds[f"train-s{s}"]) for s in range(4)) + int(seconds["train-s0-exact"])
                 + int(seconds["train-s0-fp16"]) + int(seconds["train-s0-floor"])
                 + sum(int(seconds[f"train-full-s{s}"]) for s in range(4) if full_rows)
                 + int(seconds["torch-gpt"]) + int(seconds["torch-gpt-fp16"]))
print(f"\nwrote {data}/{prefix}-adam.json and {prefix}-gpt124m.json; add to notebooks/data/README.md:")
print(f"| {prefix}-adam.json | `zerolab bench adam --accelerator cuda --repeats 20 --json` | {date} | {adam['device']} | {seconds['adam']} |")
print(f"| {prefix}-gpt124m.json | `scripts/bench_gpu.sh --steps {steps} --warmup {warmup} --micro-batch {micro_batch} --ckpt-micro-batch {ckpt_micro_batch}` | {date} | {adam['device']} | {train_seconds} |")
print(f"\nAdamW: zerolab {adam['gbps']:.0f} GB/s, copy {adam['copy_gbps']:.0f} GB/s ({adam['copy_fraction']:.0%})"
      + (f", torch fused {adam['torch']['gbps']:.0f} GB/s" if adam.get("torch") else f"; {adam.get('torch_note')}"))
for row in rows:
    print(f"stage {row['stage']} {row['engine']:6} {row['ms']:8.1f} ms {row['tokens_per_s']:9.0f} tok/s "
          f"MFU {row['mfu']:.1%} peak {row['peak_bytes'] / 2**30:.2f} GiB")
for row in full_rows:
    print(f"stage {row['stage']} {row['engine']:6} full checkpointing, micro-batch {ckpt_micro_batch}: "
          f"{row['ms']:8.1f} ms {row['tokens_per_s']:9.0f} tok/s MFU {row['mfu']:.1%} "
          f"peak {row['peak_bytes'] / 2**30:.2f} GiB ({row['overhead_vs_ddp']:.2f}x DDP)")
ddp = rows[0]
issuing_ms = ddp["ms"] - ddp["host_wait_ms"] - ddp["drain_ms"]
print(f"stage 0: the host was blocked {ddp['host_wait_ms']:.1f} ms a step in its "
      f"{ddp['host_waits']} waits and {ddp['drain_ms']:.1f} ms at its end, and issued work for "
      f"{issuing_ms:.1f} ms of its {ddp['ms']:.1f} (medians)")
same = all(row["losses"] == rows[0]["losses"] for row in rows)
print(f"the four stages' losses {'agree bit for bit' if same else 'DIFFER'} in all {len(rows[0]['losses'])} steps")
print(f"stage 0 exact attention {exact_row['ms']:8.1f} ms ({exact_row['ms'] / rows[0]['ms']:.2f}x the default's)")
floor_blocked_ms = floor_row["host_wait_ms"] + floor_row["drain_ms"]
print(f"stage 0 at 1 x 64 tokens {floor_row['ms']:8.1f} ms a step, the host blocked "
      f"{floor_blocked_ms:.1f} ms of it: the host issues a step in about "
      f"{floor_row['ms'] - floor_blocked_ms:.1f} ms, {(floor_row['ms'] - floor_blocked_ms) / ddp['ms']:.0%} "
      f"of stage 0's step at {micro_batch} x {seq_len}")
print(f"stage 0 fp16 {fp16_row['ms']:8.1f} ms ({fp16_row['ms'] / rows[0]['ms']:.2f}x bf16's, "
      f"{fp16_row['ms'] / torch_fp16['step_ms']:.2f}x torch fp16's), "
      f"peak {fp16_row['peak_bytes'] / 2**30:.2f} GiB")
for name, run in (("torch", torch_gpt), ("torch fp16", torch_fp16)):
    print(f"{name:10} {run['step_ms']:8.1f} ms {run['tokens_per_s']:9.0f} tok/s "
          f"MFU {run['mfu']:.1%} peak {run['peak_bytes'] / 2**30:.2f} GiB")
print(f"zerolab DDP is {rows[0]['ms'] / torch_gpt['step_ms']:.2f}x torch's step (bf16)")
PY
