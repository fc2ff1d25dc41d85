// Algorithm parameters chosen per collective: pure functions of the call and of what the
// communicator knows about its transports and host. TEMPO_ALGO and TEMPO_CHUNK_SIZE
// override the choices.
#pragma once

#include <cstdint>

#include "src/core/status.h"
#include "transports/transport.h"

namespace tempo::tune {

enum class AllReduceAlgo { Ring, RecursiveDoubling, Direct, Hierarchical };
const char* algoName(AllReduceAlgo a);

struct Context {
  int nranks = 1;
  transport::Kind slowest = transport::Kind::Loopback;  // slowest transport to any peer
  bool oversubscribed = false;  // more ranks on this host than cores
  uint64_t scratchBytes = 0;    // the communicator's scratch memory
  int hosts = 1;                // hosts the ranks are on
  int maxRanksPerHost = 1;
};

struct AllReduceChoice {
  AllReduceAlgo algo = AllReduceAlgo::Ring;
  uint64_t chunkBytes = 0;  // ring: bytes per segment column
};

// `bytes` is one rank's payload; `average` (ncclAvg) rules out the hierarchical algorithm.
// TEMPO_ALGO (auto, ring, rd, direct, hier) wins over NCCL_ALGO (Ring, Tree: the
// hierarchical all-reduce, whose leaders use a tree-shaped recursive doubling or a ring).
AllReduceChoice allReduce(uint64_t bytes, const Context& ctx, bool average = false);

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

// Validates TEMPO_ALGO (called at init so a typo fails early and clearly).
Status checkOverrides();

}  // namespace tempo::tune
