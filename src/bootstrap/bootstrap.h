// Per-communicator out-of-band mesh: rendezvous through the root named by a unique id,
// then a ring of authenticated TCP connections for small collective exchanges.
//
// Used only during init and teardown (transport addresses, barriers); never on the data
// path. Every call takes a Deadline. Not thread-safe: one thread uses a Bootstrap at a
// time (the communicator's init or control path).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "src/bootstrap/auth.h"
#include "src/bootstrap/socket.h"
#include "src/bootstrap/wire.h"

namespace tempo::bootstrap {

// Creates a fresh unique id: the root listener is started in this process on the
// selected interface with a new random secret. With NCCL_COMM_ID set, returns the id for
// that address instead (no secret; rank 0's init starts the root there).
Status createUniqueId(std::span<uint8_t, kUniqueIdBytes> out);

// This process's description of itself, as sent to the root.
PeerInfo localPeerInfo(const SockAddr& oob);

class Bootstrap {
 public:
  // Joins the communicator `id` names as `rank` of `nranks`. With an NCCL_COMM_ID id,
  // rank 0 first starts the root at that address.
  static Result<std::unique_ptr<Bootstrap>> join(const UniqueId& id, int rank, int nranks,
                                                 Deadline deadline);
  ~Bootstrap();  // stops the heartbeat thread

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  uint64_t commNonce() const { return nonce_; }
  const std::vector<PeerInfo>& peers() const { return peers_; }

  // `data` holds nranks blocks of `blockBytes`; block rank() is this rank's contribution.
  // On return every block is filled. Ring algorithm: nranks-1 neighbour exchanges.
  Status allGather(std::span<std::byte> data, size_t blockBytes, Deadline deadline);
  Status barrier(Deadline deadline);
  // One message to or from one rank outside the ring (ncclCommShrink, whose survivors must
  // not depend on the excluded ranks that the ring passes through). sendDirect() connects
  // to `to`'s listener, authenticates as the ring does and sends `payload`; recvDirect()
  // accepts connections until one authenticated as `from` (any rank if -1; *sender says
  // which) delivers its message of at most `maxLength` bytes. Others are dropped.
  Status sendDirect(int to, std::span<const uint8_t> payload, Deadline deadline);
  Result<std::vector<uint8_t>> recvDirect(int from, uint32_t maxLength, Deadline deadline, int* sender = nullptr);
  // True if a ring neighbour's connection has closed without a Leave notice before it
  // (the neighbour exited or aborted). A close is judged only once everything the
  // neighbour sent before it has been read by pollNotice().
  bool neighbourGone() const;
  // True once the previous rank on the ring has sent no heartbeat for TEMPO_PEER_TIMEOUT
  // seconds while its heartbeat connection stayed open: its process is stopped, hung in
  // the kernel, or unreachable (one that exits or aborts closes the connection instead).
  // Every rank is watched by its successor, so a silent rank is found by one rank, which
  // fails and tells the others through the ring notices.
  bool neighbourSilent() const { return prevSilent_.load(std::memory_order_acquire); }
  // A clean departure (announceLeave) by a ring neighbour, as read by pollNotice().
  struct Departure {
    int rank = -1;
    uint64_t collectives = 0;  // how many collectives it issued before finalizing
  };
  // The ring neighbour that announced it left after the fewest collectives, if any.
  std::optional<Departure> neighbourLeft() const;
  // Tells both ring neighbours that this rank finalized cleanly after `collectives`
  // collectives, so that they do not mistake the close that follows for a failure. At most
  // once, and not after a failure notice; best effort, bounded wait.
  void announceLeave(uint64_t collectives);
  // Failure propagation around the ring, once the communicator is unusable: tells both
  // ring neighbours why (best effort, bounded wait). A rank that receives a notice
  // forwards it once, so every rank learns of it within about n/2 checks.
  void notifyNeighbours(Status status, const std::string& reason);
  // A notice from a ring neighbour, if one has arrived: its status, with its reason in
  // *reason. Success when none is waiting. Nonblocking but for reading a notice that has
  // started to arrive.
  Status pollNotice(std::string* reason);
  // Shuts the ring connections down (ncclCommAbort): the neighbours see them close, and
  // every later use here fails. The descriptors stay open until destruction, so another
  // thread polling for notices never sees them change.
  void shutdown();

 private:
  Bootstrap() = default;
  Status connectRing(Deadline deadline);
  // Connects *next to the successor's listener and accepts *prev from the predecessor, both
  // authenticated for `purpose`.
  Status linkNeighbours(uint32_t purpose, Socket* next, Socket* prev, Deadline deadline);
  // Heartbeats: a connection of their own to each ring neighbour (the ring sockets carry
  // raw all-gather blocks, which a heartbeat must not interleave with), and a thread that
  // sends one byte to the successor every period and watches the predecessor's.
  Status startHeartbeats(Deadline deadline);
  void heartbeatLoop(int64_t periodNs, int64_t timeoutNs);
  void stopHeartbeats();
  // Sends one framed message to both ring neighbours (best effort, bounded). The caller
  // holds ringMu_.
  void sendToNeighbours(const std::vector<uint8_t>& frame);
  // A hello to a peer for `purpose`, with a fresh nonce, proved with the secret.
  std::vector<uint8_t> peerHello(uint32_t purpose) const;
  // Accepts until a connection proves this communicator's secret and names its nonce, as
  // rank `from` (any rank if -1, stored in *sender) with `purpose`, with a hello nonce not
  // admitted before; others (unauthenticated, replayed) are dropped with a rate-limited
  // warning.
  Result<Socket> acceptFrom(int from, uint32_t purpose, Deadline deadline, int* sender = nullptr);

  int rank_ = 0, nranks_ = 1;
  uint64_t nonce_ = 0;
  Secret secret_{};
  ReplayGuard replays_;  // hello nonces acceptFrom has admitted
  std::vector<PeerInfo> peers_;
  Socket listener_, next_, prev_;
  bool notified_ = false;
  // Collectives announced by a departing next_ / prev_ neighbour; kStayed until then. Set
  // by pollNotice (under ringMu_), read by neighbourGone on any thread.
  static constexpr uint64_t kStayed = UINT64_MAX;
  std::atomic<uint64_t> leftAfter_[2] = {kStayed, kStayed};
  // Serialises the ring sockets' users: all-gathers and barriers, notices sent, and polls
  // for notices (which may come from ncclCommGetAsyncError on any thread).
  std::mutex ringMu_;
  Socket hbNext_, hbPrev_;          // heartbeat connections (none with one rank)
  int hbWake_ = -1;                 // eventfd that ends the heartbeat thread
  std::thread hbThread_;
  std::atomic<bool> prevSilent_{false};
};

}  // namespace tempo::bootstrap
