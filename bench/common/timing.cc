// One thread's sweep: nccl-tests' TimeTest (warm-up, then every size) and BenchTime (time the
// out-of-place or in-place variant, aggregate, validate, print), on host or device memory.
// On device memory a call returns once queued on its rank's stream, so every point where
// the operations must be over (end of warm-up and of the timed loop, -z, validation)
// waits for the thread's streams first, as nccl-tests does.
#include <algorithm>
#include <chrono>

#include "bench/common/run.h"
#include "bench/common/types.h"
#include "bench/common/verify.h"

namespace tempo::bench {

int64_t steadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

// Marks the thread busy in a library call, for the -T watchdog.
class Busy {
 public:
  explicit Busy(ThreadState& ts) : ts_(ts) { ts_.busySinceNs.store(steadyNowNs(), std::memory_order_relaxed); }
  ~Busy() { ts_.busySinceNs.store(0, std::memory_order_relaxed); }

 private:
  ThreadState& ts_;
};

struct Case {  // one (type, op, root, size)
  int type;
  int op;
  int root;
  size_t eltSize;
  CollCounts c;
  size_t sendBytes, recvBytes;
};

class ThreadRunner {
 public:
  ThreadRunner(Run& run, ThreadState& ts)
      : run_(run), o_(run.o), ts_(ts), first_(ts.index * run.o.nGpus), main_(ts.index == 0) {}

  void sweep();

 private:
  void timeTest(int type, int op, const char* opName, int root);
  void benchTime(const Case& k, bool inPlace);
  void startColl(const Case& k, bool inPlace, int iter, bool inAggGroup);
  int64_t validate(const Case& k, bool inPlace, int64_t* oobOut);
  Case setup(size_t bytes, int type, int op, int root) const;
  // The pointers a rank's operation gets (host == false), or their host views, where
  // validation data is written and checked (the same pointers on host memory).
  RankData rankData(const Case& k, int local, bool inPlace, size_t shift, bool host = false) const;
  // Waits until every operation queued on this thread's ranks' streams has run.
  void waitStreams();
  // Copies the regions validation writes or reads (with their canaries) to or from the
  // device, for each of this thread's ranks.
  void transfer(const Case& k, bool inPlace, bool toDevice);
  size_t recvRegion(const Case& k, bool inPlace) const {
    return inPlace ? std::max(k.recvBytes, k.sendBytes) : k.recvBytes;
  }
  void barrier() {
    Busy b(ts_);
    run_.agg->barrier(ts_.index);
  }
  size_t unalignBytes(const Case& k) const { return o_.unalign * k.eltSize; }
  // The op of local rank first_ + g: a PreMulSum op of its own for mulsum.
  ncclRedOp_t redOp(const Case& k, int g) const {
    return k.op == kMulSum ? userOps_[size_t(g)] : ncclRedOp_t(k.op);
  }
  // For mulsum, each of the thread's ranks creates its PreMulSum op (scalar
  // preMulScalar(rank), host-immediate, as nccl-tests) for one datatype's sweep.
  class UserOps {
   public:
    UserOps(ThreadRunner& t, int type, int op) : t_(t), active_(op == kMulSum) {
      if (!active_) return;
      t_.userOps_.assign(size_t(t_.o_.nGpus), ncclSum);
      for (int g = 0; g < t_.o_.nGpus; ++g) {
        const int local = t_.first_ + g;
        uint64_t scalar = valueBits(type, preMulScalar(t_.run_.globalRank(local)));  // low bytes: little-endian
        BENCH_NCCL(ncclRedOpCreatePreMulSum(&t_.userOps_[size_t(g)], &scalar, ncclDataType_t(type),
                                            ncclScalarHostImmediate, t_.run_.comms[size_t(local)]));
      }
    }
    ~UserOps() {
      if (!active_) return;
      for (int g = 0; g < t_.o_.nGpus; ++g)
        BENCH_NCCL(ncclRedOpDestroy(t_.userOps_[size_t(g)], t_.run_.comms[size_t(t_.first_ + g)]));
    }

   private:
    ThreadRunner& t_;
    const bool active_;
  };

