// gather_perf: nccl-tests' gather benchmark on Tempo (host memory). Every rank sends
// count = size / nranks elements; the root's output holds them in rank order. In place on
// the root: sendbuff = recvbuff + root * count. algbw counts count * nranks elements;
// busbw = algbw * (n-1)/n.
#include "bench/common/harness.h"
#include "bench/common/shapes.h"
#include "bench/common/types.h"

namespace {

using namespace tempo::bench;

CheckResult check(const CollCounts& c, const RankData& r, const DataSpec& d, int root, bool inPlace) {
  CheckResult res;
  const size_t blockBytes = c.sendCount * typeSize(d.type);
  if (r.rank == root)
    for (int j = 0; j < d.nranks; ++j) res.wrong += countWrongInput(r.recv + size_t(j) * blockBytes, c.sendCount, 0, d, j);
  if (!inPlace) res.clobbered = countWrongInput(r.send, c.sendCount, 0, d, r.rank);
  return res;
}

ncclResult_t run(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t, int root,
                 ncclComm_t comm, hipStream_t stream) {
  return ncclGather(send, recv, count, type, root, comm, stream);
}

constexpr CollTest kGather{"Gather", true, false, gatheringCounts, ownInputs, check, gatheredBw, run};

}  // namespace

int main(int argc, char** argv) { return runPerfTool(argc, argv, kGather); }
