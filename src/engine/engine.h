// The progress engine: executes Plans over transports.
//
// One Engine per communicator. An Op is one collective in flight: its Plan, its buffers
// and its per-step state. The engine issues steps with a sliding window (any step whose
// dependencies are done may start, up to plan.window steps past the oldest unfinished
// one), posts transfers without blocking, runs reductions on the CPU as soon as their
// inputs have arrived, and records timestamps for every collective.
//
// Threading: an Engine and its Ops are driven by one thread at a time (the caller of the
// collective, or of ncclGroupEnd). progress() never blocks; waitAll() backs off from
// polling to yielding to sleeping when there is nothing to do, so that many ranks
// sharing a few cores do not starve each other.
//
// Ops on one engine run in submission order (op k+1 starts when op k is done), as on a
// stream. Failure of any step fails the op and, since posted transfers can then no longer
// be accounted for, cancels the engine's endpoints: the communicator is then unusable.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "src/algo/fingerprint.h"
#include "src/algo/plan.h"
#include "src/core/dtype.h"
#include "src/core/status.h"
#include "src/engine/regions.h"
#include "src/mem/staging_arena.h"
#include "src/pacing/flow.h"
#include "src/pacing/monitor.h"
#include "transports/transport.h"

namespace tempo::engine {

// Every point-to-point message's tag has this bit; no collective message's does.
inline constexpr uint64_t kP2pTagBit = uint64_t(1) << 39;
// A tag no collective or point-to-point message uses (see tagOf in engine.cc): a
// point-to-point tag's low 16 bits are 0. The communicator's connection handshake uses it.
inline constexpr uint64_t kHandshakeTag = kP2pTagBit | 0xffff;
// The skew telemetry exchange's messages: the p2p bit, the exchange's number, and this
// bit in the low 16 (whose other bits number the message within the exchange).
inline constexpr uint64_t kTelemetryTagBits = kP2pTagBit | 0x8000;
// One-sided calls' messages (ncclPutSignal, ncclSignal): the p2p bit and bit 14, clear of
// point-to-point tags (low 16 bits 0), telemetry's (bit 15) and the handshake's; this
// alone tags a put's header, this | 1 its data.
inline constexpr uint64_t kRmaTagBits = kP2pTagBit | 0x4000;

enum class CollKind : uint8_t {
  AllReduce = 0,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  AllToAllv,
  Gather,
  Scatter,
  SendRecv,  // the point-to-point calls of one group on one communicator, as one op
  PutSignal,   // ncclPutSignal / ncclSignal: a put into a peer's window and a signal
  WaitSignal,  // ncclWaitSignal: done once the inbox holds the signals it waits for
};
const char* collName(CollKind k);

// Peers' tiers and the per-tier and per-peer receive accounting (src/pacing/flow.h).
using pacing::Tier;
using pacing::Flow;
using pacing::PeerFlow;
using pacing::PeerFlows;
using pacing::kTiers;
using pacing::tierName;

// What a put tells its target (32 bytes): the window (numbered alike on every rank), the
// byte offset in it, and the data's length (0: a signal alone). The data follows as a
// message of its own.
inline constexpr uint32_t kRmaMagic = 0x31414d52;  // "RMA1"
struct RmaHeader {
  uint32_t magic = kRmaMagic;
  uint32_t reserved = 0;
  uint64_t window = 0, offset = 0, bytes = 0;
};
static_assert(sizeof(RmaHeader) == 32);

// The receiving side of one-sided calls on one communicator. Per peer, a receive is posted
// at all times for the next put's header, then one for its data, straight into the window
// memory the header names (resolve); then the peer's signal count rises, so that a wait
// that sees the signal sees the data. Puts from one peer land in the order they were made.
// The communicator owns it so that it outlives the endpoints its receives are posted on
// (an endpoint may complete or cancel them as it closes); the engine serves it
// (Engine::openInbox) under the communicator's drive mutex.
struct Inbox {
  enum class Stage : uint8_t { PostHeader, Header, PostData, Data, Failed };
  struct Peer {
    transport::Request header, data;
    RmaHeader hdr;
    std::byte* dst = nullptr;  // the data's destination (Stage::PostData, Data)
    Stage stage = Stage::PostHeader;
    Status status = Status::Success;  // why this peer's receives stopped (Stage::Failed)
    uint64_t arrived = 0;      // signals received
    uint64_t consumed = 0;     // signals taken by waits
  };
  std::vector<Peer> peers;
  // Where a put's data goes: its window's memory at the offset, checked against the
  // window's size. An error stops that peer's receives.
  std::function<Result<std::byte*>(const RmaHeader& h, int peer)> resolve;
  // Set once, when the engine failed and its endpoints took every receive with them: every
  // later wait fails with it. A failure of one peer's receives (that peer gone, a put that
  // does not fit) fails only the waits for that peer's signals.
  Status failed = Status::Success;
};

// What the engine records about every collective (skew measurement builds on this).
struct OpRecord {
  uint64_t seq = 0;
  int64_t tEnter = 0;      // op became active on this rank
  int64_t tFirstData = 0;  // first receive completed (0 if none)
  int64_t tExit = 0;       // last step done
  uint64_t bytes = 0;      // user payload bytes (count x type size)
  CollKind coll = CollKind::AllReduce;
  const char* algorithm = "";  // the plan's (static) name
  Status status = Status::Success;
  uint32_t registeredTransfers = 0;  // transfers on user buffers that named a UserRegions region
  int64_t delayNs = 0;     // pacing: the entry gate held the op this long after tEnter,
                           // or (injected) its sends were spread over this long
  bool injected = false;
  std::array<Flow, kTiers> flows{};  // receives by tier (only with setPeerTiers)
};

// A bounded ring of the most recent records. One writer (the engine); readers take
// snapshots by sequence number.
class RecordRing {
 public:
  static constexpr size_t kCapacity = 1024;
  void push(const OpRecord& r) {
    uint64_t h = head_.load(std::memory_order_relaxed);
    slots_[h % kCapacity] = r;
    head_.store(h + 1, std::memory_order_release);
  }
  uint64_t count() const { return head_.load(std::memory_order_acquire); }
  // The record written `back` pushes ago (0 = latest). Valid for back < min(count, kCapacity).
  const OpRecord& recent(size_t back) const { return slots_[(count() - 1 - back) % kCapacity]; }

