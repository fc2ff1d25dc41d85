// Proof of the job secret without sending it.
//
// Every bootstrap message that admits a connection (a rank's hello to the root, the root's
// rank table, a rank's hello to a peer) ends in a 32-byte proof: HMAC-SHA-256, keyed by the
// job secret, of a label naming the message kind, a context the receiver chose or knows
// (the root's challenge nonce; the rank's own hello nonce) and the SHA-256 digest of the
// payload before the proof. So the secret never crosses the wire, a listener learns
// nothing about it from a probe (verification is constant time), a recorded hello cannot
// be replayed to the root (every connection gets a fresh challenge) nor to a peer (each
// listener remembers the hello nonces it has admitted), and a rank accepts only a table
// bound to its own fresh nonce. HMAC and digests come from libsodium.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <set>
#include <span>
#include <vector>

#include "src/bootstrap/wire.h"

namespace tempo::bootstrap {

enum class ProofLabel : uint8_t { Hello = 1, Table = 2, PeerHello = 3 };
using Digest = std::array<uint8_t, 32>;

// A fresh random nonce (the kernel's random source through libsodium).
Nonce freshNonce();

// SHA-256 of the payload before its proof: `payload` without its last kProofBytes.
Digest bodyDigest(std::span<const uint8_t> payload);
// The proof of `digest` under `secret`, for `label` in `context`.
Proof prove(const Secret& secret, ProofLabel label, std::span<const uint8_t> context, const Digest& digest);

// Fills the proof field that ends framed message `msg` (header included).
void seal(std::vector<uint8_t>& msg, const Secret& secret, ProofLabel label, std::span<const uint8_t> context);
// Whether `payload` (header excluded) ends in the proof seal() writes. Constant time;
// false for a payload shorter than a proof.
bool verifySealed(std::span<const uint8_t> payload, const Secret& secret, ProofLabel label,
                  std::span<const uint8_t> context);

// The secret of an NCCL_COMM_ID job, which has none in its id: derived from TEMPO_SECRET
// (SHA-256 of its text) when that is set, else all zero (anyone who can reach the root's
// port can join, as with NCCL). Every rank must set the same TEMPO_SECRET.
Secret commIdSecret();

// The hello nonces a listener has admitted: a nonce seen before is a replay.
class ReplayGuard {
 public:
  // True the first time `n` is offered, false ever after.
  bool firstUse(const Nonce& n) { return seen_.insert(n).second; }

 private:
  std::set<Nonce> seen_;  // one per admitted connection of one communicator: a few
};

}  // namespace tempo::bootstrap
