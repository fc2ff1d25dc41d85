// The data-transport interface the engine drives.
//
// Contract:
// - An Endpoint belongs to one communicator and serves the peers connect() was called for.
//   Peers are communicator ranks. One thread at a time uses an Endpoint (the engine
//   serialises); no call blocks except wait().
// - Messages are tagged. A receive matches the send from `peer` with the same tag; among
//   messages with the same (peer, tag), matching is in posting order on both sides.
//   Tags are at most kTagBits wide. The receive buffer must be at least as long as the
//   message; a longer message is an error on the receive.
// - isend/irecv only post. A Request completes only inside progress(): progress() drives
//   the transport and sets `done` (and `status`, `bytes`) on every request that finished.
//   Until then the caller must keep the Request and the buffer alive and untouched.
// - At most maxOutstanding() requests may be posted and not yet completed per Endpoint.
//   Even within that limit a post may be refused with Status::InProgress when the
//   transport is momentarily out of resources (typically a peer that has not drained its
//   queue yet): nothing was posted, and the caller must progress (this and any other
//   endpoint it drives) and retry. A post never waits for a peer.
// - A failed request carries an error Status; the exact cause is logged once, here at the
//   transport boundary. A peer that fails surfaces as Status::RemoteError.
// - cancelAll() abandons every posted request (abort): afterwards none of them is touched
//   again and their buffers may be freed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "src/core/status.h"

namespace tempo::transport {

inline constexpr int kTagBits = 40;
// What the transports themselves carry: kTagBits plus the bits a decorating endpoint may
// add for messages of its own (transports/framed's headers use bit kTagBits). The rest of
// a 64-bit wire tag names the sending rank (at most 2^23 ranks).
inline constexpr int kWireTagBits = kTagBits + 1;

// A memory region registered with one endpoint (Endpoint::registerMemory). Destroying it
// deregisters it; it must outlive every request that names it, and its endpoint must
// outlive it. Transports that need no registration hand out regions that hold nothing.
class MemRegion {
 public:
  virtual ~MemRegion() = default;
};

// Caller-owned completion record for one posted operation.
struct Request {
  bool done = false;
  Status status = Status::Success;
  size_t bytes = 0;          // bytes actually received (receives)
  // Optional, set by the caller before posting: a region of this endpoint that contains
  // the buffer, which saves the transport registering it per call (UCX's memory handle,
  // libfabric's descriptor).
  const MemRegion* region = nullptr;
  void* internal[8] = {};    // transport scratch (libfabric fi_context2)
  void reset() {
    done = false;
    status = Status::Success;
    bytes = 0;
    region = nullptr;
  }
};

// Ordered from fastest to slowest, so that the slowest transport of a communicator is the max.
// UcxShm: every peer UCX reaches over shared memory; UcxNet: some peer over a network
// transport (tcp, or the verbs family).
enum class Kind : uint8_t { Loopback = 0, Shm = 1, OfiShm = 2, UcxShm = 3, OfiTcp = 4, UcxNet = 5, OfiOther = 6 };
const char* kindName(Kind k);

class Endpoint {
 public:
  virtual ~Endpoint() = default;
  virtual Kind kind() const = 0;
  // Printable provider/transport name for logs ("loopback", "shm", "tcp;ofi_rxm").
  virtual const char* name() const = 0;
  // Opaque address to publish to peers through the bootstrap (at most kMaxAddressBytes).
  virtual std::span<const std::byte> address() const = 0;
  // Makes `peer` reachable using the address it published. kind() may change as peers
  // connect (UCX learns which of its transports reach each peer only then).
  virtual Status connect(int peer, std::span<const std::byte> address) = 0;
  // How a connected `peer` is reached, for logs: the transports UCX chose for it ("sysv/
  // memory,cma/memory"), or, by default, name().
  virtual std::string describePeer(int peer) const;
  virtual Status isend(int peer, uint64_t tag, const void* buf, size_t len, Request* req) = 0;
  virtual Status irecv(int peer, uint64_t tag, void* buf, size_t len, Request* req) = 0;
  // Drives progress; returns how many requests completed (0 when idle).
  virtual int progress() = 0;
  // Blocks for at most `ns` or until this endpoint may have new completions. The default
  // sleeps; transports with a wakeup mechanism wake early.
  virtual void wait(int64_t ns);
  virtual int maxOutstanding() const = 0;
  virtual void cancelAll() = 0;
  // Registers [buf, buf + len) for transfers (see Request::region). Safe while other
  // transfers are in flight. The default registers nothing.
  virtual Result<std::unique_ptr<MemRegion>> registerMemory(void* buf, size_t len);
  // The endpoints that carry this one's messages: itself, or, for one made of others
  // (transports/routed), its parts, at most kMaxLanes. Whoever wants every underlying
  // connection exercised (the communicator's connection handshake) posts on each lane
  // directly and progresses the lanes; everything else uses this endpoint.
  static constexpr size_t kMaxLanes = 2;
  virtual std::vector<Endpoint*> lanes();
};

// Addresses travel with a 16-bit length; a UCX worker with many devices has the longest,
// and a routed endpoint (transports/routed) carries one of those and a libfabric one.
inline constexpr size_t kMaxAddressBytes = 8192;

}  // namespace tempo::transport
