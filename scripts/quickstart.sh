#!/usr/bin/env bash
# Sets up, builds (Release) and runs the main job: all_reduce_perf over 2 local
# processes, 8 B to 64 MiB, every result checked (-c 1). Prints the rccl-tests table and
# exits non-zero if any element is wrong. BUILD_DIR (default build-release) may be set;
# extra arguments go to all_reduce_perf.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build-release}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DTEMPO_BUILD_TESTS=OFF
cmake --build "$BUILD_DIR" -j "$(nproc)" --target all_reduce_perf tempo_run
exec "$BUILD_DIR"/tools/tempo-run -n 2 --timeout 600 -- \
  "$BUILD_DIR"/bench/all_reduce_perf -b 8 -e 64M -f 2 -c 1 -n 20 -w 5 "$@"
