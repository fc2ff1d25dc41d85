#include "transports/loopback/loopback.h"

#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "src/core/log.h"

namespace tempo::transport::loopback {
namespace {

struct Mailbox;

// A send or a receive waiting for its match, kept in the receiver's mailbox.
struct Posted {
  int peer;            // receives: the expected sender; sends: the sender
  uint64_t tag;
  void* buf;           // receive buffer, or the sender's (const) data
  size_t len;
  Request* req;
  std::shared_ptr<Mailbox> owner;  // the mailbox whose completion list gets `req`
};

struct Completion {
  Request* req;
  Status status;
  size_t bytes;
};

// Locking: `mu` guards the match queues and is held during the copy, so the buffers of
// a queued entry stay valid while it is being copied (cancel takes the same lock).
// `cmu` guards the completion list and is never held while taking another lock.
struct Mailbox {
  int rank = 0;
  std::mutex mu;
  std::vector<Posted> recvs;       // posted receives, in posting order
  std::vector<Posted> unexpected;  // sends that arrived before their receive
  bool closed = false;

  std::mutex cmu;
  std::condition_variable cv;
  std::vector<Completion> done;

  void complete(Request* req, Status s, size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(cmu);
      done.push_back({req, s, bytes});
    }
    cv.notify_one();
  }
};

// Registry of live mailboxes per (communicator, rank).
std::mutex g_registryMu;
std::map<std::pair<uint64_t, int>, std::weak_ptr<Mailbox>> g_registry;

// Copies a matched pair and completes both sides. Called with the queue owner's `mu` held.
void deliver(const void* src, size_t srcLen, Request* sendReq, Mailbox& sender, void* dst, size_t dstLen,
             Request* recvReq, Mailbox& receiver) {
  if (srcLen > dstLen) {
    TEMPO_WARN("loopback: message of %zu bytes from rank %d to rank %d exceeds the %zu-byte receive", srcLen,
               sender.rank, receiver.rank, dstLen);
    sender.complete(sendReq, Status::InvalidUsage, 0);
    receiver.complete(recvReq, Status::InvalidUsage, 0);
    return;
  }
  if (srcLen) memcpy(dst, src, srcLen);
  sender.complete(sendReq, Status::Success, srcLen);
  receiver.complete(recvReq, Status::Success, srcLen);
}

class LoopbackEndpoint final : public Endpoint {
 public:
  LoopbackEndpoint(uint64_t commId, int rank, int nranks)
      : commId_(commId), rank_(rank), self_(std::make_shared<Mailbox>()), peers_(size_t(nranks)) {
    self_->rank = rank;
    address_[0] = std::byte{1};
  }
  ~LoopbackEndpoint() override;

  Kind kind() const override { return Kind::Loopback; }
  const char* name() const override { return "loopback"; }
  std::span<const std::byte> address() const override { return address_; }
  Status connect(int peer, std::span<const std::byte> address) override;
  Status isend(int peer, uint64_t tag, const void* buf, size_t len, Request* req) override;
  Status irecv(int peer, uint64_t tag, void* buf, size_t len, Request* req) override;
  int progress() override;
  void wait(int64_t ns) override;
  int maxOutstanding() const override { return 1 << 20; }
  void cancelAll() override;

  Status registerSelf();

