// End-to-end message checks (transports/framed) and the fault injector that tests them
// (transports/faulty): every fault the wire can commit ends as a bit-exact result or a
// clean error on the receive, never as a receive that succeeds with the wrong bytes.
#include <gtest/gtest.h>

#include <cstddef>
#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "src/core/clock.h"
#include "src/core/crc32c.h"
#include "transports/faulty/faulty.h"
#include "transports/framed/framed.h"
#include "transports/loopback/loopback.h"

namespace tempo::transport {
namespace {

// ---- CRC-32C ----

// Bit by bit, straight from the definition (reflected polynomial 0x82F63B78).
uint32_t referenceCrc(const unsigned char* p, size_t n) {
  uint32_t c = ~0u;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1)));
  }
  return ~c;
}

TEST(Crc32c, MatchesThePublishedCheckValues) {
  EXPECT_EQ(crc32c("123456789", 9), 0xe3069283u);  // the catalogue's check value
  EXPECT_EQ(crc32c("", 0), 0u);
  // RFC 3720 (iSCSI), appendix B.4.
  std::vector<unsigned char> b(32, 0);
  EXPECT_EQ(crc32c(b.data(), b.size()), 0x8a9136aau);
  std::fill(b.begin(), b.end(), 0xff);
  EXPECT_EQ(crc32c(b.data(), b.size()), 0x62a8ab43u);
  std::iota(b.begin(), b.end(), 0);
  EXPECT_EQ(crc32c(b.data(), b.size()), 0x46dd794eu);
}

TEST(Crc32c, AnyLengthAndAlignmentAndContinuationAgreeWithTheDefinition) {
  std::mt19937 rng(7);
  std::vector<unsigned char> buf(100000);
  for (auto& c : buf) c = static_cast<unsigned char>(rng());
  // Lengths around the three-stream blocks (3 x 256 and 3 x 8,192 bytes) and past them.
  for (size_t off : {0, 1, 3, 7}) {
    for (size_t n : {0, 1, 7, 8, 9, 63, 64, 65, 767, 768, 769, 1000, 4091, 24575, 24576, 24583, 99993}) {
      const unsigned char* p = buf.data() + off;
      ASSERT_EQ(crc32c(p, n), referenceCrc(p, n)) << "offset " << off << ", " << n << " bytes";
      for (size_t split : {size_t(0), n / 3, n}) {
        EXPECT_EQ(crc32c(p + split, n - split, crc32c(p, split)), crc32c(p, n)) << n << " bytes split at " << split;
      }
    }
  }
}

// ---- TEMPO_FAULT's syntax ----

TEST(FaultSpec, ParsesEveryFault) {
  auto f = faulty::parse("corrupt=0.01,drop=0.5,dup=1,reorder=0.25,delay=50,jitter=12.5,seed=9");
  ASSERT_TRUE(f.ok()) << lastErrorMessage();
  EXPECT_DOUBLE_EQ(f->corrupt, 0.01);
  EXPECT_DOUBLE_EQ(f->drop, 0.5);
  EXPECT_DOUBLE_EQ(f->dup, 1);
  EXPECT_DOUBLE_EQ(f->reorder, 0.25);
  EXPECT_EQ(f->delayNs, 50000);
  EXPECT_EQ(f->jitterNs, 12500);
  EXPECT_EQ(f->seed, 9u);
  EXPECT_TRUE(f->any());
  EXPECT_EQ(f->describe(), "corrupt=0.01,drop=0.5,dup=1,reorder=0.25,delay=50,jitter=12.5");
}

TEST(FaultSpec, EmptyMeansNoFaults) {
  auto f = faulty::parse("");
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->any());
  EXPECT_EQ(f->describe(), "none");
}

TEST(FaultSpec, BadItemsAreNamed) {
  struct Case {
    const char* spec;
    const char* says;
  };
  for (Case c : {Case{"corupt=0.1", "unknown fault 'corupt'"}, Case{"drop", "'drop' is not key=value"},
                 Case{"drop=2", "drop=2 is not a probability"}, Case{"delay=-5", "not a non-negative number"},
                 Case{"jitter=10us", "not a non-negative number"}}) {
    auto f = faulty::parse(c.spec);
    EXPECT_EQ(f.status(), Status::InvalidArgument) << c.spec;
    EXPECT_NE(std::string(lastErrorMessage()).find(c.says), std::string::npos) << c.spec << ": " << lastErrorMessage();
  }
}

// ---- two endpoints of one in-process communicator ----

