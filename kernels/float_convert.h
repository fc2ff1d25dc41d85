// Scalar conversions between float and the narrow floating formats Tempo reduces:
// IEEE binary16 ("half"), bfloat16, the OCP 8-bit formats E4M3 ("E4M3FN") and E5M2, and
// AMD's FNUZ variants of the two (E4M3FNUZ, E5M2FNUZ; used by the device kernels on
// gfx940-gfx942).
// Narrow values travel as their bit patterns (uint16_t / uint8_t).
//
// Contract, shared by the reference and the vectorised reducers (see kernels/reduce.h):
//  - X -> float is exact for every non-NaN pattern. A NaN pattern becomes a quiet float NaN
//    with the same sign and the pattern's payload in the top mantissa bits (what x86 F16C
//    vcvtph2ps does for half).
//  - float -> X rounds to nearest, ties to even. Float NaN becomes a quiet NaN of X with
//    the same sign and the top payload bits (what F16C vcvtps2ph does for half).
//  - Out-of-range finite values: half and bfloat16 overflow to infinity; E4M3 and E5M2
//    saturate to +-max finite (448 and 57344), as NCCL's fp8 casts do with __NV_SATFINITE.
//    E4M3 has no infinity, so an infinite float also saturates to +-448; E5M2 keeps
//    infinities.
//  - The conversions do not depend on the floating-point environment (rounding mode,
//    flush-to-zero): they are integer code plus exact power-of-two scalings.
// Everything here is constexpr, so tests can check tables at compile time, and is cheap
// enough to inline into vectorised loops. Shared by the host reducers (kernels/cpu) and the
// device kernels (kernels/hip), which call these same functions on the GPU (constexpr
// functions are callable from device code under hipcc and nvcc --expt-relaxed-constexpr).
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace tempo::kernels {

// The NaN every reduction produces (kernels/reduce.h): positive, quiet, zero payload.
inline constexpr uint32_t kCanonicalNanF32 = 0x7FC00000u;
inline constexpr uint64_t kCanonicalNanF64 = 0x7FF8000000000000ull;
inline constexpr uint16_t kCanonicalNanF16 = 0x7E00u;
inline constexpr uint16_t kCanonicalNanBf16 = 0x7FC0u;
inline constexpr uint8_t kCanonicalNanE4m3 = 0x7Fu;
inline constexpr uint8_t kCanonicalNanE5m2 = 0x7Eu;

namespace convert_detail {

constexpr float bitsToFloat(uint32_t u) { return std::bit_cast<float>(u); }
constexpr uint32_t floatToBits(float f) { return std::bit_cast<uint32_t>(f); }

// 2^e as a float, for e in [-126, 127].
constexpr float pow2(int e) { return bitsToFloat(uint32_t(e + 127) << 23); }

// Decodes sign/exponent/mantissa fields of a format with M mantissa bits and the given
// exponent bias; exp is a finite exponent field (not the all-ones NaN/inf field of IEEE-like
// formats, which callers handle).
constexpr float decodeFinite(uint32_t sign, uint32_t exp, uint32_t man, int M, int bias) {
  if (exp == 0) {
    // Zero or subnormal: man * 2^(1 - bias - M), exact in float for every format here.
    float mag = float(man) * pow2(1 - bias - M);
    return sign ? -mag : mag;
  }
  return bitsToFloat(sign << 31 | uint32_t(int(exp) - bias + 127) << 23 | man << (23 - M));
}

// Rounds a non-NaN float magnitude (sign bit clear) to a format with M mantissa bits and
// exponent bias `bias`, ties to even. Returns the magnitude code without any range limit:
// a code above the format's largest finite one means the value overflowed (callers clamp).
// Valid for formats whose smallest subnormal is far above float's normal range (half,
// fp8), so float zeros and subnormals round to zero.
//
// Branch-free (both roundings are computed, then one is selected) so that loops calling it
// vectorise; every shift count is kept in [1, 25], so no lane ever shifts out of range.
constexpr uint32_t roundMagnitude(uint32_t u, int M, int bias) {
  const uint32_t shift = uint32_t(23 - M);
  const uint32_t minNormalField = uint32_t(127 + 1 - bias);  // float exponent field of 2^emin
  const uint32_t field = u >> 23;
  // Normal in the target: round the float bit pattern at the target's last mantissa bit
  // (adding half an ulp minus one, plus the kept lsb, is ties-to-even). A carry out of the
  // mantissa bumps the exponent, which is exactly right.
  const uint32_t normal =
      ((u + ((1u << (shift - 1)) - 1) + ((u >> shift) & 1)) >> shift) - (uint32_t(127 - bias) << M);
  // Subnormal in the target: the value is mant * 2^(field - 150); count units of
  // 2^(emin - M) by shifting right s bits, with the same ties-to-even trick. s >= 25 leaves
  // less than half a unit (mant < 2^24), so clamping s to 25 still rounds to zero; a result
  // of 2^M (rounded up to the smallest normal) is the right code as it stands.
  const uint32_t mant = (u & 0x7FFFFFu) | 0x800000u;
  const uint32_t sRaw = shift + minNormalField - field;  // meaningful only below minNormalField
  const uint32_t s = sRaw > 25 ? 25 : (sRaw < 1 ? 1 : sRaw);
  const uint32_t sub = (mant + ((1u << (s - 1)) - 1) + ((mant >> s) & 1)) >> s;
  return field >= minNormalField ? normal : sub;
}

constexpr bool isNanBits(uint32_t u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }

}  // namespace convert_detail

// ---- IEEE binary16 ----

constexpr float halfToFloat(uint16_t h) {
  using namespace convert_detail;
  const uint32_t sign = h >> 15, exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  if (exp == 0x1F) {
    if (man == 0) return bitsToFloat(sign << 31 | 0x7F800000u);
    return bitsToFloat(sign << 31 | 0x7FC00000u | man << 13);  // quieted, payload kept
  }
  return decodeFinite(sign, exp, man, 10, 15);
}

constexpr uint16_t floatToHalf(float f) {
  using namespace convert_detail;
  const uint32_t u = floatToBits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t mag = u & 0x7FFFFFFFu;
  const uint32_t nan = 0x7E00u | ((mag >> 13) & 0x3FFu);
  const uint32_t code = roundMagnitude(mag, 10, 15);
  const uint32_t finite = code > 0x7C00u ? 0x7C00u : code;  // overflow (and inf) -> inf
  return uint16_t(sign | (isNanBits(u) ? nan : finite));
}

// ---- bfloat16: the top half of a float ----

constexpr float bf16ToFloat(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

constexpr uint16_t floatToBf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  // Branch-free so the vectorised reducers can inline it into a SIMD loop. Rounding the bit
  // pattern handles subnormals and overflow to infinity; NaN is kept quiet instead, since
  // rounding could carry a NaN's payload into the exponent or clear it to infinity.
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1)) >> 16;
  const uint32_t quieted = (u >> 16) | 0x40u;
  return uint16_t(f != f ? quieted : rounded);
}

