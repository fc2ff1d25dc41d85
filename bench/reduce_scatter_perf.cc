// reduce_scatter_perf: nccl-tests' reduce-scatter benchmark on Tempo (host memory).
// Each rank receives recvcount = size / nranks elements (16-byte multiples): block r of
// the reduction. In place: recvbuff = sendbuff + rank * recvcount. algbw counts the whole
// input; busbw = algbw * (n-1)/n.
#include <cstring>

#include "bench/common/harness.h"
#include "bench/common/types.h"

namespace {

using namespace tempo::bench;

CollCounts counts(size_t count, size_t eltSize, int n) {
  CollCounts c;
  c.recvCount = c.paramCount = c.recvInplaceOffset = perRankCount16(count, eltSize, n);
  c.sendCount = c.recvCount * size_t(n);
  return c;
}

void initData(const CollCounts& c, const RankData& r, const DataSpec& d, int, bool inPlace) {
  if (!inPlace) std::memset(r.recv, 0, c.recvCount * typeSize(d.type));
  prepareInput(r.send, c.sendCount, 0, d, r.rank);
}

CheckResult check(const CollCounts& c, const RankData& r, const DataSpec& d, int, bool inPlace) {
  CheckResult res;
  res.wrong = countWrongReduced(r.recv, c.recvCount, size_t(r.rank) * c.recvCount, d);
  if (!inPlace) res.clobbered = countWrongInput(r.send, c.sendCount, 0, d, r.rank);
  return res;
}

void getBw(size_t count, size_t typeSize, double sec, double* algBw, double* busBw, int n) {
  *algBw = double(count * typeSize) * n / 1.0e9 / sec;
  *busBw = *algBw * double(n - 1) / n;
}

ncclResult_t run(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int,
                 ncclComm_t comm, hipStream_t stream) {
  return ncclReduceScatter(send, recv, count, type, op, comm, stream);
}

constexpr CollTest kReduceScatter{"ReduceScatter", false, true, counts, initData, check, getBw, run};

}  // namespace

int main(int argc, char** argv) { return runPerfTool(argc, argv, kReduceScatter); }
