// all_reduce_perf: nccl-tests' all-reduce benchmark on Tempo (host memory).
// count = bytes / typesize on every rank; in place, sendbuff == recvbuff;
// busbw = algbw * 2(n-1)/n.
#include "bench/common/harness.h"
#include "bench/common/shapes.h"
#include "bench/common/types.h"

namespace {

using namespace tempo::bench;

CheckResult check(const CollCounts& c, const RankData& r, const DataSpec& d, int, bool inPlace) {
  CheckResult res;
  res.wrong = countWrongReduced(r.recv, c.recvCount, 0, d);
  if (!inPlace) res.clobbered = countWrongInput(r.send, c.sendCount, 0, d, r.rank);
  return res;
}

void getBw(size_t count, size_t typeSize, double sec, double* algBw, double* busBw, int nranks) {
  const double base = double(count * typeSize) / 1.0e9 / sec;
  *algBw = base;
  *busBw = base * (2.0 * (nranks - 1)) / nranks;
}

ncclResult_t run(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int,
                 ncclComm_t comm, hipStream_t stream) {
  return ncclAllReduce(send, recv, count, type, op, comm, stream);
}

constexpr CollTest kAllReduce{"AllReduce", false, true, sameCounts, ownInputs, check, getBw, run};

}  // namespace

int main(int argc, char** argv) { return runPerfTool(argc, argv, kAllReduce); }
