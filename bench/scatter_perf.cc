// scatter_perf: nccl-tests' scatter benchmark on Tempo (host memory). The root sends
// count = size / nranks elements to every rank, block r to rank r. In place on the root:
// recvbuff = sendbuff + root * count. algbw counts count * nranks elements;
// busbw = algbw * (n-1)/n.
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

void getBw(size_t count, size_t typeSize, double sec, double* algBw, double* busBw, int n) {
  *algBw = double(count * typeSize) * n / 1.0e9 / sec;
  *busBw = *algBw * double(n - 1) / n;
}

ncclResult_t run(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t, int root,
                 ncclComm_t comm, hipStream_t stream) {
  return ncclScatter(send, recv, count, type, root, comm, stream);
}

constexpr CollTest kScatter{"Scatter", true, false, counts, initData, check, getBw, run};

}  // namespace

int main(int argc, char** argv) { return runPerfTool(argc, argv, kScatter); }
