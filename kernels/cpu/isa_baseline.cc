// The portable variant of the host loops: whatever the compiler's baseline target allows
// (SSE2 on x86-64). Always built; used on CPUs without AVX2 / F16C and on other targets.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/dispatch.h"
#include "kernels/float_convert.h"

namespace tempo::kernels::cpu {
namespace baseline {
namespace {
#define TEMPO_LOOPS_F16C 0
#include "kernels/cpu/loops.inc"
#undef TEMPO_LOOPS_F16C

constexpr KernelTable kTable = makeTable();
}  // namespace
}  // namespace baseline

const KernelTable& baselineTable() { return baseline::kTable; }

}  // namespace tempo::kernels::cpu
