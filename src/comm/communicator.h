// The Communicator: wires bootstrap, transports, engine and planners together, and owns
// the lifecycle (init, finalize, destroy, abort).
//
// Threading. Whoever drives the engine (a collective, ncclGroupEnd, a nonblocking job)
// holds driveMutex() for the whole batch, so one thread at a time runs a communicator's
// operations. asyncState(), check(), requestAbort() and abort() may be called from any
// thread at any time: requestAbort() makes the driving thread's wait fail promptly, and
// abort() waits (bounded) for it to leave before cancelling the transports.
//
// Nonblocking communicators (config.blocking = 0) run init, split, finalize and group
// batches on their AsyncWorker; asyncState() is ncclInProgress until the job finishes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "src/algo/p2p.h"
#include "src/bootstrap/bootstrap.h"
#include "src/comm/async_worker.h"
#include "src/comm/config.h"
#include "src/comm/placement.h"
#include "src/comm/trace.h"
#include "src/core/dtype.h"
#include "src/engine/engine.h"
#include "src/mem/host_buffer.h"
#include "src/mem/staging_arena.h"
#include "src/mem/user_memory.h"
#include "src/pacing/clock.h"
#include "src/tune/tune.h"
#include "transports/transport.h"

namespace tempo::comm {

enum class P2p : uint8_t { None, Send, Recv };

// One entry of a WaitSignal call, laid out as ncclWaitSignalDesc_t (the API checks this):
// wait for `count` signals from `peer`; sigIdx and ctx are 0.
struct SignalWait {
  int count;
  int peer;
  int sigIdx;
  int ctx;
};

// A validated collective or point-to-point call. `count` is NCCL's count argument (per
// rank for all-gather, reduce-scatter, all-to-all, gather and scatter).
struct CollArgs {
  engine::CollKind coll = engine::CollKind::AllReduce;
  P2p p2p = P2p::None;  // Send/Recv: coll is SendRecv, `peer` the other rank
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  DataType type = DataType::Float32;
  RedOp op = RedOp::Sum;
  int root = -1;
  int peer = -1;
  // AllToAllv: nranks counts and displacements each, in elements (the caller's arrays,
  // read while the call is being planned).
  const size_t* sendCounts = nullptr;
  const size_t* sendDispls = nullptr;
  const size_t* recvCounts = nullptr;
  const size_t* recvDispls = nullptr;
  void* stream = nullptr;  // accepted and unused for host buffers
  // PreMulSum (op is then Sum): one element of `type` each rank multiplies its input by,
  // read when the collective starts.
  const void* scalar = nullptr;
  const void* bias = nullptr;  // AllReduceWithBias: count elements combined into the result
  // Device buffers run in place (DeviceStaging::lower): the plan is lowered for them
  // (algo/device_lowering.h), its device work on the communicator's device arena.
  bool sendOnDevice = false;
  bool recvOnDevice = false;
  // One-sided calls. PutSignal: count elements of `type` from `send` into `peer`'s copy of
  // `window` (a Window of this communicator) at byte `windowOffset`, then a signal; count
  // 0 is a signal alone (ncclSignal). WaitSignal: the nWaits entries of `waits` (the
  // caller's array, read while the call is being planned), each some signals from a peer.
  const void* window = nullptr;
  uint64_t windowOffset = 0;
  const SignalWait* waits = nullptr;
  int nWaits = 0;
};


// An ncclRedOpCreatePreMulSum operator. The handle is ncclNumOps + its index.
struct PreMulSumOp {
  bool live = false;
  DataType type = DataType::Float32;
  bool deviceResident = false;       // ncclScalarDevice: read through `ptr` at each use
  alignas(8) std::byte value[8] = {};  // ncclScalarHostImmediate: copied at creation
  const void* ptr = nullptr;
  const void* scalar() const { return deviceResident ? ptr : value; }
};

class Communicator : public engine::Liveness {
 public:
  // Joins the communicator the unique id names. Blocks until every rank has joined or
  // TEMPO_INIT_TIMEOUT passes.
  static Result<std::unique_ptr<Communicator>> create(const bootstrap::UniqueId& id, int nranks, int rank,
                                                      const Config& config, int device);
  // A communicator that has not joined yet, in progress until join() ends (nonblocking
  // init and split hand it to the application at once).
  static std::unique_ptr<Communicator> pending(const Config& config, int device);
  // The work of create() on a pending communicator; the result is also its async state.
  Status join(const bootstrap::UniqueId& id, int nranks, int rank);

