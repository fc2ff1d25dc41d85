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
    ParamGuard g(param::Id::Algo, "butterfly");
    EXPECT_EQ(checkOverrides(), Status::InvalidArgument);
  }
  {
    ParamGuard g(param::Id::NetMbits, "-5");
    EXPECT_EQ(checkOverrides(), Status::InvalidArgument);
  }
  ParamGuard g(param::Id::BcastAlgo, "ring");
  EXPECT_EQ(checkOverrides(), Status::InvalidArgument);
}

TEST(Tune, OneChannelPerRailWithinNcclsChannelBounds) {
  EXPECT_EQ(channelCount(1), 1);
  EXPECT_EQ(channelCount(2), 2);
  {
    ParamGuard g(param::Id::MinNChannels, "4");
    EXPECT_EQ(channelCount(1), 4) << "NCCL_MIN_NCHANNELS raises it";
    EXPECT_EQ(channelCount(8), 8);
  }
  {
    ParamGuard g(param::Id::MaxNChannels, "1");
    EXPECT_EQ(channelCount(2), 1) << "NCCL_MAX_NCHANNELS caps it";
  }
  ParamGuard g(param::Id::MinNChannels, "1000");
  EXPECT_EQ(channelCount(1), kMaxChannels);
  ParamGuard bad(param::Id::MaxNChannels, "0");
  EXPECT_EQ(checkOverrides(), Status::InvalidArgument);
}

