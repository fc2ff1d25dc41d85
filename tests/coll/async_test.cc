// Nonblocking communicators (config.blocking = 0) and ncclCommAbort from another thread.
//
// NCCL's contract: init, split, finalize, collectives and ncclGroupEnd on a nonblocking
// communicator return ncclInProgress; ncclCommGetAsyncError reports ncclInProgress until
// the operation is done, then its result; using the communicator before that is
// ncclInvalidArgument; blocking and nonblocking communicators cannot share a group
// (ncclInvalidArgument). ncclCommAbort returns promptly from any thread, the call in
// flight on the aborted rank fails, and its peers' calls fail instead of hanging.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "tests/coll/coll_fixture.h"

namespace tempo::testing {
namespace {

using Clock = std::chrono::steady_clock;

ncclConfig_t nonblockingConfig() {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  return cfg;
}

TEST(Nonblocking, InitAndCollectivesReturnInProgressThenComplete) {
  constexpr int kRanks = 3;
  NonblockingWorld w(kRanks);
  int n = 0;
  ASSERT_EQ(ncclCommCount(w.comms[0], &n), ncclSuccess);
  EXPECT_EQ(n, kRanks);
  // Rank 0 starts first: its all-reduce cannot finish before the others join, so it is
  // certainly still in progress when it tries a second call, which is refused.
  std::vector<float> x(kRanks * 64);
  for (int r = 0; r < kRanks; ++r)
    for (int i = 0; i < 64; ++i) x[size_t(r * 64 + i)] = float(r + i);
  ASSERT_EQ(ncclAllReduce(&x[0], &x[0], 64, ncclFloat32, ncclSum, w.comms[0], nullptr), ncclInProgress);
  EXPECT_EQ(ncclAllReduce(&x[0], &x[0], 64, ncclFloat32, ncclSum, w.comms[0], nullptr), ncclInvalidArgument);
  ncclResult_t state = ncclSuccess;
  ASSERT_EQ(ncclCommGetAsyncError(w.comms[0], &state), ncclSuccess);
  EXPECT_EQ(state, ncclInProgress);
  for (int r = 1; r < kRanks; ++r)
    ASSERT_EQ(ncclAllReduce(&x[size_t(r * 64)], &x[size_t(r * 64)], 64, ncclFloat32, ncclSum, w.comms[size_t(r)], nullptr),
              ncclInProgress);
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(waitAsync(w.comms[size_t(r)]), ncclSuccess) << ncclGetLastError(w.comms[size_t(r)]);
  for (int r = 0; r < kRanks; ++r)
    for (int i = 0; i < 64; ++i) ASSERT_EQ(x[size_t(r * 64 + i)], float(0 + 1 + 2 + 3 * i)) << "rank " << r << " i " << i;
}

TEST(Nonblocking, GroupEndReturnsInProgressForEveryCommunicatorInIt) {
  constexpr int kRanks = 4;
  NonblockingWorld w(kRanks);
  std::vector<int32_t> in(kRanks), out(kRanks * kRanks, -1);
  for (int r = 0; r < kRanks; ++r) in[size_t(r)] = 10 * r;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r)
    ASSERT_EQ(ncclAllGather(&in[size_t(r)], &out[size_t(r * kRanks)], 1, ncclInt32, w.comms[size_t(r)], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclInProgress);
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(waitAsync(w.comms[size_t(r)]), ncclSuccess);
  for (int r = 0; r < kRanks; ++r)
    for (int j = 0; j < kRanks; ++j) EXPECT_EQ(out[size_t(r * kRanks + j)], 10 * j);
}

TEST(Nonblocking, BlockingAndNonblockingCommunicatorsCannotShareAGroup) {
  NonblockingWorld nb(1);
  CommWorld b(1, "loopback");
  ASSERT_TRUE(b.ok()) << b.error();
  float x = 1, y = 2;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, nb.comms[0], nullptr), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(&y, &y, 1, ncclFloat32, ncclSum, b[0], nullptr), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("not allowed in the same group"), std::string::npos);
  // Both still work on their own.
  EXPECT_EQ(ncclAllReduce(&y, &y, 1, ncclFloat32, ncclSum, b[0], nullptr), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, nb.comms[0], nullptr), ncclInProgress);
  EXPECT_EQ(waitAsync(nb.comms[0]), ncclSuccess);
}

