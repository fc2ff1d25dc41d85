// ncclCommShrink, ncclCommRevoke, ncclCommGrow (with ncclCommGetUniqueId) and
// ncclCommSuspend/Resume/MemStats: the communicator operations for changing membership
// and pausing a job, with the semantics NCCL 2.27-2.29 defines for them.
//
// Shrink: the ranks not excluded call it and form a new communicator ranked in parent
// order; the excluded ranks take no part (they may be dead). NCCL_SHRINK_ABORT first stops
// what the parent has in flight. Revoke: in-flight work stops, new work and finalize fail
// with ncclInvalidUsage, a second revoke with ncclInvalidArgument; the communicator can
// still be shrunk and destroyed. Grow: existing ranks keep their ranks, new ranks join
// with the id ncclCommGetUniqueId made.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/coll/coll_fixture.h"

namespace tempo::testing {
namespace {

// Sums `value` over `comm` in place; returns the result code.
ncclResult_t sumOne(float* value, ncclComm_t comm) {
  return ncclAllReduce(value, value, 1, ncclFloat32, ncclSum, comm, nullptr);
}

int rankOf(ncclComm_t c) {
  int r = -1;
  return ncclCommUserRank(c, &r) == ncclSuccess ? r : -1;
}
int sizeOf(ncclComm_t c) {
  int n = -1;
  return ncclCommCount(c, &n) == ncclSuccess ? n : -1;
}

// Sums in[r] over the communicators comms[r] (one thread each), expects `want` on every
// rank, and destroys them.
void expectSumThenDestroy(const std::vector<ncclComm_t>& comms, std::vector<float> in, float want) {
  auto res = runOnThreads(int(comms.size()), [&](int r) { return sumOne(&in[size_t(r)], comms[size_t(r)]); });
  for (size_t r = 0; r < comms.size(); ++r) {
    EXPECT_EQ(res[r], ncclSuccess) << "rank " << r << ": " << ncclGetLastError(comms[r]);
    EXPECT_EQ(in[r], want) << "rank " << r;
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
  }
}

TEST(CommShrink, SurvivorsFormACommunicatorInParentOrder) {
  constexpr int kRanks = 5;
  CommWorld w(kRanks, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  int excluded[] = {3, 1};  // any order
  std::vector<ncclComm_t> child(kRanks, nullptr);
  auto res = w.onThreads([&](int r) {
    if (r == 1 || r == 3) return ncclSuccess;  // excluded ranks do not call shrink
    return ncclCommShrink(w[r], excluded, 2, &child[size_t(r)], nullptr, NCCL_SHRINK_DEFAULT);
  });
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(res[size_t(r)], ncclSuccess) << r << ": " << ncclGetLastError(w[r]);
  const int wantRank[] = {0, -1, 1, -1, 2};
  for (int r : {0, 2, 4}) {
    EXPECT_EQ(rankOf(child[size_t(r)]), wantRank[r]) << "parent rank " << r;
    EXPECT_EQ(sizeOf(child[size_t(r)]), 3) << "parent rank " << r;
  }
  // The child reduces over the survivors; the parent (default mode) still works for all.
  std::vector<float> x(kRanks), y(kRanks, 1.0f);
  res = w.onThreads([&](int r) {
    x[size_t(r)] = float(r);
    ncclResult_t e = child[size_t(r)] ? sumOne(&x[size_t(r)], child[size_t(r)]) : ncclSuccess;
    return e == ncclSuccess ? sumOne(&y[size_t(r)], w[r]) : e;
  });
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(w[r]);
  for (int r : {0, 2, 4}) EXPECT_EQ(x[size_t(r)], 6.0f);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(y[size_t(r)], float(kRanks));
  for (int r : {0, 2, 4}) EXPECT_EQ(ncclCommDestroy(child[size_t(r)]), ncclSuccess);
}

// Rank 3 never shows up: the survivors' all-reduce on the parent waits for it until
// NCCL_SHRINK_ABORT stops it; the shrunk communicator then works without rank 3.
TEST(CommShrink, AbortStopsACollectiveStuckOnAnExcludedRank) {
  constexpr int kRanks = 4;
  CommWorld w(kRanks, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  std::vector<ncclResult_t> stuck(3, ncclSuccess);
  std::vector<float> v(3, 1.0f);
  std::atomic<int> entered{0};
  std::vector<std::thread> collectives;
  for (int r = 0; r < 3; ++r)
    collectives.emplace_back([&, r] {
      entered++;
      stuck[size_t(r)] = sumOne(&v[size_t(r)], w[r]);
    });
  while (entered < 3) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  int dead[] = {3};
  std::vector<ncclComm_t> child(kRanks, nullptr);
  auto res = w.onThreads([&](int r) {
    if (r == 3) return ncclSuccess;
    return ncclCommShrink(w[r], dead, 1, &child[size_t(r)], nullptr, NCCL_SHRINK_ABORT);
  });
  for (auto& t : collectives) t.join();
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(res[size_t(r)], ncclSuccess) << r << ": " << ncclGetLastError(w[r]);
    EXPECT_EQ(stuck[size_t(r)], ncclInvalidUsage) << "the stuck all-reduce of rank " << r << " must fail";
    EXPECT_EQ(sizeOf(child[size_t(r)]), 3);
  }
  std::vector<float> x(3, 2.0f);
  res = w.onThreads([&](int r) { return r == 3 ? ncclSuccess : sumOne(&x[size_t(r)], child[size_t(r)]); });
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(child[size_t(r)]);
    EXPECT_EQ(x[size_t(r)], 6.0f);
    // The aborted parent takes no new work.
    float one = 1.0f;
    EXPECT_EQ(sumOne(&one, w[r]), ncclInvalidUsage);
    EXPECT_EQ(ncclCommDestroy(child[size_t(r)]), ncclSuccess);
  }
}

TEST(CommShrink, DifferentExcludeListsFailOnEverySurvivor) {
  constexpr int kRanks = 4;
  CommWorld w(kRanks, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  int without3[] = {3}, without1and3[] = {1, 3};
  std::vector<ncclComm_t> child(kRanks, nullptr);
  std::vector<std::string> why(kRanks);
  auto res = w.onThreads([&](int r) {
    if (r == 3) return ncclSuccess;
    // Ranks 0 and 1 drop rank 3; rank 2 also drops rank 1 (which nevertheless calls).
    ncclResult_t e = r == 2 ? ncclCommShrink(w[r], without1and3, 2, &child[2], nullptr, NCCL_SHRINK_DEFAULT)
                            : ncclCommShrink(w[r], without3, 1, &child[size_t(r)], nullptr, NCCL_SHRINK_DEFAULT);
    why[size_t(r)] = ncclGetLastError(nullptr);
    return e;
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(res[size_t(r)], ncclInvalidUsage) << "rank " << r;
    EXPECT_EQ(child[size_t(r)], nullptr);
    EXPECT_NE(why[size_t(r)].find("different exclude lists"), std::string::npos) << why[size_t(r)];
  }
  // The failed shrink leaves the parent usable.
  std::vector<float> y(kRanks, 1.0f);
  res = w.onThreads([&](int r) { return sumOne(&y[size_t(r)], w[r]); });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(w[r]);
    EXPECT_EQ(y[size_t(r)], float(kRanks));
  }
}

TEST(CommShrink, BadArgumentsAreRefused) {
  CommWorld w(2, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  ncclComm_t out = nullptr;
  int self[] = {0}, outside[] = {2}, twice[] = {1, 1}, one[] = {1};
  EXPECT_EQ(ncclCommShrink(w[0], self, 1, &out, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(w[0], outside, 1, &out, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(w[0], twice, 2, &out, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(w[0], nullptr, 1, &out, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(w[0], one, -1, &out, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(w[0], one, 1, nullptr, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(w[0], one, 1, &out, nullptr, 7), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(nullptr, one, 1, &out, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  // Excluding the only other rank leaves a communicator of one.
  ASSERT_EQ(ncclCommShrink(w[0], one, 1, &out, nullptr, NCCL_SHRINK_DEFAULT), ncclSuccess) << ncclGetLastError(w[0]);
  EXPECT_EQ(sizeOf(out), 1);
  float x = 5.0f;
  EXPECT_EQ(sumOne(&x, out), ncclSuccess);
  EXPECT_EQ(x, 5.0f);
  EXPECT_EQ(ncclCommDestroy(out), ncclSuccess);
}

TEST(CommRevoke, RevokedCommunicatorRefusesWorkAndCanStillBeShrunk) {
  constexpr int kRanks = 3;
  CommWorld w(kRanks, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  EXPECT_EQ(ncclCommRevoke(w[0], 1), ncclInvalidArgument);  // only NCCL_REVOKE_DEFAULT exists
  EXPECT_EQ(ncclCommRevoke(nullptr, NCCL_REVOKE_DEFAULT), ncclInvalidArgument);
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(ncclCommRevoke(w[r], NCCL_REVOKE_DEFAULT), ncclSuccess);
  EXPECT_EQ(ncclCommRevoke(w[1], NCCL_REVOKE_DEFAULT), ncclInvalidArgument);  // twice
  float x = 1.0f;
  EXPECT_EQ(sumOne(&x, w[0]), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("revoked"), std::string::npos) << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclCommFinalize(w[2]), ncclInvalidUsage);
  // Revoke, then shrink in the default mode, is NCCL's other recovery sequence.
  std::vector<ncclComm_t> child(kRanks, nullptr);
  auto res = w.onThreads(
      [&](int r) { return ncclCommShrink(w[r], nullptr, 0, &child[size_t(r)], nullptr, NCCL_SHRINK_DEFAULT); });
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(w[r]);
  expectSumThenDestroy(child, {1, 1, 1}, 3.0f);
}

TEST(CommGrow, NewRanksJoinAndExistingRanksKeepTheirs) {
  CommWorld w(2, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  ncclUniqueId id;
  ASSERT_EQ(ncclCommGetUniqueId(w[0], &id), ncclSuccess) << ncclGetLastError(w[0]);
  constexpr int kGrown = 4;
  std::vector<ncclComm_t> grown(kGrown, nullptr);
  auto res = runOnThreads(kGrown, [&](int r) {
    // Existing ranks: their communicator and rank -1 (only rank 0 passes the id); new
    // ranks: NULL, the id and the rank they take.
    return r < 2 ? ncclCommGrow(w[r], kGrown, r == 0 ? &id : nullptr, -1, &grown[size_t(r)], nullptr)
                 : ncclCommGrow(nullptr, kGrown, &id, r, &grown[size_t(r)], nullptr);
  });
  for (int r = 0; r < kGrown; ++r) {
    ASSERT_EQ(res[size_t(r)], ncclSuccess) << r << ": " << ncclGetLastError(nullptr);
    EXPECT_EQ(rankOf(grown[size_t(r)]), r);
    EXPECT_EQ(sizeOf(grown[size_t(r)]), kGrown);
  }
  expectSumThenDestroy(grown, {1, 2, 3, 4}, 10.0f);
}

TEST(CommGrow, BadArgumentsAreRefused) {
  CommWorld w(2, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  ncclUniqueId id;
  ncclComm_t out = nullptr;
  EXPECT_EQ(ncclCommGetUniqueId(w[0], nullptr), ncclInvalidArgument);
  ASSERT_EQ(ncclCommGetUniqueId(w[0], &id), ncclSuccess);
  EXPECT_EQ(ncclCommGrow(w[0], 4, &id, 0, &out, nullptr), ncclInvalidArgument);   // existing ranks pass -1
  EXPECT_EQ(ncclCommGrow(w[0], 2, &id, -1, &out, nullptr), ncclInvalidArgument);  // must grow
  EXPECT_EQ(ncclCommGrow(nullptr, 4, nullptr, 2, &out, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommGrow(nullptr, 4, &id, 4, &out, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommGrow(w[0], 4, &id, -1, nullptr, nullptr), ncclInvalidArgument);
  // No existing rank passes the id: all of them are told so.
  std::vector<ncclComm_t> grown(2, nullptr);
  auto res = w.onThreads([&](int r) { return ncclCommGrow(w[r], 3, nullptr, -1, &grown[size_t(r)], nullptr); });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(res[size_t(r)], ncclInvalidArgument);
    EXPECT_EQ(grown[size_t(r)], nullptr);
  }
  // They disagree on the new size: both fail with ncclInvalidUsage.
  res = w.onThreads([&](int r) { return ncclCommGrow(w[r], 3 + r, &id, -1, &grown[size_t(r)], nullptr); });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(res[size_t(r)], ncclInvalidUsage);
}

TEST(CommSuspend, SuspendedCommunicatorRefusesWorkUntilResumed) {
  CommWorld w(2, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  uint64_t v = 99;
  ASSERT_EQ(ncclCommMemStats(w[0], ncclStatGpuMemSuspended, &v), ncclSuccess);
  EXPECT_EQ(v, 0u);
  EXPECT_EQ(ncclCommSuspend(w[0], 0x80), ncclInvalidArgument);
  EXPECT_EQ(ncclCommResume(w[0]), ncclInvalidUsage);  // not suspended
  for (int r = 0; r < 2; ++r) ASSERT_EQ(ncclCommSuspend(w[r], NCCL_SUSPEND_MEM), ncclSuccess);
  EXPECT_EQ(ncclCommSuspend(w[0], NCCL_SUSPEND_MEM), ncclInvalidUsage);
  ASSERT_EQ(ncclCommMemStats(w[0], ncclStatGpuMemSuspended, &v), ncclSuccess);
  EXPECT_EQ(v, 1u);
  // Host buffers only: no device memory is held, suspended or not.
  for (ncclCommMemStat_t s : {ncclStatGpuMemSuspend, ncclStatGpuMemPersist, ncclStatGpuMemTotal}) {
    ASSERT_EQ(ncclCommMemStats(w[0], s, &v), ncclSuccess);
    EXPECT_EQ(v, 0u);
  }
  EXPECT_EQ(ncclCommMemStats(w[0], ncclCommMemStat_t(9), &v), ncclInvalidArgument);
  EXPECT_EQ(ncclCommMemStats(w[0], ncclStatGpuMemTotal, nullptr), ncclInvalidArgument);
  float x = 1.0f;
  EXPECT_EQ(sumOne(&x, w[0]), ncclInvalidUsage);
  for (int r = 0; r < 2; ++r) ASSERT_EQ(ncclCommResume(w[r]), ncclSuccess);
  std::vector<float> y(2, 1.0f);
  auto res = w.onThreads([&](int r) { return sumOne(&y[size_t(r)], w[r]); });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(w[r]);
    EXPECT_EQ(y[size_t(r)], 2.0f);
  }
}

}  // namespace
}  // namespace tempo::testing
