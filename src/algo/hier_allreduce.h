// Hierarchical all-reduce: the ranks of each host first reduce onto their host's leader
// (a pipelined chain), the leaders all-reduce among themselves (recursive doubling for
// small vectors, the double binary tree or the ring for larger ones), and each leader broadcasts the result to its host
// (a pipelined chain). Only one message per host crosses the network per phase-2 step,
// whatever the number of ranks per host, and small vectors pay log2(hosts) network
// latencies instead of the ring's 2(n-1). Correct for uneven ranks per host and for one
// rank per host (phases 1 and 3 are then empty).
//
// The phases are planned by the existing planners in their own rank spaces and composed
// (compose, don't copy): peers are mapped to communicator ranks, message ids are moved
// past the previous phases', every step of a phase that depends on nothing waits for the
// previous phase's last steps, and phases 2 and 3 work in place on the output.
#pragma once

#include <cstdint>
#include <span>

#include "src/algo/args.h"
#include "src/algo/plan.h"

namespace tempo::algo {

// How the leaders all-reduce their hosts' sums (phase 2).
enum class LeaderAlgo : uint8_t {
  RecursiveDoubling,  // log2(hosts) whole-vector exchanges: the latency choice
  Tree,               // the pipelined double binary tree (tree_allreduce.h)
  Ring,               // the ring among leaders: the bandwidth choice
};

struct HierAllReduceArgs {
  // count, typeSize, inPlace, rank, nranks, chunkBytes (phase 2's pipelining unit),
  // scratchBytes; ring (optional): leaders are taken in its order
  CollPlanArgs base;
  std::span<const int> hostOf;    // hostOf[r]: rank r's host, numbered 0..hosts-1
  LeaderAlgo leaders = LeaderAlgo::RecursiveDoubling;
  uint64_t localChunkBytes = 0;   // phases 1 and 3 (0: base.chunkBytes)
};

// `average` is not supported (the caller picks another algorithm for ncclAvg).
void planHierAllReduce(const HierAllReduceArgs& a, Plan& out);

}  // namespace tempo::algo
