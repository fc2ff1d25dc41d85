// kernels/reduce.h: the fast reducers against the scalar reference, bit for bit, over every
// dtype x op x length x aliasing x ISA variant; the reference against hand-computed values;
// and the narrow-float conversions at their edges and exhaustively.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/float_convert.h"
#include "kernels/reduce.h"

namespace tempo::kernels {
namespace {

using cpu::Isa;

constexpr DataType kAllTypes[] = {
    DataType::Int8,    DataType::Uint8,   DataType::Int32,      DataType::Uint32,
    DataType::Int64,   DataType::Uint64,  DataType::Float16,    DataType::Float32,
    DataType::Float64, DataType::Bfloat16, DataType::Float8e4m3, DataType::Float8e5m2};
constexpr RedOp kAllOps[] = {RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min, RedOp::Avg};
constexpr size_t kLengths[] = {0, 1, 2, 3, 7, 15, 16, 17, 31, 33, 63, 64, 65, 1000, 4097, 100003};
constexpr Isa kIsas[] = {Isa::Baseline, Isa::Avx2};

std::string hexBytes(const uint8_t* p, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (size_t i = n; i-- > 0;) {  // little-endian: most significant byte first
    s += kDigits[p[i] >> 4];
    s += kDigits[p[i] & 15];
  }
  return s;
}

// One element of type t with "interesting" values mixed in: special floats (zeros,
// infinities, NaNs with assorted signs and payloads, subnormals, extremes), small exact
// values, moderate random values and raw random bit patterns.
void randomElement(DataType t, std::mt19937_64& rng, uint8_t* out) {
  const size_t size = dataTypeSize(t);
  const uint64_t bits = rng();
  const unsigned kind = unsigned(rng() % 8);
  uint64_t v = bits;  // kind 0-1: raw bits
  if (!isFloating(t)) {
    if (kind >= 2) {
      const int64_t small[] = {0, 1, -1, 2, -2, 3, 7, -7, 100, -100, 127, -128, 255};
      v = uint64_t(kind >= 6 ? small[bits % 13] : int64_t(bits % 201) - 100);
    }
    std::memcpy(out, &v, size);
    return;
  }
  float f = 0;
  if (kind >= 2 && kind <= 5) {
    // Moderate values; kind 2 keeps them integral, which makes exact sums and ties.
    std::uniform_real_distribution<float> dist(-64.0f, 64.0f);
    f = kind == 2 ? std::round(dist(rng)) : dist(rng);
  } else if (kind >= 6) {
    const uint32_t specials[] = {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u,
                                 0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0x7FA5A5A5u,
                                 0x00000001u, 0x3F800000u, 0xBF800000u, 0x38800000u};
    f = std::bit_cast<float>(specials[bits % 12]);
  }
  switch (t) {
    case DataType::Float32:
      if (kind < 2) std::memcpy(out, &bits, 4);
      else std::memcpy(out, &f, 4);
      return;
    case DataType::Float64: {
      double d = f;
      if (kind < 2) std::memcpy(out, &bits, 8);
      else std::memcpy(out, &d, 8);
      return;
    }
    case DataType::Float16: v = kind < 2 ? bits : floatToHalf(f); break;
    case DataType::Bfloat16: v = kind < 2 ? bits : floatToBf16(f); break;
    case DataType::Float8e4m3: v = kind < 2 ? bits : floatToFp8e4m3(f); break;
    case DataType::Float8e5m2: v = kind < 2 ? bits : floatToFp8e5m2(f); break;
    default: break;
  }
  std::memcpy(out, &v, size);
}

std::vector<uint8_t> randomBuffer(DataType t, size_t count, std::mt19937_64& rng) {
  std::vector<uint8_t> buf(count * dataTypeSize(t));
  for (size_t i = 0; i < count; ++i) randomElement(t, rng, buf.data() + i * dataTypeSize(t));
  return buf;
}

// Compares element by element and reports the first mismatches with their inputs.
::testing::AssertionResult sameBits(DataType t, const uint8_t* got, const uint8_t* want,
                                    const uint8_t* a, const uint8_t* b, size_t count) {
  const size_t s = dataTypeSize(t);
  if (count == 0 || std::memcmp(got, want, count * s) == 0) return ::testing::AssertionSuccess();
  auto failure = ::testing::AssertionFailure();
  int shown = 0;
  for (size_t i = 0; i < count && shown < 5; ++i) {
    if (std::memcmp(got + i * s, want + i * s, s) == 0) continue;
    failure << "\n  [" << i << "] a=0x" << hexBytes(a + i * s, s);
    if (b) failure << " b=0x" << hexBytes(b + i * s, s);
    failure << " fast=0x" << hexBytes(got + i * s, s) << " ref=0x" << hexBytes(want + i * s, s);
    ++shown;
  }
  return failure;
}

// ---- fast path == reference, bit for bit ----

struct ReduceCase {
  Isa isa;
  DataType type;
  RedOp op;
};

class ReduceMatchesReference : public ::testing::TestWithParam<ReduceCase> {
 protected:
  void SetUp() override {
    if (!cpu::isaAvailable(GetParam().isa)) GTEST_SKIP() << "this CPU lacks the ISA";
  }
};

enum class Alias { None, DstIsA, DstIsB, AllSame };
constexpr Alias kAliases[] = {Alias::None, Alias::DstIsA, Alias::DstIsB, Alias::AllSame};
constexpr size_t kGuard = 8;  // elements of canary on each side of dst
constexpr uint8_t kCanary = 0xA5;

// Runs one length / aliasing / alignment / divisor combination through both paths.
void checkOne(const ReduceCase& c, size_t count, Alias alias, size_t offset, uint64_t div,
              std::mt19937_64& rng) {
  const size_t s = dataTypeSize(c.type);
  const size_t padded = count + 2 * kGuard + offset;
  std::vector<uint8_t> a = randomBuffer(c.type, padded, rng);
  std::vector<uint8_t> b = randomBuffer(c.type, padded, rng);
  std::vector<uint8_t> dst(padded * s, kCanary);
  const size_t at = (kGuard + offset) * s;  // offset 1 makes every pointer misaligned for
                                            // vectors while keeping element alignment
  std::vector<uint8_t> want(count * s);
  uint8_t* out = dst.data() + at;
  const uint8_t* pa = a.data() + at;
  const uint8_t* pb = b.data() + at;
  switch (alias) {
    case Alias::None: break;
    case Alias::DstIsA: std::memcpy(out, pa, count * s); pa = out; break;
    case Alias::DstIsB: std::memcpy(out, pb, count * s); pb = out; break;
    case Alias::AllSame: std::memcpy(out, pa, count * s); pa = pb = out; break;
  }
  const std::vector<uint8_t> ina(pa, pa + count * s), inb(pb, pb + count * s);
  ref::reduce(want.data(), ina.data(), inb.data(), count, c.type, c.op, div);
  cpu::reduceWithIsa(c.isa, out, pa, pb, count, c.type, c.op, div);
  EXPECT_TRUE(sameBits(c.type, out, want.data(), ina.data(), inb.data(), count))
      << "count=" << count << " alias=" << int(alias) << " offset=" << offset
      << " divisor=" << div;
  const bool guardsIntact =
      std::all_of(dst.begin(), dst.begin() + at, [](uint8_t x) { return x == kCanary; }) &&
      std::all_of(dst.begin() + at + count * s, dst.end(), [](uint8_t x) { return x == kCanary; });
  EXPECT_TRUE(guardsIntact) << "write outside [0, count): count=" << count;
}

TEST_P(ReduceMatchesReference, AllLengthsAliasesAndAlignments) {
  const ReduceCase& c = GetParam();
  std::mt19937_64 rng(1000 * int(c.type) + 10 * int(c.op) + int(c.isa));
  const bool sums = c.op == RedOp::Sum || c.op == RedOp::Avg;
  // A divisor is fused only into Sum / Avg; other ops must ignore it, so try one there too.
  const std::vector<uint64_t> divisors =
      sums ? std::vector<uint64_t>{1, 3, 8} : std::vector<uint64_t>{1, 5};
  for (size_t count : kLengths)
    for (Alias alias : kAliases)
      for (size_t offset : {0, 1})
        for (uint64_t div : divisors) {
          if (count > 4097 && (offset != 0 || div > 3)) continue;  // keep the suite quick
          checkOne(c, count, alias, offset, div, rng);
        }
}

std::vector<ReduceCase> allReduceCases() {
  std::vector<ReduceCase> v;
  for (Isa isa : kIsas)
    for (DataType t : kAllTypes)
      for (RedOp op : kAllOps) v.push_back({isa, t, op});
  return v;
}

std::string reduceCaseName(const ::testing::TestParamInfo<ReduceCase>& info) {
  std::string name = std::string(cpu::isaName(info.param.isa)) + "_" +
                     dataTypeName(info.param.type) + "_" + redOpName(info.param.op);
  std::replace_if(name.begin(), name.end(), [](char ch) { return !std::isalnum(ch); }, '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(Kernels, ReduceMatchesReference, ::testing::ValuesIn(allReduceCases()),
                         reduceCaseName);

struct DivideCase {
  Isa isa;
  DataType type;
};

class DivideMatchesReference : public ::testing::TestWithParam<DivideCase> {};

TEST_P(DivideMatchesReference, AllLengthsAndDivisors) {
  const DivideCase& c = GetParam();
  if (!cpu::isaAvailable(c.isa)) GTEST_SKIP() << "this CPU lacks the ISA";
  const size_t s = dataTypeSize(c.type);
  std::mt19937_64 rng(77 + int(c.type) + 100 * int(c.isa));
  const uint64_t divisors[] = {0, 1, 2, 3, 7, 300, uint64_t(1) << 31, uint64_t(1) << 32,
                               uint64_t(1) << 63, ~uint64_t(0)};
  for (size_t count : kLengths)
    for (uint64_t div : divisors)
      for (bool inPlace : {false, true}) {
        if (count > 4097 && div > 3) continue;
        std::vector<uint8_t> src = randomBuffer(c.type, count + 1, rng);
        std::vector<uint8_t> want(count * s), dst(count * s + s);
        const uint8_t* in = src.data() + s;  // offset by one element
        uint8_t* out = inPlace ? src.data() + s : dst.data() + s;
        const std::vector<uint8_t> copy(in, in + count * s);
        ref::divide(want.data(), copy.data(), count, c.type, div);
        cpu::divideWithIsa(c.isa, out, in, count, c.type, div);
        EXPECT_TRUE(sameBits(c.type, out, want.data(), copy.data(), nullptr, count))
            << "count=" << count << " divisor=" << div << " inPlace=" << inPlace;
      }
}

std::vector<DivideCase> allDivideCases() {
  std::vector<DivideCase> v;
  for (Isa isa : kIsas)
    for (DataType t : kAllTypes) v.push_back({isa, t});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Kernels, DivideMatchesReference, ::testing::ValuesIn(allDivideCases()),
                         [](const ::testing::TestParamInfo<DivideCase>& info) {
                           std::string n = std::string(cpu::isaName(info.param.isa)) + "_" +
                                           dataTypeName(info.param.type);
                           std::replace_if(n.begin(), n.end(),
                                           [](char ch) { return !std::isalnum(ch); }, '_');
                           return n;
                         });

TEST(KernelDispatch, PicksTheBestAvailableIsa) {
  const Isa active = cpu::activeIsa();
  EXPECT_TRUE(cpu::isaAvailable(active));
  if (cpu::isaAvailable(Isa::Avx2)) {
    EXPECT_EQ(active, Isa::Avx2);
  }
  std::printf("host reducers: %s\n", cpu::isaName(active));
}

TEST(KernelDispatch, ZeroCountAcceptsNullPointers) {
  reduce(nullptr, nullptr, nullptr, 0, DataType::Float32, RedOp::Sum);
  divide(nullptr, nullptr, 0, DataType::Int32, 2);
  ref::reduce(nullptr, nullptr, nullptr, 0, DataType::Float32, RedOp::Sum);
}

// ---- the reference against hand-computed values (the fast path must agree too) ----

template <class T>
T combine(DataType t, RedOp op, T a, T b, uint64_t div = 1) {
  T want, got;
  ref::reduce(&want, &a, &b, 1, t, op, div);
  reduce(&got, &a, &b, 1, t, op, div);
  EXPECT_EQ(std::memcmp(&want, &got, sizeof(T)), 0) << "fast path disagrees with ref";
  return want;
}

template <class T>
T divided(DataType t, T v, uint64_t div) {
  T want, got;
  ref::divide(&want, &v, 1, t, div);
  divide(&got, &v, 1, t, div);
  EXPECT_EQ(std::memcmp(&want, &got, sizeof(T)), 0) << "fast path disagrees with ref";
  return want;
}

uint32_t bitsOf(float f) { return std::bit_cast<uint32_t>(f); }
uint64_t bitsOf(double d) { return std::bit_cast<uint64_t>(d); }

TEST(ReduceReference, IntegersWrap) {
  EXPECT_EQ(combine<int8_t>(DataType::Int8, RedOp::Sum, 127, 1), -128);
  EXPECT_EQ(combine<int8_t>(DataType::Int8, RedOp::Sum, -128, -1), 127);
  EXPECT_EQ(combine<uint8_t>(DataType::Uint8, RedOp::Sum, 255, 1), 0);
  EXPECT_EQ(combine<int32_t>(DataType::Int32, RedOp::Sum, INT32_MAX, 1), INT32_MIN);
  EXPECT_EQ(combine<uint32_t>(DataType::Uint32, RedOp::Sum, UINT32_MAX, 2), 1u);
  EXPECT_EQ(combine<int64_t>(DataType::Int64, RedOp::Sum, INT64_MAX, 1), INT64_MIN);
  EXPECT_EQ(combine<uint64_t>(DataType::Uint64, RedOp::Sum, UINT64_MAX, 1), 0u);
  EXPECT_EQ(combine<int8_t>(DataType::Int8, RedOp::Prod, 16, 16), 0);
  EXPECT_EQ(combine<int8_t>(DataType::Int8, RedOp::Prod, -128, -1), -128);
  EXPECT_EQ(combine<int8_t>(DataType::Int8, RedOp::Prod, 11, 13), -113);  // 143 - 256
  EXPECT_EQ(combine<uint8_t>(DataType::Uint8, RedOp::Prod, 255, 255), 1);
  EXPECT_EQ(combine<int32_t>(DataType::Int32, RedOp::Prod, 65536, 65536), 0);
  EXPECT_EQ(combine<int32_t>(DataType::Int32, RedOp::Prod, INT32_MIN, -1), INT32_MIN);
  EXPECT_EQ(combine<uint32_t>(DataType::Uint32, RedOp::Prod, 0x10001u, 0x10001u), 0x20001u);
  EXPECT_EQ(combine<int64_t>(DataType::Int64, RedOp::Prod, INT64_MIN, -1), INT64_MIN);
  EXPECT_EQ(combine<uint64_t>(DataType::Uint64, RedOp::Prod, uint64_t(1) << 32,
                              uint64_t(1) << 32), 0u);
}

TEST(ReduceReference, IntegerMaxMinUseTheTypesSignedness) {
  EXPECT_EQ(combine<int8_t>(DataType::Int8, RedOp::Max, -1, 1), 1);
  EXPECT_EQ(combine<uint8_t>(DataType::Uint8, RedOp::Max, 255, 1), 255);
  EXPECT_EQ(combine<int32_t>(DataType::Int32, RedOp::Min, INT32_MIN, 0), INT32_MIN);
  EXPECT_EQ(combine<uint32_t>(DataType::Uint32, RedOp::Min, UINT32_MAX, 0), 0u);
  EXPECT_EQ(combine<int64_t>(DataType::Int64, RedOp::Max, -5, -7), -5);
  EXPECT_EQ(combine<uint64_t>(DataType::Uint64, RedOp::Max, UINT64_MAX, 1), UINT64_MAX);
}

TEST(ReduceReference, IntegerAverageTruncatesTowardZero) {
  EXPECT_EQ(combine<int32_t>(DataType::Int32, RedOp::Avg, -4, -3, 2), -3);  // -7 / 2
  EXPECT_EQ(combine<int32_t>(DataType::Int32, RedOp::Sum, 4, 3, 2), 3);
  EXPECT_EQ(combine<uint32_t>(DataType::Uint32, RedOp::Avg, 4, 3, 2), 3u);
  EXPECT_EQ(combine<int8_t>(DataType::Int8, RedOp::Avg, 100, 100, 2), -28);  // wraps first
  EXPECT_EQ(combine<int64_t>(DataType::Int64, RedOp::Avg, -10, 1, 4), -2);
  EXPECT_EQ(combine<uint64_t>(DataType::Uint64, RedOp::Avg, UINT64_MAX, 0, 2), UINT64_MAX / 2);
  EXPECT_EQ(combine<int32_t>(DataType::Int32, RedOp::Avg, -7, 0, 1), -7);  // 1: no division
  EXPECT_EQ(combine<int32_t>(DataType::Int32, RedOp::Max, -7, 0, 2), 0);   // divisor ignored
  EXPECT_EQ(divided<int32_t>(DataType::Int32, -7, 2), -3);
  EXPECT_EQ(divided<int32_t>(DataType::Int32, 7, 2), 3);
  EXPECT_EQ(divided<int8_t>(DataType::Int8, -128, 300), 0);
  EXPECT_EQ(divided<int8_t>(DataType::Int8, -128, 2), -64);
  EXPECT_EQ(divided<uint8_t>(DataType::Uint8, 255, 2), 127);
  EXPECT_EQ(divided<int32_t>(DataType::Int32, INT32_MIN, uint64_t(1) << 31), -1);
  EXPECT_EQ(divided<int32_t>(DataType::Int32, INT32_MIN, uint64_t(1) << 32), 0);
  EXPECT_EQ(divided<uint32_t>(DataType::Uint32, UINT32_MAX, 0xFFFFFFFFu), 1u);
  EXPECT_EQ(divided<int64_t>(DataType::Int64, INT64_MIN, 2), INT64_MIN / 2);
  EXPECT_EQ(divided<int64_t>(DataType::Int64, INT64_MIN, uint64_t(1) << 63), -1);
  EXPECT_EQ(divided<int64_t>(DataType::Int64, INT64_MIN, UINT64_MAX), 0);
  EXPECT_EQ(divided<uint64_t>(DataType::Uint64, UINT64_MAX, UINT64_MAX), 1u);
  EXPECT_EQ(divided<int32_t>(DataType::Int32, -9, 0), -9);  // 0 is treated as 1
}

TEST(ReduceReference, NativeFloats) {
  EXPECT_EQ(combine<float>(DataType::Float32, RedOp::Sum, 1.5f, 2.25f), 3.75f);
  EXPECT_EQ(combine<float>(DataType::Float32, RedOp::Prod, 1.5f, -4.0f), -6.0f);
  EXPECT_EQ(combine<double>(DataType::Float64, RedOp::Sum, 0.1, 0.2), 0.1 + 0.2);
  EXPECT_EQ(combine<float>(DataType::Float32, RedOp::Sum, 1.0f, 0x1p-24f), 1.0f);  // RNE tie
  EXPECT_EQ(combine<float>(DataType::Float32, RedOp::Prod, 0x1p-100f, 0x1p-40f), 0x1p-140f);
  EXPECT_EQ(combine<float>(DataType::Float32, RedOp::Sum, 3e38f, 3e38f), INFINITY);
  EXPECT_EQ(combine<float>(DataType::Float32, RedOp::Avg, 1.0f, 2.0f, 2), 1.5f);
  EXPECT_EQ(combine<float>(DataType::Float32, RedOp::Avg, 1.0f, 0.0f, 3), 1.0f / 3.0f);
  EXPECT_EQ(combine<double>(DataType::Float64, RedOp::Avg, 1.0, 0.0, 3), 1.0 / 3.0);
  EXPECT_EQ(divided<float>(DataType::Float32, 3.0f, 4), 0.75f);
  EXPECT_EQ(divided<double>(DataType::Float64, -1.0, 3), -1.0 / 3.0);
}

TEST(ReduceReference, NanResultsAreCanonical) {
  const float qnan = std::bit_cast<float>(0xFFC00123u), snan = std::bit_cast<float>(0x7F800001u);
  EXPECT_EQ(bitsOf(combine<float>(DataType::Float32, RedOp::Sum, qnan, 1.0f)), kCanonicalNanF32);
  EXPECT_EQ(bitsOf(combine<float>(DataType::Float32, RedOp::Sum, 1.0f, snan)), kCanonicalNanF32);
  EXPECT_EQ(bitsOf(combine<float>(DataType::Float32, RedOp::Sum, INFINITY, -INFINITY)),
            kCanonicalNanF32);
  EXPECT_EQ(bitsOf(combine<float>(DataType::Float32, RedOp::Prod, 0.0f, INFINITY)),
            kCanonicalNanF32);
  EXPECT_EQ(bitsOf(divided<float>(DataType::Float32, qnan, 2)), kCanonicalNanF32);
  const double dnan = std::bit_cast<double>(0xFFF0000000000001ull);
  EXPECT_EQ(bitsOf(combine<double>(DataType::Float64, RedOp::Sum, dnan, 1.0)), kCanonicalNanF64);
  EXPECT_EQ(combine<uint16_t>(DataType::Float16, RedOp::Sum, 0xFE01, 0x3C00), kCanonicalNanF16);
  EXPECT_EQ(combine<uint16_t>(DataType::Bfloat16, RedOp::Sum, 0xFF81, 0x3F80), kCanonicalNanBf16);
  EXPECT_EQ(combine<uint8_t>(DataType::Float8e4m3, RedOp::Sum, 0xFF, 0x38), kCanonicalNanE4m3);
  EXPECT_EQ(combine<uint8_t>(DataType::Float8e5m2, RedOp::Sum, 0xFD, 0x3C), kCanonicalNanE5m2);
  EXPECT_EQ(combine<uint8_t>(DataType::Float8e5m2, RedOp::Sum, 0x7C, 0xFC), kCanonicalNanE5m2);
}

// Max/Min follow fmaxf/fminf (as NCCL does): a NaN operand is ignored; NaN only if both are.
TEST(ReduceReference, MaxMinIgnoreOneNanAndOrderSignedZeros) {
  const float nan = std::bit_cast<float>(0xFFC00001u);
  for (RedOp op : {RedOp::Max, RedOp::Min}) {
    EXPECT_EQ(combine<float>(DataType::Float32, op, nan, 2.0f), 2.0f);
    EXPECT_EQ(combine<float>(DataType::Float32, op, 2.0f, nan), 2.0f);
    EXPECT_EQ(bitsOf(combine<float>(DataType::Float32, op, nan, nan)), kCanonicalNanF32);
    EXPECT_EQ(combine<double>(DataType::Float64, op, 3.0, double(nan)), 3.0);
    EXPECT_EQ(bitsOf(combine<double>(DataType::Float64, op, double(nan), double(nan))),
              kCanonicalNanF64);
    EXPECT_EQ(combine<uint16_t>(DataType::Float16, op, 0x7E00, 0x3C00), 0x3C00);
    EXPECT_EQ(combine<uint16_t>(DataType::Float16, op, 0xBC00, 0x7C01), 0xBC00);
    EXPECT_EQ(combine<uint16_t>(DataType::Float16, op, 0x7C01, 0xFE00), kCanonicalNanF16);
    EXPECT_EQ(combine<uint16_t>(DataType::Bfloat16, op, 0x7FC0, 0x4000), 0x4000);
    EXPECT_EQ(combine<uint8_t>(DataType::Float8e4m3, op, 0x7F, 0x38), 0x38);
    EXPECT_EQ(combine<uint8_t>(DataType::Float8e4m3, op, 0xFF, 0x7F), kCanonicalNanE4m3);
    EXPECT_EQ(combine<uint8_t>(DataType::Float8e5m2, op, 0x3C, 0x7F), 0x3C);
  }
  EXPECT_EQ(combine<float>(DataType::Float32, RedOp::Max, 1.0f, INFINITY), INFINITY);
  EXPECT_EQ(combine<float>(DataType::Float32, RedOp::Min, -1.0f, -INFINITY), -INFINITY);
  for (float a : {0.0f, -0.0f})
    for (float b : {0.0f, -0.0f}) {
      const bool bothNegative = std::signbit(a) && std::signbit(b);
      const bool eitherNegative = std::signbit(a) || std::signbit(b);
      EXPECT_EQ(std::signbit(combine<float>(DataType::Float32, RedOp::Max, a, b)), bothNegative);
      EXPECT_EQ(std::signbit(combine<float>(DataType::Float32, RedOp::Min, a, b)),
                eitherNegative);
      EXPECT_EQ(std::signbit(combine<double>(DataType::Float64, RedOp::Max, a, b)),
                bothNegative);
    }
  EXPECT_EQ(combine<uint16_t>(DataType::Float16, RedOp::Max, 0x8000, 0x0000), 0x0000);
  EXPECT_EQ(combine<uint16_t>(DataType::Float16, RedOp::Min, 0x0000, 0x8000), 0x8000);
}

TEST(ReduceReference, NarrowFloatsRoundOnceFromFloat) {
  // half: 1 + 1 = 2; overflow to inf; 2048 + 1 ties to even 2048, 2050 + 1 to 2052.
  EXPECT_EQ(combine<uint16_t>(DataType::Float16, RedOp::Sum, 0x3C00, 0x3C00), 0x4000);
  EXPECT_EQ(combine<uint16_t>(DataType::Float16, RedOp::Sum, 0x7BFF, 0x7BFF), 0x7C00);
  EXPECT_EQ(combine<uint16_t>(DataType::Float16, RedOp::Prod, 0xFBFF, 0x4000), 0xFC00);
  EXPECT_EQ(combine<uint16_t>(DataType::Float16, RedOp::Sum, floatToHalf(2048), 0x3C00),
            floatToHalf(2048));
  EXPECT_EQ(combine<uint16_t>(DataType::Float16, RedOp::Sum, floatToHalf(2050), 0x3C00),
            floatToHalf(2052));
  // half subnormals: smallest * 2 is exact; smallest * 0.5 ties to even 0.
  EXPECT_EQ(combine<uint16_t>(DataType::Float16, RedOp::Prod, 0x0001, 0x4000), 0x0002);
  EXPECT_EQ(combine<uint16_t>(DataType::Float16, RedOp::Prod, 0x0001, 0x3800), 0x0000);
  // Avg: (1 + 2) / 2 = 1.5, divided in float and rounded once; 65504 + 65504 overflows
  // half but not float, so / 2 gives back 65504.
  EXPECT_EQ(combine<uint16_t>(DataType::Float16, RedOp::Avg, 0x3C00, 0x4000, 2), 0x3E00);
  EXPECT_EQ(combine<uint16_t>(DataType::Float16, RedOp::Avg, 0x7BFF, 0x7BFF, 2), 0x7BFF);
  EXPECT_EQ(divided<uint16_t>(DataType::Float16, 0x4200, 2), 0x3E00);  // 3 / 2
  // bf16: 1 + 2^-8 ties to 1; max finite + max finite overflows to inf.
  EXPECT_EQ(combine<uint16_t>(DataType::Bfloat16, RedOp::Sum, 0x3F80, 0x3B80), 0x3F80);
  EXPECT_EQ(combine<uint16_t>(DataType::Bfloat16, RedOp::Sum, 0x7F7F, 0x7F7F), 0x7F80);
  EXPECT_EQ(combine<uint16_t>(DataType::Bfloat16, RedOp::Avg, 0x3F80, 0x4000, 2), 0x3FC0);
  // e4m3 saturates at 448, infinite float results included; 240 + 16 = 256.
  EXPECT_EQ(combine<uint8_t>(DataType::Float8e4m3, RedOp::Sum, 0x7E, 0x7E), 0x7E);
  EXPECT_EQ(combine<uint8_t>(DataType::Float8e4m3, RedOp::Sum, 0xFE, 0xFE), 0xFE);
  EXPECT_EQ(combine<uint8_t>(DataType::Float8e4m3, RedOp::Prod, 0x7E, 0x40), 0x7E);  // 448*2
  EXPECT_EQ(combine<uint8_t>(DataType::Float8e4m3, RedOp::Sum, floatToFp8e4m3(240),
                             floatToFp8e4m3(16)), floatToFp8e4m3(256));
  EXPECT_EQ(combine<uint8_t>(DataType::Float8e4m3, RedOp::Avg, 0x7E, 0x7E, 2), 0x7E);
  // e5m2 saturates finite results at 57344 and keeps infinities.
  EXPECT_EQ(combine<uint8_t>(DataType::Float8e5m2, RedOp::Sum, 0x7B, 0x7B), 0x7B);
  EXPECT_EQ(combine<uint8_t>(DataType::Float8e5m2, RedOp::Prod, 0xFB, 0x7B), 0xFB);
  EXPECT_EQ(combine<uint8_t>(DataType::Float8e5m2, RedOp::Sum, 0x7C, 0x3C), 0x7C);
  EXPECT_EQ(combine<uint8_t>(DataType::Float8e5m2, RedOp::Max, 0xFC, 0x3C), 0x3C);
  EXPECT_EQ(fp8e4m3ToFloat(combine<uint8_t>(DataType::Float8e4m3, RedOp::Sum, 0x38, 0x38)), 2.0f);
}

// ---- conversions ----

TEST(FloatConvert, HalfEdges) {
  EXPECT_EQ(floatToHalf(0.0f), 0x0000);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(bitsOf(halfToFloat(0x8000)), 0x80000000u);
  EXPECT_EQ(halfToFloat(0x0001), 0x1p-24f);                 // smallest subnormal
  EXPECT_EQ(halfToFloat(0x03FF), 1023 * 0x1p-24f);          // largest subnormal
  EXPECT_EQ(halfToFloat(0x0400), 0x1p-14f);                 // smallest normal
  EXPECT_EQ(halfToFloat(0x7BFF), 65504.0f);                 // largest finite
  EXPECT_EQ(halfToFloat(0xFC00), -INFINITY);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65519.996f), 0x7BFF);               // just below the midpoint
  EXPECT_EQ(floatToHalf(65520.0f), 0x7C00);                 // midpoint ties to even: inf
  EXPECT_EQ(floatToHalf(1e6f), 0x7C00);
  EXPECT_EQ(floatToHalf(-1e6f), 0xFC00);
  EXPECT_EQ(floatToHalf(INFINITY), 0x7C00);
  EXPECT_EQ(floatToHalf(0x1p-24f), 0x0001);
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000);                 // tie between 0 and 1 unit
  EXPECT_EQ(floatToHalf(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(floatToHalf(1.5f * 0x1p-24f), 0x0002);          // 1.5 units ties to 2
  EXPECT_EQ(floatToHalf(2.5f * 0x1p-24f), 0x0002);          // 2.5 units ties to 2
  EXPECT_EQ(floatToHalf(1023.5f * 0x1p-24f), 0x0400);       // rounds up into the normals
  EXPECT_EQ(floatToHalf(1e-10f), 0x0000);
  EXPECT_EQ(floatToHalf(-1e-10f), 0x8000);
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f), 0x3C00);          // tie, 1.0 is even
  EXPECT_EQ(floatToHalf(1.0f + 3 * 0x1p-11f), 0x3C02);      // tie, 1 + 2^-9 is even
  EXPECT_EQ(floatToHalf(std::nextafter(1.0f + 0x1p-11f, 2.0f)), 0x3C01);
  EXPECT_TRUE(std::isnan(halfToFloat(0x7E00)));
  EXPECT_TRUE(std::isnan(halfToFloat(0x7C01)));
  EXPECT_TRUE(std::signbit(halfToFloat(0xFE00)));
  EXPECT_EQ(floatToHalf(std::bit_cast<float>(0x7F800001u)) & 0x7E00, 0x7E00);  // stays NaN
  EXPECT_EQ(floatToHalf(std::bit_cast<float>(0xFFC00000u)), 0xFE00);           // sign kept
}

