#!/usr/bin/env bash
# pacing_scenarios.sh -- the skew and pacing scenarios of reference/pacing.md 1.9 on the
# emulated fabric (scripts/fabric-testbed.sh: 8 hosts on 2 leaves, 400 Mbit/s host links,
# 4:1 oversubscribed uplinks, ranks round-robin over the leaves; needs root).
#
#   bench/pacing_scenarios.sh [--scenarios "S0 S1 S2 S3"] [--rounds 2] [--iters 150] [--warmup 60]
#                             [--compute-us 8000] [--competitor-bytes 1M] [build dir]
#
#   S0  iid compute noise (normal, sigma 10%), nothing shared: pacing must cost <= 1% and
#       the controller stay off or disable itself.
#   S1  a persistent straggler (rank 3 computes 1.3x) with a competing job on the same
#       links (all_reduce_perf of --competitor-bytes in a loop, on the rank-order ring,
#       which crosses the oversubscribed uplinks on every hop; at 1 MiB it takes most of
#       the uplinks, and the measured job's iteration is about 30x its compute).
#   S2  several buckets in flight (8 buckets, 4 per group) with the straggler.
#   S3  two training jobs on the same leaves: a second train_emulator (pacing off) runs
#       beside the measured one.
# Each scenario is one train_emulator invocation: pacing off, observe and on back to back,
# --rounds times, on the same random draws (see bench/train_emulator.cc). Competing jobs
# start before and are stopped after it, on every host.
set -euo pipefail

scenarios="S0 S1 S2 S3" rounds=2 iters=150 warmup=60 compute=8000 competitor_bytes=1M build=build
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --scenarios) scenarios=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --compute-us) compute=$2; shift 2 ;;
    --competitor-bytes) competitor_bytes=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "pacing_scenarios.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
testbed=$here/../scripts/fabric-testbed.sh
emu=$(cd "$build" && pwd)/bench/train_emulator perf=$(cd "$build" && pwd)/bench/all_reduce_perf
for f in "$emu" "$perf"; do
  [ -x "$f" ] || { echo "pacing_scenarios.sh: $f not found; build it first (cmake --build $build)" >&2; exit 2; }
done

common=(--iters "$iters" --warmup "$warmup" --rounds "$rounds" --compute-us "$compute" --noise normal:0.1
        --buckets 4 --bucket-bytes 262144 --inflight 2)
for s in $scenarios; do
  competitor=""
  case "$s" in
    S0) args=("${common[@]}") ;;
    S1) args=("${common[@]}" --straggler 3:1.3)
        competitor="TEMPO_RING_ORDER=rank $perf -b $competitor_bytes -e $competitor_bytes -n 100000000 -w 0 -c 0" ;;
    S2) args=("${common[@]}" --straggler 3:1.3 --buckets 8 --inflight 4) ;;
    S3) args=("${common[@]}" --straggler 3:1.3)
        competitor="$emu --modes off --iters 100000000 --warmup 0 --rounds 1 --compute-us $compute --noise normal:0.1 --buckets 4 --bucket-bytes 262144 --inflight 2" ;;
    *) echo "pacing_scenarios.sh: unknown scenario $s (S0 S1 S2 S3)" >&2; exit 2 ;;
  esac
  echo "## $s"
  # On every host: the competitor (its own bootstrap port) in the background, then the
  # measured job; the competitor is stopped when the measured job ends.
  # shellcheck disable=SC2016  # expanded by the per-host shell
  COMPETITOR=$competitor "$testbed" --hosts 8 --leaves 2 --oversub 4 --host-rate 400mbit --numbering round-robin \
    --timeout 1500 -- \
    sh -c 'c=""; if [ -n "$COMPETITOR" ]; then env MASTER_PORT=29731 TEMPO_PACING=off $COMPETITOR > /dev/null 2>&1 & c=$!; fi
           "$@"; rc=$?; [ -z "$c" ] || kill -9 "$c" 2>/dev/null; exit $rc' \
    sh "$emu" "${args[@]}" 2>&1 | grep -E '^#|^  ' | grep -v '^# fabric-testbed'
done
