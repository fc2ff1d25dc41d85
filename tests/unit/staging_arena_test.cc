// The staging arena (src/mem/staging_arena.h) on the emulated GPU: pinned memory from the
// runtime, grown in powers of two from 2 MiB only when a batch needs more and reused
// otherwise, a stream of its own made once, and everything given back when it goes.
#include <gtest/gtest.h>

#include <cstring>

#include "src/mem/staging_arena.h"
#include "tests/common/emulated_device.h"

namespace tempo::mem {
namespace {

using testing::EmulatedDevice;

TEST(StagingArena, GrowsOnlyWhenABatchNeedsMoreAndReusesOtherwise) {
  EmulatedDevice dev(/*install=*/false);
  {
    StagingArena arena(dev, 0);
    EXPECT_EQ(arena.capacity(), 0u);
    EXPECT_EQ(dev.livePinned(), 0u) << "nothing is allocated before the first batch";

    auto first = arena.reserve(1000);
    ASSERT_TRUE(first.ok()) << lastErrorMessage();
    EXPECT_EQ(arena.capacity(), size_t(2) << 20) << "at least 2 MiB";
    std::memset(first.value(), 0x5A, arena.capacity());  // host memory the host may write
    auto again = arena.reserve(size_t(2) << 20);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again.value(), first.value()) << "a batch that fits reuses the memory";
    EXPECT_EQ(arena.grows(), 1u);

    auto bigger = arena.reserve((size_t(5) << 20) + 1);
    ASSERT_TRUE(bigger.ok());
    EXPECT_EQ(arena.capacity(), size_t(8) << 20) << "the next power of two";
    EXPECT_EQ(arena.grows(), 2u);
    EXPECT_EQ(dev.livePinned(), 1u) << "the smaller block was given back when it grew";
    ASSERT_TRUE(arena.reserve(1).ok());
    EXPECT_EQ(arena.grows(), 2u) << "a small batch after a big one keeps the big block";
    EXPECT_EQ(dev.pinnedAllocations(), 2u);

    auto s1 = arena.stream();
    auto s2 = arena.stream();
    ASSERT_TRUE(s1.ok() && s2.ok());
    EXPECT_EQ(s1.value(), s2.value()) << "one stream, made once";
  }
  EXPECT_EQ(dev.livePinned(), 0u) << "the arena gave its memory back";
}

}  // namespace
}  // namespace tempo::mem