TEST(FloatConvert, Bf16Edges) {
  EXPECT_EQ(floatToBf16(0.0f), 0x0000);
  EXPECT_EQ(floatToBf16(-0.0f), 0x8000);
  EXPECT_EQ(bf16ToFloat(0x0001), 0x1p-133f);                // smallest subnormal
  EXPECT_EQ(bf16ToFloat(0x007F), 127 * 0x1p-133f);          // largest subnormal
  EXPECT_EQ(bf16ToFloat(0x7F7F), 0x1.FEp127f);              // largest finite
  EXPECT_EQ(floatToBf16(0x1p-133f), 0x0001);
  EXPECT_EQ(floatToBf16(0x1p-134f), 0x0000);                // tie to even 0
  EXPECT_EQ(floatToBf16(3 * 0x1p-134f), 0x0002);            // 1.5 units ties to 2
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7F80);  // overflow: inf
  EXPECT_EQ(floatToBf16(0x1.FEp127f), 0x7F7F);
  EXPECT_EQ(floatToBf16(-INFINITY), 0xFF80);
  EXPECT_EQ(floatToBf16(1.0f + 0x1p-8f), 0x3F80);           // tie, even
  EXPECT_EQ(floatToBf16(1.0f + 3 * 0x1p-8f), 0x3F82);       // tie, even
  EXPECT_EQ(floatToBf16(std::nextafter(1.0f + 0x1p-8f, 2.0f)), 0x3F81);
  // A NaN whose payload is only in the low bits must not round to infinity.
  EXPECT_EQ(floatToBf16(std::bit_cast<float>(0x7F800001u)), 0x7FC0);
  EXPECT_EQ(floatToBf16(std::bit_cast<float>(0xFFFFFFFFu)), 0xFFFF);
  EXPECT_TRUE(std::isnan(bf16ToFloat(0x7F81)));
}

