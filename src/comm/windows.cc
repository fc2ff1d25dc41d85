// Memory windows (ncclCommWindowRegister / ncclCommWindowDeregister), and the receiving
// side of the one-sided calls on them: the inbox, opened with the first window, and the
// thread that serves it between the application's calls. See communicator.h and
// engine::Inbox.
#include <algorithm>
#include <cstring>

#include "src/comm/communicator.h"
#include "src/core/log.h"
#include "src/core/param.h"

namespace tempo::comm {
namespace {

// What each rank contributes to a window call's exchange.
enum class Verb : int32_t { Failed = 0, Register = 1, Deregister = 2 };
struct Record {
  uint64_t id;
  uint64_t size;
  int32_t flags;
  Verb verb;
  uint32_t onDevice;
  uint32_t pad;
};

const char* verbName(Verb v) {
  return v == Verb::Deregister ? "ncclCommWindowDeregister" : "ncclCommWindowRegister";
}

}  // namespace

Result<Communicator::Window*> Communicator::newWindow(void* buff, size_t size, int flags, bool onDevice) {
  auto w = std::make_unique<Window>();
  w->buff = buff;
  w->size = size;
  w->flags = flags;
  w->onDevice = onDevice;
  std::lock_guard<std::mutex> lock(windowsMu_);
  w->id = nextWindowId_++;
  windows_.push_back(std::move(w));
  return windows_.back().get();
}

Communicator::Window* Communicator::window(const void* handle) const {
  std::lock_guard<std::mutex> lock(windowsMu_);
  for (const auto& w : windows_)
    if (w.get() == handle) return w.get();
  return nullptr;
}

// Phase 1: this rank registers the buffer with its endpoints. Phase 2: every rank's
// record, around the bootstrap ring; all must register the same window number with the
// same flags. A failure on any rank fails the call on every rank, and the window is gone.
Status Communicator::exchangeWindow(Window* w) {
  Status local = Status::Success;
  if (auto reg = registerBuffer(w->buff, w->size); reg.ok()) w->registration = *reg;
  else local = reg.status();
  const std::string localWhy = ok(local) ? std::string() : lastErrorMessage();

  std::vector<Record> all(static_cast<size_t>(nranks_));
  all[size_t(rank_)] = {w->id, w->size, w->flags, ok(local) ? Verb::Register : Verb::Failed, w->onDevice, 0};
  const Deadline deadline = Deadline::afterSeconds(param::InitTimeout()).cancelledBy(&aborting_);
  Status st = boot_->allGather(std::as_writable_bytes(std::span(all)), sizeof(Record), deadline);
  if (ok(st) && !ok(local))
    st = fail(local, "ncclCommWindowRegister: rank %d could not register its window: %s", rank_, localWhy.c_str());
  for (int r = 0; ok(st) && r < nranks_; ++r) {
    const Record& theirs = all[size_t(r)];
    if (theirs.verb == Verb::Failed)
      st = fail(Status::InvalidUsage, "ncclCommWindowRegister: rank %d could not register its window #%lu", r,
                (unsigned long)theirs.id);
    else if (theirs.verb != Verb::Register)
      st = fail(Status::InvalidUsage,
                "ncclCommWindowRegister: rank %d called %s where rank %d registers window #%lu: every rank must make "
                "its window calls in the same order",
                r, verbName(theirs.verb), rank_, (unsigned long)w->id);
    else if (theirs.id != w->id)
      st = fail(Status::InvalidUsage,
                "ncclCommWindowRegister: rank %d registers its window #%lu where rank %d registers #%lu: every rank "
                "must register its windows in the same order",
                r, (unsigned long)theirs.id, rank_, (unsigned long)w->id);
    else if (theirs.flags != w->flags)
      st = fail(Status::InvalidUsage,
                "ncclCommWindowRegister: window #%lu has flags 0x%x on rank %d and 0x%x on rank %d: winFlags must "
                "match on every rank",
                (unsigned long)w->id, unsigned(theirs.flags), r, unsigned(w->flags), rank_);
  }
  if (!ok(st)) {
    if (w->registration) (void)deregisterBuffer(w->registration);
    std::lock_guard<std::mutex> lock(windowsMu_);
    std::erase_if(windows_, [&](const auto& x) { return x.get() == w; });
    return st;
  }
  w->sizes.resize(size_t(nranks_));
  w->devices.resize(size_t(nranks_));
  for (int r = 0; r < nranks_; ++r) {
    w->sizes[size_t(r)] = all[size_t(r)].size;
    w->devices[size_t(r)] = all[size_t(r)].onDevice != 0;
  }
  {
    // Every rank opens its inbox with its first window, so that puts can arrive from then
    // on. A failure to open it leaves the window usable for collectives; the one-sided
    // calls report it.
    std::lock_guard<std::timed_mutex> drive(driveMu_);
    if (!inbox_ && ok(inboxStatus_)) inboxStatus_ = openInbox();
  }
  w->ready.store(true, std::memory_order_release);
  TEMPO_INFO(log::Alloc, "comm %p rank %d: window #%lu registered, %zu bytes at %p, flags 0x%x",
             static_cast<void*>(this), rank_, (unsigned long)w->id, w->size, w->buff, unsigned(w->flags));
  return Status::Success;
}

// Every rank must deregister the same window at the same point; on a disagreement the
// window stays registered on every rank, and the call fails on all of them.
Status Communicator::deregisterWindow(Window* w) {
  std::vector<Record> all(static_cast<size_t>(nranks_));
  all[size_t(rank_)] = {w->id, w->size, w->flags, Verb::Deregister, w->onDevice, 0};
  const Deadline deadline = Deadline::afterSeconds(param::InitTimeout()).cancelledBy(&aborting_);
  TEMPO_TRY(boot_->allGather(std::as_writable_bytes(std::span(all)), sizeof(Record), deadline));
  for (int r = 0; r < nranks_; ++r) {
    const Record& theirs = all[size_t(r)];
    if (theirs.verb != Verb::Deregister)
      return fail(Status::InvalidUsage,
                  "ncclCommWindowDeregister: rank %d called %s where rank %d deregisters window #%lu: every rank must "
                  "make its window calls in the same order",
                  r, verbName(theirs.verb), rank_, (unsigned long)w->id);
    if (theirs.id != w->id)
      return fail(Status::InvalidUsage,
                  "ncclCommWindowDeregister: rank %d deregisters its window #%lu where rank %d deregisters #%lu",
                  r, (unsigned long)theirs.id, rank_, (unsigned long)w->id);
  }
  TEMPO_TRY(deregisterBuffer(w->registration));
  std::lock_guard<std::mutex> lock(windowsMu_);
  std::erase_if(windows_, [&](const auto& x) { return x.get() == w; });
  return Status::Success;
}

Result<std::byte*> Communicator::windowMemory(const engine::RmaHeader& h, int peer) const {
  std::lock_guard<std::mutex> lock(windowsMu_);
  for (const auto& w : windows_) {
    if (w->id != h.window) continue;
    if (h.offset > w->size || h.bytes > w->size - h.offset)
      return fail(Status::SystemError,
                  "rank %d: a put from rank %d of %lu bytes at offset %lu runs past the end of window #%lu (%zu bytes)",
                  rank_, peer, (unsigned long)h.bytes, (unsigned long)h.offset, (unsigned long)h.window, w->size);
    return static_cast<std::byte*>(w->buff) + h.offset;
  }
  return fail(Status::SystemError, "rank %d: a put from rank %d names window #%lu, which this rank does not have",
              rank_, peer, (unsigned long)h.window);
}

// Under the drive mutex.
Status Communicator::openInbox() {
  auto inbox = std::make_unique<engine::Inbox>();
  inbox->resolve = [this](const engine::RmaHeader& h, int peer) { return windowMemory(h, peer); };
  TEMPO_TRY(engine_->openInbox(inbox.get()));
  inbox_ = std::move(inbox);
  inboxServer_ = std::thread([this] { serveInbox(); });
  return Status::Success;
}

// The inbox server: whenever the drive mutex is free (no call of the application is
// driving the engine, which then serves the inbox itself), polls the transports and
// serves the inbox; backs off from 20 us to 1 ms between polls while nothing arrives.
void Communicator::serveInbox() {
  constexpr int64_t kMinNapNs = 20'000, kMaxNapNs = 1'000'000;
  int64_t napNs = kMinNapNs;
  std::unique_lock<std::mutex> lock(inboxServerMu_);
  while (!inboxStop_) {
    lock.unlock();
    int work = 0;
    if (driveMu_.try_lock()) {
      if (engine_->idle()) work = engine_->pollInbox();
      driveMu_.unlock();
    }
    napNs = work ? kMinNapNs : std::min(napNs * 2, kMaxNapNs);
    lock.lock();
    if (!work) inboxServerCv_.wait_for(lock, std::chrono::nanoseconds(napNs), [this] { return inboxStop_; });
  }
}

void Communicator::stopInboxServer() {
  {
    std::lock_guard<std::mutex> lock(inboxServerMu_);
    inboxStop_ = true;
  }
  inboxServerCv_.notify_all();
  if (inboxServer_.joinable()) inboxServer_.join();
}

}  // namespace tempo::comm
