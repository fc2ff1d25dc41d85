#!/usr/bin/env bash
# valgrind memcheck over the host build (BUILD_DIR, default build, as scripts/test.sh makes
# it): the core, wire, configuration, framing and fault-injection suites, the reduction
# kernels, the transport contract over Tempo's shm, loopback, the framed endpoint and
# libfabric's and UCX's tcp, every perf tool between 2 processes over Tempo's shm with
# -c 1, and all-reduce over libfabric's and UCX's tcp. Exits non-zero on any memcheck
# error (invalid access, use of uninitialised memory, a bad syscall argument, a definite or
# indirect leak not named in tests/sanitizer/valgrind.supp) or failed test. On this
# project's 2-core VM it takes about 6 minutes; it is not part of scripts/test.sh.
#   scripts/valgrind.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
[ -x "$build/tests/unit/core_test" ] || { echo "valgrind.sh: build $build first (scripts/test.sh)" >&2; exit 2; }
vg=(valgrind --tool=memcheck --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect
    --errors-for-leak-kinds=definite,indirect --track-origins=yes
    --suppressions="$PWD/tests/sanitizer/valgrind.supp" --quiet)
run() {
  echo "valgrind: ${*#$build/}"
  "${vg[@]}" "$@" > "$log" 2>&1 || { cat "$log"; echo "valgrind: FAILED: $*"; exit 1; }
}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in unit/core_test unit/wire_test unit/config_test unit/ring_test transport/fault_test \
         transport/mode_choice_test unit/reduce_test; do
  run "$build/tests/$t"
done
# Both sides' progress threads at full speed on 1 GiB, or concurrently on large messages,
# outlast the tests' own deadlines when valgrind runs one thread at a time.
run "$build/tests/transport/transport_test" \
  --gtest_filter='*/shm:*/shm_timed:*/loopback:*/framed_shm_timed:*/ofi_tcp:*/ucx_tcp:-*OneGiB*:*BothSidesProgressingConcurrently*'
# Every perf tool over Tempo's shm, and all-reduce over libfabric's and UCX's tcp.
perf() {  # perf <tool> <environment settings...>
  local tool=$1
  shift
  echo "valgrind: 2 processes with $*, ${tool}_perf"
  env "$@" "$build/tools/tempo-run" -n 2 -- "${vg[@]}" "$build/bench/${tool}_perf" -b 8 -e 1M -f 8 -n 3 -w 1 -c 1 \
    > "$log" 2>&1 || { cat "$log"; echo "valgrind: FAILED: ${tool}_perf with $*"; exit 1; }
  grep -q "Out of bounds values : 0 OK" "$log" || { cat "$log"; echo "valgrind: ${tool}_perf with $*: wrong values"; exit 1; }
}
for tool in all_reduce all_gather broadcast reduce reduce_scatter alltoall gather scatter sendrecv; do
  perf "$tool" TEMPO_TRANSPORT=shm
done
perf all_reduce FI_PROVIDER=tcp
perf all_reduce TEMPO_TRANSPORT=ucx UCX_TLS=tcp
echo "valgrind: clean"
