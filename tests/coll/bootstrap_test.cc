// The bootstrap under hostile input: connections to the root that send junk, a hello
// proved with another secret or against another connection's challenge, an oversized
// length or nothing at all, or come as a flood, are dropped, and the real ranks still
// initialise; a peer's
// listener refuses a hello it has admitted before; and neither accepts a rank whose
// connection comes from another address than the one it claims.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "rccl/rccl.h"
#include "src/bootstrap/auth.h"
#include "src/bootstrap/bootstrap.h"
#include "src/bootstrap/socket.h"
#include "src/bootstrap/wire.h"
#include "src/core/param.h"

namespace tempo::bootstrap {
namespace {

UniqueId decoded(const ncclUniqueId& id) {
  Result<UniqueId> u = decodeUniqueId(std::span<const uint8_t, kUniqueIdBytes>(
      reinterpret_cast<const uint8_t*>(id.internal), sizeof id.internal));
  EXPECT_TRUE(u.ok());
  return u.ok() ? u.value() : UniqueId{};
}

SockAddr rootOf(const ncclUniqueId& id) { return decoded(id).root; }

// Reads the challenge the root sends every connection it accepts.
Nonce challengeOf(const Socket& s) {
  uint8_t buf[kHeaderBytes + kNonceBytes];
  EXPECT_TRUE(ok(s.recvAll(std::as_writable_bytes(std::span(buf)), Deadline::afterSeconds(5))));
  Result<Nonce> n = decodeChallenge(std::span<const uint8_t>(buf).subspan(kHeaderBytes));
  EXPECT_TRUE(n.ok());
  return n.ok() ? n.value() : Nonce{};
}

// A hello for `rank` of `nranks` proved with `secret` against `challenge`.
std::vector<uint8_t> helloFor(int rank, int nranks, const SockAddr& oob, const Secret& secret, const Nonce& challenge) {
  Hello h;
  h.nonce = freshNonce();
  h.nranks = nranks;
  h.rank = rank;
  h.info.oob = oob;
  std::vector<uint8_t> m = encodeHello(h);
  seal(m, secret, ProofLabel::Hello, challenge);
  return m;
}

Socket connectTo(const SockAddr& a) {
  Result<Socket> s = Socket::connect(a, Deadline::afterSeconds(5));
  EXPECT_TRUE(s.ok()) << lastErrorMessage();
  return s.ok() ? std::move(s.value()) : Socket{};
}

void sendRaw(const Socket& s, const std::vector<uint8_t>& bytes) {
  (void)s.sendAll(std::as_bytes(std::span(bytes)), Deadline::afterSeconds(2));
}

// Overrides one parameter for a scope. A job's root reads its parameters once, as it
// starts: make the override before the job.
class Override {
 public:
  Override(param::Id id, const char* value) : id_(id) { param::overrideForTest(id, value); }
  ~Override() { param::overrideForTest(id_, nullptr); }
  Override(const Override&) = delete;
  Override& operator=(const Override&) = delete;

