#!/usr/bin/env bash
# netns_faults.sh — the mpi backend across a real TCP network, with faults injected mid-run. Four
# "hosts" are Linux network namespaces (10.77.0.10-13, one rank each) on a bridge in a fifth, where
# mpirun runs and starts its daemons through netns_rsh_agent.sh instead of ssh.
#   partition  rank 3's host loses its link after the run has committed checkpoint 2: the job must
#              end within seconds, non-zero, with a line naming rank 3 as the rank that does not
#              answer, and leave no process behind; its last checkpoint, resumed on the sim, must
#              end bitwise equal to an uninterrupted sim run.
#   slow-link  rank 2's link slows down after step 5 (netem delay where the kernel has it, else a
#              tbf rate limit): the job must finish with the sim's final parameters, bit for bit.
# Exits 77 (CTest's SKIP_RETURN_CODE) where it cannot build the network: not root, no iproute2,
# no network namespaces, bridge or veth, a read-only /proc/sys, no netem or tbf qdisc. The
# namespaces go when it exits, pass or fail.
# Usage: netns_faults.sh partition|slow-link <zerolab binary> <mpirun>
set -euo pipefail

mode="${1:-}"
zerolab="${2:-}"
mpirun="${3:-}"
agent="$(cd "$(dirname "$0")" && pwd)/netns_rsh_agent.sh"

skip() {
  echo "netns_faults: SKIPPED: $*"
  exit 77
}
fail() {
  echo "netns_faults: FAILED: $*" >&2
  exit 1
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }

if [[ "$mode" != partition && "$mode" != slow-link ]] || [ ! -x "$zerolab" ] || [ ! -x "$mpirun" ]; then
  echo "netns_faults: usage: netns_faults.sh partition|slow-link <zerolab binary> <mpirun>" >&2
  exit 2
fi
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root (CAP_NET_ADMIN); run the test as root"
for tool in ip tc setpriv; do
  command -v "$tool" >/dev/null || skip "no '$tool' command: install iproute2 and util-linux (scripts/setup.sh)"
done

