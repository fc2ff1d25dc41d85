// Ring all-reduce planner: reduce-scatter then all-gather around one ring, pipelined in
// columns of chunkBytes per segment.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/algo/plan.h"

namespace tempo::algo {

struct RingAllReduceArgs {
  uint64_t count = 0;        // elements
  uint32_t typeSize = 4;     // bytes per element
  bool inPlace = false;      // input and output are the same buffer
  bool average = false;      // divide the final sums by nranks
  int pos = 0;               // this rank's ring position
  int nranks = 1;
  int nextRank = 0;          // the rank at position pos+1
  int prevRank = 0;          // the rank at position pos-1
  uint64_t chunkBytes = 512 * 1024;   // bytes per segment column (rounded to elements)
  uint64_t scratchBytes = 4u << 20;   // scratch available for in-place reductions
};

// Element range [begin, end) of segment `seg`: segments are ceil(count/n) elements
// rounded up to 64 bytes, so trailing segments may be short or empty.
struct Range {
  uint64_t begin, end;
  uint64_t size() const { return end - begin; }
};
Range ringSegment(uint64_t count, uint32_t typeSize, int nranks, int seg);

// Appends the plan to `out` (which the caller has cleared; its capacity is reused).
void planRingAllReduce(const RingAllReduceArgs& a, Plan& out);

}  // namespace tempo::algo
