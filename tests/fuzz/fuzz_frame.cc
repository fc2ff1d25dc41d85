// Fuzz target: a framed bootstrap message as it arrives on a socket, header then payload,
// through the decoders the root and the ranks use (hello, table, error and abort notices,
// peer hello, leave notice, challenge, keepalive) and the proof check that guards them.
// Property: no input crashes or trips a sanitizer, every length is bounded before use, and
// a message that decodes re-encodes to one that decodes to the same fields.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "src/bootstrap/auth.h"
#include "src/bootstrap/wire.h"

using namespace tempo::bootstrap;

namespace {

std::span<const uint8_t> payloadOf(const std::vector<uint8_t>& framed) {
  return std::span<const uint8_t>(framed).subspan(kHeaderBytes);
}

void check(bool ok) {
  if (!ok) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < kHeaderBytes) return 0;
  tempo::Result<Header> h = decodeHeader(std::span<const uint8_t, kHeaderBytes>(data, kHeaderBytes), 1u << 20);
  if (!h.ok()) return 0;
  const std::span<const uint8_t> payload(data + kHeaderBytes, size - kHeaderBytes);
  if (payload.size() != h->length) return 0;  // a socket reader waits for exactly `length` bytes

  // The proof check reads any payload length (what the root runs on every hello).
  (void)verifySealed(payload, Secret{}, ProofLabel::Hello, payload.first(std::min<size_t>(payload.size(), 16)));

  switch (h->type) {
    case MsgType::Hello:
      if (auto m = decodeHello(payload); m.ok()) {
        auto again = decodeHello(payloadOf(encodeHello(*m)));
        check(again.ok() && again->nonce == m->nonce && again->rank == m->rank && again->nranks == m->nranks &&
              again->proof == m->proof && again->info.oob.toString() == m->info.oob.toString());
      }
      break;
    case MsgType::Table: {
      // The count a rank expects is its own nranks; take the one the payload claims, so
      // that well-formed tables get through.
      uint32_t n = 0;
      if (payload.size() >= 12) memcpy(&n, payload.data() + 8, 4);
      if (auto m = decodeTable(payload, int(std::min<uint32_t>(n, 1u << 20))); m.ok()) {
        auto again = decodeTable(payloadOf(encodeTable(*m)), int(m->peers.size()));
        check(again.ok() && again->commNonce == m->commNonce && again->peers.size() == m->peers.size() &&
              again->proof == m->proof);
      }
      break;
    }
    case MsgType::Error:
    case MsgType::Abort:
      if (auto m = decodeError(payload); m.ok()) {
        auto again = decodeError(payloadOf(encodeError(*m)));
        check(again.ok() && again->status == m->status && again->reason == m->reason);
      }
      break;
    case MsgType::PeerHello:
      if (auto m = decodePeerHello(payload); m.ok()) {
        auto again = decodePeerHello(payloadOf(encodePeerHello(*m)));
        check(again.ok() && again->nonce == m->nonce && again->commNonce == m->commNonce && again->from == m->from &&
              again->purpose == m->purpose && again->proof == m->proof);
      }
      break;
    case MsgType::Leave:
      if (auto m = decodeLeave(payload); m.ok()) {
        auto again = decodeLeave(payloadOf(encodeLeave(*m)));
        check(again.ok() && *again == *m);
      }
      break;
    case MsgType::Challenge:
      if (auto m = decodeChallenge(payload); m.ok()) {
        auto again = decodeChallenge(payloadOf(encodeChallenge(*m)));
        check(again.ok() && *again == *m);
      }
      break;
    case MsgType::Direct:  // opaque: its reader bounds it by the caller's maximum
      break;
    case MsgType::Keepalive:  // the root reads keepalives as headers that leave no room for a payload
      check(decodeHeader(std::span<const uint8_t, kHeaderBytes>(data, kHeaderBytes), 0).ok() == (h->length == 0));
      break;
  }
  return 0;
}
