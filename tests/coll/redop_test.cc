// ncclRedOpCreatePreMulSum / ncclRedOpDestroy and ncclAllReduceWithBias.
//
// PreMulSum: each rank's input is multiplied by that rank's own scalar, then summed
// (all-reduce, reduce and reduce-scatter). A host-immediate scalar is copied at creation;
// a device-resident one is read when the collective runs. An op belongs to the
// communicator and datatype it was created for. AllReduceWithBias combines a
// count-element array into the reduced result with the op.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/coll/coll_fixture.h"

namespace tempo::testing {
namespace {

constexpr int kRanks = 4;

float in(int rank, size_t i) { return float((rank + 1) * 3 + int(i % 17)); }

// Element type traits for the tests' small exact integers.
template <class T>
T make(float v) {
  return T(v);
}
template <>
uint16_t make<uint16_t>(float v) {  // fp16: the integers used here are exact in half
  uint32_t b;
  std::memcpy(&b, &v, 4);
  const int exp = int((b >> 23) & 0xff) - 127 + 15;
  return v == 0 ? 0 : uint16_t(((b >> 16) & 0x8000) | (uint32_t(exp) << 10) | ((b >> 13) & 0x3ff));
}

template <class T>
void preMulSumAllCollectives(ncclDataType_t type, const std::string& transport) {
  CommWorld w(kRanks, transport);
  ASSERT_TRUE(w.ok()) << w.error();
  const size_t count = 1000;  // several chunks with a small chunk size would be nicer; any size is exact here
  std::vector<T> scalar(kRanks);
  std::vector<ncclRedOp_t> op(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    scalar[size_t(r)] = make<T>(float(r + 1));
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&op[size_t(r)], &scalar[size_t(r)], type, ncclScalarHostImmediate, w[r]),
              ncclSuccess);
    EXPECT_GE(int(op[size_t(r)]), int(ncclNumOps));
  }
  // The expected value of element i: sum over ranks of (rank + 1) * in(rank, i).
  auto want = [](size_t i) {
    float s = 0;
    for (int r = 0; r < kRanks; ++r) s += float(r + 1) * in(r, i);
    return s;
  };
  for (bool inPlace : {false, true}) {
    SCOPED_TRACE(inPlace ? "in place" : "out of place");
    std::vector<std::vector<T>> send(kRanks), recv(kRanks);
    // All-reduce.
    for (int r = 0; r < kRanks; ++r) {
      send[size_t(r)].resize(count);
      for (size_t i = 0; i < count; ++i) send[size_t(r)][i] = make<T>(in(r, i));
      recv[size_t(r)].assign(count, make<T>(-1));
    }
    auto res = w.onThreads([&](int r) {
      T* out = inPlace ? send[size_t(r)].data() : recv[size_t(r)].data();
      return ncclAllReduce(send[size_t(r)].data(), out, count, type, op[size_t(r)], w[r], nullptr);
    });
    for (int r = 0; r < kRanks; ++r) ASSERT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(w[r]);
    for (int r = 0; r < kRanks; ++r) {
      const std::vector<T>& out = inPlace ? send[size_t(r)] : recv[size_t(r)];
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[i], make<T>(want(i))) << "all-reduce rank " << r << " i " << i;
    }
    // Reduce to rank 2.
    for (int r = 0; r < kRanks; ++r) {
      for (size_t i = 0; i < count; ++i) send[size_t(r)][i] = make<T>(in(r, i));
      recv[size_t(r)].assign(count, make<T>(-1));
    }
    res = w.onThreads([&](int r) {
      T* out = inPlace ? send[size_t(r)].data() : recv[size_t(r)].data();
      return ncclReduce(send[size_t(r)].data(), out, count, type, op[size_t(r)], 2, w[r], nullptr);
    });
    for (int r = 0; r < kRanks; ++r) ASSERT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(w[r]);
    const std::vector<T>& root = inPlace ? send[2] : recv[2];
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(root[i], make<T>(want(i))) << "reduce i " << i;
    // Reduce-scatter: rank r receives block r of the premultiplied sum.
    for (int r = 0; r < kRanks; ++r) {
      send[size_t(r)].resize(count * kRanks);
      for (size_t i = 0; i < count * kRanks; ++i) send[size_t(r)][i] = make<T>(in(r, i));
      recv[size_t(r)].assign(count, make<T>(-1));
    }
    res = w.onThreads([&](int r) {
      T* out = inPlace ? send[size_t(r)].data() + size_t(r) * count : recv[size_t(r)].data();
      return ncclReduceScatter(send[size_t(r)].data(), out, count, type, op[size_t(r)], w[r], nullptr);
    });
    for (int r = 0; r < kRanks; ++r) ASSERT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(w[r]);
    for (int r = 0; r < kRanks; ++r) {
      const T* out = inPlace ? send[size_t(r)].data() + size_t(r) * count : recv[size_t(r)].data();
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(out[i], make<T>(want(size_t(r) * count + i))) << "reduce-scatter rank " << r << " i " << i;
    }
  }
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(ncclRedOpDestroy(op[size_t(r)], w[r]), ncclSuccess);
}

