// Framed endpoint: every message checked end to end (TEMPO_CHECKSUM=1, and under TEMPO_FAULT).
//
// The transports below trust their medium: TCP's 16-bit checksum and a shared-memory ring
// both let a corrupted byte through unnoticed, and a transport bug that delivers the wrong
// message to a receive would go unnoticed too. A framed endpoint wraps any endpoint and
// sends, with each message, a 40-byte header on its own message (the same tag plus bit
// kTagBits, so the payload itself is never copied):
//
//   magic | CRC-32C of the payload | length | sequence number (per destination, from 1)
//   | the message's tag | CRC-32C of the header's fields
//
// The k-th header on (peer, tag) pairs with the k-th payload on (peer, tag): both sides
// post the two in the same order, which the transport contract's per-(peer, tag) ordering
// then preserves. A receive completes only when both have arrived and
// - the header is intact (magic and header checksum) and names this receive's tag,
// - the payload is as long as the header says and its CRC-32C matches,
// - the sequence number was not seen from that peer before (a window of the last 65,536),
// and fails with Status::SystemError naming the peer, the tag and what differed otherwise.
// What the checks cannot see: a message lost on the way (no receive learns that a message
// it never saw was sent; TEMPO_COLL_TIMEOUT bounds the wait for it), and two messages on
// one (peer, tag) that overtake each other whole, header and payload alike (each receive
// then holds an intact message of that tag, in the other order). The engine never has two
// messages on one (peer, tag) in flight, so neither leaves a collective with a wrong result.
//
// Sends checksum the user's buffer when they are posted, receives when both parts are in:
// one pass over every byte each way, plus a second small message per message.
#pragma once

#include <cstdint>
#include <memory>

#include "transports/transport.h"

namespace tempo::transport::framed {

// The header message, as it travels (host byte order: both ends run the same build).
struct Header {
  uint32_t magic;       // kMagic
  uint32_t payloadCrc;  // CRC-32C of the payload
  uint64_t len;         // the payload's length
  uint64_t seq;         // per destination, from 1
  uint64_t tag;         // the payload's tag
  uint32_t headerCrc;   // CRC-32C of every field above
  uint32_t pad;
};
static_assert(sizeof(Header) == 40);
inline constexpr uint32_t kMagic = 0x4d524654;  // "TFRM"
// A header travels on its payload's tag with this bit added.
inline constexpr uint64_t kHeaderTagBit = uint64_t(1) << kTagBits;
static_assert(kTagBits < kWireTagBits, "the header messages need a tag bit of their own");

// Takes ownership of `inner`; kind(), address() and lanes() are its, name() is
// "framed(<inner>)".
std::unique_ptr<Endpoint> create(std::unique_ptr<Endpoint> inner);

}  // namespace tempo::transport::framed
