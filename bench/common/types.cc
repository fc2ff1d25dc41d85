#include "bench/common/types.h"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace tempo::bench {
namespace {

struct TypeRow {
  const char* name;
  size_t size;
};
// Indexed by ncclDataType_t.
constexpr TypeRow kTypes[kNumTypes] = {
    {"int8", 1},   {"uint8", 1},  {"int32", 4},  {"uint32", 4},    {"int64", 8},  {"uint64", 8},
    {"half", 2},   {"float", 4},  {"double", 8}, {"bfloat16", 2},  {"f8e4m3", 1}, {"f8e5m2", 1},
};
constexpr const char* kOps[kNumOps] = {"sum", "prod", "max", "min", "avg", "mulsum"};

constexpr NarrowFormat kHalf{5, 10, true, 0x7BFF, false};
constexpr NarrowFormat kBf16{8, 7, true, 0x7F7F, false};
constexpr NarrowFormat kE4M3{4, 3, false, 0x7E, true};
constexpr NarrowFormat kE5M2{5, 2, true, 0x7B, true};

uint32_t nanBits(const NarrowFormat& f) {
  // Positive quiet NaN: exponent all ones, top mantissa bit (E4M3: the all-ones pattern).
  if (!f.hasInf) return (1u << (f.expBits + f.manBits)) - 1;
  return ((1u << f.expBits) - 1) << f.manBits | 1u << (f.manBits - 1);
}

}  // namespace

const char* typeName(int type) { return type >= 0 && type < kNumTypes ? kTypes[type].name : "?"; }
size_t typeSize(int type) { return type >= 0 && type < kNumTypes ? kTypes[type].size : 0; }
const char* opName(int op) { return op >= 0 && op < kNumOps ? kOps[op] : "?"; }

int parseType(const char* s) {
  for (int t = 0; t < kNumTypes; ++t)
    if (std::strcmp(s, kTypes[t].name) == 0) return t;
  if (std::strcmp(s, "fp8_e4m3") == 0) return ncclFloat8e4m3;  // rccl-tests spelling
  if (std::strcmp(s, "fp8_e5m2") == 0) return ncclFloat8e5m2;
  if (std::strcmp(s, "all") == 0) return kAll;
  std::printf("invalid type %s, defaulting to %s .. \n", s, kTypes[ncclFloat].name);
  return ncclFloat;
}

int parseOp(const char* s) {
  for (int o = 0; o < kNumOps; ++o)
    if (std::strcmp(s, kOps[o]) == 0) return o;
  if (std::strcmp(s, "all") == 0) return kAll;
  std::printf("invalid op %s, defaulting to %s .. \n", s, kOps[ncclSum]);
  return ncclSum;
}

bool isNarrowFloat(int t) {
  return t == ncclFloat16 || t == ncclBfloat16 || t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
}
bool isFloating(int t) { return isNarrowFloat(t) || t == ncclFloat32 || t == ncclFloat64; }
bool isSigned(int t) {
  return isFloating(t) || t == ncclInt8 || t == ncclInt32 || t == ncclInt64;
}

const NarrowFormat& narrowFormat(int t) {
  switch (t) {
    case ncclFloat16: return kHalf;
    case ncclBfloat16: return kBf16;
    case ncclFloat8e4m3: return kE4M3;
    default: return kE5M2;
  }
}

double narrowDecode(const NarrowFormat& f, uint32_t bits) {
  const uint32_t manMask = (1u << f.manBits) - 1, expMask = (1u << f.expBits) - 1;
  const bool neg = (bits >> (f.expBits + f.manBits)) & 1;
  const uint32_t e = (bits >> f.manBits) & expMask, m = bits & manMask;
  const int bias = (1 << (f.expBits - 1)) - 1;
  double v;
  if (!f.hasInf && e == expMask && m == manMask) v = NAN;
  else if (f.hasInf && e == expMask) v = m ? NAN : INFINITY;
  else if (e == 0) v = std::ldexp(double(m), 1 - bias - f.manBits);
  else v = std::ldexp(double(m | (1u << f.manBits)), int(e) - bias - f.manBits);
  return neg ? -v : v;
}

uint32_t narrowEncode(const NarrowFormat& f, double x) {
  if (std::isnan(x)) return nanBits(f);
  const uint32_t sign = std::signbit(x) ? 1u << (f.expBits + f.manBits) : 0;
  const double a = std::fabs(x);
  const int bias = (1 << (f.expBits - 1)) - 1, emin = 1 - bias;
  const double maxFinite = narrowDecode(f, f.maxFinite);
  const uint32_t inf = ((1u << f.expBits) - 1) << f.manBits;
  if (std::isinf(a)) return sign | (f.hasInf ? inf : f.maxFinite);
  if (a == 0) return sign;
  int e2;
  std::frexp(a, &e2);                    // a = m * 2^e2, m in [0.5, 1): 2^(e2-1) <= a < 2^e2
  const int k = e2 - 1 < emin ? emin : e2 - 1;
  const double quantum = std::ldexp(1.0, k - f.manBits);
  const double q = std::nearbyint(a / quantum);  // exact division by a power of two; RNE
  const double r = q * quantum;
  if (r > maxFinite) return sign | (f.satFinite || !f.hasInf ? f.maxFinite : inf);
  if (r == 0) return sign;  // rounded down to zero
  int re2;
  std::frexp(r, &re2);
  const int rk = re2 - 1;
  if (rk < emin) return sign | uint32_t(std::ldexp(r, f.manBits - emin));  // subnormal
  const uint32_t man = uint32_t(std::ldexp(r, f.manBits - rk)) - (1u << f.manBits);
  return sign | uint32_t(rk + bias) << f.manBits | man;
}

size_t perRankCount16(size_t count, size_t eltSize, int nranks) {
  const size_t per = count / size_t(nranks), quantum = 16 / eltSize;
  return per / quantum * quantum;
}

}  // namespace tempo::bench