  // ncclCommSplit, called by every rank of this communicator: the ranks that pass the same
  // `color` form a new communicator, ranked by (key, rank here). Returns null for
  // NCCL_SPLIT_NOCOLOR (-1). Uses this communicator's bootstrap ring for the exchange; the
  // new one has its own.
  Result<std::unique_ptr<Communicator>> split(int color, int key, const Config& config);
  // split() in two halves, for nonblocking splits: the exchange over this communicator's
  // ring says whom to join (nranks 0 for NCCL_SPLIT_NOCOLOR), then the child join()s.
  struct SplitTarget {
    bootstrap::UniqueId id{};
    int nranks = 0, rank = -1;
  };
  Result<SplitTarget> splitExchange(int color, int key);
  // ncclCommShrink, called by the ranks not in `excluded` (sorted, unique, without this
  // rank): they form a new communicator ranked in parent order. The exchange does not use
  // the ring (it passes through excluded ranks, which may be dead): the lowest surviving
  // rank opens the new rendezvous and sends its id to each survivor directly. A survivor
  // whose list differs from the leader's fails with ncclInvalidUsage. Works on a revoked
  // communicator (NCCL_SHRINK_ABORT revokes first).
  Result<SplitTarget> shrinkExchange(std::span<const int> excluded);
  // ncclCommGrow on a rank of this communicator: every rank passes nranks and, at least
  // one of them, the id ncclCommGetUniqueId made (null elsewhere); the exchange over the
  // ring checks they agree. This rank keeps its rank in the grown communicator.
  Result<SplitTarget> growExchange(int nranks, const bootstrap::UniqueId* id);
  ~Communicator() override;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  int device() const { return device_; }
  uint64_t commHash() const { return commHash_; }
  const Config& config() const { return config_; }

  // Plans `a` into a pooled Op; release() returns it. No allocation once warmed up.
  Result<engine::Op*> prepare(const CollArgs& a);
  // Plans the point-to-point calls of one group (in call order) as one op. A send to self
  // is matched with the receive from self of the same rank in order, and copied.
  Result<engine::Op*> prepareP2p(std::span<const CollArgs> calls);
  // Plans a one-sided call (CollKind::PutSignal or WaitSignal; the API has checked it).
  Result<engine::Op*> prepareRma(const CollArgs& a);
  void release(engine::Op* op);
  // The cost model's time, in microseconds, for a collective and for one group's
  // point-to-point calls on this communicator (tune::predictUs; ncclGroupSimulateEnd).
  // Nothing is planned or sent.
  double predictUs(const CollArgs& a) const;
  double predictP2pUs(std::span<const CollArgs> calls) const;
  engine::Engine& engine() { return *engine_; }
  // The skew monitor (null when TEMPO_PACING=off or before init is done); any thread.
  pacing::SkewMonitor* skewMonitor() const { return monitor_.load(std::memory_order_acquire); }
  // tempoCommSetIterationPeriod: the monitor's iteration hint, also noted in the trace.
  // Any thread; false when there is no monitor.
  bool setIterationPeriod(uint32_t collectives);
  // ncclCommRegister / ncclCommDeregister: a handle for [buff, buff + size), registered
  // with every transport endpoint so that transfers on it name the region (see
  // engine::UserRegions). Handles still held are released with the communicator.
  Result<void*> registerBuffer(void* buff, size_t size);
  // InvalidArgument for a handle this communicator did not hand out, or already took back.
  Status deregisterBuffer(void* handle);
  // ncclCommWindowRegister / ncclCommWindowDeregister. Both are collective: every rank
  // calls them, for its own buffer, in the same order. A window is a buffer registered as
  // registerBuffer registers one, numbered by the order of registration; the ranks check
  // over the bootstrap ring that they agree on that number and on the flags (a
  // disagreement fails the call on every rank with InvalidUsage naming both ranks), and
  // each learns every rank's window size. newWindow() only allocates the window (so a
  // nonblocking call can hand out its handle at once); exchangeWindow() is the collective
  // part, after which the window is usable, or removed if it failed.
  struct Window {
    uint64_t id = 0;
    void* buff = nullptr;
    size_t size = 0;
    int flags = 0;
    void* registration = nullptr;   // registerBuffer's handle
    bool onDevice = false;          // device memory (one-sided calls refuse it)
    std::vector<uint64_t> sizes;    // every rank's window size
    std::vector<uint8_t> devices;   // whether every rank's window is device memory
    std::atomic<bool> ready{false}; // the registration exchange succeeded
  };
  Result<Window*> newWindow(void* buff, size_t size, int flags, bool onDevice);
  Status exchangeWindow(Window* w);
  Status deregisterWindow(Window* w);
  // The window behind a handle this communicator handed out (and has not taken back), else
  // null. Any thread.
  Window* window(const void* handle) const;
  // ncclRedOpCreatePreMulSum / ncclRedOpDestroy, and the lookup collectives make.
  Result<int> createPreMulSum(const void* scalar, DataType type, bool deviceResident);
  Status destroyRedOp(int op);
  const PreMulSumOp* preMulSum(int op) const;

