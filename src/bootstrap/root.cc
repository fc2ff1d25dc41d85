#include "src/bootstrap/root.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "src/bootstrap/auth.h"
#include "src/bootstrap/liveness.h"
#include "src/core/host.h"
#include "src/core/log.h"
#include "src/core/param.h"

namespace tempo::bootstrap {
namespace {

// One incoming connection that has not yet delivered a complete, valid hello.
struct Pending {
  Socket sock;
  SockAddr from;
  Nonce challenge{};  // sent on accepting; the hello must be proved against it
  Deadline deadline = Deadline::never();
  std::vector<uint8_t> buf;  // header, then payload once the header is valid
  size_t want = kHeaderBytes;
};

// A rank admitted with a valid hello, waiting for its table.
struct Member {
  Socket sock;
  PeerInfo info;
  Nonce nonce{};  // its hello's: the table it gets is proved against it
  int64_t heard = 0;  // when its last keepalive arrived
  uint8_t rx[kHeaderBytes] = {};  // a keepalive read in part
  size_t rxLen = 0;
};

class Root {
 public:
  Root(Socket listener, const Secret& secret) : listener_(std::move(listener)), secret_(secret) {}
  void run();

 private:
  void acceptAll();
  // Reads what is available; returns false when the connection must be dropped.
  bool readSome(Pending& p);
  // Validates a complete hello; takes the socket when it is accepted.
  void admit(Pending& p);
  void reject(Pending& p, Status s, const std::string& reason);
  void sendTable();
  // Keepalives to every admitted rank, when one is due.
  void beat();
  // Reads what an admitted rank sent, which may only be keepalives. Returns why the rank is
  // gone (nullptr: it is not).
  const char* readKeepalives(Member& m);
  // Admitted rank `rank` is gone (`why` says how): tells every other admitted rank, and
  // from then on every rank that joins, why the job cannot form, so that their inits fail
  // with the reason instead of waiting for TEMPO_INIT_TIMEOUT.
  void abandonJob(int rank, const char* why);
  // The job cannot form: records `why` and sends it with `status` to every admitted rank but
  // `skip`, then retires their connections.
  void endJob(Status status, const char* why, int skip);
  // Closes a connection whose last message has been sent without losing it: a socket closed
  // with unread bytes (a rank's keepalives) resets the connection, which can discard what
  // was still on its way. The root half-closes it and reads until the rank closes its end.
  void retire(Socket& s);
  // Discards what retired connections sent; closes those their rank has closed, and those
  // retired a handshake timeout ago.
  void drainRetired(int timeoutMs);

