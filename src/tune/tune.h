// Algorithm parameters chosen per collective: pure functions of the call and of what the
// communicator knows about its transports and host. TEMPO_ALGO and TEMPO_CHUNK_SIZE
// override the choices.
#pragma once

#include <cstdint>

#include "src/core/status.h"
#include "transports/transport.h"

namespace tempo::tune {

enum class AllReduceAlgo { Ring, RecursiveDoubling, Direct, Hierarchical, Tree };
const char* algoName(AllReduceAlgo a);
// Phase 2 of the hierarchical all-reduce: how the hosts' leaders all-reduce.
enum class LeaderAlgo { RecursiveDoubling, Tree, Ring };
const char* algoName(LeaderAlgo a);

// One level of the cost model: a message costs alphaUs plus its bytes at gbps (GB/s).
struct LinkCost {
  double alphaUs = 0;
  double gbps = 1;
  double us(double bytes) const { return alphaUs + bytes / (gbps * 1e3); }
};

struct Context {
  int nranks = 1;
  transport::Kind slowest = transport::Kind::Loopback;  // slowest transport to any peer
  bool oversubscribed = false;  // more ranks on this machine than cores
  uint64_t scratchBytes = 0;    // the communicator's scratch memory
  int hosts = 1;                // hosts the ranks are on
  int channels = 1;             // channels of the ring collectives (channelCount)
  int maxRanksPerHost = 1;
  // The two levels of the cost model: between ranks of one host, and between hosts (each
  // host's share of the network; see netCost).
  LinkCost local{8, 10};
  LinkCost net{30, 1.25};
};

// The network level from TEMPO_NET_ALPHA_US and TEMPO_NET_MBITS, with defaults for the
// transport that carries it.
LinkCost netCost(transport::Kind slowest);

struct AllReduceChoice {
  AllReduceAlgo algo = AllReduceAlgo::Ring;
  LeaderAlgo leaders = LeaderAlgo::RecursiveDoubling;  // Hierarchical only
  uint64_t chunkBytes = 0;       // ring: bytes per segment column; tree: per column of a tree
  uint64_t localChunkBytes = 0;  // Hierarchical: the chains on each host
};

// `bytes` is one rank's payload; `average` (ncclAvg) rules out the hierarchical algorithm.
// TEMPO_ALGO (auto, ring, rd, direct, tree, hier) wins over NCCL_ALGO (Ring, Tree: the
// hierarchical all-reduce with recursive doubling or the double binary tree among leaders).
// On one host the choice follows measured thresholds; across hosts it is the candidate
// the cost model predicts fastest (predictAllReduce).
AllReduceChoice allReduce(uint64_t bytes, const Context& ctx, bool average = false);

// The cost model across hosts, per candidate: ring over all ranks; recursive doubling or
// the double binary tree over all ranks; and, where some host has several ranks, the
// hierarchical all-reduce with each leader algorithm, its chains on the local level.
// Returns how many candidates were written (at most kMaxCandidates).
struct Candidate {
  AllReduceAlgo algo;
  LeaderAlgo leaders;
  double us;
};
inline constexpr int kMaxCandidates = 6;
int predictAllReduce(uint64_t bytes, const Context& ctx, bool average, Candidate* out);
// "ring", "rd", "tree", "hier/rd", ...
const char* candidateName(const Candidate& c);

// What ncclGroupSimulateEnd reports: the cost model's time for one call, in microseconds,
// with the algorithm the tuner picks for it (its predictAllReduce candidate for an
// all-reduce; the chain or tree for a broadcast; the ring for all-gather and
// reduce-scatter; the chain for reduce; the root's n - 1 messages for gather and scatter;
// n - 1 pairwise rounds for all-to-all). Across hosts every message is costed on the
// network level, as predictAllReduce's flat candidates are; on one host on the local one.
// `bytes` is the size as each kind counts it: the vector for all-reduce, broadcast and
// reduce; one rank's block for all-gather, reduce-scatter, gather and scatter; the largest
// block to or from one peer for all-to-all. One rank costs 0: nothing travels.
enum class Shape { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, Gather, Scatter, AllToAll };
double predictUs(Shape shape, uint64_t bytes, const Context& ctx, bool average = false);
// A communicator's point-to-point calls of one group progress together: the larger of the
// bytes it sends and receives, on the network level when a peer is on another host.
double predictP2pUs(uint64_t bytes, bool acrossHosts, const Context& ctx);

// Broadcast: a pipelined chain moves large messages at the transport's bandwidth; a
// binomial tree reaches n ranks in ceil(log2 n) hops instead of n-1, which wins while
// latency dominates.
enum class BroadcastAlgo { Chain, Tree };
BroadcastAlgo broadcast(uint64_t bytes, const Context& ctx);
const char* algoName(BroadcastAlgo a);

// Pipelining unit of a ring whose per-rank segment is `segmentBytes` (all-reduce,
// all-gather, reduce-scatter), and of a chain carrying `bytes` (broadcast, reduce).
// TEMPO_CHUNK_SIZE overrides both.
uint64_t ringChunk(uint64_t segmentBytes, const Context& ctx);
uint64_t chainChunk(uint64_t bytes, const Context& ctx);

// Channels: the ring collectives split into parts that run on rings of their own, each
// over a rail (NIC) of its own where ranks have several (src/algo/channels.h).
inline constexpr int kMaxChannels = 16;
// The communicator's channel count: one per rail, within NCCL_MIN_NCHANNELS and
// NCCL_MAX_NCHANNELS (and 1..kMaxChannels).
int channelCount(int rails);
// The channels a ring collective of `bytes` (the whole vector) uses: ctx.channels, fewer
// when parts would drop below 256 KiB (each channel's messages cost their own latency).
int ringChannels(uint64_t bytes, const Context& ctx);

// Validates TEMPO_ALGO (called at init so a typo fails early and clearly).
Status checkOverrides();

}  // namespace tempo::tune
