#include "src/core/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace tempo {
namespace {

constexpr uint32_t kPoly = 0x82f63b78;  // CRC-32C, reflected

constexpr std::array<uint32_t, 256> makeTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (kPoly & (0u - (c & 1)));
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kTable = makeTable();

uint32_t bytewise(const unsigned char* p, size_t n, uint32_t c) {
  for (size_t i = 0; i < n; ++i) c = (c >> 8) ^ kTable[(c ^ p[i]) & 0xff];
  return c;
}

#if defined(__x86_64__)
// One stream of 8-byte steps: the instruction's latency bounds it near 8 bytes per three
// cycles, several GB/s, which is what a checksum that is off by default needs.
__attribute__((target("sse4.2"))) uint32_t hardware(const unsigned char* p, size_t n, uint32_t c) {
  uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    c64 = _mm_crc32_u64(c64, w);
  }
  c = uint32_t(c64);
  for (; n > 0; --n, ++p) c = _mm_crc32_u8(c, *p);
  return c;
}

bool haveSse42() {
  static const bool have = __builtin_cpu_supports("sse4.2");
  return have;
}
#endif

}  // namespace

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
#if defined(__x86_64__)
  if (haveSse42()) return ~hardware(p, n, c);
#endif
  return ~bytewise(p, n, c);
}

}  // namespace tempo