  // The error that made this communicator unusable (Success while healthy).
  Status asyncError() const { return Status(asyncError_.load(std::memory_order_acquire)); }
  // ncclCommGetAsyncError's answer without polling peers: the error, else InProgress while
  // a nonblocking job runs, else Success.
  Status asyncState() const {
    Status e = asyncError();
    if (!ok(e)) return e;
    return inProgress_.load(std::memory_order_acquire) ? Status::InProgress : Status::Success;
  }
  bool blocking() const { return config_.blocking; }
  // Init has completed: from then on the placement below is fixed and any thread may read it.
  bool initComplete() const { return initComplete_.load(std::memory_order_acquire); }
  // Each rank's host (numbered 0.. in order of first rank) and the ring the ring
  // algorithms run on (ring()[p] is the rank at position p). Only once initComplete().
  const std::vector<int>& hostOf() const { return hostOf_; }
  const std::vector<int>& ring() const { return ring_; }
  // Operations this rank has issued: collectives, and each group's point-to-point calls as
  // one (ncclCommDump's opCount). Any thread.
  uint64_t opsIssued() const { return opsIssued_.load(std::memory_order_relaxed); }
  // Nonblocking jobs. beginAsync() marks the communicator in progress (false if it already
  // was); postAsync() runs `job` on this communicator's worker thread, and the job calls
  // endAsync(result) on every communicator it had begun, which records a failure as the
  // async error and clears the mark. runAsync() is post + end for a one-communicator job.
  bool beginAsync() { return !inProgress_.exchange(true, std::memory_order_acq_rel); }
  void postAsync(std::function<void()> job) { worker_.post(std::move(job)); }
  void runAsync(std::function<Status()> job);
  void endAsync(Status s);
  // Stream-ordered work (calls on device buffers, src/comm/device_staging.h) posted to
  // this communicator's worker and not yet run. A call on host buffers, ncclCommFinalize
  // and ncclCommDestroy wait for it first (without holding the drive mutex, which the work
  // takes), so that every rank issues its collectives in call order.
  void beginStreamWork();
  void endStreamWork();
  void waitStreamWork();
  // Pinned host memory and a stream for the device buffers of the batches this
  // communicator's worker runs (device_staging.h); created on first use, by the worker only.
  mem::StagingArena& stagingArena(mem::DeviceApi& gpu) {
    if (!staging_) staging_ = std::make_unique<mem::StagingArena>(gpu, device_);
    return *staging_;
  }
  // The engine's pinned staging and stream for plans lowered for device buffers
  // (algo/device_lowering.h); created on first use, used only under the drive mutex.
  mem::StagingArena& deviceArena(mem::DeviceApi& gpu) {
    if (!deviceArena_) deviceArena_ = std::make_unique<mem::StagingArena>(gpu, device_);
    return *deviceArena_;
  }
  std::timed_mutex& driveMutex() { return driveMu_; }
  // Remembers the first fatal error and the calling thread's message for it, and tells
  // the ring neighbours (who forward it), so that every rank learns why.
  void recordError(Status s);
  // A transfer that failed because a peer gave up is a symptom: unless `isCause` (the op
  // itself found the mismatch), waits briefly for a peer's notice and returns its cause
  // (status and message) when one arrives, else `s`.
  Status explainFailure(Status s, bool isCause);
  std::string errorMessage() const;

