// runPerfTool: options, launch, communicators, buffers, threads, footer -- nccl-tests' run().
#include "bench/common/harness.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

#include "bench/common/run.h"
#include "bench/common/types.h"
#include "src/core/param.h"

namespace tempo::bench {


namespace {

// nccl-tests' getMemString.
std::string memString(double amount) {
  const char* unit = " B";
  if (std::fabs(amount) >= 1024.0 * 1024 * 1024) unit = " GB", amount /= 1024.0 * 1024 * 1024;
  else if (std::fabs(amount) >= 1024.0 * 1024) unit = " MB", amount /= 1024.0 * 1024;
  else if (std::fabs(amount) >= 1024.0) unit = " KB", amount /= 1024.0;
  const int precision = std::fabs(amount) < 10.0 ? 2 : std::fabs(amount) < 100.0 ? 1 : 0;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f%s", precision, amount, unit);
  return buf;
}

// -T: ends the job when one library call (or aggregation) has run longer than the limit.
class Watchdog {
 public:
  Watchdog(const Run& run, int seconds) : run_(run), limitNs_(int64_t(seconds) * 1000000000) {
    if (seconds > 0) thread_ = std::thread([this] { loop(); });
  }
  ~Watchdog() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop() {
    while (!stop_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const int64_t now = steadyNowNs();
      for (const auto& ts : run_.threads) {
        const int64_t since = ts->busySinceNs.load(std::memory_order_relaxed);
        if (since && now - since > limitNs_) {
          std::fprintf(stderr, "\n%s: Test timeout (%ds) in a library call of thread %d\n", shortHostName().c_str(),
                      int(limitNs_ / 1000000000), ts->index);
          abortJob(4);
        }
      }
    }
  }
  const Run& run_;
  const int64_t limitNs_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

ncclUniqueId makeId(const Launch& l) {
  ncclUniqueId id{};
  if (l.kind == Launch::Mpi) {
    if (l.proc == 0) BENCH_NCCL(ncclGetUniqueId(&id));
    mpiBcastBytes(&id, sizeof id);
    mpiBarrier();
  } else {
    BENCH_NCCL(ncclGetUniqueId(&id));  // with NCCL_COMM_ID set, the same id on every process
  }
  return id;
}

void initRanks(Run& run, const ncclUniqueId& id, int firstLocal, int count) {
  BENCH_NCCL(ncclGroupStart());
  for (int i = firstLocal; i < firstLocal + count; ++i)
    BENCH_NCCL(ncclCommInitRank(&run.comms[size_t(i)], run.nranks, id, run.globalRank(i)));
  BENCH_NCCL(ncclGroupEnd());
}

// Not parallel: the main thread creates every local rank (ncclCommInitAll in a single
// process, as nccl-tests). Parallel (-p 1): each thread creates its own ranks concurrently.
void initComms(Run& run) {
  if (run.launch.nprocs == 1 && !run.o.parallelInit) {
    BENCH_NCCL(ncclCommInitAll(run.comms.data(), run.nLocal, run.devices.data()));
    return;
  }
  const ncclUniqueId id = makeId(run.launch);
  if (!run.o.parallelInit) return initRanks(run, id, 0, run.nLocal);
  std::vector<std::thread> ts;
  for (int t = 0; t < run.o.nThreads; ++t)
    ts.emplace_back([&, t] { initRanks(run, id, t * run.o.nGpus, run.o.nGpus); });
  for (auto& t : ts) t.join();
}

std::vector<std::string> splitLines(const std::vector<std::string>& texts) {
  std::vector<std::string> out;
  for (const std::string& t : texts) {
    std::istringstream in(t);
    for (std::string line; std::getline(in, line);) out.push_back(line + "\n");
  }
  return out;
}

std::vector<std::string> identityLines(int version) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "# nccl-tests version 2.19.6 nccl-headers=%d nccl-library=%d", NCCL_VERSION_CODE,
                version);
  return {buf, "# Tempo perf tools, rccl-tests compatible"};
}

int execute(Run& run, size_t rss0) {
  const Options& o = run.o;
  initComms(run);
  int count = 0;
  BENCH_NCCL(ncclCommCount(run.comms[0], &count));
  if (count != run.nranks) {
    std::fprintf(stderr, "communicator has %d ranks, expected %d\n", count, run.nranks);
    abortJob(3);
  }
  const size_t rss1 = residentBytes();
  const size_t maxUnalign = o.unalign * 8;
  for (int i = 0; i < run.nLocal; ++i) {
    run.send.emplace_back(o.maxBytes, maxUnalign, run.gpu);
    run.recv.emplace_back(o.maxBytes, maxUnalign, run.gpu);
    if (!run.send.back().ok() || !run.recv.back().ok()) {
      std::fprintf(stderr, "out of memory allocating %zu-byte buffers\n", o.maxBytes);
      abortJob(2);
    }
    void* stream = nullptr;  // host memory, and -y 1: the null stream
    if (run.gpu && !o.streamNull) {
      auto created = run.gpu->createStream();
      checkDevice(*run.gpu, created.ok() ? Status::Success : created.status(), "stream creation");
      stream = created.value();
    }
    run.streams.push_back(stream);
  }
  const size_t rss2 = residentBytes();
  // -R: every local rank registers its two buffers for the whole run.
  std::vector<void*> registered;
  for (int i = 0; o.localRegister && i < run.nLocal; ++i)
    for (const RankBuffer* b : {&run.send[size_t(i)], &run.recv[size_t(i)]}) {
      registered.push_back(nullptr);
      BENCH_NCCL(ncclCommRegister(run.comms[size_t(i)], b->allocation(), b->allocatedBytes(), &registered.back()));
    }

  std::vector<std::vector<ncclComm_t>> byThread(size_t(o.nThreads));
  for (int t = 0; t < o.nThreads; ++t)
    byThread[size_t(t)].assign(run.comms.begin() + t * o.nGpus, run.comms.begin() + (t + 1) * o.nGpus);
  if (run.launch.kind == Launch::Env) run.agg = makeCommAggregator(std::move(byThread), run.nranks);
  else run.agg = makeLocalAggregator(o.nThreads, run.launch);

  std::vector<std::string> mine;
  const std::string host = shortHostName();
  const std::string memory = run.gpu ? std::string(run.gpu->name()) + " device memory" : "host memory";
  for (int i = 0; i < run.nLocal; ++i)
    mine.push_back(rankLine(run.globalRank(i), 0, int(getpid()), host.c_str(), run.devices[size_t(i)], memory.c_str()));
  run.report.devices(splitLines(gatherRankLines(run.launch, run.comms, run.nranks, mine)));
  std::fflush(stdout);
  run.report.header();

  for (int t = 0; t < o.nThreads; ++t) {
    run.threads.push_back(std::make_unique<ThreadState>());
    run.threads.back()->index = t;
  }
  {
    Watchdog dog(run, o.timeout);
    std::vector<std::thread> workers;
    for (int t = 1; t < o.nThreads; ++t) workers.emplace_back([&, t] { runThread(run, *run.threads[size_t(t)]); });
    runThread(run, *run.threads[0]);  // thread 0 on the main thread (it owns MPI)
    for (auto& w : workers) w.join();
  }
  const size_t rss3 = residentBytes();

  double bw = 0;
  int bwCount = 0;
  bool localBad = false;
  for (const auto& ts : run.threads) {
    bw += ts->bwSum;
    bwCount += ts->bwCount;
    localBad |= ts->localWrong || ts->localOob;
  }
  const int64_t oob = run.threads[0]->failedTests + run.threads[0]->outOfBounds;
  for (size_t k = 0; k < registered.size(); ++k) BENCH_NCCL(ncclCommDeregister(run.comms[k / 2], registered[k]));
  for (ncclComm_t c : run.comms) BENCH_NCCL(ncclCommDestroy(c));
  for (void* stream : run.streams)
    if (stream) checkDevice(*run.gpu, run.gpu->destroyStream(stream), "stream destruction");
  run.send.clear();
  run.recv.clear();

  std::string memLine;
  if (o.memoryReport) {
    auto d = [](size_t a, size_t b) { return double(b > a ? b - a : 0); };
    memLine = "# " + std::string("Host memory usage   ") + " : Initialization " + memString(d(rss0, rss1)) +
              " | User-Allocated " + memString(d(rss1, rss2)) + " | Collective " + memString(d(rss2, rss3)) +
              " | Total  " + memString(d(rss0, rss3));
  }
  const bool bwFailed = run.report.footer(oob, bwCount ? bw / bwCount : 0.0, memLine, ncclGetLastError(nullptr));
  if (localBad && run.launch.proc != 0) {
    int64_t w = 0, b = 0;
    for (const auto& ts : run.threads) w += ts->localWrong, b += ts->localOob;
    std::fprintf(stderr, "%s: process %d saw %lld wrong elements and %lld out-of-bounds bytes\n", host.c_str(),
                 run.launch.proc, (long long)w, (long long)b);
  }
  return (oob || localBad || bwFailed) ? 1 : 0;
}

}  // namespace