TEST(FloatConvert, Fp8e4m3Edges) {
  EXPECT_EQ(floatToFp8e4m3(0.0f), 0x00);
  EXPECT_EQ(floatToFp8e4m3(-0.0f), 0x80);
  EXPECT_EQ(fp8e4m3ToFloat(0x01), 0x1p-9f);                 // smallest subnormal
  EXPECT_EQ(fp8e4m3ToFloat(0x07), 7 * 0x1p-9f);             // largest subnormal
  EXPECT_EQ(fp8e4m3ToFloat(0x08), 0x1p-6f);                 // smallest normal
  EXPECT_EQ(fp8e4m3ToFloat(0x7E), 448.0f);                  // largest finite
  EXPECT_EQ(fp8e4m3ToFloat(0x78), 256.0f);                  // exponent 15 is finite here
  EXPECT_TRUE(std::isnan(fp8e4m3ToFloat(0x7F)));
  EXPECT_TRUE(std::isnan(fp8e4m3ToFloat(0xFF)));
  EXPECT_EQ(floatToFp8e4m3(448.0f), 0x7E);
  EXPECT_EQ(floatToFp8e4m3(464.0f), 0x7E);                  // tie: 448 is even anyway
  EXPECT_EQ(floatToFp8e4m3(480.0f), 0x7E);                  // would be 480: saturates
  EXPECT_EQ(floatToFp8e4m3(1e30f), 0x7E);
  EXPECT_EQ(floatToFp8e4m3(INFINITY), 0x7E);                // no infinity: saturates
  EXPECT_EQ(floatToFp8e4m3(-INFINITY), 0xFE);
  EXPECT_EQ(floatToFp8e4m3(std::bit_cast<float>(0x7FC00000u)), 0x7F);
  EXPECT_EQ(floatToFp8e4m3(std::bit_cast<float>(0xFF800001u)), 0xFF);
  EXPECT_EQ(floatToFp8e4m3(0x1p-10f), 0x00);                // tie to even 0
  EXPECT_EQ(floatToFp8e4m3(std::nextafter(0x1p-10f, 1.0f)), 0x01);
  EXPECT_EQ(floatToFp8e4m3(3 * 0x1p-10f), 0x02);            // 1.5 units ties to 2
  EXPECT_EQ(floatToFp8e4m3(7.5f * 0x1p-9f), 0x08);          // up into the normals
  EXPECT_EQ(floatToFp8e4m3(1.0f + 0x1p-4f), 0x38);          // tie, 1.0 is even
  EXPECT_EQ(floatToFp8e4m3(1.0f + 3 * 0x1p-4f), 0x3A);      // tie, 1.25 is even
}

