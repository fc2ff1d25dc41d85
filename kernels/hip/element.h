// One element of every device reduction: how a value of each datatype is read into its
// compute type, combined, divided or scaled, and written back.
//
// These are the functions the device kernels (reduce_kernels.hip) apply per element, and
// they follow kernels/reduce.h's semantics exactly: integers wrap, floating types combine
// once in float (double for Float64) and round once to nearest even, Max/Min are
// IEEE maxNum/minNum with -0 < +0, NaN results are canonical, fp8 saturates. Everything is
// TEMPO_HD: compiled by g++ it is plain host code, and tests/unit/gpu_element_test checks it
// bit for bit against kernels::ref on the CPU, so the arithmetic the GPU runs is proven
// without a GPU.
//
// fp8 comes in two encodings. NVIDIA GPUs and AMD's gfx950 use OCP's E4M3FN and E5M2
// (kernels/float_convert.h); AMD's gfx940-gfx942 (MI300) use E4M3FNUZ and E5M2FNUZ, in
// which ncclFloat8e4m3 and ncclFloat8e5m2 mean those formats (as in RCCL on those GPUs).
// The launcher picks the encoding per device (device.h: defaultFp8Encoding).
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

#include "kernels/float_convert.h"
#include "kernels/hip/portability.h"
#include "src/core/dtype.h"

