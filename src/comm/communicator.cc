#include "src/comm/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

#include "src/algo/channels.h"
#include "src/algo/collectives.h"
#include "src/algo/device_lowering.h"
#include "src/algo/direct_allreduce.h"
#include "src/algo/fingerprint.h"
#include "src/algo/hier_allreduce.h"
#include "src/algo/p2p.h"
#include "src/algo/rd_allreduce.h"
#include "src/algo/ring.h"
#include "src/algo/ring_allreduce.h"
#include "src/algo/steps.h"
#include "src/algo/tree_allreduce.h"
#include "src/core/host.h"
#include "src/core/log.h"
#include "src/core/param.h"
#include "src/mem/device_api.h"
#include "src/tune/tune.h"

namespace tempo::comm {
namespace {

void logBannerOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    TEMPO_LOG(log::Level::Version, log::Init, "NCCL version %d.%d.%d+tempo%s", NCCL_MAJOR, NCCL_MINOR,
              NCCL_PATCH, TEMPO_VERSION_STRING);
    param::logNonDefault();
  });
}

}  // namespace

std::unique_ptr<Communicator> Communicator::pending(const Config& config, int device) {
  std::unique_ptr<Communicator> c(new Communicator());
  c->config_ = config;
  c->device_ = device;
  c->inProgress_.store(true, std::memory_order_release);
  return c;
}

Result<std::unique_ptr<Communicator>> Communicator::create(const bootstrap::UniqueId& id, int nranks, int rank,
                                                           const Config& config, int device) {
  std::unique_ptr<Communicator> c = pending(config, device);
  Status s = c->join(id, nranks, rank);
  c->inProgress_.store(false, std::memory_order_release);
  TEMPO_TRY(s);
  return c;
}

Status Communicator::join(const bootstrap::UniqueId& id, int nranks, int rank) {
  logBannerOnce();
  TEMPO_TRY(tune::checkOverrides());
  rank_ = rank;
  nranks_ = nranks;
  log::setThreadDevice(device_);
  // ncclCommAbort during a nonblocking init cancels the bootstrap's waits.
  const Deadline deadline = Deadline::afterSeconds(param::InitTimeout()).cancelledBy(&aborting_);
  TEMPO_INFO(log::Init, "comm %p rank %d nranks %d cudaDev %d - Init START", static_cast<void*>(this), rank,
             nranks, device_);

  TEMPO_ASSIGN(boot_, bootstrap::Bootstrap::join(id, rank, nranks, deadline));
  uint64_t nonce = boot_->commNonce();
  commHash_ = fnv1a(&nonce, sizeof nonce);
  TEMPO_ASSIGN(place_, placeThisRank());
  TEMPO_TRY(exchangePlaces(deadline));
  TEMPO_TRY(connectTransports(deadline));
  TEMPO_TRY(handshake(deadline));
  TEMPO_TRY(buildRing(deadline));
  TEMPO_ASSIGN(scratch_, mem::HostBuffer::allocate(size_t(std::max<int64_t>(param::BuffSize(), 64 << 10))));

  std::vector<transport::Endpoint*> eps;
  for (auto& ep : endpoints_) eps.push_back(ep.get());
  std::vector<std::vector<transport::Endpoint*>> rails{peerEndpoint_};
  rails.insert(rails.end(), extraRails_.begin(), extraRails_.end());
  engine_ = std::make_unique<engine::Engine>(rank, nranks, std::move(rails), std::move(eps),
                                             std::span(scratch_.data(), scratch_.size()), this);
  // Polling only pays while every rank on this machine has a core: with more ranks than
  // cores a spinning rank takes the core its peer needs, so it yields at once instead.
  // Ranks count by kernel, not host name: emulated hosts (TEMPO_HOSTNAME, one network
  // namespace each) share the cores of the machine they run on.
  int localRanks = 0;
  const auto& me = boot_->peers()[size_t(rank)];
  for (const auto& p : boot_->peers()) localRanks += p.kernelHash == me.kernelHash;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int64_t spinUs = param::SpinUs() >= 0 ? param::SpinUs() : (localRanks > cores ? 0 : 20);
  engine_->setSpinNs(spinUs * 1000);
  tuning_.nranks = nranks;
  tuning_.channels = channels_;
  checkMismatch_ = nranks > 1 && param::CheckMismatch();
  p2pChunk_ = param::P2pChunkSize() <= 0 ? 0 : std::max<uint64_t>(kMinP2pChunk, uint64_t(param::P2pChunkSize()));
  collTimeoutNs_ = std::clamp<int64_t>(param::CollTimeout(), 0, INT64_MAX / 1000000000) * 1000000000;
  TEMPO_TRY(startTelemetry());
  trace_ = TraceWriter::open(param::Trace(), {commHash_, rank, nranks, boot_->peers()[size_t(rank)].hostname});
  if (trace_) {
    engine_->setRecordSink(trace_.get());
    engine_->setPeerTiers(peerTier_);
  }
  tuning_.oversubscribed = localRanks > cores;
  tuning_.scratchBytes = scratch_.size();
  for (auto& ep : endpoints_) tuning_.slowest = std::max(tuning_.slowest, ep->kind());
  tuning_.net = tune::netCost(tuning_.slowest);
  TEMPO_INFO(log::Init, "comm %p rank %d: %d ranks on this machine with %ld cores, polling %ld us before yielding",
             static_cast<void*>(this), rank, localRanks, cores, long(spinUs));
  if (rank == 0) logTuning();

  // Every rank has connected before anyone sends.
  TEMPO_TRY(boot_->barrier(deadline));
  // Clock offsets to rank 0's, for traces laid side by side and for the skew of the
  // asymmetric collectives: when any rank traces or telemetry is on (alike on every rank),
  // every rank takes part in the probes (a rank whose trace file failed to open too).
  // Only ranks on other hosts than rank 0's probe; on one host the offset is 0.
  bool syncs = false;
  for (const auto& p : boot_->peers())
    syncs |= (p.features & (bootstrap::kFeatureTrace | bootstrap::kFeatureTelemetry)) != 0;
  if (syncs && nranks > 1) {
    TEMPO_TRY(syncClocks(deadline));
    if (trace_) trace_->setClock(clock_);
    if (pacing::SkewMonitor* m = skewMonitor(); m && clocksAllValid_) m->setClock(clock_.offsetNs, nowNs());
  }
  if (deadline.cancelled()) return fail(Status::InvalidUsage, "comm %p rank %d: init aborted", static_cast<void*>(this), rank);
  initComplete_.store(true, std::memory_order_release);
  TEMPO_INFO(log::Init, "comm %p rank %d nranks %d cudaDev %d busId 0 commId %#lx - Init COMPLETE",
             static_cast<void*>(this), rank, nranks, device_, (unsigned long)commHash_);
  return Status::Success;
}