 private:
  std::array<OpRecord, kCapacity> slots_{};
  std::atomic<uint64_t> head_{0};
};

// Receives every record as the engine pushes it (on the engine's thread): TEMPO_TRACE.
struct RecordSink {
  virtual ~RecordSink() = default;
  // `peers`: the op's receives by peer (empty unless the engine has peer tiers). Records
  // in the ring leave them out, to stay small: only the sink sees them.
  virtual void onRecord(const OpRecord& r, const PeerFlows& peers) = 0;
};

// What a collective's plan depends on besides its communicator: an op whose last plan
// has the same key may run it again (the plan's locations are relative to the buffers).
struct PlanKey {
  bool valid = false;
  CollKind coll = CollKind::AllReduce;
  DataType type = DataType::Float32;
  RedOp op = RedOp::Sum;
  bool preMulSum = false;
  bool inPlace = false;
  int root = -1;
  uint64_t count = 0;
  bool inputOnDevice = false, outputOnDevice = false;  // lowered (algo/device_lowering.h)
  bool operator==(const PlanKey&) const = default;
};

struct Op {
  // Set by the caller before submit().
  algo::Plan plan;
  PlanKey planKey;          // the call `plan` was made for (the caller's plan cache)
  const std::byte* input = nullptr;
  std::byte* output = nullptr;
  DataType type = DataType::Float32;
  RedOp op = RedOp::Sum;
  CollKind coll = CollKind::AllReduce;
  uint64_t payloadBytes = 0;
  // Point-to-point ops do not take a collective sequence number: their steps' msg is the
  // per-peer, per-direction message counter both sides keep, so that pairs of ranks can
  // exchange messages while the others do not (tags in a space of their own).
  bool p2p = false;
  // The engine's own telemetry exchange (setMonitor): its seq numbers exchanges, not
  // collectives, and it is neither recorded nor measured.
  bool internal = false;
  // Mismatch detection (algo/fingerprint.h): this rank's fingerprint of the call; round
  // 0's outgoing message (the fingerprint, then any data it carries) and incoming one;
  // the fingerprints received in rounds 1.. (round k in peerFingerprints[k - 1]). Each
  // Check step calls verify(op, theirs, thisRank, peer, &carried), whose error fails the
  // op and which says how many data bytes follow the fingerprint it read.
  // fingerprintRounds says how many rounds the plan's first 3 x rounds steps hold.
  static constexpr int kMaxFingerprintRounds = 31;  // 2^31 ranks
  static constexpr size_t kFingerprintBytes = 32;
  using Lead = std::array<std::byte, kFingerprintBytes + algo::kMaxCarriedBytes>;
  alignas(64) std::array<std::byte, kFingerprintBytes> fingerprint{};
  alignas(64) Lead leadOut{};
  alignas(64) Lead leadIn{};
  std::array<std::array<std::byte, kFingerprintBytes>, kMaxFingerprintRounds - 1> peerFingerprints{};
  uint32_t fingerprintRounds = 0;
  uint64_t carriedOut = 0;  // data bytes in round 0's outgoing message
  Status (*verify)(const Op& op, const std::byte* theirs, int rank, int peer, uint64_t* carried) = nullptr;
  // The op's status is the cause itself, not a symptom: verify found a mismatch, or a
  // liveness check failed it with a peer's notice. (Otherwise the communicator waits a
  // moment for a peer to explain a failed transfer.)
  bool causeKnown = false;
  // PreMulSum: when the op starts, the engine writes prescaleSrc x *scalar (one element of
  // `type`, read then, as a device-resident scalar is) into `prescaled`, which the plan
  // reads as its input; prescaleElems elements. Null prescaleSrc: no premultiplication.
  const std::byte* prescaleSrc = nullptr;
  const void* scalar = nullptr;
  uint64_t prescaleElems = 0;
  std::vector<std::byte> prescaled;  // pooled with the op, so its capacity is kept
  // AllReduceWithBias: once the op has succeeded, output = output (op) bias, element-wise
  // over payloadBytes (Avg adds the bias to the average).
  const std::byte* bias = nullptr;
  // A plan lowered for device buffers (algo/device_lowering.h): its Staging locations are
  // in the engine's device arena (setDeviceArena), reserved when the op starts.
  std::byte* staging = nullptr;

