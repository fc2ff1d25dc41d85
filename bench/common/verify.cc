#include "bench/common/verify.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "bench/common/types.h"

namespace tempo::bench {
namespace {

using i128 = __int128;
using u128 = unsigned __int128;

uint64_t mix64(uint64_t x) {  // splitmix64's finaliser
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform integer in [lo, hi] (inclusive) from a hash; the modulo bias is irrelevant here.
i128 pick(uint64_t h, i128 lo, i128 hi) {
  const u128 span = u128(hi - lo) + 1;
  return lo + i128(u128(h) % span);
}

struct ElemHashes {
  uint64_t w[4];
  ElemHashes(const DataSpec& d, size_t e) {
    w[0] = mix64(d.seed + (uint64_t(e) + 1) * 0x9E3779B97F4A7C15ull);
    for (int i = 1; i < 4; ++i) w[i] = mix64(w[i - 1] + 0x632BE59BD9B4E019ull);
  }
};

uint64_t rankHash(const ElemHashes& h, int rank) {
  return mix64(h.w[3] ^ (uint64_t(rank) + 1) * 0xD6E8FEB86659FD93ull);
}

// ---- per-type parameters ----

i128 sumBound(int t) {  // every partial sum of the inputs stays within +-B, B exact in t
  switch (t) {
    case ncclInt8: return 127;
    case ncclUint8: return 255;
    case ncclInt32: return i128(1) << 30;
    case ncclUint32: return i128(1) << 31;
    case ncclInt64: return i128(1) << 62;
    case ncclUint64: return i128(1) << 63;
    case ncclFloat16: return 1 << 11;
    case ncclFloat32: return 1 << 24;
    case ncclFloat64: return i128(1) << 53;
    case ncclBfloat16: return 1 << 8;
    case ncclFloat8e4m3: return 1 << 4;
    default: return 1 << 3;  // f8e5m2
  }
}

int sumActive(int t, int n) {  // how many ranks contribute a non-zero addend
  int cap = n;
  switch (t) {
    case ncclInt8: case ncclUint8: cap = 8; break;
    case ncclFloat16: cap = 64; break;
    case ncclBfloat16: cap = 16; break;
    case ncclFloat8e4m3: cap = 4; break;
    case ncclFloat8e5m2: cap = 2; break;
    default: break;
  }
  return n < cap ? n : cap;
}

int prodActive(int t, int n) {  // how many ranks contribute a non-unit factor (at most)
  int cap = 16;
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: cap = 4; break;
    case ncclFloat16: case ncclBfloat16: cap = 8; break;
    default: break;
  }
  return n < cap ? n : cap;
}

// Key range for max/min: integers are their own keys; a floating value's key is its
// sign-magnitude bit pattern read as a signed number, so key order is value order.
void keyRange(int t, i128* lo, i128* hi) {
  switch (t) {
    case ncclInt8: *lo = INT8_MIN; *hi = INT8_MAX; return;
    case ncclUint8: *lo = 0; *hi = UINT8_MAX; return;
    case ncclInt32: *lo = INT32_MIN; *hi = INT32_MAX; return;
    case ncclUint32: *lo = 0; *hi = UINT32_MAX; return;
    case ncclInt64: *lo = INT64_MIN; *hi = INT64_MAX; return;
    case ncclUint64: *lo = 0; *hi = UINT64_MAX; return;
    case ncclFloat32: *hi = 0x7F7FFFFF; break;
    case ncclFloat64: *hi = 0x7FEFFFFFFFFFFFFFll; break;
    default: *hi = narrowFormat(t).maxFinite; break;
  }
  *lo = -*hi;
}

uint64_t maskBits(int t, uint64_t v) {
  const size_t s = typeSize(t);
  return s == 8 ? v : v & ((uint64_t(1) << (8 * s)) - 1);
}

uint64_t keyBits(int t, i128 key) {
  if (!isFloating(t)) return maskBits(t, uint64_t(key));
  if (key >= 0) return uint64_t(key);
  const uint64_t sign = uint64_t(1) << (8 * typeSize(t) - 1);
  return sign | uint64_t(-key);  // never -0: key 0 is +0
}

// Bits of an exactly representable real value.
uint64_t realBits(int t, double v) {
  switch (t) {
    case ncclFloat32: return std::bit_cast<uint32_t>(float(v));
    case ncclFloat64: return std::bit_cast<uint64_t>(v);
    default: return narrowEncode(narrowFormat(t), v);
  }
}

uint64_t numberBits(int t, i128 v, int scaleExp) {
  if (!isFloating(t)) return maskBits(t, uint64_t(v));
  return realBits(t, std::ldexp(double(v), scaleExp));
}

// ---- sum / avg: an arithmetic progression over the active window ----

struct SumPlan {
  int K, j;
  i128 a, b;
  int scaleExp;
};

SumPlan sumPlan(const DataSpec& d, const ElemHashes& h) {
  SumPlan p;
  p.K = sumActive(d.type, d.nranks);
  p.j = int(h.w[0] % uint64_t(d.nranks));
  // mulsum weighs each input by up to 2 (preMulScalar): half the room per input.
  const i128 m = sumBound(d.type) / p.K / (d.op == kMulSum ? 2 : 1);
  const i128 bm = p.K > 1 ? m / (2 * (p.K - 1)) : 0;
  if (isSigned(d.type)) {
    p.b = pick(h.w[1], -bm, bm);
    const i128 rem = m - (p.K - 1) * (p.b < 0 ? -p.b : p.b);
    p.a = pick(h.w[2], -rem, rem);
  } else {
    p.b = pick(h.w[1], 0, bm);
    p.a = pick(h.w[2], 0, m - (p.K - 1) * p.b);
  }
  p.scaleExp = isFloating(d.type) ? -int(h.w[3] >> 62) : 0;
  return p;
}

int windowIndex(int rank, int j, int n) { return (rank - j + n) % n; }

uint64_t sumInput(const DataSpec& d, const ElemHashes& h, int rank) {
  const SumPlan p = sumPlan(d, h);
  const int k = windowIndex(rank, p.j, d.nranks);
  return numberBits(d.type, k < p.K ? p.a + k * p.b : 0, p.scaleExp);
}

uint64_t sumResult(const DataSpec& d, const ElemHashes& h) {
  const SumPlan p = sumPlan(d, h);
  if (d.op == kMulSum) {  // each active rank's input times its scalar
    i128 s = 0;
    for (int k = 0; k < p.K; ++k) s += preMulScalar((p.j + k) % d.nranks) * (p.a + k * p.b);
    return numberBits(d.type, s, p.scaleExp);
  }
  const i128 s = p.K * p.a + p.b * (i128(p.K) * (p.K - 1) / 2);
  if (d.op != ncclAvg) return numberBits(d.type, s, p.scaleExp);
  if (!isFloating(d.type)) return maskBits(d.type, uint64_t(s / d.nranks));  // truncates
  const double exact = std::ldexp(double(s), p.scaleExp);
  if (d.type == ncclFloat64) return std::bit_cast<uint64_t>(exact / double(d.nranks));
  const float q = float(exact) / float(d.nranks);  // float division, rounded once below
  return realBits(d.type, double(q));
}

// ---- prod: +-1 / +-2 over the active window ----

uint64_t prodInput(const DataSpec& d, const ElemHashes& h, int rank) {
  const int K = prodActive(d.type, d.nranks), j = int(h.w[0] % uint64_t(d.nranks));
  const int k = windowIndex(rank, j, d.nranks);
  i128 v = 1;
  if (k < K) {
    if ((h.w[1] >> k) & 1) v = 2;
    if (isSigned(d.type) && ((h.w[2] >> k) & 1)) v = -v;
  }
  return numberBits(d.type, v, 0);
}

uint64_t prodResult(const DataSpec& d, const ElemHashes& h) {
  const int K = prodActive(d.type, d.nranks);
  const uint64_t window = K >= 64 ? ~uint64_t(0) : (uint64_t(1) << K) - 1;
  i128 v = i128(1) << std::popcount(h.w[1] & window);
  if (isSigned(d.type) && (std::popcount(h.w[2] & window) & 1)) v = -v;
  return numberBits(d.type, v, 0);
}

// ---- max / min: rank j alone beyond a threshold ----

i128 extremeKey(const DataSpec& d, const ElemHashes& h, int rank) {
  i128 lo, hi;
  keyRange(d.type, &lo, &hi);
  const i128 quarter = (hi - lo) / 4;
  const i128 t = pick(h.w[1], lo + quarter, hi - quarter);
  const int j = int(h.w[0] % uint64_t(d.nranks));
  const bool max = d.op == ncclMax;
  if (rank == j) return max ? pick(h.w[2], t, hi) : pick(h.w[2], lo, t);
  const uint64_t r = rankHash(h, rank);
  return max ? pick(r, lo, t - 1) : pick(r, t + 1, hi);
}

}  // namespace

uint64_t valueBits(int type, int64_t v) { return numberBits(type, v, 0); }

uint64_t inputBits(const DataSpec& d, size_t e, int rank) {
  const ElemHashes h(d, e);
  switch (d.op) {
    case ncclProd: return prodInput(d, h, rank);
    case ncclMax:
    case ncclMin: return keyBits(d.type, extremeKey(d, h, rank));
    default: return sumInput(d, h, rank);
  }
}

uint64_t reducedBits(const DataSpec& d, size_t e) {
  const ElemHashes h(d, e);
  switch (d.op) {
    case ncclProd: return prodResult(d, h);
    case ncclMax:
    case ncclMin: return keyBits(d.type, extremeKey(d, h, int(h.w[0] % uint64_t(d.nranks))));
    default: return sumResult(d, h);
  }
}

void prepareInput(void* buf, size_t count, size_t offset, const DataSpec& d, int rank) {
  const size_t s = typeSize(d.type);
  auto* out = static_cast<unsigned char*>(buf);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t v = inputBits(d, offset + i, rank);
    std::memcpy(out + i * s, &v, s);  // little-endian: the low bytes
  }
}

