// Base of the endpoints that wrap one other endpoint and change how its messages travel
// (transports/framed, transports/faulty): everything a decorator does not override is
// forwarded to the inner endpoint, so each states only what it changes. A decorator that
// posts requests of its own on the inner endpoint resets inner_ first in its destructor,
// so that the inner endpoint is gone before those requests are.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "transports/transport.h"

namespace tempo::transport {

class Decorator : public Endpoint {
 public:
  // `what` names the decoration in name(): "framed" makes "framed(shm)".
  Decorator(std::unique_ptr<Endpoint> inner, const char* what)
      : inner_(std::move(inner)), name_(std::string(what) + "(" + inner_->name() + ")") {}

  Kind kind() const override { return inner_->kind(); }
  const char* name() const override { return name_.c_str(); }
  std::span<const std::byte> address() const override { return inner_->address(); }
  Status connect(int peer, std::span<const std::byte> address) override { return inner_->connect(peer, address); }
  std::string describePeer(int peer) const override { return inner_->describePeer(peer); }
  void wait(int64_t ns) override { inner_->wait(ns); }
  int maxOutstanding() const override { return inner_->maxOutstanding(); }
  Result<std::unique_ptr<MemRegion>> registerMemory(void* buf, size_t len) override {
    return inner_->registerMemory(buf, len);
  }
  // The connection handshake exercises the inner endpoint's own connections.
  std::vector<Endpoint*> lanes() override { return inner_->lanes(); }

 protected:
  std::unique_ptr<Endpoint> inner_;

 private:
  std::string name_;
};

}  // namespace tempo::transport
