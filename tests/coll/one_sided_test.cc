// One-sided calls through the public API: ncclPutSignal writes into a peer's window and
// signals it, ncclSignal signals alone, ncclWaitSignal returns once the signals it names
// have arrived with the data of the puts before them in place. A put completes whether or
// not its target is in a call, so no pattern NCCL allows can hang. Ranks as threads, over
// every transport.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/coll/coll_fixture.h"

namespace tempo::testing {
namespace {

// A byte pattern that names its writer and position.
uint8_t pattern(int writer, size_t i) { return uint8_t(writer * 37 + i * 11 + (i >> 8)); }

// Each rank's window: `bytes` of memory registered collectively (one group, this thread).
class Windows {
 public:
  Windows(const CommWorld& w, std::vector<size_t> bytes) : w_(w), mem_(size_t(w.size())), wins_(size_t(w.size())) {
    for (int r = 0; r < w.size(); ++r) mem_[r].assign(bytes[size_t(r)], 0);
    status_ = w.inGroup([&](int r) {
      return ncclCommWindowRegister(w[r], mem_[r].data(), mem_[r].size(), &wins_[r], NCCL_WIN_DEFAULT);
    });
  }
  Windows(const CommWorld& w, size_t bytes) : Windows(w, std::vector<size_t>(size_t(w.size()), bytes)) {}
  ~Windows() {
    if (status_ == ncclSuccess) (void)w_.inGroup([&](int r) { return ncclCommWindowDeregister(w_[r], wins_[r]); });
  }
  ncclResult_t status() const { return status_; }
  ncclWindow_t operator[](int r) const { return wins_[size_t(r)]; }
  std::vector<uint8_t>& mem(int r) { return mem_[size_t(r)]; }