TEST(Tune, ACollectiveUsesFewerChannelsWhenItsPartsWouldBeSmall) {
  Context c = shm(8, false);
  c.channels = 4;
  EXPECT_EQ(ringChannels(8, c), 1);
  EXPECT_EQ(ringChannels(256 * KiB, c), 1);
  EXPECT_EQ(ringChannels(512 * KiB, c), 2);
  EXPECT_EQ(ringChannels(768 * KiB, c), 3);
  EXPECT_EQ(ringChannels(64 * MiB, c), 4);
  c.channels = 1;
  EXPECT_EQ(ringChannels(64 * MiB, c), 1);
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

// Across hosts the choice is the cost model's: the candidate predicted fastest, at every
// size. Several ranks on some host: the tiniest vectors take recursive doubling over the
// topology ring (its first exchange on the host, then log2(hosts) network latencies: one
// hop fewer than the hierarchy's reduce and broadcast); from where a host link carrying
// every local rank's vector costs more than a local hop, the hierarchical all-reduce with
// recursive doubling among the leaders; bandwidth-bound ones take a ring (the
// hierarchical ring moves (hosts-1)/hosts of the vector over each host's link, the flat
// ring (n-1)/n); one rank per host has nothing to gain from the hierarchy; ncclAvg never
// takes it.
Context hosts(int nranks, int nhosts, int perHost) {
  Context c = shm(nranks, false);
  c.slowest = transport::Kind::OfiTcp;
  c.hosts = nhosts;
  c.maxRanksPerHost = perHost;
  c.net = netCost(c.slowest);
  return c;
}

TEST(Tune, AcrossHostsTheCostModelsFastestCandidateWins) {
  for (const Context& c : {hosts(8, 4, 2), hosts(8, 8, 1), hosts(12, 3, 4), hosts(64, 16, 4)})
    for (bool average : {false, true})
      for (uint64_t b = 8; b <= 256 * MiB; b *= 4) {
        Candidate cands[kMaxCandidates];
        const int k = predictAllReduce(b, c, average, cands);
        const AllReduceChoice ch = allReduce(b, c, average);
        double chosen = -1, least = 1e300;
        for (int i = 0; i < k; ++i) {
          least = std::min(least, cands[i].us);
          if (cands[i].algo == ch.algo && (ch.algo != AllReduceAlgo::Hierarchical || cands[i].leaders == ch.leaders))
            chosen = cands[i].us;
          EXPECT_TRUE(!average || cands[i].algo != AllReduceAlgo::Hierarchical) << "no hierarchical ncclAvg";
          EXPECT_GT(cands[i].us, 0);
        }
        EXPECT_EQ(chosen, least) << b << " bytes, " << c.hosts << " hosts: " << algoName(ch.algo);
      }
}

TEST(Tune, SeveralRanksOnSeveralHostsTakeTheHierarchicalAllReduceWhenLatencyBound) {
  Context c = hosts(8, 4, 2);
  EXPECT_EQ(allReduce(8, c).algo, AllReduceAlgo::RecursiveDoubling);
  EXPECT_EQ(allReduce(64 * KiB, c).algo, AllReduceAlgo::Hierarchical);
  EXPECT_EQ(allReduce(64 * KiB, c).leaders, LeaderAlgo::RecursiveDoubling);
  EXPECT_NE(allReduce(64 * KiB, c, /*average=*/true).algo, AllReduceAlgo::Hierarchical);
  const AllReduceChoice large = allReduce(256 * MiB, c);
  EXPECT_TRUE(large.algo == AllReduceAlgo::Ring || large.leaders == LeaderAlgo::Ring) << algoName(large.algo);
  c = hosts(8, 8, 1);
  EXPECT_EQ(allReduce(8 * KiB, c).algo, AllReduceAlgo::RecursiveDoubling);
  EXPECT_EQ(allReduce(256 * MiB, c).algo, AllReduceAlgo::Ring);
  c = shm(8, false);  // one host: measured thresholds, no hierarchy
  c.maxRanksPerHost = 8;
  EXPECT_EQ(allReduce(8 * KiB, c).algo, AllReduceAlgo::RecursiveDoubling);
}

// The model's bands move with the network it is told about: on a slower network (less
// bandwidth per latency) bandwidth dominates sooner, so the latency algorithms stop
// sooner; the hierarchical chunks and the tree's columns follow the chosen sizes.
TEST(Tune, ASlowerNetworkEndsTheLatencyBandSooner) {
  auto lastRd = [](const Context& c) {
    uint64_t last = 0;
    for (uint64_t b = 8; b <= 256 * MiB; b *= 2)
      if (allReduce(b, c).leaders == LeaderAlgo::RecursiveDoubling &&
          allReduce(b, c).algo == AllReduceAlgo::Hierarchical)
        last = b;
    return last;
  };
  const uint64_t fast = lastRd(hosts(8, 4, 2));
  ParamGuard g(param::Id::NetMbits, "400");
  const uint64_t slow = lastRd(hosts(8, 4, 2));
  EXPECT_GT(fast, 0u);
  EXPECT_GT(slow, 0u);
  EXPECT_LT(slow, fast);
  EXPECT_NEAR(netCost(transport::Kind::OfiTcp).gbps, 0.05, 1e-9);
  // The flat ring's prediction at a bandwidth-bound size: 2(n-1)/n of the vector over each
  // host's link.
  Candidate cands[kMaxCandidates];
  predictAllReduce(64 * MiB, hosts(8, 8, 1), false, cands);
  EXPECT_EQ(cands[0].algo, AllReduceAlgo::Ring);
  EXPECT_NEAR(cands[0].us, 2.0 * 7 / 8 * 64 * MiB / 0.05e3, 14 * 30 + 1);
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
    EXPECT_EQ(allReduce(1 * MiB, c, true).algo, AllReduceAlgo::Tree) << "ncclAvg: the flat double binary tree";
    ParamGuard t(param::Id::Algo, "rd");
    EXPECT_EQ(allReduce(1 * MiB, c).algo, AllReduceAlgo::RecursiveDoubling) << "TEMPO_ALGO wins";
  }
  {
    ParamGuard g(param::Id::NcclAlgo, "^Tree");
    EXPECT_EQ(allReduce(8 * KiB, c).algo, AllReduceAlgo::Ring);
  }
  {
    ParamGuard g(param::Id::NcclAlgo, "Ring,Tree");
    EXPECT_EQ(allReduce(64 * KiB, c).algo, AllReduceAlgo::Hierarchical) << "both allowed: the tuner's choice";
  }
  {
    ParamGuard g(param::Id::NcclAlgo, "Banana");
    EXPECT_EQ(checkOverrides(), Status::InvalidArgument);
  }
  ParamGuard g(param::Id::Algo, "hier");
  EXPECT_EQ(checkOverrides(), Status::Success);
  EXPECT_EQ(allReduce(8, c).algo, AllReduceAlgo::Hierarchical);
  for (const char* name : {"hier/rd", "hier/tree", "hier/ring"}) {
    ParamGuard h(param::Id::Algo, name);
    EXPECT_EQ(checkOverrides(), Status::Success);
    const AllReduceChoice ch = allReduce(64 * KiB, c);
    EXPECT_EQ(ch.algo, AllReduceAlgo::Hierarchical) << name;
    EXPECT_STREQ(candidateName({ch.algo, ch.leaders, 0}), name);
  }
  ParamGuard t(param::Id::Algo, "tree");
  EXPECT_EQ(allReduce(8, c, true).algo, AllReduceAlgo::Tree) << "the tree does ncclAvg";
}

}  // namespace
}  // namespace tempo::tune
