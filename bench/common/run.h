// Internal to the harness: the state one run shares between its threads.
//
// Written by the main thread before the worker threads start and read-only while they run,
// except ThreadState, which only its own thread writes (busySince is also read by the
// -T watchdog).
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "bench/common/aggregate.h"
#include "bench/common/device.h"
#include "bench/common/harness.h"
#include "bench/common/launch.h"
#include "bench/common/options.h"
#include "bench/common/report.h"

namespace tempo::bench {

struct ThreadState {
  int index = 0;
  double bwSum = 0;            // busbw of every printed measurement
  int bwCount = 0;
  int64_t failedTests = 0;     // (size, variant) with #wrong > 0 over all ranks
  int64_t outOfBounds = 0;     // canary bytes + clobbered inputs over all ranks
  int64_t localWrong = 0;      // what this thread's own ranks saw
  int64_t localOob = 0;
  int rep = 0;                 // validation passes so far (seeds the data)
  std::atomic<int64_t> busySinceNs{0};  // steady-clock ns when a library call began, 0 idle
};

struct Run {
  const Options& o;
  const Launch& launch;
  const CollTest& test;
  Report& report;
  int nLocal = 1;   // ranks in this process
  int nranks = 1;   // ranks in the communicator
  std::vector<int> devices{};       // per local rank
  std::vector<ncclComm_t> comms{};  // per local rank
  mem::DeviceApi* gpu = nullptr;    // set when the buffers are device memory
  std::vector<void*> streams{};     // per local rank (nullptr: the null stream)
  std::vector<RankBuffer> send{}, recv{};
  std::unique_ptr<Aggregator> agg{};
  std::vector<std::unique_ptr<ThreadState>> threads{};

  int globalRank(int local) const { return launch.proc * nLocal + local; }
};

// The sweep of one thread: every type x op x root (timing.cc).
void runThread(Run& run, ThreadState& ts);

int64_t steadyNowNs();

}  // namespace tempo::bench