class Wire : public ::testing::Test {
 protected:
  // Rank 0 sends through `sender`'s decoration of its loopback endpoint, rank 1 receives
  // through `receiver`'s.
  void open(const std::function<std::unique_ptr<Endpoint>(std::unique_ptr<Endpoint>)>& sender,
            const std::function<std::unique_ptr<Endpoint>(std::unique_ptr<Endpoint>)>& receiver) {
    static uint64_t comm = 0xfa017;
    ++comm;
    auto a = loopback::create(comm, 0, 2), b = loopback::create(comm, 1, 2);
    ASSERT_TRUE(a.ok() && b.ok());
    tx_ = sender(std::move(a.value()));
    rx_ = receiver(std::move(b.value()));
    ASSERT_EQ(tx_->connect(1, rx_->address()), Status::Success);
    ASSERT_EQ(rx_->connect(0, tx_->address()), Status::Success);
  }
  static std::unique_ptr<Endpoint> plain(std::unique_ptr<Endpoint> e) { return e; }
  static std::unique_ptr<Endpoint> framedOver(std::unique_ptr<Endpoint> e) { return framed::create(std::move(e)); }
  static auto faultyFramed(faulty::Faults f) {
    return [f](std::unique_ptr<Endpoint> e) { return framed::create(faulty::create(std::move(e), f, 0)); };
  }

  // Progresses both until every request is done or `ns` passed; whether all were done.
  bool drive(const std::vector<Request*>& reqs, int64_t ns = 10'000'000'000) {
    const Deadline d = Deadline::after(ns);
    while (!d.expired()) {
      tx_->progress();
      rx_->progress();
      bool all = true;
      for (Request* r : reqs) all = all && r->done;
      if (all) return true;
    }
    return false;
  }

  // Posts every message of `out` from rank 0 and a receive of the same length at rank 1,
  // message i on tag tagOf(i), and drives them all to completion; returns the receives'
  // requests (`in` holds what they got).
  std::vector<Request> exchangeAll(const std::vector<std::vector<uint8_t>>& out, std::vector<std::vector<uint8_t>>& in,
                                   const std::function<uint64_t(size_t)>& tagOf) {
    std::vector<Request> s(out.size()), r(out.size());
    std::vector<Request*> all;
    in.clear();
    for (size_t i = 0; i < out.size(); ++i) {
      in.emplace_back(out[i].size());
      EXPECT_EQ(tx_->isend(1, tagOf(i), out[i].data(), out[i].size(), &s[i]), Status::Success);
      EXPECT_EQ(rx_->irecv(0, tagOf(i), in[i].data(), in[i].size(), &r[i]), Status::Success);
      all.push_back(&s[i]);
      all.push_back(&r[i]);
    }
    EXPECT_TRUE(drive(all));
    return r;
  }

  static std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = uint8_t(seed + i * 7);
    return v;
  }

  std::unique_ptr<Endpoint> tx_, rx_;
};

// ---- what a framed receive checks: hand-made frames from a plain sender ----

class Frames : public Wire {
 protected:
  void SetUp() override { open(plain, framedOver); }

  static framed::Header headerFor(const std::vector<uint8_t>& payload, uint64_t seq, uint64_t tag) {
    framed::Header h{framed::kMagic, crc32c(payload.data(), payload.size()), payload.size(), seq, tag, 0, 0};
    h.headerCrc = crc32c(&h, offsetof(framed::Header, headerCrc));
    return h;
  }
  // Sends `h` and `payload` as the framed sender would, and receives them framed into a
  // buffer of payload.size() + extra bytes; returns the receive's status.
  Status exchange(const framed::Header& h, const std::vector<uint8_t>& payload, uint64_t tag,
                  std::vector<uint8_t>* out = nullptr) {
    std::vector<uint8_t> in(payload.size() + 16);
    Request sd, sh, r;
    EXPECT_EQ(tx_->isend(1, tag, payload.data(), payload.size(), &sd), Status::Success);
    EXPECT_EQ(tx_->isend(1, tag | framed::kHeaderTagBit, &h, sizeof h, &sh), Status::Success);
    EXPECT_EQ(rx_->irecv(0, tag, in.data(), in.size(), &r), Status::Success);
    EXPECT_TRUE(drive({&sd, &sh, &r}));
    in.resize(r.bytes);
    if (out) *out = in;
    return r.status;
  }
  std::string error() const { return lastErrorMessage(); }
};

TEST_F(Frames, AnIntactFrameIsDeliveredExactly) {
  const auto payload = pattern(1000, 3);
  std::vector<uint8_t> got;
  EXPECT_EQ(exchange(headerFor(payload, 1, 5), payload, 5, &got), Status::Success) << error();
  EXPECT_EQ(got, payload);
}

