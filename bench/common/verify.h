// Validation data for the perf tools, in the spirit of nccl-tests' "verifiable" inputs:
// every rank's input element is a pure function of (seed, element index, rank, dtype, op),
// chosen so that the reduction over all ranks is exact whatever order the library combines
// in, and has a closed form, so the expected value of one element costs O(1) instead of
// O(nranks) and no expected buffer is needed. This module never calls the library.
//
// The inputs, per op (n = nranks; "active" ranks are a window of K consecutive ranks
// starting at a per-element rank j, the others contribute the identity):
//  - sum, avg, mulsum: active rank k (0 <= k < K) holds a + k*b, small integers scaled by 2^-q
//    (q in 0..3) for floating types, with K*max|a + k*b| <= B, B = 2^precision (half 2^11,
//    bfloat16 2^8, f8e4m3 2^4, f8e5m2 2^3, float 2^24, double 2^53) or the integer type's
//    range, so every partial sum is exact; K = min(n, a per-type cap). avg is the exact sum
//    divided by n: integers with C's truncating division, double in double, every other
//    floating type as a float division rounded once (to nearest even) to the type.
//    mulsum (PreMulSum) weighs rank r's input by preMulScalar(r) = 1 or 2 before summing,
//    with half the bound per input, so it is exact too; its check costs O(K).
//  - prod: active rank k holds +-1 or +-2 (signs only for signed types), K = min(n, 4..16)
//    so the product is +-2^t and representable.
//  - max, min: one rank j holds a value on one side of a per-element threshold T and all
//    others arbitrary values on the other side, so the result is rank j's value. Floating
//    values are arbitrary finite bit patterns (never NaN, never -0).
// Results are compared bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tempo::bench {

struct DataSpec {
  int type = 0;       // ncclDataType_t
  int op = 0;         // ncclRedOp_t (sum..avg) or kMulSum
  int nranks = 1;
  uint64_t seed = 0;
};

// The scalar rank r's PreMulSum multiplies its input by, as nccl-tests: 1 + r % 2.
inline int preMulScalar(int rank) { return 1 + rank % 2; }
// Bits of the integer v (exactly representable) in `type`: a PreMulSum scalar's encoding.
uint64_t valueBits(int type, int64_t v);

// Bits of rank's input element e (in the low typeSize bytes).
uint64_t inputBits(const DataSpec& d, size_t e, int rank);
// Bits of the reduction over ranks 0..n-1 of element e.
uint64_t reducedBits(const DataSpec& d, size_t e);

// buf[i] = rank's input element offset+i, for i in [0, count).
void prepareInput(void* buf, size_t count, size_t offset, const DataSpec& d, int rank);
// Number of i in [0, count) where buf[i] differs from the reduction of element offset+i.
int64_t countWrongReduced(const void* buf, size_t count, size_t offset, const DataSpec& d);
// Number of i in [0, count) where buf[i] differs from rank's input element offset+i.
int64_t countWrongInput(const void* buf, size_t count, size_t offset, const DataSpec& d, int rank);

// Seed of one validation pass, so consecutive passes use different data.
uint64_t makeSeed(int type, int op, int root, size_t bytes, int rep, int inPlace);

// Guard canaries around the bytes a collective may touch.
constexpr size_t kGuardBytes = 64;
void fillGuard(void* p, size_t bytes, uint8_t salt);
// Number of bytes of [p, p+bytes) that no longer hold fillGuard's pattern.
int64_t guardDamage(const void* p, size_t bytes, uint8_t salt);

}  // namespace tempo::bench
