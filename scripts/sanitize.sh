#!/usr/bin/env bash
# ASan + UBSan over the unit and transport suites: builds their tests with
# TEMPO_SANITIZE=address,undefined in SANITIZE_BUILD_DIR (default build-asan) and runs them
# with leak checking (tests/sanitizer/lsan.supp lists the leaks that are not Tempo's) and
# UBSan stopping at its first report. Exits non-zero on any report or failure. On this
# project's 2-core VM: about 8 minutes of build, 1.5 of tests. The multi-process suites are
# not included yet.
#   scripts/sanitize.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${SANITIZE_BUILD_DIR:-build-asan}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTEMPO_SANITIZE=address,undefined \
  -DTEMPO_BUILD_BENCH=OFF > /dev/null
targets=(reduce_test core_test ring_test plan_test wire_test config_test trace_writer_test tune_test pacing_test
         diagnose_test clock_test regions_test topo_test transport_test mode_choice_test
         fuzz_unique_id_replay fuzz_frame_replay fuzz_sockaddr_replay)
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
# Slow unwinding, so that leak stacks reach through libraries built without frame pointers
# (the suppressions match frames deep in them).
export ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0
export LSAN_OPTIONS=suppressions=$PWD/tests/sanitizer/lsan.supp
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The unit label also holds checks of the installed tools and exports, not built here.
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" -L "unit|transport" -E "^(tempo_topo_|abi_|install_)"