Result<Communicator::SplitTarget> Communicator::splitExchange(int color, int key) {
  constexpr int kNoColor = -1;  // NCCL_SPLIT_NOCOLOR
  const Deadline deadline = Deadline::afterSeconds(param::InitTimeout()).cancelledBy(&aborting_);
  const size_t n = size_t(nranks_);
  // Phase 1: every rank's color and key, around the parent's bootstrap ring.
  struct Entry {
    int32_t color, key;
  };
  std::vector<std::byte> table(n * sizeof(Entry));
  const Entry mine{color, key};
  memcpy(table.data() + size_t(rank_) * sizeof(Entry), &mine, sizeof mine);
  TEMPO_TRY(boot_->allGather(table, sizeof(Entry), deadline));
  // Phase 2: this color's members in (key, parent rank) order.
  std::vector<std::pair<int, int>> members;  // (key, parent rank)
  for (size_t r = 0; r < n; ++r) {
    Entry e;
    memcpy(&e, table.data() + r * sizeof(Entry), sizeof e);
    if (color != kNoColor && e.color == color) members.push_back({e.key, int(r)});
  }
  std::sort(members.begin(), members.end());
  const int leader = members.empty() ? -1 : members.front().second;
  // Phase 3: each color's first member opens the new rendezvous; one more all-gather hands
  // every rank its leader's unique id.
  constexpr size_t kId = bootstrap::kUniqueIdBytes;
  std::vector<std::byte> ids(n * kId);
  if (rank_ == leader)
    TEMPO_TRY(bootstrap::createUniqueId(
        std::span<uint8_t, kId>(reinterpret_cast<uint8_t*>(ids.data() + size_t(rank_) * kId), kId)));
  TEMPO_TRY(boot_->allGather(ids, kId, deadline));
  SplitTarget t;
  if (color == kNoColor) return t;
  int newRank = 0;
  while (members[size_t(newRank)].second != rank_) ++newRank;
  TEMPO_ASSIGN(t.id, bootstrap::decodeUniqueId(std::span<const uint8_t, kId>(
                   reinterpret_cast<const uint8_t*>(ids.data() + size_t(leader) * kId), kId)));
  TEMPO_INFO(log::Init, "comm %p rank %d splits with color %d key %d: rank %d of %zu", static_cast<void*>(this),
             rank_, color, key, newRank, members.size());
  t.nranks = int(members.size());
  t.rank = newRank;
  return t;
}

Result<std::unique_ptr<Communicator>> Communicator::split(int color, int key, const Config& config) {
  TEMPO_ASSIGN(SplitTarget t, splitExchange(color, key));
  if (t.nranks == 0) return std::unique_ptr<Communicator>();
  return create(t.id, t.nranks, t.rank, config, device_);
}

namespace {

// The leader's shrink message: which shrink (the parent's count of them), a digest of the
// excluded ranks, and the new communicator's unique id. Little-endian, fixed size.
constexpr size_t kShrinkMsgBytes = 4 + 8 + bootstrap::kUniqueIdBytes;

uint64_t digestRanks(std::span<const int> ranks) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the sorted list
  for (int r : ranks)
    for (int b = 0; b < 4; ++b) h = (h ^ uint8_t(uint32_t(r) >> (8 * b))) * 1099511628211ull;
  return h ^ ranks.size();
}

void putLe(uint8_t* p, uint64_t v, int bytes) {
  for (int b = 0; b < bytes; ++b) p[b] = uint8_t(v >> (8 * b));
}
uint64_t getLe(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int b = 0; b < bytes; ++b) v |= uint64_t(p[b]) << (8 * b);
  return v;
}

}  // namespace

Result<Communicator::SplitTarget> Communicator::shrinkExchange(std::span<const int> excluded) {
  const Deadline deadline = Deadline::afterSeconds(param::InitTimeout()).cancelledBy(&aborting_);
  const uint32_t seq = shrinks_++;
  const uint64_t digest = digestRanks(excluded);
  // Phase 1: the survivors in parent order; this rank's place among them is its new rank.
  std::vector<int> survivors;
  for (int r = 0, e = 0; r < nranks_; ++r) {
    if (size_t(e) < excluded.size() && excluded[size_t(e)] == r) ++e;
    else survivors.push_back(r);
  }
  SplitTarget t;
  t.nranks = int(survivors.size());
  t.rank = int(std::find(survivors.begin(), survivors.end(), rank_) - survivors.begin());
  const int leader = survivors.front();
  // Phase 2: the leader opens the new rendezvous and offers every survivor its id.
  std::array<uint8_t, kShrinkMsgBytes> offer;
  auto verdict = [seq](bool agree) {
    std::array<uint8_t, 5> v;
    putLe(v.data(), seq, 4);
    v[4] = agree;
    return v;
  };
  auto readVerdict = [seq](const std::vector<uint8_t>& v) { return v.size() == 5 && getLe(v.data(), 4) == seq && v[4]; };
  const auto reach = [&](int r, std::span<const uint8_t> m) -> Status {
    Status s = boot_->sendDirect(r, m, deadline);
    if (ok(s)) return s;
    const std::string why = lastErrorMessage();
    return fail(s, "ncclCommShrink: rank %d could not reach surviving rank %d: %s", rank_, r, why.c_str());
  };
  const char* kDisagree =
      "ncclCommShrink: the surviving ranks passed different exclude lists (or have shrunk this communicator a different "
      "number of times); rank %d's list has %zu ranks";
  if (rank_ == leader) {
    putLe(offer.data(), seq, 4);
    putLe(offer.data() + 4, digest, 8);
    TEMPO_TRY(bootstrap::createUniqueId(std::span<uint8_t, bootstrap::kUniqueIdBytes>(offer.data() + 12, 128)));
    for (int r : survivors)
      if (r != rank_) TEMPO_TRY(reach(r, offer));
    // Phase 3: each survivor says whether its list matched; the leader tells all the outcome.
    bool agree = true;
    for (size_t heard = 1; heard < survivors.size(); ++heard) {
      TEMPO_ASSIGN(std::vector<uint8_t> v, boot_->recvDirect(-1, 5, deadline));
      agree = agree && readVerdict(v);
    }
    for (int r : survivors)
      if (r != rank_) TEMPO_TRY(reach(r, verdict(agree)));
    if (!agree) return fail(Status::InvalidUsage, kDisagree, rank_, excluded.size());
  } else {
    TEMPO_ASSIGN(std::vector<uint8_t> got, boot_->recvDirect(leader, kShrinkMsgBytes, deadline));
    const bool match = got.size() == kShrinkMsgBytes && getLe(got.data(), 4) == seq && getLe(got.data() + 4, 8) == digest;
    TEMPO_TRY(reach(leader, verdict(match)));
    TEMPO_ASSIGN(std::vector<uint8_t> outcome, boot_->recvDirect(leader, 5, deadline));
    if (!match || !readVerdict(outcome)) return fail(Status::InvalidUsage, kDisagree, rank_, excluded.size());
    std::copy(got.begin(), got.end(), offer.begin());
  }
  TEMPO_ASSIGN(t.id, bootstrap::decodeUniqueId(std::span<const uint8_t, bootstrap::kUniqueIdBytes>(offer.data() + 12, 128)));
  TEMPO_INFO(log::Init, "comm %p rank %d shrinks without %zu ranks: rank %d of %d", static_cast<void*>(this), rank_,
             excluded.size(), t.rank, t.nranks);
  return t;
}

