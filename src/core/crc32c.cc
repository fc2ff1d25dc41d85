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
// The instruction's three-cycle latency would bound one stream near 8 bytes per three
// cycles, so long inputs run three streams over three adjacent blocks at once and splice
// their checksums: CRC is linear, so the register after A then B is the register after A
// advanced over |B| zero bytes, xor B's register from zero. Advancing over a fixed number
// of zero bytes is a 32x32 matrix over GF(2), applied a byte at a time by four tables.
constexpr size_t kLong = 8192, kShort = 256;  // block sizes (powers of two)

using ShiftTables = std::array<std::array<uint32_t, 256>, 4>;

uint32_t gf2Times(const uint32_t* mat, uint32_t vec) {
  uint32_t sum = 0;
  for (; vec; vec >>= 1, ++mat)
    if (vec & 1) sum ^= *mat;
  return sum;
}
void gf2Square(uint32_t* square, const uint32_t* mat) {
  for (int n = 0; n < 32; ++n) square[n] = gf2Times(mat, mat[n]);
}

// The tables that advance a register over `len` zero bytes (len a power of two).
ShiftTables zerosTables(size_t len) {
  uint32_t odd[32], even[32];
  odd[0] = kPoly;  // one zero bit
  for (int n = 1; n < 32; ++n) odd[n] = uint32_t(1) << (n - 1);
  gf2Square(even, odd);  // two zero bits
  gf2Square(odd, even);  // four
  // Each square doubles it: the first lands one zero byte in `even`.
  uint32_t* op = nullptr;
  for (;;) {
    gf2Square(even, odd);
    op = even;
    if ((len >>= 1) == 0) break;
    gf2Square(odd, even);
    op = odd;
    if ((len >>= 1) == 0) break;
  }
  ShiftTables t{};
  for (uint32_t n = 0; n < 256; ++n)
    for (int b = 0; b < 4; ++b) t[size_t(b)][n] = gf2Times(op, n << (8 * b));
  return t;
}

uint32_t shift(const ShiftTables& t, uint32_t crc) {
  return t[0][crc & 0xff] ^ t[1][(crc >> 8) & 0xff] ^ t[2][(crc >> 16) & 0xff] ^ t[3][crc >> 24];
}

inline uint64_t load64(const unsigned char* p) {
  uint64_t w;
  memcpy(&w, p, 8);
  return w;
}

// Three streams over blocks of `block` bytes while at least three remain.
__attribute__((target("sse4.2"))) uint64_t threeWay(const unsigned char*& p, size_t& n, uint64_t c0, size_t block,
                                                    const ShiftTables& zeros) {
  while (n >= 3 * block) {
    uint64_t c1 = 0, c2 = 0;
    for (const unsigned char* end = p + block; p < end; p += 8) {
      c0 = _mm_crc32_u64(c0, load64(p));
      c1 = _mm_crc32_u64(c1, load64(p + block));
      c2 = _mm_crc32_u64(c2, load64(p + 2 * block));
    }
    c0 = shift(zeros, uint32_t(c0)) ^ uint32_t(c1);
    c0 = shift(zeros, uint32_t(c0)) ^ uint32_t(c2);
    p += 2 * block;
    n -= 3 * block;
  }
  return c0;
}

__attribute__((target("sse4.2"))) uint32_t hardware(const unsigned char* p, size_t n, uint32_t c) {
  static const ShiftTables longZeros = zerosTables(kLong), shortZeros = zerosTables(kShort);
  uint64_t c64 = threeWay(p, n, c, kLong, longZeros);
  c64 = threeWay(p, n, c64, kShort, shortZeros);
  for (; n >= 8; n -= 8, p += 8) c64 = _mm_crc32_u64(c64, load64(p));
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
