#!/usr/bin/env bash
# Sanitizer runs. Exits non-zero on any report or failure. Sanitized builds use -O1 (what
# the sanitizers recommend) and line tables only (-g1: enough for their reports), which
# builds in about half the time of -O2 -g.
#   scripts/sanitize.sh            ASan + UBSan over the unit and transport suites: builds
#                                  their tests with TEMPO_SANITIZE=address,undefined in
#                                  build-asan and runs them with leak checking
#                                  (tests/sanitizer/lsan.supp lists the leaks that are not
#                                  Tempo's) and UBSan stopping at its first report. On this
#                                  project's 2-core VM: about 6.5 minutes of build, 4 of tests.
#   scripts/sanitize.sh ci         The part of that run CI makes (scripts/test.sh): the
#                                  transports (every endpoint, the framing and fault
#                                  decorators, the shm rings), the reduction kernels, the
#                                  wire and unique-id parsers' corpora and the core
#                                  utilities, without the 1 GiB messages and the plan
#                                  simulations, whose cost is time rather than coverage.
#   scripts/sanitize.sh thread     TSan over the suites whose ranks are threads of one process
#                                  (every collective, split and shrink, bad input, nonblocking
#                                  communicators, abort from another thread, the bootstrap,
#                                  fault injection, the soaks) and the transport contract, in
#                                  build-tsan; tests/sanitizer/tsan.supp lists the races that
#                                  are not Tempo's.
#   scripts/sanitize.sh multiproc  ASan + UBSan over the multi-process suite (mp_test: every
#                                  transport between processes, peer death, abort, shrink,
#                                  heartbeats, timeouts, faults), in build-asan; the workers
#                                  get the same settings. Leaves out the RSS-flatness check
#                                  (ASan's quarantine holds freed memory by design) and the
#                                  straggler timings (ASan's slowdown is not a straggler's).
#   scripts/sanitize.sh multiproc-thread
#                                  The same suite under TSan, in build-tsan: every worker's
#                                  progress, heartbeat and bootstrap threads beside the caller.
# SANITIZE_BUILD_DIR overrides the build directory.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-address}
case "$mode" in
  address|ci)
    build=${SANITIZE_BUILD_DIR:-build-asan}
    sanitize=address,undefined
    targets=(reduce_test gpu_element_test staging_arena_test core_test ring_test wire_test config_test regions_test clock_test
             transport_test mode_choice_test fault_test fuzz_unique_id_replay fuzz_frame_replay
             fuzz_sockaddr_replay)
    # The unit label also holds checks of the installed tools and exports, not built here.
    labels="unit|transport"
    exclude="^(tempo_topo_|abi_|install_)"
    if [ "$mode" = address ]; then
      targets+=(plan_test trace_writer_test tune_test pacing_test diagnose_test topo_test)
    else
      exclude+="|OneGiBMessage"
    fi
    ;;
  multiproc|multiproc-thread)
    if [ "$mode" = multiproc ]; then
      build=${SANITIZE_BUILD_DIR:-build-asan}
      sanitize=address,undefined
    else
      build=${SANITIZE_BUILD_DIR:-build-tsan}
      sanitize=thread
    fi
    targets=(mp_test mp_worker)
    labels="multiproc"
    include="MultiProcess"
    exclude="MultiProcessMemory|MultiProcessSkew"
    ;;
  thread)
    build=${SANITIZE_BUILD_DIR:-build-tsan}
    sanitize=thread
    targets=(allreduce_test collectives_test split_test redop_test shrink_grow_test bad_input_test memory_test
             noalloc_test async_test fault_injection_test mismatch_test soak_test fault_test bootstrap_test
             transport_test device_buffers_test query_test one_sided_test)
    labels="coll|transport"
    # A 1 GiB message per transport takes many minutes under TSan. (The heaviest case left in,
    # the mismatch suite's over libfabric, fails 56 ranks' communicators in one process, each
    # abandoning its tcp endpoint's buffers: about 10.5 GB of resident memory here.)
    # One-sided calls over libfabric's shm provider are left out: their 4 MiB puts take its
    # shared-buffer (SAR) path, whose hand-off between the two ranks' threads is libfabric's
    # own atomics, which TSan does not see in an uninstrumented library (it reports the two
    # ranks' memcpy of the same shared buffer inside libfabric, and nothing in Tempo).
    exclude="^(tempo_topo_|abi_|install_)|ModeChooser|OneGiBMessage|Libfabric/OneSided.*/shm_"
    ;;
  *)
    echo "usage: scripts/sanitize.sh [address|ci|thread|multiproc|multiproc-thread]" >&2
    exit 2
    ;;
esac
flags="-O1 -g1 -DNDEBUG"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$flags" \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$flags" -DTEMPO_SANITIZE=$sanitize -DTEMPO_BUILD_BENCH=OFF > /dev/null
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
# Slow unwinding, so that leak stacks reach through libraries built without frame pointers
# (the suppressions match frames deep in them). intercept_tls_get_addr=0: up to GCC 13 and
# LLVM 16 the runtime's __tls_get_addr interceptor takes a dynamic TLS block that happens
# to start 16 bytes past a page boundary for a pre-2.25 glibc header and reads the two words
# before it, and LeakSanitizer's tracer then dies at exit ("Tracer caught signal 11") in a
# worker that had loaded UCX or libfabric (a known runtime bug, fixed in later releases).
export ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0:intercept_tls_get_addr=0
export LSAN_OPTIONS=suppressions=$PWD/tests/sanitizer/lsan.supp
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# UCX's memory hooks (libucm) intercept madvise in exiting threads, where TSan's own
# interceptors crash: TSan runs without them.
[[ "$mode" = *thread ]] && export UCX_MEM_EVENTS=no UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/sanitizer/tsan.supp"
# ctest knows only the tests of the targets built here (their lists come from the builds).
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" -L "$labels" -R "${include:-.}" -E "$exclude" \
  --timeout 1200