TEST(FloatConvert, Fp8e5m2Edges) {
  EXPECT_EQ(floatToFp8e5m2(0.0f), 0x00);
  EXPECT_EQ(floatToFp8e5m2(-0.0f), 0x80);
  EXPECT_EQ(fp8e5m2ToFloat(0x01), 0x1p-16f);                // smallest subnormal
  EXPECT_EQ(fp8e5m2ToFloat(0x03), 3 * 0x1p-16f);            // largest subnormal
  EXPECT_EQ(fp8e5m2ToFloat(0x04), 0x1p-14f);                // smallest normal
  EXPECT_EQ(fp8e5m2ToFloat(0x7B), 57344.0f);                // largest finite
  EXPECT_EQ(fp8e5m2ToFloat(0x7C), INFINITY);
  EXPECT_EQ(fp8e5m2ToFloat(0xFC), -INFINITY);
  for (uint8_t nan : {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF})
    EXPECT_TRUE(std::isnan(fp8e5m2ToFloat(nan))) << int(nan);
  EXPECT_EQ(floatToFp8e5m2(57344.0f), 0x7B);
  EXPECT_EQ(floatToFp8e5m2(61440.0f), 0x7B);                // tie toward 65536: saturates
  EXPECT_EQ(floatToFp8e5m2(1e30f), 0x7B);
  EXPECT_EQ(floatToFp8e5m2(-1e30f), 0xFB);
  EXPECT_EQ(floatToFp8e5m2(INFINITY), 0x7C);                // infinity stays infinity
  EXPECT_EQ(floatToFp8e5m2(-INFINITY), 0xFC);
  EXPECT_EQ(floatToFp8e5m2(std::bit_cast<float>(0x7FC00000u)), 0x7E);
  EXPECT_EQ(floatToFp8e5m2(std::bit_cast<float>(0xFF800001u)) & 0x7F, 0x7E);
  EXPECT_EQ(floatToFp8e5m2(0x1p-17f), 0x00);                // tie to even 0
  EXPECT_EQ(floatToFp8e5m2(3 * 0x1p-17f), 0x02);            // 1.5 units ties to 2
  EXPECT_EQ(floatToFp8e5m2(1.0f + 0x1p-3f), 0x3C);          // tie, 1.0 is even
  EXPECT_EQ(floatToFp8e5m2(1.0f + 3 * 0x1p-3f), 0x3E);      // tie, 1.5 is even
}

