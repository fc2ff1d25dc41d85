// The bootstrap root under hostile input: connections that send junk, a wrong secret, an
// oversized length or nothing at all are dropped, and the real ranks still initialise.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

#include "rccl/rccl.h"
#include "src/bootstrap/socket.h"
#include "src/bootstrap/wire.h"
#include "src/core/param.h"

namespace tempo::bootstrap {
namespace {

SockAddr rootOf(const ncclUniqueId& id) {
  Result<UniqueId> u = decodeUniqueId(std::span<const uint8_t, kUniqueIdBytes>(
      reinterpret_cast<const uint8_t*>(id.internal), sizeof id.internal));
  EXPECT_TRUE(u.ok());
  return u.ok() ? u->root : SockAddr{};
}

Socket connectTo(const SockAddr& a) {
  Result<Socket> s = Socket::connect(a, Deadline::afterSeconds(5));
  EXPECT_TRUE(s.ok()) << lastErrorMessage();
  return s.ok() ? std::move(s.value()) : Socket{};
}

void sendRaw(const Socket& s, const std::vector<uint8_t>& bytes) {
  (void)s.sendAll(std::as_bytes(std::span(bytes)), Deadline::afterSeconds(2));
}

TEST(BootstrapRoot, JunkConnectionsDoNotDisturbTheJob) {
  param::overrideForTest(param::Id::HandshakeTimeout, "1");
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
  // A well-formed hello with the wrong secret, claiming rank 0.
  junk.push_back(connectTo(root));
  {
    Hello h;
    h.secret[0] = 1;
    h.nranks = 2;
    h.rank = 0;
    h.info.oob = root;
    sendRaw(junk.back(), encodeHello(h));
  }
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

  // The real job.
  ncclComm_t comms[2] = {};
  ncclResult_t res[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) ranks.emplace_back([&, r] { res[r] = ncclCommInitRank(&comms[r], 2, id, r); });
  for (auto& t : ranks) t.join();
  param::overrideForTest(param::Id::HandshakeTimeout, nullptr);
  ASSERT_EQ(res[0], ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(res[1], ncclSuccess) << ncclGetLastError(nullptr);

  // The dropped connections are closed by the root.
  for (Socket& s : junk) {
    char c;
    Deadline d = Deadline::afterSeconds(10);
    bool closed = false;
    while (!d.expired() && !closed) {
      ssize_t n = ::recv(s.fd(), &c, 1, MSG_DONTWAIT);
      closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
      if (!closed) usleep(10000);
    }
    EXPECT_TRUE(closed) << "the root kept a junk connection open";
  }
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

TEST(BootstrapRoot, WrongRankCountIsRefusedWithAReason) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  param::overrideForTest(param::Id::InitTimeout, "10");
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
  // Rank 0 keeps waiting for a rank 1 that never comes, and gives up at its deadline.
  first.join();
  param::overrideForTest(param::Id::InitTimeout, nullptr);
  EXPECT_EQ(ra, ncclSystemError);
}

}  // namespace
}  // namespace tempo::bootstrap
