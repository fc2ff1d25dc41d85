// ncclAllReduce through the public API, ranks as threads: every datatype x op x count x
// in-place/out-of-place, bit-exact against the independent reference of verify.h, with
// guard bytes around every buffer.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "tests/coll/coll_fixture.h"
#include "tests/common/verify.h"

namespace tempo::testing {
namespace {

struct Shape {
  size_t count;
  bool inPlace;
};

std::vector<size_t> countsFor(int n, bool full) {
  std::vector<size_t> c = {0, 1, 2, 7, size_t(n) + 1, 1021};
  if (n > 1) c.push_back(size_t(n) - 1);
  if (full) {
    c.push_back(size_t(n) * 64 - 1);
    c.push_back(4093);
    c.push_back(65537);
  }
  return c;
}

// Runs one all-reduce on every rank (threads, or a single-thread group) and checks it.
void runAndCheck(const CommWorld& w, DataType t, RedOp op, Shape s, bool grouped, uint64_t seed) {
  const int n = w.size();
  const size_t bytes = s.count * dataTypeSize(t);
  std::vector<GuardedBuffer> in, out;
  for (int r = 0; r < n; ++r) {
    in.emplace_back(bytes);
    out.emplace_back(bytes);
    fillInput(in.back().data(), s.count, t, op, r, n, seed);
  }
  GuardedBuffer want(bytes);
  expectedAllReduce(want.data(), s.count, t, op, n, seed);

  auto call = [&](int r) {
    void* src = in[size_t(r)].data();
    void* dst = s.inPlace ? src : out[size_t(r)].data();
    return ncclAllReduce(src, dst, s.count, ncclDataType_t(t), ncclRedOp_t(op), w[r], nullptr);
  };
  std::vector<ncclResult_t> res;
  if (grouped) res.assign(size_t(n), w.inGroup(call));
  else res = w.onThreads(call);

  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    ASSERT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(w[r]);
    GuardedBuffer& got = s.inPlace ? in[size_t(r)] : out[size_t(r)];
    EXPECT_EQ(countMismatches(got.data(), want.data(), s.count, t), 0u);
    EXPECT_TRUE(in[size_t(r)].guardsIntact());
    EXPECT_TRUE(out[size_t(r)].guardsIntact());
    if (!s.inPlace) {  // out-of-place must leave the input alone
      GuardedBuffer orig(bytes);
      fillInput(orig.data(), s.count, t, op, r, n, seed);
      EXPECT_EQ(countMismatches(in[size_t(r)].data(), orig.data(), s.count, t), 0u);
    }
  }
}

using Param = std::tuple<std::string, int, int>;  // transport, nranks, chunk bytes (0 = tuned)

class AllReduce : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    chunk_ = std::to_string(std::get<2>(GetParam()));
    param::overrideForTest(param::Id::ChunkSize, chunk_.c_str());
  }
  void TearDown() override { param::overrideForTest(param::Id::ChunkSize, nullptr); }
  std::string chunk_;
};

