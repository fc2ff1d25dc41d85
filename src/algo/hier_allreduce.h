// Hierarchical all-reduce: the ranks of each host first reduce onto their host's leader
// (a pipelined chain), the leaders all-reduce among themselves (recursive doubling for
// small vectors, the ring for large), and each leader broadcasts the result to its host
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

struct HierAllReduceArgs {
  // count, typeSize, inPlace, rank, nranks, chunkBytes, scratchBytes; ring (optional):
  // leaders are taken in its order
  CollPlanArgs base;
  std::span<const int> hostOf;    // hostOf[r]: rank r's host, numbered 0..hosts-1
  // Leaders' vectors up to this size use recursive doubling, larger ones the ring. On the
  // emulated fabric (8 hosts, 2 leaves, 4:1 uplinks, leaders in topology order, medians of
  // 3 runs) recursive doubling took 0.89 ms at 16 KiB against the ring's 2.75, and 2.84 ms
  // at 32 KiB against 2.55: from there its whole-vector exchanges are bandwidth-bound.
  uint64_t leaderRdBytes = 16 << 10;
};

// `average` is not supported (the caller picks another algorithm for ncclAvg).
void planHierAllReduce(const HierAllReduceArgs& a, Plan& out);

}  // namespace tempo::algo
