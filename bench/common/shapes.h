// The buffer shapes and bandwidth formulas the perf tools share (nccl-tests'
// getCollByteCount and GetBw families), so each tool states only what is its own.
#pragma once

#include <cstddef>
#include <cstring>

#include "bench/common/harness.h"
#include "bench/common/types.h"

namespace tempo::bench {

// count elements in, count out, in place at offset 0 (all-reduce, broadcast, reduce, send/recv).
inline CollCounts sameCounts(size_t count, size_t, int) {
  CollCounts c;
  c.sendCount = c.recvCount = c.paramCount = count;
  return c;
}
// count / n (16-byte multiples) in, n blocks out; in place, the input is block `rank` of
// the output (all-gather, gather).
inline CollCounts gatheringCounts(size_t count, size_t eltSize, int n) {
  CollCounts c;
  c.sendCount = c.paramCount = c.sendInplaceOffset = perRankCount16(count, eltSize, n);
  c.recvCount = c.sendCount * size_t(n);
  return c;
}
// n blocks in, count / n out; in place, the output is block `rank` of the input
// (reduce-scatter, scatter).
inline CollCounts scatteringCounts(size_t count, size_t eltSize, int n) {
  CollCounts c;
  c.recvCount = c.paramCount = c.recvInplaceOffset = perRankCount16(count, eltSize, n);
  c.sendCount = c.recvCount * size_t(n);
  return c;
}

// Every rank's own input; the output cleared unless it overlaps the input (in place).
inline void ownInputs(const CollCounts& c, const RankData& r, const DataSpec& d, int, bool inPlace) {
  if (!inPlace) std::memset(r.recv, 0, c.recvCount * typeSize(d.type));
  prepareInput(r.send, c.sendCount, 0, d, r.rank);
}

// busbw = algbw (broadcast, reduce, send/recv), algbw over count elements.
inline void flatBw(size_t count, size_t typeSize, double sec, double* algBw, double* busBw, int) {
  *algBw = *busBw = double(count * typeSize) / 1.0e9 / sec;
}
// algbw over n x count elements, busbw = algbw (n-1)/n (all-gather, reduce-scatter,
// all-to-all, gather, scatter).
inline void gatheredBw(size_t count, size_t typeSize, double sec, double* algBw, double* busBw, int n) {
  *algBw = double(count * typeSize) * n / 1.0e9 / sec;
  *busBw = *algBw * double(n - 1) / n;
}

}  // namespace tempo::bench
