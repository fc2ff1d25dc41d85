#!/usr/bin/env bash
# compare_mpi.sh -- Tempo's perf tools against Open MPI's collectives, side by side.
#
#   bench/compare_mpi.sh [--colls "all_reduce all_gather reduce_scatter broadcast"]
#                        [--np "2 4"] [-b 64K] [-e 64M] [-f 2] [--rounds R]
#                        [--iters N] [--warmup W] [--check] [--sweep] [build dir]
#
# For each collective (default all_reduce) and process count, runs in every round (default
# 3) the three contenders, in an order that rotates from round to round so none always runs
# first on a noisy machine:
#   tempo      build/bench/<coll>_perf, launched with build/tools/tempo-run (env-based
#              bootstrap: RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT; no MPI in Tempo's path)
#   ompi-def   build/bench/mpi_<coll>_perf under mpirun, Open MPI's default configuration
#              (MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Bcast)
#   ompi-alt   the same with one algorithm forced (--mca coll_tuned_use_dynamic_rules 1):
#              all-reduce ring (coll_tuned_allreduce_algorithm 4), all-gather ring
#              (coll_tuned_allgather_algorithm 4), reduce-scatter butterfly
#              (coll_tuned_reduce_scatter_block_algorithm 4), broadcast pipeline
#              (coll_tuned_bcast_algorithm 3)
# All three run float/sum with the same sizes, iterations and warm-up, and print the
# nccl-tests table; the busbw (GB/s) of each size is taken from it: out of place, except for
# broadcast, where MPI_Bcast's single buffer matches Tempo's in-place column (ncclBcast).
# The table per collective and process count shows the median over rounds and ratio =
# tempo / max(ompi-def, ompi-alt), and ends with the minimum ratio. Validation is off
# (-c 0) unless --check is given; it runs outside the timed loop either way.
# Each size runs as its own invocation (-b S -e S), so every contender allocates buffers of
# that size only: Open MPI's small-message all-reduce measured 3-5x slower here inside one
# 64K..64M sweep (64 MiB buffers) than in a run of its own, and the point is to beat its
# best. --sweep runs the whole range in one invocation instead, as rccl-tests users do.
#
# mpirun options: --mca btl self,vader (shared memory), --oversubscribe (more ranks than
# cores), --allow-run-as-root when root; Open MPI keeps its default process binding (core
# for 2 ranks, socket above), which is part of its default configuration and its fastest
# here; tempo-run binds each rank to a core likewise while there are no more ranks than
# CPUs. Add more with MPIRUN_EXTRA="...". The build dir defaults to ./build.
set -euo pipefail

colls="all_reduce"
nps="2 4"
minb=64K
maxb=64M
factor=2
rounds=3
iters=20
warmup=1
check=0
sweep=0
build=build

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --colls) colls="$2"; shift 2 ;;
    --np) nps="$2"; shift 2 ;;
    -b) minb="$2"; shift 2 ;;
    -e) maxb="$2"; shift 2 ;;
    -f) factor="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --iters|-n) iters="$2"; shift 2 ;;
    --warmup|-w) warmup="$2"; shift 2 ;;
    --check) check=1; shift ;;
    --sweep) sweep=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "compare_mpi.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) build="$1"; shift ;;
  esac
done

# mpi_name <coll>: the Open MPI peer's name; alt_mca <coll>: its forced algorithm.
mpi_name() {
  case "$1" in
    all_reduce) echo allreduce ;; all_gather) echo allgather ;; reduce_scatter) echo reduce_scatter ;;
    broadcast) echo bcast ;; *) echo "compare_mpi.sh: no Open MPI peer for '$1'" >&2; exit 2 ;;
  esac
}
alt_mca() {
  case "$1" in
    all_reduce) echo "coll_tuned_allreduce_algorithm 4" ;;
    all_gather) echo "coll_tuned_allgather_algorithm 4" ;;
    reduce_scatter) echo "coll_tuned_reduce_scatter_block_algorithm 4" ;;
    broadcast) echo "coll_tuned_bcast_algorithm 3" ;;
  esac
}
tempo_run="$build/tools/tempo-run"
for coll in $colls; do
  for f in "$build/bench/${coll}_perf" "$build/bench/mpi_$(mpi_name "$coll")_perf" "$tempo_run"; do
    if [ ! -x "$f" ]; then
      echo "compare_mpi.sh: $f not found; build it first (cmake --build $build)" >&2
      exit 2
    fi
  done
done
command -v mpirun > /dev/null || { echo "compare_mpi.sh: mpirun not found" >&2; exit 2; }

mpirun_base=(mpirun --oversubscribe --mca btl "self,vader")
[ "$(id -u)" = 0 ] && mpirun_base+=(--allow-run-as-root)
# shellcheck disable=SC2206
[ -n "${MPIRUN_EXTRA:-}" ] && mpirun_base+=(${MPIRUN_EXTRA})
common_args=(-f "$factor" -n "$iters" -w "$warmup" -c "$check" -d float -o sum)

# to_bytes 64K -> 65536 (1024-based suffixes, as the perf tools parse them).
to_bytes() {
  local v=$1 mult=1
  case "$v" in
    *[kK]) mult=1024; v=${v%?} ;;
    *[mM]) mult=$((1024 * 1024)); v=${v%?} ;;
    *[gG]) mult=$((1024 * 1024 * 1024)); v=${v%?} ;;
  esac
  echo $((v * mult))
}
ranges=()  # one "-b X -e Y" per invocation
if [ "$sweep" = 1 ]; then
  ranges=("$minb $maxb")