TEST_P(AllReduce, EveryTypeOpCountAndPlacementIsBitExact) {
  const auto& [transport, n, chunk] = GetParam();
  CommWorld w(n, transport);
  ASSERT_TRUE(w.ok()) << w.error();
  const bool full = transport == "loopback";
  uint64_t seed = 1;
  for (DataType t : kAllTypes) {
    for (RedOp op : kAllOps) {
      for (size_t count : countsFor(n, full)) {
        for (bool inPlace : {false, true}) {
          SCOPED_TRACE(std::string(dataTypeName(t)) + " " + redOpName(op) + " count " + std::to_string(count) +
                       (inPlace ? " in-place" : " out-of-place"));
          runAndCheck(w, t, op, {count, inPlace}, /*grouped=*/(seed & 1) != 0, seed);
          ++seed;
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

std::string name(const ::testing::TestParamInfo<Param>& p) {
  return std::get<0>(p.param) + "_" + std::to_string(std::get<1>(p.param)) + "ranks_chunk" +
         std::to_string(std::get<2>(p.param));
}

INSTANTIATE_TEST_SUITE_P(Loopback, AllReduce,
                         ::testing::Combine(::testing::Values("loopback"), ::testing::Values(1, 2, 3, 4, 5, 8),
                                            ::testing::Values(0, 192)),
                         name);
INSTANTIATE_TEST_SUITE_P(Libfabric, AllReduce,
                         ::testing::Combine(::testing::Values("shm", "tcp"), ::testing::Values(2, 3),
                                            ::testing::Values(0)),
                         name);
INSTANTIATE_TEST_SUITE_P(TempoShm, AllReduce,
                         ::testing::Combine(::testing::Values("tempo_shm"), ::testing::Values(2, 3),
                                            ::testing::Values(0)),
                         name);

// Several all-reduces on one communicator inside one group complete together, in order.
TEST(AllReduceGroup, BatchedCollectivesOnEachRankAllComplete) {
  CommWorld w(4, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  constexpr int kOps = 6;
  constexpr size_t kCount = 3001;
  std::vector<std::vector<float>> bufs(4 * kOps, std::vector<float>(kCount));
  for (int r = 0; r < 4; ++r)
    for (int k = 0; k < kOps; ++k)
      for (size_t i = 0; i < kCount; ++i) bufs[size_t(r * kOps + k)][i] = float(r + k);
  auto res = w.onThreads([&](int r) {
    ncclGroupStart();
    for (int k = 0; k < kOps; ++k) {
      float* b = bufs[size_t(r * kOps + k)].data();
      ncclAllReduce(b, b, kCount, ncclFloat32, ncclSum, w[r], nullptr);
    }
    return ncclGroupEnd();
  });
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(res[size_t(r)], ncclSuccess);
    for (int k = 0; k < kOps; ++k)
      EXPECT_EQ(bufs[size_t(r * kOps + k)][kCount - 1], float(6 + 4 * k)) << "rank " << r << " op " << k;
  }
}

// The same buffer reduced twice in one group: the second sees the first's result.
TEST(AllReduceGroup, OpsOnOneCommunicatorRunInCallOrder) {
  CommWorld w(3, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  std::vector<std::vector<int32_t>> b(3, std::vector<int32_t>(1000, 1));
  ncclResult_t res = w.inGroup([&](int r) {
    ncclResult_t a = ncclAllReduce(b[size_t(r)].data(), b[size_t(r)].data(), 1000, ncclInt32, ncclSum, w[r], nullptr);
    if (a != ncclSuccess) return a;
    return ncclAllReduce(b[size_t(r)].data(), b[size_t(r)].data(), 1000, ncclInt32, ncclSum, w[r], nullptr);
  });
  ASSERT_EQ(res, ncclSuccess);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(b[size_t(r)][999], 9);
}

// Nested groups: only the outermost ncclGroupEnd runs the batch.
TEST(AllReduceGroup, NestedGroupsRunAtTheOutermostEnd) {
  CommWorld w(2, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  std::vector<std::vector<double>> b(2, std::vector<double>(17, 2.0));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(ncclAllReduce(b[size_t(r)].data(), b[size_t(r)].data(), 17, ncclDouble, ncclProd, w[r], nullptr),
              ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(b[0][0], 2.0);  // not yet run
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(b[0][0], 4.0);
  EXPECT_EQ(b[1][16], 4.0);
}

// Inits queued in a group run concurrently at ncclGroupEnd, from one thread.
TEST(CommInit, InitRankInsideAGroupFromOneThread) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  constexpr int kRanks = 3;
  ncclComm_t comms[kRanks] = {};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(ncclCommInitRank(&comms[r], kRanks, id, r), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < kRanks; ++r) {
    int rank = -1, count = -1;
    ASSERT_EQ(ncclCommUserRank(comms[r], &rank), ncclSuccess);
    ASSERT_EQ(ncclCommCount(comms[r], &count), ncclSuccess);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(count, kRanks);
  }
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// ncclCommInitRankScalable with several ids (made by different "ranks"), all ranks passing
// the same array: the communicator forms and reduces.
TEST(CommInit, InitRankScalableWithSeveralIds) {
  constexpr int kRanks = 4, kIds = 2;
  ncclUniqueId ids[kIds];
  for (ncclUniqueId& id : ids) ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comms[kRanks] = {};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r)
    ASSERT_EQ(ncclCommInitRankScalable(&comms[r], kRanks, r, kIds, ids, nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  float x[kRanks] = {1, 2, 3, 4};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) ncclAllReduce(&x[r], &x[r], 1, ncclFloat32, ncclSum, comms[r], nullptr);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (float v : x) EXPECT_EQ(v, 10.0f);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  ncclComm_t c;
  EXPECT_EQ(ncclCommInitRankScalable(&c, 2, 0, 0, ids, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommInitRankScalable(&c, 2, 0, 1, nullptr, nullptr), ncclInvalidArgument);
}

TEST(CommInit, FinalizeThenDestroyAndQueries) {
  CommWorld w(2, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  int dev = -1;
  ASSERT_EQ(ncclCommCuDevice(w[1], &dev), ncclSuccess);
  EXPECT_EQ(dev, 1);  // ncclCommInitAll with no devlist numbers devices 0..n-1
  ncclResult_t async = ncclInternalError;
  ASSERT_EQ(ncclCommGetAsyncError(w[0], &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);
  auto res = w.onThreads([&](int r) { return ncclCommFinalize(w[r]); });
  for (ncclResult_t r : res) EXPECT_EQ(r, ncclSuccess);
  EXPECT_EQ(ncclCommFinalize(w[0]), ncclInvalidUsage) << "a second finalize is misuse";
}

}  // namespace
}  // namespace tempo::testing

namespace tempo::testing {
namespace {

// A pooled op keeps its last plan for the next call with the same collective, count,
// datatype, op, root and placement. Calls that differ in one of them only (the root, the
// placement, the op) and repeated calls alike must each get their own plan's result.
TEST(PlanReuse, CallsThatDifferInOneArgumentEachGetTheirOwnPlan) {
  constexpr int kRanks = 3;
  constexpr size_t kCount = 37;
  CommWorld w(kRanks, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  std::vector<std::vector<int32_t>> in(kRanks, std::vector<int32_t>(kCount)), out = in;
  for (int round = 0; round < 3; ++round) {
    for (int root = 0; root < kRanks; ++root) {
      auto res = w.onThreads([&](int r) {
        for (size_t i = 0; i < kCount; ++i) in[size_t(r)][i] = int32_t(r * 1000 + i);
        return ncclBroadcast(in[size_t(r)].data(), out[size_t(r)].data(), kCount, ncclInt32, root, w[r], nullptr);
      });
      for (int r = 0; r < kRanks; ++r) {
        ASSERT_EQ(res[size_t(r)], ncclSuccess);
        EXPECT_EQ(out[size_t(r)][kCount - 1], int32_t(root * 1000 + kCount - 1)) << "root " << root << " rank " << r;
      }
    }
    for (ncclRedOp_t op : {ncclSum, ncclMax, ncclSum}) {
      for (bool inPlace : {true, false, true}) {
        auto res = w.onThreads([&](int r) {
          for (size_t i = 0; i < kCount; ++i) in[size_t(r)][i] = int32_t(r + 1);
          int32_t* dst = inPlace ? in[size_t(r)].data() : out[size_t(r)].data();
          return ncclAllReduce(in[size_t(r)].data(), dst, kCount, ncclInt32, op, w[r], nullptr);
        });
        for (int r = 0; r < kRanks; ++r) {
          ASSERT_EQ(res[size_t(r)], ncclSuccess);
          const int32_t got = (inPlace ? in : out)[size_t(r)][kCount - 1];
          EXPECT_EQ(got, op == ncclSum ? 6 : 3) << "op " << op << " in place " << inPlace << " rank " << r;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tempo::testing