TEST(PreMulSum, Float32AllCollectives) { preMulSumAllCollectives<float>(ncclFloat32, "loopback"); }
TEST(PreMulSum, Int32AllCollectives) { preMulSumAllCollectives<int32_t>(ncclInt32, "loopback"); }
TEST(PreMulSum, Float64AllCollectivesOverTcp) { preMulSumAllCollectives<double>(ncclFloat64, "tcp"); }
TEST(PreMulSum, Float16AllCollectives) { preMulSumAllCollectives<uint16_t>(ncclFloat16, "loopback"); }

// A host-immediate scalar is the value at creation; a device-resident one is read when the
// collective runs.
TEST(PreMulSum, ScalarResidence) {
  CommWorld w(2, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  float immediate[2] = {2, 2}, resident[2] = {2, 2};
  ncclRedOp_t opI[2], opD[2];
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&opI[r], &immediate[r], ncclFloat32, ncclScalarHostImmediate, w[r]), ncclSuccess);
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&opD[r], &resident[r], ncclFloat32, ncclScalarDevice, w[r]), ncclSuccess);
    EXPECT_NE(opI[r], opD[r]);
  }
  immediate[0] = immediate[1] = 10;  // too late: copied at creation
  resident[0] = resident[1] = 10;    // read at each use
  float x[2] = {1, 2}, y[2] = {1, 2};
  auto res = w.onThreads([&](int r) {
    ncclResult_t e = ncclAllReduce(&x[r], &x[r], 1, ncclFloat32, opI[r], w[r], nullptr);
    return e != ncclSuccess ? e : ncclAllReduce(&y[r], &y[r], 1, ncclFloat32, opD[r], w[r], nullptr);
  });
  for (int r = 0; r < 2; ++r) ASSERT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(w[r]);
  EXPECT_EQ(x[0], 6.0f);
  EXPECT_EQ(x[1], 6.0f);
  EXPECT_EQ(y[0], 30.0f);
  EXPECT_EQ(y[1], 30.0f);
}

TEST(PreMulSum, OperatorsBelongToTheirCommunicatorAndDatatype) {
  CommWorld a(1, "loopback"), b(1, "loopback");
  ASSERT_TRUE(a.ok() && b.ok());
  double s = 3;
  ncclRedOp_t op;
  float x = 1;
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &s, ncclFloat64, ncclScalarHostImmediate, a[0]), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, op, a[0], nullptr), ncclInvalidArgument);  // created for double
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("created for ncclFloat64"), std::string::npos);
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat64, op, b[0], nullptr), ncclInvalidArgument);  // another comm's
  double d = 2;
  ASSERT_EQ(ncclAllReduce(&d, &d, 1, ncclFloat64, op, a[0], nullptr), ncclSuccess);
  EXPECT_EQ(d, 6.0);
  EXPECT_EQ(ncclRedOpDestroy(op, b[0]), ncclInvalidArgument);
  EXPECT_EQ(ncclRedOpDestroy(ncclSum, a[0]), ncclInvalidArgument);
  EXPECT_EQ(ncclRedOpDestroy(op, a[0]), ncclSuccess);
  EXPECT_EQ(ncclRedOpDestroy(op, a[0]), ncclInvalidArgument);  // twice
  EXPECT_EQ(ncclAllReduce(&d, &d, 1, ncclFloat64, op, a[0], nullptr), ncclInvalidArgument);  // destroyed
  // Bad arguments at creation.
  EXPECT_EQ(ncclRedOpCreatePreMulSum(nullptr, &s, ncclFloat64, ncclScalarHostImmediate, a[0]), ncclInvalidArgument);
  EXPECT_EQ(ncclRedOpCreatePreMulSum(&op, nullptr, ncclFloat64, ncclScalarHostImmediate, a[0]), ncclInvalidArgument);
  EXPECT_EQ(ncclRedOpCreatePreMulSum(&op, &s, ncclDataType_t(99), ncclScalarHostImmediate, a[0]), ncclInvalidArgument);
  EXPECT_EQ(ncclRedOpCreatePreMulSum(&op, &s, ncclFloat64, ncclScalarResidence_t(7), a[0]), ncclInvalidArgument);
  EXPECT_EQ(ncclRedOpCreatePreMulSum(&op, &s, ncclFloat64, ncclScalarHostImmediate, nullptr), ncclInvalidArgument);
}

