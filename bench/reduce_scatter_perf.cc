// reduce_scatter_perf: nccl-tests' reduce-scatter benchmark on Tempo (host memory).
// Each rank receives recvcount = size / nranks elements (16-byte multiples): block r of
// the reduction. In place: recvbuff = sendbuff + rank * recvcount. algbw counts the whole
// input; busbw = algbw * (n-1)/n.
#include "bench/common/harness.h"
#include "bench/common/shapes.h"
#include "bench/common/types.h"

namespace {

using namespace tempo::bench;

CheckResult check(const CollCounts& c, const RankData& r, const DataSpec& d, int, bool inPlace) {
  CheckResult res;
  res.wrong = countWrongReduced(r.recv, c.recvCount, size_t(r.rank) * c.recvCount, d);
  if (!inPlace) res.clobbered = countWrongInput(r.send, c.sendCount, 0, d, r.rank);
  return res;
}

ncclResult_t run(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int,
                 ncclComm_t comm, hipStream_t stream) {
  return ncclReduceScatter(send, recv, count, type, op, comm, stream);
}

constexpr CollTest kReduceScatter{"ReduceScatter", false, true, scatteringCounts, ownInputs, check, gatheredBw, run};

}  // namespace

int main(int argc, char** argv) { return runPerfTool(argc, argv, kReduceScatter); }
