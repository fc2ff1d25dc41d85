#include "src/bootstrap/bootstrap.h"

#include <poll.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "src/bootstrap/auth.h"
#include "src/bootstrap/liveness.h"
#include "src/bootstrap/root.h"
#include "src/core/host.h"
#include "src/core/log.h"
#include "src/core/param.h"

namespace tempo::bootstrap {
namespace {

struct Message {
  MsgType type;
  std::vector<uint8_t> payload;
};

// Reads one framed message of any type, bounded by `maxLength`; an Error reply is decoded
// and returned as its status.
Result<Message> recvAny(const Socket& s, uint32_t maxLength, Deadline deadline) {
  uint8_t hdr[kHeaderBytes];
  TEMPO_TRY(s.recvAll(std::as_writable_bytes(std::span(hdr)), deadline));
  TEMPO_ASSIGN(Header h, decodeHeader(std::span<const uint8_t, kHeaderBytes>(hdr), maxLength));
  Message m{h.type, std::vector<uint8_t>(h.length)};
  TEMPO_TRY(s.recvAll(std::as_writable_bytes(std::span(m.payload)), deadline));
  if (h.type == MsgType::Error) {
    TEMPO_ASSIGN(ErrorReply e, decodeError(m.payload));
    Status st = e.status > 0 && e.status <= int(Status::Timeout) ? Status(e.status) : Status::RemoteError;
    return fail(st, "bootstrap root: %s", e.reason.c_str());
  }
  return m;
}

Status unexpected(MsgType type) {
  return fail(Status::RemoteError, "bootstrap: unexpected message type %u", unsigned(type));
}

// Reads one framed message of the expected type.
Result<std::vector<uint8_t>> recvMessage(const Socket& s, MsgType expect, uint32_t maxLength,
                                         Deadline deadline) {
  TEMPO_ASSIGN(Message m, recvAny(s, maxLength, deadline));
  if (m.type != expect) return unexpected(m.type);
  return std::move(m.payload);
}

// Waits for the root's table while proving this rank alive to the root (which ends the
// job when an admitted rank falls silent) and judging the root's keepalives in turn: a
// root silent for TEMPO_PEER_TIMEOUT is stopped or hung, and waiting on for the init
// deadline would only delay the error. Phases of one pass: beat when due; wait for the
// root's bytes, the next beat or the deadline; read whole messages (a keepalive marks
// the root alive; the table, or an Error reply, ends the wait); judge.
Result<std::vector<uint8_t>> awaitTable(const Socket& root, const SockAddr& rootAddr, int rank,
                                        uint32_t maxTable, Deadline deadline) {
  const int64_t timeoutNs = peerTimeoutNs(), periodNs = beatPeriodNs(timeoutNs);
  const std::vector<uint8_t> beat = encodeKeepalive();
  int64_t heard = nowNs(), nextBeat = heard;
  for (;;) {
    int64_t now = nowNs();
    if (now >= nextBeat) {  // a few bytes; a root that does not read them is judged below
      (void)::send(root.fd(), beat.data(), beat.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      nextBeat = now + periodNs;
    }
    pollfd p{root.fd(), POLLIN, 0};
    const int ms = int(std::min<int64_t>(deadline.remainingMs(), std::max<int64_t>(1, (nextBeat - now + 999999) / 1000000)));
    if (::poll(&p, 1, ms) < 0 && errno != EINTR)
      return fail(Status::SystemError, "bootstrap: poll failed: %s", strerror(errno));
    if (p.revents) {
      TEMPO_ASSIGN(Message m, recvAny(root, maxTable, timeoutNs > 0 ? deadline.within(timeoutNs) : deadline));
      if (m.type == MsgType::Table) return std::move(m.payload);
      if (m.type != MsgType::Keepalive) return unexpected(m.type);
      heard = nowNs();
      continue;
    }
    if (timeoutNs > 0 && nowNs() - heard > timeoutNs)
      return fail(Status::RemoteError,
                  "bootstrap: rank %d has heard nothing from the root at %s for %ld s (TEMPO_PEER_TIMEOUT) while "
                  "waiting for the other ranks to join: the root's process is stopped, hung or unreachable",
                  rank, rootAddr.toString().c_str(), long((nowNs() - heard) / 1000000000));
    if (deadline.expired())
      return fail(Status::SystemError,
                  "bootstrap: rank %d timed out waiting for the other ranks to join (the init deadline, "
                  "TEMPO_INIT_TIMEOUT=%ld s)", rank, long(param::InitTimeout()));
  }
}

Status sendBytes(const Socket& s, const std::vector<uint8_t>& msg, Deadline deadline) {
  return s.sendAll(std::as_bytes(std::span(msg)), deadline);
}

}  // namespace

PeerInfo localPeerInfo(const SockAddr& oob) {
  PeerInfo p;
  p.hostHash = hostHash();
  p.kernelHash = kernelHash();
  p.processToken = processToken();
  p.pid = uint32_t(getpid());
  p.features = (strcasecmp(param::Pacing(), "off") != 0 ? kFeatureTelemetry : 0) | (*param::Trace() ? kFeatureTrace : 0);
  p.oob = oob;
  snprintf(p.hostname, sizeof p.hostname, "%s", hostName());
  return p;
}

Status createUniqueId(std::span<uint8_t, kUniqueIdBytes> out) {
  UniqueId id;
  if (*param::CommId()) {
    TEMPO_ASSIGN(id.root, SockAddr::parse(param::CommId()));
    id.flags = UniqueId::kNoSecret;
  } else {
    TEMPO_ASSIGN(SockAddr bindAddr, selectInterfaceAddress());
    if (!secureRandom(id.secret.data(), id.secret.size()))
      return fail(Status::SystemError, "ncclGetUniqueId: the kernel's random source failed");
    TEMPO_ASSIGN(id.root, startRoot(bindAddr, id.secret, false));
  }
  encodeUniqueId(id, out);
  return Status::Success;
}

Result<std::unique_ptr<Bootstrap>> Bootstrap::join(const UniqueId& id, int rank, int nranks,
                                                   Deadline deadline) {
  std::unique_ptr<Bootstrap> b(new Bootstrap());
  b->rank_ = rank;
  b->nranks_ = nranks;
  b->secret_ = (id.flags & UniqueId::kNoSecret) ? commIdSecret() : id.secret;
  if ((id.flags & UniqueId::kNoSecret) && rank == 0) TEMPO_TRY(startRoot(id.root, b->secret_, true).status());

  // Listen for ring neighbours on the interface that reaches the root.
  TEMPO_ASSIGN(SockAddr bindAddr, selectInterfaceAddress());
  TEMPO_ASSIGN(b->listener_, Socket::listen(bindAddr, false));
  TEMPO_ASSIGN(SockAddr oob, b->listener_.localAddress());

  // Rendezvous: the root's challenge, a hello proved against it, then the table of all
  // ranks, proved against our hello's nonce.
  // From the address we claim: the root checks that the two agree.
  TEMPO_ASSIGN(Socket root, Socket::connect(id.root, deadline, &oob));
  // The root sends its challenge on accepting: a connection the kernel completed for a root
  // whose process is stopped or hung gets none.
  const int64_t timeoutNs = peerTimeoutNs();
  const Deadline challengeBy = timeoutNs > 0 ? deadline.within(timeoutNs) : deadline;
  Result<std::vector<uint8_t>> challengeMsg = recvMessage(root, MsgType::Challenge, kNonceBytes, challengeBy);
  if (!challengeMsg.ok() && challengeBy.expired() && !deadline.expired())
    return fail(Status::RemoteError,
                "bootstrap: rank %d got no challenge from the root at %s within %ld s (TEMPO_PEER_TIMEOUT) of "
                "connecting: the root's process is stopped, hung or unreachable",
                rank, id.root.toString().c_str(), long(param::PeerTimeout()));
  TEMPO_TRY(challengeMsg.status());
  TEMPO_ASSIGN(Nonce challenge, decodeChallenge(*challengeMsg));
  Hello hello;
  hello.nonce = freshNonce();
  hello.nranks = nranks;
  hello.rank = rank;
  hello.info = localPeerInfo(oob);
  std::vector<uint8_t> helloMsg = encodeHello(hello);
  seal(helloMsg, b->secret_, ProofLabel::Hello, challenge);
  TEMPO_TRY(sendBytes(root, helloMsg, deadline));
  uint32_t maxTable = uint32_t(64 + size_t(nranks) * 128 + kProofBytes);
  TEMPO_ASSIGN(std::vector<uint8_t> payload, awaitTable(root, id.root, rank, maxTable, deadline));
  root.close();  // the root lingers until this end closes, so that no keepalive is left unread
  if (!verifySealed(payload, b->secret_, ProofLabel::Table, hello.nonce))
    return fail(Status::SystemError, "bootstrap: the rank table from %s is not proved with this job's secret "
                "(another job's root, or a forgery)", id.root.toString().c_str());
  TEMPO_ASSIGN(Table table, decodeTable(payload, nranks));
  b->nonce_ = table.commNonce;
  b->peers_ = std::move(table.peers);
  TEMPO_TRY(b->connectRing(deadline));
  TEMPO_TRY(b->startHeartbeats(deadline));
  return b;
}

Bootstrap::~Bootstrap() { stopHeartbeats(); }

Status Bootstrap::startHeartbeats(Deadline deadline) {
  if (nranks_ == 1) return Status::Success;
  TEMPO_TRY(linkNeighbours(PeerHello::kHeartbeat, &hbNext_, &hbPrev_, deadline));
  hbWake_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (hbWake_ < 0) return fail(Status::SystemError, "bootstrap: eventfd failed: %s", strerror(errno));
  const int64_t timeoutNs = peerTimeoutNs(), periodNs = beatPeriodNs(timeoutNs);
  hbThread_ = std::thread([this, periodNs, timeoutNs] { heartbeatLoop(periodNs, timeoutNs); });
  return Status::Success;
}

void Bootstrap::stopHeartbeats() {
  if (hbThread_.joinable()) {
    const uint64_t one = 1;
    (void)!::write(hbWake_, &one, sizeof one);
    hbThread_.join();
  }
  if (hbWake_ >= 0) ::close(hbWake_);
  hbWake_ = -1;
}

// Phases of one pass: send a heartbeat when one is due (never blocking: a successor that
// does not read is the successor's watcher's business); wait for the predecessor's bytes,
// the next send or the wake-up; drain what arrived (any byte is a heartbeat); judge. What
// arrived is always read before the judging, so a process that was itself stopped does not
// blame its neighbour on waking. A closed connection ends the watching: the ring sockets
// tell an exit or a clean departure from a failure.
void Bootstrap::heartbeatLoop(int64_t periodNs, int64_t timeoutNs) {
  int64_t now = nowNs(), lastHeard = now, nextSend = now;
  bool watching = true;
  for (;;) {
    now = nowNs();
    if (now >= nextSend) {
      const char beat = 'h';
      (void)::send(hbNext_.fd(), &beat, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
      nextSend = now + periodNs;
    }
    pollfd p[2] = {{hbWake_, POLLIN, 0}, {watching ? hbPrev_.fd() : -1, POLLIN, 0}};
    const int ms = int(std::max<int64_t>(1, (nextSend - now + 999999) / 1000000));
    if (::poll(p, 2, ms) < 0 && errno != EINTR) return;
    if (p[0].revents) return;
    if (watching && p[1].revents) {
      char buf[256];
      ssize_t n;
      while ((n = ::recv(hbPrev_.fd(), buf, sizeof buf, MSG_DONTWAIT)) > 0) lastHeard = nowNs();
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) watching = false;
    }
    if (watching && timeoutNs > 0 && nowNs() - lastHeard > timeoutNs && !prevSilent_.load()) {
      TEMPO_WARN("bootstrap: rank %d has had no heartbeat from rank %d for %ld s (TEMPO_PEER_TIMEOUT): that "
                 "process is stopped, hung or unreachable", rank_, (rank_ + nranks_ - 1) % nranks_,
                 long((nowNs() - lastHeard) / 1000000000));
      prevSilent_.store(true, std::memory_order_release);
    }
  }
}

std::vector<uint8_t> Bootstrap::peerHello(uint32_t purpose) const {
  PeerHello h;
  h.nonce = freshNonce();
  h.commNonce = nonce_;
  h.from = rank_;
  h.purpose = purpose;
  std::vector<uint8_t> msg = encodePeerHello(h);
  seal(msg, secret_, ProofLabel::PeerHello, {});
  return msg;
}

// Connect forward, then accept from behind: every rank's connect completes in its
// successor's backlog, so no rank waits on one that waits on it.
Status Bootstrap::linkNeighbours(uint32_t purpose, Socket* next, Socket* prev, Deadline deadline) {
  const int nextRank = (rank_ + 1) % nranks_, prevRank = (rank_ + nranks_ - 1) % nranks_;
  // Every rank in the table listened before it joined: a refusal means it is gone.
  TEMPO_ASSIGN(*next, Socket::connect(peers_[size_t(nextRank)].oob, deadline, &peers_[size_t(rank_)].oob, true));
  TEMPO_TRY(sendBytes(*next, peerHello(purpose), deadline));
  // A predecessor that has not connected within TEMPO_PEER_TIMEOUT is as silent as one
  // that stopped sending heartbeats.
  const int64_t timeoutNs = peerTimeoutNs();
  TEMPO_ASSIGN(*prev, acceptFrom(prevRank, purpose, timeoutNs > 0 ? deadline.within(timeoutNs) : deadline));
  return Status::Success;
}

Status Bootstrap::connectRing(Deadline deadline) {
  if (nranks_ == 1) return Status::Success;
  return linkNeighbours(PeerHello::kRing, &next_, &prev_, deadline);
}

Result<Socket> Bootstrap::acceptFrom(int from, uint32_t purpose, Deadline deadline, int* sender) {
  const int64_t handshakeNs = param::HandshakeTimeout() * 1000000000;
  for (;;) {
    SockAddr addr;
    Result<Socket> s = listener_.accept(deadline, &addr);
    if (!s.ok()) {
      if (s.status() == Status::Timeout && from < 0)
        return fail(Status::SystemError, "bootstrap: rank %d timed out waiting for a peer to connect", rank_);
      if (s.status() == Status::Timeout)
        return fail(Status::SystemError,
                    "bootstrap: rank %d timed out waiting for rank %d to connect (within TEMPO_PEER_TIMEOUT=%ld s and "
                    "the init deadline: its process exited or hangs?)",
                    rank_, from, long(param::PeerTimeout()));
      return s.status();
    }
    Deadline hs = Deadline::after(handshakeNs);
    Result<std::vector<uint8_t>> msg = recvMessage(*s, MsgType::PeerHello, kMaxHelloBytes, hs);
    if (!msg.ok()) continue;
    Result<PeerHello> ph = decodePeerHello(*msg);
    if (!ph.ok() || !verifySealed(*msg, secret_, ProofLabel::PeerHello, {}) || ph->commNonce != nonce_ ||
        ph->purpose != purpose || (from >= 0 ? ph->from != from : ph->from < 0 || ph->from >= nranks_) ||
        !replays_.firstUse(ph->nonce)) {
      TEMPO_WARN_RATELIMITED(1000, "bootstrap: rank %d dropped an unauthenticated connection from %s", rank_,
                             addr.toString().c_str());
      continue;
    }
    // An authenticated hello from another address than the table gives its rank: someone
    // who holds the secret is speaking for a rank it is not.
    if (const SockAddr& claimed = peers_[size_t(ph->from)].oob;
        claimed.family() == addr.family() && !claimed.sameHost(addr)) {
      TEMPO_WARN_RATELIMITED(1000, "bootstrap: rank %d dropped a connection from %s claiming to be rank %d (at %s)",
                             rank_, addr.toString().c_str(), ph->from, claimed.toString().c_str());
      continue;
    }
    if (sender) *sender = ph->from;
    return std::move(s.value());
  }
}

Status Bootstrap::sendDirect(int to, std::span<const uint8_t> payload, Deadline deadline) {
  TEMPO_ASSIGN(Socket s, Socket::connect(peers_[size_t(to)].oob, deadline, &peers_[size_t(rank_)].oob, true));
  TEMPO_TRY(sendBytes(s, peerHello(PeerHello::kDirect), deadline));
  return sendBytes(s, encodeDirect(payload), deadline);
}

Result<std::vector<uint8_t>> Bootstrap::recvDirect(int from, uint32_t maxLength, Deadline deadline, int* sender) {
  TEMPO_ASSIGN(Socket s, acceptFrom(from, PeerHello::kDirect, deadline, sender));
  return recvMessage(s, MsgType::Direct, maxLength, deadline);
}

Status Bootstrap::allGather(std::span<std::byte> data, size_t blockBytes, Deadline deadline) {
  if (data.size() != blockBytes * size_t(nranks_))
    return fail(Status::InternalError, "bootstrap allGather: buffer size mismatch");
  std::lock_guard<std::mutex> lock(ringMu_);
  // Step s: send block (rank - s) to the successor, receive block (rank - s - 1).
  for (int s = 0; s < nranks_ - 1; ++s) {
    size_t sendBlock = size_t((rank_ - s + nranks_) % nranks_);
    size_t recvBlock = size_t((rank_ - s - 1 + nranks_) % nranks_);
    TEMPO_TRY(exchange(next_, data.subspan(sendBlock * blockBytes, blockBytes), prev_,
                       data.subspan(recvBlock * blockBytes, blockBytes), deadline, &prevSilent_));
  }
  return Status::Success;
}

Status Bootstrap::barrier(Deadline deadline) {
  std::vector<std::byte> tokens(static_cast<size_t>(nranks_));
  return allGather(tokens, 1, deadline);
}

void Bootstrap::sendToNeighbours(const std::vector<uint8_t>& frame) {
  auto bytes = std::as_bytes(std::span(frame));
  Deadline soon = Deadline::after(200000000);
  (void)next_.sendAll(bytes, soon);
  if (prev_.fd() != next_.fd()) (void)prev_.sendAll(bytes, soon);
}

void Bootstrap::notifyNeighbours(Status status, const std::string& reason) {
  std::lock_guard<std::mutex> lock(ringMu_);
  if (notified_ || nranks_ <= 1) return;
  notified_ = true;
  sendToNeighbours(encodeAbort(ErrorReply{int32_t(status), reason}));
}

void Bootstrap::announceLeave(uint64_t collectives) {
  std::lock_guard<std::mutex> lock(ringMu_);
  if (notified_ || nranks_ <= 1) return;
  notified_ = true;
  sendToNeighbours(encodeLeave(collectives));
}

Status Bootstrap::pollNotice(std::string* reason) {
  if (nranks_ <= 1) return Status::Success;
  // Another thread is using the ring (an all-gather, a notice, or a poll): nothing to
  // report this time; the next poll will see it.
  std::unique_lock<std::mutex> lock(ringMu_, std::try_to_lock);
  if (!lock.owns_lock()) return Status::Success;
  const Socket* sides[2] = {&next_, &prev_};
  for (int side = 0; side < 2; ++side) {
    const Socket* s = sides[side];
    if (!s->valid()) continue;
    pollfd p{s->fd(), POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0 || !(p.revents & POLLIN)) continue;
    std::byte peek;
    if (::recv(s->fd(), &peek, 1, MSG_PEEK | MSG_DONTWAIT) != 1) continue;  // closed: neighbourGone()
    Deadline soon = Deadline::after(500000000);
    std::array<uint8_t, kHeaderBytes> hdr;
    TEMPO_TRY(s->recvAll(std::as_writable_bytes(std::span(hdr)), soon));
    TEMPO_ASSIGN(Header h, decodeHeader(hdr, kMaxAbortBytes));
    std::vector<uint8_t> payload(h.length);
    TEMPO_TRY(s->recvAll(std::as_writable_bytes(std::span(payload)), soon));
    if (h.type == MsgType::Leave) {
      TEMPO_ASSIGN(uint64_t collectives, decodeLeave(payload));
      // With two ranks both sides are one connection to one neighbour.
      for (int other = 0; other < 2; ++other)
        if (other == side || sides[other]->fd() == s->fd()) leftAfter_[other].store(collectives);
      continue;
    }
    if (h.type != MsgType::Abort)
      return fail(Status::InternalError, "bootstrap: unexpected message type %d from a ring neighbour", int(h.type));
    TEMPO_ASSIGN(ErrorReply e, decodeError(payload));
    *reason = e.reason;
    return e.status > 0 && e.status <= int32_t(Status::Timeout) ? Status(e.status) : Status::RemoteError;
  }
  return Status::Success;
}

void Bootstrap::shutdown() {
  std::lock_guard<std::mutex> lock(ringMu_);
  for (const Socket* s : {&next_, &prev_, &listener_, &hbNext_, &hbPrev_})
    if (s->valid()) ::shutdown(s->fd(), SHUT_RDWR);
}

bool Bootstrap::neighbourGone() const {
  if (nranks_ <= 1) return false;
  const Socket* sides[2] = {&next_, &prev_};
  for (int side = 0; side < 2; ++side) {
    if (leftAfter_[side].load() != kStayed || !sides[side]->peerClosed()) continue;
    // Bytes still to read may be the neighbour's Leave notice: pollNotice() reads them first.
    std::byte peek;
    if (::recv(sides[side]->fd(), &peek, 1, MSG_PEEK | MSG_DONTWAIT) != 1) return true;
  }
  return false;
}

std::optional<Bootstrap::Departure> Bootstrap::neighbourLeft() const {
  std::optional<Departure> first;
  const int ranks[2] = {(rank_ + 1) % nranks_, (rank_ + nranks_ - 1) % nranks_};
  for (int side = 0; side < 2; ++side) {
    uint64_t n = leftAfter_[side].load();
    if (n != kStayed && (!first || n < first->collectives)) first = Departure{ranks[side], n};
  }
  return first;
}

}  // namespace tempo::bootstrap
