#!/usr/bin/env bash
# compare_pacing.sh -- what skew telemetry costs: all_reduce_perf with TEMPO_PACING=off
# against TEMPO_PACING=observe (or any two modes), side by side.
#
#   bench/compare_pacing.sh [--np 4] [--modes "off observe"] [-b 8] [-e 64M] [-f 4]
#                           [--rounds 5] [--iters 50] [--warmup 5] [build dir]
#
# Each round runs all_reduce_perf once per mode on --np local processes (tempo-run),
# alternating which goes first. The table shows, per size, the median out-of-place time
# (us) of each mode and B/A = B's time / A's (above 1: B is slower; observe's target is
# at most 1.01 against off at every size). Results are checked (-c 1) outside the timed loop.
set -euo pipefail

np=4 modes="off observe" minb=8 maxb=64M factor=4 rounds=5 iters=50 warmup=5 build=build
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --np) np=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    -b) minb=$2; shift 2 ;;
    -e) maxb=$2; shift 2 ;;
    -f) factor=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --iters|-n) iters=$2; shift 2 ;;
    --warmup|-w) warmup=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "compare_pacing.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
perf=$build/bench/all_reduce_perf run=$build/tools/tempo-run
for f in "$perf" "$run"; do
  [ -x "$f" ] || { echo "compare_pacing.sh: $f not found; build it first (cmake --build $build)" >&2; exit 2; }
done
. "$here/medians.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/compare_pacing.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

read -r m0 m1 <<<"$modes"
names=("$m0" "$m1")
echo "# compare_pacing.sh: all_reduce_perf on $np local processes, sizes $minb..$maxb factor $factor, iters $iters, warmup $warmup, rounds $rounds, float sum"
for ((r = 0; r < rounds; r++)); do
  for ((j = 0; j < 2; j++)); do
    k=$(((r + j) % 2))
    out=$work/raw.$k.$r rc=0
    TEMPO_PACING=${names[$k]} "$run" -n "$np" --timeout 1800 -- \
      "$perf" -b "$minb" -e "$maxb" -f "$factor" -n "$iters" -w "$warmup" -c 1 -d float -o sum > "$out" 2>&1 || rc=$?
    if [ "$rc" != 0 ]; then
      echo "compare_pacing.sh: TEMPO_PACING=${names[$k]} failed (exit $rc):" >&2
      cat "$out" >&2
      exit 1
    fi
    awk '$1 ~ /^[0-9]+$/ && NF >= 13 { print $1, $6, $8 }' "$out" > "$work/v.$k.$r"
  done
done
for k in 0 1; do medians "$work"/v."$k".* > "$work/med.$k"; done
echo
printf "# %10s  %12s  %12s  %7s\n" "size(B)" "$m0 us" "$m1 us" "B/A"
join "$work/med.0" "$work/med.1" | sort -k1,1n | awk '
  { r = $2 > 0 ? $4 / $2 : 0; printf "  %10d  %12.1f  %12.1f  %7.3f\n", $1, $2, $4, r }'
