#include "src/bootstrap/root.h"

#include <poll.h>

#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "src/bootstrap/auth.h"
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
  // The admitted rank on `fd` closed its connection: tells every other admitted rank, and
  // from then on every rank that joins, why the job cannot form, so that their inits fail
  // with the reason instead of waiting for TEMPO_INIT_TIMEOUT.
  void abandonJob(int fd);

  Socket listener_;
  Secret secret_;
  std::vector<std::unique_ptr<Pending>> pending_;
  int nranks_ = -1;
  int joined_ = 0;
  std::vector<Socket> rankSock_;
  std::vector<PeerInfo> peers_;
  std::vector<Nonce> rankNonce_;  // each rank's hello nonce, which its table is proved against
  std::string failed_;  // why the job can no longer form (empty: it still can)
  Deadline handshake_ = Deadline::never();
  int64_t handshakeNs_ = 0;
};

void Root::run() {
  Deadline deadline = Deadline::afterSeconds(param::InitTimeout());
  handshakeNs_ = param::HandshakeTimeout() * 1000000000;
  std::vector<pollfd> fds;
  while (nranks_ < 0 || joined_ < nranks_) {
    if (deadline.expired()) {
      TEMPO_WARN("bootstrap root: timed out after %lds with %d of %d ranks joined",
                 long(param::InitTimeout()), joined_, nranks_);
      return;
    }
    fds.clear();
    fds.push_back({listener_.fd(), POLLIN, 0});
    for (auto& p : pending_) fds.push_back({p->sock.fd(), POLLIN, 0});
    // Admitted ranks send nothing more until their table: a readable connection is one
    // whose process went away (or misbehaves), and the job can no longer form.
    const size_t admittedAt = fds.size();
    for (const Socket& r : rankSock_)
      if (r.valid()) fds.push_back({r.fd(), POLLIN, 0});
    int rc = ::poll(fds.data(), fds.size(), 100);
    if (rc < 0 && errno != EINTR) {
      TEMPO_WARN("bootstrap root: poll failed: %s", strerror(errno));
      return;
    }
    for (size_t i = admittedAt; i < fds.size(); ++i)
      if (fds[i].revents) {
        abandonJob(fds[i].fd);
        break;
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
  }
  if (failed_.empty()) sendTable();
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
    rankSock_.resize(size_t(nranks_));
    peers_.resize(size_t(nranks_));
    rankNonce_.resize(size_t(nranks_));
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
  if (rankSock_[size_t(h->rank)].valid()) {
    snprintf(why, sizeof why, "rank %d joined twice", h->rank);
    return reject(p, Status::InvalidUsage, why);
  }
  rankSock_[size_t(h->rank)] = std::move(p.sock);
  peers_[size_t(h->rank)] = h->info;
  rankNonce_[size_t(h->rank)] = h->nonce;
  ++joined_;
  TEMPO_TRACE(log::Bootstrap, "bootstrap root: rank %d joined (%d/%d)", h->rank, joined_, nranks_);
}

void Root::abandonJob(int fd) {
  int gone = -1;
  for (size_t r = 0; r < rankSock_.size(); ++r)
    if (rankSock_[r].fd() == fd) gone = int(r);
  char why[160];
  snprintf(why, sizeof why, "rank %d closed its connection to the bootstrap root during init (its process exited?)",
           gone);
  TEMPO_WARN("bootstrap root: %s; ending the job's init (%d of %d ranks had joined)", why, joined_, nranks_);
  failed_ = why;
  const std::vector<uint8_t> msg = encodeError({int32_t(Status::RemoteError), why});
  for (Socket& r : rankSock_) {
    if (r.valid() && r.fd() != fd) (void)r.sendAll(std::as_bytes(std::span(msg)), Deadline::after(handshakeNs_));
    r.close();
  }
}

void Root::sendTable() {
  Table t;
  if (!secureRandom(&t.commNonce, sizeof t.commNonce)) t.commNonce = nowNs() ^ processToken();
  t.peers = peers_;
  // One table for all, each rank's copy ending in a proof bound to that rank's nonce: the
  // body is hashed once, and the proof sent after it.
  std::vector<uint8_t> msg = encodeTable(t);
  const Digest digest = bodyDigest(std::span<const uint8_t>(msg).subspan(kHeaderBytes));
  const std::span<const uint8_t> body = std::span<const uint8_t>(msg).first(msg.size() - kProofBytes);
  for (int r = 0; r < nranks_; ++r) {
    const Proof proof = prove(secret_, ProofLabel::Table, rankNonce_[size_t(r)], digest);
    const Deadline d = Deadline::after(handshakeNs_);
    Status s = rankSock_[size_t(r)].sendAll(std::as_bytes(body), d);
    if (ok(s)) s = rankSock_[size_t(r)].sendAll(std::as_bytes(std::span(proof)), d);
    if (!ok(s)) TEMPO_WARN("bootstrap root: could not send the rank table to rank %d", r);
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