  // Completes outstanding work (host collectives are complete on return, so nothing is
  // pending) and marks the communicator finalized.
  Status finalize();
  bool finalized() const { return finalized_; }
  // ncclCommAbort, from any thread: stops the operation in flight (a driving thread's wait
  // fails with ncclInvalidUsage, a nonblocking init stops waiting), waits up to 10 s for it
  // to leave, then cancels every transfer and tells the ring neighbours, whose calls then
  // fail instead of hanging. Returns false if the operation did not leave in time (the
  // object must then be kept alive, inert).
  bool abort();
  bool aborting() const { return aborting_.load(std::memory_order_acquire); }
  // ncclCommRevoke (and NCCL_SHRINK_ABORT): stops the operation in flight as abort() does
  // and tells the ring neighbours (whose calls then fail), but keeps the bootstrap
  // listener, so the communicator can still be shrunk; new operations fail with
  // ncclInvalidUsage. InvalidArgument if already revoked; a timeout as in abort().
  Status revoke();
  bool revoked() const { return revoked_.load(std::memory_order_acquire); }
  // ncclCommSuspend / ncclCommResume: while suspended, new operations fail with
  // ncclInvalidUsage. Tempo holds no device memory yet, so there is nothing to release.
  Status suspend();
  Status resume();
  bool suspended() const { return suspended_.load(std::memory_order_acquire); }
  // Whether a new operation may start: InvalidUsage after abort, revoke or suspend, else
  // the error that made the communicator unusable, else Success (with ncclGetLastError's
  // message set on failure).
  Status usable();
  // Waits for a nonblocking job in flight to finish (ncclCommDestroy).
  void waitAsync();
  // engine::Liveness: fails when a ring neighbour reported a failure or (with
  // `closedIsFatal`, as during a collective) when its bootstrap connection is gone. A
  // neighbour that finalized cleanly is no failure: ranks finish a collective at different
  // times, and one may be destroyed while the others still receive. It is one only when
  // this rank has issued more collectives than the neighbour did before it left, since
  // those can never complete. With `closedIsFatal`, also fails an op in flight longer than
  // TEMPO_COLL_TIMEOUT with ncclTimeout, and fails when the ring predecessor has sent no
  // heartbeat for TEMPO_PEER_TIMEOUT. Idle callers pass false.
  Status check(bool closedIsFatal);
  Status check() override { return check(true); }
  bool abortRequested() const override {
    return aborting_.load(std::memory_order_relaxed) || revoked_.load(std::memory_order_relaxed);
  }

 private:
  Communicator() = default;
  // Waits up to `ns` for the nonblocking operation in flight and the stream-ordered work
  // posted to the worker to end (aborting or revoking makes them end promptly): after
  // it, no job on the worker holds a pin, so the caller's is the last and the worker is
  // never asked to join itself.
  bool waitAsyncFor(int64_t ns);
  // Abort's first phase (also revoke's): with the stop flag set, waits (10 s at most) for
  // a nonblocking job and the driving thread to leave; false if they did not.
  bool waitForDriverToLeave(const char* fn, std::unique_lock<std::timed_mutex>& drive);
  // Lays out ring_ from the ranks' hosts and the switch map, and checks that every rank
  // chose the same ring.
  Status buildRing(Deadline deadline);
  // Every rank's NUMA node and NIC count (numaOf_, rails_, channels_), before the
  // transports are opened on this rank's NICs.
  Status exchangePlaces(Deadline deadline);
  void logTuning() const;
  Status connectTransports(Deadline deadline);
  // One small message each way with every peer over its transport, before init completes.
  Status handshake(Deadline deadline);
  Status handshakeRail(size_t rail, Deadline deadline);
  void logCall(const CollArgs& a, uint64_t seq) const;
  // A pooled Op, reset for `a` (no allocation once the pool is warm).
  engine::Op* takeOp(const CollArgs& a, uint64_t payloadBytes);
  Status startTelemetry();
  // Clock offsets to rank 0's clock, for traces (wiring.cc); collective.
  Status syncClocks(Deadline deadline);
  std::atomic<pacing::SkewMonitor*> monitor_{nullptr};  // the engine's, published once
  std::unique_ptr<TraceWriter> trace_;                  // TEMPO_TRACE (null: off)
  // The collective's own steps, for a call whose in-place-ness is already settled.
  void plan(const CollArgs& a, bool inPlace, algo::Plan& out);
  // Mismatch detection (TEMPO_CHECK_MISMATCH): the call's fingerprint travels in the
  // dissemination rounds of algo::prependFingerprint (messages kFingerprintMsg - round,
  // above every data message) and is checked by every rank it reaches. The exchange is
  // part of the plan (returns the data bytes round 0 carries); the fingerprint, which
  // holds the sequence number, is written for every call.
  uint64_t prependFingerprint(engine::Op& op);
  void writeFingerprint(engine::Op& op, const CollArgs& a);
  static constexpr uint32_t kFingerprintMsg = algo::kMsgIdSpace - 1;