  // One-sided calls: a put's header (its plan's first send; a put to this rank copies and
  // signals itself, rmaSelf); a wait's (peer, signals) pairs, one per peer, done when the
  // inbox holds them all.
  RmaHeader rmaHeader;
  bool rmaSelf = false;
  std::vector<std::pair<int, uint64_t>> rmaWaits;

  // Engine state.
  uint64_t seq = 0;
  int64_t notBefore = 0;        // pacing's entry gate: no step starts before this time
  // Pacing's injection actuator: the k-th of injectSends sends starts no earlier than
  // injectFrom + injectSpan * k / injectSends (injectSpan 0: not spread).
  int64_t injectFrom = 0, injectSpan = 0;
  uint32_t injectSends = 0, sendsStarted = 0;
  std::vector<uint8_t> state;   // per step: 0 waiting, 1 posted, 2 done
  std::vector<uint16_t> reqOf;  // per posted step: its request slot
  uint32_t first = 0;           // oldest unfinished step
  uint32_t dataFirst = 0;       // oldest unfinished step past the fingerprint exchange
  int64_t carried = -1;         // data bytes in round 0's incoming message; -1: not yet checked
  Status status = Status::Success;
  bool done = false;
  OpRecord record;
  PeerFlows peers;  // receives by peer, while tracing (Engine::setPeerTiers)
};

// The engine's view of its owner. check() is consulted every 20 ms while a wait is idle
// and returns an error when a peer is known to be gone, which fails the wait instead of
// letting it hang. abortRequested() is read on every pass of a wait (an atomic load):
// when it turns true (ncclCommAbort on another thread), the wait aborts the engine (its
// ops fail with ncclInvalidUsage) and returns.
struct Liveness {
  virtual ~Liveness() = default;
  virtual Status check() = 0;
  virtual bool abortRequested() const { return false; }
};

class Engine {
 public:
  // `rails[k][r]` serves rank r on rail k (null for self); rails[0] is every peer's
  // primary endpoint, and a step of channel c goes over rail c % rails.size() (peers on
  // this host have one endpoint, listed on every rail). `endpoints` lists each distinct
  // one once. `scratch` is the communicator's pre-touched scratch memory.
  Engine(int rank, int nranks, std::vector<std::vector<transport::Endpoint*>> rails,
         std::vector<transport::Endpoint*> endpoints, std::span<std::byte> scratch,
         Liveness* liveness);

