// Bootstrap wire formats: round trips, and rejection of anything malformed.
#include <gtest/gtest.h>

#include <cstring>

#include <algorithm>

#include "src/bootstrap/auth.h"
#include "src/bootstrap/socket.h"
#include "src/bootstrap/wire.h"

namespace tempo::bootstrap {
namespace {

SockAddr addr(const char* s) {
  Result<SockAddr> a = SockAddr::parse(s);
  EXPECT_TRUE(a.ok()) << s;
  return a.ok() ? a.value() : SockAddr{};
}

TEST(UniqueId, RoundTripsIpv4AndIpv6) {
  for (const char* s : {"10.1.2.3:29500", "[::1]:6000", "[fd00::17]:1"}) {
    UniqueId id;
    id.root = addr(s);
    for (size_t i = 0; i < id.secret.size(); ++i) id.secret[i] = uint8_t(i * 7 + 1);
    uint8_t raw[kUniqueIdBytes];
    encodeUniqueId(id, raw);
    Result<UniqueId> back = decodeUniqueId(raw);
    ASSERT_TRUE(back.ok()) << s;
    EXPECT_EQ(back->root.toString(), id.root.toString());
    EXPECT_EQ(back->secret, id.secret);
    EXPECT_EQ(back->flags, 0);
  }
}

TEST(UniqueId, EveryCoveredByteIsChecked) {
  UniqueId id;
  id.root = addr("192.0.2.9:1234");
  uint8_t raw[kUniqueIdBytes];
  encodeUniqueId(id, raw);
  // Flipping any byte of the encoded part (magic, version, flags, address, secret,
  // checksum) must be caught.
  for (size_t i = 0; i < 8 + 2 + 2 + 20 + kSecretBytes + 8; ++i) {
    uint8_t bad[kUniqueIdBytes];
    memcpy(bad, raw, sizeof bad);
    bad[i] ^= 0x10;
    EXPECT_FALSE(decodeUniqueId(bad).ok()) << "byte " << i;
  }
}

TEST(UniqueId, ZeroesAreNotAnId) {
  uint8_t raw[kUniqueIdBytes] = {};
  EXPECT_EQ(decodeUniqueId(raw).status(), Status::InvalidArgument);
}

TEST(Header, BoundsAndMagic) {
  uint8_t h[kHeaderBytes];
  encodeHeader(MsgType::Hello, 100, h);
  EXPECT_TRUE(decodeHeader(h, 100).ok());
  EXPECT_FALSE(decodeHeader(h, 99).ok()) << "length above the limit";
  h[0] ^= 1;
  EXPECT_FALSE(decodeHeader(h, 100).ok()) << "bad magic";
  encodeHeader(MsgType(77), 1, h);
  EXPECT_FALSE(decodeHeader(h, 100).ok()) << "unknown type";
}

TEST(Messages, HelloTableErrorAndPeerHelloRoundTrip) {
  Hello h;
  h.nranks = 8;
  h.rank = 3;
  h.info.hostHash = 0x1122334455667788ull;
  h.info.kernelHash = 0x99aabbccddeeff00ull;
  h.info.features = kFeatureTelemetry;
  h.info.processToken = 42;
  h.info.pid = 777;
  h.info.oob = addr("127.0.0.1:4000");
  snprintf(h.info.hostname, sizeof h.info.hostname, "node07");
  std::vector<uint8_t> m = encodeHello(h);
  Result<Hello> hb = decodeHello(std::span(m).subspan(kHeaderBytes));
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->rank, 3);
  EXPECT_EQ(hb->nranks, 8);
  EXPECT_EQ(hb->info.hostHash, h.info.hostHash);
  EXPECT_EQ(hb->info.kernelHash, h.info.kernelHash);
  EXPECT_EQ(hb->info.features, h.info.features);
  EXPECT_STREQ(hb->info.hostname, "node07");
  EXPECT_EQ(hb->info.oob.toString(), "127.0.0.1:4000");

  Table t;
  t.commNonce = 99;
  t.peers.assign(3, h.info);
  m = encodeTable(t);
  Result<Table> tb = decodeTable(std::span(m).subspan(kHeaderBytes), 3);
  ASSERT_TRUE(tb.ok());
  EXPECT_EQ(tb->commNonce, 99u);
  EXPECT_EQ(tb->peers.size(), 3u);
  EXPECT_FALSE(decodeTable(std::span(m).subspan(kHeaderBytes), 4).ok()) << "rank count must match";

  m = encodeError({int32_t(Status::InvalidArgument), "rank 9 is outside [0, 8)"});
  Result<ErrorReply> eb = decodeError(std::span(m).subspan(kHeaderBytes));
  ASSERT_TRUE(eb.ok());
  EXPECT_EQ(eb->reason, "rank 9 is outside [0, 8)");

  PeerHello p;
  p.nonce[0] = 7;
  p.commNonce = 5;
  p.from = 2;
  p.purpose = PeerHello::kDirect;
  p.proof[31] = 9;
  m = encodePeerHello(p);
  Result<PeerHello> pb = decodePeerHello(std::span(m).subspan(kHeaderBytes));
  ASSERT_TRUE(pb.ok());
  EXPECT_EQ(pb->from, 2);
  EXPECT_EQ(pb->commNonce, 5u);
  EXPECT_EQ(pb->purpose, uint32_t(PeerHello::kDirect));
  EXPECT_EQ(pb->nonce, p.nonce);
  EXPECT_EQ(pb->proof, p.proof);