TEST(Nonblocking, SplitAndFinalizeAreAsynchronousToo) {
  constexpr int kRanks = 4;
  NonblockingWorld w(kRanks);
  std::vector<ncclComm_t> child(kRanks, nullptr);
  for (int r = 0; r < kRanks; ++r)
    ASSERT_EQ(ncclCommSplit(w.comms[size_t(r)], r % 2, r, &child[size_t(r)], nullptr), ncclInProgress);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_NE(child[size_t(r)], nullptr);
    ASSERT_EQ(waitAsync(w.comms[size_t(r)]), ncclSuccess);
    ASSERT_EQ(waitAsync(child[size_t(r)]), ncclSuccess) << ncclGetLastError(child[size_t(r)]);
    int rank = -1;
    ASSERT_EQ(ncclCommUserRank(child[size_t(r)], &rank), ncclSuccess);
    EXPECT_EQ(rank, r / 2);
  }
  // Finalize answers InProgress and completes; destroy after it releases everything.
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(ncclCommFinalize(child[size_t(r)]), ncclInProgress);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(waitAsync(child[size_t(r)]), ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(child[size_t(r)]), ncclSuccess);
  }
}

// Shrink and grow of nonblocking communicators answer InProgress too: the exchange runs on
// the parent's worker, the child's join on its own.
TEST(Nonblocking, ShrinkAndGrowAreAsynchronous) {
  constexpr int kRanks = 3;
  NonblockingWorld w(kRanks);
  int excluded[] = {1};
  std::vector<ncclComm_t> shrunk(kRanks, nullptr);
  for (int r : {0, 2})
    ASSERT_EQ(ncclCommShrink(w.comms[size_t(r)], excluded, 1, &shrunk[size_t(r)], nullptr, NCCL_SHRINK_DEFAULT),
              ncclInProgress);
  for (int r : {0, 2}) {
    ASSERT_EQ(waitAsync(w.comms[size_t(r)]), ncclSuccess);
    ASSERT_EQ(waitAsync(shrunk[size_t(r)]), ncclSuccess) << ncclGetLastError(shrunk[size_t(r)]);
    int n = 0;
    ASSERT_EQ(ncclCommCount(shrunk[size_t(r)], &n), ncclSuccess);
    EXPECT_EQ(n, 2);
  }
  // Grow the shrunk pair back to three with a new rank (blocking, from a thread of its own).
  ncclUniqueId id;
  ASSERT_EQ(ncclCommGetUniqueId(shrunk[0], &id), ncclSuccess);
  std::vector<ncclComm_t> grown(kRanks, nullptr);
  ncclResult_t joined = ncclInternalError;
  std::thread newcomer([&] { joined = ncclCommGrow(nullptr, kRanks, &id, 2, &grown[2], nullptr); });
  ASSERT_EQ(ncclCommGrow(shrunk[0], kRanks, &id, -1, &grown[0], nullptr), ncclInProgress);
  ASSERT_EQ(ncclCommGrow(shrunk[2], kRanks, nullptr, -1, &grown[1], nullptr), ncclInProgress);
  for (int r : {0, 1}) ASSERT_EQ(waitAsync(grown[size_t(r)]), ncclSuccess) << ncclGetLastError(grown[size_t(r)]);
  newcomer.join();
  ASSERT_EQ(joined, ncclSuccess);
  for (int r = 0; r < kRanks; ++r) {
    int rank = -1;
    ASSERT_EQ(ncclCommUserRank(grown[size_t(r)], &rank), ncclSuccess);
    EXPECT_EQ(rank, r);
  }
  for (ncclComm_t c : grown) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  for (int r : {0, 2}) EXPECT_EQ(ncclCommDestroy(shrunk[size_t(r)]), ncclSuccess);
}

