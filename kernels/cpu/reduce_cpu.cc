// kernels::reduce() / kernels::divide(): pick the loop variant for this CPU once, then each
// call is a table lookup and one indirect call into a typed loop (loops.inc).
#include <algorithm>
#include <cstring>
#include <cassert>

#include "kernels/cpu/dispatch.h"
#include "kernels/reduce.h"
#include "src/core/log.h"

namespace tempo::kernels {
namespace cpu {
namespace {

Isa detectIsa() { return avx2Table() != nullptr && cpuHasAvx2() ? Isa::Avx2 : Isa::Baseline; }

const KernelTable& tableFor(Isa isa) {
  return isa == Isa::Avx2 ? *avx2Table() : baselineTable();
}

const KernelTable& activeTable() {
  static const KernelTable& table = [] () -> const KernelTable& {
    const Isa isa = activeIsa();
    TEMPO_INFO(log::Init, "host reducers use %s", isaName(isa));
    return tableFor(isa);
  }();
  return table;
}

[[maybe_unused]] bool validArgs(DataType type, RedOp op) {
  return unsigned(type) < unsigned(kNumDataTypes) && unsigned(op) < unsigned(kNumRedOps);
}

// Avg is summed and divided once at the end (kernels/reduce.h); a divisor of 0 or 1 and a
// divisor passed with Prod/Max/Min mean no division.
Combine combineFor(RedOp op, uint64_t divisor) {
  switch (op) {
    case RedOp::Sum:
    case RedOp::Avg: return divisor > 1 ? Combine::SumDiv : Combine::Sum;
    case RedOp::Prod: return Combine::Prod;
    case RedOp::Max: return Combine::Max;
    case RedOp::Min: return Combine::Min;
  }
  return Combine::Sum;
}

void runReduce(const KernelTable& t, void* dst, const void* a, const void* b, size_t count,
               DataType type, RedOp op, uint64_t postDivisor) {
  assert(validArgs(type, op));
  if (count == 0) return;
  t.binary[int(type)][int(combineFor(op, postDivisor))](dst, a, b, count, postDivisor);
}

void runDivide(const KernelTable& t, void* dst, const void* src, size_t count, DataType type,
               uint64_t divisor) {
  assert(validArgs(type, RedOp::Sum));
  if (count == 0) return;
  t.divide[int(type)](dst, src, count, divisor == 0 ? 1 : divisor);
}

}  // namespace

Isa activeIsa() {
  static const Isa isa = detectIsa();
  return isa;
}

const char* isaName(Isa isa) { return isa == Isa::Avx2 ? "avx2+f16c" : "baseline"; }

bool isaAvailable(Isa isa) {
  return isa == Isa::Baseline || (avx2Table() != nullptr && cpuHasAvx2());
}

void reduceWithIsa(Isa isa, void* dst, const void* a, const void* b, size_t count,
                   DataType type, RedOp op, uint64_t postDivisor) {
  assert(isaAvailable(isa));
  runReduce(tableFor(isa), dst, a, b, count, type, op, postDivisor);
}

void divideWithIsa(Isa isa, void* dst, const void* src, size_t count, DataType type,
                   uint64_t divisor) {
  assert(isaAvailable(isa));
  runDivide(tableFor(isa), dst, src, count, type, divisor);
}

}  // namespace cpu

void reduce(void* dst, const void* a, const void* b, size_t count, DataType type, RedOp op,
            uint64_t postDivisor) {
  cpu::runReduce(cpu::activeTable(), dst, a, b, count, type, op, postDivisor);
}

void divide(void* dst, const void* src, size_t count, DataType type, uint64_t divisor) {
  cpu::runDivide(cpu::activeTable(), dst, src, count, type, divisor);
}

void scale(void* dst, const void* src, size_t count, DataType type, const void* scalar) {
  // A block of copies of the scalar, so that the vectorised Prod does the work.
  constexpr size_t kBlockBytes = 4096;
  alignas(64) std::byte block[kBlockBytes];
  const size_t size = dataTypeSize(type);
  const size_t perBlock = kBlockBytes / size;
  for (size_t i = 0; i < perBlock; ++i) std::memcpy(block + i * size, scalar, size);
  for (size_t done = 0; done < count; done += perBlock) {
    const size_t n = std::min(perBlock, count - done);
    reduce(static_cast<std::byte*>(dst) + done * size, static_cast<const std::byte*>(src) + done * size, block, n,
           type, RedOp::Prod);
  }
}

}  // namespace tempo::kernels
