// ncclMemAlloc/ncclMemFree and ncclCommRegister/ncclCommDeregister on host memory: valid
// handles work (collectives run on ncclMemAlloc memory, on registered buffers), and
// anything else is refused with ncclInvalidArgument and a reason.
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

}  // namespace
}  // namespace tempo::testing
