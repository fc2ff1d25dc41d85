// Internal to kernels/cpu: the per-ISA tables of typed loops behind kernels::reduce() and
// kernels::divide(), and test hooks that run a chosen ISA variant.
//
// Each variant (isa_baseline.cc, isa_avx2.cc) compiles the same loops (loops.inc) for its
// instruction set and fills one KernelTable. reduce_cpu.cc picks the best variant the CPU
// supports once, on first use; a call then costs one table lookup and one indirect call,
// and each loop is a straight typed loop with no per-element dispatch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/core/dtype.h"

namespace tempo::kernels::cpu {

// The combine step a loop implements. Avg maps to Sum, or to SumDiv when a divisor is fused.
enum class Combine : int { Sum = 0, Prod = 1, Max = 2, Min = 3, SumDiv = 4 };
inline constexpr int kNumCombines = 5;

// dst[i] = a[i] op b[i]; `divisor` (> 1) is used by SumDiv only.
using BinaryFn = void (*)(void* dst, const void* a, const void* b, size_t count,
                          uint64_t divisor);
// dst[i] = src[i] / divisor (divisor >= 1).
using DivideFn = void (*)(void* dst, const void* src, size_t count, uint64_t divisor);

struct KernelTable {
  BinaryFn binary[kNumDataTypes][kNumCombines];
  DivideFn divide[kNumDataTypes];
};

enum class Isa : int { Baseline = 0, Avx2 = 1 };

// The variants compiled into this build. avx2Table() is null on non-x86 builds; it must
// only be used when cpuHasAvx2() says the CPU (and OS) support AVX2 and F16C.
const KernelTable& baselineTable();
const KernelTable* avx2Table();
bool cpuHasAvx2();

// The variant kernels::reduce() uses in this process.
Isa activeIsa();
const char* isaName(Isa isa);
// True when `isa` is compiled in and this CPU can run it.
bool isaAvailable(Isa isa);

// kernels::reduce() / divide() forced onto one variant, for tests and benchmarks.
// Precondition: isaAvailable(isa).
void reduceWithIsa(Isa isa, void* dst, const void* a, const void* b, size_t count,
                   DataType type, RedOp op, uint64_t postDivisor = 1);
void divideWithIsa(Isa isa, void* dst, const void* src, size_t count, DataType type,
                   uint64_t divisor);

}  // namespace tempo::kernels::cpu
