// The perf tools' validation data (bench/common/verify.h): for every datatype, op (mulsum
// included) and rank count, the closed-form result the tools check against is exactly what
// reducing the ranks' inputs with the reference reducer gives, in rank order (for mulsum:
// each input first multiplied by its rank's scalar, as ncclRedOpCreatePreMulSum does).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "bench/common/types.h"
#include "bench/common/verify.h"
#include "kernels/reduce.h"

namespace tempo::bench {
namespace {

constexpr int kRankCounts[] = {1, 2, 3, 5, 8, 17};
constexpr size_t kElements = 300;

// What the library computes for one element: each rank's input (premultiplied by its
// scalar for mulsum) combined in rank order, then divided by n for avg.
uint64_t reduceInputs(const DataSpec& d, size_t e) {
  const auto type = DataType(d.type);
  const RedOp op = d.op == kMulSum || d.op == ncclAvg ? RedOp::Sum : RedOp(d.op);
  uint64_t acc = 0, in = 0;
  for (int r = 0; r < d.nranks; ++r) {
    in = inputBits(d, e, r);
    if (d.op == kMulSum) {
      const uint64_t scalar = valueBits(d.type, preMulScalar(r));
      kernels::scale(&in, &in, 1, type, &scalar);
    }
    if (r == 0) acc = in;
    else kernels::ref::reduce(&acc, &acc, &in, 1, type, op);
  }
  if (d.op == ncclAvg) kernels::ref::divide(&acc, &acc, 1, type, uint64_t(d.nranks));
  const size_t bytes = typeSize(d.type);
  return bytes == 8 ? acc : acc & ((uint64_t(1) << (8 * bytes)) - 1);
}

TEST(BenchVerify, ExpectedResultIsTheReductionOfTheInputs) {
  for (int type = 0; type < kNumTypes; ++type)
    for (int op = 0; op < kNumOps; ++op)
      for (int n : kRankCounts) {
        const DataSpec d{type, op, n, makeSeed(type, op, 0, 4096, 1, 0)};
        for (size_t e = 0; e < kElements; ++e)
          ASSERT_EQ(reduceInputs(d, e), reducedBits(d, e))
              << typeName(type) << " " << opName(op) << " nranks " << n << " element " << e;
      }
}

}  // namespace
}  // namespace tempo::bench
