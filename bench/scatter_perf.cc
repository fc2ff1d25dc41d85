// scatter_perf: nccl-tests' scatter benchmark on Tempo (host memory). The root sends
// count = size / nranks elements to every rank, block r to rank r. In place on the root:
// recvbuff = sendbuff + root * count. algbw counts count * nranks elements;
// busbw = algbw * (n-1)/n.
#include <cstring>

#include "bench/common/harness.h"
#include "bench/common/shapes.h"
#include "bench/common/types.h"

namespace {

using namespace tempo::bench;

void initData(const CollCounts& c, const RankData& r, const DataSpec& d, int root, bool inPlace) {
  if (!inPlace) std::memset(r.recv, 0, c.recvCount * typeSize(d.type));
  if (r.rank == root) prepareInput(r.send, c.sendCount, 0, d, root);
}

CheckResult check(const CollCounts& c, const RankData& r, const DataSpec& d, int root, bool inPlace) {
  CheckResult res;
  res.wrong = countWrongInput(r.recv, c.recvCount, size_t(r.rank) * c.recvCount, d, root);
  if (!inPlace && r.rank == root) res.clobbered = countWrongInput(r.send, c.sendCount, 0, d, root);
  return res;
}

ncclResult_t run(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t, int root,
                 ncclComm_t comm, hipStream_t stream) {
  return ncclScatter(send, recv, count, type, root, comm, stream);
}

constexpr CollTest kScatter{"Scatter", true, false, scatteringCounts, initData, check, gatheredBw, run};

}  // namespace

int main(int argc, char** argv) { return runPerfTool(argc, argv, kScatter); }
