// ncclCommSplit: ranks that pass the same color form a new communicator, ordered by key
// (ties by parent rank); NCCL_SPLIT_NOCOLOR gives NULL; the children and the parent all
// keep working.
#include <gtest/gtest.h>

#include <vector>

#include "tests/coll/coll_fixture.h"

namespace tempo::testing {
namespace {

TEST(CommSplit, ColorsFormCommunicatorsRankedByKey) {
  constexpr int kRanks = 6;
  CommWorld w(kRanks, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  std::vector<ncclComm_t> child(kRanks, nullptr);
  // Even and odd parent ranks split; keys reverse the order; rank 5 opts out.
  auto res = w.onThreads([&](int r) {
    int color = r == 5 ? NCCL_SPLIT_NOCOLOR : r % 2;
    return ncclCommSplit(w[r], color, -r, &child[size_t(r)], nullptr);
  });
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(w[r]);
  ASSERT_EQ(child[5], nullptr);
  // Color 0: parents 0, 2, 4 (keys 0, -2, -4) -> child ranks 2, 1, 0; color 1: parents 1, 3 -> 1, 0.
  const int wantRank[] = {2, 1, 1, 0, 0}, wantSize[] = {3, 2, 3, 2, 3};
  for (int r = 0; r < 5; ++r) {
    int rank = -1, size = -1;
    ASSERT_EQ(ncclCommUserRank(child[size_t(r)], &rank), ncclSuccess);
    ASSERT_EQ(ncclCommCount(child[size_t(r)], &size), ncclSuccess);
    EXPECT_EQ(rank, wantRank[r]) << "parent rank " << r;
    EXPECT_EQ(size, wantSize[r]) << "parent rank " << r;
  }
  // Each child reduces over its own members only, while the parent still reduces over all.
  std::vector<float> x(kRanks), y(kRanks);
  res = w.onThreads([&](int r) {
    x[size_t(r)] = float(r);
    ncclResult_t e = r == 5 ? ncclSuccess
                            : ncclAllReduce(&x[size_t(r)], &x[size_t(r)], 1, ncclFloat32, ncclSum, child[size_t(r)], nullptr);
    y[size_t(r)] = 1.0f;
    if (e == ncclSuccess) e = ncclAllReduce(&y[size_t(r)], &y[size_t(r)], 1, ncclFloat32, ncclSum, w[r], nullptr);
    return e;
  });
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(w[r]);
  for (int r : {0, 2, 4}) EXPECT_EQ(x[size_t(r)], 6.0f);
  for (int r : {1, 3}) EXPECT_EQ(x[size_t(r)], 4.0f);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(y[size_t(r)], float(kRanks));
  for (int r = 0; r < 5; ++r) EXPECT_EQ(ncclCommDestroy(child[size_t(r)]), ncclSuccess);
}

// One thread splitting every rank's communicator inside a group: the splits run together
// at ncclGroupEnd.
TEST(CommSplit, InsideAGroupFromOneThread) {
  constexpr int kRanks = 4;
  CommWorld w(kRanks, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  std::vector<ncclComm_t> child(kRanks, nullptr);
  ASSERT_EQ(w.inGroup([&](int r) { return ncclCommSplit(w[r], r / 2, r, &child[size_t(r)], nullptr); }), ncclSuccess)
      << ncclGetLastError(nullptr);
  float x[kRanks] = {1, 2, 3, 4};
  ASSERT_EQ(w.inGroup([&](int r) { return ncclAllReduce(&x[r], &x[r], 1, ncclFloat32, ncclSum, child[size_t(r)], nullptr); }),
            ncclSuccess);
  EXPECT_EQ(x[0], 3.0f);
  EXPECT_EQ(x[1], 3.0f);
  EXPECT_EQ(x[2], 7.0f);
  EXPECT_EQ(x[3], 7.0f);
  for (ncclComm_t c : child) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

TEST(CommSplit, BadArgumentsAreRefused) {
  CommWorld w(1, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  ncclComm_t out;
  EXPECT_EQ(ncclCommSplit(w[0], 0, 0, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommSplit(w[0], -7, 0, &out, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommSplit(nullptr, 0, 0, &out, nullptr), ncclInvalidArgument);
  // A single rank may split itself.
  ASSERT_EQ(ncclCommSplit(w[0], 3, 0, &out, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  int n = 0;
  EXPECT_EQ(ncclCommCount(out, &n), ncclSuccess);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(ncclCommDestroy(out), ncclSuccess);
}

}  // namespace
}  // namespace tempo::testing