else
  lo=$(to_bytes "$minb") hi=$(to_bytes "$maxb")
  for ((sz = lo; sz <= hi; sz = (factor > 1 ? sz * factor : hi + 1))); do ranges+=("$sz $sz"); done
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/compare_mpi.XXXXXX")
cleanup() { if [ -n "${COMPARE_KEEP:-}" ]; then echo "# raw outputs kept in $work" >&2; else rm -rf "$work"; fi; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

tools=(tempo ompi-def ompi-alt)

# run_tool <coll> <tool> <np> <output file> <min> <max>: one run; stops the script with its
# output on failure.
run_tool() {
  local coll=$1 tool=$2 np=$3 out=$4 rc=0
  local perf_args=(-b "$5" -e "$6" "${common_args[@]}")
  local tempo_perf="$build/bench/${coll}_perf" mpi_perf
  mpi_perf="$build/bench/mpi_$(mpi_name "$coll")_perf"
  local alt
  read -r -a alt <<< "$(alt_mca "$coll")"
  case "$tool" in
    tempo) "$tempo_run" -n "$np" --timeout 900 -- "$tempo_perf" "${perf_args[@]}" > "$out" 2>&1 || rc=$? ;;
    ompi-def) "${mpirun_base[@]}" --timeout 900 -np "$np" "$mpi_perf" "${perf_args[@]}" > "$out" 2>&1 || rc=$? ;;
    ompi-alt) "${mpirun_base[@]}" --mca coll_tuned_use_dynamic_rules 1 --mca "${alt[0]}" "${alt[1]}" \
                --timeout 900 -np "$np" "$mpi_perf" "${perf_args[@]}" > "$out" 2>&1 || rc=$? ;;
  esac
  if [ "$rc" != 0 ]; then
    echo "compare_mpi.sh: $coll $tool with $np processes failed (exit $rc):" >&2
    cat "$out" >&2
    exit 1
  fi
}

# like_for_like <coll>: which busbw of the nccl-tests table matches the MPI call. MPI_Bcast
# has a single buffer, so its equal is the in-place broadcast (ncclBcast); ncclBroadcast
# out of place also copies the root's input to its output, work MPI_Bcast never does. The
# other MPI calls are given distinct send and receive buffers, as out of place is.
like_for_like() { [ "$1" = broadcast ] && echo in-place || echo out-of-place; }
# extract <table> <coll>: "size busbw" of every measurement in that column.
extract() {
  local field=8
  [ "$(like_for_like "$2")" = in-place ] && field=12
  awk -v f="$field" '$1 ~ /^[0-9]+$/ && NF >= 13 { print $1, $f }' "$1"
}

echo "# compare_mpi.sh: Tempo's perf tools (tempo-run) vs Open MPI peers (mpirun): $colls"
echo "# sizes $minb..$maxb factor $factor ($([ "$sweep" = 1 ] && echo "one sweep" || echo "one run per size")), iters $iters, warmup $warmup, check $check, rounds $rounds, float sum"
echo "# $(mpirun --version 2>&1 | head -1)"

overall_min=""
for coll in $colls; do
for np in $nps; do
  key="$coll.$np"
  for ((r = 0; r < rounds; r++)); do
    for ((k = 0; k < 3; k++)); do
      tool=${tools[$(((r + k) % 3))]}
      : > "$work/bw.$key.$tool.$r"
      for range in "${ranges[@]}"; do
        # shellcheck disable=SC2086
        run_tool "$coll" "$tool" "$np" "$work/raw.$key.$tool.$r" $range
        extract "$work/raw.$key.$tool.$r" "$coll" >> "$work/bw.$key.$tool.$r"
      done
    done
  done
  # Median per (tool, size) over rounds, then one row per size.
  for tool in "${tools[@]}"; do
    cat "$work"/bw."$key"."$tool".* | sort -k1,1n -k2,2g | awk '
      { v[$1] = v[$1] " " $2; n[$1]++ }
      END { for (s in v) { c = split(substr(v[s], 2), a, " ");
              m = (c % 2) ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2; print s, m } }' \
      | sort -k1,1n > "$work/med.$key.$tool"
  done
  echo
  echo "# $coll np=$np: $(like_for_like "$coll") busbw (GB/s), median of $rounds rounds; ompi-alt: $(alt_mca "$coll"); ratio = tempo / max(ompi-def, ompi-alt)"
  awk -v np="$np" -v coll="$coll" '
    FILENAME ~ /tempo$/ { t[$1] = $2; order[++n] = $1; next }
    FILENAME ~ /ompi-def$/ { d[$1] = $2; next }
    { g[$1] = $2 }
    END {
      printf "# %10s  %9s  %9s  %9s  %7s\n", "size(B)", "tempo", "ompi-def", "ompi-alt", "ratio"
      for (i = 1; i <= n; i++) {
        s = order[i]; best = (d[s] > g[s]) ? d[s] : g[s]; ratio = best > 0 ? t[s] / best : 0
        printf "  %10d  %9.2f  %9.2f  %9.2f  %7.2f\n", s, t[s], d[s], g[s], ratio
        if (i == 1 || ratio < min) { min = ratio; at = s }
      }
      printf "# %s np=%s min ratio: %.2f (size %d)\n", coll, np, min, at
    }' "$work/med.$key.tempo" "$work/med.$key.ompi-def" "$work/med.$key.ompi-alt" | tee "$work/table.$key"
  m=$(awk '/min ratio/ { print $6 }' "$work/table.$key")
  if [ -z "$overall_min" ] || awk -v a="$m" -v b="$overall_min" 'BEGIN { exit !(a < b) }'; then overall_min=$m; fi
done
done
echo
echo "# min ratio over all collectives and process counts: $overall_min"