bool isNanPattern(DataType t, uint32_t p) {
  switch (t) {
    case DataType::Float16: return (p & 0x7C00) == 0x7C00 && (p & 0x3FF) != 0;
    case DataType::Bfloat16: return (p & 0x7F80) == 0x7F80 && (p & 0x7F) != 0;
    case DataType::Float8e4m3: return (p & 0x7F) == 0x7F;
    default: return (p & 0x7C) == 0x7C && (p & 0x3) != 0;  // e5m2
  }
}

float decodeAny(DataType t, uint32_t p) {
  switch (t) {
    case DataType::Float16: return halfToFloat(uint16_t(p));
    case DataType::Bfloat16: return bf16ToFloat(uint16_t(p));
    case DataType::Float8e4m3: return fp8e4m3ToFloat(uint8_t(p));
    default: return fp8e5m2ToFloat(uint8_t(p));
  }
}

uint32_t encodeAny(DataType t, float f) {
  switch (t) {
    case DataType::Float16: return floatToHalf(f);
    case DataType::Bfloat16: return floatToBf16(f);
    case DataType::Float8e4m3: return floatToFp8e4m3(f);
    default: return floatToFp8e5m2(f);
  }
}

class NarrowFormat : public ::testing::TestWithParam<DataType> {};

// Every pattern through float and back: non-NaN patterns exactly, NaNs stay NaNs.
TEST_P(NarrowFormat, ExhaustiveRoundTrip) {
  const DataType t = GetParam();
  const uint32_t n = dataTypeSize(t) == 2 ? 65536 : 256;
  for (uint32_t p = 0; p < n; ++p) {
    const float f = decodeAny(t, p);
    const uint32_t back = encodeAny(t, f);
    if (isNanPattern(t, p)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << p;
      EXPECT_TRUE(isNanPattern(t, back)) << std::hex << p;
      EXPECT_EQ(back >> (8 * dataTypeSize(t) - 1), p >> (8 * dataTypeSize(t) - 1)) << "sign";
    } else {
      EXPECT_EQ(back, p) << std::hex << "pattern 0x" << p << " -> " << f;
    }
  }
}

