// The arguments every planner of a whole-vector or per-rank-block collective takes: one
// rank's view of the call. Each planner reads the fields it needs (the all-reduce
// planners ignore root and chunkBytes, for instance).
#pragma once

#include <cstdint>

namespace tempo::algo {

struct CollPlanArgs {
  uint64_t count = 0;      // elements (per rank for the gathering collectives: collectives.h)
  uint32_t typeSize = 4;   // bytes per element
  bool inPlace = false;
  bool average = false;    // reductions: divide the final sums by nranks
  int rank = 0;
  int nranks = 1;
  int root = 0;                       // broadcast, reduce, gather, scatter
  uint64_t chunkBytes = 512 * 1024;   // pipelining unit
  uint64_t scratchBytes = 4u << 20;   // scratch available for partial sums
};

}  // namespace tempo::algo