TEST(Nonblocking, SplitOfABlockingParentWithANonblockingConfig) {
  constexpr int kRanks = 2;
  CommWorld w(kRanks, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  ncclConfig_t cfg = nonblockingConfig();
  std::vector<ncclComm_t> child(kRanks, nullptr);
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(ncclCommSplit(w[r], 0, 0, &child[size_t(r)], &cfg), ncclInProgress);
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(waitAsync(child[size_t(r)]), ncclSuccess) << ncclGetLastError(child[size_t(r)]);
  // The parent stayed blocking and usable.
  float x[kRanks] = {1, 2};
  auto res = w.onThreads([&](int r) { return ncclAllReduce(&x[r], &x[r], 1, ncclFloat32, ncclSum, w[r], nullptr); });
  for (ncclResult_t e : res) EXPECT_EQ(e, ncclSuccess);
  EXPECT_EQ(x[0], 3.0f);
  for (ncclComm_t c : child) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// An init that can never complete (its peer never joins) stops when aborted.
TEST(Nonblocking, AbortStopsAnInitWhosePeersNeverCome) {
  selectTransport("loopback");
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t cfg = nonblockingConfig();
  ncclComm_t c = nullptr;
  ASSERT_EQ(ncclCommInitRankConfig(&c, 2, id, 0, &cfg), ncclInProgress);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ncclResult_t state = ncclSuccess;
  ASSERT_EQ(ncclCommGetAsyncError(c, &state), ncclSuccess);
  EXPECT_EQ(state, ncclInProgress);
  const auto t0 = Clock::now();
  EXPECT_EQ(ncclCommAbort(c), ncclSuccess);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(ncclCommGetAsyncError(c, &state), ncclInvalidUsage);  // the handle is gone
  param::overrideForTest(param::Id::Transport, nullptr);
}

// ncclCommAbort from a second thread while the first is inside a collective that cannot
// complete (the peer has not called it yet): abort returns, the call in flight fails, and
// the peer's later call fails too rather than hang.
void abortMidCollective(const std::string& transport) {
  CommWorld w(2, transport);
  ASSERT_TRUE(w.ok()) << w.error();
  std::vector<float> a(1 << 16, 1.0f), b(1 << 16, 2.0f);
  std::atomic<ncclResult_t> inFlight{ncclSuccess};
  std::atomic<bool> returned{false};
  std::thread caller([&] {
    inFlight = ncclAllReduce(a.data(), a.data(), a.size(), ncclFloat32, ncclSum, w[0], nullptr);
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(returned.load()) << "the all-reduce finished without its peer";
  const auto t0 = Clock::now();
  EXPECT_EQ(ncclCommAbort(w[0]), ncclSuccess);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
  caller.join();
  EXPECT_EQ(inFlight.load(), ncclInvalidUsage);
  // The peer learns of the abort (from the ring notice or the closed connection).
  ncclResult_t peer = ncclAllReduce(b.data(), b.data(), b.size(), ncclFloat32, ncclSum, w[1], nullptr);
  EXPECT_NE(peer, ncclSuccess);
  EXPECT_NE(peer, ncclInProgress);
  ncclResult_t state = ncclSuccess;
  EXPECT_EQ(ncclCommGetAsyncError(w[1], &state), ncclSuccess);
  EXPECT_NE(state, ncclSuccess);
  // Using the aborted handle is an error, not a crash.
  EXPECT_EQ(ncclAllReduce(a.data(), a.data(), 1, ncclFloat32, ncclSum, w[0], nullptr), ncclInvalidUsage);
}

TEST(Abort, FromAnotherThreadMidCollectiveLoopback) { abortMidCollective("loopback"); }
TEST(Abort, FromAnotherThreadMidCollectiveTcp) { abortMidCollective("tcp"); }

// Abort of a nonblocking communicator whose collective is in flight on its worker.
TEST(Abort, NonblockingCollectiveInFlight) {
  NonblockingWorld w(2);
  float x = 1;
  ASSERT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, w.comms[0], nullptr), ncclInProgress);
  const auto t0 = Clock::now();
  EXPECT_EQ(ncclCommAbort(w.comms[0]), ncclSuccess);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
  w.comms[0] = nullptr;
  float y = 2;
  ncclResult_t peer = ncclAllReduce(&y, &y, 1, ncclFloat32, ncclSum, w.comms[1], nullptr);
  if (peer == ncclInProgress) peer = waitAsync(w.comms[1]);
  EXPECT_NE(peer, ncclSuccess);
}

}  // namespace
}  // namespace tempo::testing
