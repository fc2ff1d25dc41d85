// reduce_perf: nccl-tests' reduce benchmark on Tempo (host memory). The reduction of every
// rank's count elements lands on the root; in place, sendbuff == recvbuff. busbw = algbw.
#include "bench/common/harness.h"
#include "bench/common/shapes.h"
#include "bench/common/types.h"

namespace {

using namespace tempo::bench;

CheckResult check(const CollCounts& c, const RankData& r, const DataSpec& d, int root, bool inPlace) {
  CheckResult res;
  if (r.rank == root) res.wrong = countWrongReduced(r.recv, c.recvCount, 0, d);
  if (!inPlace) res.clobbered = countWrongInput(r.send, c.sendCount, 0, d, r.rank);
  return res;
}

ncclResult_t run(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                 ncclComm_t comm, hipStream_t stream) {
  return ncclReduce(send, recv, count, type, op, root, comm, stream);
}

constexpr CollTest kReduce{"Reduce", true, true, sameCounts, ownInputs, check, flatBw, run};

}  // namespace

int main(int argc, char** argv) { return runPerfTool(argc, argv, kReduce); }
