#!/usr/bin/env bash
# compare_p2p.sh -- Tempo's transport layer (bench/transport_perf) against the transports'
# own tools on the same transport: ucx_perftest (UCX over tcp, over shared memory) and
# fi_pingpong (libfabric tcp;ofi_rxm, shm).
#
#   bench/compare_p2p.sh [--rounds R] [--pairs "ucx_tcp ucx_sm ofi_tcp ofi_shm"] [build dir]
#
# Each pair runs both tools R times (default 3), alternating which goes first, both ranks
# of each on CPUs 0 and 1, and reports medians:
#   8 B    one-way latency (us): transport_perf's ping-pong average against ucx_perftest
#          tag_lat's average, or fi_pingpong's usec/xfer; "added" = ours - theirs
#   1 MiB, 4 MiB  bandwidth (MB/s, 10^6 bytes): transport_perf's stream (16 in flight)
#          against ucx_perftest tag_bw (converted from its 2^20-byte MB/s); its ping-pong
#          bandwidth against fi_pingpong's MB/sec, which is a ping-pong's; "ratio" = ours /
#          theirs
# UCX_TLS selects UCX's transports for both tools (tcp; sm = posix/sysv + cma). For
# ofi_shm both run libfabric shm's default protocol for large messages, cross-memory attach
# (FI_SHM_DISABLE_CMA=0, which Tempo's communicators otherwise default to 1); set
# FI_SHM_DISABLE_CMA=1 to compare its copy through shared buffers instead.
set -euo pipefail

rounds=3
pairs="ucx_tcp ucx_sm ofi_tcp ofi_shm"
build=build
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --pairs) pairs="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    -*) echo "compare_p2p.sh: unknown option $1" >&2; exit 2 ;;
    *) build="$1"; shift ;;
  esac
done
tp="$build/bench/transport_perf"
[ -x "$tp" ] || { echo "compare_p2p.sh: $tp not found; build it first" >&2; exit 2; }

shm_cma_off=${FI_SHM_DISABLE_CMA:-0}
port=$((20000 + RANDOM % 20000))
next_port() { port=$((port + 1)); echo "$port"; }

# ours <pair> <size> <lat|pp|stream>: one transport_perf figure.
ours() {
  local pair=$1 size=$2 what=$3 out col
  case "$pair" in
    ucx_tcp) out=$(UCX_TLS=tcp "$tp" -t ucx -b "$size" -e "$size" -n 20000 -w 500) ;;
    ucx_sm) out=$(UCX_TLS=sm "$tp" -t ucx -b "$size" -e "$size" -n 20000 -w 500) ;;
    ofi_tcp) out=$("$tp" -t ofi -p tcp -b "$size" -e "$size" -n 20000 -w 500) ;;
    ofi_shm) out=$(FI_SHM_DISABLE_CMA=$shm_cma_off "$tp" -t ofi -p shm -b "$size" -e "$size" -n 20000 -w 500) ;;
  esac
  case "$what" in lat) col=3 ;; pp) col=5 ;; stream) col=6 ;; esac
  echo "$out" | awk -v c="$col" '$1 ~ /^[0-9]+$/ { print $c }'
}

# theirs <pair> <size> <lat|bw>: the transport's own tool's figure.
theirs() {
  local pair=$1 size=$2 what=$3 p tls test iters
  case "$pair" in
    ucx_*)
      tls=${pair#ucx_}
      p=$(next_port)
      test=tag_lat iters=20000
      [ "$what" = bw ] && test=tag_bw iters=$((1073741824 / size < 20000 ? 1073741824 / size : 20000))
      UCX_TLS=$tls ucx_perftest -p "$p" -c 0 > /dev/null 2>&1 &
      local server=$!
      sleep 0.3
      # Final: iters, lat 50%, lat avg, lat overall, bw avg (MB/s = 2^20 B/s), ...
      UCX_TLS=$tls ucx_perftest 127.0.0.1 -p "$p" -c 1 -t "$test" -s "$size" -n "$iters" -w 500 2>&1 |
        awk -v w="$what" '$1 == "Final:" { if (w == "lat") print $4; else printf "%.1f\n", $6 * 1048576 / 1e6 }'
      wait "$server" || true
      ;;
    ofi_*)
      local prov="tcp;ofi_rxm"
      [ "$pair" = ofi_shm ] && prov=shm
      export FI_SHM_DISABLE_CMA=$shm_cma_off
      p=$(next_port)
      iters=$((1073741824 / size < 20000 ? 1073741824 / size : 20000))
      taskset -c 0 fi_pingpong -p "$prov" -e rdm -m tagged -I "$iters" -S "$size" -B "$p" > /dev/null 2>&1 &
      local server=$!
      sleep 0.3
      # bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
      taskset -c 1 fi_pingpong -p "$prov" -e rdm -m tagged -I "$iters" -S "$size" -P "$p" 127.0.0.1 2>&1 |
        awk -v w="$what" '$1 ~ /^[0-9]/ && NF == 8 { print (w == "lat") ? $7 : $6 }'
      wait "$server" || true
      ;;
  esac
}

median() { sort -g | awk '{ a[++n] = $1 } END { if (n) print (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }'; }

echo "# compare_p2p.sh: Tempo transport_perf vs ucx_perftest / fi_pingpong, CPUs 0 and 1, median of $rounds rounds"
echo "# $(ucx_info -v 2>/dev/null | head -1 | sed 's/^# *//'); $(fi_info --version 2>/dev/null | head -1)"
printf "# %-8s %8s %-22s %10s %10s %8s\n" pair size measure tempo theirs "ratio/added"
for pair in $pairs; do
  for size in 8 1048576 4194304; do
    if [ "$size" = 8 ]; then
      what=lat
      ourwhat=lat
      measure="one-way latency (us)"
    else
      what=bw
      ourwhat=stream
      measure="stream bw (MB/s)"
      case "$pair" in ofi_*) ourwhat=pp; measure="ping-pong bw (MB/s)" ;; esac
    fi
    : > /tmp/compare_p2p.ours.$$; : > /tmp/compare_p2p.theirs.$$
    for ((r = 0; r < rounds; r++)); do
      if ((r % 2 == 0)); then
        ours "$pair" "$size" "$ourwhat" >> /tmp/compare_p2p.ours.$$
        theirs "$pair" "$size" "$what" >> /tmp/compare_p2p.theirs.$$
      else
        theirs "$pair" "$size" "$what" >> /tmp/compare_p2p.theirs.$$
        ours "$pair" "$size" "$ourwhat" >> /tmp/compare_p2p.ours.$$
      fi
    done
    o=$(median < /tmp/compare_p2p.ours.$$)
    t=$(median < /tmp/compare_p2p.theirs.$$)
    if [ "$what" = lat ]; then
      cmp=$(awk -v o="$o" -v t="$t" 'BEGIN { printf "%+.2f us", o - t }')
    else
      cmp=$(awk -v o="$o" -v t="$t" 'BEGIN { if (t + 0 > 0) printf "%.2f", o / t; else printf "-" }')
    fi
    printf "  %-8s %8s %-22s %10s %10s %8s\n" "$pair" "$size" "$measure" "$o" "$t" "$cmp"
  done
done
rm -f /tmp/compare_p2p.ours.$$ /tmp/compare_p2p.theirs.$$
