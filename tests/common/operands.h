// Operand bit patterns for element-wise reduction tests: the special values of every
// datatype (zeros of both signs, ones, extremes, infinities, NaNs of each width) first, then
// random bits, so that a comparison of two implementations covers NaN, infinity, signed
// zero, subnormal and overflow cases as well as ordinary values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "src/core/dtype.h"

namespace tempo::testing {

// The patterns below, truncated to the element size, are specials of some width: fp8
// (0x7F, 0x80, 0xFF, 0x7C), half and bf16 (0x7C00, 0x7E00, 0x7F80, 0x8000, ...), float and
// double (infinities, quiet NaN, -0, 1.0), and integer extremes.
inline constexpr uint64_t kSpecialPatterns[] = {
    0, 1, ~uint64_t(0), 0x80, 0x7F, 0xFF, 0x7C, 0x7C00, 0xFC00, 0x7E00, 0x8000, 0x3C00,
    0x7F80, 0xFF80, 0x7FC0, 0x7F800000, 0xFF800000, 0x7FC00000, 0x80000000, 0x3F800000,
    0x7FF0000000000000ull, 0x7FF8000000000000ull, 0x8000000000000000ull, 0x3FF0000000000000ull};
inline constexpr size_t kNumSpecialPatterns = std::size(kSpecialPatterns);

// `count` elements of `type`: the specials first (as many as fit), then random bits from
// `seed`.
inline std::vector<uint8_t> operands(DataType type, size_t count, uint64_t seed) {
  const size_t size = dataTypeSize(type);
  std::vector<uint8_t> bytes(count * size);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < bytes.size(); i += 8) {
    const uint64_t r = rng();
    std::memcpy(&bytes[i], &r, std::min<size_t>(8, bytes.size() - i));
  }
  for (size_t i = 0; i < kNumSpecialPatterns && i < count; ++i) {
    std::memcpy(&bytes[i * size], &kSpecialPatterns[i], size);
  }
  return bytes;
}

}  // namespace tempo::testing
