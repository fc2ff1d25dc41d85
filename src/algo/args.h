// The arguments every planner of a whole-vector or per-rank-block collective takes: one
// rank's view of the call. Each planner reads the fields it needs (the all-reduce
// planners ignore root and chunkBytes, for instance).
#pragma once

#include <cstdint>
#include <span>

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
  // Ring collectives: ring[p] is the rank at ring position p (src/topo's topology ring);
  // empty means rank order. Every rank passes the same ring.
  std::span<const int> ring;
  // Ring all-gather and reduce-scatter: bytes from one rank's block to the next in the
  // buffer that holds all of them (0: the block's own size). A channel's part of every
  // block is planned with the whole blocks' stride (channels.h).
  uint64_t blockStride = 0;
};

// Positions on a ring given as CollPlanArgs::ring.
struct RingView {
  explicit RingView(const CollPlanArgs& a) : n(a.nranks), ring(a.ring) {
    pos = a.rank;
    for (int p = 0; p < int(ring.size()); ++p)
      if (ring[size_t(p)] == a.rank) pos = p;
  }
  // The rank at position p (any integer, taken modulo n).
  int rankAt(int p) const {
    const int m = ((p % n) + n) % n;
    return ring.empty() ? m : ring[size_t(m)];
  }
  int n, pos;
  std::span<const int> ring;
};

}  // namespace tempo::algo
