// Ranks as threads in one process, through the public C API.
//
// A CommWorld owns nranks communicators made by ncclCommInitAll with a given transport:
// "loopback" (Tempo's in-process transport), "tempo_shm" (Tempo's shared-memory transport,
// forced with TEMPO_TRANSPORT=shm), or "shm"/"tcp" (libfabric, forced with
// TEMPO_TRANSPORT=ofi and FI_PROVIDER for the duration of the init).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rccl/rccl.h"
#include "src/core/param.h"

namespace tempo::testing {

inline void selectTransport(const std::string& transport) {
  using param::Id;
  if (transport == "loopback" || transport == "tempo_shm") {
    param::overrideForTest(Id::Transport, transport == "loopback" ? "loopback" : "shm");
    param::overrideForTest(Id::FiProvider, nullptr);
  } else {
    param::overrideForTest(Id::Transport, "ofi");
    param::overrideForTest(Id::FiProvider, transport.c_str());
  }
}

// Runs fn(rank) for rank 0..n-1 on one thread each and returns each rank's result.
inline std::vector<ncclResult_t> runOnThreads(int n, const std::function<ncclResult_t(int)>& fn) {
  std::vector<ncclResult_t> res(size_t(n), ncclSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { res[size_t(r)] = fn(r); });
  for (auto& t : threads) t.join();
  return res;
}

// Expects `call` to return `code` and ncclGetLastError to mention `needle`.
#define EXPECT_NCCL_ERROR(call, code, needle)                                        \
  do {                                                                               \
    EXPECT_EQ((call), (code));                                                       \
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find(needle), std::string::npos) \
        << "last error: " << ncclGetLastError(nullptr);                              \
  } while (0)

// Polls ncclCommGetAsyncError until the communicator's operation in progress is done, and
// returns how it ended (bounded, so that a bug fails the test instead of hanging it).
inline ncclResult_t waitAsync(ncclComm_t c) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress && std::chrono::steady_clock::now() < until) {
    if (ncclResult_t e = ncclCommGetAsyncError(c, &state); e != ncclSuccess) return e;
    if (state == ncclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return state;
}

// nranks nonblocking communicators (config.blocking = 0) over the in-process loopback
// transport, initialised from this one thread and waited for; destroyed with it.
struct NonblockingWorld {
  explicit NonblockingWorld(int n) : comms(size_t(n), nullptr) {
    selectTransport("loopback");
    ncclUniqueId id;
    EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(ncclCommInitRankConfig(&comms[size_t(r)], n, id, r, &cfg), ncclInProgress);
    for (int r = 0; r < n; ++r) EXPECT_EQ(waitAsync(comms[size_t(r)]), ncclSuccess) << ncclGetLastError(comms[size_t(r)]);
  }
  ~NonblockingWorld() {
    for (ncclComm_t c : comms)
      if (c) ncclCommDestroy(c);
    param::overrideForTest(param::Id::Transport, nullptr);
  }
  ncclComm_t operator[](int r) const { return comms[size_t(r)]; }
  // Waits for every rank's operation in progress; the first that did not succeed.
  ncclResult_t waitAll() const {
    ncclResult_t first = ncclSuccess;
    for (ncclComm_t c : comms)
      if (ncclResult_t e = waitAsync(c); first == ncclSuccess) first = e;
    return first;
  }
  std::vector<ncclComm_t> comms;
};

class CommWorld {
 public:
  CommWorld(int nranks, const std::string& transport) : comms_(size_t(nranks)) {
    selectTransport(transport);
    status_ = ncclCommInitAll(comms_.data(), nranks, nullptr);
    if (status_ != ncclSuccess) error_ = ncclGetLastError(nullptr);
  }
  ~CommWorld() {
    if (status_ == ncclSuccess)
      for (ncclComm_t c : comms_) ncclCommDestroy(c);
    param::overrideForTest(param::Id::Transport, nullptr);
    param::overrideForTest(param::Id::FiProvider, nullptr);
  }
  bool ok() const { return status_ == ncclSuccess; }
  const std::string& error() const { return error_; }
  int size() const { return int(comms_.size()); }
  ncclComm_t operator[](int r) const { return comms_[size_t(r)]; }

  // Runs fn(rank) on one thread per rank and returns each rank's result.
  std::vector<ncclResult_t> onThreads(const std::function<ncclResult_t(int)>& fn) const {
    return runOnThreads(size(), fn);
  }
  // Calls fn(rank) for every rank from this thread inside one group.
  ncclResult_t inGroup(const std::function<ncclResult_t(int)>& fn) const {
    ncclResult_t first = ncclGroupStart();
    for (int r = 0; r < size() && first == ncclSuccess; ++r) first = fn(r);
    ncclResult_t end = ncclGroupEnd();
    return first != ncclSuccess ? first : end;
  }

 private:
  std::vector<ncclComm_t> comms_;
  ncclResult_t status_ = ncclInternalError;
  std::string error_;
};

// A test suite whose tests share one world of 2 ranks over loopback, made once for the
// suite (its tests must leave it usable).
class SharedWorldTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { world_ = std::make_unique<CommWorld>(2, "loopback"); }
  static void TearDownTestSuite() { world_.reset(); }
  static inline std::unique_ptr<CommWorld> world_;
};

}  // namespace tempo::testing
