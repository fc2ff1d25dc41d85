// Verifiable inputs and independently computed expected results for collective tests.
//
// Inputs are chosen, per (datatype, op, rank, element), so that the exact result is
// representable in the type and does not depend on the order in which ranks are
// combined (as nccl-tests does): small non-negative integers for sum and average (sparse
// ones when the type's exact-integer range is smaller than the rank count), a single
// factor of two per element for products, and small signed integers for max/min. The
// expected output is computed in 64-bit integer or double arithmetic and converted once,
// so it shares nothing with the library's reducers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/float_convert.h"
#include "src/core/dtype.h"

namespace tempo::testing {

inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Largest integer up to which every integer is exactly representable.
inline int64_t exactIntegerLimit(DataType t) {
  switch (t) {
    case DataType::Float16: return 2048;
    case DataType::Bfloat16: return 256;
    case DataType::Float8e4m3: return 16;
    case DataType::Float8e5m2: return 8;
    case DataType::Float32: return int64_t(1) << 24;
    case DataType::Float64: return int64_t(1) << 53;
    case DataType::Int8: case DataType::Uint8: return 127;
    default: return int64_t(1) << 30;
  }
}

// The abstract (exact) input value of `rank` at element `i`.
inline int64_t inputValue(DataType t, RedOp op, int rank, int nranks, uint64_t i, uint64_t seed) {
  uint64_t h = mix(seed ^ (uint64_t(rank) << 40) ^ i);
  switch (op) {
    case RedOp::Prod:
      return (i + seed) % uint64_t(nranks) == uint64_t(rank) ? 2 : 1;
    case RedOp::Max:
    case RedOp::Min: {
      bool isUnsigned = t == DataType::Uint8 || t == DataType::Uint32 || t == DataType::Uint64;
      return isUnsigned ? int64_t(h % 17) : int64_t(h % 17) - 8;
    }
    case RedOp::Sum:
    case RedOp::Avg:
    default: {
      int64_t limit = exactIntegerLimit(t);
      if (nranks <= limit) {
        int64_t k = std::min<int64_t>(limit / nranks + 1, 1000);  // values in [0, k)
        return int64_t(h % uint64_t(k));
      }
      int64_t stride = (nranks + limit - 1) / limit;  // at most `limit` ones per element
      return (int64_t(i) + rank) % stride == 0 ? 1 : 0;
    }
  }
}

// The exact combined value over all ranks (before averaging).
inline int64_t combined(DataType t, RedOp op, int nranks, uint64_t i, uint64_t seed) {
  int64_t acc = inputValue(t, op, 0, nranks, i, seed);
  for (int r = 1; r < nranks; ++r) {
    int64_t v = inputValue(t, op, r, nranks, i, seed);
    switch (op) {
      case RedOp::Prod: acc *= v; break;
      case RedOp::Max: acc = v > acc ? v : acc; break;
      case RedOp::Min: acc = v < acc ? v : acc; break;
      default: acc += v; break;
    }
  }
  return acc;
}

// Stores `v` (or v / divisor for an average) as element i of a buffer of type t.
inline void storeValue(void* buf, uint64_t i, DataType t, int64_t v, int divisor) {
  using namespace tempo::kernels;
  auto* p = static_cast<unsigned char*>(buf);
  float fq = divisor > 1 ? float(v) / float(divisor) : float(v);
  switch (t) {
    case DataType::Int8: { int8_t x = int8_t(v / divisor); memcpy(p + i, &x, 1); break; }
    case DataType::Uint8: { uint8_t x = uint8_t(uint64_t(v) / uint64_t(divisor)); memcpy(p + i, &x, 1); break; }
    case DataType::Int32: { int32_t x = int32_t(v / divisor); memcpy(p + 4 * i, &x, 4); break; }
    case DataType::Uint32: { uint32_t x = uint32_t(uint64_t(v) / uint64_t(divisor)); memcpy(p + 4 * i, &x, 4); break; }
    case DataType::Int64: { int64_t x = v / divisor; memcpy(p + 8 * i, &x, 8); break; }
    case DataType::Uint64: { uint64_t x = uint64_t(v) / uint64_t(divisor); memcpy(p + 8 * i, &x, 8); break; }
    case DataType::Float16: { uint16_t x = floatToHalf(fq); memcpy(p + 2 * i, &x, 2); break; }
    case DataType::Bfloat16: { uint16_t x = floatToBf16(fq); memcpy(p + 2 * i, &x, 2); break; }
    case DataType::Float32: { memcpy(p + 4 * i, &fq, 4); break; }
    case DataType::Float64: {
      double x = divisor > 1 ? double(v) / double(divisor) : double(v);
      memcpy(p + 8 * i, &x, 8);
      break;
    }
    case DataType::Float8e4m3: { uint8_t x = floatToFp8e4m3(fq); memcpy(p + i, &x, 1); break; }
    case DataType::Float8e5m2: { uint8_t x = floatToFp8e5m2(fq); memcpy(p + i, &x, 1); break; }
  }
}

inline void fillInput(void* buf, size_t count, DataType t, RedOp op, int rank, int nranks, uint64_t seed) {
  for (size_t i = 0; i < count; ++i) storeValue(buf, i, t, inputValue(t, op, rank, nranks, i, seed), 1);
}

inline void expectedAllReduce(void* out, size_t count, DataType t, RedOp op, int nranks, uint64_t seed) {
  for (size_t i = 0; i < count; ++i)
    storeValue(out, i, t, combined(t, op, nranks, i, seed), op == RedOp::Avg ? nranks : 1);
}

// Number of elements whose bytes differ.
inline size_t countMismatches(const void* got, const void* want, size_t count, DataType t) {
  size_t sz = dataTypeSize(t), bad = 0;
  auto* a = static_cast<const unsigned char*>(got);
  auto* b = static_cast<const unsigned char*>(want);
  for (size_t i = 0; i < count; ++i) bad += memcmp(a + i * sz, b + i * sz, sz) != 0;
  return bad;
}

// A buffer with guard bytes on both sides, to catch out-of-bounds writes.
class GuardedBuffer {
 public:
  static constexpr size_t kGuard = 256;
  static constexpr unsigned char kPattern = 0xA5;
  explicit GuardedBuffer(size_t bytes) : bytes_(bytes), storage_(bytes + 2 * kGuard, kPattern) {}
  void* data() { return storage_.data() + kGuard; }
  size_t bytes() const { return bytes_; }
  // The whole storage, guards included (for tests that mirror it elsewhere).
  unsigned char* raw() { return storage_.data(); }
  size_t rawBytes() const { return storage_.size(); }
  bool guardsIntact() const {
    for (size_t i = 0; i < kGuard; ++i)
      if (storage_[i] != kPattern || storage_[kGuard + bytes_ + i] != kPattern) return false;
    return true;
  }

 private:
  size_t bytes_;
  std::vector<unsigned char> storage_;
};

inline constexpr DataType kAllTypes[] = {
    DataType::Int8,    DataType::Uint8,   DataType::Int32,   DataType::Uint32,
    DataType::Int64,   DataType::Uint64,  DataType::Float16, DataType::Float32,
    DataType::Float64, DataType::Bfloat16, DataType::Float8e4m3, DataType::Float8e5m2};
inline constexpr RedOp kAllOps[] = {RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min, RedOp::Avg};

}  // namespace tempo::testing
