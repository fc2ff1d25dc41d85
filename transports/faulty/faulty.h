// Fault-injecting endpoint (TEMPO_FAULT): a wire that misbehaves, for testing what the
// layers above make of it.
//
// Wraps any endpoint and, on the sending side, applies to each message independently:
//   corrupt=P   flips one random bit of the bytes that travel (a copy; the caller's buffer
//               is untouched)
//   drop=P      completes the send but never delivers it
//   dup=P       delivers the message twice (the send completes with the first copy)
//   reorder=P   holds the message back for reorderUs (200 us), letting later messages to
//               the same peer overtake it
//   delay=US, jitter=US
//               holds every message for delay plus a uniform [0, jitter) microseconds,
//               first in first out per peer (a slow wire, not a reordering one)
//   seed=N      the random stream (per rank: seed and rank together seed it)
// Receives pass through untouched. Under TEMPO_FAULT the communicator puts a framed
// endpoint (transports/framed) above this one, so every corruption, duplicate or
// same-tag reordering surfaces as a clean error and every reordering across tags, which
// the transport contract allows, as bit-exact results; a dropped message is found by
// TEMPO_COLL_TIMEOUT.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "transports/transport.h"

namespace tempo::transport::faulty {

struct Faults {
  double corrupt = 0, drop = 0, dup = 0, reorder = 0;  // probabilities per message
  int64_t delayNs = 0, jitterNs = 0;
  int64_t reorderNs = 200 * 1000;
  uint64_t seed = 1;
  bool any() const { return corrupt > 0 || drop > 0 || dup > 0 || reorder > 0 || delayNs > 0 || jitterNs > 0; }
  std::string describe() const;  // "corrupt=0.01,delay=50" (the faults that are set)
};

// Parses TEMPO_FAULT's syntax; InvalidArgument naming the bad item otherwise.
Result<Faults> parse(std::string_view spec);

// How many messages each fault touched on one endpoint so far.
struct Counts {
  uint64_t sent = 0, corrupted = 0, dropped = 0, duplicated = 0, reordered = 0;
};

// Takes ownership of `inner`; `rank` varies the random stream between ranks. The counts
// are also logged (INFO) when the endpoint is destroyed.
std::unique_ptr<Endpoint> create(std::unique_ptr<Endpoint> inner, const Faults& faults, int rank);
// The counts of an endpoint create() made (zeros for any other endpoint).
Counts countsOf(const Endpoint& ep);

}  // namespace tempo::transport::faulty