// One rank calling PreMulSum where the others call Sum is a mismatch like any other.
TEST(PreMulSum, MixedWithSumAcrossRanksIsAMismatch) {
  CommWorld w(2, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  float s = 2, x[2] = {1, 2};
  ncclRedOp_t op;
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &s, ncclFloat32, ncclScalarHostImmediate, w[1]), ncclSuccess);
  auto res = w.onThreads([&](int r) {
    return ncclAllReduce(&x[r], &x[r], 1, ncclFloat32, r == 1 ? op : ncclSum, w[r], nullptr);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(res[size_t(r)], ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(w[r])).find("ncclPreMulSum"), std::string::npos) << ncclGetLastError(w[r]);
  }
}

TEST(AllReduceWithBias, TheBiasIsCombinedIntoTheResultWithTheOp) {
  CommWorld w(kRanks, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  const size_t count = 777;
  std::vector<float> bias(count);
  for (size_t i = 0; i < count; ++i) bias[i] = float(i % 5) - 2;
  struct Case {
    ncclRedOp_t op;
    bool inPlace;
  };
  for (Case c : {Case{ncclSum, false}, Case{ncclSum, true}, Case{ncclMax, false}, Case{ncclAvg, true}}) {
    SCOPED_TRACE(std::to_string(int(c.op)) + (c.inPlace ? " in place" : ""));
    std::vector<std::vector<float>> send(kRanks, std::vector<float>(count)), recv(kRanks, std::vector<float>(count, -7));
    for (int r = 0; r < kRanks; ++r)
      for (size_t i = 0; i < count; ++i) send[size_t(r)][i] = in(r, i);
    auto res = w.onThreads([&](int r) {
      float* out = c.inPlace ? send[size_t(r)].data() : recv[size_t(r)].data();
      return ncclAllReduceWithBias(send[size_t(r)].data(), out, count, ncclFloat32, c.op, w[r], nullptr, bias.data());
    });
    for (int r = 0; r < kRanks; ++r) ASSERT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(w[r]);
    for (int r = 0; r < kRanks; ++r) {
      const std::vector<float>& out = c.inPlace ? send[size_t(r)] : recv[size_t(r)];
      for (size_t i = 0; i < count; ++i) {
        float sum = 0, mx = in(0, i);
        for (int q = 0; q < kRanks; ++q) {
          sum += in(q, i);
          mx = std::max(mx, in(q, i));
        }
        const float want = c.op == ncclSum ? sum + bias[i] : c.op == ncclMax ? std::max(mx, bias[i]) : sum / kRanks + bias[i];
        ASSERT_EQ(out[i], want) << "rank " << r << " i " << i;
      }
    }
  }
  // A NULL bias is a plain all-reduce; NULL buffers with a count are refused as usual.
  float x[kRanks] = {1, 2, 3, 4};
  auto res = w.onThreads([&](int r) {
    return ncclAllReduceWithBias(&x[r], &x[r], 1, ncclFloat32, ncclSum, w[r], nullptr, nullptr);
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(res[size_t(r)], ncclSuccess);
  for (float v : x) EXPECT_EQ(v, 10.0f);
  EXPECT_EQ(ncclAllReduceWithBias(nullptr, x, 1, ncclFloat32, ncclSum, w[0], nullptr, bias.data()), ncclInvalidArgument);
}

}  // namespace
}  // namespace tempo::testing