Result<Communicator::SplitTarget> Communicator::growExchange(int nranks, const bootstrap::UniqueId* id) {
  const Deadline deadline = Deadline::afterSeconds(param::InitTimeout()).cancelledBy(&aborting_);
  // Every rank's nranks and, where it has one, its encoded id, around the ring.
  constexpr size_t kId = bootstrap::kUniqueIdBytes, kBlock = 8 + kId;
  std::vector<std::byte> table(size_t(nranks_) * kBlock);
  uint8_t* mine = reinterpret_cast<uint8_t*>(table.data()) + size_t(rank_) * kBlock;
  putLe(mine, uint32_t(nranks), 4);
  putLe(mine + 4, id ? 1 : 0, 4);
  if (id) bootstrap::encodeUniqueId(*id, std::span<uint8_t, kId>(mine + 8, kId));
  TEMPO_TRY(boot_->allGather(table, kBlock, deadline));
  const uint8_t* chosen = nullptr;
  for (int r = 0; r < nranks_; ++r) {
    const uint8_t* b = reinterpret_cast<const uint8_t*>(table.data()) + size_t(r) * kBlock;
    if (int(getLe(b, 4)) != nranks)
      return fail(Status::InvalidUsage, "ncclCommGrow: rank %d passes nRanks %d but rank %d passes %d", rank_, nranks,
                  r, int(getLe(b, 4)));
    if (!getLe(b + 4, 4)) continue;
    if (!chosen) chosen = b + 8;
    else if (memcmp(chosen, b + 8, kId) != 0)
      return fail(Status::InvalidUsage, "ncclCommGrow: ranks of comm %p passed different unique ids",
                  static_cast<void*>(this));
  }
  if (!chosen)
    return fail(Status::InvalidArgument,
                "ncclCommGrow: no rank of comm %p passed the unique id (make one with ncclCommGetUniqueId)",
                static_cast<void*>(this));
  SplitTarget t;
  TEMPO_ASSIGN(t.id, bootstrap::decodeUniqueId(std::span<const uint8_t, kId>(chosen, kId)));
  t.nranks = nranks;
  t.rank = rank_;
  TEMPO_INFO(log::Init, "comm %p rank %d grows from %d to %d ranks", static_cast<void*>(this), rank_, nranks_, nranks);
  return t;
}

Result<void*> Communicator::registerBuffer(void* buff, size_t size) {
  TEMPO_ASSIGN(void* handle, registrations_.add(buff, size));
  Status st = engine_->userRegions().add(handle, buff, size);
  if (!ok(st)) {
    (void)registrations_.remove(handle);
    return st;
  }
  return handle;
}

Status Communicator::deregisterBuffer(void* handle) {
  TEMPO_TRY(registrations_.remove(handle));
  engine_->userRegions().remove(handle);
  return Status::Success;
}

Communicator::~Communicator() {
  stopInboxServer();  // it drives the engine
  worker_.stop();  // a nonblocking job uses everything below
  engine_.reset();
  trace_.reset();  // after the engine, which writes to it
  endpoints_.clear();
}

engine::Op* Communicator::takeOp(const CollArgs& a, uint64_t payloadBytes) {
  opsIssued_.fetch_add(1, std::memory_order_relaxed);
  engine::Op* op;
  if (!freeOps_.empty()) {
    op = freeOps_.back();
    freeOps_.pop_back();
  } else {
    ops_.push_back(std::make_unique<engine::Op>());
    op = ops_.back().get();
  }
  op->input = static_cast<const std::byte*>(a.send);
  op->output = static_cast<std::byte*>(a.recv);
  op->type = a.type;
  op->op = a.op;
  op->coll = a.coll;
  op->p2p = a.p2p != P2p::None;
  op->verify = nullptr;
  op->fingerprintRounds = 0;
  op->causeKnown = false;
  op->prescaleSrc = nullptr;
  op->scalar = a.scalar;
  op->bias = static_cast<const std::byte*>(a.bias);
  op->payloadBytes = payloadBytes;
  op->rmaSelf = false;
  op->rmaWaits.clear();
  return op;
}

Result<engine::Op*> Communicator::prepareRma(const CollArgs& a) {
  using engine::CollKind;
  if (!inbox_)
    return ok(inboxStatus_) ? fail(Status::InvalidUsage,
                                   "comm %p rank %d: one-sided calls need a window (ncclCommWindowRegister) first",
                                   static_cast<void*>(this), rank_)
                            : inboxStatus_;
  const uint64_t bytes = a.count * dataTypeSize(a.type);
  engine::Op* op = takeOp(a, bytes);
  op->p2p = true;  // like point-to-point: no collective sequence number, no skew sample
  op->planKey = {};
  op->plan.clear();
  algo::Plan& plan = op->plan;
  if (a.coll == CollKind::PutSignal) {
    const auto* w = static_cast<const Window*>(a.window);
    plan.algorithm = "put";
    TEMPO_INFO(log::P2p, "PutSignal: %lu bytes from %p to rank %d's window #%ld at offset %lu comm %p [nranks=%d]",
               (unsigned long)bytes, a.send, a.peer, w ? long(w->id) : -1L, (unsigned long)a.windowOffset,
               static_cast<void*>(this), nranks_);
    if (a.peer == rank_) {
      // To this rank's own window: a copy, and the signal when the op finishes.
      op->rmaSelf = true;
      if (bytes == 0) return op;
      algo::Step copy;
      copy.kind = algo::StepKind::Copy;
      copy.bytes = bytes;
      copy.src = {algo::BufId::Input, 0};
      copy.dst = algo::absolute(static_cast<std::byte*>(w->buff) + a.windowOffset);
      plan.add(copy);
    } else {
      op->rmaHeader = engine::RmaHeader{};
      op->rmaHeader.window = w ? w->id : 0;  // ncclSignal names no window
      op->rmaHeader.offset = a.windowOffset;
      op->rmaHeader.bytes = bytes;
      algo::Step header;
      header.kind = algo::StepKind::Send;
      header.peer = a.peer;
      header.msg = 0;
      header.bytes = sizeof(engine::RmaHeader);
      header.src = algo::absolute(&op->rmaHeader);
      plan.add(header);
      if (bytes) {
        algo::Step data = header;
        data.msg = 1;
        data.bytes = bytes;
        data.src = {algo::BufId::Input, 0};
        plan.add(data);
      }
    }
  } else {
    // Waits on one peer add up; a wait for nothing is done at once.
    plan.algorithm = "wait";
    TEMPO_INFO(log::P2p, "WaitSignal: %d descriptors comm %p [nranks=%d]", a.nWaits, static_cast<void*>(this),
               nranks_);
    for (int i = 0; i < a.nWaits; ++i) {
      const SignalWait& d = a.waits[i];
      if (d.count == 0) continue;
      auto it = std::find_if(op->rmaWaits.begin(), op->rmaWaits.end(), [&](const auto& x) { return x.first == d.peer; });
      if (it == op->rmaWaits.end()) op->rmaWaits.emplace_back(d.peer, uint64_t(d.count));
      else it->second += uint64_t(d.count);
    }
  }
  return op;
}

