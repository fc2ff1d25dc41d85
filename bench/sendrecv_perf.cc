// sendrecv_perf: nccl-tests' send/receive benchmark on Tempo (host memory). Every rank
// sends count elements to rank+1 and receives count from rank-1, in one group. In place:
// sendbuff == recvbuff is not allowed by the pattern, so those columns print N/A.
// busbw = algbw.
#include <cstring>

#include "bench/common/harness.h"
#include "bench/common/shapes.h"
#include "bench/common/types.h"

namespace {

using namespace tempo::bench;

void initData(const CollCounts& c, const RankData& r, const DataSpec& d, int, bool) {
  std::memset(r.recv, 0, c.recvCount * typeSize(d.type));
  prepareInput(r.send, c.sendCount, 0, d, r.rank);
}

CheckResult check(const CollCounts& c, const RankData& r, const DataSpec& d, int, bool) {
  CheckResult res;
  res.wrong = countWrongInput(r.recv, c.recvCount, 0, d, (r.rank + d.nranks - 1) % d.nranks);
  res.clobbered = countWrongInput(r.send, c.sendCount, 0, d, r.rank);
  return res;
}

ncclResult_t run(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t, int, ncclComm_t comm,
                 hipStream_t stream) {
  int rank = 0, n = 1;
  ncclCommUserRank(comm, &rank);
  ncclCommCount(comm, &n);
  ncclResult_t r = ncclGroupStart();
  if (r == ncclSuccess) r = ncclSend(send, count, type, (rank + 1) % n, comm, stream);
  if (r == ncclSuccess) r = ncclRecv(recv, count, type, (rank + n - 1) % n, comm, stream);
  ncclResult_t e = ncclGroupEnd();
  return r != ncclSuccess ? r : e;
}

constexpr CollTest kSendRecv{"SendRecv", false, false, sameCounts, initData, check, flatBw, run, /*inPlace=*/false};

}  // namespace

int main(int argc, char** argv) { return runPerfTool(argc, argv, kSendRecv); }
