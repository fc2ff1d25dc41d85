// broadcast_perf: nccl-tests' broadcast benchmark on Tempo (host memory). The root's
// count elements reach every rank; in place, sendbuff == recvbuff. busbw = algbw.
#include <cstring>

#include "bench/common/harness.h"
#include "bench/common/shapes.h"
#include "bench/common/types.h"

namespace {

using namespace tempo::bench;

void initData(const CollCounts& c, const RankData& r, const DataSpec& d, int root, bool) {
  std::memset(r.recv, 0, c.recvCount * typeSize(d.type));
  if (r.rank == root) prepareInput(r.send, c.sendCount, 0, d, root);
}

CheckResult check(const CollCounts& c, const RankData& r, const DataSpec& d, int root, bool inPlace) {
  CheckResult res;
  res.wrong = countWrongInput(r.recv, c.recvCount, 0, d, root);
  if (!inPlace && r.rank == root) res.clobbered = countWrongInput(r.send, c.sendCount, 0, d, root);
  return res;
}

ncclResult_t run(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t, int root,
                 ncclComm_t comm, hipStream_t stream) {
  return ncclBroadcast(send, recv, count, type, root, comm, stream);
}

constexpr CollTest kBroadcast{"Broadcast", true, false, sameCounts, initData, check, flatBw, run};

}  // namespace

int main(int argc, char** argv) { return runPerfTool(argc, argv, kBroadcast); }
