#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite through ctest. Exits non-zero on any
# failure. BUILD_DIR (default build) and JOBS (default: the number of cores) may be set.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$BUILD_DIR" -j "$JOBS"
# Tests that launch many ranks share the cores with each other; run them one at a time.
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" -LE "multiproc|coll"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j 1 -L "multiproc|coll"
# The bootstrap's wire parsers under libFuzzer with ASan and UBSan, 10 s per target.
scripts/fuzz.sh 10
# ASan and UBSan over the transports, the kernels, the parsers and the core (the whole of
# the unit and transport suites: scripts/sanitize.sh).
scripts/sanitize.sh ci
