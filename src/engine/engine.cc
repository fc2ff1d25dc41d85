#include "src/engine/engine.h"

#include <sched.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "kernels/reduce.h"
#include "src/algo/rd_allreduce.h"
#include "src/core/clock.h"
#include "src/core/log.h"
#include "src/core/param.h"

namespace tempo::engine {
namespace {

enum : uint8_t { kWaiting = 0, kPosted = 1, kDone = 2 };
constexpr int kMaxPosted = 256;
constexpr int64_t kLivenessCheckNs = 20 * 1000 * 1000;

// Tag of one message (40 bits): a collective's is its sequence number (23 bits) and the
// message index within it (16 bits); a point-to-point message's has the top bit set and
// carries the per-peer counter of its direction (23 bits); a telemetry exchange's has the
// top bit, its number (23 bits) and bit 15 set; a one-sided put's is kRmaTagBits (its
// header) or kRmaTagBits | 1 (its data), in order per peer, as the inbox receives them.
uint64_t tagOf(const Op& op, uint32_t msg) {
  if (op.coll == CollKind::PutSignal) return kRmaTagBits | (msg & 1);
  if (op.internal) return kTelemetryTagBits | ((op.seq & 0x7fffff) << 16) | (msg & 0x7fff);
  if (op.p2p) return kP2pTagBit | (uint64_t(msg & 0x7fffff) << 16);
  return ((op.seq & 0x7fffff) << 16) | (msg & 0xffff);
}

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

const char* collName(CollKind k) {
  switch (k) {
    case CollKind::AllReduce: return "AllReduce";
    case CollKind::Broadcast: return "Broadcast";
    case CollKind::Reduce: return "Reduce";
    case CollKind::AllGather: return "AllGather";
    case CollKind::ReduceScatter: return "ReduceScatter";
    case CollKind::AllToAll: return "AllToAll";
    case CollKind::AllToAllv: return "AllToAllv";
    case CollKind::Gather: return "Gather";
    case CollKind::Scatter: return "Scatter";
    case CollKind::SendRecv: return "SendRecv";
    case CollKind::PutSignal: return "PutSignal";
    case CollKind::WaitSignal: return "WaitSignal";
  }
  return "?";
}

void Engine::noteReceived(Op& op, int peer, uint64_t bytes) {
  OpRecord& r = op.record;
  if (r.tFirstData && peerTier_.empty()) return;  // the common case: one test, no clock read
  const int64_t now = nowNs();
  if (!r.tFirstData) r.tFirstData = now;
  if (peerTier_.empty()) return;
  const Tier tier = peerTier_[size_t(peer)];
  r.flows[size_t(tier)].add(bytes, now);
  op.peers.add(peer, tier, bytes, now);
}

Engine::Engine(int rank, int nranks, std::vector<std::vector<transport::Endpoint*>> rails,
               std::vector<transport::Endpoint*> endpoints, std::span<std::byte> scratch,
               Liveness* liveness)
    : rank_(rank), nranks_(nranks), rails_(std::move(rails)),
      endpoints_(std::move(endpoints)), scratch_(scratch), userRegions_(endpoints_), liveness_(liveness) {
  if (rails_.empty()) rails_.emplace_back(size_t(nranks), nullptr);
  maxPosted_ = kMaxPosted;
  for (transport::Endpoint* ep : endpoints_) maxPosted_ = std::min(maxPosted_, ep->maxOutstanding());
  reqs_.resize(size_t(maxPosted_));
  sideLimit_ = maxPosted_ / 2;
  sendBlocked_.assign(size_t(nranks), 0);
  freeReqs_.reserve(size_t(maxPosted_));
  for (int i = maxPosted_ - 1; i >= 0; --i) freeReqs_.push_back(uint16_t(i));
  for (transport::Endpoint* ep : endpoints_) {
    auto region = scratch_.empty() ? Result<std::unique_ptr<transport::MemRegion>>(nullptr)
                                   : ep->registerMemory(scratch_.data(), scratch_.size());
    scratchRegions_.push_back(region.ok() ? std::move(region.value()) : nullptr);
  }
}

Engine::~Engine() { drainDevice(); }

const transport::MemRegion* Engine::scratchRegion(const transport::Endpoint* ep) const {
  for (size_t i = 0; i < endpoints_.size(); ++i)
    if (endpoints_[i] == ep) return scratchRegions_[i].get();
  return nullptr;
}

Status Engine::submit(Op& op) {
  if (!ok(failed_)) {
    op.status = failed_;
    op.done = true;
    return failed_;
  }
  if (op.plan.scratchBytes > scratch_.size())
    return tempo::fail(Status::InternalError, "plan needs %lu scratch bytes, communicator has %zu",
                       (unsigned long)op.plan.scratchBytes, scratch_.size());
  const size_t n = op.plan.steps.size();
  op.state.assign(n, kWaiting);
  op.reqOf.resize(n);
  op.first = 0;
  op.dataFirst = 0;
  op.carried = -1;
  op.staging = nullptr;
  op.status = Status::Success;
  op.done = false;
  // Every rank numbers its collectives alike; point-to-point ops involve only some ranks
  // and must not shift that numbering (their record carries the next collective's number).
  op.seq = op.p2p ? nextSeq_ : nextSeq_++;
  op.record = OpRecord{};
  op.peers.clear();
  op.record.seq = op.seq;
  op.record.bytes = op.payloadBytes;
  op.record.coll = op.coll;
  op.record.algorithm = op.plan.algorithm;
  queue_.push_back(&op);
  if (queue_.size() == 1) activate(op);
  return Status::Success;
}

void Engine::activate(Op& op) {
  op.record.tEnter = nowNs();
  // Pacing's entry gate: arrival is recorded here, at gate entry, so that the monitor
  // measures the un-paced lead; the op's steps wait until the gate opens.
  op.notBefore = 0;
  op.injectSpan = 0;
  if (monitor_ && !op.p2p && !op.internal) {
    op.record.delayNs = monitor_->gateDelayNs(uint8_t(op.coll), op.payloadBytes);
    if (op.record.delayNs > 0 && actuator_ == Actuator::Inject) {
      op.record.injected = true;
      op.injectFrom = op.record.tEnter;
      op.injectSpan = op.record.delayNs;
      op.injectSends = 0;
      op.sendsStarted = 0;
      for (const algo::Step& s : op.plan.steps) op.injectSends += s.kind == algo::StepKind::Send && s.bytes > 0;
    } else if (op.record.delayNs > 0) {
      op.notBefore = op.record.tEnter + op.record.delayNs;
    }
  }
  if (op.prescaleSrc) kernels::scale(op.prescaled.data(), op.prescaleSrc, op.prescaleElems, op.type, op.scalar);
}

std::byte* Engine::resolve(const Op& op, const algo::Loc& loc) const {
  switch (loc.buf) {
    case algo::BufId::Input: return const_cast<std::byte*>(op.input) + loc.offset;
    case algo::BufId::Output: return op.output + loc.offset;
    case algo::BufId::Scratch: return scratch_.data() + loc.offset;
    case algo::BufId::Absolute:
    case algo::BufId::Device: return reinterpret_cast<std::byte*>(uintptr_t(loc.offset));
    case algo::BufId::Staging: return op.staging + loc.offset;
  }
  return nullptr;
}

Engine::Start Engine::start(Op& op, uint32_t i) {
  const algo::Step& s = op.plan.steps[i];
  switch (s.kind) {
    case algo::StepKind::RecvCarried:
      // Round 0's Check has run (advance waits for it) and vouched for the count.
      if (op.carried == int64_t(s.bytes)) {
        memcpy(resolve(op, s.dst), resolve(op, s.src), s.bytes);
        if (!op.record.tFirstData) op.record.tFirstData = nowNs();  // its bytes were counted with the message
        break;
      }
      [[fallthrough]];  // the sender sent it on its own
    case algo::StepKind::Send:
    case algo::StepKind::Recv: {
      // Both sides know every length, so empty messages are skipped on both, except where
      // the plan says the emptiness itself is news (point-to-point: algo/p2p.h).
      if (s.bytes == 0 && !s.travelsEmpty) break;
      // Sends and receives may each hold at most half of the request slots, so that either
      // can always be posted: a peer's send completes only once we post its receive, and
      // ours only once it posts ours, so starving either could deadlock both. (Receives
      // were once unlimited: ranks exchanging many point-to-point pieces each filled their
      // slots with receives, and no rank could post the sends the others waited for.)
      bool isSend = s.kind == algo::StepKind::Send;
      int& posted = isSend ? postedSends_ : postedRecvs_;
      if (freeReqs_.empty() || posted >= sideLimit_) return Start::NoSlots;
      uint16_t slot = freeReqs_.back();
      freeReqs_.pop_back();
      transport::Request& req = reqs_[slot];
      req.reset();
      transport::Endpoint* ep = endpointFor(s.peer, s.channel);
      const algo::Loc& loc = isSend ? s.src : s.dst;
      std::byte* buf = resolve(op, loc);
      if (loc.buf == algo::BufId::Scratch) {
        req.region = scratchRegion(ep);
      } else if (userRegions_.size() != 0) {
        req.region = userRegions_.find(ep, buf, s.bytes);
        op.record.registeredTransfers += req.region != nullptr;
      }
      uint64_t tag = tagOf(op, s.msg);
      Status st = isSend ? ep->isend(s.peer, tag, buf, s.bytes, &req) : ep->irecv(s.peer, tag, buf, s.bytes, &req);
      if (st == Status::InProgress) {  // the transport is momentarily full: retry later
        freeReqs_.push_back(slot);
        return Start::Deferred;
      }
      if (!ok(st)) {
        freeReqs_.push_back(slot);
        finish(op, st);
        return Start::Done;
      }
      op.reqOf[i] = slot;
      op.state[i] = kPosted;
      ++posted;
      return Start::Done;
    }
    case algo::StepKind::Reduce: {
      size_t elems = s.bytes / dataTypeSize(op.type);
      kernels::reduce(resolve(op, s.dst), resolve(op, s.src), resolve(op, s.src2), elems, op.type, op.op,
                      s.postDivisor);
      break;
    }
    case algo::StepKind::Copy:
      if (s.bytes) memmove(resolve(op, s.dst), resolve(op, s.src), s.bytes);
      break;
    case algo::StepKind::DeviceCopy:
    case algo::StepKind::DeviceReduce: {
      if (s.bytes == 0) break;
      const Status st = startDevice(op, i);
      if (!ok(st)) {
        op.state[i] = kDone;
        finish(op, st);
      }
      return Start::Done;
    }
    case algo::StepKind::Check: {
      uint64_t carried = 0;
      Status st = op.verify ? op.verify(op, resolve(op, s.src), rank_, s.peer, &carried) : Status::Success;
      if (ok(st) && op.plan.steps[s.deps[0]].upTo) {  // round 0's: its message may carry data
        const uint32_t r = op.plan.carriedRecv;
        if (carried && (r == algo::kNoDep || op.plan.steps[r].bytes != carried))
          st = tempo::fail(Status::InvalidUsage,
                           "rank %d's first message of collective #%lu from rank %d carried %lu bytes where it "
                           "expected %lu: the ranks planned the collective differently (do their TEMPO_ and NCCL_ "
                           "settings differ?)",
                           rank_, (unsigned long)op.seq, s.peer, (unsigned long)carried,
                           (unsigned long)(r == algo::kNoDep ? 0 : op.plan.steps[r].bytes));
        op.carried = int64_t(carried);
      }
      if (!ok(st)) {
        op.state[i] = kDone;
        op.causeKnown = true;
        finish(op, st);
        return Start::Done;
      }
      break;
    }
  }
  op.state[i] = kDone;
  return Start::Done;
}

int Engine::advance(Op& op) {
  if (op.coll == CollKind::WaitSignal) return advanceWait(op);
  if (op.plan.stagingBytes && !op.staging) {  // a lowered plan: its staging, once per op
    auto staging = deviceArena_ ? deviceArena_->reserve(op.plan.stagingBytes)
                                : Result<std::byte*>(fail(Status::InternalError,
                                                          "rank %d: a plan for device buffers reached an engine "
                                                          "without a device arena",
                                                          rank_));
    if (!staging.ok()) {
      finish(op, staging.status());
      return 1;
    }
    op.staging = *staging;
  }
  if (op.notBefore) {  // gated: a local, bounded wait that starts nothing
    if (nowNs() < op.notBefore) return 0;
    op.notBefore = 0;
  }
  const auto& steps = op.plan.steps;
  const uint32_t n = uint32_t(steps.size());
  int work = 0;
  while (op.first < n && op.state[op.first] == kDone) ++op.first;
  // The window slides with the plan's own oldest unfinished step: mismatch detection's
  // exchange in front (3 x fingerprintRounds steps) must not hold the data path back while
  // a peer's fingerprint is on its way. (It did: with the fingerprint on another transport
  // than the data, 16 MiB all-reduces between two hosts ran 5% slower.)
  const uint32_t prefix = std::min<uint32_t>(n, 3 * op.fingerprintRounds);
  if (op.dataFirst < std::max(op.first, prefix)) op.dataFirst = std::max(op.first, prefix);
  while (op.dataFirst < n && op.state[op.dataFirst] == kDone) ++op.dataFirst;
  const uint32_t end = std::min<uint64_t>(n, uint64_t(op.dataFirst) + std::max<uint32_t>(1, op.plan.window));
  // Sends to one peer are posted in plan order: transports that stream a peer's large
  // messages one after another (libfabric shm's SAR protocol) would otherwise stall on a
  // later message whose receive the peer cannot post yet. A send that cannot start
  // blocks the later sends to its peer for this pass.
  if (++scanGen_ == 0) {  // wrapped: forget every old mark
    std::fill(sendBlocked_.begin(), sendBlocked_.end(), 0);
    scanGen_ = 1;
  }
  for (uint32_t i = op.first; i < end && !op.done; ++i) {
    uint8_t st = op.state[i];
    if (st == kDone) continue;
    if (st == kPosted && (steps[i].kind == algo::StepKind::DeviceCopy || steps[i].kind == algo::StepKind::DeviceReduce)) {
      Status result = Status::Success;
      if (!deviceDone(op.reqOf[i], &result)) continue;
      op.state[i] = kDone;
      ++work;
      if (!ok(result)) {
        finish(op, result);
        break;
      }
      continue;
    }
    if (st == kPosted) {
      transport::Request& req = reqs_[op.reqOf[i]];
      if (!req.done) continue;
      freeReqs_.push_back(op.reqOf[i]);
      --(steps[i].kind == algo::StepKind::Send ? postedSends_ : postedRecvs_);
      if (!ok(req.status)) {
        finish(op, req.status);
        break;
      }
      const algo::Step& s = steps[i];
      if (s.kind == algo::StepKind::Recv || s.kind == algo::StepKind::RecvCarried) {
        if (req.bytes != s.bytes && !(s.upTo && req.bytes < s.bytes)) {
          op.causeKnown = op.p2p;  // point-to-point has no fingerprint exchange to name a better cause
          finish(op, op.p2p ? tempo::fail(Status::InvalidUsage,
                                          "rank %d received %zu bytes from rank %d where %lu were expected: an "
                                          "ncclSend and the ncclRecv it meets have different lengths",
                                          rank_, req.bytes, s.peer, (unsigned long)s.bytes)
                            : tempo::fail(Status::InvalidUsage,
                                          "rank %d received %zu bytes from rank %d where %lu were expected: the "
                                          "ranks called collective #%lu with different arguments",
                                          rank_, req.bytes, s.peer, (unsigned long)s.bytes, (unsigned long)op.seq));
          break;
        }
        noteReceived(op, s.peer, req.bytes);
      }
      op.state[i] = kDone;
      ++work;
      continue;
    }
    const algo::Step& s = steps[i];
    const bool isSend = s.kind == algo::StepKind::Send;
    if (isSend && sendBlocked_[size_t(s.peer)] == scanGen_) continue;
    if (isSend && op.injectSpan && s.bytes > 0 && nowNs() < nextInjection(op)) {  // spread: not yet
      sendBlocked_[size_t(s.peer)] = scanGen_;
      continue;
    }
    bool ready = s.kind != algo::StepKind::RecvCarried || op.carried >= 0;
    for (uint32_t d : s.deps)
      if (d != algo::kNoDep && op.state[d] != kDone) ready = false;
    if (!ready) {
      if (isSend) sendBlocked_[size_t(s.peer)] = scanGen_;
      continue;
    }
    // A step that cannot start now is retried next pass; later steps (receives above all)
    // may still start, so one full queue never blocks the others.
    if (start(op, i) == Start::Done) {
      ++work;
      op.sendsStarted += isSend && s.bytes > 0;
    } else if (isSend) {
      sendBlocked_[size_t(s.peer)] = scanGen_;
    }
  }
  while (op.first < n && op.state[op.first] == kDone) ++op.first;
  if (!op.done && op.first == n) finish(op, Status::Success);
  return work;
}

void Engine::finish(Op& op, Status s) {
  if (op.done) return;
  // A mismatched call often fails in the data path first (a message of the wrong size).
  // When a peer's fingerprint is here, report the mismatch it reveals instead: the cause,
  // not the symptom. Round 0's comes at the start of the previous rank's collective (it
  // never waits for a peer): give it a moment to land if it is on its way.
  const uint32_t recv0 = algo::fingerprintRecvStep(0);
  if (!ok(s) && !op.causeKnown && op.verify && op.fingerprintRounds > 0 && op.state[recv0] == kPosted) {
    const Deadline soon = Deadline::after(100 * 1000 * 1000);
    while (!reqs_[op.reqOf[recv0]].done && !soon.expired())
      for (transport::Endpoint* ep : endpoints_) ep->progress();
  }
  for (uint32_t k = 0; !ok(s) && !op.causeKnown && op.verify && k < op.fingerprintRounds; ++k) {
    const uint32_t recv = algo::fingerprintRecvStep(k), check = algo::fingerprintCheckStep(k);
    if (op.state[check] == kDone) continue;
    const bool arrived = op.state[recv] == kDone ||
                         (op.state[recv] == kPosted && reqs_[op.reqOf[recv]].done && ok(reqs_[op.reqOf[recv]].status));
    if (!arrived) continue;
    op.state[check] = kDone;
    const algo::Step& c = op.plan.steps[check];
    uint64_t carried = 0;
    Status v = op.verify(op, resolve(op, c.src), rank_, c.peer, &carried);
    if (!ok(v)) {
      s = v;
      op.causeKnown = true;
    }
  }
  if (ok(s) && op.rmaSelf && inbox_) ++inbox_->peers[size_t(rank_)].arrived;  // a put to self has landed
  if (ok(s) && op.bias) {
    const uint64_t elems = op.payloadBytes / dataTypeSize(op.type);
    kernels::reduce(op.output, op.output, op.bias, elems, op.type, op.op == RedOp::Avg ? RedOp::Sum : op.op);
  }
  op.status = s;
  op.done = true;
  op.record.tExit = nowNs();
  op.record.status = s;
  if (!op.internal) pushRecord(op);
  if (!ok(s)) {
    abort(s);
    return;
  }
  if (monitor_ && !op.p2p && !op.internal) {
    pacing::Sample m;
    m.seq = op.seq;
    m.coll = uint8_t(op.coll);
    // Every rank leaves these at about the same time, so durations compare (pacing.md 1.2).
    m.symmetric = op.coll == CollKind::AllReduce || op.coll == CollKind::AllGather ||
                  op.coll == CollKind::ReduceScatter || op.coll == CollKind::AllToAll;
    m.bytes = op.payloadBytes;
    m.arrivalNs = op.record.tEnter;
    m.exitNs = op.record.tExit;
    m.delayNs = op.record.delayNs;
    exchangeDue_ = monitor_->onCollective(m);
  }
}

bool Engine::setMonitor(std::unique_ptr<pacing::SkewMonitor> monitor) {
  if (!monitor || nranks_ < 2) return false;
  const size_t words = monitor->exchangeWords();
  if (algo::rdScratchBytes(words, 8) > scratch_.size()) return false;
  exchangeIn_.assign(words, 0);
  exchangeOut_.assign(words, 0);
  algo::RdAllReduceArgs a;
  a.count = words;
  a.typeSize = 8;
  a.rank = rank_;
  a.nranks = nranks_;
  exchange_.plan.clear();
  algo::planRdAllReduce(a, exchange_.plan);
  exchange_.internal = true;
  exchange_.type = DataType::Uint64;
  exchange_.op = RedOp::Max;
  exchange_.input = reinterpret_cast<const std::byte*>(exchangeIn_.data());
  exchange_.output = reinterpret_cast<std::byte*>(exchangeOut_.data());
  exchange_.payloadBytes = words * 8;
  exchange_.state.assign(exchange_.plan.steps.size(), 0);  // sized now: exchanges never allocate
  exchange_.reqOf.resize(exchange_.plan.steps.size());
  monitor_ = std::move(monitor);
  return true;
}

// The window closed with the op that just finished; the next op activates after this.
void Engine::beginExchange() {
  exchangeDue_ = false;
  monitor_->fill(exchangeIn_);
  Op& x = exchange_;
  const size_t n = x.plan.steps.size();
  x.state.assign(n, 0);
  x.reqOf.resize(n);
  x.first = x.dataFirst = 0;
  x.carried = -1;
  x.status = Status::Success;
  x.done = false;
  x.seq = exchanges_++;
  x.record = OpRecord{};
  x.peers.clear();
  x.record.tEnter = nowNs();
  x.notBefore = 0;
  exchangeActive_ = true;
}

void Engine::endExchange() {
  exchangeActive_ = false;
  if (!ok(exchange_.status)) return;
  const pacing::PacingState before = monitor_->decision().state;
  monitor_->absorb(exchangeOut_, nowNs());
  const pacing::PacingDecision& d = monitor_->decision();
  if (d.state != before) {
    const pacing::WindowStats& w = monitor_->lastWindow();
    TEMPO_INFO(log::Tuning,
               "rank %d: pacing %s -> %s after window %lu: relative skew %.2f (skew %.0f us over transfer %.0f us), "
               "last arriver %d (%.0f%%), gain %.2f, cap %.0f us, this rank's largest delay %.0f us",
               rank_, pacing::pacingStateName(before), pacing::pacingStateName(d.state), (unsigned long)exchanges_,
               w.rho, double(w.skewP50Ns) / 1e3, double(w.commP50Ns) / 1e3, w.topLast, 100 * w.topLastShare, d.kappa,
               double(d.capNs) / 1e3, double(monitor_->maxDelayNs()) / 1e3);
  }
}

int64_t Engine::nextInjection(const Op& op) {
  if (op.sendsStarted >= op.injectSends) return 0;
  return op.injectFrom + int64_t(__int128(op.injectSpan) * op.sendsStarted / op.injectSends);
}

int64_t Engine::gateRemainingNs(int64_t now) const {
  if (queue_.empty() || exchangeActive_) return 0;
  const Op& op = *queue_.front();
  const int64_t until = op.injectSpan ? nextInjection(op) : op.notBefore;
  return until > now ? until - now : 0;
}

int Engine::progress() {
  if (idle()) return 0;
  int work = 0;
  for (transport::Endpoint* ep : endpoints_) work += ep->progress();
  if (inbox_) work += serveInbox();
  for (;;) {
    if (exchangeActive_) {  // runs between two ops; the next one waits for it
      work += advance(exchange_);
      if (!exchange_.done) break;
      endExchange();
      ++work;
      if (!ok(failed_)) break;
      if (!queue_.empty()) activate(*queue_.front());
    }
    if (queue_.empty()) break;
    Op& op = *queue_.front();
    if (!op.done) work += advance(op);
    if (queue_.empty()) break;  // the op failed: abort() has already drained the queue
    if (!op.done) break;
    queue_.pop_front();
    ++work;
    if (exchangeDue_) beginExchange();
    else if (!queue_.empty()) activate(*queue_.front());
  }
  return work;
}

Status Engine::startDevice(Op& op, uint32_t i) {
  const algo::Step& s = op.plan.steps[i];
  if (!deviceArena_) return fail(Status::InternalError, "rank %d: a device step without a device arena", rank_);
  mem::DeviceApi& gpu = deviceArena_->gpu();
  TEMPO_ASSIGN(void* stream, deviceArena_->stream());
  std::byte* dst = resolve(op, s.dst);
  if (s.kind == algo::StepKind::DeviceCopy) {
    TEMPO_TRY(mem::deviceCall(gpu, gpu.copyAsync(dst, resolve(op, s.src), s.bytes, stream)));
  } else {
    const size_t elems = s.bytes / dataTypeSize(op.type);
    TEMPO_TRY(mem::deviceCall(gpu, gpu.reduce(dst, resolve(op, s.src), resolve(op, s.src2), elems, op.type, op.op,
                                              s.postDivisor, stream)));
  }
  TEMPO_ASSIGN(void* event, mem::deviceCall(gpu, gpu.recordEvent(stream)));
  if (freeEvents_.empty()) {
    freeEvents_.push_back(uint16_t(deviceEvents_.size()));
    deviceEvents_.push_back(nullptr);
  }
  const uint16_t slot = freeEvents_.back();
  freeEvents_.pop_back();
  deviceEvents_[slot] = event;
  op.reqOf[i] = slot;
  op.state[i] = kPosted;
  return Status::Success;
}

bool Engine::deviceDone(uint16_t slot, Status* st) {
  mem::DeviceApi& gpu = deviceArena_->gpu();
  auto done = mem::deviceCall(gpu, gpu.eventDone(deviceEvents_[slot]));
  if (done.ok() && !*done) return false;
  if (!done.ok()) *st = done.status();
  (void)gpu.destroyEvent(deviceEvents_[slot]);
  deviceEvents_[slot] = nullptr;
  freeEvents_.push_back(slot);
  return true;
}

void Engine::drainDevice() {
  if (!deviceArena_ || freeEvents_.size() == deviceEvents_.size()) return;
  mem::DeviceApi& gpu = deviceArena_->gpu();
  if (auto stream = deviceArena_->stream(); stream.ok()) (void)gpu.synchronize(*stream);
  freeEvents_.clear();
  for (size_t k = 0; k < deviceEvents_.size(); ++k) {
    if (deviceEvents_[k]) (void)gpu.destroyEvent(deviceEvents_[k]);
    deviceEvents_[k] = nullptr;
    freeEvents_.push_back(uint16_t(k));
  }
}

void Engine::abort(Status why, bool causeKnown) {
  drainDevice();  // the device may still write the staging or the user's buffers
  if (ok(failed_)) {
    failed_ = ok(why) ? Status::RemoteError : why;
    for (transport::Endpoint* ep : endpoints_) ep->cancelAll();
  }
  // Posted requests are abandoned with their endpoints; the pool is whole again.
  freeReqs_.clear();
  postedSends_ = postedRecvs_ = 0;
  if (exchangeActive_) {
    exchange_.status = failed_;
    exchange_.done = true;
    exchangeActive_ = false;
  }
  exchangeDue_ = false;
  if (inbox_ && ok(inbox_->failed)) inbox_->failed = failed_;  // its receives went with the endpoints
  for (int i = maxPosted_ - 1; i >= 0; --i) freeReqs_.push_back(uint16_t(i));
  while (!queue_.empty()) {
    Op& op = *queue_.front();
    queue_.pop_front();
    if (!op.done) {
      op.status = failed_;
      op.causeKnown = causeKnown;
      op.done = true;
      op.record.tExit = nowNs();
      op.record.status = failed_;
      pushRecord(op);
    }
  }
}

Status Engine::openInbox(Inbox* inbox) {
  if (inbox_) return inbox_->failed;
  if (!ok(failed_)) return failed_;
  int limit = INT32_MAX;
  for (transport::Endpoint* ep : endpoints_) limit = std::min(limit, ep->maxOutstanding());
  // The inbox's receives count against the endpoints' limit too: the engine's own
  // transfers make room for them where the two would not fit together. Opened between
  // ops (under the drive mutex), when none of the engine's are posted.
  constexpr int kMinSide = 8;
  const int64_t need = 2 * int64_t(nranks_ - 1);
  const int64_t side = std::min<int64_t>(sideLimit_, (int64_t(limit) - need) / 2);
  if (side < kMinSide)
    return tempo::fail(Status::InvalidUsage,
                       "one-sided calls need %ld receives posted beside the engine's own transfers, and this "
                       "communicator's transports allow %d in all: %d ranks are too many for them",
                       long(need), limit, nranks_);
  sideLimit_ = int(side);
  inbox->peers = std::vector<Inbox::Peer>(size_t(nranks_));
  inbox->failed = Status::Success;
  inbox_ = inbox;
  serveInbox();  // posts every peer's first header receive
  for (const Inbox::Peer& q : inbox->peers)
    if (q.stage == Inbox::Stage::Failed) return q.status;
  return Status::Success;
}

int Engine::pollInbox() {
  if (!inbox_ || !ok(inbox_->failed)) return 0;
  int work = 0;
  for (transport::Endpoint* ep : endpoints_) work += ep->progress();
  return work + serveInbox();
}

int Engine::serveInbox() {
  if (!ok(inbox_->failed)) return 0;
  int work = 0;
  for (int p = 0; p < nranks_; ++p)
    while (p != rank_ && serveInboxPeer(p)) ++work;
  return work;
}

// One stage of peer p's receives; false when it has to wait (or the inbox failed).
bool Engine::serveInboxPeer(int p) {
  Inbox::Peer& q = inbox_->peers[size_t(p)];
  transport::Endpoint* ep = endpointFor(p);
  auto failWith = [&](Status st) {
    q.status = st;
    q.stage = Inbox::Stage::Failed;
    return false;
  };
  switch (q.stage) {
    case Inbox::Stage::PostHeader: {
      q.header.reset();
      const Status st = ep->irecv(p, kRmaTagBits, &q.hdr, sizeof q.hdr, &q.header);
      if (st == Status::InProgress) return false;  // the transport is momentarily full
      if (!ok(st)) return failWith(st);
      q.stage = Inbox::Stage::Header;
      return true;
    }
    case Inbox::Stage::Header: {
      if (!q.header.done) return false;
      if (!ok(q.header.status)) return failWith(q.header.status);
      if (q.header.bytes != sizeof q.hdr || q.hdr.magic != kRmaMagic)
        return failWith(tempo::fail(Status::SystemError,
                                    "rank %d received a one-sided header of %zu bytes from rank %d that is not one",
                                    rank_, q.header.bytes, p));
      if (q.hdr.bytes == 0) {  // a signal alone
        ++q.arrived;
        q.stage = Inbox::Stage::PostHeader;
        return true;
      }
      auto dst = inbox_->resolve ? inbox_->resolve(q.hdr, p)
                                 : Result<std::byte*>(fail(Status::InternalError, "an inbox without windows"));
      if (!dst.ok()) return failWith(dst.status());
      q.dst = *dst;
      q.stage = Inbox::Stage::PostData;
      return true;
    }
    case Inbox::Stage::PostData: {
      q.data.reset();
      if (userRegions_.size() != 0) q.data.region = userRegions_.find(ep, q.dst, q.hdr.bytes);
      const Status st = ep->irecv(p, kRmaTagBits | 1, q.dst, q.hdr.bytes, &q.data);
      if (st == Status::InProgress) return false;
      if (!ok(st)) return failWith(st);
      q.stage = Inbox::Stage::Data;
      return true;
    }
    case Inbox::Stage::Data:
      if (!q.data.done) return false;
      if (!ok(q.data.status)) return failWith(q.data.status);
      if (q.data.bytes != q.hdr.bytes)
        return failWith(tempo::fail(Status::SystemError,
                                    "rank %d received %zu bytes of a put from rank %d whose header announced %lu",
                                    rank_, q.data.bytes, p, (unsigned long)q.hdr.bytes));
      ++q.arrived;
      q.stage = Inbox::Stage::PostHeader;
      return true;
    case Inbox::Stage::Failed:
      return false;
  }
  return false;
}

int Engine::advanceWait(Op& op) {
  if (!inbox_) {
    finish(op, tempo::fail(Status::InternalError, "rank %d: ncclWaitSignal without an inbox", rank_));
    return 1;
  }
  if (!ok(inbox_->failed)) {
    finish(op, inbox_->failed);
    return 1;
  }
  for (auto [peer, n] : op.rmaWaits) {
    const Inbox::Peer& q = inbox_->peers[size_t(peer)];
    if (q.arrived - q.consumed >= n) continue;
    if (q.stage != Inbox::Stage::Failed) return 0;
    finish(op, q.status);  // the signals it waits for can no longer come
    return 1;
  }
  for (auto [peer, n] : op.rmaWaits) inbox_->peers[size_t(peer)].consumed += n;
  finish(op, Status::Success);
  return 1;
}

Status waitAll(std::span<Engine* const> engines) {
  int64_t spinNs = INT64_MAX;
  for (Engine* e : engines) spinNs = std::min(spinNs, e->spinNs());
  const int64_t yieldNs = param::YieldUs() * 1000;
  int64_t idleSince = 0, lastCheck = 0, sleepNs = 10000;
  for (;;) {
    int work = 0;
    bool busy = false;
    for (Engine* e : engines) {
      if (e->idle()) continue;
      if (e->liveness() && e->liveness()->abortRequested()) e->abort(Status::InvalidUsage);
      else work += e->progress();
      busy = busy || !e->idle();
    }
    if (!busy) return Status::Success;
    if (work > 0) {
      idleSince = 0;
      sleepNs = 10000;
      continue;
    }
    int64_t now = nowNs();
    if (!idleSince) idleSince = lastCheck = now;
    int64_t idle = now - idleSince;
    // Every 20 ms without progress, ask whether a peer is gone or has reported a failure
    // (a collective mismatch, an abort), so that no wait outlives the job's failure.
    if (now - lastCheck >= kLivenessCheckNs) {
      lastCheck = now;
      for (Engine* e : engines) {
        if (e->idle() || !e->liveness()) continue;
        Status s = e->liveness()->check();
        if (!ok(s)) e->abort(s, /*causeKnown=*/true);
      }
    }
    if (idle < spinNs) {
      for (int i = 0; i < 16; ++i) cpuRelax();
      continue;
    }
    // Device work is polled, not signalled: while any is in flight, keep yielding.
    const bool device = std::any_of(engines.begin(), engines.end(), [](Engine* e) { return e->deviceBusy(); });
    if (idle < yieldNs || device) {
      sched_yield();
      continue;
    }
    // Sleeping phase: wake on the transport when there is exactly one thing to wait on.
    transport::Endpoint* only = nullptr;
    int waitable = 0;
    for (Engine* e : engines) {
      if (e->idle()) continue;
      for (transport::Endpoint* ep : e->endpoints()) {
        only = ep;
        ++waitable;
      }
    }
    // A gated op must start when its gate opens, not a sleep later.
    int64_t nap = sleepNs;
    for (Engine* e : engines)
      if (int64_t g = e->gateRemainingNs(now); g > 0) nap = std::min(nap, g);
    if (waitable == 1) only->wait(nap);
    else std::this_thread::sleep_for(std::chrono::nanoseconds(nap));
    sleepNs = std::min<int64_t>(sleepNs * 2, 1000000);
  }
}

}  // namespace tempo::engine