  // Queues `op`; it becomes active when the ops before it are done. The caller keeps
  // `op` alive until done.
  Status submit(Op& op);
  // Polls the transports once and advances the active op(s). Returns the work done.
  int progress();
  bool idle() const { return queue_.empty() && !exchangeActive_; }
  // When the op in flight (or the telemetry exchange before it) started; 0 when idle.
  int64_t activeSinceNs() const {
    if (exchangeActive_) return exchange_.record.tEnter;
    return queue_.empty() ? 0 : queue_.front()->record.tEnter;
  }
  // The op in flight (null while idle or while the telemetry exchange runs).
  const Op* activeOp() const { return exchangeActive_ || queue_.empty() ? nullptr : queue_.front(); }
  // The seq of the op in flight (the next collective's number while idle).
  uint64_t activeSeq() const { return queue_.empty() ? nextSeq_ : queue_.front()->seq; }
  // Whether the engine has failed; its endpoints are cancelled and every op errors.
  Status health() const { return failed_; }
  // Cancels every posted transfer and fails queued ops (abort); `causeKnown` marks their
  // status as the cause (see Op::causeKnown).
  void abort(Status why, bool causeKnown = false);

  // The buffers registered with the communicator (ncclCommRegister); safe from any thread.
  UserRegions& userRegions() { return userRegions_; }
  const RecordRing& records() const { return records_; }
  uint64_t nextSeq() const { return nextSeq_; }
  int outstandingLimit() const { return maxPosted_; }
  transport::Endpoint* endpointFor(int peer, unsigned channel = 0) const {
    return rails_[channel % rails_.size()][size_t(peer)];
  }
  std::span<transport::Endpoint* const> endpoints() const { return endpoints_; }
  Liveness* liveness() const { return liveness_; }
  // How long waitAll polls before yielding the CPU while this engine waits.
  void setSpinNs(int64_t ns) { spinNs_ = ns; }
  int64_t spinNs() const { return spinNs_; }
  // Skew measurement and pacing (src/pacing/monitor.h). With a monitor, every collective
  // is reported to it, gated by its delay, and every window closes with the telemetry
  // exchange: an internal MAX all-reduce that runs before the next op starts, with tags
  // of its own (kTelemetryTagBits). Every rank of the communicator must set one or none.
  // Call before the first submit; false when the scratch cannot hold the exchange.
  bool setMonitor(std::unique_ptr<pacing::SkewMonitor> monitor);
  pacing::SkewMonitor* monitor() const { return monitor_.get(); }
  // Which actuator applies the monitor's delays (pacing.md 1.6): the entry gate holds an
  // engaged op's every step for its delay; injection starts the op at once and spreads its
  // sends evenly over the delay (receives, reductions and copies never wait). Both are
  // local and bounded and leave the algorithm and the reduction order as they are.
  enum class Actuator : uint8_t { Gate, Inject };
  void setActuator(Actuator a) { actuator_ = a; }
  // Every record also goes to `sink` (null: none); it must outlive the engine's ops.
  void setRecordSink(RecordSink* sink) { sink_ = sink; }
  // Each rank's tier as seen from this one (tiers[rank] is ignored). With tiers, every
  // receive is accounted in its op's record.flows and by peer (for the sink), at the cost of a
  // clock read per message; empty (the default) turns the accounting off.
  void setPeerTiers(std::vector<Tier> tiers) { peerTier_ = std::move(tiers); }
  // Runs the device steps of plans lowered for device buffers (algo/device_lowering.h):
  // each op's staging is `arena`'s pinned memory (one op runs at a time, so they share
  // it), and its DeviceCopy and DeviceReduce steps run on the arena's stream, each posted
  // and then polled through an event like a transfer. Set before submitting a lowered op;
  // the arena outlives the engine and is used by nothing else while the engine runs.
  void setDeviceArena(mem::StagingArena* arena) { deviceArena_ = arena; }
  // One-sided calls (ncclPutSignal, ncclSignal, ncclWaitSignal): posts the inbox's
  // receives, which stay posted for the engine's life; every rank opens its inbox with its
  // first window. Fails when the endpoints cannot hold two more requests per peer beside
  // the engine's own.
  Status openInbox(Inbox* inbox);
  bool inboxOpen() const { return inbox_ != nullptr; }
  // Polls the transports and serves the inbox while no op runs (the communicator's inbox
  // server, under its drive mutex). Returns the work done.
  int pollInbox();
  // Whether device steps are in flight (they complete without waking a transport).
  bool deviceBusy() const { return freeEvents_.size() != deviceEvents_.size(); }
  ~Engine();
  // Nanoseconds until the active op's gate opens or its next spread send is due (0: none).
  int64_t gateRemainingNs(int64_t now) const;