namespace {
// Pinned slots per direction of a plan lowered for device buffers: enough to keep a
// chunk's copy and the next chunks' transfers in flight together (the double buffering
// of device_lowering.h, with room for a ring's sends and forwards).
constexpr uint32_t kDeviceSlots = 4;
// ...within this much pinned memory where the plan's messages are large (whole blocks).
constexpr uint64_t kDeviceSlotBudget = uint64_t(64) << 20;
}  // namespace

Result<engine::Op*> Communicator::prepare(const CollArgs& a) {
  using engine::CollKind;
  const uint32_t typeSize = uint32_t(dataTypeSize(a.type));
  const uint64_t bytes = a.count * typeSize;
  const uint64_t block = bytes;  // per-rank block of the rooted and gathering collectives
  engine::Op* op = takeOp(a, bytes);
  const std::byte* send = static_cast<const std::byte*>(a.send);
  const std::byte* recv = static_cast<const std::byte*>(a.recv);
  if (a.scalar) {
    // PreMulSum: the plan reads the premultiplied copy the engine makes when the op starts,
    // so it is planned out of place whatever the user's buffers.
    op->prescaleElems = a.coll == engine::CollKind::ReduceScatter ? a.count * uint64_t(nranks_) : a.count;
    op->prescaled.resize(op->prescaleElems * typeSize);
    op->prescaleSrc = send;
    send = op->prescaled.data();
    op->input = send;
  }
  if (a.coll == CollKind::SendRecv) {
    release(op);
    return fail(Status::InternalError, "point-to-point calls are planned by prepareP2p");
  }

  // Phase 1: what the plan depends on besides the communicator: NCCL's in-place rule of
  // each collective, and the payload the records count.
  bool inPlace = send == recv;
  switch (a.coll) {
    case CollKind::AllGather:
    case CollKind::Gather:
      inPlace = send == recv + uint64_t(rank_) * block && (a.coll == CollKind::AllGather || rank_ == a.root);
      op->payloadBytes = bytes * uint64_t(nranks_);
      break;
    case CollKind::ReduceScatter:
    case CollKind::Scatter:
      inPlace = recv == send + uint64_t(rank_) * block && (a.coll == CollKind::ReduceScatter || rank_ == a.root);
      op->payloadBytes = bytes * uint64_t(nranks_);
      break;
    case CollKind::AllToAll:
      op->payloadBytes = bytes * uint64_t(nranks_);
      break;
    case CollKind::AllToAllv: {
      uint64_t sent = 0, received = 0;
      for (size_t j = 0; j < size_t(nranks_); ++j) {
        sent += a.sendCounts[j];
        received += a.recvCounts[j];
      }
      op->payloadBytes = std::max(sent, received) * typeSize;
      break;
    }
    default:
      break;
  }

  // Phase 2: plan, unless this pooled op last ran the same call (a training loop's
  // collectives repeat): a plan depends only on the key and the communicator. The
  // v-counts of AllToAllv are not in the key, so it is always planned.
  engine::PlanKey key;
  key.valid = a.coll != CollKind::AllToAllv;
  key.coll = a.coll;
  key.type = a.type;
  key.op = a.op;
  key.preMulSum = a.scalar != nullptr;
  key.inPlace = inPlace;
  key.root = a.root;
  key.count = a.count;
  key.inputOnDevice = a.sendOnDevice;
  key.outputOnDevice = a.recvOnDevice;
  if (!key.valid || !(key == op->planKey)) {
    op->planKey = {};
    op->plan.clear();
    plan(a, inPlace, op->plan);
    op->carriedOut = prependFingerprint(*op);
    if (a.sendOnDevice || a.recvOnDevice) {
      algo::lowerForDevice(op->plan, {a.sendOnDevice, a.recvOnDevice, kDeviceSlots, kDeviceSlotBudget});
      engine_->setDeviceArena(&deviceArena(*mem::deviceApi()));
    }
    op->planKey = key;
  }
  writeFingerprint(*op, a);
  logCall(a, engine_->nextSeq());
  return op;
}

void Communicator::plan(const CollArgs& a, bool inPlace, algo::Plan& out) {
  using engine::CollKind;
  const uint32_t typeSize = uint32_t(dataTypeSize(a.type));
  const uint64_t bytes = a.count * typeSize;
  algo::CollPlanArgs c;
  c.count = a.count;
  c.typeSize = typeSize;
  c.average = a.op == RedOp::Avg;
  c.rank = rank_;
  c.nranks = nranks_;
  c.root = a.root;
  c.inPlace = inPlace;
  c.chunkBytes = tune::chainChunk(bytes, tuning_);
  c.scratchBytes = scratch_.size();
  c.ring = ring_;  // ring all-gather and reduce-scatter run on the topology ring
  switch (a.coll) {
    case CollKind::AllReduce: {
      tune::AllReduceChoice choice = tune::allReduce(bytes, tuning_, c.average);
      if (choice.algo == tune::AllReduceAlgo::Direct) {
        algo::planDirectAllReduce(c, out);
      } else if (choice.algo == tune::AllReduceAlgo::Hierarchical) {
        algo::HierAllReduceArgs h;
        h.base = c;
        h.base.chunkBytes = choice.chunkBytes;
        h.hostOf = hostOf_;
        h.localChunkBytes = choice.localChunkBytes;
        h.leaders = choice.leaders == tune::LeaderAlgo::Tree   ? algo::LeaderAlgo::Tree
                    : choice.leaders == tune::LeaderAlgo::Ring ? algo::LeaderAlgo::Ring
                                                               : algo::LeaderAlgo::RecursiveDoubling;
        algo::planHierAllReduce(h, out);
      } else if (choice.algo == tune::AllReduceAlgo::Tree) {
        c.chunkBytes = choice.chunkBytes;
        algo::planTreeAllReduce(c, out);
      } else if (choice.algo == tune::AllReduceAlgo::RecursiveDoubling) {
        algo::planRdAllReduce(c, out);
      } else {
        c.chunkBytes = choice.chunkBytes;
        algo::planRingChannels(algo::RingColl::AllReduce, c, tune::ringChannels(bytes, tuning_), out);
      }
      out.algorithm = tune::candidateName({choice.algo, choice.leaders, 0});
      TEMPO_TRACE(log::Tuning, "AllReduce %lu bytes: %s, chunk %lu", (unsigned long)bytes, out.algorithm,
                  (unsigned long)choice.chunkBytes);
      break;
    }
    case CollKind::Broadcast: {
      const tune::BroadcastAlgo algo = tune::broadcast(bytes, tuning_);
      if (algo == tune::BroadcastAlgo::Tree) algo::planTreeBroadcast(c, out);
      else algo::planChainBroadcast(c, out);
      out.algorithm = tune::algoName(algo);
      TEMPO_TRACE(log::Tuning, "Broadcast %lu bytes: %s, chunk %lu", (unsigned long)bytes, tune::algoName(algo),
                  (unsigned long)c.chunkBytes);
      break;
    }
    case CollKind::Reduce:
      algo::planChainReduce(c, out);
      out.algorithm = "chain";
      break;
    case CollKind::AllGather:
    case CollKind::ReduceScatter: {
      // A channel's part of each block moves on its own ring (channels.h).
      const int channels = tune::ringChannels(bytes * uint64_t(nranks_), tuning_);
      c.chunkBytes = tune::ringChunk(bytes / uint64_t(channels), tuning_);
      algo::planRingChannels(a.coll == CollKind::AllGather ? algo::RingColl::AllGather : algo::RingColl::ReduceScatter,
                             c, channels, out);
      out.algorithm = "ring";
      break;
    }
    case CollKind::Gather:
      algo::planGather(c, out);
      out.algorithm = "direct";
      break;
    case CollKind::Scatter:
      algo::planScatter(c, out);
      out.algorithm = "direct";
      break;
    case CollKind::AllToAll:
    case CollKind::AllToAllv: {
      algo::AllToAllvArgs v;
      v.typeSize = typeSize;
      v.rank = rank_;
      v.nranks = nranks_;
      const size_t n = size_t(nranks_);
      if (a.coll == CollKind::AllToAll) {
        // Fixed counts: count elements to and from every peer, at j * count.
        a2aCounts_.assign(n, a.count);
        a2aDispls_.resize(n);
        for (size_t j = 0; j < n; ++j) a2aDispls_[j] = j * a.count;
        v.sendCounts = v.recvCounts = a2aCounts_;
        v.sendDispls = v.recvDispls = a2aDispls_;
      } else {
        v.sendCounts = {a.sendCounts, n};
        v.sendDispls = {a.sendDispls, n};
        v.recvCounts = {a.recvCounts, n};
        v.recvDispls = {a.recvDispls, n};
      }
      algo::planAllToAllv(v, out);
      out.algorithm = "pairwise";
      break;
    }
    case CollKind::SendRecv:
    case CollKind::PutSignal:
    case CollKind::WaitSignal:
      break;  // prepareP2p's and prepareRma's
  }
}