int runPerfTool(int argc, char** argv, const CollTest& test) {
  setlinebuf(stdout);
  const char* prog = program_invocation_short_name;
  Options o;
  switch (parseOptions(argc, argv, ToolInfo{prog, false}, &o)) {
    case ParseResult::Exit0: return 0;
    case ParseResult::Error: return 2;
    case ParseResult::Ok: break;
  }
  Launch launch;
  if (!detectLaunch(&argc, &argv, &launch)) return 2;  // before any library call
  const size_t rss0 = residentBytes();
  int version = 0;
  BENCH_NCCL(ncclGetVersion(&version));

  Report report(launch.proc == 0, o, prog);
  report.openJson(argc, argv, version);
  if (std::getenv("NCCL_TESTS_SPLIT") || std::getenv("NCCL_TESTS_SPLIT_MASK"))
    o.notes.emplace_back("# NCCL_TESTS_SPLIT / NCCL_TESTS_SPLIT_MASK are not supported yet; ignored");
  report.preamble(identityLines(version));

  Run run{o, launch, test, report};
  run.nLocal = o.nThreads * o.nGpus;
  run.nranks = launch.nprocs * run.nLocal;
  if (test.rooted && o.root != kAll && o.root >= run.nranks) {
    std::fprintf(stderr, "%s: root %d is not a rank (there are %d)\n", prog, o.root, run.nranks);
    return 2;
  }
  const char* dev0 = std::getenv("NCCL_TESTS_DEVICE");
  const int gpu0 = dev0 ? std::atoi(dev0) : launch.localRank * run.nLocal;
  for (int i = 0; i < run.nLocal; ++i) run.devices.push_back(gpu0 + i);
  run.comms.assign(size_t(run.nLocal), nullptr);
  // -Y: device buffers where there is a GPU runtime, unless host memory is asked for.
  if (o.memory != MemoryType::Host) run.gpu = benchDeviceApi();
  if (o.memory == MemoryType::Device && !run.gpu) {
    std::fprintf(stderr, "%s: -Y asks for device memory, but there is no GPU runtime (TEMPO_GPU=%s; "
                 "NCCL_DEBUG=INFO says why)\n", prog, param::Gpu());
    return 2;
  }

  const int rc = execute(run, rss0);
  finishLaunch(launch);
  return rc;
}

}  // namespace tempo::bench