  Run& run_;
  const Options& o_;
  ThreadState& ts_;
  const int first_;  // first local rank of this thread
  const bool main_;  // prints (the report ignores it outside process 0)
  std::vector<ncclRedOp_t> userOps_;  // per rank of the thread, while a mulsum sweep runs
};

void ThreadRunner::sweep() {
  std::vector<int> types, roots;
  if (o_.type == kAll) for (int t = 0; t < kNumTypes; ++t) types.push_back(t);
  else types.push_back(o_.type);
  if (!run_.test.rooted) roots.push_back(-1);
  else if (o_.root == kAll) for (int r = 0; r < run_.nranks; ++r) roots.push_back(r);
  else roots.push_back(o_.root);
  std::vector<int> ops;
  if (!run_.test.reduces) ops.push_back(ncclSum);
  else if (o_.op == kAll) for (int p = 0; p < kNumOps; ++p) ops.push_back(p);
  else ops.push_back(o_.op);
  for (int type : types)
    for (int op : ops) {
      UserOps user(*this, type, op);
      for (int root : roots) timeTest(type, op, run_.test.reduces ? opName(op) : "none", root);
    }
}

Case ThreadRunner::setup(size_t bytes, int type, int op, int root) const {
  Case k{type, op, root, typeSize(type), {}, 0, 0};
  k.c = run_.test.counts(bytes / k.eltSize, k.eltSize, run_.nranks);
  k.sendBytes = k.c.sendCount * k.eltSize;
  k.recvBytes = k.c.recvCount * k.eltSize;
  return k;
}

void ThreadRunner::timeTest(int type, int op, const char* name, int root) {
  barrier();
  // Warm-up at every power-of-two size of the range, out of place.
  for (size_t size = o_.minBytes; size <= o_.maxBytes; size = size ? size * 2 : 1) {
    const Case k = setup(size, type, op, root);
    for (int i = 0; i < o_.warmupIters; ++i) startColl(k, false, i, false);
  }
  waitStreams();
  long repeat = o_.runCycles;
  do {
    for (size_t size = o_.minBytes; size <= o_.maxBytes; size = o_.nextSize(size)) {
      const Case k = setup(size, type, op, root);
      if (main_) run_.report.rowStart(std::max(k.sendBytes, k.recvBytes), k.c.paramCount, typeName(type), name, root);
      benchTime(k, false);
      if (run_.test.inPlace) benchTime(k, true);
      else if (main_) run_.report.rowPartUnsupported(false);
      if (main_) run_.report.rowEnd();
    }
  } while (--repeat);
}

RankData ThreadRunner::rankData(const Case& k, int local, bool inPlace, size_t shift, bool host) const {
  const int rank = run_.globalRank(local);
  const RankBuffer& s = run_.send[size_t(local)];
  const RankBuffer& v = run_.recv[size_t(local)];
  const size_t u = unalignBytes(k);
  unsigned char* sendp = (host ? s.host().data(u) : s.data(u)) + shift;
  unsigned char* recvp = (host ? v.host().data(u) : v.data(u)) + shift;
  RankData r{rank, sendp, recvp, recvp, sendp};
  if (inPlace) {
    r.send = recvp + k.c.sendInplaceOffset * k.eltSize * size_t(rank);
    r.recv = recvp + k.c.recvInplaceOffset * k.eltSize * size_t(rank);
  }
  return r;
}

void ThreadRunner::waitStreams() {
  if (!run_.gpu) return;
  Busy b(ts_);
  for (int g = 0; g < o_.nGpus; ++g)
    checkDevice(*run_.gpu, run_.gpu->synchronize(run_.streams[size_t(first_ + g)]), "stream synchronize");
}

void ThreadRunner::transfer(const Case& k, bool inPlace, bool toDevice) {
  if (!run_.gpu) return;
  const size_t u = unalignBytes(k);
  for (int g = 0; g < o_.nGpus; ++g) {
    const size_t local = size_t(first_ + g);
    void* stream = run_.streams[local];
    RankBuffer& recv = run_.recv[local];
    RankBuffer& send = run_.send[local];
    if (toDevice) {
      recv.upload(u, recvRegion(k, inPlace), stream);
      if (!inPlace) send.upload(u, k.sendBytes, stream);
    } else {
      recv.download(u, recvRegion(k, inPlace), stream);
      if (!inPlace) send.download(u, k.sendBytes, stream);
    }
  }
}

void ThreadRunner::startColl(const Case& k, bool inPlace, int iter, bool inAggGroup) {
  // As nccl-tests: move the buffers through the allocation from one iteration to the next,
  // so consecutive operations do not reuse the same (cached) bytes.
  const size_t total = std::max(k.sendBytes, k.recvBytes);
  const size_t steps = total ? o_.maxBytes / total : 1;
  const size_t shift = total * (size_t(iter) % std::max<size_t>(steps, 1));
  {
    Busy b(ts_);
    if (o_.nGpus > 1) BENCH_NCCL(ncclGroupStart());
    for (int g = 0; g < o_.nGpus; ++g) {
      const int local = first_ + g;
      const RankData r = rankData(k, local, inPlace, shift);
      BENCH_NCCL(run_.test.run(r.send, r.recv, k.c.paramCount, ncclDataType_t(k.type), redOp(k, g), k.root,
                               run_.comms[size_t(local)], static_cast<hipStream_t>(run_.streams[size_t(local)])));
    }
    if (o_.nGpus > 1) BENCH_NCCL(ncclGroupEnd());
  }
  // -z 1 and 2: wait for each collective (outside an -m group: after the group).
  if ((o_.blocking == 1 || o_.blocking == 2) && !inAggGroup) waitStreams();
  // -z 1: barrier after each collective. Inside an -m group the barrier would itself be
  // queued into the group, so benchTime does it after the group instead.
  if (o_.blocking == 1 && !inAggGroup) barrier();
}

void ThreadRunner::benchTime(const Case& k, bool inPlace) {
  if (o_.check) {  // sane data for the timed iterations (nccl-tests: seed 99)
    const DataSpec d{k.type, k.op, run_.nranks, makeSeed(k.type, k.op, k.root, k.sendBytes, 99, inPlace)};
    for (int g = 0; g < o_.nGpus; ++g)
      run_.test.initData(k.c, rankData(k, first_ + g, inPlace, 0, true), d, k.root, inPlace);
    transfer(k, inPlace, true);
  }
  startColl(k, inPlace, 0, false);
  waitStreams();
  barrier();

  const bool grouped = o_.aggIters > 1;
  int64_t excludedNs = 0;
  const int64_t t0 = steadyNowNs();
  for (int iter = 0; iter < o_.iters; ++iter) {
    if (grouped) BENCH_NCCL(ncclGroupStart());
    for (int a = 0; a < o_.aggIters; ++a) startColl(k, inPlace, iter * o_.aggIters + a, grouped);
    if (grouped) {
      {
        Busy b(ts_);
        BENCH_NCCL(ncclGroupEnd());
      }
      if (o_.blocking == 1 || o_.blocking == 2) waitStreams();
    }
    if (o_.blocking == 3) {  // wait + barrier per outer iteration, barrier not timed
      waitStreams();
      const int64_t b0 = steadyNowNs();
      barrier();
      excludedNs += steadyNowNs() - b0;
    } else if (o_.blocking == 1 && grouped) {
      barrier();
    }
  }
  waitStreams();
  // Every operation is complete here, so the CPU time (-C) and the wall time coincide.
  const double sec = double(steadyNowNs() - t0 - excludedNs) * 1e-9 / (double(o_.iters) * o_.aggIters);
  double delta;
  {
    Busy b(ts_);
    delta = run_.agg->reduce(ts_.index, sec, Reduce(o_.average));
  }
  double algBw = 0, busBw = 0;
  run_.test.getBw(k.c.paramCount, k.eltSize, delta, &algBw, &busBw, run_.nranks);
  barrier();

  int64_t wrong = 0;
  ++ts_.rep;
  for (int c = 0; c < o_.check; ++c) {
    int64_t oob = 0;
    wrong = validate(k, inPlace, &oob);
    ts_.outOfBounds += oob;
    if (wrong) break;
  }
  if (wrong) ++ts_.failedTests;
  if (main_) run_.report.rowPart(delta * 1e6, algBw, busBw, wrong, !inPlace);
  ts_.bwSum += busBw;
  ++ts_.bwCount;
}

// One validation pass: fresh inputs, canaries armed, one operation, then every rank of the
// thread checks its result, its guards and (out of place) its untouched input.
int64_t ThreadRunner::validate(const Case& k, bool inPlace, int64_t* oobOut) {
  const DataSpec d{k.type, k.op, run_.nranks, makeSeed(k.type, k.op, k.root, k.sendBytes, ts_.rep, inPlace)};
  const size_t u = unalignBytes(k);
  const size_t region = recvRegion(k, inPlace);
  for (int g = 0; g < o_.nGpus; ++g) {
    const int local = first_ + g;
    run_.test.initData(k.c, rankData(k, local, inPlace, 0, true), d, k.root, inPlace);
    run_.recv[size_t(local)].host().armGuards(u, region, 0x11);
    if (!inPlace) run_.send[size_t(local)].host().armGuards(u, k.sendBytes, 0x22);
  }
  transfer(k, inPlace, true);
  startColl(k, inPlace, 0, false);
  waitStreams();
  transfer(k, inPlace, false);
  int64_t wrong = 0, oob = 0;
  for (int g = 0; g < o_.nGpus; ++g) {
    const int local = first_ + g;
    const CheckResult r = run_.test.check(k.c, rankData(k, local, inPlace, 0, true), d, k.root, inPlace);
    wrong += r.wrong;
    oob += r.clobbered + run_.recv[size_t(local)].host().guardDamage(u, region, 0x11);
    if (!inPlace) oob += run_.send[size_t(local)].host().guardDamage(u, k.sendBytes, 0x22);
  }
  ts_.localWrong += wrong;
  ts_.localOob += oob;
  Busy b(ts_);
  *oobOut = run_.agg->sum(ts_.index, oob);
  return run_.agg->sum(ts_.index, wrong);
}

}  // namespace

void runThread(Run& run, ThreadState& ts) { ThreadRunner(run, ts).sweep(); }

}  // namespace tempo::bench
