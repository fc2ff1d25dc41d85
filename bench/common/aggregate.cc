#include "bench/common/aggregate.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <type_traits>

#include "bench/common/report.h"

namespace tempo::bench {

void failNccl(ncclResult_t r, const char* what, const char* file, int line) {
  std::fprintf(stderr, "%s: Test NCCL failure %s:%d '%s' in %s : %s\n", shortHostName().c_str(), file, line,
               ncclGetErrorString(r), what, ncclGetLastError(nullptr));
  abortJob(3);  // nccl-tests' testNcclError
}

namespace {

// nccl-tests' thread Allreduce: the threads of one process combine into an accumulator; the
// last of them to arrive (always thread 0 here: it called MPI_Init) waits for the others,
// runs the cross-process step, and releases everyone with the result.
class LocalAggregator final : public Aggregator {
 public:
  LocalAggregator(int nThreads, const Launch& l) : nThreads_(nThreads), launch_(l) {}

  void barrier(int thread) override {
    combine<double>(thread, 0.0, Reduce::Sum, [&](double v) {
      if (launch_.kind == Launch::Mpi) mpiBarrier();
      return v;
    });
  }

  double reduce(int thread, double v, Reduce op) override {
    return combine<double>(thread, v, op, [&](double acc) {
      if (launch_.kind == Launch::Mpi) acc = mpiReduceDouble(acc, op);
      if (op == Reduce::Avg) acc /= double(launch_.nprocs) * nThreads_;
      return acc;
    });
  }

  int64_t sum(int thread, int64_t v) override {
    return combine<int64_t>(thread, v, Reduce::Sum, [&](int64_t acc) {
      return launch_.kind == Launch::Mpi ? mpiSum(acc) : acc;
    });
  }

 private:
  struct Slot {
    double d = 0;
    int64_t i = 0;
    template <class T>
    T& get() {
      if constexpr (std::is_same_v<T, double>) return d;
      else return i;
    }
  };

  template <class T, class Finish>
  T combine(int thread, T v, Reduce op, Finish&& finish) {
    std::unique_lock<std::mutex> lk(mu_);
    const uint64_t gen = gen_;
    T& acc = acc_.get<T>();
    if (arrived_ == 0) acc = (op != Reduce::Rank0 || thread == 0) ? v : T(0);
    else if (op == Reduce::Rank0) { if (thread == 0) acc = v; }
    else if (op == Reduce::Min) acc = std::min(acc, v);
    else if (op == Reduce::Max) acc = std::max(acc, v);
    else acc += v;
    ++arrived_;
    if (thread == 0) {
      cv_.wait(lk, [&] { return arrived_ == nThreads_; });
      res_.get<T>() = finish(acc);
      arrived_ = 0;
      ++gen_;
      cv_.notify_all();
      return res_.get<T>();
    }
    if (arrived_ == nThreads_) cv_.notify_all();
    cv_.wait(lk, [&] { return gen_ != gen; });
    return res_.get<T>();
  }

  const int nThreads_;
  const Launch launch_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t gen_ = 0;
  Slot acc_, res_;
};

class CommAggregator final : public Aggregator {
 public:
  CommAggregator(std::vector<std::vector<ncclComm_t>> comms, int nranks)
      : comms_(std::move(comms)), nranks_(nranks), ranks_(comms_.size()) {
    for (size_t t = 0; t < comms_.size(); ++t)
      for (ncclComm_t c : comms_[t]) {
        int r = 0;
        BENCH_NCCL(ncclCommUserRank(c, &r));
        ranks_[t].push_back(r);
      }
  }

  void barrier(int thread) override { (void)allReduce<int32_t>(thread, 0, ncclInt32, ncclSum, false); }

  double reduce(int thread, double v, Reduce op) override {
    const ncclRedOp_t nop = op == Reduce::Min ? ncclMin : op == Reduce::Max ? ncclMax : ncclSum;
    double r = allReduce<double>(thread, v, ncclFloat64, nop, op == Reduce::Rank0);
    return op == Reduce::Avg ? r / nranks_ : r;
  }

  int64_t sum(int thread, int64_t v) override {
    // Every rank of the thread would add the thread's count again: only its first rank does.
    return allReduceFirst(thread, v);
  }