// ---- OCP FP8 E4M3 (E4M3FN): bias 7, no infinities, NaN = S.1111.111, max 448 ----

constexpr float fp8e4m3ToFloat(uint8_t v) {
  using namespace convert_detail;
  const uint32_t sign = v >> 7, exp = (v >> 3) & 0xF, man = v & 0x7;
  if (exp == 0xF && man == 0x7) return bitsToFloat(sign << 31 | 0x7FC00000u);
  return decodeFinite(sign, exp, man, 3, 7);
}

constexpr uint8_t floatToFp8e4m3(float f) {
  using namespace convert_detail;
  const uint32_t u = floatToBits(f);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t code = roundMagnitude(u & 0x7FFFFFFFu, 3, 7);
  const uint32_t finite = code > 0x7Eu ? 0x7Eu : code;  // saturate overflow and inf to 448
  return uint8_t(sign | (isNanBits(u) ? 0x7Fu : finite));
}

// ---- OCP FP8 E5M2: bias 15, IEEE-like infinities and NaNs, max 57344 ----

// E5M2 is exactly the top byte of a binary16, so decoding goes through half.
constexpr float fp8e5m2ToFloat(uint8_t v) { return halfToFloat(uint16_t(v << 8)); }

constexpr uint8_t floatToFp8e5m2(float f) {
  using namespace convert_detail;
  const uint32_t u = floatToBits(f);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t mag = u & 0x7FFFFFFFu;
  const uint32_t nan = 0x7Eu | ((mag >> 21) & 1);
  const uint32_t code = roundMagnitude(mag, 2, 15);
  const uint32_t finite = code > 0x7Bu ? 0x7Bu : code;  // saturate finite overflow to 57344
  const uint32_t special = isNanBits(u) ? nan : 0x7Cu;  // infinity stays infinity
  return uint8_t(sign | (mag >= 0x7F800000u ? special : finite));
}

