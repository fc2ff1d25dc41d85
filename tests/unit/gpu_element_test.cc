// The device kernels' per-element arithmetic (kernels/hip/element.h), compiled for the host:
// it must be bit for bit what the host reference reducers compute (kernels/reduce.h), for
// every datatype and operation, and the FNUZ fp8 formats must decode and round as their
// definition says. The GPU runs exactly these functions, so this is the CPU-only proof of
// the device arithmetic; tests/gpu runs the kernels themselves where there is a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/float_convert.h"
#include "kernels/hip/element.h"
#include "kernels/reduce.h"
#include "tests/common/operands.h"
#include "tests/common/verify.h"

namespace tempo::kernels::gpu {
namespace {

using element::Combine;
using testing::operands;
using testing::kNumSpecialPatterns;

using testing::kAllTypes;
using testing::kAllOps;

// The kernel functor for a runtime op, chosen as the launchers choose it.
template <class E>
typename E::Storage combine(RedOp op, uint64_t divisor, typename E::Storage x, typename E::Storage y) {
  typename E::Storage r{};
  element::withOp(op, [&]<RedOp Op>() { r = Combine<E, Op>{divisor}(x, y); });
  return r;
}

// Makes the first kNumSpecialPatterns^2 pairs (a[i], b[i]) every special against every
// special; returns b.
std::vector<uint8_t> crossedWithSpecials(DataType type, std::vector<uint8_t>& a, std::vector<uint8_t> b) {
  const size_t size = dataTypeSize(type), n = kNumSpecialPatterns;
  for (size_t i = 0; i < n * n && (i + 1) * size <= a.size(); ++i) {
    std::memcpy(&a[i * size], &testing::kSpecialPatterns[i / n], size);
    std::memcpy(&b[i * size], &testing::kSpecialPatterns[i % n], size);
  }
  return b;
}

TEST(GpuElement, EveryTypeAndOpIsBitExactWithTheHostReference) {
  constexpr size_t kCount = 4096;
  for (DataType type : kAllTypes) {
    const size_t size = dataTypeSize(type);
    auto a = operands(type, kCount, 1 + uint32_t(type));
    const auto b = crossedWithSpecials(type, a, operands(type, kCount, 100 + uint32_t(type)));
    for (RedOp op : kAllOps) {
      for (uint64_t divisor : {uint64_t(1), uint64_t(3), uint64_t(1) << 40}) {
        std::vector<uint8_t> want(kCount * size), got(kCount * size);
        ref::reduce(want.data(), a.data(), b.data(), kCount, type, op, divisor);
        element::withCodec(type, Fp8Encoding::Ocp, [&]<class E>() {
          using S = typename E::Storage;
          for (size_t i = 0; i < kCount; ++i) {
            S x, y;
            std::memcpy(&x, &a[i * size], size);
            std::memcpy(&y, &b[i * size], size);
            const S r = combine<E>(op, divisor, x, y);
            std::memcpy(&got[i * size], &r, size);
          }
        });
        for (size_t i = 0; i < kCount; ++i) {
          ASSERT_EQ(0, std::memcmp(&want[i * size], &got[i * size], size))
              << dataTypeName(type) << " " << redOpName(op) << " divisor " << divisor
              << " element " << i;
        }
      }
    }
  }
}

TEST(GpuElement, EveryPairOfOcpFp8ValuesCombinesAsTheHostReference) {
  for (DataType type : {DataType::Float8e4m3, DataType::Float8e5m2}) {
    std::vector<uint8_t> a(65536), b(65536), want(65536);
    for (size_t i = 0; i < 65536; ++i) a[i] = uint8_t(i >> 8), b[i] = uint8_t(i);
    for (RedOp op : kAllOps) {
      ref::reduce(want.data(), a.data(), b.data(), a.size(), type, op, op == RedOp::Avg ? 2 : 1);
      element::withCodec(type, Fp8Encoding::Ocp, [&]<class E>() {
        for (size_t i = 0; i < a.size(); ++i) {
          ASSERT_EQ(want[i], combine<E>(op, op == RedOp::Avg ? 2 : 1, a[i], b[i]))
              << dataTypeName(type) << " " << redOpName(op) << " " << int(a[i]) << ", " << int(b[i]);
        }
      });
    }
  }
}

TEST(GpuElement, DivideAndScaleAreTheHostOnes) {
  constexpr size_t kCount = 2048;
  for (DataType type : kAllTypes) {
    const size_t size = dataTypeSize(type);
    const auto src = operands(type, kCount, 7 + uint32_t(type));
    for (uint64_t divisor : {uint64_t(1), uint64_t(7), uint64_t(300), ~uint64_t(0)}) {
      std::vector<uint8_t> want(kCount * size), got(kCount * size);
      ref::divide(want.data(), src.data(), kCount, type, divisor);
      element::withCodec(type, Fp8Encoding::Ocp, [&]<class E>() {
        using S = typename E::Storage;
        for (size_t i = 0; i < kCount; ++i) {
          S x;
          std::memcpy(&x, &src[i * size], size);
          const S r = element::Divide<E>{divisor}(x);
          std::memcpy(&got[i * size], &r, size);
        }
      });
      ASSERT_EQ(want, got) << dataTypeName(type) << " / " << divisor;
    }
    // Scale by the third operand pattern (random bits for every type).
    std::vector<uint8_t> want(kCount * size), got(kCount * size);
    const uint8_t* scalar = &src[30 * size];
    kernels::scale(want.data(), src.data(), kCount, type, scalar);
    element::withCodec(type, Fp8Encoding::Ocp, [&]<class E>() {
      using S = typename E::Storage;
      element::Scale<E> fn;
      std::memcpy(&fn.scalar, scalar, size);
      for (size_t i = 0; i < kCount; ++i) {
        S x;
        std::memcpy(&x, &src[i * size], size);
        const S r = fn(x);
        std::memcpy(&got[i * size], &r, size);
      }
    });
    ASSERT_EQ(want, got) << dataTypeName(type) << " scale";
  }
}

// ---- FNUZ fp8 ----

float ldexp2(int m, int e) { return std::ldexp(float(m), e); }

TEST(Fp8Fnuz, EveryPatternButTheNanDecodesToItsFieldsWithBiasEightAndSixteen) {
  for (int c = 0; c < 256; ++c) {
    const auto v = uint8_t(c);
    const float e4 = fp8e4m3FnuzToFloat(v), e5 = fp8e5m2FnuzToFloat(v);
    if (v == 0x80) {
      EXPECT_TRUE(std::isnan(e4) && std::isnan(e5));
      continue;
    }
    const float sign = (v & 0x80) ? -1.0f : 1.0f;
    // E4M3FNUZ: 4 exponent bits, bias 8, 3 mantissa bits; field 0 is subnormal.
    const int x4 = (v >> 3) & 0xF, m4 = v & 7;
    const float want4 = x4 == 0 ? ldexp2(m4, 1 - 8 - 3) : ldexp2(8 + m4, x4 - 8 - 3);
    EXPECT_EQ(sign * want4, e4) << "E4M3FNUZ 0x" << std::hex << c;
    // E5M2FNUZ: 5 exponent bits, bias 16, 2 mantissa bits; field 31 is finite too.
    const int x5 = (v >> 2) & 0x1F, m5 = v & 3;
    const float want5 = x5 == 0 ? ldexp2(m5, 1 - 16 - 2) : ldexp2(4 + m5, x5 - 16 - 2);
    EXPECT_EQ(sign * want5, e5) << "E5M2FNUZ 0x" << std::hex << c;
  }
  EXPECT_EQ(240.0f, fp8e4m3FnuzToFloat(0x7F));
  EXPECT_EQ(57344.0f, fp8e5m2FnuzToFloat(0x7F));
  EXPECT_EQ(-240.0f, fp8e4m3FnuzToFloat(0xFF));
}

TEST(Fp8Fnuz, RoundsToNearestEvenSaturatesAndHasNoNegativeZero) {
  using Decode = float (*)(uint8_t);
  using Encode = uint8_t (*)(float);
  const struct { const char* name; Decode decode; Encode encode; float max; } formats[] = {
      {"E4M3FNUZ", fp8e4m3FnuzToFloat, floatToFp8e4m3Fnuz, 240.0f},
      {"E5M2FNUZ", fp8e5m2FnuzToFloat, floatToFp8e5m2Fnuz, 57344.0f}};
  for (const auto& f : formats) {
    SCOPED_TRACE(f.name);
    // Every value encodes back to its own pattern (the positive ones ascend with the code).
    for (int c = 0; c < 256; ++c) {
      if (c == 0x80) continue;
      EXPECT_EQ(c, f.encode(f.decode(uint8_t(c)))) << std::hex << c;
    }
    // Halfway between neighbours: ties go to the even code; a hair above goes up.
    for (int c = 0; c < 0x7F; ++c) {
      const float lo = f.decode(uint8_t(c)), hi = f.decode(uint8_t(c + 1));
      const float mid = (lo + hi) / 2;  // exact: neighbours differ in one low bit
      EXPECT_EQ((c & 1) ? c + 1 : c, f.encode(mid)) << "tie above 0x" << std::hex << c;
      EXPECT_EQ(c + 1, f.encode(std::nextafter(mid, hi))) << "above the tie 0x" << std::hex << c;
      if (c > 0) {
        EXPECT_EQ(c | 0x80, f.encode(-lo)) << "negative 0x" << std::hex << c;
      }
    }
    const float inf = std::numeric_limits<float>::infinity();
    EXPECT_EQ(0x7F, f.encode(inf));
    EXPECT_EQ(0xFF, f.encode(-inf));
    EXPECT_EQ(0x7F, f.encode(f.max * 4));
    EXPECT_EQ(0xFF, f.encode(-f.max * 4));
    EXPECT_EQ(0x80, f.encode(std::numeric_limits<float>::quiet_NaN()));
    EXPECT_EQ(0x80, f.encode(-std::numeric_limits<float>::quiet_NaN()));
    EXPECT_EQ(0x00, f.encode(-0.0f));  // 0x80 would be NaN
    EXPECT_EQ(0x00, f.encode(-1e-30f));
  }
}

TEST(Fp8Fnuz, EveryPairCombinesOnceInFloatAndRoundsOnce) {
  // The expectation: decode, reduce as float32 by the host reference, encode once.
  using Decode = float (*)(uint8_t);
  using Encode = uint8_t (*)(float);
  const struct { DataType type; Decode decode; Encode encode; } formats[] = {
      {DataType::Float8e4m3, fp8e4m3FnuzToFloat, floatToFp8e4m3Fnuz},
      {DataType::Float8e5m2, fp8e5m2FnuzToFloat, floatToFp8e5m2Fnuz}};
  std::vector<float> fa(65536), fb(65536), fr(65536);
  for (const auto& f : formats) {
    for (size_t i = 0; i < 65536; ++i) fa[i] = f.decode(uint8_t(i >> 8)), fb[i] = f.decode(uint8_t(i));
    for (RedOp op : kAllOps) {
      const uint64_t divisor = op == RedOp::Avg ? 3 : 1;
      ref::reduce(fr.data(), fa.data(), fb.data(), fr.size(), DataType::Float32, op, divisor);
      element::withCodec(f.type, Fp8Encoding::Fnuz, [&]<class E>() {
        for (size_t i = 0; i < 65536; ++i) {
          ASSERT_EQ(f.encode(fr[i]), combine<E>(op, divisor, uint8_t(i >> 8), uint8_t(i)))
              << dataTypeName(f.type) << " FNUZ " << redOpName(op) << " " << (i >> 8) << ", " << (i & 255);
        }
      });
    }
  }
}

}  // namespace
}  // namespace tempo::kernels::gpu