double Communicator::predictUs(const CollArgs& a) const {
  using engine::CollKind;
  const uint64_t typeSize = dataTypeSize(a.type), bytes = a.count * typeSize;
  switch (a.coll) {
    case CollKind::AllReduce: return tune::predictUs(tune::Shape::AllReduce, bytes, tuning_, a.op == RedOp::Avg);
    case CollKind::Broadcast: return tune::predictUs(tune::Shape::Broadcast, bytes, tuning_);
    case CollKind::Reduce: return tune::predictUs(tune::Shape::Reduce, bytes, tuning_);
    case CollKind::AllGather: return tune::predictUs(tune::Shape::AllGather, bytes, tuning_);
    case CollKind::ReduceScatter: return tune::predictUs(tune::Shape::ReduceScatter, bytes, tuning_);
    case CollKind::Gather: return tune::predictUs(tune::Shape::Gather, bytes, tuning_);
    case CollKind::Scatter: return tune::predictUs(tune::Shape::Scatter, bytes, tuning_);
    case CollKind::AllToAll: return tune::predictUs(tune::Shape::AllToAll, bytes, tuning_);
    case CollKind::AllToAllv: {
      // Costed as all-to-all with every block as large as this rank's largest.
      uint64_t largest = 0;
      for (int j = 0; j < nranks_; ++j)
        if (j != rank_) largest = std::max({largest, uint64_t(a.sendCounts[j]), uint64_t(a.recvCounts[j])});
      return tune::predictUs(tune::Shape::AllToAll, largest * typeSize, tuning_);
    }
    case CollKind::SendRecv: return predictP2pUs(std::span(&a, 1));
    case CollKind::PutSignal:
      return a.peer == rank_ ? 0 : tune::predictP2pUs(bytes, hostOf_[size_t(a.peer)] != hostOf_[size_t(rank_)], tuning_);
    case CollKind::WaitSignal: return 0;  // waits for others' puts, which they are costed for
  }
  return 0;
}

double Communicator::predictP2pUs(std::span<const CollArgs> calls) const {
  uint64_t sent = 0, received = 0;
  bool acrossHosts = false, any = false;
  for (const CollArgs& c : calls) {
    if (c.peer == rank_) continue;  // a copy
    const uint64_t bytes = c.count * dataTypeSize(c.type);
    (c.p2p == P2p::Send ? sent : received) += bytes;
    acrossHosts |= hostOf_[size_t(c.peer)] != hostOf_[size_t(rank_)];
    any = true;
  }
  return any ? tune::predictP2pUs(std::max(sent, received), acrossHosts, tuning_) : 0;
}

namespace {

// The fingerprint of a collective call (32 bytes, little endian). `carried` is not part
// of the call: it counts the data bytes that follow it in round 0's message.
struct Fingerprint {
  uint32_t magic = 0x31504654;  // "TFP1"
  uint8_t coll = 0, type = 0, op = 0, pad = 0;
  int32_t root = -1;
  uint32_t carried = 0;
  uint64_t seq = 0;
  uint64_t count = 0;
};
static_assert(sizeof(Fingerprint) == engine::Op::kFingerprintBytes);

// The fingerprint's op field: the RedOp, or kPreMulSumCode.
constexpr uint8_t kPreMulSumCode = kNumRedOps;
const char* opText(uint8_t op) { return op == kPreMulSumCode ? "ncclPreMulSum" : redOpName(RedOp(op)); }

// Compares the previous rank's fingerprint with ours; names the first field that differs,
// both values and both ranks.
Status verifyFingerprint(const engine::Op& op, const std::byte* received, int rank, int peer, uint64_t* carried) {
  Fingerprint mine, theirs;
  memcpy(&mine, op.fingerprint.data(), sizeof mine);
  memcpy(&theirs, received, sizeof theirs);
  *carried = theirs.carried;
  const char* name = engine::collName(engine::CollKind(mine.coll));
  const unsigned long seq = (unsigned long)mine.seq;
  if (theirs.magic != mine.magic)
    return fail(Status::InvalidUsage, "collective #%lu (%s): rank %d received a malformed fingerprint from rank %d",
                seq, name, rank, peer);
  if (theirs.coll != mine.coll)
    return fail(Status::InvalidUsage,
                "collective mismatch at collective #%lu: field collective is %s on rank %d but %s on rank %d", seq,
                name, rank, engine::collName(engine::CollKind(theirs.coll)), peer);
  if (theirs.count != mine.count)
    return fail(Status::InvalidUsage, "%s mismatch at collective #%lu: field count is %lu on rank %d but %lu on rank %d",
                name, seq, (unsigned long)mine.count, rank, (unsigned long)theirs.count, peer);
  if (theirs.type != mine.type)
    return fail(Status::InvalidUsage, "%s mismatch at collective #%lu: field datatype is %s on rank %d but %s on rank %d",
                name, seq, dataTypeName(DataType(mine.type)), rank, dataTypeName(DataType(theirs.type)), peer);
  if (theirs.op != mine.op)
    return fail(Status::InvalidUsage, "%s mismatch at collective #%lu: field op is %s on rank %d but %s on rank %d", name,
                seq, opText(mine.op), rank, opText(theirs.op), peer);
  if (theirs.root != mine.root)
    return fail(Status::InvalidUsage, "%s mismatch at collective #%lu: field root is %d on rank %d but %d on rank %d",
                name, seq, mine.root, rank, theirs.root, peer);
  if (theirs.seq != mine.seq)
    return fail(Status::InvalidUsage, "%s mismatch: rank %d is at collective #%lu but rank %d at #%lu", name, rank, seq,
                peer, (unsigned long)theirs.seq);
  return Status::Success;
}

}  // namespace

