// Clock offsets from NTP-style probes (src/pacing/clock.h): the estimate's bound holds
// whatever the delays, tightens with the fastest probes, and a stepped clock gives none.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "src/pacing/clock.h"

namespace tempo::pacing {
namespace {

// Probes between a client and a server whose clock reads `offset` ns more, with one-way
// delays drawn from [minNs, minNs + spreadNs) in each direction (independently, so the
// two directions are asymmetric) and a server turnaround of up to 2 us.
std::vector<ClockProbe> probes(int64_t offset, int n, int64_t minNs, int64_t spreadNs, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<ClockProbe> v;
  int64_t t = 1000000;  // true time
  for (int i = 0; i < n; ++i) {
    const int64_t there = minNs + int64_t(rng() % uint64_t(spreadNs));
    const int64_t turn = int64_t(rng() % 2000);
    const int64_t back = minNs + int64_t(rng() % uint64_t(spreadNs));
    ClockProbe p;
    p.t1 = t;
    p.t2 = t + there + offset;
    p.t3 = p.t2 + turn;
    p.t4 = t + there + turn + back;
    v.push_back(p);
    t = p.t4 + 5000;
  }
  return v;
}

TEST(ClockOffset, TheTrueOffsetIsAlwaysWithinTheBound) {
  for (int64_t offset : {int64_t(0), int64_t(123456789), int64_t(-987654321), int64_t(7)})
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      const ClockOffset o = estimateOffset(probes(offset, 16, 10000, 200000, seed));
      ASSERT_TRUE(o.valid);
      EXPECT_EQ(o.probes, 16u);
      EXPECT_LE(std::abs(o.offsetNs - offset), o.errorNs) << "offset " << offset << " seed " << seed;
      EXPECT_GE(o.errorNs, 0);
    }
}

TEST(ClockOffset, TheBoundIsNoWiderThanTheFastestProbe) {
  std::vector<ClockProbe> v = probes(5000000, 16, 20000, 500000, 3);
  int64_t fastest = INT64_MAX;
  for (const ClockProbe& p : v) fastest = std::min(fastest, (p.t4 - p.t1) - (p.t3 - p.t2));
  const ClockOffset o = estimateOffset(v);
  ASSERT_TRUE(o.valid);
  EXPECT_LE(2 * o.errorNs, fastest + 1) << "never worse than the classic min-delay estimate";
  // Equal delays both ways (250 ns, a 100 ns turnaround, true offset 1000): the midpoint
  // is exact, the bound is half the round trip on the wire.
  const ClockOffset exact = estimateOffset(std::vector<ClockProbe>{{0, 1250, 1350, 600}});
  ASSERT_TRUE(exact.valid);
  EXPECT_EQ(exact.offsetNs, 1000);  // within [t3 - t4, t2 - t1] = [750, 1250]
  EXPECT_EQ(exact.errorNs, 250);
}

TEST(ClockOffset, ASteppedClockOrNoProbeGivesNoEstimate) {
  EXPECT_FALSE(estimateOffset({}).valid);
  std::vector<ClockProbe> v = probes(0, 8, 10000, 1000, 1);
  std::vector<ClockProbe> later = probes(50000000, 8, 10000, 1000, 2);  // the server's clock stepped 50 ms
  v.insert(v.end(), later.begin(), later.end());
  EXPECT_FALSE(estimateOffset(v).valid) << "intervals before and after the step do not meet";
  EXPECT_FALSE(estimateOffset(std::vector<ClockProbe>{{100, 50, 60, 90}}).valid) << "t4 before t1";
}

}  // namespace
}  // namespace tempo::pacing