// The encoders against an independent oracle: the nearest finite value by exact (double)
// distance, ties to the even code, then the format's overflow rule. Probes every value,
// every midpoint between neighbours and the floats just either side of each, plus random
// floats.
TEST_P(NarrowFormat, EncodeIsNearestEven) {
  const DataType t = GetParam();
  const uint32_t signBit = dataTypeSize(t) == 2 ? 0x8000 : 0x80;
  std::vector<std::pair<double, uint32_t>> finite;  // non-negative finite values and codes
  for (uint32_t p = 0; p < signBit; ++p) {
    const float f = decodeAny(t, p);
    if (std::isfinite(f)) finite.push_back({double(f), p});
  }
  std::sort(finite.begin(), finite.end());
  const bool saturates = t == DataType::Float8e4m3 || t == DataType::Float8e5m2;
  const uint32_t infinity = t == DataType::Float16    ? 0x7C00
                            : t == DataType::Bfloat16 ? 0x7F80
                                                      : 0x7C;  // E5M2; unused for E4M3
  // Overflow threshold: half-way to the next power-of-two step above the largest finite.
  const double maxFinite = finite.back().first;
  const double overflowAt = maxFinite + (maxFinite - finite[finite.size() - 2].first) / 2;
  auto oracle = [&](float f) -> uint32_t {
    const uint32_t sign = std::signbit(f) ? signBit : 0;
    const double x = std::fabs(double(f));
    // Infinity stays infinity except in E4M3, which has none and saturates like overflow.
    if (std::isinf(x) && t != DataType::Float8e4m3) return sign | infinity;
    if (x >= overflowAt) return sign | (saturates ? finite.back().second : infinity);
    auto hi = std::lower_bound(finite.begin(), finite.end(), std::make_pair(x, 0u));
    if (hi == finite.end()) return sign | finite.back().second;
    if (hi->first == x || hi == finite.begin()) return sign | hi->second;
    auto lo = hi - 1;
    const double dl = x - lo->first, dh = hi->first - x;
    if (dl < dh) return sign | lo->second;
    if (dh < dl) return sign | hi->second;
    return sign | ((lo->second & 1) == 0 ? lo->second : hi->second);
  };
  auto probe = [&](float f) {
    if (std::isnan(f)) return;
    for (float g : {f, -f})
      ASSERT_EQ(encodeAny(t, g), oracle(g)) << std::hexfloat << g;
  };
  for (size_t i = 0; i < finite.size(); ++i) {
    const float v = float(finite[i].first);
    probe(v);
    const double next = i + 1 < finite.size() ? finite[i + 1].first : overflowAt;
    const float mid = float((finite[i].first + next) / 2);  // exact: few significant bits
    probe(mid);
    probe(std::nextafter(mid, 0.0f));
    probe(std::nextafter(mid, INFINITY));
  }
  probe(INFINITY);
  std::mt19937 rng(5);
  for (int i = 0; i < 200000; ++i) probe(std::bit_cast<float>(uint32_t(rng())));
}