 private:
  // Each rank of the thread contributes v (only rank 0 when rank0Only) and gets the result.
  template <class T>
  T allReduce(int thread, T v, ncclDataType_t type, ncclRedOp_t op, bool rank0Only) {
    const auto& comms = comms_[size_t(thread)];
    std::vector<T> in(comms.size()), out(comms.size());
    for (size_t i = 0; i < comms.size(); ++i) in[i] = (!rank0Only || ranks_[size_t(thread)][i] == 0) ? v : T(0);
    run(comms, in.data(), out.data(), sizeof(T), type, op);
    return out[0];
  }

  int64_t allReduceFirst(int thread, int64_t v) {
    const auto& comms = comms_[size_t(thread)];
    std::vector<int64_t> in(comms.size(), 0), out(comms.size());
    in[0] = v;
    run(comms, in.data(), out.data(), sizeof(int64_t), ncclInt64, ncclSum);
    return out[0];
  }

  static void run(const std::vector<ncclComm_t>& comms, void* in, void* out, size_t elt, ncclDataType_t type,
                  ncclRedOp_t op) {
    auto* i8 = static_cast<char*>(in);
    auto* o8 = static_cast<char*>(out);
    if (comms.size() > 1) BENCH_NCCL(ncclGroupStart());
    for (size_t i = 0; i < comms.size(); ++i)
      BENCH_NCCL(ncclAllReduce(i8 + i * elt, o8 + i * elt, 1, type, op, comms[i], nullptr));
    if (comms.size() > 1) BENCH_NCCL(ncclGroupEnd());
  }

  std::vector<std::vector<ncclComm_t>> comms_;
  int nranks_;
  std::vector<std::vector<int>> ranks_;
};

}  // namespace

std::unique_ptr<Aggregator> makeLocalAggregator(int nThreads, const Launch& launch) {
  return std::make_unique<LocalAggregator>(nThreads, launch);
}

std::unique_ptr<Aggregator> makeCommAggregator(std::vector<std::vector<ncclComm_t>> commsByThread, int nranks) {
  return std::make_unique<CommAggregator>(std::move(commsByThread), nranks);
}

std::vector<std::string> gatherRankLines(const Launch& launch, const std::vector<ncclComm_t>& localComms,
                                         int nranks, const std::vector<std::string>& mine) {
  if (launch.kind == Launch::Single) return mine;
  if (launch.kind == Launch::Mpi) {
    std::string text;
    for (const std::string& l : mine) text += l;
    std::vector<std::string> out;
    for (const std::string& t : mpiGatherText(text)) out.push_back(t);
    return out;
  }
  // Through the library: each rank writes its line into its own slot of a zeroed byte
  // array and a uint8 sum all-reduce assembles them (an all-gather from a reduction).
  constexpr size_t kSlot = 512;
  std::vector<std::vector<uint8_t>> in(localComms.size()), out(localComms.size());
  for (size_t i = 0; i < localComms.size(); ++i) {
    int r = 0;
    BENCH_NCCL(ncclCommUserRank(localComms[i], &r));
    in[i].assign(size_t(nranks) * kSlot, 0);
    out[i].resize(in[i].size());
    const std::string& l = mine[i];
    std::memcpy(in[i].data() + size_t(r) * kSlot, l.data(), std::min(l.size(), kSlot - 1));
  }
  if (localComms.size() > 1) BENCH_NCCL(ncclGroupStart());
  for (size_t i = 0; i < localComms.size(); ++i)
    BENCH_NCCL(ncclAllReduce(in[i].data(), out[i].data(), in[i].size(), ncclUint8, ncclSum, localComms[i], nullptr));
  if (localComms.size() > 1) BENCH_NCCL(ncclGroupEnd());
  std::vector<std::string> lines;
  if (launch.proc != 0) return lines;
  for (int r = 0; r < nranks; ++r) {
    const char* s = reinterpret_cast<const char*>(out[0].data() + size_t(r) * kSlot);
    lines.emplace_back(s, strnlen(s, kSlot));
  }
  return lines;
}

}  // namespace tempo::bench