// Skew measurement and pacing: every rank runs the telemetry exchange or none does, so
// TEMPO_PACING=off on some ranks only would leave the others waiting; refuse it here.
Status Communicator::startTelemetry() {
  const auto& peers = boot_->peers();
  const uint32_t mine = peers[size_t(rank_)].features & bootstrap::kFeatureTelemetry;
  for (int r = 0; r < nranks_; ++r)
    if ((peers[size_t(r)].features & bootstrap::kFeatureTelemetry) != mine)
      return fail(Status::InvalidUsage, "TEMPO_PACING is %s on rank %d but %s on rank %d: set it alike on every rank",
                  mine ? "not off" : "off", rank_, mine ? "off" : "not off", r);
  pacing::Mode mode = pacing::Mode::Observe;
  if (!pacing::parseMode(param::Pacing(), &mode))
    return fail(Status::InvalidArgument, "TEMPO_PACING=%s: expected off, observe or on", param::Pacing());
  const std::string actuator = param::PacingActuator();
  if (actuator != "gate" && actuator != "inject")
    return fail(Status::InvalidArgument, "TEMPO_PACING_ACTUATOR=%s: expected gate or inject", actuator.c_str());
  if (mode == pacing::Mode::Off || nranks_ < 2) return Status::Success;
  engine_->setActuator(actuator == "inject" ? engine::Engine::Actuator::Inject : engine::Engine::Actuator::Gate);
  std::vector<uint64_t> hosts;
  for (const auto& p : peers) hosts.push_back(p.hostHash);
  std::sort(hosts.begin(), hosts.end());
  pacing::MonitorConfig c;
  c.rank = rank_;
  c.nranks = nranks_;
  c.mode = mode;
  c.window = uint32_t(std::clamp<int64_t>(param::PacingWindow(), 1, 1 << 20));
  c.minWindowNs = 1000000000 / std::clamp<int64_t>(param::PacingHz(), 1, 1000000);
  c.controller.allowPacing = mode == pacing::Mode::On;
  c.controller.nodes = int(std::unique(hosts.begin(), hosts.end()) - hosts.begin());
  c.controller.minNodes = int(std::max<int64_t>(1, param::PacingMinNodes()));
  if (!engine_->setMonitor(std::make_unique<pacing::SkewMonitor>(c))) {
    TEMPO_WARN("comm %p rank %d: no skew telemetry (NCCL_BUFFSIZE %zu is too small for %d ranks' exchange)",
               static_cast<void*>(this), rank_, scratch_.size(), nranks_);
    return Status::Success;
  }
  monitor_.store(engine_->monitor(), std::memory_order_release);
  TEMPO_INFO(log::Init, "comm %p rank %d: skew telemetry %s, windows of %u+ collectives, %d hosts",
             static_cast<void*>(this), rank_, pacing::modeName(mode), c.window, c.controller.nodes);
  return Status::Success;
}

bool Communicator::setIterationPeriod(uint32_t collectives) {
  pacing::SkewMonitor* m = skewMonitor();
  if (!m) return false;
  m->setIterationPeriod(collectives);
  if (trace_) trace_->setIterationPeriod(collectives);
  return true;
}

uint64_t Communicator::prependFingerprint(engine::Op& op) {
  if (!checkMismatch_) return 0;
  using algo::absolute;
  algo::FingerprintLocs locs;
  locs.mine = absolute(op.fingerprint.data());
  locs.leadOut = absolute(op.leadOut.data());
  locs.leadIn = absolute(op.leadIn.data());
  locs.theirs = absolute(op.peerFingerprints[0].data());
  locs.bytes = sizeof(Fingerprint);
  return algo::prependFingerprint(op.plan, rank_, nranks_, kFingerprintMsg, locs);
}

void Communicator::writeFingerprint(engine::Op& op, const CollArgs& a) {
  if (!checkMismatch_) return;
  Fingerprint f;
  f.coll = uint8_t(a.coll);
  f.type = uint8_t(a.type);
  const bool reduces = a.coll == engine::CollKind::AllReduce || a.coll == engine::CollKind::Reduce ||
                       a.coll == engine::CollKind::ReduceScatter;
  f.op = !reduces ? 0 : a.scalar ? kPreMulSumCode : uint8_t(a.op);
  f.root = a.root;
  f.seq = engine_->nextSeq();
  f.count = a.coll == engine::CollKind::AllToAllv ? 0 : a.count;  // v-counts differ by design
  memcpy(op.fingerprint.data(), &f, sizeof f);
  f.carried = uint32_t(op.carriedOut);
  if (f.carried) memcpy(op.leadOut.data(), &f, sizeof f);
  op.verify = verifyFingerprint;
  op.fingerprintRounds = algo::fingerprintRounds(nranks_);
}

