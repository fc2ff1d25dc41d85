// The driver every perf tool shares: nccl-tests' run() / TimeTest / BenchTime, on host
// memory. A tool describes its collective in a CollTest (counts, data, bandwidth, the call)
// and its main() is `return runPerfTool(argc, argv, kMyTest);`.
//
// Ranks = processes x threads (-t) x ranks per thread (-g); rank = (proc * nThreads +
// thread) * nGpus + g. Each thread drives its -g ranks; with several, every operation on
// them is issued inside ncclGroupStart/ncclGroupEnd. Host collectives are complete when the
// call (or the outermost ncclGroupEnd) returns, so "waiting for completion" is free and the
// stream argument is always NULL.
#pragma once

#include <cstddef>
#include <cstdint>

#include "bench/common/verify.h"
#include "rccl/rccl.h"

namespace tempo::bench {

// Element counts of one size, as nccl-tests' getCollByteCount.
struct CollCounts {
  size_t sendCount = 0, recvCount = 0;  // per rank
  size_t paramCount = 0;                // the count argument of the call, also the bw basis
  // In-place: sendbuff = recvbuff + sendInplaceOffset * rank elements, recvbuff likewise.
  size_t sendInplaceOffset = 0, recvInplaceOffset = 0;
};

// One rank's buffers in a validation pass.
struct RankData {
  int rank;
  unsigned char* send;      // the pointers the collective gets
  unsigned char* recv;
  unsigned char* recvBase;  // start of the rank's receive region
  unsigned char* sendBase;  // start of the rank's send region (unused in place)
};

struct CheckResult {
  int64_t wrong = 0;      // result elements that differ from the expected value
  int64_t clobbered = 0;  // input elements the collective must not have changed, but did
};

struct CollTest {
  const char* name;  // "AllReduce"
  bool rooted;       // -r applies; otherwise the root column prints -1
  bool reduces;      // -o applies; otherwise the redop column prints "none"
  CollCounts (*counts)(size_t count, size_t eltSize, int nranks);
  // Writes the rank's inputs (and clears its outputs) for a pass with data `d`.
  void (*initData)(const CollCounts& c, const RankData& r, const DataSpec& d, int root, bool inPlace);
  CheckResult (*check)(const CollCounts& c, const RankData& r, const DataSpec& d, int root, bool inPlace);
  void (*getBw)(size_t count, size_t typeSize, double sec, double* algBw, double* busBw, int nranks);
  ncclResult_t (*run)(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                      ncclComm_t comm, hipStream_t stream);
  bool inPlace = true;  // false: the in-place columns print N/A (all-to-all)
};

// Parses the command line, runs the sweep, prints the table; returns the exit code:
// 0 success, 1 wrong elements / damaged canaries / NCCL_TESTS_MIN_BW not met, 2 usage,
// 3 a library call failed (after printing its error), 4 -T timeout.
int runPerfTool(int argc, char** argv, const CollTest& test);


}  // namespace tempo::bench