  Socket listener_;
  Secret secret_;
  std::vector<std::unique_ptr<Pending>> pending_;
  int nranks_ = -1;
  int joined_ = 0;
  std::vector<Member> ranks_;
  struct Retired {
    Socket sock;
    Deadline until;
  };
  std::vector<Retired> retired_;
  std::string failed_;  // why the job can no longer form (empty: it still can)
  int64_t handshakeNs_ = 0;
  int64_t timeoutNs_ = 0, periodNs_ = 0, nextBeat_ = 0;  // liveness.h
  const std::vector<uint8_t> keepalive_ = encodeKeepalive();
};

void Root::run() {
  const long initTimeoutS = long(param::InitTimeout());  // parameters are read once, here
  const Deadline deadline = Deadline::afterSeconds(initTimeoutS);
  handshakeNs_ = param::HandshakeTimeout() * 1000000000;
  timeoutNs_ = peerTimeoutNs();
  periodNs_ = beatPeriodNs(timeoutNs_);
  std::vector<pollfd> fds;
  while (nranks_ < 0 || joined_ < nranks_) {
    if (deadline.expired()) {
      char why[160];
      snprintf(why, sizeof why, "the bootstrap root timed out after %ld s (TEMPO_INIT_TIMEOUT) with %d of %d ranks joined",
               initTimeoutS, joined_, nranks_);
      TEMPO_WARN("%s", why);
      endJob(Status::SystemError, why, -1);
      break;
    }
    beat();
    fds.clear();
    fds.push_back({listener_.fd(), POLLIN, 0});
    for (auto& p : pending_) fds.push_back({p->sock.fd(), POLLIN, 0});
    // Admitted ranks send only keepalives until their table. One that closes its
    // connection, misbehaves or falls silent is gone, and the job can no longer form.
    const size_t admittedAt = fds.size();
    std::vector<int> admitted;
    for (size_t r = 0; r < ranks_.size(); ++r)
      if (ranks_[r].sock.valid()) {
        fds.push_back({ranks_[r].sock.fd(), POLLIN, 0});
        admitted.push_back(int(r));
      }
    const int64_t untilBeatMs = (nextBeat_ - nowNs() + 999999) / 1000000;
    int rc = ::poll(fds.data(), fds.size(), int(std::clamp<int64_t>(untilBeatMs, 1, 100)));
    if (rc < 0 && errno != EINTR) {
      TEMPO_WARN("bootstrap root: poll failed: %s", strerror(errno));
      return;
    }
    // Read before judging, so that a root that was itself stopped blames no one on waking.
    char silent[160];
    for (size_t i = 0; i < admitted.size() && failed_.empty(); ++i) {
      Member& m = ranks_[size_t(admitted[i])];
      const char* why = fds[admittedAt + i].revents ? readKeepalives(m) : nullptr;
      if (!why && timeoutNs_ > 0 && nowNs() - m.heard > timeoutNs_) {
        snprintf(silent, sizeof silent,
                 "sent nothing for %ld s (TEMPO_PEER_TIMEOUT) during init: its process is stopped, hung or unreachable",
                 long((nowNs() - m.heard) / 1000000000));
        why = silent;
      }
      if (why) abandonJob(admitted[i], why);
    }
    // Service the connections polled above; ones accepted just now wait for the next round.
    size_t polled = admittedAt - 1;
    if (fds[0].revents) acceptAll();
    std::vector<std::unique_ptr<Pending>> still;
    still.reserve(pending_.size());
    for (size_t i = 0; i < pending_.size(); ++i) {
      Pending& p = *pending_[i];
      bool readable = i < polled && fds[i + 1].revents;
      bool keep = !p.deadline.expired() && (!readable || readSome(p));
      if (keep && p.want > kHeaderBytes && p.buf.size() == p.want) {
        admit(p);
        keep = false;
      }
      if (keep) still.push_back(std::move(pending_[i]));
    }
    pending_.swap(still);
    if (!retired_.empty()) drainRetired(0);
  }
  listener_.close();  // no one else may join; a rank's claimed address that was the root's now refuses
  if (failed_.empty()) sendTable();
  // Ranks close their end once they have the table or the error.
  while (!retired_.empty()) drainRetired(100);
}

void Root::retire(Socket& s) {
  if (!s.valid()) return;
  ::shutdown(s.fd(), SHUT_WR);
  retired_.push_back({std::move(s), Deadline::after(handshakeNs_)});
}

void Root::drainRetired(int timeoutMs) {
  std::vector<pollfd> fds;
  for (const Retired& r : retired_) fds.push_back({r.sock.fd(), POLLIN, 0});
  if (::poll(fds.data(), fds.size(), timeoutMs) < 0 && errno != EINTR) fds.assign(fds.size(), {-1, 0, 0});
  std::vector<Retired> open;
  for (size_t i = 0; i < retired_.size(); ++i) {
    char buf[256];
    ssize_t n = 1;
    if (fds[i].revents)
      while ((n = ::recv(fds[i].fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
      }
    const bool closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
    if (!closed && !retired_[i].until.expired()) open.push_back(std::move(retired_[i]));
  }
  retired_.swap(open);
}

void Root::acceptAll() {
  for (;;) {
    SockAddr from;
    Result<Socket> s = listener_.accept(Deadline::after(0), &from);
    if (!s.ok()) return;
    auto p = std::make_unique<Pending>();
    p->sock = std::move(s.value());
    p->from = from;
    p->deadline = Deadline::after(handshakeNs_);
    p->challenge = freshNonce();
    // A few bytes into an empty socket buffer: does not block.
    const std::vector<uint8_t> challenge = encodeChallenge(p->challenge);
    if (!ok(p->sock.sendAll(std::as_bytes(std::span(challenge)), Deadline::after(handshakeNs_)))) continue;
    pending_.push_back(std::move(p));
  }
}

bool Root::readSome(Pending& p) {
  uint8_t tmp[512];
  size_t need = p.want - p.buf.size();
  ssize_t n = ::recv(p.sock.fd(), tmp, need < sizeof tmp ? need : sizeof tmp, 0);
  if (n == 0) return false;
  if (n < 0) return errno == EAGAIN || errno == EINTR;
  p.buf.insert(p.buf.end(), tmp, tmp + n);
  if (p.want == kHeaderBytes && p.buf.size() == kHeaderBytes) {
    Result<Header> h = decodeHeader(std::span<const uint8_t, kHeaderBytes>(p.buf.data(), kHeaderBytes),
                                    kMaxHelloBytes);
    if (!h.ok() || h->type != MsgType::Hello || h->length == 0) {
      TEMPO_WARN_RATELIMITED(1000, "bootstrap root: dropped a connection from %s that did not send a hello",
                             p.from.toString().c_str());
      return false;
    }
    p.want = kHeaderBytes + h->length;
  }
  return true;
}

void Root::reject(Pending& p, Status s, const std::string& reason) {
  TEMPO_WARN("bootstrap root: rejected a rank from %s: %s", p.from.toString().c_str(), reason.c_str());
  std::vector<uint8_t> msg = encodeError({int32_t(s), reason});
  (void)p.sock.sendAll(std::as_bytes(std::span(msg)), Deadline::after(handshakeNs_));
  retire(p.sock);
}

void Root::admit(Pending& p) {
  const std::span<const uint8_t> payload = std::span<const uint8_t>(p.buf).subspan(kHeaderBytes);
  Result<Hello> h = decodeHello(payload);
  if (!h.ok() || !verifySealed(payload, secret_, ProofLabel::Hello, p.challenge)) {
    TEMPO_WARN_RATELIMITED(1000, "bootstrap root: dropped a connection from %s without the job secret",
                           p.from.toString().c_str());
    return;
  }
  char why[256];
  if (h->protocol != kProtocolVersion) {
    snprintf(why, sizeof why, "protocol version %u does not match the root's %u", h->protocol, kProtocolVersion);
    return reject(p, Status::InvalidUsage, why);
  }
  if (h->nranks <= 0 || h->nranks > int(kMaxTableRanks)) {
    snprintf(why, sizeof why, "nranks %d is out of range", h->nranks);
    return reject(p, Status::InvalidArgument, why);
  }
  if (nranks_ < 0) {
    nranks_ = h->nranks;
    ranks_.resize(size_t(nranks_));
  }
  if (h->nranks != nranks_) {
    snprintf(why, sizeof why, "rank %d reports nranks %d but the communicator has %d ranks", h->rank,
             h->nranks, nranks_);
    return reject(p, Status::InvalidArgument, why);
  }
  if (h->rank < 0 || h->rank >= nranks_) {
    snprintf(why, sizeof why, "rank %d is outside [0, %d)", h->rank, nranks_);
    return reject(p, Status::InvalidArgument, why);
  }
  // Ranks connect from the address they claim (Socket::connect's source): a claim that
  // the connection contradicts would send the other ranks' traffic elsewhere.
  if (h->info.oob.family() == p.from.family() && !h->info.oob.sameHost(p.from)) {
    snprintf(why, sizeof why, "rank %d claims the address %s but connected from %s", h->rank,
             h->info.oob.toString().c_str(), p.from.toString().c_str());
    return reject(p, Status::InvalidUsage, why);
  }
  if (!failed_.empty()) {  // the job can no longer form: say why, and count the rank told
    reject(p, Status::RemoteError, failed_);
    ++joined_;
    return;
  }
  Member& m = ranks_[size_t(h->rank)];
  if (m.sock.valid()) {
    snprintf(why, sizeof why, "rank %d joined twice", h->rank);
    return reject(p, Status::InvalidUsage, why);
  }
  m.sock = std::move(p.sock);
  m.info = h->info;
  m.nonce = h->nonce;
  m.heard = nowNs();
  ++joined_;
  TEMPO_TRACE(log::Bootstrap, "bootstrap root: rank %d joined (%d/%d)", h->rank, joined_, nranks_);
}

void Root::beat() {
  const int64_t now = nowNs();
  if (now < nextBeat_) return;
  nextBeat_ = now + periodNs_;
  for (const Member& m : ranks_)  // a few bytes; a rank that does not read them judges itself
    if (m.sock.valid()) (void)::send(m.sock.fd(), keepalive_.data(), keepalive_.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

const char* Root::readKeepalives(Member& m) {
  for (;;) {
    ssize_t n = ::recv(m.sock.fd(), m.rx + m.rxLen, kHeaderBytes - m.rxLen, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
      return "closed its connection to the bootstrap root during init (its process exited?)";
    if (n < 0) return nullptr;
    m.rxLen += size_t(n);
    if (m.rxLen < kHeaderBytes) continue;
    m.rxLen = 0;
    Result<Header> h = decodeHeader(std::span<const uint8_t, kHeaderBytes>(m.rx), 0);
    if (!h.ok() || h->type != MsgType::Keepalive) return "sent the bootstrap root a message other than a keepalive";
    m.heard = nowNs();
  }
}

void Root::abandonJob(int rank, const char* what) {
  char why[256];
  snprintf(why, sizeof why, "rank %d %s", rank, what);
  TEMPO_WARN("bootstrap root: %s; ending the job's init (%d of %d ranks had joined)", why, joined_, nranks_);
  endJob(Status::RemoteError, why, rank);
}

void Root::endJob(Status status, const char* why, int skip) {
  failed_ = why;
  const std::vector<uint8_t> msg = encodeError({int32_t(status), why});
  for (size_t r = 0; r < ranks_.size(); ++r) {
    Socket& s = ranks_[r].sock;
    if (s.valid() && int(r) != skip) (void)s.sendAll(std::as_bytes(std::span(msg)), Deadline::after(handshakeNs_));
    retire(s);
  }
}

void Root::sendTable() {
  Table t;
  if (!secureRandom(&t.commNonce, sizeof t.commNonce)) t.commNonce = nowNs() ^ processToken();
  t.peers.reserve(ranks_.size());
  for (const Member& m : ranks_) t.peers.push_back(m.info);
  // One table for all, each rank's copy ending in a proof bound to that rank's nonce: the
  // body is hashed once, and the proof sent after it.
  std::vector<uint8_t> msg = encodeTable(t);
  const Digest digest = bodyDigest(std::span<const uint8_t>(msg).subspan(kHeaderBytes));
  const std::span<const uint8_t> body = std::span<const uint8_t>(msg).first(msg.size() - kProofBytes);
  for (int r = 0; r < nranks_; ++r) {
    Socket& sock = ranks_[size_t(r)].sock;
    const Proof proof = prove(secret_, ProofLabel::Table, ranks_[size_t(r)].nonce, digest);
    const Deadline d = Deadline::after(handshakeNs_);
    Status s = sock.sendAll(std::as_bytes(body), d);
    if (ok(s)) s = sock.sendAll(std::as_bytes(std::span(proof)), d);
    if (!ok(s)) TEMPO_WARN("bootstrap root: could not send the rank table to rank %d", r);
    retire(sock);
  }
  TEMPO_INFO(log::Bootstrap, "bootstrap root: %d ranks joined, table sent", nranks_);
}

}  // namespace

Result<SockAddr> startRoot(const SockAddr& bindAddr, const Secret& secret, bool fixedPort) {
  TEMPO_ASSIGN(Socket listener, Socket::listen(bindAddr, fixedPort));
  TEMPO_ASSIGN(SockAddr bound, listener.localAddress());
  auto root = std::make_unique<Root>(std::move(listener), secret);
  std::thread([r = std::move(root)]() mutable { r->run(); }).detach();
  TEMPO_INFO(log::Bootstrap, "bootstrap root listening on %s", bound.toString().c_str());
  return bound;
}

}  // namespace tempo::bootstrap
