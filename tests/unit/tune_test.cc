// The tuner's contract: which all-reduce algorithm and ring segment size each call gets,
// and that TEMPO_ALGO / TEMPO_CHUNK_SIZE override it only where the override can work.
#include <gtest/gtest.h>

#include "src/core/param.h"
#include "src/tune/tune.h"

namespace tempo::tune {
namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB;

Context shm(int nranks, bool oversubscribed) {
  return Context{nranks, transport::Kind::OfiShm, oversubscribed, 4 * MiB};
}

struct ParamGuard {
  param::Id id;
  ParamGuard(param::Id i, const char* v) : id(i) { param::overrideForTest(id, v); }
  ~ParamGuard() { param::overrideForTest(id, nullptr); }
};

TEST(Tune, SmallMessagesTakeRecursiveDoublingLargeOnesTheRing) {
  EXPECT_EQ(allReduce(8, shm(2, false)).algo, AllReduceAlgo::RecursiveDoubling);
  EXPECT_EQ(allReduce(64 * KiB, shm(2, false)).algo, AllReduceAlgo::RecursiveDoubling);
  EXPECT_EQ(allReduce(64 * KiB + 1, shm(2, false)).algo, AllReduceAlgo::Ring);
  EXPECT_EQ(allReduce(16 * MiB, shm(8, false)).algo, AllReduceAlgo::Ring);
}

TEST(Tune, OverTempoShmRecursiveDoublingStopsEarlier) {
  Context c{2, transport::Kind::Shm, false, 4 * MiB};
  EXPECT_EQ(allReduce(16 * KiB, c).algo, AllReduceAlgo::RecursiveDoubling);
  EXPECT_EQ(allReduce(16 * KiB + 1, c).algo, AllReduceAlgo::Ring);
  c.oversubscribed = true;
  EXPECT_EQ(allReduce(32 * KiB, c).algo, AllReduceAlgo::RecursiveDoubling);
  EXPECT_EQ(allReduce(32 * KiB + 1, c).algo, AllReduceAlgo::Ring);
}

TEST(Tune, OversubscribedHostsKeepRecursiveDoublingToLargerSizes) {
  EXPECT_EQ(allReduce(512 * KiB, shm(4, true)).algo, AllReduceAlgo::RecursiveDoubling);
  EXPECT_EQ(allReduce(512 * KiB + 1, shm(4, true)).algo, AllReduceAlgo::Ring);
}

TEST(Tune, OneRankNeverUsesRecursiveDoubling) {
  EXPECT_EQ(allReduce(8, shm(1, false)).algo, AllReduceAlgo::Ring);
}

TEST(Tune, AutoNeverPicksDirect) {
  for (int n : {2, 3, 4, 8})
    for (uint64_t b : {8 * KiB, 64 * KiB, 256 * KiB})
      for (bool over : {false, true}) EXPECT_NE(allReduce(b, shm(n, over)).algo, AllReduceAlgo::Direct);
}

TEST(Tune, ForcedAlgorithmsApplyOnlyWhenTheirScratchFits) {
  {
    ParamGuard g(param::Id::Algo, "direct");
    EXPECT_EQ(allReduce(1 * MiB, shm(4, false)).algo, AllReduceAlgo::Direct);  // 4 MiB: fits
    EXPECT_EQ(allReduce(2 * MiB, shm(4, false)).algo, AllReduceAlgo::Ring);    // 8 MiB: no
  }
  {
    ParamGuard g(param::Id::Algo, "rd");
    EXPECT_EQ(allReduce(4 * MiB, shm(4, false)).algo, AllReduceAlgo::RecursiveDoubling);
    EXPECT_EQ(allReduce(4 * MiB + 1, shm(4, false)).algo, AllReduceAlgo::Ring);
  }
  {
    ParamGuard g(param::Id::Algo, "ring");
    EXPECT_EQ(allReduce(8, shm(4, false)).algo, AllReduceAlgo::Ring);
  }
}

TEST(Tune, InvalidAlgorithmNamesFailClearly) {
  {
    ParamGuard g(param::Id::Algo, "tree");
    EXPECT_EQ(checkOverrides(), Status::InvalidArgument);
  }
  ParamGuard g(param::Id::BcastAlgo, "ring");
  EXPECT_EQ(checkOverrides(), Status::InvalidArgument);
}

TEST(Tune, BroadcastTakesTheChainWithACorePerRankAndTheTreeForLargeOversubscribedOnes) {
  for (int n : {2, 3, 8})
    for (uint64_t b : {8 * KiB, 256 * KiB, 64 * MiB}) EXPECT_EQ(broadcast(b, shm(n, false)), BroadcastAlgo::Chain);
  for (int n : {3, 8}) {
    EXPECT_EQ(broadcast(64 * KiB, shm(n, true)), BroadcastAlgo::Chain);
    EXPECT_EQ(broadcast(128 * KiB - 1, shm(n, true)), BroadcastAlgo::Chain);
    EXPECT_EQ(broadcast(128 * KiB, shm(n, true)), BroadcastAlgo::Tree);
    EXPECT_EQ(broadcast(64 * MiB, shm(n, true)), BroadcastAlgo::Tree);
  }
  EXPECT_EQ(broadcast(64 * MiB, shm(2, true)), BroadcastAlgo::Chain) << "two ranks: the same single hop";
  {
    ParamGuard g(param::Id::BcastAlgo, "chain");
    EXPECT_EQ(broadcast(64 * MiB, shm(4, true)), BroadcastAlgo::Chain);
  }
  ParamGuard g(param::Id::BcastAlgo, "tree");
  EXPECT_EQ(checkOverrides(), Status::Success);
  EXPECT_EQ(broadcast(64 * KiB, shm(4, false)), BroadcastAlgo::Tree);
}

TEST(Tune, RingSegmentsAreWholeUpToTheirCapThenColumns) {
  EXPECT_EQ(allReduce(8 * MiB, shm(4, false)).chunkBytes, 512 * KiB);
  EXPECT_EQ(allReduce(1 * MiB, shm(4, false)).chunkBytes, 256 * KiB);
  EXPECT_EQ(allReduce(1 * KiB, shm(4, false)).chunkBytes, 4 * KiB);  // floor
  Context tcp{4, transport::Kind::OfiTcp, false, 4 * MiB};
  EXPECT_EQ(allReduce(64 * MiB, tcp).chunkBytes, 1 * MiB);
  // UCX between hosts moved 256 KiB messages fastest (tune.cc).
  Context ucx{4, transport::Kind::UcxNet, false, 4 * MiB};
  EXPECT_EQ(allReduce(64 * MiB, ucx).chunkBytes, 256 * KiB);
  EXPECT_EQ(allReduce(512 * KiB, ucx).chunkBytes, 128 * KiB);  // whole below the cap
  ParamGuard g(param::Id::ChunkSize, "65536");
  EXPECT_EQ(allReduce(64 * MiB, tcp).chunkBytes, 64 * KiB);
}

// Several hosts with several ranks on some: latency-bound sizes go hierarchical (one
// rank per host on the network); with one rank per host, or for ncclAvg, they do not.
TEST(Tune, SeveralRanksOnSeveralHostsTakeTheHierarchicalAllReduceWhenLatencyBound) {
  Context c = shm(8, false);
  c.slowest = transport::Kind::OfiTcp;
  c.hosts = 4;
  c.maxRanksPerHost = 2;
  EXPECT_EQ(allReduce(8 * KiB, c).algo, AllReduceAlgo::Hierarchical);
  EXPECT_EQ(allReduce(8 * KiB, c, /*average=*/true).algo, AllReduceAlgo::RecursiveDoubling);
  EXPECT_EQ(allReduce(16 * MiB, c).algo, AllReduceAlgo::Ring);
  c.maxRanksPerHost = 1;
  EXPECT_EQ(allReduce(8 * KiB, c).algo, AllReduceAlgo::RecursiveDoubling);
  c.hosts = 1;
  c.maxRanksPerHost = 8;
  EXPECT_EQ(allReduce(8 * KiB, c).algo, AllReduceAlgo::RecursiveDoubling);
}

TEST(Tune, NcclAlgoRingOrTreeAndTempoAlgoWins) {
  Context c = shm(8, false);
  c.hosts = 4;
  c.maxRanksPerHost = 2;
  {
    ParamGuard g(param::Id::NcclAlgo, "Ring");
    EXPECT_EQ(allReduce(8 * KiB, c).algo, AllReduceAlgo::Ring);
  }
  {
    ParamGuard g(param::Id::NcclAlgo, "tree");
    EXPECT_EQ(allReduce(1 * MiB, c).algo, AllReduceAlgo::Hierarchical);
    EXPECT_EQ(allReduce(1 * MiB, c, true).algo, AllReduceAlgo::Ring) << "no hierarchical ncclAvg";
    ParamGuard t(param::Id::Algo, "rd");
    EXPECT_EQ(allReduce(1 * MiB, c).algo, AllReduceAlgo::RecursiveDoubling) << "TEMPO_ALGO wins";
  }
  {
    ParamGuard g(param::Id::NcclAlgo, "^Tree");
    EXPECT_EQ(allReduce(8 * KiB, c).algo, AllReduceAlgo::Ring);
  }
  {
    ParamGuard g(param::Id::NcclAlgo, "Ring,Tree");
    EXPECT_EQ(allReduce(8 * KiB, c).algo, AllReduceAlgo::Hierarchical) << "both allowed: the tuner's choice";
  }
  {
    ParamGuard g(param::Id::NcclAlgo, "Banana");
    EXPECT_EQ(checkOverrides(), Status::InvalidArgument);
  }
  ParamGuard g(param::Id::Algo, "hier");
  EXPECT_EQ(checkOverrides(), Status::Success);
}

}  // namespace
}  // namespace tempo::tune
