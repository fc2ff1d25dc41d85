#include "src/comm/device_staging.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "src/core/param.h"

namespace tempo::comm {
namespace {

// The bytes of this rank's send and receive buffers that `a` reads or writes (0 where the
// buffer is not significant on this rank, e.g. a non-root's receive buffer of a reduce).
struct Extents {
  size_t send = 0, recv = 0;
};

Extents extents(const Communicator& c, const CollArgs& a) {
  const size_t elem = dataTypeSize(a.type), n = size_t(c.nranks()), one = a.count * elem;
  const bool root = c.rank() == a.root;
  using engine::CollKind;
  switch (a.coll) {
    case CollKind::AllReduce: return {one, one};
    case CollKind::Broadcast: return {root ? one : 0, one};
    case CollKind::Reduce: return {one, root ? one : 0};
    case CollKind::AllGather: return {one, n * one};
    case CollKind::ReduceScatter: return {n * one, one};
    case CollKind::AllToAll: return {n * one, n * one};
    case CollKind::Gather: return {one, root ? n * one : 0};
    case CollKind::Scatter: return {root ? n * one : 0, one};
    case CollKind::AllToAllv: {
      Extents e;
      for (size_t j = 0; j < n; ++j) {
        if (a.sendCounts[j]) e.send = std::max(e.send, (a.sendDispls[j] + a.sendCounts[j]) * elem);
        if (a.recvCounts[j]) e.recv = std::max(e.recv, (a.recvDispls[j] + a.recvCounts[j]) * elem);
      }
      return e;
    }
    case CollKind::SendRecv: return {a.p2p == P2p::Send ? one : 0, a.p2p == P2p::Recv ? one : 0};
    case CollKind::PutSignal: return {one, 0};  // the window is the target's (host memory: the API checks)
    case CollKind::WaitSignal: return {};
  }
  return {};
}

}  // namespace

DeviceStaging::~DeviceStaging() = default;

Status DeviceStaging::plan(const Communicator& c, const CollArgs& a) {
  const Extents e = extents(c, a);
  const size_t elem = dataTypeSize(a.type);
  // Every pointer the call dereferences, with how far and whether it writes there.
  struct Use {
    const void* ptr;
    size_t bytes;
    bool writes;
  };
  const Use uses[] = {{a.send, e.send, false},
                      {a.recv, e.recv, true},
                      {a.bias, a.bias ? a.count * elem : 0, false},
                      {a.scalar, a.scalar ? elem : 0, false}};
  const size_t first = regions_.size();
  Call call{first, first, false, false};
  for (const Use& u : uses) {
    // The send and receive buffers are tested even where not significant here: a lowered
    // plan must know each buffer it may name (in place, the send buffer is the receive one).
    const bool buffer = &u == &uses[0] || &u == &uses[1];
    if (u.ptr == nullptr || (u.bytes == 0 && !buffer)) continue;
    TEMPO_ASSIGN(const bool device, mem::deviceCall(gpu_, gpu_.isDevicePointer(u.ptr)));
    if (&u == &uses[0]) call.send = device;
    if (&u == &uses[1]) call.recv = device;
    if (!device || u.bytes == 0) continue;  // host memory: used as it is
    auto* p = static_cast<std::byte*>(const_cast<void*>(u.ptr));
    // Overlapping ranges of this call (in place) become one region.
    auto overlaps = [&](const Region& r) { return p < r.device + r.bytes && r.device < p + u.bytes; };
    auto it = std::find_if(regions_.begin() + ptrdiff_t(first), regions_.end(), overlaps);
    if (it == regions_.end()) {
      regions_.push_back({p, u.bytes, u.writes, 0});
      continue;
    }
    std::byte* lo = std::min(it->device, p);
    std::byte* hi = std::max(it->device + it->bytes, p + u.bytes);
    it->device = lo;
    it->bytes = size_t(hi - lo);
    it->written = it->written || u.writes;
  }
  call.last = regions_.size();
  calls_.push_back(call);
  lowerable_ = lowerable_ && !a.scalar && !a.bias;
  if (regions_.size() > first && std::find(streams_.begin(), streams_.end(), a.stream) == streams_.end())
    streams_.push_back(a.stream);
  return Status::Success;
}

Status DeviceStaging::waitStreams() {
  for (void* s : streams_) TEMPO_TRY(call(gpu_.synchronize(s)));
  return Status::Success;
}

Status DeviceStaging::copyIn(mem::StagingArena& arena) {
  // Lay the copies out one after another, each 256-byte aligned (what the copy engines
  // and the reducers' vector loads like).
  size_t total = 0;
  for (Region& r : regions_) {
    r.offset = total;
    total += (r.bytes + 255) & ~size_t(255);
  }
  TEMPO_ASSIGN(host_, arena.reserve(total));
  TEMPO_ASSIGN(void* stream, arena.stream());
  for (const Region& r : regions_) TEMPO_TRY(call(gpu_.copyAsync(host_ + r.offset, r.device, r.bytes, stream)));
  return call(gpu_.synchronize(stream));
}

bool DeviceStaging::lowerable() const { return lowerable_ && param::GpuPipeline() != 0; }

void DeviceStaging::lower(size_t callIndex, CollArgs& a) const {
  a.sendOnDevice = calls_[callIndex].send;
  a.recvOnDevice = calls_[callIndex].recv;
}

void DeviceStaging::bind(size_t callIndex, CollArgs& a) const {
  const size_t first = calls_[callIndex].first, last = calls_[callIndex].last;
  auto map = [&](const void* p) -> const void* {
    auto* b = static_cast<const std::byte*>(p);
    for (size_t i = first; p && i < last; ++i) {
      const Region& r = regions_[i];
      if (b >= r.device && b < r.device + r.bytes) return host_ + r.offset + (b - r.device);
    }
    return p;
  };
  a.send = map(a.send);
  a.recv = const_cast<void*>(map(a.recv));
  a.bias = map(a.bias);
  a.scalar = map(a.scalar);
}

Status DeviceStaging::copyOut(mem::StagingArena& arena) {
  TEMPO_ASSIGN(void* stream, arena.stream());
  for (const Region& r : regions_)
    if (r.written) TEMPO_TRY(call(gpu_.copyAsync(r.device, host_ + r.offset, r.bytes, stream)));
  return call(gpu_.synchronize(stream));
}

Status DeviceStaging::recordInputs() {
  for (void* s : streams_) {
    TEMPO_ASSIGN(void* event, mem::deviceCall(gpu_, gpu_.recordEvent(s)));
    events_.push_back(event);
  }
  return Status::Success;
}

Status DeviceStaging::queueCompletion(const std::shared_ptr<DeviceStaging>& self) {
  for (void* s : self->streams_) {
    auto* owner = new std::shared_ptr<DeviceStaging>(self);
    const Status queued = self->call(self->gpu_.launchHostFunc(s, &DeviceStaging::waitForBatch, owner));
    if (!ok(queued)) {
      delete owner;
      return queued;
    }
  }
  return Status::Success;
}

void DeviceStaging::abandon(const std::shared_ptr<DeviceStaging>& self) {
  self->complete();
  self->releaseEvents();
}

Status DeviceStaging::pollInputs(const std::function<bool()>& cancelled) {
  // Stream work before a call is usually short next to a collective: poll at a gentle,
  // growing interval.
  auto pause = std::chrono::microseconds(5);
  for (void* event : events_) {
    for (;;) {
      TEMPO_ASSIGN(const bool done, mem::deviceCall(gpu_, gpu_.eventDone(event)));
      if (done) break;
      if (cancelled())
        return fail(Status::InvalidUsage, "%s: the communicator was aborted while a call waited for its stream",
                    gpu_.name());
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }
  return Status::Success;
}

void DeviceStaging::complete() {
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  cv_.notify_all();
}

void DeviceStaging::releaseEvents() {
  for (void* event : events_) (void)gpu_.destroyEvent(event);
  events_.clear();
}

void DeviceStaging::waitForBatch(void* owner) {
  auto* self = static_cast<std::shared_ptr<DeviceStaging>*>(owner);
  {
    DeviceStaging& st = **self;
    std::unique_lock<std::mutex> lock(st.mu_);
    st.cv_.wait(lock, [&st] { return st.done_; });
  }
  delete self;
}

}  // namespace tempo::comm