TEST_F(Frames, AFlippedPayloadBitFailsTheCrc) {
  const auto payload = pattern(1000, 3);
  const framed::Header h = headerFor(payload, 1, 5);
  auto damaged = payload;
  damaged[517] ^= 0x10;
  EXPECT_EQ(exchange(h, damaged, 5), Status::SystemError);
  EXPECT_NE(error().find("failed its CRC-32C check"), std::string::npos) << error();
  EXPECT_NE(error().find("from rank 0"), std::string::npos) << error();
}

TEST_F(Frames, APayloadOfAnotherLengthFails) {
  const auto payload = pattern(1000, 3);
  const framed::Header h = headerFor(payload, 1, 5);
  EXPECT_EQ(exchange(h, pattern(999, 3), 5), Status::SystemError);
  EXPECT_NE(error().find("is 999 bytes, its header says 1000"), std::string::npos) << error();
}

TEST_F(Frames, ACorruptHeaderFails) {
  const auto payload = pattern(64, 1);
  framed::Header h = headerFor(payload, 1, 5);
  h.len ^= 1;  // the header checksum no longer matches
  EXPECT_EQ(exchange(h, payload, 5), Status::SystemError);
  EXPECT_NE(error().find("header of a message from rank 0 (tag 0x5) is corrupt"), std::string::npos) << error();
}

TEST_F(Frames, AHeaderForAnotherTagFails) {
  const auto payload = pattern(64, 1);
  EXPECT_EQ(exchange(headerFor(payload, 1, 6), payload, 5), Status::SystemError);
  EXPECT_NE(error().find("header names tag 0x6"), std::string::npos) << error();
}

TEST_F(Frames, ASequenceNumberSeenBeforeFails) {
  const auto payload = pattern(64, 1);
  EXPECT_EQ(exchange(headerFor(payload, 1, 5), payload, 5), Status::Success) << error();
  EXPECT_EQ(exchange(headerFor(payload, 2, 5), payload, 5), Status::Success) << error();
  EXPECT_EQ(exchange(headerFor(payload, 1, 5), payload, 5), Status::SystemError);
  EXPECT_NE(error().find("already received"), std::string::npos) << error();
}

TEST_F(Frames, NumbersMayArriveOutOfOrderButNotOlderThanTheWindow) {
  const auto payload = pattern(8, 1);
  EXPECT_EQ(exchange(headerFor(payload, 10, 5), payload, 5), Status::Success) << error();
  EXPECT_EQ(exchange(headerFor(payload, 3, 5), payload, 5), Status::Success) << error();
  EXPECT_EQ(exchange(headerFor(payload, 70000, 5), payload, 5), Status::Success) << error();
  EXPECT_EQ(exchange(headerFor(payload, 4, 5), payload, 5), Status::SystemError);
  EXPECT_NE(error().find("older than the last 65,536"), std::string::npos) << error();
}

// ---- the fault injector, with and without the checks ----

TEST_F(Wire, WithoutTheChecksACorruptedMessageArrivesSilentlyWrong) {
  open([](std::unique_ptr<Endpoint> e) { return faulty::create(std::move(e), {.corrupt = 1}, 0); }, plain);
  const auto out = pattern(4096, 9);
  const auto before = out;
  std::vector<uint8_t> in(out.size());
  Request s, r;
  ASSERT_EQ(tx_->isend(1, 1, out.data(), out.size(), &s), Status::Success);
  ASSERT_EQ(rx_->irecv(0, 1, in.data(), in.size(), &r), Status::Success);
  ASSERT_TRUE(drive({&s, &r}));
  EXPECT_EQ(r.status, Status::Success) << "nothing below the framing can tell";
  size_t bitsDiffering = 0;
  for (size_t i = 0; i < in.size(); ++i) bitsDiffering += size_t(__builtin_popcount(in[i] ^ out[i]));
  EXPECT_EQ(bitsDiffering, 1u) << "one bit flipped on the wire";
  EXPECT_EQ(out, before) << "the sender's buffer is never touched";
  EXPECT_EQ(faulty::countsOf(*tx_).corrupted, 1u);
}

TEST_F(Wire, WithTheChecksEveryCorruptedMessageFailsItsReceive) {
  open(faultyFramed({.corrupt = 1}), framedOver);
  for (size_t len : {1, 100, 65536}) {
    const auto out = pattern(len, 2);
    std::vector<uint8_t> in(len);
    Request s, r;
    ASSERT_EQ(tx_->isend(1, 7, out.data(), len, &s), Status::Success);
    ASSERT_EQ(rx_->irecv(0, 7, in.data(), len, &r), Status::Success);
    ASSERT_TRUE(drive({&s, &r}));
    EXPECT_EQ(r.status, Status::SystemError) << len << " bytes";
  }
}

