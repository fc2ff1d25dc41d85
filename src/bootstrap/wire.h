// Bootstrap wire formats: the 128-byte unique id and the rendezvous messages.
//
// Everything is encoded explicitly (little-endian integers, fixed-size fields) so that the
// formats do not depend on struct layout, and every decoder checks magic, version and
// bounds before it trusts a byte. These are the parsers the fuzz targets exercise.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "src/bootstrap/socket.h"
#include "src/core/status.h"

namespace tempo::bootstrap {

inline constexpr size_t kUniqueIdBytes = 128;
inline constexpr size_t kSecretBytes = 32;
inline constexpr size_t kNonceBytes = 16;
inline constexpr size_t kProofBytes = 32;
inline constexpr uint32_t kProtocolVersion = 5;
using Secret = std::array<uint8_t, kSecretBytes>;
using Nonce = std::array<uint8_t, kNonceBytes>;
using Proof = std::array<uint8_t, kProofBytes>;  // an HMAC of the message under the secret (auth.h)

// What a unique id carries: where the root listens and the job secret.
struct UniqueId {
  enum Flags : uint16_t { kNoSecret = 1 };  // NCCL_COMM_ID mode: the secret is all zero
  uint16_t flags = 0;
  SockAddr root;
  Secret secret{};
};
void encodeUniqueId(const UniqueId& id, std::span<uint8_t, kUniqueIdBytes> out);
Result<UniqueId> decodeUniqueId(std::span<const uint8_t, kUniqueIdBytes> in);

// What each rank tells the others about itself.
// PeerInfo::features: the skew telemetry exchange runs (TEMPO_PACING is not off); the
// rank traces (TEMPO_TRACE is set), so every rank takes part in the clock probes.
inline constexpr uint32_t kFeatureTelemetry = 1;
inline constexpr uint32_t kFeatureTrace = 2;

struct PeerInfo {
  uint64_t hostHash = 0;
  uint64_t kernelHash = 0;  // ranks with equal values share a kernel, hence its cores
  uint64_t processToken = 0;
  uint32_t pid = 0;
  uint32_t features = 0;  // kFeature* bits: settings every rank of a communicator must share
  SockAddr oob;           // the rank's bootstrap listener
  char hostname[64] = {};
};

// Framing of every bootstrap message: a 12-byte header, then `length` payload bytes.
// Messages that admit a connection end in a Proof (auth.h); none carries the secret.
enum class MsgType : uint16_t {
  Hello = 1,      // rank -> root: nonce, protocol, nranks, rank, PeerInfo, proof
  Table = 2,      // root -> rank: comm nonce, PeerInfo of every rank, proof
  Error = 3,      // root -> rank: status and reason
  PeerHello = 4,  // rank -> rank: nonce, comm nonce, sender rank, purpose, proof
  Abort = 5,      // rank -> ring neighbour: the communicator failed; status and reason
  Direct = 6,     // rank -> rank, after a kDirect PeerHello: one opaque payload
  Leave = 7,      // rank -> ring neighbour: finalized cleanly after this many collectives
  Challenge = 8,  // root -> rank, on accepting: the nonce the rank's hello must prove against
  Keepalive = 9,  // rank <-> root between hello and table: no payload; the sender is alive
};
inline constexpr size_t kHeaderBytes = 12;
inline constexpr uint32_t kMsgMagic = 0x424d5054;  // "TPMB"
inline constexpr uint32_t kMaxHelloBytes = 512;
inline constexpr uint32_t kMaxTableRanks = 1u << 20;
inline constexpr uint32_t kMaxAbortBytes = 1024;

struct Header {
  MsgType type;
  uint32_t length;
};
void encodeHeader(MsgType type, uint32_t length, std::span<uint8_t, kHeaderBytes> out);
// Rejects a wrong magic, an unknown type, or a length above `maxLength`.
Result<Header> decodeHeader(std::span<const uint8_t, kHeaderBytes> in, uint32_t maxLength);

std::vector<uint8_t> encodeChallenge(const Nonce& n);
std::vector<uint8_t> encodeKeepalive();  // a header alone
Result<Nonce> decodeChallenge(std::span<const uint8_t> payload);

struct Hello {
  Nonce nonce{};  // the rank's: the table it gets back must be proved against it
  uint32_t protocol = kProtocolVersion;
  int32_t nranks = 0;
  int32_t rank = 0;
  PeerInfo info;
  Proof proof{};
};
std::vector<uint8_t> encodeHello(const Hello& h);  // header included
Result<Hello> decodeHello(std::span<const uint8_t> payload);

struct Table {
  uint64_t commNonce = 0;
  std::vector<PeerInfo> peers;
  Proof proof{};
};
std::vector<uint8_t> encodeTable(const Table& t);
Result<Table> decodeTable(std::span<const uint8_t> payload, int expectRanks);

struct ErrorReply {
  int32_t status = 0;
  std::string reason;
};
std::vector<uint8_t> encodeError(const ErrorReply& e);
Result<ErrorReply> decodeError(std::span<const uint8_t> payload);
// An Abort notice carries the same fields as an Error reply.
std::vector<uint8_t> encodeAbort(const ErrorReply& e);
// A Leave notice: the number of collectives the sender issued before it finalized.
std::vector<uint8_t> encodeLeave(uint64_t collectives);
Result<uint64_t> decodeLeave(std::span<const uint8_t> payload);
// A Direct message: the payload as is, framed.
std::vector<uint8_t> encodeDirect(std::span<const uint8_t> payload);

struct PeerHello {
  enum Purpose : uint32_t { kRing = 1, kP2p = 2, kDirect = 3, kHeartbeat = 4 };
  Nonce nonce{};  // fresh per connection: a listener admits each once
  uint64_t commNonce = 0;
  int32_t from = 0;
  uint32_t purpose = kRing;
  Proof proof{};
};
std::vector<uint8_t> encodePeerHello(const PeerHello& h);
Result<PeerHello> decodePeerHello(std::span<const uint8_t> payload);

}  // namespace tempo::bootstrap
