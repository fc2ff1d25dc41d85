// Buffers the user registered with a communicator (ncclCommRegister), each registered in
// turn with every endpoint the engine drives, so that transfers from and into them name
// the transport's region (UCX's memory handle, libfabric's descriptor) instead of leaving
// the transport to register or look the buffer up per call.
//
// Contract:
// - add() registers [buf, buf + len) with every endpoint or with none: a transport that
//   refuses fails the call, and what was registered is released.
// - find() returns a region of endpoint `ep` that contains [p, p + len), or null. It takes
//   a lock only when something is registered; with nothing registered it is one atomic
//   load, so the data path of programs that never register pays nothing.
// - add(), remove() and find() are safe to call from different threads (the user's thread
//   registers while the engine's thread transfers). As in NCCL, a buffer must not be
//   deregistered while an operation that uses it is pending.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "src/core/status.h"
#include "transports/transport.h"

namespace tempo::engine {

class UserRegions {
 public:
  explicit UserRegions(std::span<transport::Endpoint* const> endpoints) : endpoints_(endpoints) {}

  // Registers under `key` (the communicator's handle for it).
  Status add(const void* key, void* buf, size_t len);
  // Releases what add() registered under `key`; false if nothing was.
  bool remove(const void* key);
  const transport::MemRegion* find(const transport::Endpoint* ep, const void* p, size_t len) const;
  size_t size() const { return count_.load(std::memory_order_acquire); }

 private:
  struct Entry {
    const void* key;
    const std::byte* base;
    size_t len;
    std::vector<std::unique_ptr<transport::MemRegion>> perEndpoint;  // parallel to endpoints_
  };
  std::span<transport::Endpoint* const> endpoints_;
  mutable std::mutex mu_;
  std::vector<Entry> entries_;  // sorted by base
  size_t maxLen_ = 0;           // the longest registration ever added (bounds find's scan)
  std::atomic<size_t> count_{0};
};

}  // namespace tempo::engine
