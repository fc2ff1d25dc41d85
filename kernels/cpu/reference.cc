// The scalar reference reducers (kernels::ref): one element at a time, each operation
// spelled out with explicit branches, so that it can be checked against kernels/reduce.h by
// reading. Speed does not matter here; this is the oracle the fast path is tested against,
// so it deliberately shares no code with loops.inc beyond the scalar conversions.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/float_convert.h"
#include "kernels/reduce.h"

namespace tempo::kernels::ref {
namespace {

// ---- integers ----

// Sum and product modulo 2^64 in unsigned arithmetic, then truncated to T: the low bits of
// a sum or product depend only on the low bits of the operands, so this is the wrapped
// result for every width.
template <class T>
T intCombine(RedOp op, T a, T b) {
  switch (op) {
    case RedOp::Sum:
    case RedOp::Avg: return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
    case RedOp::Prod: return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
    case RedOp::Max: return a < b ? b : a;
    case RedOp::Min: return b < a ? b : a;
  }
  return a;
}

// C's `/` truncates toward zero. Divisors that int64_t cannot hold exceed every magnitude
// except |INT64_MIN| = 2^63, which 2^63 divides exactly once.
template <class T>
T intDivide(T v, uint64_t d) {
  if constexpr (std::is_unsigned_v<T>) {
    return static_cast<T>(static_cast<uint64_t>(v) / d);
  } else {
    constexpr uint64_t kTwo63 = uint64_t(1) << 63;
    if (d >= kTwo63) return (v == std::numeric_limits<int64_t>::min() && d == kTwo63) ? -1 : 0;
    return static_cast<T>(static_cast<int64_t>(v) / static_cast<int64_t>(d));
  }
}

// ---- floating point, in the compute type C (float or double) ----

template <class C>
C canonicalNan() {
  if constexpr (std::is_same_v<C, float>) return std::bit_cast<float>(kCanonicalNanF32);
  else return std::bit_cast<double>(kCanonicalNanF64);
}

template <class C>
C canonicalize(C r) { return std::isnan(r) ? canonicalNan<C>() : r; }

// fmaxf / fminf semantics with -0 < +0; see kernels/reduce.h.
template <class C>
C floatMax(C a, C b) {
  if (std::isnan(a) && std::isnan(b)) return canonicalNan<C>();
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  if (a == 0 && b == 0) return std::signbit(a) ? b : a;  // +0 if either is +0
  return a > b ? a : b;
}

template <class C>
C floatMin(C a, C b) {
  if (std::isnan(a) && std::isnan(b)) return canonicalNan<C>();
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  if (a == 0 && b == 0) return std::signbit(a) ? a : b;  // -0 if either is -0
  return a < b ? a : b;
}

template <class C>
C floatCombine(RedOp op, C a, C b) {
  switch (op) {
    case RedOp::Sum:
    case RedOp::Avg: return canonicalize(a + b);
    case RedOp::Prod: return canonicalize(a * b);
    case RedOp::Max: return floatMax(a, b);
    case RedOp::Min: return floatMin(a, b);
  }
  return a;
}

// ---- element types: how to read one element into its compute type and write it back ----

template <class T>
struct Native {
  using Storage = T;
  using Compute = T;
  static T decode(T v) { return v; }
  static T encode(T v) { return v; }
};

template <class S, float (*Decode)(S), S (*Encode)(float)>
struct Narrow {
  using Storage = S;
  using Compute = float;
  static float decode(S v) { return Decode(v); }
  static S encode(float v) { return Encode(v); }
};

template <class E>
void reduceTyped(void* dst, const void* a, const void* b, size_t count, RedOp op,
                 uint64_t divisor) {
  using S = typename E::Storage;
  using C = typename E::Compute;
  const bool divides = divisor > 1 && (op == RedOp::Sum || op == RedOp::Avg);
  for (size_t i = 0; i < count; ++i) {
    // memcpy per element: the reference makes no assumption about alignment or aliasing.
    S x, y;
    std::memcpy(&x, static_cast<const S*>(a) + i, sizeof(S));
    std::memcpy(&y, static_cast<const S*>(b) + i, sizeof(S));
    const C cx = E::decode(x), cy = E::decode(y);
    C r;
    if constexpr (std::is_floating_point_v<C>) {
      r = floatCombine(op, cx, cy);
      if (divides) r = canonicalize(r / static_cast<C>(divisor));
    } else {
      r = intCombine(op, cx, cy);
      if (divides) r = intDivide(r, divisor);
    }
    const S out = E::encode(r);
    std::memcpy(static_cast<S*>(dst) + i, &out, sizeof(S));
  }
}

template <class E>
void divideTyped(void* dst, const void* src, size_t count, uint64_t divisor) {
  using S = typename E::Storage;
  using C = typename E::Compute;
  for (size_t i = 0; i < count; ++i) {
    S x;
    std::memcpy(&x, static_cast<const S*>(src) + i, sizeof(S));
    const C v = E::decode(x);
    C r;
    if constexpr (std::is_floating_point_v<C>) r = canonicalize(v / static_cast<C>(divisor));
    else r = intDivide(v, divisor);
    const S out = E::encode(r);
    std::memcpy(static_cast<S*>(dst) + i, &out, sizeof(S));
  }
}

// Calls fn.template operator()<E>() with the element traits of `type`.
template <class Fn>
void withElement(DataType type, Fn&& fn) {
  switch (type) {
    case DataType::Int8: return fn.template operator()<Native<int8_t>>();
    case DataType::Uint8: return fn.template operator()<Native<uint8_t>>();
    case DataType::Int32: return fn.template operator()<Native<int32_t>>();
    case DataType::Uint32: return fn.template operator()<Native<uint32_t>>();
    case DataType::Int64: return fn.template operator()<Native<int64_t>>();
    case DataType::Uint64: return fn.template operator()<Native<uint64_t>>();
    case DataType::Float16:
      return fn.template operator()<Narrow<uint16_t, halfToFloat, floatToHalf>>();
    case DataType::Float32: return fn.template operator()<Native<float>>();
    case DataType::Float64: return fn.template operator()<Native<double>>();
    case DataType::Bfloat16:
      return fn.template operator()<Narrow<uint16_t, bf16ToFloat, floatToBf16>>();
    case DataType::Float8e4m3:
      return fn.template operator()<Narrow<uint8_t, fp8e4m3ToFloat, floatToFp8e4m3>>();
    case DataType::Float8e5m2:
      return fn.template operator()<Narrow<uint8_t, fp8e5m2ToFloat, floatToFp8e5m2>>();
  }
}

}  // namespace

void reduce(void* dst, const void* a, const void* b, size_t count, DataType type, RedOp op,
            uint64_t postDivisor) {
  withElement(type, [&]<class E>() { reduceTyped<E>(dst, a, b, count, op, postDivisor); });
}

void divide(void* dst, const void* src, size_t count, DataType type, uint64_t divisor) {
  const uint64_t d = divisor == 0 ? 1 : divisor;
  withElement(type, [&]<class E>() { divideTyped<E>(dst, src, count, d); });
}

}  // namespace tempo::kernels::ref