Result<engine::Op*> Communicator::prepareP2p(std::span<const CollArgs> calls) {
  CollArgs first = calls.front();
  first.send = first.recv = nullptr;
  uint64_t total = 0;
  for (const CollArgs& a : calls) total += a.count * dataTypeSize(a.type);
  engine::Op* op = takeOp(first, total);
  op->planKey = {};
  op->plan.clear();
  op->plan.algorithm = "p2p";
  if (p2pSent_.empty()) {
    p2pSent_.assign(size_t(nranks_), 0);
    p2pReceived_.assign(size_t(nranks_), 0);
  }
  // Sends to self pair with receives from self in call order and become copies.
  size_t selfSends = 0, selfRecvs = 0;
  bool lowered = false;  // whether a call names device memory (DeviceStaging::lower)
  for (const CollArgs& a : calls) {
    const uint64_t bytes = a.count * dataTypeSize(a.type);
    if (a.peer == rank_) {
      size_t& mine = a.p2p == P2p::Send ? selfSends : selfRecvs;
      size_t k = mine++;
      if (a.p2p == P2p::Recv || bytes == 0) continue;
      // Find the k-th receive from self.
      const CollArgs* match = nullptr;
      for (size_t seen = 0; const CollArgs& b : calls)
        if (b.peer == rank_ && b.p2p == P2p::Recv && seen++ == k) match = &b;
      if (!match) break;  // reported below
      const uint64_t want = match->count * dataTypeSize(match->type);
      if (want != bytes) {
        p2pPlanner_.clear();
        release(op);
        return fail(Status::InvalidUsage, "ncclSend to self of %lu bytes meets an ncclRecv from self of %lu bytes",
                    (unsigned long)bytes, (unsigned long)want);
      }
      lowered = lowered || a.sendOnDevice || match->recvOnDevice;
      op->plan.add(algo::copy(bytes, algo::userAddress(a.send, a.sendOnDevice),
                              algo::userAddress(match->recv, match->recvOnDevice)));
      continue;
    }
    // In pieces (algo/p2p.h); a zero-byte message still travels: NCCL matches sends and
    // receives by order, and the counters of both sides must stay in step.
    const bool send = a.p2p == P2p::Send;
    const void* buf = send ? a.send : a.recv;
    const bool device = send ? a.sendOnDevice : a.recvOnDevice;
    lowered = lowered || device;
    p2pPlanner_.add(send, a.peer, bytes, algo::userAddress(buf, device), p2pChunk_,
                    send ? &p2pSent_[size_t(a.peer)] : &p2pReceived_[size_t(a.peer)]);
  }
  p2pPlanner_.emit(op->plan);
  if (selfSends != selfRecvs) {
    release(op);
    return fail(Status::InvalidUsage,
                "%zu ncclSend(s) to self but %zu ncclRecv(s) from self in one group on rank %d; each needs its partner",
                selfSends, selfRecvs, rank_);
  }
  op->plan.window = uint32_t(std::max<size_t>(1, op->plan.steps.size()));
  if (lowered) {
    // Slots per peer: the application orders its sends and receives as it likes, so slots
    // shared across peers could wait on each other.
    algo::lowerForDevice(op->plan, {.slots = kDeviceSlots, .slotBudget = kDeviceSlotBudget, .perPeer = true});
    engine_->setDeviceArena(&deviceArena(*mem::deviceApi()));
  }
  for (const CollArgs& a : calls) logCall(a, engine_->nextSeq());
  return op;
}

Result<int> Communicator::createPreMulSum(const void* scalar, DataType type, bool deviceResident) {
  size_t slot = 0;
  while (slot < userOps_.size() && userOps_[slot].live) ++slot;
  if (slot == userOps_.size()) {
    if (slot >= size_t(INT32_MAX) - kNumRedOps)
      return fail(Status::InvalidUsage, "ncclRedOpCreatePreMulSum: too many reduction operators on comm %p",
                  static_cast<void*>(this));
    userOps_.emplace_back();
  }
  PreMulSumOp& u = userOps_[slot];
  u = PreMulSumOp{};
  u.live = true;
  u.type = type;
  u.deviceResident = deviceResident;
  if (deviceResident) u.ptr = scalar;
  else memcpy(u.value, scalar, dataTypeSize(type));
  return kNumRedOps + int(slot);
}

const PreMulSumOp* Communicator::preMulSum(int op) const {
  if (op < kNumRedOps || size_t(op - kNumRedOps) >= userOps_.size()) return nullptr;
  const PreMulSumOp& u = userOps_[size_t(op - kNumRedOps)];
  return u.live ? &u : nullptr;
}

Status Communicator::destroyRedOp(int op) {
  if (op >= 0 && op < kNumRedOps)
    return fail(Status::InvalidArgument, "ncclRedOpDestroy: %s is a built-in operator", redOpName(RedOp(op)));
  if (!preMulSum(op))
    return fail(Status::InvalidArgument, "ncclRedOpDestroy: op %d was not created on comm %p (or already destroyed)",
                op, static_cast<void*>(this));
  userOps_[size_t(op - kNumRedOps)].live = false;
  return Status::Success;
}

void Communicator::release(engine::Op* op) { freeOps_.push_back(op); }

void Communicator::logCall(const CollArgs& a, uint64_t seq) const {
  TEMPO_INFO(log::Coll, "%s: opCount %lx sendbuff %p recvbuff %p count %zu datatype %d op %d root %d comm %p [nranks=%d] stream %p",
             engine::collName(a.coll), (unsigned long)seq, a.send, a.recv, a.count, int(a.type), int(a.op), a.root,
             static_cast<const void*>(this), nranks_, a.stream);
}

void Communicator::recordError(Status s) {
  if (ok(s) || s == Status::InProgress) return;
  int expected = 0;
  if (asyncError_.compare_exchange_strong(expected, int(s), std::memory_order_acq_rel)) {
    std::string why;
    {
      std::lock_guard<std::mutex> lock(errMu_);
      why = lastErrorMessage();
      if (why.empty()) why = std::string(statusName(s)) + " on rank " + std::to_string(rank_);
      errMsg_ = why;
    }
    // The other ranks may be waiting on this one inside the same collective: tell them,
    // around the ring, rather than leave them to their timeouts.
    if (boot_) boot_->notifyNeighbours(s, why);
  }
}

Status Communicator::explainFailure(Status s, bool isCause) {
  if (isCause || !boot_) return s;
  std::string why;
  // The cause travels around the bootstrap ring, one hop per forwarding rank's liveness
  // check (20 ms); a second covers rings of dozens of ranks, and a real fault with no notice
  // to wait for is reported a second late at most (sooner when a ring neighbour is gone).
  const Deadline deadline = Deadline::after(1000 * 1000 * 1000);
  while (!deadline.expired()) {
    Status notice = boot_->pollNotice(&why);
    if (!ok(notice)) return fail(notice, "%s", why.c_str());
    if (boot_->neighbourGone()) break;
    usleep(2000);
  }
  return s;
}

std::string Communicator::errorMessage() const {
  std::lock_guard<std::mutex> lock(errMu_);
  return errMsg_;
}

Status Communicator::check(bool closedIsFatal) {
  std::string why;
  if (boot_) {
    Status notice = boot_->pollNotice(&why);
    if (!ok(notice)) return fail(notice, "%s", why.empty() ? "a ring neighbour failed" : why.c_str());
  }
  if (!closedIsFatal) return Status::Success;
  if (const int64_t since = engine_ ? engine_->activeSinceNs() : 0;
      collTimeoutNs_ > 0 && since > 0 && nowNs() - since > collTimeoutNs_)
  {
    const engine::Op* op = engine_->activeOp();
    char what[64];
    if (!op) snprintf(what, sizeof what, "the skew telemetry exchange");
    else if (op->p2p) snprintf(what, sizeof what, "%s", engine::collName(op->coll));  // no collective number
    else snprintf(what, sizeof what, "%s (collective #%lu)", engine::collName(op->coll), (unsigned long)op->seq);
    return fail(Status::Timeout, "rank %d: %s did not complete within TEMPO_COLL_TIMEOUT=%ld s", rank_, what,
                long(collTimeoutNs_ / 1000000000));
  }
  if (!boot_) return Status::Success;
  if (boot_->neighbourSilent())
    return fail(Status::RemoteError,
                "rank %d: rank %d has sent no heartbeat for TEMPO_PEER_TIMEOUT=%ld s (its process is stopped, "
                "hung or unreachable)",
                rank_, (rank_ + nranks_ - 1) % nranks_, long(param::PeerTimeout()));
  if (boot_->neighbourGone())
    return fail(Status::RemoteError,
                "rank %d: a ring neighbour closed its connection (the peer process exited or aborted)", rank_);
  if (auto left = boot_->neighbourLeft(); left && engine_ && engine_->nextSeq() > left->collectives)
    return fail(Status::RemoteError,
                "rank %d: rank %d finalized its communicator after %lu collectives, but this rank has issued %lu "
                "(the ranks did not call the same collectives)",
                rank_, left->rank, (unsigned long)left->collectives, (unsigned long)engine_->nextSeq());
  return Status::Success;
}

