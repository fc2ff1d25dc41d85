// One-shot all-reduce planner for small messages on few ranks: every rank sends its
// whole input to every other rank at once and reduces the n vectors locally, in rank
// order, so every rank computes the same sequence of operations and ends with identical
// bits. One round of messages instead of log2(n) or 2(n-1): the cheapest schedule when
// every message costs a context switch (more ranks than cores), at the price of n-1
// messages and reductions per rank.
#pragma once

#include <cstdint>

#include "src/algo/args.h"
#include "src/algo/plan.h"

namespace tempo::algo {

using DirectAllReduceArgs = CollPlanArgs;  // count, typeSize, inPlace, average, rank, nranks

// Scratch the plan needs: a slot per peer, plus an accumulator when in place.
inline uint64_t directScratchBytes(uint64_t count, uint32_t typeSize, int nranks, bool inPlace) {
  return count * typeSize * uint64_t(nranks - 1 + (inPlace ? 1 : 0));
}

void planDirectAllReduce(const DirectAllReduceArgs& a, Plan& out);

}  // namespace tempo::algo
