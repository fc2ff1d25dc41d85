// Ring index math, exhaustively for n = 1..64.
#include <gtest/gtest.h>

#include <set>

#include "src/algo/ring.h"

namespace tempo::algo::ring {
namespace {

TEST(RingIndex, NeighboursAreInverse) {
  for (int n = 1; n <= 64; ++n)
    for (int p = 0; p < n; ++p) {
      EXPECT_EQ(prev(next(p, n), n), p);
      EXPECT_EQ(next(prev(p, n), n), p);
    }
}

TEST(RingIndex, EachReduceScatterReceiveIsThePredecessorsSend) {
  for (int n = 2; n <= 64; ++n)
    for (int p = 0; p < n; ++p)
      for (int s = 0; s < n - 1; ++s) EXPECT_EQ(rsRecvSeg(p, s, n), rsSendSeg(prev(p, n), s, n)) << n << " " << p;
}

TEST(RingIndex, EachAllGatherReceiveIsThePredecessorsSend) {
  for (int n = 2; n <= 64; ++n)
    for (int p = 0; p < n; ++p)
      for (int s = 0; s < n - 1; ++s) EXPECT_EQ(agRecvSeg(p, s, n), agSendSeg(prev(p, n), s, n));
}

TEST(RingIndex, ReduceScatterForwardsWhatItJustReduced) {
  // Step s+1 sends the segment received (and reduced) at step s.
  for (int n = 2; n <= 64; ++n)
    for (int p = 0; p < n; ++p)
      for (int s = 0; s + 1 < n - 1; ++s) EXPECT_EQ(rsSendSeg(p, s + 1, n), rsRecvSeg(p, s, n));
}

TEST(RingIndex, OwnedSegmentIsTheLastReducedAndFirstGathered) {
  for (int n = 2; n <= 64; ++n)
    for (int p = 0; p < n; ++p) {
      EXPECT_EQ(ownedSeg(p, n), rsRecvSeg(p, n - 2, n));
      EXPECT_EQ(agSendSeg(p, 0, n), ownedSeg(p, n));
    }
}

TEST(RingIndex, OwnersPartitionTheSegments) {
  for (int n = 1; n <= 64; ++n) {
    std::set<int> owned;
    for (int p = 0; p < n; ++p) owned.insert(ownedSeg(p, n));
    EXPECT_EQ(int(owned.size()), n);
  }
}

TEST(RingIndex, EveryRankReceivesEveryOtherSegmentInTheAllGather) {
  for (int n = 2; n <= 64; ++n)
    for (int p = 0; p < n; ++p) {
      std::set<int> got = {ownedSeg(p, n)};
      for (int s = 0; s < n - 1; ++s) got.insert(agRecvSeg(p, s, n));
      EXPECT_EQ(int(got.size()), n);
    }
}

TEST(RingIndex, ReduceScatterNeverWritesTheSegmentItSendsFirst) {
  // In place, step 0 sends the raw input segment p; no reduce-scatter step may write it.
  for (int n = 2; n <= 64; ++n)
    for (int p = 0; p < n; ++p)
      for (int s = 0; s < n - 1; ++s) EXPECT_NE(rsRecvSeg(p, s, n), rsSendSeg(p, 0, n));
}

}  // namespace
}  // namespace tempo::algo::ring
