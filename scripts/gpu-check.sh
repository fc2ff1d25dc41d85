#!/usr/bin/env bash
# The device checks of the GPU path, as one short script for a machine with a GPU: the
# kernel tests (every datatype x op, bit for bit against the host reference), every
# collective on device buffers through the library and its GPU plugin, the reduction
# kernels' bandwidth against a device-to-device copy, the perf tools -c 1 on device
# buffers with 2 to 4 processes sharing the GPU, and all_reduce_perf and sendrecv_perf with
# the lowered plans against whole host copies (TEMPO_GPU_PIPELINE=1 and 0).
#
#   scripts/gpu-check.sh [cuda|hip]      (default: cuda where nvcc is, else hip)
#
# Builds only the programs it runs, in BUILD_DIR (default build-gpu), unless they are
# there already: a build made elsewhere can be copied in with the tree (the CUDA programs
# link the CUDA runtime statically and need only the driver). Exits non-zero if a test
# fails or there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
backend=${1:-}
if [ -z "$backend" ]; then
  if command -v nvcc > /dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then backend=cuda; else backend=hip; fi
fi
tests=(gpu_kernels_test_$backend gpu_collectives_test_$backend)
bench_bin=$BUILD_DIR/bench/micro/gpu_reduce_bench_$backend
missing=0
for t in "${tests[@]}"; do [ -x "$BUILD_DIR/tests/gpu/$t" ] || missing=1; done
for f in "$bench_bin" "$BUILD_DIR/bench/all_reduce_perf" "$BUILD_DIR/tools/tempo-run"; do [ -x "$f" ] || missing=1; done
if [ "$missing" = 1 ]; then
  upper=$(echo "$backend" | tr a-z A-Z)
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "-DTEMPO_WITH_$upper=ON" > /dev/null
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target "${tests[@]}" "gpu_reduce_bench_$backend" \
    "tempo_gpu_$backend" tempo_run all_reduce_perf all_gather_perf reduce_scatter_perf broadcast_perf \
    reduce_perf alltoall_perf gather_perf scatter_perf sendrecv_perf
fi
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total,clocks.max.mem --format=csv || true
# The tests must run, not skip: a skipped GPU case here means the GPU was not found.
for t in "${tests[@]}"; do
  "$BUILD_DIR/tests/gpu/$t" --gtest_brief=1 2>&1 | tee /tmp/gpu-check-tests.txt
  [ "${PIPESTATUS[0]}" = 0 ] || exit 1
  if grep -q "SKIPPED" /tmp/gpu-check-tests.txt; then
    echo "gpu-check: $t skipped its GPU cases (no GPU found)" >&2
    exit 1
  fi
done
# The sum kernel (float) against the copy from 1 MiB to 1 GiB, then every datatype at 256 MiB.
"$bench_bin" -b 1M -e 1G -f 4 -n 20 -w 3 -d float
"$bench_bin" -b 256M -e 256M -n 20 -w 3 -d all
# Processes sharing the GPU on device buffers (-Y coarse), results checked: the rank lines
# must name device memory, and a tool exits non-zero on any wrong element.
perf() {  # perf <processes> <tool> <args...>
  local np=$1 tool=$2
  shift 2
  "$BUILD_DIR/tools/tempo-run" -n "$np" --timeout 300 -- "$BUILD_DIR/bench/$tool" -Y coarse "$@" 2>&1 |
    tee /tmp/gpu-check-perf.txt
  [ "${PIPESTATUS[0]}" = 0 ] || exit 1
  grep -q "device memory" /tmp/gpu-check-perf.txt || { echo "gpu-check: the buffers were not device memory" >&2; exit 1; }
}
# all_reduce_perf -c 1 at 2 and 4 processes, up to 256 MiB.
for np in 2 4; do perf "$np" all_reduce_perf -b 8 -e 256M -f 4 -c 1 -n 20 -w 3; done
# The lowered plans (chunks through pinned slots, reductions on the device) against whole
# host copies, side by side at 2 processes, unchecked (checked above).
for pipeline in 1 0; do
  echo "gpu-check: TEMPO_GPU_PIPELINE=$pipeline"
  TEMPO_GPU_PIPELINE=$pipeline perf 2 all_reduce_perf -b 1M -e 256M -f 4 -c 0 -n 10 -w 2
  TEMPO_GPU_PIPELINE=$pipeline perf 2 sendrecv_perf -b 1M -e 256M -f 4 -c 0 -n 10 -w 2
done
# Every other collective, every datatype and root, at 3 processes.
for tool in all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv; do
  perf 3 ${tool}_perf -b 8 -e 1M -f 16 -c 1 -d all -r all -n 2 -w 1
done