 private:
  int advance(Op& op);
  // The telemetry exchange: start it (the window just closed) and take in its result.
  void beginExchange();
  void endExchange();
  // The op has reached the front of the queue: timestamp it and premultiply its input.
  void activate(Op& op);
  enum class Start { Done, Deferred, NoSlots };
  // Starts step i of op. Deferred: the transport is momentarily full (try the later
  // steps, then this one again next pass); NoSlots: no request slot for it now.
  Start start(Op& op, uint32_t i);
  // Device steps: queue step i on the device arena's stream with an event to poll; whether
  // a posted one has finished (its status in *st); and, after a failure, waiting for the
  // device's work and dropping every event (the staging must not be reused before).
  Status startDevice(Op& op, uint32_t i);
  bool deviceDone(uint16_t slot, Status* st);
  void drainDevice();
  void finish(Op& op, Status s);
  // The inbox's receives: advance every peer's as far as they go; the work done.
  int serveInbox();
  bool serveInboxPeer(int peer);
  // A wait op: done (consuming its signals) once they have all arrived.
  int advanceWait(Op& op);
  // The time the op's next spread send may start (injection).
  static int64_t nextInjection(const Op& op);
  std::byte* resolve(const Op& op, const algo::Loc& loc) const;

  int rank_, nranks_;
  std::vector<std::vector<transport::Endpoint*>> rails_;  // never empty
  std::vector<transport::Endpoint*> endpoints_;
  std::span<std::byte> scratch_;
  // scratch_ registered with endpoints_[i] (null where registration failed): transfers
  // into and out of scratch name it, so UCX need not register or look it up per call.
  std::vector<std::unique_ptr<transport::MemRegion>> scratchRegions_;
  const transport::MemRegion* scratchRegion(const transport::Endpoint* ep) const;
  UserRegions userRegions_;  // after endpoints_, which it refers to
  // FIFO of submitted ops, without per-push allocation: a vector whose capacity is
  // kept, emptied whenever the last op leaves.
  class OpQueue {
   public:
    bool empty() const { return head_ == ops_.size(); }
    size_t size() const { return ops_.size() - head_; }
    Op* front() const { return ops_[head_]; }
    void push_back(Op* op) { ops_.push_back(op); }
    void pop_front() {
      if (++head_ == ops_.size()) {
        ops_.clear();
        head_ = 0;
      }
    }

   private:
    std::vector<Op*> ops_;
    size_t head_ = 0;
  };
  OpQueue queue_;
  uint64_t nextSeq_ = 0;
  Status failed_ = Status::Success;
  Liveness* liveness_ = nullptr;
  int64_t spinNs_ = 20000;

  // Request pool: one slot per posted transfer.
  std::vector<transport::Request> reqs_;
  std::vector<uint16_t> freeReqs_;
  int postedSends_ = 0, postedRecvs_ = 0;  // of the data path's transfers (start())
  int sideLimit_ = 0;  // the most of either (half the slots, fewer once the inbox takes some)
  mem::StagingArena* deviceArena_ = nullptr;
  std::vector<void*> deviceEvents_;  // by slot; null when free
  std::vector<uint16_t> freeEvents_;
  int maxPosted_ = 0;
  // Per peer: the scan generation in which a send to it could not start.
  std::vector<uint32_t> sendBlocked_;
  uint32_t scanGen_ = 0;
  RecordRing records_;
  RecordSink* sink_ = nullptr;
  std::vector<Tier> peerTier_;
  Actuator actuator_ = Actuator::Gate;
  // A receive of `bytes` from `peer` completed now: tFirstData, and its tier's flow.
  void noteReceived(Op& op, int peer, uint64_t bytes);
  void pushRecord(const Op& op) {
    records_.push(op.record);
    if (sink_) sink_->onRecord(op.record, op.peers);
  }
  // Pacing: the monitor, and the exchange op with its input and output words.
  std::unique_ptr<pacing::SkewMonitor> monitor_;
  Op exchange_;
  std::vector<uint64_t> exchangeIn_, exchangeOut_;
  uint64_t exchanges_ = 0;
  bool exchangeDue_ = false, exchangeActive_ = false;
  Inbox* inbox_ = nullptr;  // one-sided calls' receiving side, once opened (not owned)
};

// Drives `engines` until each is idle (or failed), backing off when there is no work:
// spin for the engines' spin time, then yield until TEMPO_YIELD_US, then sleep in growing steps
// (waiting on the transport where there is a single endpoint to wait on). Each engine's
// Liveness is consulted every 20 ms without progress and may fail the wait.
Status waitAll(std::span<Engine* const> engines);

}  // namespace tempo::engine