  int rank_ = 0, nranks_ = 1, device_ = 0;
  uint64_t commHash_ = 0;
  Config config_;
  std::unique_ptr<bootstrap::Bootstrap> boot_;
  std::vector<std::unique_ptr<transport::Endpoint>> endpoints_;
  std::vector<transport::Endpoint*> peerEndpoint_;  // rail 0: every peer's primary endpoint
  // Rails 1..: peerEndpoint_ again, except that peers on other hosts are reached through
  // the endpoint opened on this rank's NIC for that rail.
  std::vector<std::vector<transport::Endpoint*>> extraRails_;
  mem::HostBuffer scratch_;
  mem::Registrations registrations_;
  mutable std::mutex windowsMu_;
  std::vector<std::unique_ptr<Window>> windows_;
  uint64_t nextWindowId_ = 0;  // under windowsMu_
  // One-sided calls' receiving side, opened with the first window, and the thread that
  // serves it whenever no call of the application does (so that a put completes while
  // its target computes, or waits on another communicator). The inbox outlives the
  // endpoints its receives are posted on (see engine::Inbox).
  Status openInbox();
  void serveInbox();
  void stopInboxServer();
  Result<std::byte*> windowMemory(const engine::RmaHeader& h, int peer) const;
  std::unique_ptr<engine::Inbox> inbox_;
  Status inboxStatus_ = Status::Success;  // why the inbox could not open (under the drive mutex)
  std::thread inboxServer_;
  std::mutex inboxServerMu_;
  std::condition_variable inboxServerCv_;
  bool inboxStop_ = false;  // under inboxServerMu_
  tune::Context tuning_;
  // The ring the ring algorithms run on (TEMPO_RING_ORDER): ring_[p] is the rank at
  // position p; ringPos_ is this rank's position.
  RankPlace place_;           // this rank's NUMA node and NICs (join)
  std::vector<int> numaOf_;   // every rank's NUMA node (-1: unknown)
  int rails_ = 1;             // NICs every rank has (the fewest any rank names), at least 1
  int channels_ = 1;          // channels of the ring collectives (tune::channels)
  std::vector<int> ring_;
  int ringPos_ = 0;
  std::vector<int> hostOf_;  // each rank's host, numbered 0.. in order of first rank
  pacing::ClockOffset clock_;  // rank 0's clock - this rank's (syncClocks; invalid: not measured)
  bool clocksAllValid_ = false;  // every rank's offset is known (the same on every rank)
  int64_t collTimeoutNs_ = 0;  // TEMPO_COLL_TIMEOUT in ns (0: no limit)
  std::vector<engine::Tier> peerTier_;  // each rank's tier as seen from this one (for TEMPO_TRACE)
  bool checkMismatch_ = false;  // TEMPO_CHECK_MISMATCH, read at init
  // TEMPO_P2P_CHUNK_SIZE, read at init: the pieces of point-to-point messages (algo/p2p.h).
  static constexpr uint64_t kMinP2pChunk = 4096;
  uint64_t p2pChunk_ = 0;
  std::unique_ptr<engine::Engine> engine_;
  std::vector<std::unique_ptr<engine::Op>> ops_;
  std::vector<engine::Op*> freeOps_;
  // Point-to-point message counters per peer and direction (the msg of each message).
  std::vector<uint32_t> p2pSent_, p2pReceived_;
  algo::P2pPlanner p2pPlanner_;
  std::vector<size_t> a2aCounts_, a2aDispls_;  // all-to-all's fixed counts, as AllToAllv's
  std::deque<PreMulSumOp> userOps_;            // a deque: references stay valid as it grows
  std::atomic<int> asyncError_{0};
  mutable std::mutex errMu_;
  std::string errMsg_;
  bool finalized_ = false;
  std::timed_mutex driveMu_;
  std::atomic<bool> aborting_{false};
  std::atomic<bool> revoked_{false};
  std::atomic<bool> suspended_{false};
  uint32_t shrinks_ = 0;  // shrinkExchange calls so far: tells one shrink's messages from the next
  std::atomic<bool> initComplete_{false};
  std::atomic<uint64_t> opsIssued_{0};
  std::atomic<bool> inProgress_{false};
  int streamWork_ = 0;  // guarded by asyncMu_
  std::mutex asyncMu_;  // with asyncCv_: waiting for inProgress_ to clear or streamWork_ to reach 0
  std::condition_variable asyncCv_;
  std::unique_ptr<mem::StagingArena> staging_;
  std::unique_ptr<mem::StagingArena> deviceArena_;  // outlives engine_ (reset first)
  AsyncWorker worker_;  // last: joined before the members its job uses are destroyed
};

}  // namespace tempo::comm
