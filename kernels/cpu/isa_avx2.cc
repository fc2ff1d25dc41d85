// The AVX2 + F16C variant of the host loops, for x86-64 CPUs that have both.
//
// Only the loops are compiled for AVX2, through a `#pragma GCC target` region opened after
// every #include (see loops.inc for why); the functions at the bottom, which run before
// anyone knows the CPU supports AVX2, stay baseline code. Non-x86 builds get no table.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/dispatch.h"
#include "kernels/float_convert.h"

#if defined(__x86_64__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,f16c")
namespace tempo::kernels::cpu::avx2 {
namespace {
#define TEMPO_LOOPS_F16C 1
#include "kernels/cpu/loops.inc"
#undef TEMPO_LOOPS_F16C

constexpr KernelTable kTable = makeTable();
}  // namespace
}  // namespace tempo::kernels::cpu::avx2
#pragma GCC pop_options

namespace tempo::kernels::cpu {
const KernelTable* avx2Table() { return &avx2::kTable; }
// libgcc's checks include the OS side (XSAVE enabled for the YMM state). The explicit init
// makes this safe to call from static constructors that run before libgcc's own.
bool cpuHasAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
}
}  // namespace tempo::kernels::cpu

#else  // !__x86_64__

namespace tempo::kernels::cpu {
const KernelTable* avx2Table() { return nullptr; }
bool cpuHasAvx2() { return false; }
}  // namespace tempo::kernels::cpu

#endif