// ---- FNUZ fp8 (AMD gfx940-gfx942): the same fields with the bias one higher, and no
// infinities, no negative zero: 0x80, the pattern of -0, is the only NaN ----
//
// Decoding: every pattern but 0x80 is finite. Encoding: ties to even as above; finite
// overflow and infinities saturate to +-max finite (E4M3FNUZ 240, E5M2FNUZ 57344), NaN
// becomes 0x80, and a result that rounds to zero is +0 whatever its sign.

inline constexpr uint8_t kFnuzNan = 0x80u;

constexpr float fp8e4m3FnuzToFloat(uint8_t v) {
  using namespace convert_detail;
  if (v == kFnuzNan) return bitsToFloat(kCanonicalNanF32);
  return decodeFinite(v >> 7, (v >> 3) & 0xF, v & 0x7, 3, 8);
}

constexpr float fp8e5m2FnuzToFloat(uint8_t v) {
  using namespace convert_detail;
  if (v == kFnuzNan) return bitsToFloat(kCanonicalNanF32);
  return decodeFinite(v >> 7, (v >> 2) & 0x1F, v & 0x3, 2, 16);
}

namespace convert_detail {
// Rounds to an FNUZ format with M mantissa bits and the given bias (largest code 0x7F).
constexpr uint8_t floatToFnuz(float f, int M, int bias) {
  const uint32_t u = floatToBits(f);
  const uint32_t code = roundMagnitude(u & 0x7FFFFFFFu, M, bias);
  const uint32_t finite = code > 0x7Fu ? 0x7Fu : code;  // overflow and inf saturate
  const uint32_t sign = finite == 0 ? 0u : (u >> 24) & 0x80u;  // no -0: it would be NaN
  return uint8_t(isNanBits(u) ? kFnuzNan : (sign | finite));
}
}  // namespace convert_detail

constexpr uint8_t floatToFp8e4m3Fnuz(float f) { return convert_detail::floatToFnuz(f, 3, 8); }
constexpr uint8_t floatToFp8e5m2Fnuz(float f) { return convert_detail::floatToFnuz(f, 2, 16); }

// ---- decode tables (the baseline fp8 loops look values up instead of decoding) ----

namespace convert_detail {
template <float (*Decode)(uint8_t)>
constexpr std::array<float, 256> makeFp8Table() {
  std::array<float, 256> t{};
  for (int i = 0; i < 256; ++i) t[std::size_t(i)] = Decode(uint8_t(i));
  return t;
}
}  // namespace convert_detail

inline constexpr std::array<float, 256> kFp8e4m3ToFloat =
    convert_detail::makeFp8Table<fp8e4m3ToFloat>();
inline constexpr std::array<float, 256> kFp8e5m2ToFloat =
    convert_detail::makeFp8Table<fp8e5m2ToFloat>();

}  // namespace tempo::kernels