TEST_F(Wire, ADroppedMessageCompletesTheSendAndNeverTheReceive) {
  open(faultyFramed({.drop = 1}), framedOver);
  const auto out = pattern(100, 2);
  std::vector<uint8_t> in(100);
  Request s, r;
  ASSERT_EQ(tx_->isend(1, 7, out.data(), 100, &s), Status::Success);
  ASSERT_EQ(rx_->irecv(0, 7, in.data(), 100, &r), Status::Success);
  EXPECT_FALSE(drive({&s, &r}, 200'000'000));
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.status, Status::Success);
  EXPECT_FALSE(r.done) << "found by the collective's deadline (TEMPO_COLL_TIMEOUT), not here";
}

TEST_F(Wire, ADuplicatedMessageFailsTheReceiveThatGetsTheCopy) {
  open(faultyFramed({.dup = 1}), framedOver);
  const auto a = pattern(100, 1), b = pattern(100, 2);
  std::vector<uint8_t> inA(100), inB(100);
  Request sa, sb, ra, rb;
  ASSERT_EQ(tx_->isend(1, 7, a.data(), 100, &sa), Status::Success);
  ASSERT_EQ(tx_->isend(1, 7, b.data(), 100, &sb), Status::Success);
  ASSERT_EQ(rx_->irecv(0, 7, inA.data(), 100, &ra), Status::Success);
  ASSERT_EQ(rx_->irecv(0, 7, inB.data(), 100, &rb), Status::Success);
  // b's send waits on its copy, which no receive takes (loopback sends complete on match).
  ASSERT_TRUE(drive({&sa, &ra, &rb}));
  EXPECT_EQ(ra.status, Status::Success);
  EXPECT_EQ(inA, a);
  EXPECT_EQ(rb.status, Status::SystemError) << "the second receive got the first message again";
  EXPECT_NE(std::string(lastErrorMessage()).find("already received"), std::string::npos) << lastErrorMessage();
}

// The transport contract orders messages only per (peer, tag): reordering across tags
// must not change a single byte.
TEST_F(Wire, ReorderingAcrossTagsIsHarmless) {
  open(faultyFramed({.reorder = 0.5, .seed = 3}), framedOver);
  constexpr int kMessages = 100;
  std::vector<std::vector<uint8_t>> out, in;
  for (int i = 0; i < kMessages; ++i) out.push_back(pattern(size_t(64 + i * 37), uint8_t(i)));
  const std::vector<Request> r = exchangeAll(out, in, [](size_t i) { return uint64_t(i); });
  ASSERT_FALSE(HasFailure()) << "every message posted and done";
  for (int i = 0; i < kMessages; ++i) {
    EXPECT_EQ(r[size_t(i)].status, Status::Success) << "message " << i << ": " << lastErrorMessage();
    EXPECT_EQ(in[size_t(i)], out[size_t(i)]) << "message " << i;
  }
}

// Reordering within one tag breaks the contract's order, which the checks cannot restore:
// a header and its payload travel as a pair, so a receive may get a later message of the
// same tag whole. Each receive then holds, intact, one of the messages sent on that tag or
// fails; never a mixture, never a corrupted one. The engine never has two messages on one
// (peer, tag) in flight, so for collectives a reordering is always one across tags.
TEST_F(Wire, ReorderingWithinATagDeliversWholeMessagesOrErrors) {
  open(faultyFramed({.reorder = 0.3, .seed = 5}), framedOver);
  constexpr int kMessages = 100;
  std::vector<std::vector<uint8_t>> out, in;
  for (int i = 0; i < kMessages; ++i) out.push_back(pattern(256, uint8_t(i)));
  const std::vector<Request> r = exchangeAll(out, in, [](size_t) { return uint64_t(9); });
  ASSERT_FALSE(HasFailure()) << "every message posted and done";
  int displaced = 0;
  for (int i = 0; i < kMessages; ++i) {
    if (r[size_t(i)].status != Status::Success) {
      EXPECT_EQ(r[size_t(i)].status, Status::SystemError);
      continue;
    }
    const auto sent = std::find(out.begin(), out.end(), in[size_t(i)]);
    EXPECT_NE(sent, out.end()) << "receive " << i << " holds bytes no send held";
    displaced += sent != out.begin() + i ? 1 : 0;
  }
  EXPECT_GT(displaced, 0) << "30% of 100 messages held back: some were overtaken";
}

}  // namespace
}  // namespace tempo::transport