prefix="zl$$"
switch="$prefix-sw"
work="$(mktemp -d)"
namespaces=()
job_pid=""
cleanup() {
  local status=$?
  for namespace in "${namespaces[@]}"; do
    for pid in $(ip netns pids "$namespace" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$namespace" 2>/dev/null || true
  done
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the network: a bridge in $switch (10.77.0.1, mpirun's side), host 10.77.0.1R for rank R -------
add_namespace() {
  ip netns add "$1" 2>"$work/ip.err" ||
    skip "cannot make a network namespace ($(head -1 "$work/ip.err")): needs CAP_NET_ADMIN"
  namespaces+=("$1")
  ip -n "$1" link set lo up
}
add_namespace "$switch"
ip -n "$switch" link add br0 type bridge 2>"$work/ip.err" || skip "no bridge device: $(head -1 "$work/ip.err")"
ip -n "$switch" addr add 10.77.0.1/24 dev br0
ip -n "$switch" link set br0 up
# mpirun gives up on a daemon whose TCP segments go unanswered after 2 retransmissions (about
# 1.4 s) instead of Linux's 15 (about 15 minutes): how long it takes to notice a vanished host.
ip netns exec "$switch" sh -c 'echo 2 > /proc/sys/net/ipv4/tcp_retries2' 2>"$work/ip.err" ||
  skip "cannot set net.ipv4.tcp_retries2 in a namespace: $(head -1 "$work/ip.err")"
hosts=()
for rank in 0 1 2 3; do
  octet=$((10 + rank))
  add_namespace "$prefix-$octet"
  ip link add eth0 netns "$prefix-$octet" type veth peer name "host$octet" netns "$switch" \
    2>"$work/ip.err" || skip "no veth pair: $(head -1 "$work/ip.err")"
  ip -n "$switch" link set "host$octet" master br0 up
  ip -n "$prefix-$octet" addr add "10.77.0.$octet/24" dev eth0
  ip -n "$prefix-$octet" link set eth0 up
  hosts+=("10.77.0.$octet")
done

# --- the job ----------------------------------------------------------------------------------------
# Starts `zerolab train --backend mpi <args>` on the four hosts in the background (job_pid).
start_job() {
  ZL_NETNS_PREFIX="$prefix" ZL_NETNS_TMP="$work/tmp" \
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    ip netns exec "$switch" "$mpirun" --allow-run-as-root --oversubscribe \
    --host "$(IFS=,; echo "${hosts[*]}")" --map-by node -np 4 \
    --mca plm_rsh_agent "$agent" --mca orte_launch_agent "setpriv --pdeathsig KILL orted" \
    --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
    "$zerolab" train --backend mpi "$@" >"$work/job.out" 2>"$work/job.err" &
  job_pid=$!
}

# Polls every 0.1 s until `condition` (a command) holds, the job ends, or `seconds` pass.
wait_for_progress() {
  local seconds="$1" what="$2" condition="$3"
  local deadline=$(($(now_ms) + seconds * 1000))
  until $condition; do
    kill -0 "$job_pid" 2>/dev/null ||
      fail "the job ended before $what: $(tail -n 5 "$work/job.err")"
    [ "$(now_ms)" -lt "$deadline" ] || fail "no $what after $seconds s: $(tail -n 5 "$work/job.err")"
    sleep 0.1
  done
}

# Waits up to `seconds` for the job to end; sets job_rc.
wait_for_job_end() {
  local seconds="$1" deadline=$(($(now_ms) + $1 * 1000))
  while kill -0 "$job_pid" 2>/dev/null; do
    [ "$(now_ms)" -lt "$deadline" ] || fail "mpirun still runs $seconds s later: $(tail -n 5 "$work/job.err")"
    sleep 0.1
  done
  job_rc=0
  wait "$job_pid" || job_rc=$?
}

# Every namespace empty within 5 s of the job's end, or fail naming what is left.
expect_no_process_left() {
  local deadline=$(($(now_ms) + 5000)) left
  while :; do
    left=""
    for namespace in "${namespaces[@]}"; do
      for pid in $(ip netns pids "$namespace"); do
        left+=" $namespace:$pid($(cat "/proc/$pid/comm" 2>/dev/null || echo gone))"
      done
    done
    [ -z "$left" ] && return 0
    [ "$(now_ms)" -lt "$deadline" ] || fail "processes left 5 s after the job ended:$left"
    sleep 0.1
  done
}

sim() { "$zerolab" train --world 4 "$@" >"$work/sim.out" 2>&1 || fail "sim run failed: $(cat "$work/sim.out")"; }

model=(--stage 2 --layers 3 --width 12 --in 5 --classes 4 --micro-batch 3)

# --- partition --------------------------------------------------------------------------------------
partition() {
  local checkpoints="$work/ckpt" steps=100 timeout_ms=2000
  committed_step_2() {  # `latest` moves by a rename: it is never half-written
    [ -f "$checkpoints/latest" ] && [ $((10#$(sed 's/^step-//' "$checkpoints/latest"))) -ge 2 ]
  }
  start_job "${model[@]}" --steps "$steps" --quiet --checkpoint-dir "$checkpoints" \
    --checkpoint-every 1 --collective-timeout-ms "$timeout_ms"
  wait_for_progress 30 "checkpoint 2" committed_step_2
  ip -n "$switch" link set host13 down  # rank 3's cable, pulled
  local cut_ms
  cut_ms="$(now_ms)"
  echo "netns_faults: cut rank 3's link (10.77.0.13) after $(cat "$checkpoints/latest")"
  wait_for_job_end 30
  local end_s
  end_s="$(awk -v ms=$(($(now_ms) - cut_ms)) 'BEGIN { printf "%.1f", ms / 1000 }')"
  [ "$job_rc" -ne 0 ] || fail "the partitioned job exited 0"
  local message
  message="$(grep -m1 -E "^zerolab: error: rank [0-2]: timeout after $timeout_ms ms: rank [0-2] waits in call #[0-9]+ [^;]*; rank 3 does not answer within [0-9]+ ms" "$work/job.err")" ||
    fail "no line naming rank 3 as the rank that does not answer; stderr was: $(cat "$work/job.err")"
  echo "netns_faults: the job ended $end_s s after the cut, exit code $job_rc: $message"
  expect_no_process_left
  echo "netns_faults: no process left in any namespace"

  local resumed_from
  resumed_from="$(cat "$checkpoints/latest")"
  sim "${model[@]}" --steps "$steps" --quiet --resume "$checkpoints" --save-final "$work/resumed.st"
  sim "${model[@]}" --steps "$steps" --quiet --save-final "$work/straight.st"
  cmp -s "$work/resumed.st" "$work/straight.st" ||
    fail "$resumed_from resumed on the sim differs from the uninterrupted sim run"
  echo "netns_faults: $resumed_from of the partitioned run, resumed on the sim, equals the uninterrupted sim run bitwise"
}

# --- slow link -------------------------------------------------------------------------------------
# The qdisc that slows a link on this kernel: netem's delay, else a tbf rate limit (kernels built
# without sch_netem, as some cloud kernels are). Probed on a spare port of the bridge.
pick_slow_qdisc() {
  command -v modprobe >/dev/null && { modprobe -q sch_netem || modprobe -q sch_tbf || true; }
  ip -n "$switch" link add probe0 type veth peer name probe1
  if tc -n "$switch" qdisc add dev probe0 root netem delay 10ms 2>/dev/null; then
    slow_qdisc=(netem delay 10ms)
  elif tc -n "$switch" qdisc add dev probe0 root tbf rate 256kbit burst 1600 limit 100000 2>/dev/null; then
    slow_qdisc=(tbf rate 256kbit burst 1600 limit 100000)
  else
    skip "neither the netem nor the tbf qdisc works here (kernel without sch_netem and sch_tbf?)"
  fi
  ip -n "$switch" link del probe0
}

# Mean wall ms of steps first..last in the job's progress lines ("step     6/20  ...  12.34 ms  sim").
mean_step_ms() {
  awk -v first="$1" -v last="$2" '$1 == "step" {
      split($2, at, "/"); if (at[1] < first || at[1] > last) next
      for (i = 3; i < NF; ++i) if ($(i + 1) == "ms" && $(i + 2) == "sim") { sum += $i; ++n }
    } END { printf "%.1f", n ? sum / n : -1 }' "$work/job.out"
}

slow_link() {
  local steps=20 slow_from=5
  pick_slow_qdisc
  past_step() { grep -qE "^step +$slow_from/" "$work/job.out"; }
  start_job "${model[@]}" --steps "$steps" --save-final "$work/mpi.st" --collective-timeout-ms 30000
  wait_for_progress 30 "step $slow_from" past_step
  tc -n "$switch" qdisc add dev host12 root "${slow_qdisc[@]}"  # toward rank 2
  tc -n "$prefix-12" qdisc add dev eth0 root "${slow_qdisc[@]}"  # from rank 2
  echo "netns_faults: slowed rank 2's link (10.77.0.12) after step $slow_from: ${slow_qdisc[*]}"
  wait_for_job_end 40
  [ "$job_rc" -eq 0 ] || fail "the job with a slow link failed (exit code $job_rc): $(cat "$work/job.err")"
  local stats
  stats="$(tc -s -n "$switch" qdisc show dev host12 | grep -m1 -o 'Sent.*')"
  [[ "$stats" =~ Sent\ [0-9]+\ bytes\ ([0-9]+)\ pkt.*overlimits\ ([0-9]+) ]] ||
    fail "cannot read the qdisc's statistics: $stats"
  [ "${BASH_REMATCH[1]}" -gt 0 ] || fail "no packet went through the slow link: $stats"
  [ "${slow_qdisc[0]}" = netem ] || [ "${BASH_REMATCH[2]}" -gt 0 ] ||
    fail "the rate limit never held a packet back: $stats"
  echo "netns_faults: mean step $(mean_step_ms 1 "$slow_from") ms before, $(mean_step_ms $((slow_from + 1)) "$steps") ms after; toward rank 2: $stats"
  sim "${model[@]}" --steps "$steps" --save-final "$work/sim.st"
  cmp -s "$work/mpi.st" "$work/sim.st" || fail "the job with a slow link differs from the sim run"
  echo "netns_faults: the job with a slow link ends bitwise equal to the sim run"
}

case "$mode" in
  partition) partition ;;
  slow-link) slow_link ;;
esac
