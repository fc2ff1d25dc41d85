// Barriers and small reductions across every rank of a run, outside the timed regions:
// timings (per -a), error counts, and the "# Using devices" lines.
//
// Every thread of every process calls the same sequence of operations; `thread` is the
// caller's index in its process. Two implementations:
//  - makeLocalAggregator: threads meet on a mutex/condition variable (nccl-tests' Barrier
//    and Allreduce); thread 0 then does the cross-process step over MPI in Mpi mode, or
//    nothing in a single process.
//  - makeCommAggregator (multi-process without MPI): each thread runs a host ncclAllReduce
//    of the value on each of its ranks' communicators (inside one group when it owns
//    several), so the library itself carries the aggregation.
// Any failure ends the job (abortJob).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/common/launch.h"
#include "rccl/rccl.h"

namespace tempo::bench {

class Aggregator {
 public:
  virtual ~Aggregator() = default;
  virtual void barrier(int thread) = 0;
  // Rank0: rank 0's value; Avg: mean over threads of all processes; Min/Max; Sum.
  virtual double reduce(int thread, double v, Reduce op) = 0;
  virtual int64_t sum(int thread, int64_t v) = 0;
};

std::unique_ptr<Aggregator> makeLocalAggregator(int nThreads, const Launch& launch);
// commsByThread[t]: thread t's communicators (their ranks are asked from the library).
std::unique_ptr<Aggregator> makeCommAggregator(std::vector<std::vector<ncclComm_t>> commsByThread, int nranks);

// All ranks' "# Using devices" lines, in rank order, on process 0 (others get {}).
// `mine` holds this process's lines; called by the main thread only, after init.
std::vector<std::string> gatherRankLines(const Launch& launch, const std::vector<ncclComm_t>& localComms,
                                         int nranks, const std::vector<std::string>& mine);

// Ends the job after a failed library call, with nccl-tests' message (the error string and
// the calling thread's ncclGetLastError).
[[noreturn]] void failNccl(ncclResult_t r, const char* what, const char* file, int line);

}  // namespace tempo::bench

#define BENCH_NCCL(call)                                                                     \
  do {                                                                                       \
    ncclResult_t bench_r_ = (call);                                                          \
    if (bench_r_ != ncclSuccess) ::tempo::bench::failNccl(bench_r_, #call, __FILE__, __LINE__); \
  } while (0)
