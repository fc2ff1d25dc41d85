#!/usr/bin/env bash
# The device checks of the GPU path, as one short script for a machine with a GPU: the
# kernel tests (every datatype x op, bit for bit against the host reference) and the
# reduction kernels' bandwidth against a device-to-device copy.
#
#   scripts/gpu-check.sh [cuda|hip]      (default: cuda where nvcc is, else hip)
#
# Builds only the two programs it runs, in BUILD_DIR (default build-gpu), unless they are
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
test_bin=$BUILD_DIR/tests/gpu/gpu_kernels_test_$backend
bench_bin=$BUILD_DIR/bench/micro/gpu_reduce_bench_$backend
if [ ! -x "$test_bin" ] || [ ! -x "$bench_bin" ]; then
  upper=$(echo "$backend" | tr a-z A-Z)
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "-DTEMPO_WITH_$upper=ON" > /dev/null
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target "gpu_kernels_test_$backend" "gpu_reduce_bench_$backend"
fi
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total,clocks.max.mem --format=csv || true
# The tests must run, not skip: a skipped GPU case here means the GPU was not found.
"$test_bin" --gtest_brief=1 2>&1 | tee /tmp/gpu-check-tests.txt
if grep -q "SKIPPED" /tmp/gpu-check-tests.txt; then
  echo "gpu-check: GPU cases skipped (no GPU found)" >&2
  exit 1
fi
# The sum kernel (float) against the copy from 1 MiB to 1 GiB, then every datatype at 256 MiB.
"$bench_bin" -b 1M -e 1G -f 4 -n 20 -w 3 -d float
"$bench_bin" -b 256M -e 256M -n 20 -w 3 -d all
