#!/usr/bin/env bash
# bench_nvme_tier.sh — ZeRO-Infinity's optimizer tier against the disk it runs on, in one command:
# `zerolab bench nvme` measures the folder's best sequential read and write bandwidth, then GPT-2
# 124M (ZeRO-1, W = 1, the optimizer offloaded to swap files in the same folder, with the aio
# block size and queue depth the bench found for both directions, as DeepSpeed's ds_nvme_tune
# hands its best settings to the config) trains a few steps twice, the update streaming unit by unit (no
# pipeline), then with pipeline_read and pipeline_write. That is one round; --rounds N
# makes N in a row, so that a shared disk's swings reach the bench and the runs alike. It prints
# what each round's --summary says: the updates' swap reads and writes in GB/s (nvme.updates: the
# optimizer steps' own, not the file's first write into fresh blocks) as a share of the bench's,
# and for each run the updates' wall time against the sum of their reads, writes and AdamW kernels
# (the pipeline hides what the wall time is below that sum); then, with several rounds, the same
# from the median of each figure over the rounds. Builds nothing.
#
#   scripts/bench_nvme_tier.sh [--zerolab build/ci/zerolab] [--steps 3] [--rounds 1] [--commit SHA] DIR LOG_DIR
#
# DIR is the folder measured (it must exist; its scratch and swap files are removed); LOG_DIR gets
# each command's output: bench-<k>.json, sequential-<k>.json and pipelined-<k>.json for round k
# (the --summary documents), and nvme-<date>-<commit>.json, the numbers printed, for
# notebooks/data: each round's under "rounds", the medians at the top.
set -euo pipefail

usage() {
  sed -n '/^#   scripts\/bench_nvme_tier.sh/p' "$0" | sed 's/^#   //' >&2
  exit 2
}

root=$(cd "$(dirname "$0")/.." && pwd)
zerolab=$root/build/ci/zerolab
steps=3
rounds=1
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
folder=
log_dir=
while (($#)); do
  case "$1" in
    --zerolab) zerolab=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --commit) commit=$2; shift 2 ;;
    -h | --help) usage ;;
    -*) echo "bench_nvme_tier.sh: unknown option $1" >&2; usage ;;
    *)
      if [[ -z $folder ]]; then folder=$1; elif [[ -z $log_dir ]]; then log_dir=$1; else usage; fi
      shift ;;
  esac
done
[[ -n $folder && -n $log_dir ]] || usage
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "bench_nvme_tier.sh: --rounds $rounds is not a count of rounds (1 or more)" >&2; exit 2; }
[[ -x $zerolab ]] || { echo "bench_nvme_tier.sh: $zerolab is not built" >&2; exit 1; }
mkdir -p "$log_dir"

model=(--model gpt --preset 124M --block-size 64 --micro-batch 1 --stage 1 --world 1
  --steps "$steps" --offload-optimizer --nvme-path "$folder" --quiet)
for ((k = 1; k <= rounds; k++)); do
  "$zerolab" bench nvme --path "$folder" --json >"$log_dir/bench-$k.json"
  read -r block depth < <(python3 -c 'import json, sys
aio = json.load(open(sys.argv[1]))["aio"]
print(aio["block_size"], aio["queue_depth"])' "$log_dir/bench-$k.json")
  aio=(--aio-block-size "$block" --aio-queue-depth "$depth")
  "$zerolab" train "${model[@]}" "${aio[@]}" --summary "$log_dir/sequential-$k.json" >/dev/null
  "$zerolab" train "${model[@]}" "${aio[@]}" --pipeline-read --pipeline-write \
    --summary "$log_dir/pipelined-$k.json" >/dev/null
done

python3 - "$log_dir" "$commit" "$rounds" <<'EOF'
import datetime
import json
import statistics
import sys

log_dir, commit, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
RUNS = ("sequential", "pipelined")
FIGURES = ("read_gbps", "write_gbps", "updates", "update_wall_ms", "update_read_ms",
           "update_write_ms", "update_adamw_ms")


def with_shares(row, bench_read, bench_write):
    """`row` with its swap GB/s as shares of the bench's and its wall time over its parts."""
    parts_ms = row["update_read_ms"] + row["update_write_ms"] + row["update_adamw_ms"]
    row["read_share"] = row["read_gbps"] / bench_read
    row["write_share"] = row["write_gbps"] / bench_write
    row["wall_over_parts"] = row["update_wall_ms"] / parts_ms
    return row


def say(label, doc):
    aio = f" (runs with {doc['aio']['block_size']} B blocks, {doc['aio']['queue_depth']} in flight)" \
        if "aio" in doc else ""
    print(f"{label}bench nvme: read {doc['bench_read_gbps']:.3f} GB/s, "
          f"write {doc['bench_write_gbps']:.3f} GB/s{aio}")
    for run in RUNS:
        r = doc[run]
        parts_ms = r["update_read_ms"] + r["update_write_ms"] + r["update_adamw_ms"]
        relation = "below" if r["update_wall_ms"] < parts_ms else "not below"
        print(f"{label}{run}: the updates' swap reads {r['read_gbps']:.3f} GB/s ({r['read_share']:.2f} of the "
              f"bench's), writes {r['write_gbps']:.3f} GB/s ({r['write_share']:.2f}); "
              f"{r['updates']:.0f} updates took {r['update_wall_ms']:.0f} ms, {relation} the "
              f"{parts_ms:.0f} ms of their reads ({r['update_read_ms']:.0f}), writes "
              f"({r['update_write_ms']:.0f}) and AdamW ({r['update_adamw_ms']:.0f}) summed "
              f"({r['wall_over_parts']:.2f} of it)")


out_rounds = []
for k in range(1, rounds + 1):
    bench = json.load(open(f"{log_dir}/bench-{k}.json"))
    entry = {"bench_read_gbps": bench["read_gbps"], "bench_write_gbps": bench["write_gbps"],
             "aio": bench["aio"]}
    for run in RUNS:
        io = json.load(open(f"{log_dir}/{run}-{k}.json"))["ranks"][0]["nvme"]
        u = io["updates"]
        row = {"read_gbps": u["read_gbps"], "write_gbps": u["write_gbps"],
               "updates": u["count"], "update_wall_ms": u["wall_ms"],
               "update_read_ms": u["read_ms"], "update_write_ms": u["write_ms"],
               "update_adamw_ms": u["adamw_ms"]}
        entry[run] = with_shares(row, entry["bench_read_gbps"], entry["bench_write_gbps"])
    out_rounds.append(entry)
    say(f"round {k}: " if rounds > 1 else "", entry)

out = {"date": datetime.date.today().isoformat(), "commit": commit, "folder": bench["folder"],
       "backend": bench["backend"], "o_direct": bench["o_direct"], "rounds": out_rounds}
for key in ("bench_read_gbps", "bench_write_gbps"):
    out[key] = statistics.median(r[key] for r in out_rounds)
for run in RUNS:
    row = {key: statistics.median(r[run][key] for r in out_rounds) for key in FIGURES}
    out[run] = with_shares(row, out["bench_read_gbps"], out["bench_write_gbps"])
print(f"({out['backend']}, {'O_DIRECT' if out['o_direct'] else 'page cache'})")
if rounds > 1:
    say(f"median of {rounds} rounds: ", out)
name = f"{log_dir}/nvme-{out['date']}-{commit}.json"
json.dump(out, open(name, "w"), indent=2)
print(f"wrote {name}")
EOF
