// all_gather_perf: nccl-tests' all-gather benchmark on Tempo (host memory).
// Each rank contributes count = size / nranks elements (16-byte multiples); the output
// holds every rank's block in rank order. In place: sendbuff = recvbuff + rank * count.
// algbw counts the whole output; busbw = algbw * (n-1)/n.
#include <cstring>

#include "bench/common/harness.h"
#include "bench/common/types.h"

namespace {

using namespace tempo::bench;

CollCounts counts(size_t count, size_t eltSize, int n) {
  CollCounts c;
  c.sendCount = c.paramCount = c.sendInplaceOffset = perRankCount16(count, eltSize, n);
  c.recvCount = c.sendCount * size_t(n);
  return c;
}

void initData(const CollCounts& c, const RankData& r, const DataSpec& d, int, bool inPlace) {
  if (!inPlace) std::memset(r.recv, 0, c.recvCount * typeSize(d.type));
  prepareInput(r.send, c.sendCount, 0, d, r.rank);
}

CheckResult check(const CollCounts& c, const RankData& r, const DataSpec& d, int, bool inPlace) {
  CheckResult res;
  const size_t blockBytes = c.sendCount * typeSize(d.type);
  for (int j = 0; j < d.nranks; ++j) res.wrong += countWrongInput(r.recv + size_t(j) * blockBytes, c.sendCount, 0, d, j);
  if (!inPlace) res.clobbered = countWrongInput(r.send, c.sendCount, 0, d, r.rank);
  return res;
}

void getBw(size_t count, size_t typeSize, double sec, double* algBw, double* busBw, int n) {
  *algBw = double(count * typeSize) * n / 1.0e9 / sec;
  *busBw = *algBw * double(n - 1) / n;
}

ncclResult_t run(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t, int, ncclComm_t comm,
                 hipStream_t stream) {
  return ncclAllGather(send, recv, count, type, comm, stream);
}

constexpr CollTest kAllGather{"AllGather", false, false, counts, initData, check, getBw, run};

}  // namespace

int main(int argc, char** argv) { return runPerfTool(argc, argv, kAllGather); }
