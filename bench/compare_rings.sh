#!/usr/bin/env bash
# compare_rings.sh -- the topology-aware ring against the rank-order ring, side by side,
# on an emulated oversubscribed fabric (scripts/fabric-testbed.sh; needs root).
#
#   bench/compare_rings.sh [--hosts 8] [--leaves 2] [--oversub 4] [--host-rate 400mbit] [--ranks-per-host 1]
#                          [-b 64K] [-e 16M] [-f 4] [--rounds 3] [--iters 3] [--warmup 1]
#                          [--algo ring] [--algos "hier ring"] [--nics 2 --nic-sets "eth0 eth0,eth1"] [build dir]
#
# One rank per emulated host, ranks numbered round-robin across the leaves (the layout in
# which a rank-order ring crosses the spine on every hop). Each round runs all_reduce_perf
# once with TEMPO_RING_ORDER=topology and once with TEMPO_RING_ORDER=rank, alternating
# which goes first. TEMPO_ALGO (default ring, so that small sizes compare rings too)
# passes through --algo. The table shows, per size, the median out-of-place time (us) and
# busbw (GB/s) of each and topo/rank = the rank-order ring's time / the topology ring's
# (above 1: the topology ring is faster; the column B/A). --algos "A B" instead compares TEMPO_ALGO=A with
# TEMPO_ALGO=B, both on the topology ring (B/A: above 1, A is faster). --nics K gives every
# host K links on K rails, and --nic-sets "A B" compares TEMPO_NIC=A with TEMPO_NIC=B (one
# channel per NIC named), both on the topology ring. Results are checked (-c 1) outside
# the timed loop.
set -euo pipefail

per_host=1 hosts=8 leaves=2 oversub=4 rate=400mbit minb=64K maxb=16M factor=4 rounds=3 iters=3 warmup=1 algo=ring algos="" build=build
nics=1 nic_sets=""
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) hosts=$2; shift 2 ;;
    --leaves) leaves=$2; shift 2 ;;
    --ranks-per-host) per_host=$2; shift 2 ;;
    --oversub) oversub=$2; shift 2 ;;
    --host-rate) rate=$2; shift 2 ;;
    -b) minb=$2; shift 2 ;;
    -e) maxb=$2; shift 2 ;;
    -f) factor=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --iters|-n) iters=$2; shift 2 ;;
    --warmup|-w) warmup=$2; shift 2 ;;
    --algo) algo=$2; shift 2 ;;
    --algos) algos=$2; shift 2 ;;
    --nics) nics=$2; shift 2 ;;
    --nic-sets) nic_sets=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "compare_rings.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
testbed=$here/../scripts/fabric-testbed.sh
perf=$build/bench/all_reduce_perf
[ -x "$perf" ] || { echo "compare_rings.sh: $perf not found; build it first (cmake --build $build)" >&2; exit 2; }
. "$here/medians.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/compare_rings.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Contender k: its name and its settings.
if [ -n "$nic_sets" ]; then
  read -r a1 a2 <<<"$nic_sets"
  names=("$a1" "$a2")
  settings=("TEMPO_RING_ORDER=topology TEMPO_ALGO=$algo TEMPO_NIC=$a1" "TEMPO_RING_ORDER=topology TEMPO_ALGO=$algo TEMPO_NIC=$a2")
elif [ -n "$algos" ]; then
  read -r a1 a2 <<<"$algos"
  names=("$a1" "$a2")
  settings=("TEMPO_RING_ORDER=topology TEMPO_ALGO=$a1" "TEMPO_RING_ORDER=topology TEMPO_ALGO=$a2")
else
  names=(topology rank)
  settings=("TEMPO_RING_ORDER=topology TEMPO_ALGO=$algo" "TEMPO_RING_ORDER=rank TEMPO_ALGO=$algo")
fi
echo "# compare_rings.sh: all_reduce_perf, $hosts hosts ($per_host rank(s) each, $nics link(s)) on $leaves leaves, host links $rate, $oversub:1 uplinks, ranks round-robin over the leaves"
echo "# sizes $minb..$maxb factor $factor, iters $iters, warmup $warmup, rounds $rounds, float sum; ${names[0]}: ${settings[0]}; ${names[1]}: ${settings[1]}"
for ((r = 0; r < rounds; r++)); do
  for ((j = 0; j < 2; j++)); do
    k=$(((r + j) % 2)) o=${names[$(((r + j) % 2))]}
    out=$work/raw.$k.$r rc=0
    # shellcheck disable=SC2086  # the settings are several assignments
    "$testbed" --hosts "$hosts" --ranks-per-host "$per_host" --leaves "$leaves" --oversub "$oversub" --host-rate "$rate" --nics "$nics" --numbering round-robin \
      --timeout 1800 -- env ${settings[$k]} NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=GRAPH,TUNING \
      "$perf" -b "$minb" -e "$maxb" -f "$factor" -n "$iters" -w "$warmup" -c 1 -d float -o sum > "$out" 2>&1 || rc=$?
    if [ "$rc" != 0 ]; then
      echo "compare_rings.sh: $o failed (exit $rc):" >&2
      cat "$out" >&2
      exit 1
    fi
    [ "$r" != 0 ] || grep -oE "Ring \(.* order\).*|[0-9]+ rail\(s\), [0-9]+ channel.*" "$out" | sed "s|^|# $o: |"
    awk '$1 ~ /^[0-9]+$/ && NF >= 13 { print $1, $6, $8 }' "$out" > "$work/v.$k.$r"
  done
done
for k in 0 1; do medians "$work"/v."$k".* > "$work/med.$k"; done
echo
printf "# %10s  %14s  %14s  %14s  %14s  %9s\n" "size(B)" "${names[0]} us" "${names[1]} us" "${names[0]} GB/s" \
  "${names[1]} GB/s" "B/A"
# busbw from the median times (the tools print two decimals, too few on slow links).
join "$work/med.0" "$work/med.1" | sort -k1,1n | awk -v n="$((hosts * per_host))" '
  { f = 2 * (n - 1) / n / 1e3; r = $2 > 0 ? $4 / $2 : 0
    printf "  %10d  %14.1f  %14.1f  %14.4f  %14.4f  %9.2f\n", $1, $2, $4, $1 / $2 * f, $1 / $4 * f, r }'
