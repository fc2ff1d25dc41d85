#include "transports/routed/routed.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace tempo::transport::routed {
namespace {

// A region registered with both inner endpoints (either may be null where that endpoint
// could not register it: its transfers then go unregistered, as without a region).
struct PairRegion final : MemRegion {
  std::unique_ptr<MemRegion> part[2];
};

std::string sizeName(uint64_t b) {
  if (b >= (uint64_t(1) << 20) && b % (uint64_t(1) << 20) == 0) return std::to_string(b >> 20) + " MiB";
  if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + " KiB";
  return std::to_string(b) + " B";
}

class RoutedEndpoint final : public Endpoint {
 public:
  RoutedEndpoint(std::unique_ptr<Endpoint> small, std::unique_ptr<Endpoint> large, Routes routes)
      : routes_(routes) {
    ep_[0] = std::move(small);
    ep_[1] = std::move(large);
    name_ = std::string(ep_[0]->name()) + "<" + sizeName(routes_.largeBytes) + "<=" + ep_[1]->name();
    // Address: the small endpoint's, behind its 16-bit length, then the large one's.
    auto a = ep_[0]->address(), b = ep_[1]->address();
    address_.push_back(std::byte(a.size() & 0xff));
    address_.push_back(std::byte(a.size() >> 8));
    address_.insert(address_.end(), a.begin(), a.end());
    address_.insert(address_.end(), b.begin(), b.end());
  }

  Kind kind() const override { return ep_[1]->kind(); }
  const char* name() const override { return name_.c_str(); }
  std::span<const std::byte> address() const override { return address_; }

  Status connect(int peer, std::span<const std::byte> address) override {
    if (address.size() < 2) return fail(Status::InvalidUsage, "rank %d's routed address is truncated", peer);
    const size_t a = size_t(address[0]) | (size_t(address[1]) << 8);
    if (2 + a >= address.size())
      return fail(Status::InvalidUsage, "rank %d's routed address (%zu bytes) cannot hold both addresses", peer,
                  address.size());
    TEMPO_TRY(ep_[0]->connect(peer, address.subspan(2, a)));
    return ep_[1]->connect(peer, address.subspan(2 + a));
  }

  std::string describePeer(int peer) const override {
    return ep_[0]->describePeer(peer) + " below " + sizeName(routes_.largeBytes) + ", " +
           ep_[1]->describePeer(peer) + " from there";
  }

  Status isend(int peer, uint64_t tag, const void* buf, size_t len, Request* req) override {
    return post(route(tag, len), req, [&](Endpoint& ep) { return ep.isend(peer, tag, buf, len, req); });
  }
  Status irecv(int peer, uint64_t tag, void* buf, size_t len, Request* req) override {
    return post(route(tag, len), req, [&](Endpoint& ep) { return ep.irecv(peer, tag, buf, len, req); });
  }

  // An inner endpoint with requests in flight is progressed on every pass, an idle one on
  // every 16th (it may still have a peer's traffic or failure to take in): polling an
  // idle UCX worker between libfabric's polls cost 1 MiB all-reduces a fifth of their
  // speed here.
  int progress() override {
    ++passes_;
    int done = 0;
    for (int i = 0; i < 2; ++i) {
      if (outstanding_[i] == 0 && passes_ % 16 != 0) continue;
      const int n = ep_[i]->progress();
      outstanding_[i] = std::max<int64_t>(0, outstanding_[i] - n);
      done += n;
    }
    return done;
  }
  // Waits on the one inner endpoint with requests in flight, so that its wakeup (UCX's
  // event fd) ends the wait; when both or neither have some, Endpoint::wait's sleep, since
  // waiting on one could miss the other's completions. An idle inner endpoint has nothing
  // to complete: a peer's message for it completes only once a receive is posted there.
  void wait(int64_t ns) override {
    if (outstanding_[0] > 0 && outstanding_[1] == 0) return ep_[0]->wait(ns);
    if (outstanding_[1] > 0 && outstanding_[0] == 0) return ep_[1]->wait(ns);
    Endpoint::wait(ns);
  }
  int maxOutstanding() const override { return std::min(ep_[0]->maxOutstanding(), ep_[1]->maxOutstanding()); }
  void cancelAll() override {
    for (int i = 0; i < 2; ++i) {
      ep_[i]->cancelAll();
      outstanding_[i] = 0;
    }
  }

  std::vector<Endpoint*> lanes() override { return {ep_[0].get(), ep_[1].get()}; }

  Result<std::unique_ptr<MemRegion>> registerMemory(void* buf, size_t len) override {
    auto pair = std::make_unique<PairRegion>();
    for (int i = 0; i < 2; ++i) {
      TEMPO_ASSIGN(pair->part[i], ep_[i]->registerMemory(buf, len));
    }
    return std::unique_ptr<MemRegion>(std::move(pair));
  }

 private:
  // Which inner endpoint carries the message.
  int route(uint64_t tag, size_t len) const {
    return (tag & routes_.pinnedTags) == 0 && len >= routes_.largeBytes ? 1 : 0;
  }

  // Posts on inner endpoint `i` with the caller's region (one of ours) translated into
  // that endpoint's for the call (the transports read it when posting only), then gives
  // the request its region back: a post refused with InProgress is retried with the same
  // request, and translating twice read a foreign region as ours (a crash, seen in the
  // conformance suite when libfabric was momentarily full).
  template <class Post>
  Status post(int i, Request* req, Post&& p) {
    const MemRegion* mine = req->region;
    if (mine) req->region = static_cast<const PairRegion*>(mine)->part[i].get();
    const Status posted = p(*ep_[i]);
    req->region = mine;
    if (posted == Status::Success) ++outstanding_[i];
    return posted;
  }

  std::unique_ptr<Endpoint> ep_[2];
  int64_t outstanding_[2] = {};  // posted and not yet reported done by progress()
  uint64_t passes_ = 0;
  Routes routes_;
  std::string name_;
  std::vector<std::byte> address_;
};

}  // namespace

Result<std::unique_ptr<Endpoint>> create(std::unique_ptr<Endpoint> small, std::unique_ptr<Endpoint> large,
                                         Routes routes) {
  if (!small || !large) return fail(Status::InternalError, "a routed endpoint needs two endpoints");
  if (routes.largeBytes == 0)
    return fail(Status::InvalidArgument, "a routed endpoint's threshold must be at least one byte");
  if (small->address().size() > 0xffff)
    return fail(Status::InternalError, "%s address of %zu bytes is too long to route", small->name(),
                small->address().size());
  return std::unique_ptr<Endpoint>(new RoutedEndpoint(std::move(small), std::move(large), routes));
}

}  // namespace tempo::transport::routed
