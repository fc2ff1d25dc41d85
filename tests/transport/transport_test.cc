// The transport contract (transports/transport.h), checked on every transport built:
// two endpoints of one communicator in this process, driven from one thread.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <thread>
#include <string>
#include <vector>

#include "src/core/clock.h"
#include "src/core/param.h"
#include "transports/loopback/loopback.h"
#include "transports/shm/shm.h"
#include "transports/transport.h"
#ifdef TEMPO_HAVE_OFI
#include "transports/ofi/ofi.h"
#endif
#ifdef TEMPO_HAVE_UCX
#include "transports/ucx/ucx.h"
#endif

namespace tempo::transport {
namespace {

using Factory = std::function<Result<std::unique_ptr<Endpoint>>(int rank)>;

struct Named {
  std::string name;
  Factory make;
};

class Transport : public ::testing::TestWithParam<Named> {
 protected:
  void SetUp() override {
    for (int r = 0; r < 2; ++r) {
      auto ep = GetParam().make(r);
      ASSERT_TRUE(ep.ok()) << GetParam().name << ": " << lastErrorMessage();
      ep_[r] = std::move(ep.value());
    }
    for (int r = 0; r < 2; ++r)
      for (int p = 0; p < 2; ++p)
        if (p != r) {
          ASSERT_EQ(ep_[r]->connect(p, ep_[p]->address()), Status::Success) << lastErrorMessage();
        }
  }

  // Progresses both endpoints until every request in `reqs` is done (bounded).
  bool drive(std::vector<Request*> reqs, int64_t seconds = 20) {
    Deadline d = Deadline::afterSeconds(seconds);
    while (!d.expired()) {
      ep_[0]->progress();
      ep_[1]->progress();
      bool all = true;
      for (Request* r : reqs) all = all && r->done;
      if (all) return true;
    }
    return false;
  }
  // Posts, retrying while the transport reports it is momentarily full.
  void send(int from, uint64_t tag, const void* buf, size_t len, Request* req) {
    Status s;
    while ((s = ep_[from]->isend(1 - from, tag, buf, len, req)) == Status::InProgress) {
      ep_[0]->progress();
      ep_[1]->progress();
    }
    ASSERT_EQ(s, Status::Success) << lastErrorMessage();
  }
  void recv(int at, uint64_t tag, void* buf, size_t len, Request* req) {
    Status s;
    while ((s = ep_[at]->irecv(1 - at, tag, buf, len, req)) == Status::InProgress) {
      ep_[0]->progress();
      ep_[1]->progress();
    }
    ASSERT_EQ(s, Status::Success) << lastErrorMessage();
  }

