#!/usr/bin/env bash
# bench_nvme_tier.sh — ZeRO-Infinity's optimizer tier against the disk it runs on, in one command:
# `zerolab bench nvme` measures the folder's best sequential read and write bandwidth, then GPT-2
# 124M (ZeRO-1, W = 1, the optimizer offloaded to swap files in the same folder, with DeepSpeed's
# default aio: 1 MiB blocks, 8 in flight) trains a few steps twice, the update streaming unit by unit (no pipeline), then with pipeline_read and
# pipeline_write. It prints what the runs' --summary say: the swap files' read and write GB/s as a
# share of the bench's, and for each run the updates' wall time against the sum of their reads,
# writes and AdamW kernels (the pipeline hides what the wall time is below that sum). Builds
# nothing.
#
#   scripts/bench_nvme_tier.sh [--zerolab build/ci/zerolab] [--steps 3] [--commit SHA] DIR LOG_DIR
#
# DIR is the folder measured (it must exist; its scratch and swap files are removed); LOG_DIR gets
# each command's output: bench.json, sequential.json and pipelined.json (the --summary documents),
# and nvme-<date>-<commit>.json, the numbers printed, for notebooks/data.
set -euo pipefail

usage() {
  sed -n '11p' "$0" | sed 's/^# //' >&2
  exit 2
}

root=$(cd "$(dirname "$0")/.." && pwd)
zerolab=$root/build/ci/zerolab
steps=3
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
folder=
log_dir=
while (($#)); do
  case "$1" in
    --zerolab) zerolab=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --commit) commit=$2; shift 2 ;;
    -h | --help) usage ;;
    -*) echo "bench_nvme_tier.sh: unknown option $1" >&2; usage ;;
    *)
      if [[ -z $folder ]]; then folder=$1; elif [[ -z $log_dir ]]; then log_dir=$1; else usage; fi
      shift ;;
  esac
done
[[ -n $folder && -n $log_dir ]] || usage
[[ -x $zerolab ]] || { echo "bench_nvme_tier.sh: $zerolab is not built" >&2; exit 1; }
mkdir -p "$log_dir"

"$zerolab" bench nvme --path "$folder" --json >"$log_dir/bench.json"
model=(--model gpt --preset 124M --block-size 64 --micro-batch 1 --stage 1 --world 1
  --steps "$steps" --offload-optimizer --nvme-path "$folder" --quiet)
"$zerolab" train "${model[@]}" --summary "$log_dir/sequential.json" >/dev/null
"$zerolab" train "${model[@]}" --pipeline-read --pipeline-write \
  --summary "$log_dir/pipelined.json" >/dev/null

python3 - "$log_dir" "$commit" <<'EOF'
import datetime
import json
import sys

log_dir, commit = sys.argv[1], sys.argv[2]
bench = json.load(open(f"{log_dir}/bench.json"))
out = {"date": datetime.date.today().isoformat(), "commit": commit, "folder": bench["folder"],
       "backend": bench["backend"], "o_direct": bench["o_direct"],
       "bench_read_gbps": bench["read_gbps"], "bench_write_gbps": bench["write_gbps"]}
print(f"bench nvme ({bench['backend']}, {'O_DIRECT' if bench['o_direct'] else 'page cache'}): "
      f"read {bench['read_gbps']:.3f} GB/s, write {bench['write_gbps']:.3f} GB/s")
for run in ("sequential", "pipelined"):
    io = json.load(open(f"{log_dir}/{run}.json"))["ranks"][0]["nvme"]
    u = io["updates"]
    parts_ms = u["read_ms"] + u["write_ms"] + u["adamw_ms"]
    row = {"read_gbps": io["read_gbps"], "write_gbps": io["write_gbps"],
           "read_share": io["read_gbps"] / bench["read_gbps"],
           "write_share": io["write_gbps"] / bench["write_gbps"],
           "updates": u["count"], "update_wall_ms": u["wall_ms"], "update_read_ms": u["read_ms"],
           "update_write_ms": u["write_ms"], "update_adamw_ms": u["adamw_ms"],
           "wall_over_parts": u["wall_ms"] / parts_ms}
    out[run] = row
    relation = "below" if u["wall_ms"] < parts_ms else "not below"
    print(f"{run}: swap reads {io['read_gbps']:.3f} GB/s ({row['read_share']:.2f} of the bench's), "
          f"writes {io['write_gbps']:.3f} GB/s ({row['write_share']:.2f}); {u['count']} updates took "
          f"{u['wall_ms']:.0f} ms, {relation} the {parts_ms:.0f} ms of their reads "
          f"({u['read_ms']:.0f}), writes ({u['write_ms']:.0f}) and AdamW ({u['adamw_ms']:.0f}) "
          f"summed ({row['wall_over_parts']:.2f} of it)")
name = f"{log_dir}/nvme-{out['date']}-{commit}.json"
json.dump(out, open(name, "w"), indent=2)
print(f"wrote {name}")
EOF