 private:
  uint64_t commId_;
  int rank_;
  std::shared_ptr<Mailbox> self_;
  std::vector<std::shared_ptr<Mailbox>> peers_;
  std::byte address_[1];
  std::vector<Completion> scratch_;
};

Status LoopbackEndpoint::registerSelf() {
  std::lock_guard<std::mutex> lock(g_registryMu);
  auto& slot = g_registry[{commId_, rank_}];
  if (!slot.expired())
    return fail(Status::InvalidUsage, "loopback: rank %d of communicator %#lx is already registered", rank_,
                (unsigned long)commId_);
  slot = self_;
  return Status::Success;
}

LoopbackEndpoint::~LoopbackEndpoint() {
  cancelAll();
  {
    std::lock_guard<std::mutex> lock(g_registryMu);
    auto it = g_registry.find({commId_, rank_});
    if (it != g_registry.end() && it->second.lock() == self_) g_registry.erase(it);
  }
}

Status LoopbackEndpoint::connect(int peer, std::span<const std::byte>) {
  std::lock_guard<std::mutex> lock(g_registryMu);
  auto it = g_registry.find({commId_, peer});
  std::shared_ptr<Mailbox> box = it == g_registry.end() ? nullptr : it->second.lock();
  if (!box)
    return fail(Status::InvalidUsage, "loopback: rank %d of this communicator is not in this process", peer);
  peers_[size_t(peer)] = std::move(box);
  return Status::Success;
}

Status LoopbackEndpoint::isend(int peer, uint64_t tag, const void* buf, size_t len, Request* req) {
  Mailbox& target = *peers_[size_t(peer)];
  std::lock_guard<std::mutex> lock(target.mu);
  if (target.closed) {
    self_->complete(req, fail(Status::RemoteError, "loopback: rank %d has left the communicator", peer), 0);
    return Status::Success;
  }
  for (auto it = target.recvs.begin(); it != target.recvs.end(); ++it) {
    if (it->peer == rank_ && it->tag == tag) {
      Posted r = std::move(*it);
      target.recvs.erase(it);
      deliver(buf, len, req, *self_, r.buf, r.len, r.req, target);
      return Status::Success;
    }
  }
  target.unexpected.push_back({rank_, tag, const_cast<void*>(buf), len, req, self_});
  return Status::Success;
}

Status LoopbackEndpoint::irecv(int peer, uint64_t tag, void* buf, size_t len, Request* req) {
  std::lock_guard<std::mutex> lock(self_->mu);
  for (auto it = self_->unexpected.begin(); it != self_->unexpected.end(); ++it) {
    if (it->peer == peer && it->tag == tag) {
      Posted s = std::move(*it);
      self_->unexpected.erase(it);
      deliver(s.buf, s.len, s.req, *s.owner, buf, len, req, *self_);
      return Status::Success;
    }
  }
  self_->recvs.push_back({peer, tag, buf, len, req, self_});
  return Status::Success;
}

int LoopbackEndpoint::progress() {
  {
    std::lock_guard<std::mutex> lock(self_->cmu);
    if (self_->done.empty()) return 0;
    scratch_.swap(self_->done);
  }
  for (const Completion& c : scratch_) {
    c.req->status = c.status;
    c.req->bytes = c.bytes;
    c.req->done = true;
  }
  int n = int(scratch_.size());
  scratch_.clear();
  return n;
}

void LoopbackEndpoint::wait(int64_t ns) {
  std::unique_lock<std::mutex> lock(self_->cmu);
  self_->cv.wait_for(lock, std::chrono::nanoseconds(ns), [&] { return !self_->done.empty(); });
}

void LoopbackEndpoint::cancelAll() {
  // Our queued sends live in the peers' mailboxes: withdraw them under each peer's lock.
  for (auto& peer : peers_) {
    if (!peer || peer == self_) continue;
    std::lock_guard<std::mutex> lock(peer->mu);
    std::erase_if(peer->unexpected, [&](const Posted& p) { return p.owner == self_; });
  }
  // Our own queues: drop our receives; peers' sends waiting here fail so they cannot hang.
  std::vector<Posted> orphaned;
  {
    std::lock_guard<std::mutex> lock(self_->mu);
    self_->closed = true;
    self_->recvs.clear();
    std::erase_if(self_->unexpected, [&](Posted& p) {
      if (p.owner == self_) return true;
      orphaned.push_back(std::move(p));
      return true;
    });
  }
  for (Posted& p : orphaned) p.owner->complete(p.req, Status::RemoteError, 0);
  std::lock_guard<std::mutex> lock(self_->cmu);
  self_->done.clear();
}

}  // namespace

Result<std::unique_ptr<Endpoint>> create(uint64_t commId, int rank, int nranks) {
  auto ep = std::make_unique<LoopbackEndpoint>(commId, rank, nranks);
  TEMPO_TRY(ep->registerSelf());
  return std::unique_ptr<Endpoint>(std::move(ep));
}

}  // namespace tempo::transport::loopback
