#include "src/bootstrap/wire.h"

#include <cstring>

#include "src/core/host.h"

namespace tempo::bootstrap {
namespace {

constexpr uint64_t kIdMagic = 0x3144494f504d4554ull;  // "TEMPOID1"
constexpr size_t kPeerInfoBytes = 8 + 8 + 8 + 4 + 4 + 20 + 64;  // hashes, pid, features, address, name

// Little-endian writer over a growable byte vector.
class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : out_(out) {}
  void u16(uint16_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  void addr(const SockAddr& a) {
    uint8_t raw[16] = {};
    uint16_t fam = 0;
    if (a.family() == AF_INET) {
      fam = 4;
      memcpy(raw, &reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr, 4);
    } else if (a.family() == AF_INET6) {
      fam = 6;
      memcpy(raw, &reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_addr, 16);
    }
    u16(fam);
    u16(a.port());
    bytes(raw, 16);
  }
  void peer(const PeerInfo& p) {
    u64(p.hostHash);
    u64(p.kernelHash);
    u64(p.processToken);
    u32(p.pid);
    u32(p.features);
    addr(p.oob);
    bytes(p.hostname, sizeof p.hostname);
  }

 private:
  void put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(uint8_t(v >> (8 * i)));
  }
  std::vector<uint8_t>& out_;
};

// Bounds-checked little-endian reader; once a read overruns, every later read fails.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  bool ok() const { return ok_; }
  size_t left() const { return ok_ ? in_.size() - pos_ : 0; }
  uint64_t get(int n) {
    if (!ok_ || pos_ + size_t(n) > in_.size()) {
      ok_ = false;
      return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t(in_[pos_ + size_t(i)]) << (8 * i);
    pos_ += size_t(n);
    return v;
  }
  uint16_t u16() { return uint16_t(get(2)); }
  uint32_t u32() { return uint32_t(get(4)); }
  uint64_t u64() { return get(8); }
  void bytes(void* p, size_t n) {
    if (!ok_ || pos_ + n > in_.size()) {
      ok_ = false;
      return;
    }
    memcpy(p, in_.data() + pos_, n);
    pos_ += n;
  }
  bool addr(SockAddr* a) {
    uint16_t fam = u16();
    uint16_t port = u16();
    uint8_t raw[16];
    bytes(raw, 16);
    if (!ok_) return false;
    *a = SockAddr{};
    if (fam == 4) {
      auto* s = reinterpret_cast<sockaddr_in*>(&a->storage);
      s->sin_family = AF_INET;
      memcpy(&s->sin_addr, raw, 4);
      a->len = sizeof(sockaddr_in);
    } else if (fam == 6) {
      auto* s = reinterpret_cast<sockaddr_in6*>(&a->storage);
      s->sin6_family = AF_INET6;
      memcpy(&s->sin6_addr, raw, 16);
      a->len = sizeof(sockaddr_in6);
    } else {
      ok_ = false;
      return false;
    }
    a->setPort(port);
    return true;
  }
  bool peer(PeerInfo* p) {
    p->hostHash = u64();
    p->kernelHash = u64();
    p->processToken = u64();
    p->pid = u32();
    p->features = u32();
    if (!addr(&p->oob)) return false;
    bytes(p->hostname, sizeof p->hostname);
    p->hostname[sizeof p->hostname - 1] = '\0';
    return ok_;
  }

 private:
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

std::vector<uint8_t> framed(MsgType type, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> out(kHeaderBytes);
  encodeHeader(type, uint32_t(payload.size()), std::span<uint8_t, kHeaderBytes>(out.data(), kHeaderBytes));
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

Status malformed(const char* what) {
  return fail(Status::InvalidArgument, "bootstrap: malformed %s message", what);
}

}  // namespace

void encodeUniqueId(const UniqueId& id, std::span<uint8_t, kUniqueIdBytes> out) {
  std::vector<uint8_t> buf;
  Writer w(buf);
  w.u64(kIdMagic);
  w.u16(uint16_t(kProtocolVersion));
  w.u16(id.flags);
  w.addr(id.root);
  w.bytes(id.secret.data(), id.secret.size());
  uint64_t sum = fnv1a(buf.data(), buf.size());
  w.u64(sum);
  memset(out.data(), 0, out.size());
  memcpy(out.data(), buf.data(), buf.size());
}

Result<UniqueId> decodeUniqueId(std::span<const uint8_t, kUniqueIdBytes> in) {
  Reader r(in);
  if (r.u64() != kIdMagic)
    return fail(Status::InvalidArgument,
                "unique id has a bad magic: it was not created by ncclGetUniqueId of this library");
  uint16_t version = r.u16();
  if (version != kProtocolVersion)
    return fail(Status::InvalidUsage, "unique id version %u does not match this library's %u",
                unsigned(version), unsigned(kProtocolVersion));
  UniqueId id;
  id.flags = r.u16();
  if (!r.addr(&id.root)) return fail(Status::InvalidArgument, "unique id carries no valid root address");
  r.bytes(id.secret.data(), id.secret.size());
  size_t covered = kUniqueIdBytes - r.left();
  uint64_t sum = r.u64();
  if (!r.ok() || sum != fnv1a(in.data(), covered))
    return fail(Status::InvalidArgument, "unique id is corrupt (checksum mismatch)");
  return id;
}

void encodeHeader(MsgType type, uint32_t length, std::span<uint8_t, kHeaderBytes> out) {
  std::vector<uint8_t> buf;
  Writer w(buf);
  w.u32(kMsgMagic);
  w.u16(uint16_t(type));
  w.u16(0);
  w.u32(length);
  memcpy(out.data(), buf.data(), kHeaderBytes);
}

Result<Header> decodeHeader(std::span<const uint8_t, kHeaderBytes> in, uint32_t maxLength) {
  Reader r(in);
  if (r.u32() != kMsgMagic) return malformed("header (bad magic)");
  uint16_t type = r.u16();
  r.u16();
  uint32_t length = r.u32();
  if (type < uint16_t(MsgType::Hello) || type > uint16_t(MsgType::Keepalive)) return malformed("header (type)");
  if (length > maxLength)
    return fail(Status::InvalidArgument, "bootstrap: message of %u bytes exceeds the limit of %u", length,
                maxLength);
  return Header{MsgType(type), length};
}

std::vector<uint8_t> encodeChallenge(const Nonce& n) {
  return framed(MsgType::Challenge, std::vector<uint8_t>(n.begin(), n.end()));
}

std::vector<uint8_t> encodeKeepalive() { return framed(MsgType::Keepalive, {}); }

Result<Nonce> decodeChallenge(std::span<const uint8_t> payload) {
  Nonce n;
  if (payload.size() != n.size()) return malformed("challenge");
  memcpy(n.data(), payload.data(), n.size());
  return n;
}

std::vector<uint8_t> encodeHello(const Hello& h) {
  std::vector<uint8_t> p;
  Writer w(p);
  w.bytes(h.nonce.data(), h.nonce.size());
  w.u32(h.protocol);
  w.u32(uint32_t(h.nranks));
  w.u32(uint32_t(h.rank));
  w.peer(h.info);
  w.bytes(h.proof.data(), h.proof.size());
  return framed(MsgType::Hello, p);
}

Result<Hello> decodeHello(std::span<const uint8_t> payload) {
  Reader r(payload);
  Hello h;
  r.bytes(h.nonce.data(), h.nonce.size());
  h.protocol = r.u32();
  h.nranks = int32_t(r.u32());
  h.rank = int32_t(r.u32());
  if (!r.peer(&h.info)) return malformed("hello");
  r.bytes(h.proof.data(), h.proof.size());
  if (!r.ok() || r.left() != 0) return malformed("hello");
  return h;
}

std::vector<uint8_t> encodeTable(const Table& t) {
  std::vector<uint8_t> p;
  p.reserve(16 + t.peers.size() * kPeerInfoBytes + kProofBytes);
  Writer w(p);
  w.u64(t.commNonce);
  w.u32(uint32_t(t.peers.size()));
  for (const PeerInfo& pi : t.peers) w.peer(pi);
  w.bytes(t.proof.data(), t.proof.size());
  return framed(MsgType::Table, p);
}

Result<Table> decodeTable(std::span<const uint8_t> payload, int expectRanks) {
  Reader r(payload);
  Table t;
  t.commNonce = r.u64();
  uint32_t n = r.u32();
  if (!r.ok() || int64_t(n) != expectRanks || r.left() != size_t(n) * kPeerInfoBytes + kProofBytes)
    return malformed("rank table");
  t.peers.resize(n);
  for (PeerInfo& pi : t.peers)
    if (!r.peer(&pi)) return malformed("rank table");
  r.bytes(t.proof.data(), t.proof.size());
  return t;
}

namespace {
std::vector<uint8_t> encodeStatusReason(MsgType type, const ErrorReply& e) {
  std::vector<uint8_t> p;
  Writer w(p);
  w.u32(uint32_t(e.status));
  std::string reason = e.reason.substr(0, 400);
  w.u32(uint32_t(reason.size()));
  w.bytes(reason.data(), reason.size());
  return framed(type, p);
}
}  // namespace

std::vector<uint8_t> encodeError(const ErrorReply& e) { return encodeStatusReason(MsgType::Error, e); }
std::vector<uint8_t> encodeAbort(const ErrorReply& e) { return encodeStatusReason(MsgType::Abort, e); }

std::vector<uint8_t> encodeLeave(uint64_t collectives) {
  std::vector<uint8_t> p;
  Writer w(p);
  w.u64(collectives);
  return framed(MsgType::Leave, p);
}

Result<uint64_t> decodeLeave(std::span<const uint8_t> payload) {
  Reader r(payload);
  uint64_t collectives = r.u64();
  if (!r.ok() || r.left() != 0) return malformed("leave notice");
  return collectives;
}

std::vector<uint8_t> encodeDirect(std::span<const uint8_t> payload) {
  return framed(MsgType::Direct, std::vector<uint8_t>(payload.begin(), payload.end()));
}

Result<ErrorReply> decodeError(std::span<const uint8_t> payload) {
  Reader r(payload);
  ErrorReply e;
  e.status = int32_t(r.u32());
  uint32_t len = r.u32();
  if (!r.ok() || len != r.left() || len > 400) return malformed("error");
  e.reason.resize(len);
  r.bytes(e.reason.data(), len);
  return e;
}

std::vector<uint8_t> encodePeerHello(const PeerHello& h) {
  std::vector<uint8_t> p;
  Writer w(p);
  w.bytes(h.nonce.data(), h.nonce.size());
  w.u64(h.commNonce);
  w.u32(uint32_t(h.from));
  w.u32(h.purpose);
  w.bytes(h.proof.data(), h.proof.size());
  return framed(MsgType::PeerHello, p);
}

Result<PeerHello> decodePeerHello(std::span<const uint8_t> payload) {
  Reader r(payload);
  PeerHello h;
  r.bytes(h.nonce.data(), h.nonce.size());
  h.commNonce = r.u64();
  h.from = int32_t(r.u32());
  h.purpose = r.u32();
  r.bytes(h.proof.data(), h.proof.size());
  if (!r.ok() || r.left() != 0) return malformed("peer hello");
  return h;
}

}  // namespace tempo::bootstrap
