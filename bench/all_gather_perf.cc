// all_gather_perf: nccl-tests' all-gather benchmark on Tempo (host memory).
// Each rank contributes count = size / nranks elements (16-byte multiples); the output
// holds every rank's block in rank order. In place: sendbuff = recvbuff + rank * count.
// algbw counts the whole output; busbw = algbw * (n-1)/n.
#include "bench/common/harness.h"
#include "bench/common/shapes.h"
#include "bench/common/types.h"

namespace {

using namespace tempo::bench;

CheckResult check(const CollCounts& c, const RankData& r, const DataSpec& d, int, bool inPlace) {
  CheckResult res;
  const size_t blockBytes = c.sendCount * typeSize(d.type);
  for (int j = 0; j < d.nranks; ++j) res.wrong += countWrongInput(r.recv + size_t(j) * blockBytes, c.sendCount, 0, d, j);
  if (!inPlace) res.clobbered = countWrongInput(r.send, c.sendCount, 0, d, r.rank);
  return res;
}

ncclResult_t run(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t, int, ncclComm_t comm,
                 hipStream_t stream) {
  return ncclAllGather(send, recv, count, type, comm, stream);
}

constexpr CollTest kAllGather{"AllGather", false, false, gatheringCounts, ownInputs, check, gatheredBw, run};

}  // namespace

int main(int argc, char** argv) { return runPerfTool(argc, argv, kAllGather); }