namespace tempo::kernels::gpu {

enum class Fp8Encoding : uint8_t {
  Ocp = 0,   // E4M3FN (max 448) and E5M2 (max 57344, infinities)
  Fnuz = 1,  // E4M3FNUZ (max 240) and E5M2FNUZ (max 57344): one NaN (0x80), no -0, no inf
};

namespace element {

// ---- codecs: Storage is the element as it lies in memory, Compute the type combined in ----

template <class T>
struct Native {
  using Storage = T;
  using Compute = T;
  static TEMPO_HD T decode(T v) { return v; }
  static TEMPO_HD T encode(T v) { return v; }
};

template <class S, float (*Decode)(S), S (*Encode)(float)>
struct Narrow {
  using Storage = S;
  using Compute = float;
  static TEMPO_HD float decode(S v) { return Decode(v); }
  static TEMPO_HD S encode(float v) { return Encode(v); }
};

using Half = Narrow<uint16_t, halfToFloat, floatToHalf>;
using Bf16 = Narrow<uint16_t, bf16ToFloat, floatToBf16>;
using E4m3 = Narrow<uint8_t, fp8e4m3ToFloat, floatToFp8e4m3>;
using E5m2 = Narrow<uint8_t, fp8e5m2ToFloat, floatToFp8e5m2>;
using E4m3Fnuz = Narrow<uint8_t, fp8e4m3FnuzToFloat, floatToFp8e4m3Fnuz>;
using E5m2Fnuz = Narrow<uint8_t, fp8e5m2FnuzToFloat, floatToFp8e5m2Fnuz>;

// Calls fn.template operator()<Codec>() for `type` in `encoding`; returns false (and calls
// nothing) for a type outside the enum. Host code: the launchers and the tests dispatch
// through this one table.
template <class Fn>
bool withCodec(DataType type, Fp8Encoding encoding, Fn&& fn) {
  const bool fnuz = encoding == Fp8Encoding::Fnuz;
  switch (type) {
    case DataType::Int8: fn.template operator()<Native<int8_t>>(); return true;
    case DataType::Uint8: fn.template operator()<Native<uint8_t>>(); return true;
    case DataType::Int32: fn.template operator()<Native<int32_t>>(); return true;
    case DataType::Uint32: fn.template operator()<Native<uint32_t>>(); return true;
    case DataType::Int64: fn.template operator()<Native<int64_t>>(); return true;
    case DataType::Uint64: fn.template operator()<Native<uint64_t>>(); return true;
    case DataType::Float16: fn.template operator()<Half>(); return true;
    case DataType::Float32: fn.template operator()<Native<float>>(); return true;
    case DataType::Float64: fn.template operator()<Native<double>>(); return true;
    case DataType::Bfloat16: fn.template operator()<Bf16>(); return true;
    case DataType::Float8e4m3:
      if (fnuz) fn.template operator()<E4m3Fnuz>();
      else fn.template operator()<E4m3>();
      return true;
    case DataType::Float8e5m2:
      if (fnuz) fn.template operator()<E5m2Fnuz>();
      else fn.template operator()<E5m2>();
      return true;
  }
  return false;
}

// Calls fn.template operator()<Op>() with the kernel operation for `op`: Avg runs as Sum
// (its division is the divisor's, see Combine). Returns false (and calls nothing) for an op
// outside the enum. Host code: the launchers and the tests dispatch through this one switch.
template <class Fn>
bool withOp(RedOp op, Fn&& fn) {
  switch (op) {
    case RedOp::Sum:
    case RedOp::Avg: fn.template operator()<RedOp::Sum>(); return true;
    case RedOp::Prod: fn.template operator()<RedOp::Prod>(); return true;
    case RedOp::Max: fn.template operator()<RedOp::Max>(); return true;
    case RedOp::Min: fn.template operator()<RedOp::Min>(); return true;
  }
  return false;
}

// ---- integers: wrapping arithmetic in uint64_t (no undefined behaviour), C's division ----

template <class T>
TEMPO_HD T intCombine(RedOp op, T a, T b) {
  switch (op) {
    case RedOp::Sum:
    case RedOp::Avg: return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
    case RedOp::Prod: return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
    case RedOp::Max: return a < b ? b : a;
    case RedOp::Min: return b < a ? b : a;
  }
  return a;
}

// Truncates toward zero. Divisors beyond int64_t exceed every magnitude but |INT64_MIN|.
template <class T>
TEMPO_HD T intDivide(T v, uint64_t d) {
  if constexpr (std::is_unsigned_v<T>) {
    return static_cast<T>(static_cast<uint64_t>(v) / d);
  } else {
    constexpr uint64_t kTwo63 = uint64_t(1) << 63;
    constexpr int64_t kInt64Min = static_cast<int64_t>(kTwo63);
    if (d >= kTwo63) return (static_cast<int64_t>(v) == kInt64Min && d == kTwo63) ? T(-1) : T(0);
    return static_cast<T>(static_cast<int64_t>(v) / static_cast<int64_t>(d));
  }
}

// ---- floating point in the compute type C (float or double) ----

template <class C>
using Bits = std::conditional_t<sizeof(C) == 4, uint32_t, uint64_t>;

template <class C>
TEMPO_HD C canonicalNan() {
  if constexpr (sizeof(C) == 4) return std::bit_cast<float>(kCanonicalNanF32);
  else return std::bit_cast<double>(kCanonicalNanF64);
}

template <class C>
TEMPO_HD bool isNan(C v) { return v != v; }

template <class C>
TEMPO_HD bool signBit(C v) { return (std::bit_cast<Bits<C>>(v) >> (8 * sizeof(C) - 1)) != 0; }

template <class C>
TEMPO_HD C canonicalize(C r) { return isNan(r) ? canonicalNan<C>() : r; }

// maxNum / minNum: a NaN operand is ignored, both NaN gives NaN, -0 < +0.
template <class C>
TEMPO_HD C floatMax(C a, C b) {
  if (isNan(a)) return isNan(b) ? canonicalNan<C>() : b;
  if (isNan(b)) return a;
  if (a == 0 && b == 0) return signBit(a) ? b : a;
  return a > b ? a : b;
}

template <class C>
TEMPO_HD C floatMin(C a, C b) {
  if (isNan(a)) return isNan(b) ? canonicalNan<C>() : b;
  if (isNan(b)) return a;
  if (a == 0 && b == 0) return signBit(a) ? a : b;
  return a < b ? a : b;
}

template <class C>
TEMPO_HD C floatCombine(RedOp op, C a, C b) {
  switch (op) {
    case RedOp::Sum:
    case RedOp::Avg: return canonicalize(a + b);
    case RedOp::Prod: return canonicalize(a * b);
    case RedOp::Max: return floatMax(a, b);
    case RedOp::Min: return floatMin(a, b);
  }
  return a;
}

// ---- the per-element operations the kernels apply ----

// r = a op b, then (Sum and Avg with divisor > 1) r / divisor, rounded once to the type.
// Op is a template argument so each kernel carries one operation with no branch on it.
template <class E, RedOp Op>
struct Combine {
  using S = typename E::Storage;
  uint64_t divisor;  // > 1 divides a sum; 0 and 1 do not
  TEMPO_HD S operator()(S x, S y) const {
    using C = typename E::Compute;
    constexpr bool kSums = Op == RedOp::Sum || Op == RedOp::Avg;
    const C a = E::decode(x), b = E::decode(y);
    if constexpr (std::is_floating_point_v<C>) {
      C r = floatCombine(Op, a, b);
      if (kSums && divisor > 1) r = canonicalize(r / static_cast<C>(divisor));
      return E::encode(r);
    } else {
      C r = intCombine(Op, a, b);
      if (kSums && divisor > 1) r = intDivide(r, divisor);
      return r;
    }
  }
};

// r = v / divisor (Avg's finalisation when no combine step is left); divisor >= 1.
template <class E>
struct Divide {
  using S = typename E::Storage;
  uint64_t divisor;
  TEMPO_HD S operator()(S x) const {
    using C = typename E::Compute;
    const C v = E::decode(x);
    if constexpr (std::is_floating_point_v<C>) {
      return E::encode(canonicalize(v / static_cast<C>(divisor)));
    } else {
      return intDivide(v, divisor);
    }
  }
};

// r = v * scalar with Prod's semantics (ncclRedOpCreatePreMulSum's premultiplication).
template <class E>
struct Scale {
  using S = typename E::Storage;
  S scalar;
  TEMPO_HD S operator()(S x) const { return Combine<E, RedOp::Prod>{1}(x, scalar); }
};

// r = v: the copy kernel.
template <class S>
struct Identity {
  TEMPO_HD S operator()(S x) const { return x; }
};

}  // namespace element
}  // namespace tempo::kernels::gpu