void Communicator::runAsync(std::function<Status()> job) {
  worker_.post([this, job = std::move(job)] { endAsync(job()); });
}

void Communicator::endAsync(Status s) {
  recordError(s);
  {
    std::lock_guard<std::mutex> lock(asyncMu_);
    inProgress_.store(false, std::memory_order_release);
  }
  asyncCv_.notify_all();
}

void Communicator::beginStreamWork() {
  std::lock_guard<std::mutex> lock(asyncMu_);
  ++streamWork_;
}

void Communicator::endStreamWork() {
  // Notifies under the lock: the waiter may destroy this communicator once it sees 0.
  std::lock_guard<std::mutex> lock(asyncMu_);
  --streamWork_;
  asyncCv_.notify_all();
}

void Communicator::waitStreamWork() {
  std::unique_lock<std::mutex> lock(asyncMu_);
  asyncCv_.wait(lock, [this] { return streamWork_ == 0; });
}

bool Communicator::waitAsyncFor(int64_t ns) {
  std::unique_lock<std::mutex> lock(asyncMu_);
  return asyncCv_.wait_for(lock, std::chrono::nanoseconds(ns), [this] {
    return !inProgress_.load(std::memory_order_acquire) && streamWork_ == 0;
  });
}

void Communicator::waitAsync() {
  std::unique_lock<std::mutex> lock(asyncMu_);
  asyncCv_.wait(lock, [this] { return !inProgress_.load(std::memory_order_acquire); });
}

Status Communicator::finalize() {
  if (!engine_) return asyncError();  // never joined
  if (!engine_->idle()) {
    engine::Engine* e = engine_.get();
    TEMPO_TRY(engine::waitAll(std::span(&e, 1)));
  }
  finalized_ = true;
  // Everything this rank issued is done: tell the ring neighbours, so that the close which
  // follows destruction does not read to them as this rank's failure.
  Status s = asyncError();
  if (ok(s) && boot_) boot_->announceLeave(engine_->nextSeq());
  return s;
}

bool Communicator::waitForDriverToLeave(const char* fn, std::unique_lock<std::timed_mutex>& drive) {
  // The operation in flight notices the stop flag within one pass of its wait (a
  // collective) or one bootstrap poll interval (an init or split), and leaves.
  constexpr int64_t kAbortWaitNs = 10'000'000'000;
  const int64_t start = nowNs();
  if (!waitAsyncFor(kAbortWaitNs)) {
    TEMPO_WARN("comm %p rank %d: %s: the nonblocking or stream-ordered operation in flight did not stop within 10 s",
               static_cast<void*>(this), rank_, fn);
    return false;
  }
  // Polled with try_lock rather than a timed lock: libstdc++ times the latter with
  // pthread_mutex_clocklock, which TSan does not see, so every access the lock orders
  // would read as a race. A millisecond between tries is nothing next to an abort.
  for (;;) {
    drive = std::unique_lock<std::timed_mutex>(driveMu_, std::try_to_lock);
    if (drive.owns_lock()) return true;
    if (nowNs() - start > kAbortWaitNs) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  TEMPO_WARN("comm %p rank %d: %s: the call in flight on another thread did not stop within 10 s",
             static_cast<void*>(this), rank_, fn);
  return false;
}

bool Communicator::abort() {
  aborting_.store(true, std::memory_order_release);
  std::unique_lock<std::timed_mutex> drive;
  if (!waitForDriverToLeave("ncclCommAbort", drive)) return false;
  // Nobody drives the engine now. Cancel, and tell the neighbours why.
  setLastErrorMessage(("rank " + std::to_string(rank_) + " aborted its communicator (ncclCommAbort)").c_str());
  recordError(Status::RemoteError);
  if (engine_) engine_->abort(Status::InvalidUsage);
  for (auto& ep : endpoints_) ep->cancelAll();
  if (boot_) boot_->shutdown();
  return true;
}

Status Communicator::revoke() {
  if (revoked_.exchange(true, std::memory_order_acq_rel))
    return fail(Status::InvalidArgument, "ncclCommRevoke: comm %p rank %d is already revoked",
                static_cast<void*>(this), rank_);
  std::unique_lock<std::timed_mutex> drive;
  if (!waitForDriverToLeave("ncclCommRevoke", drive))
    return fail(Status::InternalError, "ncclCommRevoke: comm %p rank %d: the operation in flight did not stop within 10 s",
                static_cast<void*>(this), rank_);
  // Cancel what is in flight and tell the neighbours (who forward it), but record no error
  // here and keep the bootstrap listener: a revoked communicator can still be shrunk.
  if (engine_) engine_->abort(Status::InvalidUsage);
  for (auto& ep : endpoints_) ep->cancelAll();
  if (boot_)
    boot_->notifyNeighbours(Status::RemoteError,
                            "rank " + std::to_string(rank_) + " revoked the communicator (ncclCommRevoke)");
  TEMPO_INFO(log::Init, "comm %p rank %d nranks %d - Revoke COMPLETE", static_cast<void*>(this), rank_, nranks_);
  return Status::Success;
}

Status Communicator::suspend() {
  if (suspended_.exchange(true, std::memory_order_acq_rel))
    return fail(Status::InvalidUsage, "ncclCommSuspend: comm %p rank %d is already suspended",
                static_cast<void*>(this), rank_);
  return Status::Success;
}

Status Communicator::resume() {
  if (!suspended_.exchange(false, std::memory_order_acq_rel))
    return fail(Status::InvalidUsage, "ncclCommResume: comm %p rank %d is not suspended", static_cast<void*>(this),
                rank_);
  return Status::Success;
}

Status Communicator::usable() {
  const void* self = static_cast<void*>(this);
  if (aborting()) return fail(Status::InvalidUsage, "communicator %p rank %d was aborted (ncclCommAbort)", self, rank_);
  if (revoked()) return fail(Status::InvalidUsage, "communicator %p rank %d was revoked (ncclCommRevoke)", self, rank_);
  if (suspended())
    return fail(Status::InvalidUsage, "communicator %p rank %d is suspended (call ncclCommResume first)", self, rank_);
  Status s = asyncError();
  if (!ok(s))
    return fail(s, "communicator %p rank %d is unusable after an earlier error: %s", self, rank_,
                errorMessage().c_str());
  return Status::Success;
}

}  // namespace tempo::comm
