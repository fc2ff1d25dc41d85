#!/usr/bin/env bash
# compare_transports.sh -- one perf tool over libfabric and over UCX, side by side.
#
#   bench/compare_transports.sh [--coll all_reduce] [--np "2 4"] [-b 8] [-e 64M] [-f 8]
#                               [--rounds R] [--iters N] [--warmup W] [--one-host] [build dir]
#
# Runs build/bench/<coll>_perf under build/tools/tempo-run once per round (default 3) with
# each contender, in an order that rotates from round to round:
#   ofi   TEMPO_NET_DEFAULT=ofi: libfabric tcp;ofi_rxm
#   ucx   TEMPO_NET_DEFAULT=ucx: UCX over the transports it selects (tcp between "hosts")
#   auto  TEMPO_NET_DEFAULT=auto (the default): UCX below TEMPO_NET_LARGE_BYTES, libfabric
#         from there
# By default every rank reports a host name of its own (TEMPO_HOSTNAME=host<rank>), so
# TEMPO_TRANSPORT=auto treats every peer as remote and picks the network transport, as
# across real hosts. --one-host leaves the ranks on one host and sets TEMPO_TRANSPORT=ofi
# or ucx instead (libfabric shm against UCX's shared-memory transports; no auto column).
# Variables the transports read (FI_*, UCX_*) pass through. The table shows, per size, the
# median out-of-place time (us) of each and its busbw (GB/s), ofi/ucx = ofi time / ucx
# time (above 1: UCX is faster) and auto/best = auto's time / the faster one's (1 or
# below: auto matched the better library). Results are checked (-c 1) outside the timed
# loop.
set -euo pipefail

coll=all_reduce
nps="2 4"
minb=8
maxb=64M
factor=8
rounds=3
iters=50
warmup=5
onehost=0
build=build

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --coll) coll="$2"; shift 2 ;;
    --np) nps="$2"; shift 2 ;;
    -b) minb="$2"; shift 2 ;;
    -e) maxb="$2"; shift 2 ;;
    -f) factor="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --iters|-n) iters="$2"; shift 2 ;;
    --warmup|-w) warmup="$2"; shift 2 ;;
    --one-host) onehost=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "compare_transports.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) build="$1"; shift ;;
  esac
done

perf="$build/bench/${coll}_perf"
run="$build/tools/tempo-run"
for f in "$perf" "$run"; do
  [ -x "$f" ] || { echo "compare_transports.sh: $f not found; build it first (cmake --build $build)" >&2; exit 2; }
done

. "$(dirname "$0")/medians.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/compare_transports.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# run_one <ofi|ucx> <np> <output>: one run; stops the script with its output on failure.
run_one() {
  local t=$1 np=$2 out=$3 rc=0
  local args=(-b "$minb" -e "$maxb" -f "$factor" -n "$iters" -w "$warmup" -c 1 -d float -o sum)
  if [ "$onehost" = 1 ]; then
    TEMPO_TRANSPORT=$t "$run" -n "$np" --timeout 900 -- "$perf" "${args[@]}" > "$out" 2>&1 || rc=$?
  else
    TEMPO_NET_DEFAULT=$t "$run" -n "$np" --timeout 900 -- \
      sh -c 'TEMPO_HOSTNAME=host$RANK exec "$0" "$@"' "$perf" "${args[@]}" > "$out" 2>&1 || rc=$?
  fi
  if [ "$rc" != 0 ]; then
    echo "compare_transports.sh: $coll over $t with $np processes failed (exit $rc):" >&2
    cat "$out" >&2
    exit 1
  fi
}

echo "# compare_transports.sh: ${coll}_perf over libfabric (ofi), UCX (ucx)$([ "$onehost" = 1 ] || echo " and both by size (auto)"), $([ "$onehost" = 1 ] && echo "ranks on one host" || echo "every rank its own host")"
echo "# sizes $minb..$maxb factor $factor, iters $iters, warmup $warmup, rounds $rounds, float sum; $(ucx_info -v 2>/dev/null | head -1 | sed 's/^# *//') ; $(fi_info --version 2>/dev/null | head -1)"
if [ "$onehost" = 1 ]; then tools=(ofi ucx); else tools=(ofi ucx auto); fi
nt=${#tools[@]}
for np in $nps; do
  for ((r = 0; r < rounds; r++)); do
    for ((k = 0; k < nt; k++)); do
      t=${tools[$(((r + k) % nt))]}
      run_one "$t" "$np" "$work/raw.$np.$t.$r"
      awk '$1 ~ /^[0-9]+$/ && NF >= 13 { print $1, $6, $8 }' "$work/raw.$np.$t.$r" > "$work/v.$np.$t.$r"
    done
  done
  # Median per (tool, size) over rounds, of time and of busbw.
  for t in "${tools[@]}"; do medians "$work"/v."$np"."$t".* > "$work/med.$np.$t"; done
  echo
  echo "# $coll np=$np: out-of-place time (us) and busbw (GB/s), median of $rounds rounds"
  if [ "$nt" = 2 ]; then
    printf "# %10s  %9s  %9s  %9s  %9s  %7s\n" "size(B)" "ofi us" "ucx us" "ofi GB/s" "ucx GB/s" "ofi/ucx"
    join "$work/med.$np.ofi" "$work/med.$np.ucx" | sort -k1,1n | awk '
      { r = $4 > 0 ? $2 / $4 : 0; printf "  %10d  %9.2f  %9.2f  %9.2f  %9.2f  %7.2f\n", $1, $2, $4, $3, $5, r }'
  else
    printf "# %10s  %9s  %9s  %9s  %9s  %9s  %9s  %7s  %9s\n" "size(B)" "ofi us" "ucx us" "auto us" \
      "ofi GB/s" "ucx GB/s" "auto GB/s" "ofi/ucx" "auto/best"
    join "$work/med.$np.ofi" "$work/med.$np.ucx" | join - "$work/med.$np.auto" | sort -k1,1n | awk '
      { best = $2 < $4 ? $2 : $4; r = $4 > 0 ? $2 / $4 : 0; a = best > 0 ? $6 / best : 0
        printf "  %10d  %9.2f  %9.2f  %9.2f  %9.2f  %9.2f  %9.2f  %7.2f  %9.2f\n", $1, $2, $4, $6, $3, $5, $7, r, a }'
  fi
done
