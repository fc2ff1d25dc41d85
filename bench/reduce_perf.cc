// reduce_perf: nccl-tests' reduce benchmark on Tempo (host memory). The reduction of every
// rank's count elements lands on the root; in place, sendbuff == recvbuff. busbw = algbw.
#include <cstring>

#include "bench/common/harness.h"
#include "bench/common/types.h"

namespace {

using namespace tempo::bench;

CollCounts counts(size_t count, size_t, int) {
  CollCounts c;
  c.sendCount = c.recvCount = c.paramCount = count;
  return c;
}

void initData(const CollCounts& c, const RankData& r, const DataSpec& d, int, bool inPlace) {
  if (!inPlace) std::memset(r.recv, 0, c.recvCount * typeSize(d.type));
  prepareInput(r.send, c.sendCount, 0, d, r.rank);
}

CheckResult check(const CollCounts& c, const RankData& r, const DataSpec& d, int root, bool inPlace) {
  CheckResult res;
  if (r.rank == root) res.wrong = countWrongReduced(r.recv, c.recvCount, 0, d);
  if (!inPlace) res.clobbered = countWrongInput(r.send, c.sendCount, 0, d, r.rank);
  return res;
}

void getBw(size_t count, size_t typeSize, double sec, double* algBw, double* busBw, int) {
  *algBw = *busBw = double(count * typeSize) / 1.0e9 / sec;
}

ncclResult_t run(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                 ncclComm_t comm, hipStream_t stream) {
  return ncclReduce(send, recv, count, type, op, root, comm, stream);
}

constexpr CollTest kReduce{"Reduce", true, true, counts, initData, check, getBw, run};

}  // namespace

int main(int argc, char** argv) { return runPerfTool(argc, argv, kReduce); }
