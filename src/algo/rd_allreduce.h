// Recursive-doubling all-reduce planner, for small messages: log2(p) full-vector
// exchanges with partners rank ^ 2^k among the largest power of two p <= n ranks; the
// n - p extra ranks first fold their input into a partner and get the result back at
// the end. Latency-bound sizes pay log2(p)+2 message latencies instead of the ring's
// 2(n-1). Every pair reduces (own op partner's); the reducers are commutative
// bit-for-bit, so all ranks end with identical bits. Partners are taken in ring positions
// (CollPlanArgs::ring, the topology ring when given), so the first exchanges stay inside
// a host or a leaf switch and only the last ones cross the upper levels.
#pragma once

#include <cstdint>

#include "src/algo/args.h"
#include "src/algo/plan.h"

namespace tempo::algo {

using RdAllReduceArgs = CollPlanArgs;  // count, typeSize, inPlace, average, rank, nranks, ring

// Scratch the plan needs: one full vector.
inline uint64_t rdScratchBytes(uint64_t count, uint32_t typeSize) { return count * typeSize; }

void planRdAllReduce(const RdAllReduceArgs& a, Plan& out);

}  // namespace tempo::algo