 private:
  const CommWorld& w_;
  std::vector<std::vector<uint8_t>> mem_;
  std::vector<ncclWindow_t> wins_;
  ncclResult_t status_ = ncclInternalError;
};

ncclResult_t waitFor(ncclComm_t comm, int peer, int count) {
  ncclWaitSignalDesc_t d{count, peer, 0, 0};
  return ncclWaitSignal(1, &d, comm, nullptr);
}

class OneSided : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  std::string transport() const { return std::get<0>(GetParam()); }
  int nranks() const { return std::get<1>(GetParam()); }
};

// Every rank puts into the next rank's window at an offset of its own, in sizes from an
// empty put to 1 MiB (beyond every transport's eager limit), then waits for the previous
// rank's signal and finds its data there and nothing else touched.
TEST_P(OneSided, PutsLandInThePeersWindowBeforeTheirSignal) {
  CommWorld w(nranks(), transport());
  ASSERT_TRUE(w.ok()) << w.error();
  const int n = w.size();
  for (size_t bytes : {size_t(0), size_t(1), size_t(4093), size_t(65536), size_t(1) << 20}) {
    const size_t offset = 8 + bytes / 3;
    Windows win(w, offset + bytes + 64);
    ASSERT_EQ(win.status(), ncclSuccess) << ncclGetLastError(nullptr);
    std::vector<std::vector<uint8_t>> src(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < bytes; ++i) src[r].push_back(pattern(r, i));
    auto res = w.onThreads([&](int r) {
      const int next = (r + 1) % n, prev = (r + n - 1) % n;
      ncclResult_t e = ncclPutSignal(src[r].data(), bytes, ncclUint8, next, win[r], offset, 0, 0, 0, w[r], nullptr);
      return e != ncclSuccess ? e : waitFor(w[r], prev, 1);
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(res[r], ncclSuccess) << "rank " << r << " bytes " << bytes << ": " << ncclGetLastError(nullptr);
      const int prev = (r + n - 1) % n;
      const std::vector<uint8_t>& m = win.mem(r);
      for (size_t i = 0; i < m.size(); ++i) {
        const bool inside = i >= offset && i < offset + bytes;
        ASSERT_EQ(m[i], inside ? pattern(prev, i - offset) : 0) << "rank " << r << " byte " << i << " of " << bytes;
      }
    }
  }
}

// One wait for several signals: the data of every put before them is in place.
TEST_P(OneSided, OneWaitTakesSeveralSignalsAndTheirData) {
  CommWorld w(nranks(), transport());
  ASSERT_TRUE(w.ok()) << w.error();
  const int n = w.size();
  constexpr size_t kBlock = 300000;
  Windows win(w, 3 * kBlock * size_t(n));
  ASSERT_EQ(win.status(), ncclSuccess);
  std::vector<uint8_t> src(kBlock);
  auto res = w.onThreads([&](int r) {
    std::vector<uint8_t> mine(3 * kBlock);
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = pattern(r, i);
    // Three puts to every rank (itself included), then one signal more.
    for (int k = 0; k < 3; ++k)
      for (int t = 0; t < n; ++t) {
        ncclResult_t e = ncclPutSignal(mine.data() + k * kBlock, kBlock, ncclUint8, t, win[r],
                                       (size_t(r) * 3 + size_t(k)) * kBlock, 0, 0, 0, w[r], nullptr);
        if (e != ncclSuccess) return e;
      }
    for (int t = 0; t < n; ++t)
      if (ncclResult_t e = ncclSignal(t, 0, 0, 0, w[r], nullptr); e != ncclSuccess) return e;
    std::vector<ncclWaitSignalDesc_t> descs;
    for (int p = 0; p < n; ++p) descs.push_back({4, p, 0, 0});
    return ncclWaitSignal(n, descs.data(), w[r], nullptr);
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(res[r], ncclSuccess) << "rank " << r << ": " << ncclGetLastError(nullptr);
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < 3 * kBlock; ++i)
        ASSERT_EQ(win.mem(r)[size_t(p) * 3 * kBlock + i], pattern(p, i)) << "rank " << r << " from " << p;
  }
}

// Every rank puts 4 MiB to the next and then waits for the previous, with no group: each
// put must complete without its target's help, or every rank would wait in its put.
TEST_P(OneSided, RanksThatAllPutBeforeTheyWaitDoNotWaitForEachOther) {
  CommWorld w(nranks(), transport());
  ASSERT_TRUE(w.ok()) << w.error();
  const int n = w.size();
  constexpr size_t kBytes = 4 << 20;
  Windows win(w, kBytes);
  ASSERT_EQ(win.status(), ncclSuccess);
  for (int round = 0; round < 3; ++round) {
    auto res = w.onThreads([&](int r) {
      std::vector<uint8_t> src(kBytes, uint8_t(r + round));
      ncclResult_t e = ncclPutSignal(src.data(), kBytes, ncclUint8, (r + 1) % n, win[r], 0, 0, 0, 0, w[r], nullptr);
      if (e == ncclSuccess) e = waitFor(w[r], (r + n - 1) % n, 1);
      // The next round overwrites the windows: every rank must have read its own first.
      if (e == ncclSuccess && win.mem(r)[kBytes - 1] != uint8_t((r + n - 1) % n + round)) e = ncclInternalError;
      float x = 1;
      return e != ncclSuccess ? e : ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, w[r], nullptr);
    });
    for (int r = 0; r < n; ++r) ASSERT_EQ(res[r], ncclSuccess) << "round " << round << " rank " << r;
  }
}

// A put made before a collective does not hold the collective back on either side: the
// target is inside the collective, not a wait, when the put arrives.
TEST_P(OneSided, APutBeforeACollectiveDoesNotHoldItBack) {
  CommWorld w(nranks(), transport());
  ASSERT_TRUE(w.ok()) << w.error();
  const int n = w.size();
  constexpr size_t kBytes = 2 << 20;
  Windows win(w, kBytes);
  ASSERT_EQ(win.status(), ncclSuccess);
  std::vector<uint8_t> src(kBytes, 0x5a);
  auto res = w.onThreads([&](int r) {
    std::vector<float> v(1024, float(r + 1));
    ncclResult_t e = ncclSuccess;
    if (r == 0) e = ncclPutSignal(src.data(), kBytes, ncclUint8, n - 1, win[r], 0, 0, 0, 0, w[r], nullptr);
    if (e == ncclSuccess) e = ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat, ncclSum, w[r], nullptr);
    if (e == ncclSuccess && v[7] != float(n * (n + 1) / 2)) e = ncclInternalError;
    if (e == ncclSuccess && r == n - 1) e = waitFor(w[r], 0, 1);
    return e;
  });
  for (int r = 0; r < n; ++r) ASSERT_EQ(res[r], ncclSuccess) << "rank " << r << ": " << ncclGetLastError(nullptr);
  EXPECT_EQ(win.mem(n - 1)[kBytes - 1], 0x5a);
}