  std::unique_ptr<Endpoint> ep_[2];
};

TEST_P(Transport, ReceivePostedBeforeTheSend) {
  std::vector<uint8_t> out(1000), in(1000, 0);
  std::iota(out.begin(), out.end(), 0);
  Request s, r;
  recv(1, 7, in.data(), in.size(), &r);
  send(0, 7, out.data(), out.size(), &s);
  ASSERT_TRUE(drive({&s, &r}));
  EXPECT_EQ(r.status, Status::Success);
  EXPECT_EQ(r.bytes, 1000u);
  EXPECT_EQ(in, out);
}

TEST_P(Transport, ReceivePostedAfterTheSend) {
  std::vector<uint8_t> out(70000, 0x5a), in(70000, 0);
  Request s, r;
  send(0, 9, out.data(), out.size(), &s);
  for (int i = 0; i < 100; ++i) ep_[0]->progress();
  recv(1, 9, in.data(), in.size(), &r);
  ASSERT_TRUE(drive({&s, &r}));
  EXPECT_EQ(in, out);
}

TEST_P(Transport, ZeroLengthAndOneByteMessages) {
  uint8_t one = 0xab, got = 0;
  Request s0, r0, s1, r1;
  recv(1, 1, nullptr, 0, &r0);
  recv(1, 2, &got, 1, &r1);
  send(0, 1, nullptr, 0, &s0);
  send(0, 2, &one, 1, &s1);
  ASSERT_TRUE(drive({&s0, &r0, &s1, &r1}));
  EXPECT_EQ(r0.bytes, 0u);
  EXPECT_EQ(r1.bytes, 1u);
  EXPECT_EQ(got, 0xab);
}

TEST_P(Transport, LargeMessage) {
  const size_t n = size_t(64) << 20;
  std::vector<uint8_t> out(n), in(n, 0);
  for (size_t i = 0; i < n; i += 4096) out[i] = uint8_t(i >> 12);
  Request s, r;
  recv(1, 3, in.data(), n, &r);
  send(0, 3, out.data(), n, &s);
  ASSERT_TRUE(drive({&s, &r}, 120));
  EXPECT_EQ(r.bytes, n);
  EXPECT_TRUE(in == out);
}

// Each endpoint driven by a thread of its own, as processes do: over Tempo's shm a message
// of TEMPO_SHM_SPLIT bytes or more is moved half by the receiver and half by the sender,
// or wholly by the receiver when the sender has not claimed its half in time. Whichever
// happens, for each message, every byte arrives once and in place.
TEST_P(Transport, LargeMessagesAreExactWithBothSidesProgressingConcurrently) {
  constexpr int kMsgs = 64;
  constexpr size_t kBytes = 512 << 10;
  std::vector<std::vector<uint32_t>> out(kMsgs, std::vector<uint32_t>(kBytes / 4)), in = out;
  for (int m = 0; m < kMsgs; ++m) std::iota(out[size_t(m)].begin(), out[size_t(m)].end(), uint32_t(m) << 20);
  std::vector<Request> s(kMsgs), r(kMsgs);
  std::atomic<bool> failed{false};
  // Each side keeps a few messages in flight and posts the next as one completes.
  auto side = [&](int rank) {
    Deadline d = Deadline::afterSeconds(120);
    int posted = 0, done = 0;
    while (done < kMsgs && !d.expired() && !failed) {
      while (posted < kMsgs && posted - done < 4) {
        Request* q = rank == 0 ? &s[size_t(posted)] : &r[size_t(posted)];
        Status st = rank == 0 ? ep_[0]->isend(1, uint64_t(posted), out[size_t(posted)].data(), kBytes, q)
                              : ep_[1]->irecv(0, uint64_t(posted), in[size_t(posted)].data(), kBytes, q);
        if (st == Status::InProgress) break;
        if (!ok(st)) failed = true;
        ++posted;
      }
      ep_[rank]->progress();
      while (done < posted && (rank == 0 ? s : r)[size_t(done)].done) ++done;
    }
    if (done < kMsgs) failed = true;
  };
  std::thread receiver(side, 1);
  side(0);
  receiver.join();
  ASSERT_FALSE(failed) << lastErrorMessage();
  for (int m = 0; m < kMsgs; ++m) {
    ASSERT_EQ(r[size_t(m)].status, Status::Success);
    ASSERT_EQ(r[size_t(m)].bytes, kBytes);
    ASSERT_TRUE(in[size_t(m)] == out[size_t(m)]) << "message " << m;
  }
}

TEST_P(Transport, SameTagMatchesInPostingOrder) {
  constexpr int kMsgs = 32;
  std::vector<uint32_t> out(kMsgs), in(kMsgs, 0);
  std::vector<Request> s(kMsgs), r(kMsgs);
  std::vector<Request*> all;
  for (int i = 0; i < kMsgs; ++i) {
    out[size_t(i)] = uint32_t(i);
    recv(1, 42, &in[size_t(i)], 4, &r[size_t(i)]);
  }
  for (int i = 0; i < kMsgs; ++i) send(0, 42, &out[size_t(i)], 4, &s[size_t(i)]);
  for (int i = 0; i < kMsgs; ++i) all.push_back(&s[size_t(i)]), all.push_back(&r[size_t(i)]);
  ASSERT_TRUE(drive(all));
  EXPECT_EQ(in, out);
}

TEST_P(Transport, ManyOutstandingBothWays) {
  const int k = std::min(64, ep_[0]->maxOutstanding() / 2);
  std::vector<std::vector<uint8_t>> bufs(size_t(4 * k), std::vector<uint8_t>(9000));
  std::vector<Request> reqs(size_t(4 * k));
  std::vector<Request*> all;
  for (int i = 0; i < k; ++i) {
    for (int side = 0; side < 2; ++side) {
      auto& out = bufs[size_t(4 * i + 2 * side)];
      memset(out.data(), 1 + i + side, out.size());
      recv(1 - side, uint64_t(i), bufs[size_t(4 * i + 2 * side + 1)].data(), 9000, &reqs[size_t(4 * i + 2 * side + 1)]);
      send(side, uint64_t(i), out.data(), out.size(), &reqs[size_t(4 * i + 2 * side)]);
    }
  }
  for (auto& r : reqs) all.push_back(&r);
  ASSERT_TRUE(drive(all));
  for (int i = 0; i < k; ++i)
    for (int side = 0; side < 2; ++side) EXPECT_EQ(bufs[size_t(4 * i + 2 * side + 1)][8999], uint8_t(1 + i + side));
}

// Sizes on both sides of every protocol boundary (one slot, Tempo shm's eager limit, its
// largest inline message), many times round the rings, one tag: each message arrives
// whole, in order, whether its receive was posted before the send or after.
//
// "Sends first" means as many as the transport accepts: libfabric's shm provider stops
// accepting sends (EAGAIN, however long it is progressed) while an earlier one waits for
// its receive (ofiwg/libfabric#9853), so once a send has been refused for a while the
// next receive is posted, as a peer process would eventually do.
TEST_P(Transport, MixedSizesInOrderAcrossProtocolBoundaries) {
  const size_t sizes[] = {0, 1, 100, 8128, 8129, 20000, 65535, 65536, 65537, 131008, 131072, 300000};
  constexpr int kRounds = 12;
  const size_t count = std::size(sizes) * kRounds;
  std::vector<std::vector<uint8_t>> out(count), in(count);
  std::vector<Request> s(count), r(count);
  for (size_t i = 0; i < count; ++i) {
    const size_t n = sizes[i % std::size(sizes)];
    out[i].resize(n);
    for (size_t b = 0; b < n; ++b) out[i][b] = uint8_t(i * 131 + b * 7);
    in[i].assign(n, 0);
  }
  // Round k: even rounds post the receives first, odd rounds the sends first.
  for (int k = 0; k < kRounds; ++k) {
    const size_t first = size_t(k) * std::size(sizes), last = first + std::size(sizes);
    std::vector<Request*> round;
    if (k % 2 == 0) {
      for (size_t i = first; i < last; ++i) recv(1, 77, in[i].data(), in[i].size(), &r[i]);
      for (size_t i = first; i < last; ++i) send(0, 77, out[i].data(), out[i].size(), &s[i]);
    } else {
      size_t received = first;  // receives posted so far
      for (size_t i = first; i < last; ++i) {
        Status st;
        for (int refused = 1; (st = ep_[0]->isend(1, 77, out[i].data(), out[i].size(), &s[i])) == Status::InProgress;
             ++refused) {
          ep_[0]->progress();
          ep_[1]->progress();
          if (refused % 1000 == 0 && received <= i) {
            recv(1, 77, in[received].data(), in[received].size(), &r[received]);
            ++received;
          }
        }
        ASSERT_EQ(st, Status::Success) << lastErrorMessage();
      }
      for (; received < last; ++received) recv(1, 77, in[received].data(), in[received].size(), &r[received]);
    }
    for (size_t i = first; i < last; ++i) round.push_back(&s[i]), round.push_back(&r[i]);
    ASSERT_TRUE(drive(round)) << "round " << k;
    for (size_t i = first; i < last; ++i) {
      ASSERT_EQ(r[i].status, Status::Success) << "message " << i;
      ASSERT_EQ(r[i].bytes, out[i].size()) << "message " << i;
      ASSERT_TRUE(in[i] == out[i]) << "message " << i << " of " << out[i].size() << " bytes";
    }
  }
}

// A sender whose small sends complete at once (eager) may run far ahead of a receiver
// that has not posted: Tempo's shm buffers a bounded amount of such arrivals and then
// leaves them in the ring, so the sender is held back instead of growing the receiver's
// memory without limit; once the receives are posted everything arrives, in order.
TEST_P(Transport, SenderRunningAheadIsHeldBackByTheReceiver) {
  if (GetParam().name.rfind("shm", 0) != 0)
    GTEST_SKIP() << "the bound on unclaimed arrivals is Tempo shm's (other transports hold back senders their own way)";
  constexpr int kMessages = 2000;
  constexpr size_t kBytes = 4096;
  std::vector<std::vector<uint8_t>> out(kMessages, std::vector<uint8_t>(kBytes)), in(kMessages, std::vector<uint8_t>(kBytes));
  std::vector<Request> s(kMessages), r(kMessages);
  for (int i = 0; i < kMessages; ++i) memset(out[size_t(i)].data(), i & 0xff, kBytes);
  int accepted = 0;
  for (; accepted < kMessages; ++accepted) {
    Status st = Status::InProgress;
    for (int attempt = 0; attempt < 100 && st == Status::InProgress; ++attempt) {
      st = ep_[0]->isend(1, 5, out[size_t(accepted)].data(), kBytes, &s[size_t(accepted)]);
      ep_[0]->progress();
      ep_[1]->progress();
    }
    if (st == Status::InProgress) break;
    ASSERT_EQ(st, Status::Success) << lastErrorMessage();
  }
  EXPECT_LT(accepted, 200) << "the sender was never held back";
  std::vector<Request*> all;
  for (int i = 0; i < accepted; ++i) {
    recv(1, 5, in[size_t(i)].data(), kBytes, &r[size_t(i)]);
    all.push_back(&s[size_t(i)]);
    all.push_back(&r[size_t(i)]);
  }
  ASSERT_TRUE(drive(all));
  for (int i = 0; i < accepted; ++i) {
    ASSERT_EQ(r[size_t(i)].status, Status::Success);
    ASSERT_EQ(in[size_t(i)][kBytes - 1], uint8_t(i & 0xff)) << "message " << i;
  }
  // And the rest, now that the receiver keeps up.
  for (int i = accepted; i < kMessages; ++i) {
    recv(1, 5, in[size_t(i)].data(), kBytes, &r[size_t(i)]);
    send(0, 5, out[size_t(i)].data(), kBytes, &s[size_t(i)]);
    ASSERT_TRUE(drive({&s[size_t(i)], &r[size_t(i)]}));
    ASSERT_EQ(in[size_t(i)][0], uint8_t(i & 0xff));
  }
}

TEST_P(Transport, TooLongAMessageFailsTheReceive) {
  std::vector<uint8_t> out(100, 1), in(10, 0);
  Request s, r;
  recv(1, 5, in.data(), in.size(), &r);
  send(0, 5, out.data(), out.size(), &s);
  ASSERT_TRUE(drive({&r}));
  EXPECT_NE(r.status, Status::Success);
}

TEST_P(Transport, CancelAllAbandonsPostedRequests) {
  std::vector<uint8_t> in(100);
  Request r;
  recv(1, 6, in.data(), in.size(), &r);
  ep_[1]->cancelAll();
  for (int i = 0; i < 100; ++i) ep_[1]->progress();
  EXPECT_FALSE(r.done) << "a cancelled request is never completed";
}

std::vector<Named> transports() {
  static uint64_t comm = 0x7e57;
  std::vector<Named> t;
  t.push_back({"loopback", [](int r) { return loopback::create(++comm / 2, r, 2); }});
  // Tempo's shm, with large messages pulled by cross-memory attach and streamed through the rings.
  t.push_back({"shm", [](int r) {
                 param::overrideForTest(param::Id::ShmCma, nullptr);
                 return shm::create(r, 2, 1);
               }});
  t.push_back({"shm_streamed", [](int r) {
                 param::overrideForTest(param::Id::ShmCma, "0");
                 return shm::create(r, 2, 1);
               }});
#ifdef TEMPO_HAVE_OFI
  t.push_back({"ofi_shm", [](int r) { return ofi::create("shm", r, 2); }});
  t.push_back({"ofi_tcp", [](int r) { return ofi::create("tcp", r, 2); }});
#endif
#ifdef TEMPO_HAVE_UCX
  t.push_back({"ucx_tcp", [](int r) { return ucx::create(r, 2, "tcp"); }});
  t.push_back({"ucx_shm", [](int r) { return ucx::create(r, 2, "sm"); }});
#endif
  return t;
}

INSTANTIATE_TEST_SUITE_P(All, Transport, ::testing::ValuesIn(transports()),
                         [](const auto& p) { return p.param.name; });

#ifdef TEMPO_HAVE_OFI
// A killed process leaves its libfabric shm regions in /dev/shm, named after its pid; a
// later process given the same pid must still open its endpoints. (In a fresh child, so
// that this is its first shm endpoint.)
TEST(OfiShm, LeftoverRegionOfAnEarlierProcessWithOurPidDoesNotBlockTheEndpoint) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::string stale = "/dev/shm/" + std::to_string(getpid()) + ":0:0";
    int fd = open(stale.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, 1 << 20) != 0) _exit(3);
    close(fd);
    bool opened = false;
    {
      auto ep = ofi::create("shm", 0, 1);  // closed at the end of the scope, region and all
      opened = ep.ok();
    }
    _exit(opened ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the endpoint did not open; 3: could not plant the stale region";
}
#endif

}  // namespace
}  // namespace tempo::transport