INSTANTIATE_TEST_SUITE_P(Kernels, NarrowFormat,
                         ::testing::Values(DataType::Float16, DataType::Bfloat16,
                                           DataType::Float8e4m3, DataType::Float8e5m2),
                         [](const ::testing::TestParamInfo<DataType>& info) {
                           return std::string(dataTypeName(info.param) + 4);  // drop "nccl"
                         });

TEST(FloatConvert, Fp8TablesMatchTheDecoders) {
  for (int i = 0; i < 256; ++i) {
    EXPECT_EQ(bitsOf(kFp8e4m3ToFloat[size_t(i)]), bitsOf(fp8e4m3ToFloat(uint8_t(i))));
    EXPECT_EQ(bitsOf(kFp8e5m2ToFloat[size_t(i)]), bitsOf(fp8e5m2ToFloat(uint8_t(i))));
  }
  static_assert(floatToHalf(1.0f) == 0x3C00 && halfToFloat(0x7BFF) == 65504.0f);
  static_assert(floatToFp8e4m3(448.0f) == 0x7E && fp8e5m2ToFloat(0x7B) == 57344.0f);
}

// scale(): each element times one scalar, exactly as Prod with that scalar would compute
// it, for every type, in place or not, across the internal block boundary.
TEST(Scale, EqualsProdWithABroadcastScalar) {
  for (int t = 0; t < kNumDataTypes; ++t) {
    const DataType type = DataType(t);
    const size_t size = dataTypeSize(type);
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(4096 / size), size_t(4096 / size + 3), size_t(10007)}) {
      std::vector<std::byte> src(count * size), scalars(count * size), want(count * size), got(count * size);
      for (size_t i = 0; i < src.size(); ++i) src[i] = std::byte((i * 131 + 7) & 0x7f);
      std::byte scalar[8];
      for (size_t i = 0; i < size; ++i) scalar[i] = std::byte(0x3c + i);  // a modest value in every type
      for (size_t i = 0; i < count; ++i) std::memcpy(scalars.data() + i * size, scalar, size);
      ref::reduce(want.data(), src.data(), scalars.data(), count, type, RedOp::Prod);
      scale(got.data(), src.data(), count, type, scalar);
      EXPECT_EQ(got, want) << dataTypeName(type) << " count " << count;
      scale(src.data(), src.data(), count, type, scalar);  // in place
      EXPECT_EQ(src, want) << dataTypeName(type) << " count " << count << " in place";
    }
  }
}

}  // namespace
}  // namespace tempo::kernels