 private:
  param::Id id_;
};

// A new job: its root listening, its id decoded.
UniqueId newJob() {
  ncclUniqueId nid;
  EXPECT_EQ(ncclGetUniqueId(&nid), ncclSuccess);
  return decoded(nid);
}

// A connection the root admits as `rank` of `nranks` (it proves the job's secret), and
// which does nothing more unless the test makes it.
Socket joinAs(const UniqueId& id, int rank, int nranks) {
  Socket s = connectTo(id.root);
  sendRaw(s, helloFor(rank, nranks, id.root, id.secret, challengeOf(s)));
  return s;
}

TEST(BootstrapRoot, JunkConnectionsDoNotDisturbTheJob) {
  const Override handshakeTimeout(param::Id::HandshakeTimeout, "1");
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  SockAddr root = rootOf(id);

  std::vector<Socket> junk;
  // A connection that never sends anything (slowloris).
  junk.push_back(connectTo(root));
  // Random bytes.
  junk.push_back(connectTo(root));
  sendRaw(junk.back(), {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  // A valid header announcing a huge message.
  junk.push_back(connectTo(root));
  {
    std::vector<uint8_t> h(kHeaderBytes);
    encodeHeader(MsgType::Hello, 0x7fffffff, std::span<uint8_t, kHeaderBytes>(h.data(), kHeaderBytes));
    sendRaw(junk.back(), h);
  }
  // A well-formed hello proved with another secret, claiming rank 0.
  junk.push_back(connectTo(root));
  {
    Secret other = decoded(id).secret;
    other[0] ^= 1;
    sendRaw(junk.back(), helloFor(0, 2, root, other, challengeOf(junk.back())));
  }
  // A hello proved with the job's secret, but against another connection's challenge: what
  // replaying a recorded hello amounts to. The connection whose challenge it was sends nothing.
  junk.push_back(connectTo(root));
  const Nonce earlier = challengeOf(junk.back());
  junk.push_back(connectTo(root));
  (void)challengeOf(junk.back());
  sendRaw(junk.back(), helloFor(0, 2, root, decoded(id).secret, earlier));
  // A half-sent hello.
  junk.push_back(connectTo(root));
  {
    Hello h;
    h.nranks = 2;
    h.info.oob = root;
    std::vector<uint8_t> m = encodeHello(h);
    m.resize(m.size() / 2);
    sendRaw(junk.back(), m);
  }

  // A flood: 200 connections at once, half of them closed at once, half left open and silent.
  for (int i = 0; i < 200; ++i) {
    Socket s = connectTo(root);
    if (i % 2) junk.push_back(std::move(s));
  }

  // The real job.
  ncclComm_t comms[2] = {};
  ncclResult_t res[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) ranks.emplace_back([&, r] { res[r] = ncclCommInitRank(&comms[r], 2, id, r); });
  for (auto& t : ranks) t.join();
  ASSERT_EQ(res[0], ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(res[1], ncclSuccess) << ncclGetLastError(nullptr);

  // The dropped connections are closed by the root (after the challenge it sent each).
  for (Socket& s : junk) {
    char buf[256];
    Deadline d = Deadline::afterSeconds(10);
    bool closed = false;
    while (!d.expired() && !closed) {
      ssize_t n = ::recv(s.fd(), buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) continue;
      closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
      if (!closed) usleep(10000);
    }
    EXPECT_TRUE(closed) << "the root kept a junk connection open";
  }
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// A hello with the job's secret, properly proved, that claims an address it does not come
// from: the root refuses it with the reason (rank 0 stays free), and the real job initialises.
TEST(BootstrapRoot, AClaimedAddressThatIsNotTheSourceIsRefused) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  const SockAddr root = rootOf(id);
  // A documentation address (TEST-NET-2 or -3) that is not this host's.
  Result<SockAddr> elsewhere = SockAddr::parse("198.51.100.7:4000", true);
  if (elsewhere.ok() && elsewhere->sameHost(root)) elsewhere = SockAddr::parse("203.0.113.9:4000", true);
  ASSERT_TRUE(elsewhere.ok());
  const std::string claimed = elsewhere->toString();
  Socket forger = connectTo(root);
  sendRaw(forger, helloFor(0, 2, elsewhere.value(), decoded(id).secret, challengeOf(forger)));
  uint8_t header[kHeaderBytes];
  ASSERT_TRUE(ok(forger.recvAll(std::as_writable_bytes(std::span(header)), Deadline::afterSeconds(5))));
  Result<Header> h = decodeHeader(std::span<const uint8_t, kHeaderBytes>(header), 4096);
  ASSERT_TRUE(h.ok());
  ASSERT_EQ(h->type, MsgType::Error);
  std::vector<uint8_t> body(h->length);
  ASSERT_TRUE(ok(forger.recvAll(std::as_writable_bytes(std::span(body)), Deadline::afterSeconds(5))));
  Result<ErrorReply> e = decodeError(body);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->status, int32_t(Status::InvalidUsage));
  EXPECT_NE(e->reason.find("rank 0 claims the address " + claimed + " but connected from"), std::string::npos)
      << e->reason;

  ncclComm_t comms[2] = {};
  ncclResult_t res[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) ranks.emplace_back([&, r] { res[r] = ncclCommInitRank(&comms[r], 2, id, r); });
  for (auto& t : ranks) t.join();
  ASSERT_EQ(res[0], ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(res[1], ncclSuccess) << ncclGetLastError(nullptr);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// Ranks 0 and 2 of 3 join for real; rank 1 is a connection that proves the secret and then
// goes away, as a process that dies during init. `rank1First`: it joins and dies before the
// others join (the root has no table yet); otherwise it joins last, so the table goes out,
// and dies before connecting to anyone. Returns each real rank's status and error.
struct InitOutcome {
  Status status[2] = {Status::Success, Status::Success};
  std::string why[2];
};
InitOutcome initWithARankThatDies(bool rank1First) {
  const Override initTimeout(param::Id::InitTimeout, "120"), peerTimeout(param::Id::PeerTimeout, "2");
  const UniqueId id = newJob();
  InitOutcome o;
  auto dyingRank = [&] {
    Socket dying = joinAs(id, 1, 3);
    usleep(300000);  // admitted (and, joining last, sent the table)
  };
  if (rank1First) dyingRank();
  std::vector<std::thread> ranks;
  for (int r : {0, 2})
    ranks.emplace_back([&, r] {
      Result<std::unique_ptr<Bootstrap>> j = Bootstrap::join(id, r, 3, Deadline::afterSeconds(120));
      o.status[r / 2] = j.status();
      o.why[r / 2] = lastErrorMessage();
    });
  if (!rank1First) {
    usleep(300000);  // ranks 0 and 2 have joined
    dyingRank();
  }
  for (auto& t : ranks) t.join();
  return o;
}

// Before the table: the root sees the connection close and tells every rank that joins,
// whose init fails with the reason at once instead of at TEMPO_INIT_TIMEOUT (120 s here).
TEST(BootstrapRoot, ARankThatDiesBeforeTheTableFailsTheOthersInit) {
  const InitOutcome o = initWithARankThatDies(true);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(o.status[i], Status::RemoteError) << "rank " << i * 2 << ": " << o.why[i];
    EXPECT_NE(o.why[i].find("rank 1 closed its connection to the bootstrap root during init"), std::string::npos)
        << o.why[i];
  }
}

// After the table: its ring predecessor's connection is refused (its listener is gone) and
// its successor waits for it no longer than TEMPO_PEER_TIMEOUT (2 s here), not the 120 s
// init deadline, unless the predecessor, failing first, has closed its own listener, which
// then refuses the successor at once.
TEST(BootstrapRoot, ARankThatDiesAfterTheTableFailsItsRingNeighboursInit) {
  const InitOutcome o = initWithARankThatDies(false);
  EXPECT_EQ(o.status[0], Status::RemoteError) << o.why[0];
  EXPECT_NE(o.why[0].find("refused the connection: the peer's listener is gone"), std::string::npos) << o.why[0];
  if (o.status[1] == Status::RemoteError) {
    EXPECT_NE(o.why[1].find("refused the connection: the peer's listener is gone"), std::string::npos) << o.why[1];
  } else {
    EXPECT_EQ(o.status[1], Status::SystemError) << o.why[1];
    EXPECT_NE(o.why[1].find("rank 2 timed out waiting for rank 1 to connect (within TEMPO_PEER_TIMEOUT=2 s"),
              std::string::npos)
        << o.why[1];
  }
}

// The types of the whole messages that arrive on `s` within `ms` milliseconds.
std::vector<MsgType> messagesWithin(const Socket& s, int ms) {
  std::vector<MsgType> types;
  const Deadline d = Deadline::after(int64_t(ms) * 1000000);
  uint8_t hdr[kHeaderBytes];
  while (ok(s.recvAll(std::as_writable_bytes(std::span(hdr)), d))) {
    Result<Header> h = decodeHeader(std::span<const uint8_t, kHeaderBytes>(hdr), 1 << 20);
    if (!h.ok()) break;
    std::vector<uint8_t> payload(h->length);
    if (!ok(s.recvAll(std::as_writable_bytes(std::span(payload)), d))) break;
    types.push_back(h->type);
  }
  return types;
}

size_t countOf(const std::vector<MsgType>& types, MsgType t) { return size_t(std::count(types.begin(), types.end(), t)); }

// An admitted rank whose process is stopped or hung keeps its connection open but sends no
// keepalive: with rank 3 still to come, the root ends the job after TEMPO_PEER_TIMEOUT (2 s
// here) instead of letting ranks 0 and 2 wait for the 120 s init deadline.
TEST(BootstrapRoot, AnAdmittedRankThatFallsSilentFailsTheOthersInit) {
  const Override peerTimeout(param::Id::PeerTimeout, "2");
  const UniqueId id = newJob();
  Socket silent = joinAs(id, 1, 4);
  Status status[2];
  std::string why[2];
  std::vector<std::thread> ranks;
  for (int r : {0, 2})
    ranks.emplace_back([&, r] {
      status[r / 2] = Bootstrap::join(id, r, 4, Deadline::afterSeconds(120)).status();
      why[r / 2] = lastErrorMessage();
    });
  for (auto& t : ranks) t.join();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(status[i], Status::RemoteError) << "rank " << i * 2 << ": " << why[i];
    EXPECT_NE(why[i].find("rank 1 sent nothing for 2 s (TEMPO_PEER_TIMEOUT) during init"), std::string::npos)
        << why[i];
  }
  // The silent rank was sent keepalives all along (one every half second here) but not the
  // error, as the rank judged gone, and the root closed its end of the connection.
  const std::vector<MsgType> got = messagesWithin(silent, 1000);
  EXPECT_GE(countOf(got, MsgType::Keepalive), 2u);
  EXPECT_EQ(countOf(got, MsgType::Error), 0u) << "the rank judged gone is not told";
  EXPECT_TRUE(silent.peerClosed());
}

// A rank that keeps sending keepalives is waited for however long the others take (3 s,
// beyond TEMPO_PEER_TIMEOUT), and gets its table.
TEST(BootstrapRoot, ARankThatSendsKeepalivesIsWaitedForBeyondThePeerTimeout) {
  const Override peerTimeout(param::Id::PeerTimeout, "2");
  const UniqueId id = newJob();
  Socket waiting = joinAs(id, 1, 2);
  std::vector<MsgType> got;
  for (int i = 0; i < 10; ++i) {  // 3 s of keepalives, one every 300 ms
    sendRaw(waiting, encodeKeepalive());
    const std::vector<MsgType> part = messagesWithin(waiting, 300);
    got.insert(got.end(), part.begin(), part.end());
  }
  EXPECT_GE(countOf(got, MsgType::Keepalive), 4u) << "the root beats every half second";
  EXPECT_EQ(countOf(got, MsgType::Error), 0u);
  // Rank 0 joins: both get the table. (Rank 0's init then fails: rank 1 does not go on.)
  std::thread rank0([&] { (void)Bootstrap::join(id, 0, 2, Deadline::afterSeconds(120)); });
  got = messagesWithin(waiting, 5000);
  EXPECT_EQ(countOf(got, MsgType::Table), 1u);
  waiting.close();
  rank0.join();
}

// A root whose process is stopped or hung keeps the connection open but sends no
// keepalive: a rank waiting for its table fails after TEMPO_PEER_TIMEOUT (2 s here), not
// at the 120 s init deadline, and kept proving itself alive meanwhile.
TEST(BootstrapRoot, ARootThatFallsSilentFailsTheRanksInit) {
  const Override peerTimeout(param::Id::PeerTimeout, "2");
  Result<SockAddr> any = selectInterfaceAddress();
  ASSERT_TRUE(any.ok());
  Result<Socket> listener = Socket::listen(*any, false);
  ASSERT_TRUE(listener.ok()) << lastErrorMessage();
  UniqueId id;
  id.root = listener->localAddress().value();
  id.secret[0] = 7;
  Status status = Status::Success;
  std::string why;
  std::thread rank([&] {
    status = Bootstrap::join(id, 0, 2, Deadline::afterSeconds(120)).status();
    why = lastErrorMessage();
  });
  Result<Socket> conn = listener->accept(Deadline::afterSeconds(10));
  ASSERT_TRUE(conn.ok()) << lastErrorMessage();
  sendRaw(*conn, encodeChallenge(Nonce{}));
  rank.join();
  EXPECT_EQ(status, Status::RemoteError) << why;
  EXPECT_NE(why.find("rank 0 has heard nothing from the root at " + id.root.toString()), std::string::npos) << why;
  const std::vector<MsgType> got = messagesWithin(*conn, 500);
  EXPECT_EQ(countOf(got, MsgType::Hello), 1u);
  EXPECT_GE(countOf(got, MsgType::Keepalive), 4u);
}

TEST(BootstrapRoot, WrongRankCountIsRefusedWithAReason) {
  const Override initTimeout(param::Id::InitTimeout, "10");
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t a = nullptr, b = nullptr;
  ncclResult_t ra = ncclInternalError, rb = ncclInternalError;
  std::string why;
  std::thread first([&] { ra = ncclCommInitRank(&a, 2, id, 0); });
  usleep(200000);  // let rank 0 fix nranks = 2 at the root
  std::thread second([&] {
    rb = ncclCommInitRank(&b, 3, id, 1);
    why = ncclGetLastError(nullptr);  // the last error is per thread
  });
  second.join();
  EXPECT_EQ(rb, ncclInvalidArgument);
  EXPECT_NE(why.find("reports nranks 3 but the communicator has 2"), std::string::npos) << why;
  // Rank 0 keeps waiting for a rank 1 that never comes, and gives up at the deadline (its
  // own, or the root's, which tells it why).
  first.join();
  EXPECT_EQ(ra, ncclSystemError);
}

TEST(BootstrapPeers, AHelloAdmittedOnceIsRefusedWhenReplayed) {
  ncclUniqueId nid;
  ASSERT_EQ(ncclGetUniqueId(&nid), ncclSuccess);
  const UniqueId id = decoded(nid);
  std::unique_ptr<Bootstrap> b[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      Result<std::unique_ptr<Bootstrap>> j = Bootstrap::join(id, r, 2, Deadline::afterSeconds(20));
      if (j.ok()) b[r] = std::move(j.value());
    });
  for (auto& t : ranks) t.join();
  ASSERT_TRUE(b[0] && b[1]) << lastErrorMessage();

  // What rank 0's sendDirect to rank 1 puts on the wire, as an eavesdropper records it.
  PeerHello h;
  h.nonce = freshNonce();
  h.commNonce = b[0]->commNonce();
  h.from = 0;
  h.purpose = PeerHello::kDirect;
  std::vector<uint8_t> wire = encodePeerHello(h);
  seal(wire, id.secret, ProofLabel::PeerHello, {});
  const std::vector<uint8_t> payload = {1, 2, 3};
  const std::vector<uint8_t> direct = encodeDirect(payload);
  wire.insert(wire.end(), direct.begin(), direct.end());
  const SockAddr listener = b[1]->peers()[1].oob;

  // The original is admitted.
  Socket first = connectTo(listener);
  sendRaw(first, wire);
  Result<std::vector<uint8_t>> got = b[1]->recvDirect(0, 64, Deadline::afterSeconds(5));
  ASSERT_TRUE(got.ok()) << lastErrorMessage();
  EXPECT_EQ(got.value(), payload);

  // The same bytes again, on a new connection, are dropped: rank 1 is still waiting when
  // its deadline passes.
  Socket replay = connectTo(listener);
  sendRaw(replay, wire);
  Result<std::vector<uint8_t>> again = b[1]->recvDirect(0, 64, Deadline::afterSeconds(2));
  EXPECT_FALSE(again.ok());

  // A fresh hello, properly proved, from another address than rank 0's (one that reaches
  // this host too: 127.0.0.2) is dropped as well.
  if (listener.family() == AF_INET) {
    PeerHello fresh = h;
    fresh.nonce = freshNonce();
    std::vector<uint8_t> forged = encodePeerHello(fresh);
    seal(forged, id.secret, ProofLabel::PeerHello, {});
    forged.insert(forged.end(), direct.begin(), direct.end());
    Result<SockAddr> other = SockAddr::parse("127.0.0.2:0", true);
    ASSERT_TRUE(other.ok());
    ASSERT_FALSE(other->sameHost(b[0]->peers()[0].oob));
    Result<Socket> s = Socket::connect(listener, Deadline::afterSeconds(5), &other.value());
    ASSERT_TRUE(s.ok()) << lastErrorMessage();
    sendRaw(s.value(), forged);
    EXPECT_FALSE(b[1]->recvDirect(0, 64, Deadline::afterSeconds(2)).ok()) << "a hello from " << other->toString();
  }

  // A fresh hello from the real rank 0 still gets through.
  std::thread send([&] { EXPECT_TRUE(ok(b[0]->sendDirect(1, payload, Deadline::afterSeconds(5)))); });
  got = b[1]->recvDirect(0, 64, Deadline::afterSeconds(5));
  send.join();
  ASSERT_TRUE(got.ok()) << lastErrorMessage();
  EXPECT_EQ(got.value(), payload);
}

}  // namespace
}  // namespace tempo::bootstrap
