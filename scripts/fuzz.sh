#!/usr/bin/env bash
# Fuzzes the bootstrap's wire parsers: builds the targets in tests/fuzz with clang's
# libFuzzer, ASan and UBSan (in FUZZ_BUILD_DIR, default build-fuzz) and runs each for
# SECONDS (default 10) from its committed corpus. New inputs go to a scratch directory, not
# the repository (to keep one, copy it into tests/fuzz/corpus/<target>). Exits non-zero on
# any crash, sanitizer report or failed property; the crashing input is left in the
# current directory as crash-<hash>, as libFuzzer names it.
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
build=${FUZZ_BUILD_DIR:-build-fuzz}
CC=clang CXX=clang++ cmake -S . -B "$build" -DTEMPO_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
cmake --build "$build" -j "$(nproc)" > /dev/null
for t in unique_id frame sockaddr; do
  scratch=$(mktemp -d)
  echo "fuzz: $t for ${secs}s"
  status=0
  "$build/tests/fuzz/fuzz_$t" -max_total_time="$secs" -print_final_stats=1 "$scratch" "tests/fuzz/corpus/$t" \
    > "$scratch.log" 2>&1 || status=$?
  grep -E "stat::number_of_executed_units|stat::new_units_added|^==[0-9]+==ERROR|SUMMARY|^Done" "$scratch.log" || true
  [ "$status" -eq 0 ] || tail -40 "$scratch.log"
  rm -rf "$scratch" "$scratch.log"
  [ "$status" -eq 0 ] || { echo "fuzz: $t failed (exit $status)"; exit 1; }
done
echo "fuzz: all targets clean"