namespace {
template <class Fn>
int64_t countMismatches(const void* buf, size_t count, int type, Fn&& expected) {
  const size_t s = typeSize(type);
  const auto* in = static_cast<const unsigned char*>(buf);
  int64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    uint64_t got = 0;
    std::memcpy(&got, in + i * s, s);
    wrong += got != expected(i);
  }
  return wrong;
}
}  // namespace

int64_t countWrongReduced(const void* buf, size_t count, size_t offset, const DataSpec& d) {
  return countMismatches(buf, count, d.type, [&](size_t i) { return reducedBits(d, offset + i); });
}

int64_t countWrongInput(const void* buf, size_t count, size_t offset, const DataSpec& d, int rank) {
  return countMismatches(buf, count, d.type, [&](size_t i) { return inputBits(d, offset + i, rank); });
}

uint64_t makeSeed(int type, int op, int root, size_t bytes, int rep, int inPlace) {
  uint64_t s = 0x5EED5EED5EED5EEDull;
  for (uint64_t v : {uint64_t(type), uint64_t(op), uint64_t(uint32_t(root)), uint64_t(bytes), uint64_t(rep),
                     uint64_t(inPlace)})
    s = mix64(s ^ v);
  return s;
}

void fillGuard(void* p, size_t bytes, uint8_t salt) {
  auto* b = static_cast<uint8_t*>(p);
  for (size_t i = 0; i < bytes; ++i) b[i] = uint8_t(0xA5 ^ (i * 29) ^ salt);
}

int64_t guardDamage(const void* p, size_t bytes, uint8_t salt) {
  const auto* b = static_cast<const uint8_t*>(p);
  int64_t bad = 0;
  for (size_t i = 0; i < bytes; ++i) bad += b[i] != uint8_t(0xA5 ^ (i * 29) ^ salt);
  return bad;
}

}  // namespace tempo::bench
