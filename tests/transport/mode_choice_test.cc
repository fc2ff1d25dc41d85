// The shm receiver's choice between streaming a large message and pulling it: both ways are
// timed, after their cold first moves, before either is preferred, the faster is used, the slower is still tried now and
// then, and a change of the machine is followed.
#include "transports/shm/mode_choice.h"

#include <gtest/gtest.h>

namespace tempo::transport::shm {
namespace {

using Mode = ModeChooser::Mode;
constexpr size_t kMsg = 256 << 10;

// Picks one message of `bytes` and records it as taking `streamNsPerByte` or
// `pullNsPerByte` per byte, whichever way was picked. Returns the way.
Mode moveOne(ModeChooser& c, size_t bytes, double streamNsPerByte, double pullNsPerByte) {
  const Mode m = c.pick(bytes);
  c.record(m, bytes, int64_t(double(bytes) * (m == ModeChooser::Stream ? streamNsPerByte : pullNsPerByte)));
  return m;
}

// Both ways' warm-up moves for `bytes`, at the given costs.
void warmUp(ModeChooser& c, size_t bytes, double streamNsPerByte, double pullNsPerByte) {
  for (uint32_t i = 0; i < 2 * ModeChooser::kWarmup; ++i) moveOne(c, bytes, streamNsPerByte, pullNsPerByte);
}

TEST(ModeChooser, TakesTurnsUntilBothWaysAreTimed) {
  ModeChooser c;
  int pulls = 0, streams = 0;
  for (uint32_t i = 0; i < 2 * (ModeChooser::kWarmup + ModeChooser::kMinSamples); ++i) {
    EXPECT_FALSE(c.decided(kMsg));
    (moveOne(c, kMsg, 1.0, 1.0) == ModeChooser::Pull ? pulls : streams)++;
  }
  EXPECT_EQ(pulls, int(ModeChooser::kWarmup + ModeChooser::kMinSamples));
  EXPECT_EQ(streams, int(ModeChooser::kWarmup + ModeChooser::kMinSamples));
  EXPECT_TRUE(c.decided(kMsg));
}

TEST(ModeChooser, ColdFirstMovesDoNotDecide) {
  ModeChooser c;
  warmUp(c, kMsg, 0.2, 4.0);  // the first pulls of a buffer: 20x their steady cost
  for (uint32_t i = 0; i < 2 * ModeChooser::kMinSamples; ++i) moveOne(c, kMsg, 0.2, 0.1);
  ASSERT_TRUE(c.decided(kMsg));
  EXPECT_EQ(c.preferred(kMsg), ModeChooser::Pull);
  EXPECT_NEAR(c.medianCost(ModeChooser::Pull, kMsg), 0.1, 1e-4);  // the cold 4.0 never counted
}

TEST(ModeChooser, UsesTheFasterWayAndTriesTheSlowerOnceInKExploreFarWhenTheGapIsWide) {
  ModeChooser c;
  warmUp(c, kMsg, 0.1, 0.2);
  for (uint32_t i = 0; i < 2 * ModeChooser::kMinSamples; ++i) moveOne(c, kMsg, 0.1, 0.2);  // streaming 2x faster
  ASSERT_EQ(c.preferred(kMsg), ModeChooser::Stream);
  int pulls = 0;
  const int n = 10 * int(ModeChooser::kExploreFar);
  for (int i = 0; i < n; ++i) pulls += moveOne(c, kMsg, 0.1, 0.2) == ModeChooser::Pull;
  EXPECT_EQ(pulls, 10);
  EXPECT_EQ(c.preferred(kMsg), ModeChooser::Stream);
}

TEST(ModeChooser, ExploresOnceInKExploreCloseWhenTheWaysAreClose) {
  ModeChooser c;
  warmUp(c, kMsg, 0.11, 0.10);
  for (uint32_t i = 0; i < 2 * ModeChooser::kMinSamples; ++i) moveOne(c, kMsg, 0.11, 0.10);
  ASSERT_EQ(c.preferred(kMsg), ModeChooser::Pull);
  int streams = 0;
  const int n = 10 * int(ModeChooser::kExploreClose);
  for (int i = 0; i < n; ++i) streams += moveOne(c, kMsg, 0.11, 0.10) == ModeChooser::Stream;
  EXPECT_EQ(streams, 10);
}

TEST(ModeChooser, OneSlowMessageDoesNotTurnTheChoice) {
  ModeChooser c;
  warmUp(c, kMsg, 0.2, 0.1);
  for (uint32_t i = 0; i < 2 * ModeChooser::kMinSamples; ++i) moveOne(c, kMsg, 0.2, 0.1);
  for (int i = 0; i < 20; ++i) moveOne(c, kMsg, 0.2, 0.1);
  c.record(ModeChooser::Pull, kMsg, int64_t(kMsg) * 50);  // one preempted pull
  EXPECT_EQ(c.preferred(kMsg), ModeChooser::Pull);
}

TEST(ModeChooser, FollowsTheMachineWhenTheFasterWayBecomesTheSlower) {
  ModeChooser c;
  for (int i = 0; i < 100; ++i) moveOne(c, kMsg, 0.2, 0.1);
  ASSERT_EQ(c.preferred(kMsg), ModeChooser::Pull);
  // Pulling turns 4x slower: the preferred way's own timings move its median within a
  // window, and the stream timings it still holds are the faster.
  int moved = 0;
  while (c.preferred(kMsg) == ModeChooser::Pull && moved < 100) {
    moveOne(c, kMsg, 0.2, 0.4);
    ++moved;
  }
  EXPECT_EQ(c.preferred(kMsg), ModeChooser::Stream);
  EXPECT_LE(moved, int(ModeChooser::kWindow));
  // ... and back again, found by the exploring pulls alone.
  moved = 0;
  while (c.preferred(kMsg) == ModeChooser::Stream && moved < 10 * int(ModeChooser::kExploreFar * ModeChooser::kWindow)) {
    moveOne(c, kMsg, 0.2, 0.05);
    ++moved;
  }
  EXPECT_EQ(c.preferred(kMsg), ModeChooser::Pull);
}

TEST(ModeChooser, SizeClassesAreTimedApart) {
  ModeChooser c;
  EXPECT_EQ(ModeChooser::classOf(kMsg), ModeChooser::classOf(2 * kMsg - 1));
  EXPECT_NE(ModeChooser::classOf(kMsg), ModeChooser::classOf(2 * kMsg));
  for (int i = 0; i < 50; ++i) {
    moveOne(c, kMsg, 0.1, 0.3);       // 256 KiB: streaming faster
    moveOne(c, 4 * kMsg, 0.3, 0.1);   // 1 MiB: pulling faster
  }
  EXPECT_EQ(c.preferred(kMsg), ModeChooser::Stream);
  EXPECT_EQ(c.preferred(4 * kMsg), ModeChooser::Pull);
  EXPECT_FALSE(c.decided(16 * kMsg));
}

TEST(ModeChooser, TimingsThatCannotBeAreIgnored) {
  ModeChooser c;
  warmUp(c, kMsg, 0.2, 0.1);
  c.record(ModeChooser::Pull, 0, 100);
  c.record(ModeChooser::Pull, kMsg, -5);
  EXPECT_EQ(c.medianCost(ModeChooser::Pull, kMsg), 0.0f);
  EXPECT_EQ(c.pick(kMsg), ModeChooser::Pull);  // still untimed: pulling's turn first
}

}  // namespace
}  // namespace tempo::transport::shm
