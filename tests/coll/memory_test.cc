// ncclMemAlloc/ncclMemFree, ncclCommRegister/ncclCommDeregister and memory windows
// (ncclCommWindowRegister/ncclCommWindowDeregister/ncclWinGetUserPtr) on host memory: valid
// handles work (collectives run on ncclMemAlloc memory, on registered buffers and windows),
// and anything else is refused with ncclInvalidArgument and a reason; window calls are
// collective, and ranks that disagree on them all fail with ncclInvalidUsage.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "src/comm/registry.h"
#include "tests/coll/coll_fixture.h"

namespace tempo::testing {
namespace {

TEST(MemAlloc, AllocatedMemoryServesCollectivesAndIsFreedOnce) {
  CommWorld w(2, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  void* buf[2] = {};
  for (void*& b : buf) {
    ASSERT_EQ(ncclMemAlloc(&b, 3 << 20), ncclSuccess) << ncclGetLastError(nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 4096, 0u);
  }
  auto res = w.onThreads([&](int r) {
    float* f = static_cast<float*>(buf[r]);
    for (int i = 0; i < 1024; ++i) f[i] = float(r + 1);
    void* handle = nullptr;
    ncclResult_t e = ncclCommRegister(w[r], f, 4096, &handle);
    if (e == ncclSuccess) e = ncclAllReduce(f, f, 1024, ncclFloat32, ncclSum, w[r], nullptr);
    if (e == ncclSuccess) e = ncclCommDeregister(w[r], handle);
    return e;
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(res[size_t(r)], ncclSuccess) << ncclGetLastError(w[r]);
    EXPECT_EQ(static_cast<float*>(buf[r])[1023], 3.0f);
  }
  for (void* b : buf) EXPECT_EQ(ncclMemFree(b), ncclSuccess);
  EXPECT_EQ(ncclMemFree(buf[0]), ncclInvalidArgument) << "a second free is refused";
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("not returned by ncclMemAlloc"), std::string::npos);
  EXPECT_EQ(ncclMemFree(nullptr), ncclSuccess);
}

TEST(MemAlloc, BadArgumentsAreRefused) {
  void* p = nullptr;
  EXPECT_EQ(ncclMemAlloc(nullptr, 64), ncclInvalidArgument);
  EXPECT_EQ(ncclMemAlloc(&p, 0), ncclInvalidArgument);
  int onStack = 0;
  EXPECT_EQ(ncclMemFree(&onStack), ncclInvalidArgument);
}

TEST(CommRegister, HandlesBelongToTheirCommunicator) {
  CommWorld a(1, "loopback"), b(1, "loopback");
  ASSERT_TRUE(a.ok() && b.ok());
  char buf[256];
  void* h = nullptr;
  EXPECT_EQ(ncclCommRegister(a[0], nullptr, 16, &h), ncclInvalidArgument);
  EXPECT_EQ(ncclCommRegister(a[0], buf, 0, &h), ncclInvalidArgument);
  EXPECT_EQ(ncclCommRegister(a[0], buf, 16, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommRegister(nullptr, buf, 16, &h), ncclInvalidArgument);
  ASSERT_EQ(ncclCommRegister(a[0], buf, sizeof buf, &h), ncclSuccess);
  EXPECT_EQ(ncclCommDeregister(b[0], h), ncclInvalidArgument) << "another communicator's handle";
  EXPECT_EQ(ncclCommDeregister(a[0], h), ncclSuccess);
  EXPECT_EQ(ncclCommDeregister(a[0], h), ncclInvalidArgument) << "deregistered twice";
  // Registrations still held at destroy are released with the communicator.
  ASSERT_EQ(ncclCommRegister(a[0], buf, sizeof buf, &h), ncclSuccess);
}

// Transfers from and into a registered buffer name the transports' region for it (the
// engine counts them per collective); once deregistered, they no longer do.
TEST(CommRegister, TransfersOnRegisteredBuffersNameTheirRegion) {
  CommWorld w(2, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  constexpr size_t kCount = 1 << 18;
  std::vector<std::vector<float>> in(2, std::vector<float>(kCount, 1.0f)), out(2, std::vector<float>(kCount));
  auto lastRecord = [&](int r) { return comm::registry::find(w[r])->engine().records().recent(0); };
  auto allReduce = [&] {
    return w.inGroup([&](int r) {
      return ncclAllReduce(in[size_t(r)].data(), out[size_t(r)].data(), kCount, ncclFloat32, ncclSum, w[r], nullptr);
    });
  };
  ASSERT_EQ(allReduce(), ncclSuccess);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(lastRecord(r).registeredTransfers, 0u) << "nothing registered yet";

  void* h[2][2] = {};
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(ncclCommRegister(w[r], in[size_t(r)].data(), kCount * sizeof(float), &h[r][0]), ncclSuccess);
    ASSERT_EQ(ncclCommRegister(w[r], out[size_t(r)].data(), kCount * sizeof(float), &h[r][1]), ncclSuccess);
  }
  ASSERT_EQ(allReduce(), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    EXPECT_GT(lastRecord(r).registeredTransfers, 0u) << "rank " << r;
    EXPECT_EQ(out[size_t(r)][kCount - 1], 2.0f);
  }

  for (int r = 0; r < 2; ++r)
    for (void* handle : h[r]) ASSERT_EQ(ncclCommDeregister(w[r], handle), ncclSuccess);
  ASSERT_EQ(allReduce(), ncclSuccess);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(lastRecord(r).registeredTransfers, 0u) << "deregistered";
}

// ---- Memory windows ----

// Registers one window per rank from this thread, inside one group (the calls are
// collective); returns the group's result.
ncclResult_t registerWindows(const CommWorld& w, std::vector<std::vector<float>>& bufs, std::vector<ncclWindow_t>& wins,
                             const std::vector<int>& flags) {
  wins.assign(size_t(w.size()), nullptr);
  return w.inGroup([&](int r) {
    return ncclCommWindowRegister(w[r], bufs[r].data(), bufs[r].size() * sizeof(float), &wins[r], flags[size_t(r)]);
  });
}

ncclResult_t deregisterWindows(const CommWorld& w, const std::vector<ncclWindow_t>& wins) {
  return w.inGroup([&](int r) { return ncclCommWindowDeregister(w[r], wins[r]); });
}

TEST(CommWindow, ACollectiveRegistrationServesCollectivesAndIsTakenBack) {
  CommWorld w(3, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  std::vector<std::vector<float>> bufs(3, std::vector<float>(4096));
  std::vector<ncclWindow_t> wins;
  const int sym = NCCL_WIN_COLL_SYMMETRIC;
  ASSERT_EQ(registerWindows(w, bufs, wins, {sym, sym, sym}), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < 3; ++r) {
    ASSERT_NE(wins[r], nullptr);
    void* user = nullptr;
    ASSERT_EQ(ncclWinGetUserPtr(w[r], wins[r], &user), ncclSuccess);
    EXPECT_EQ(user, bufs[r].data());
    for (float& x : bufs[r]) x = float(r + 1);
  }
  // A collective on the windows' memory names their registration.
  ASSERT_EQ(w.inGroup([&](int r) {
    return ncclAllReduce(bufs[r].data(), bufs[r].data(), 4096, ncclFloat, ncclSum, w[r], nullptr);
  }),
            ncclSuccess);
  for (auto& b : bufs)
    for (float x : b) ASSERT_EQ(x, 6.0f);
  for (int r = 0; r < 3; ++r)
    EXPECT_GT(comm::registry::find(w[r])->engine().records().recent(0).registeredTransfers, 0u) << "rank " << r;

  ASSERT_EQ(deregisterWindows(w, wins), ncclSuccess) << ncclGetLastError(nullptr);
  void* user = nullptr;
  EXPECT_EQ(ncclWinGetUserPtr(w[0], wins[0], &user), ncclInvalidArgument);  // taken back
  EXPECT_EQ(ncclCommWindowDeregister(w[0], wins[0]), ncclInvalidArgument);
}

TEST(CommWindow, RanksThatDisagreeOnTheFlagsAllFailAndKeepNoWindow) {
  CommWorld w(2, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  std::vector<std::vector<float>> bufs(2, std::vector<float>(64));
  std::vector<ncclWindow_t> wins(2, nullptr);
  auto results = w.onThreads([&](int r) {
    return ncclCommWindowRegister(w[r], bufs[r].data(), 256, &wins[r],
                                  r == 0 ? NCCL_WIN_DEFAULT : NCCL_WIN_COLL_SYMMETRIC);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r], ncclInvalidUsage);
    EXPECT_EQ(wins[r], nullptr);
  }
  // The failed registration took window number 0 on both ranks alike: the next one agrees.
  ASSERT_EQ(registerWindows(w, bufs, wins, {NCCL_WIN_DEFAULT, NCCL_WIN_DEFAULT}), ncclSuccess)
      << ncclGetLastError(nullptr);
  ASSERT_EQ(deregisterWindows(w, wins), ncclSuccess);
}

TEST(CommWindow, RanksThatDeregisterDifferentWindowsAllFailAndKeepThem) {
  CommWorld w(2, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  std::vector<std::vector<float>> a(2, std::vector<float>(64)), b(2, std::vector<float>(64));
  std::vector<ncclWindow_t> winA, winB;
  ASSERT_EQ(registerWindows(w, a, winA, {0, 0}), ncclSuccess);
  ASSERT_EQ(registerWindows(w, b, winB, {0, 0}), ncclSuccess);
  auto results = w.onThreads([&](int r) { return ncclCommWindowDeregister(w[r], r == 0 ? winA[0] : winB[1]); });
  EXPECT_EQ(results[0], ncclInvalidUsage);
  EXPECT_EQ(results[1], ncclInvalidUsage);
  void* user = nullptr;
  EXPECT_EQ(ncclWinGetUserPtr(w[0], winA[0], &user), ncclSuccess);  // still registered
  EXPECT_EQ(ncclWinGetUserPtr(w[1], winB[1], &user), ncclSuccess);
  ASSERT_EQ(deregisterWindows(w, winA), ncclSuccess);
  ASSERT_EQ(deregisterWindows(w, winB), ncclSuccess);
}

TEST(CommWindow, BadArgumentsAreRefusedBeforeAnyExchange) {
  CommWorld w(2, "loopback"), other(2, "loopback");
  ASSERT_TRUE(w.ok() && other.ok());
  float buf[16];
  ncclWindow_t win = nullptr;
  auto expectError = [](ncclResult_t got, ncclResult_t want, const char* needle) {
    EXPECT_EQ(got, want);
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find(needle), std::string::npos) << ncclGetLastError(nullptr);
  };
  expectError(ncclCommWindowRegister(nullptr, buf, sizeof buf, &win, 0), ncclInvalidArgument, "comm is NULL");
  expectError(ncclCommWindowRegister(w[0], buf, sizeof buf, nullptr, 0), ncclInvalidArgument, "win is NULL");
  expectError(ncclCommWindowRegister(w[0], nullptr, sizeof buf, &win, 0), ncclInvalidArgument, "is empty");
  expectError(ncclCommWindowRegister(w[0], buf, 0, &win, 0), ncclInvalidArgument, "is empty");
  expectError(ncclCommWindowRegister(w[0], buf, sizeof buf, &win, 0x10), ncclInvalidArgument, "winFlags 0x10");
  void* user = nullptr;
  auto fake = reinterpret_cast<ncclWindow_t>(buf);
  expectError(ncclWinGetUserPtr(w[0], fake, &user), ncclInvalidArgument, "is not a registered window");
  expectError(ncclCommWindowDeregister(w[0], nullptr), ncclInvalidArgument, "is not a registered window");

  // A window belongs to the communicator that registered it.
  std::vector<std::vector<float>> bufs(2, std::vector<float>(16));
  std::vector<ncclWindow_t> wins;
  ASSERT_EQ(registerWindows(w, bufs, wins, {0, 0}), ncclSuccess);
  expectError(ncclWinGetUserPtr(other[0], wins[0], &user), ncclInvalidArgument, "is not a registered window");
  expectError(ncclWinGetUserPtr(w[0], wins[0], nullptr), ncclInvalidArgument, "outUserPtr is NULL");
  ASSERT_EQ(deregisterWindows(w, wins), ncclSuccess);
}

TEST(CommWindow, ANonblockingCommunicatorRegistersOnItsWorker) {
  NonblockingWorld w(2);
  std::vector<std::vector<float>> bufs(2, std::vector<float>(32));
  std::vector<ncclWindow_t> wins(2);
  for (int r = 0; r < 2; ++r) ASSERT_EQ(ncclCommWindowRegister(w[r], bufs[r].data(), 128, &wins[r], 0), ncclInProgress);
  ASSERT_EQ(w.waitAll(), ncclSuccess) << ncclGetLastError(nullptr);
  void* user = nullptr;
  ASSERT_EQ(ncclWinGetUserPtr(w[1], wins[1], &user), ncclSuccess);
  EXPECT_EQ(user, bufs[1].data());
  for (int r = 0; r < 2; ++r) ASSERT_EQ(ncclCommWindowDeregister(w[r], wins[r]), ncclInProgress);
  ASSERT_EQ(w.waitAll(), ncclSuccess) << ncclGetLastError(nullptr);
}

}  // namespace
}  // namespace tempo::testing