// The target computes (is in no call at all) while the put arrives: the put returns before
// the target ever calls the library again, its inbox served in the background.
TEST_P(OneSided, APutCompletesWhileItsTargetIsOutsideTheLibrary) {
  if (nranks() < 2) GTEST_SKIP() << "needs a peer";
  CommWorld w(nranks(), transport());
  ASSERT_TRUE(w.ok()) << w.error();
  constexpr size_t kBytes = 8 << 20;
  Windows win(w, kBytes);
  ASSERT_EQ(win.status(), ncclSuccess);
  std::atomic<bool> targetCalled{false}, putReturned{false};
  std::vector<uint8_t> src(kBytes, 0xc3);
  auto res = w.onThreads([&](int r) {
    if (r == 0) {
      ncclResult_t e = ncclPutSignal(src.data(), kBytes, ncclUint8, 1, win[0], 0, 0, 0, 0, w[0], nullptr);
      putReturned = !targetCalled.load();
      return e;
    }
    if (r == 1) {
      // Long enough that a put waiting for this rank's next call would still be waiting.
      for (int i = 0; i < 100 && !putReturned; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      targetCalled = true;
      return waitFor(w[1], 0, 1);
    }
    return ncclSuccess;
  });
  for (int r = 0; r < w.size(); ++r) ASSERT_EQ(res[r], ncclSuccess) << "rank " << r;
  EXPECT_TRUE(putReturned.load()) << "the put waited for its target to call the library";
  EXPECT_EQ(win.mem(1)[kBytes / 2], 0xc3);
}

// One thread drives two ranks in one group: the wait may come first in the group.
TEST_P(OneSided, OneThreadDrivesAPutAndItsWaitInOneGroup) {
  if (nranks() < 2) GTEST_SKIP() << "needs a peer";
  CommWorld w(nranks(), transport());
  ASSERT_TRUE(w.ok()) << w.error();
  Windows win(w, 1 << 20);
  ASSERT_EQ(win.status(), ncclSuccess);
  std::vector<uint8_t> src(1 << 20, 0x77);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(waitFor(w[1], 0, 1), ncclSuccess);
  ASSERT_EQ(ncclPutSignal(src.data(), src.size(), ncclUint8, 1, win[0], 0, 0, 0, 0, w[0], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(win.mem(1)[12345], 0x77);
}

// A rank that destroys its communicator takes its connections with it; the others' puts
// and waits between themselves go on (only waits for the departed rank's signals could fail).
TEST_P(OneSided, ARankThatLeavesDoesNotStopTheOthers) {
  if (nranks() < 3) GTEST_SKIP() << "needs two ranks that stay";
  selectTransport(transport());
  const int n = nranks();
  std::vector<ncclComm_t> comms(static_cast<size_t>(n));
  ASSERT_EQ(ncclCommInitAll(comms.data(), n, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::vector<uint8_t>> mem(static_cast<size_t>(n), std::vector<uint8_t>(1 << 20));
  std::vector<ncclWindow_t> wins(static_cast<size_t>(n));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r) ncclCommWindowRegister(comms[r], mem[r].data(), mem[r].size(), &wins[r], 0);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  const int gone = n - 1;
  ASSERT_EQ(ncclCommFinalize(comms[gone]), ncclSuccess);
  ASSERT_EQ(ncclCommDestroy(comms[gone]), ncclSuccess);
  std::vector<uint8_t> src(1 << 20, 0x3c);
  for (int round = 0; round < 3; ++round) {
    auto res = runOnThreads(2, [&](int r) {
      ncclResult_t e = ncclPutSignal(src.data(), src.size(), ncclUint8, 1 - r, wins[r], 0, 0, 0, 0, comms[r], nullptr);
      return e != ncclSuccess ? e : waitFor(comms[r], 1 - r, 1);
    });
    ASSERT_EQ(res[0], ncclSuccess) << ncclGetLastError(nullptr);
    ASSERT_EQ(res[1], ncclSuccess) << ncclGetLastError(nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the departure has time to show
  }
  EXPECT_EQ(mem[0][777], 0x3c);
  for (int r = 0; r < gone; ++r) ncclCommDestroy(comms[r]);
  param::overrideForTest(param::Id::Transport, nullptr);
  param::overrideForTest(param::Id::FiProvider, nullptr);
}

std::string name(const ::testing::TestParamInfo<std::tuple<std::string, int>>& info) {
  return std::get<0>(info.param) + "_" + std::to_string(std::get<1>(info.param)) + "ranks";
}
INSTANTIATE_TEST_SUITE_P(Loopback, OneSided,
                         ::testing::Combine(::testing::Values("loopback"), ::testing::Values(1, 2, 3, 4)), name);
INSTANTIATE_TEST_SUITE_P(TempoShm, OneSided,
                         ::testing::Combine(::testing::Values("tempo_shm"), ::testing::Values(2, 3)), name);
INSTANTIATE_TEST_SUITE_P(Libfabric, OneSided,
                         ::testing::Combine(::testing::Values("shm", "tcp"), ::testing::Values(2, 3)), name);

// On nonblocking communicators one-sided calls return ncclInProgress and run on each
// communicator's worker, in order with its other calls.
TEST(OneSidedNonblocking, PutsAndWaitsRunOnTheWorkers) {
  NonblockingWorld w(2);
  std::vector<std::vector<uint8_t>> mem(2, std::vector<uint8_t>(1 << 16));
  std::vector<ncclWindow_t> wins(2);
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(ncclCommWindowRegister(w[r], mem[r].data(), mem[r].size(), &wins[r], 0), ncclInProgress);
  ASSERT_EQ(w.waitAll(), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<uint8_t> src(1 << 16, 0x42);
  ASSERT_EQ(waitFor(w[1], 0, 1), ncclInProgress);
  ASSERT_EQ(ncclPutSignal(src.data(), src.size(), ncclUint8, 1, wins[0], 0, 0, 0, 0, w[0], nullptr), ncclInProgress);
  ASSERT_EQ(w.waitAll(), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(mem[1][4242], 0x42);
  for (int r = 0; r < 2; ++r) ASSERT_EQ(ncclCommWindowDeregister(w[r], wins[r]), ncclInProgress);
  ASSERT_EQ(w.waitAll(), ncclSuccess) << ncclGetLastError(nullptr);
}

// ---- Misuse ----

class OneSidedMisuse : public SharedWorldTest {
};

TEST_F(OneSidedMisuse, BeforeAnyWindowOneSidedCallsSayWhatIsMissing) {
  CommWorld w(2, "loopback");
  ASSERT_TRUE(w.ok());
  EXPECT_NCCL_ERROR(ncclSignal(1, 0, 0, 0, w[0], nullptr), ncclInvalidUsage, "need a window");
  EXPECT_NCCL_ERROR(waitFor(w[0], 1, 1), ncclInvalidUsage, "need a window");
}

TEST_F(OneSidedMisuse, BadArgumentsAreRefusedAndNothingIsSent) {
  const CommWorld& w = *world_;
  // Rank 1's window is smaller than rank 0's: bounds are the target's.
  Windows win(w, {4096, 1024});
  ASSERT_EQ(win.status(), ncclSuccess);
  uint8_t src[2048] = {};
  EXPECT_NCCL_ERROR(ncclPutSignal(src, 16, ncclUint8, 1, win[0], 0, 1, 0, 0, w[0], nullptr), ncclInvalidArgument,
                    "sigIdx 1, ctx 0 and flags 0 must all be 0");
  EXPECT_NCCL_ERROR(ncclSignal(1, 0, 2, 0, w[0], nullptr), ncclInvalidArgument, "must all be 0");
  EXPECT_NCCL_ERROR(ncclSignal(1, 0, 0, 4, w[0], nullptr), ncclInvalidArgument, "must all be 0");
  EXPECT_NCCL_ERROR(ncclPutSignal(src, 16, ncclUint8, 2, win[0], 0, 0, 0, 0, w[0], nullptr), ncclInvalidArgument,
                    "peer 2 is outside [0, 2)");
  EXPECT_NCCL_ERROR(ncclPutSignal(src, 16, ncclUint8, 1, nullptr, 0, 0, 0, 0, w[0], nullptr), ncclInvalidArgument,
                    "peerWin is NULL");
  EXPECT_NCCL_ERROR(ncclPutSignal(nullptr, 16, ncclUint8, 1, win[0], 0, 0, 0, 0, w[0], nullptr),
                    ncclInvalidArgument, "localbuff is NULL");
  EXPECT_NCCL_ERROR(ncclPutSignal(src, 2048, ncclUint8, 1, win[0], 0, 0, 0, 0, w[0], nullptr), ncclInvalidArgument,
                    "2048 bytes at offset 0 run past the end of rank 1's window");
  EXPECT_NCCL_ERROR(ncclPutSignal(src, 4, ncclFloat, 1, win[0], 1009, 0, 0, 0, w[0], nullptr), ncclInvalidArgument,
                    "16 bytes at offset 1009");
  EXPECT_NCCL_ERROR(ncclPutSignal(src, 4, ncclDataType_t(99), 1, win[0], 0, 0, 0, 0, w[0], nullptr),
                    ncclInvalidArgument, "invalid datatype 99");
  auto foreign = reinterpret_cast<ncclWindow_t>(src);
  EXPECT_NCCL_ERROR(ncclPutSignal(src, 4, ncclUint8, 1, foreign, 0, 0, 0, 0, w[0], nullptr), ncclInvalidArgument,
                    "is not a registered window");
  ncclWaitSignalDesc_t bad[] = {{1, 5, 0, 0}, {-1, 1, 0, 0}, {1, 1, 1, 0}};
  EXPECT_NCCL_ERROR(ncclWaitSignal(1, &bad[0], w[0], nullptr), ncclInvalidArgument, "peer 5 is outside");
  EXPECT_NCCL_ERROR(ncclWaitSignal(1, &bad[1], w[0], nullptr), ncclInvalidArgument, "opCnt -1 is negative");
  EXPECT_NCCL_ERROR(ncclWaitSignal(1, &bad[2], w[0], nullptr), ncclInvalidArgument, "must be 0");
  EXPECT_NCCL_ERROR(ncclWaitSignal(-1, bad, w[0], nullptr), ncclInvalidArgument, "nDesc -1 is negative");
  EXPECT_NCCL_ERROR(ncclWaitSignal(2, nullptr, w[0], nullptr), ncclInvalidArgument, "signalDescs is NULL");
  EXPECT_EQ(ncclWaitSignal(0, nullptr, w[0], nullptr), ncclSuccess);  // waits for nothing

  // None of that sent anything: the next signal is the first the peer sees.
  ASSERT_EQ(w.onThreads([&](int r) { return r == 0 ? ncclSignal(1, 0, 0, 0, w[0], nullptr) : waitFor(w[1], 0, 1); }),
            std::vector<ncclResult_t>(2, ncclSuccess));
}

TEST(OneSidedTimeout, AWaitForASignalThatNeverComesEndsAtTheCollectiveTimeout) {
  param::overrideForTest(param::Id::CollTimeout, "1");
  {
    CommWorld w(2, "loopback");
    ASSERT_TRUE(w.ok());
    Windows win(w, 64);
    ASSERT_EQ(win.status(), ncclSuccess);
    EXPECT_NCCL_ERROR(waitFor(w[0], 1, 1), ncclTimeout, "WaitSignal did not complete within TEMPO_COLL_TIMEOUT=1 s");
  }
  param::overrideForTest(param::Id::CollTimeout, nullptr);
}

}  // namespace
}  // namespace tempo::testing
