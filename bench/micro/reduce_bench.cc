// Micro benchmark of the host reducers (kernels/reduce.h) against memcpy of the same size.
//
// bytes_per_second counts destination bytes; `moved` counts all memory traffic the call
// implies (a and b read, dst written: 3x; memcpy: 2x), which is the figure to hold against
// the machine's memory bandwidth and memcpy's. The `baseline/` rows force the portable
// (non-AVX2) loops, to show what the vector ISA buys.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "kernels/cpu/dispatch.h"
#include "kernels/float_convert.h"
#include "kernels/reduce.h"

namespace {

using tempo::DataType;
using tempo::RedOp;
namespace kernels = tempo::kernels;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, FreeDeleter>;

Buffer allocate(size_t bytes) {
  return Buffer(static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
}

// Fills with ordinary values (1 + i/1024-ish): no NaNs, infinities or subnormals, which
// would measure x86's slow paths instead of the loops. Writing every byte also faults the
// pages in before timing starts.
void fill(uint8_t* p, size_t count, DataType t) {
  for (size_t i = 0; i < count; ++i) {
    const float f = 1.0f + float(i % 1024) / 1024.0f;
    switch (t) {
      case DataType::Float32: reinterpret_cast<float*>(p)[i] = f; break;
      case DataType::Float64: reinterpret_cast<double*>(p)[i] = f; break;
      case DataType::Float16: reinterpret_cast<uint16_t*>(p)[i] = kernels::floatToHalf(f); break;
      case DataType::Bfloat16: reinterpret_cast<uint16_t*>(p)[i] = kernels::floatToBf16(f); break;
      case DataType::Float8e4m3: p[i] = kernels::floatToFp8e4m3(f); break;
      case DataType::Float8e5m2: p[i] = kernels::floatToFp8e5m2(f); break;
      case DataType::Int32: reinterpret_cast<int32_t*>(p)[i] = int32_t(i); break;
      default: std::memset(p + i * tempo::dataTypeSize(t), int(i), tempo::dataTypeSize(t));
    }
  }
}

void reportBytes(benchmark::State& state, size_t bytes, int streams) {
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));
  state.counters["moved"] = benchmark::Counter(double(state.iterations()) * double(bytes) * streams,
                                               benchmark::Counter::kIsRate,
                                               benchmark::Counter::OneK::kIs1024);
}

// dst = a op b over state.range(0) destination bytes; `baseline` forces the portable loops.
void BM_Reduce(benchmark::State& state, DataType t, RedOp op, bool baseline) {
  const size_t bytes = size_t(state.range(0));
  const size_t count = bytes / tempo::dataTypeSize(t);
  Buffer a = allocate(bytes), b = allocate(bytes), dst = allocate(bytes);
  fill(a.get(), count, t);
  fill(b.get(), count, t);
  fill(dst.get(), count, t);
  for (auto _ : state) {
    if (baseline) {
      kernels::cpu::reduceWithIsa(kernels::cpu::Isa::Baseline, dst.get(), a.get(), b.get(),
                                  count, t, op);
    } else {
      kernels::reduce(dst.get(), a.get(), b.get(), count, t, op);
    }
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  reportBytes(state, bytes, 3);
}

void BM_Memcpy(benchmark::State& state) {
  const size_t bytes = size_t(state.range(0));
  Buffer src = allocate(bytes), dst = allocate(bytes);
  std::memset(src.get(), 1, bytes);
  std::memset(dst.get(), 2, bytes);
  for (auto _ : state) {
    std::memcpy(dst.get(), src.get(), bytes);
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  reportBytes(state, bytes, 2);
}

void sizes(benchmark::internal::Benchmark* b) {
  b->Arg(64 << 10)->Arg(1 << 20)->Arg(32 << 20)->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_Memcpy)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, float_sum, DataType::Float32, RedOp::Sum, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, half_sum, DataType::Float16, RedOp::Sum, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, bf16_sum, DataType::Bfloat16, RedOp::Sum, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, fp8e4m3_sum, DataType::Float8e4m3, RedOp::Sum, false)
    ->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, double_sum, DataType::Float64, RedOp::Sum, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, int32_sum, DataType::Int32, RedOp::Sum, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, float_max, DataType::Float32, RedOp::Max, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, baseline/float_sum, DataType::Float32, RedOp::Sum, true)
    ->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, baseline/half_sum, DataType::Float16, RedOp::Sum, true)
    ->Apply(sizes);

}  // namespace

BENCHMARK_MAIN();