  Nonce n;
  for (size_t i = 0; i < n.size(); ++i) n[i] = uint8_t(i + 1);
  m = encodeChallenge(n);
  Result<Nonce> nb = decodeChallenge(std::span(m).subspan(kHeaderBytes));
  ASSERT_TRUE(nb.ok());
  EXPECT_EQ(*nb, n);
  EXPECT_FALSE(decodeChallenge(std::span(m).subspan(kHeaderBytes + 1)).ok()) << "short challenge";
}

TEST(Messages, TruncatedOrPaddedPayloadsAreRejected) {
  Hello h;
  h.info.oob = addr("127.0.0.1:1");
  std::vector<uint8_t> m = encodeHello(h);
  std::span<const uint8_t> payload = std::span(m).subspan(kHeaderBytes);
  for (size_t len = 0; len < payload.size(); ++len) EXPECT_FALSE(decodeHello(payload.first(len)).ok()) << len;
  std::vector<uint8_t> longer(payload.begin(), payload.end());
  longer.push_back(0);
  EXPECT_FALSE(decodeHello(longer).ok());
}

TEST(Messages, LeaveNoticeCarriesTheCollectiveCountExactly) {
  std::vector<uint8_t> m = encodeLeave(0x0102030405060708ull);
  ASSERT_TRUE(decodeHeader(std::span<const uint8_t, kHeaderBytes>(m.data(), kHeaderBytes), 8).ok());
  std::span<const uint8_t> payload = std::span(m).subspan(kHeaderBytes);
  Result<uint64_t> n = decodeLeave(payload);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0x0102030405060708ull);
  EXPECT_FALSE(decodeLeave(payload.first(7)).ok()) << "truncated";
  std::vector<uint8_t> longer(payload.begin(), payload.end());
  longer.push_back(0);
  EXPECT_FALSE(decodeLeave(longer).ok()) << "padded";
}

// The proofs (auth.h): a sealed message proves the secret without containing it, and
// any change to the secret, the label, the context or a payload byte is caught.
Secret testSecret(uint8_t seed) {
  Secret s;
  for (size_t i = 0; i < s.size(); ++i) s[i] = uint8_t(seed + i * 13);
  return s;
}

std::vector<uint8_t> sealedHello(const Secret& secret, const Nonce& challenge) {
  Hello h;
  h.nonce = freshNonce();
  h.nranks = 4;
  h.rank = 1;
  h.info.oob = addr("127.0.0.1:4000");
  std::vector<uint8_t> m = encodeHello(h);
  seal(m, secret, ProofLabel::Hello, challenge);
  return m;
}

TEST(Proofs, TheSecretNeverCrossesTheWire) {
  const Secret secret = testSecret(3);
  const std::vector<uint8_t> m = sealedHello(secret, freshNonce());
  EXPECT_EQ(std::search(m.begin(), m.end(), secret.begin(), secret.end()), m.end());
  // Nor half of it, anywhere.
  EXPECT_EQ(std::search(m.begin(), m.end(), secret.begin(), secret.begin() + 16), m.end());
  EXPECT_EQ(std::search(m.begin(), m.end(), secret.begin() + 16, secret.end()), m.end());
}

TEST(Proofs, OnlyTheSameSecretLabelContextAndBytesVerify) {
  const Secret secret = testSecret(3);
  const Nonce challenge = freshNonce();
  const std::vector<uint8_t> m = sealedHello(secret, challenge);
  const std::span<const uint8_t> payload = std::span(m).subspan(kHeaderBytes);
  EXPECT_TRUE(verifySealed(payload, secret, ProofLabel::Hello, challenge));
  EXPECT_FALSE(verifySealed(payload, testSecret(4), ProofLabel::Hello, challenge)) << "another job's secret";
  EXPECT_FALSE(verifySealed(payload, secret, ProofLabel::PeerHello, challenge)) << "another message kind";
  EXPECT_FALSE(verifySealed(payload, secret, ProofLabel::Hello, freshNonce())) << "another connection's challenge";
  for (size_t i = 0; i < payload.size(); ++i) {
    std::vector<uint8_t> bad(payload.begin(), payload.end());
    bad[i] ^= 0x01;
    EXPECT_FALSE(verifySealed(bad, secret, ProofLabel::Hello, challenge)) << "byte " << i;
  }
  EXPECT_FALSE(verifySealed(payload.first(kProofBytes - 1), secret, ProofLabel::Hello, challenge));
}

TEST(Proofs, FreshNoncesDifferAndAReplayGuardAdmitsEachOnce) {
  const Nonce a = freshNonce(), b = freshNonce();
  EXPECT_NE(a, b);
  ReplayGuard g;
  EXPECT_TRUE(g.firstUse(a));
  EXPECT_TRUE(g.firstUse(b));
  EXPECT_FALSE(g.firstUse(a));
}

TEST(SockAddr, ParseRejectsGarbage) {
  for (const char* s : {"", "nohost", "1.2.3.4:", "1.2.3.4:99999", "[::1", "[::1]5", "1.2.3.4:12ab"})
    EXPECT_FALSE(SockAddr::parse(s).ok()) << s;
}

TEST(Interfaces, NcclSocketIfnameRules) {
  EXPECT_TRUE(interfaceMatches("eth", "eth0"));
  EXPECT_FALSE(interfaceMatches("eth", "ib0"));
  EXPECT_TRUE(interfaceMatches("ib,eth", "eth1"));
  EXPECT_FALSE(interfaceMatches("^lo,docker", "lo"));
  EXPECT_FALSE(interfaceMatches("^lo,docker", "docker0"));
  EXPECT_TRUE(interfaceMatches("^lo,docker", "eth0"));
  EXPECT_TRUE(interfaceMatches("=eth0", "eth0"));
  EXPECT_FALSE(interfaceMatches("=eth0", "eth00"));
  EXPECT_FALSE(interfaceMatches("^=eth0", "eth0"));
  EXPECT_TRUE(interfaceMatches("^=eth0", "eth00"));
}

}  // namespace
}  // namespace tempo::bootstrap
