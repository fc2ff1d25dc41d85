// Planners for the collectives other than all-reduce: ring all-gather and reduce-scatter,
// pipelined chain broadcast and reduce, and the direct exchanges (gather, scatter,
// all-to-all and its v variant).
//
// Layouts follow NCCL. `count` is per rank where NCCL's is: all-gather's sendcount,
// reduce-scatter's recvcount, all-to-all's per-peer count, gather's and scatter's per-rank
// count; broadcast's and reduce's whole vector. Buffers are the op's Input (sendbuff) and
// Output (recvbuff); in place means NCCL's in-place layout for that collective:
//   all-gather      sendbuff == recvbuff + rank * count
//   reduce-scatter  recvbuff == sendbuff + rank * count
//   broadcast, reduce   sendbuff == recvbuff
//   gather (root)   sendbuff == recvbuff + root * count
//   scatter (root)  recvbuff == sendbuff + root * count
// Planners only read the flag; the caller checks the layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "src/algo/args.h"
#include "src/algo/plan.h"

namespace tempo::algo {


// Ring in rank order. Step s: send block r-s to r+1, receive block r-s-1 from r-1.
void planRingAllGather(const CollPlanArgs& a, Plan& out);
// Ring in rank order, partial sums in scratch slots; rank r ends with block r reduced.
void planRingReduceScatter(const CollPlanArgs& a, Plan& out);
// Chain root, root+1, ..., root-1 with chunks pipelined down it.
void planChainBroadcast(const CollPlanArgs& a, Plan& out);
// Binomial tree from the root (ceil(log2 n) hops instead of n-1), chunks pipelined down
// it; the latency choice for small broadcasts.
void planTreeBroadcast(const CollPlanArgs& a, Plan& out);
// The same chain in reverse: root-1 starts, every rank folds its input in, root ends.
void planChainReduce(const CollPlanArgs& a, Plan& out);
// Every rank sends its block to the root, which receives block j from rank j.
void planGather(const CollPlanArgs& a, Plan& out);
// The root sends block j to rank j.
void planScatter(const CollPlanArgs& a, Plan& out);

// All-to-all with per-peer counts and displacements in elements (ncclAlltoAllv); the
// fixed-count all-to-all passes count, j*count. Not in place. Pairwise order: the k-th
// exchange sends to r+k and receives from r-k, so every peer is busy at once.
struct AllToAllvArgs {
  uint32_t typeSize = 4;
  int rank = 0;
  int nranks = 1;
  std::span<const size_t> sendCounts, sendDispls, recvCounts, recvDispls;  // nranks each
};
void planAllToAllv(const AllToAllvArgs& a, Plan& out);

// How many pipelining columns a transfer of `bytes` takes with `chunk`-byte columns,
// enlarging the chunk when needed so that columns * msgsPerColumn fits the 16-bit message
// index of a collective's tags. Returns the chunk actually used.
uint64_t columnChunk(uint64_t bytes, uint64_t chunk, uint32_t msgsPerColumn, uint32_t typeSize);

}  // namespace tempo::algo
