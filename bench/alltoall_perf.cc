// alltoall_perf: nccl-tests' all-to-all benchmark on Tempo (host memory). Every rank sends
// count = size / nranks elements to every rank; block j of rank r's output is block r of
// rank j's input. In-place all-to-all is not supported (its columns print N/A).
// algbw counts count * nranks elements; busbw = algbw * (n-1)/n.
#include <cstring>

#include "bench/common/harness.h"
#include "bench/common/shapes.h"
#include "bench/common/types.h"

namespace {

using namespace tempo::bench;

CollCounts counts(size_t count, size_t eltSize, int n) {
  CollCounts c;
  c.paramCount = perRankCount16(count, eltSize, n);
  c.sendCount = c.recvCount = c.paramCount * size_t(n);
  return c;
}

void initData(const CollCounts& c, const RankData& r, const DataSpec& d, int, bool) {
  std::memset(r.recv, 0, c.recvCount * typeSize(d.type));
  prepareInput(r.send, c.sendCount, 0, d, r.rank);
}

CheckResult check(const CollCounts& c, const RankData& r, const DataSpec& d, int, bool) {
  CheckResult res;
  const size_t block = c.paramCount, blockBytes = block * typeSize(d.type);
  for (int j = 0; j < d.nranks; ++j)
    res.wrong += countWrongInput(r.recv + size_t(j) * blockBytes, block, size_t(r.rank) * block, d, j);
  res.clobbered = countWrongInput(r.send, c.sendCount, 0, d, r.rank);
  return res;
}

ncclResult_t run(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t, int, ncclComm_t comm,
                 hipStream_t stream) {
  return ncclAlltoAll(send, recv, count, type, comm, stream);
}

constexpr CollTest kAllToAll{"AllToAll", false, false, counts, initData, check, gatheredBw, run, /*inPlace=*/false};

}  // namespace

int main(int argc, char** argv) { return runPerfTool(argc, argv, kAllToAll); }
