// Mismatch detection's share of a plan: the fingerprint exchange put in front of it.
//
// Every rank's `bytes`-byte fingerprint of its call travels in fingerprintRounds(n)
// dissemination rounds. In round k it goes to rank + 2^k and that of rank - 2^k arrives,
// and a Check step compares the two. Round k's send waits for round k-1's check, and each
// check for the one before it, so a rank's last check passes only if every rank's
// fingerprint equals its own (the ranks it has verified, directly or through the senders'
// own checks, double every round): a mismatch anywhere fails the collective on every
// rank, in ceil(log2 n) small messages per rank. The plan's own steps do not wait for it,
// so detection adds no latency to the data path.
//
// Round 0's message also carries the collective's first data message to rank + 1 when
// that message is small (at most kMaxCarriedBytes) and needs nothing from a peer: one
// message instead of two, which is what makes detection free at small sizes. The sender
// alone decides (only it knows what its message waits for) and says so in its
// fingerprint; the receiver's matching receive becomes a RecvCarried step that takes the
// data from round 0's message if it came there, or receives it as usual if not.
#pragma once

#include <cstdint>

#include "src/algo/plan.h"

namespace tempo::algo {

inline constexpr uint64_t kMaxCarriedBytes = 1024;

// Where the exchange's buffers are (Absolute locations in practice: they live in the op).
struct FingerprintLocs {
  Loc mine;      // this rank's fingerprint, `bytes` long; rounds 1.. send it
  Loc leadOut;   // round 0's message: the fingerprint, then room for kMaxCarriedBytes
  Loc leadIn;    // where the previous rank's round-0 message lands (as large as leadOut)
  Loc theirs;    // round k >= 1's fingerprint lands at theirs + (k - 1) * bytes
  uint64_t bytes = 0;
};

uint32_t fingerprintRounds(int nranks);

// The plan's first 3 x rounds steps are the exchange: round k's Send (a no-op in round 0
// when it carries data: the Send then follows the carried copy, further on), Recv, Check.
inline uint32_t fingerprintRecvStep(uint32_t round) { return 3 * round + 1; }
inline uint32_t fingerprintCheckStep(uint32_t round) { return 3 * round + 2; }

// Puts the exchange in front of `plan` (renumbering its dependencies) with messages
// `msg` - k, and returns how many data bytes round 0's message carries; the caller writes
// that count into the fingerprint it puts at leadOut. The plan's carriedRecv is set to its
// RecvCarried step, if it has one.
uint64_t prependFingerprint(Plan& plan, int rank, int nranks, uint32_t msg, const FingerprintLocs& at);

}  // namespace tempo::algo
