// Steady-state collectives allocate nothing: staging, plans, requests and group state
// come from pools whose capacity is reused. Counted by replacing operator new in this
// test binary (the library is linked statically into it).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "src/comm/registry.h"
#include "tests/coll/coll_fixture.h"

// The replacements below pair malloc with free on purpose.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {
std::atomic<long> g_allocations{0};
}

void* operator new(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace tempo::testing {
namespace {

TEST(NoAllocation, SteadyStateAllReducesDoNotAllocate) {
  CommWorld w(4, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  std::vector<std::vector<float>> in(4, std::vector<float>(300000, 1.0f)), out = in;
  // Plain calls (no std::function), so that only the library can allocate.
  auto once = [&](size_t count, bool inPlace) {
    ncclGroupStart();
    for (int r = 0; r < 4; ++r) {
      float* src = in[size_t(r)].data();
      ncclAllReduce(src, inPlace ? src : out[size_t(r)].data(), count, ncclFloat32, ncclSum, w[r], nullptr);
    }
    return ncclGroupEnd();
  };
  const size_t counts[] = {1, 1000, 65536, 300000};
  for (int warm = 0; warm < 3; ++warm)
    for (size_t c : counts)
      for (bool ip : {false, true}) ASSERT_EQ(once(c, ip), ncclSuccess);
  // No gtest assertions inside the counted loop: they may allocate themselves.
  int failures = 0;
  long before = g_allocations.load();
  for (int i = 0; i < 50; ++i)
    for (size_t c : counts)
      for (bool ip : {false, true}) failures += once(c, ip) != ncclSuccess;
  long allocations = g_allocations.load() - before;
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(allocations, 0) << "allocations during 400 steady-state collectives";
}

TEST(Records, EveryCollectiveIsRecordedWithSequenceAndTimes) {
  CommWorld w(2, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  std::vector<std::vector<double>> b(2, std::vector<double>(1000, 1.0));
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(w.inGroup([&](int r) {
      return ncclAllReduce(b[size_t(r)].data(), b[size_t(r)].data(), 1000, ncclFloat64, ncclSum, w[r], nullptr);
    }), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    comm::Communicator* c = comm::registry::find(w[r]).get();
    ASSERT_NE(c, nullptr);
    const auto& rec = c->engine().records();
    ASSERT_EQ(rec.count(), 5u);
    for (size_t back = 0; back < 5; ++back) {
      const engine::OpRecord& o = rec.recent(back);
      EXPECT_EQ(o.seq, 4 - back);
      EXPECT_EQ(o.bytes, 8000u);
      EXPECT_GT(o.tEnter, 0);
      EXPECT_GE(o.tExit, o.tEnter);
      EXPECT_GE(o.tFirstData, o.tEnter);
      EXPECT_EQ(o.status, Status::Success);
    }
  }
}

}  // namespace
}  // namespace tempo::testing
