// Point-to-point messages on the wire: how one ncclSend or ncclRecv becomes messages.
//
// A message longer than the chunk travels in pieces, so that a device buffer's copies
// through pinned slots overlap its transfers (device_lowering.h) and no slot need be as
// large as the whole message: floor(bytes / chunk) pieces of exactly `chunk` bytes, then
// one of the rest, which travels even when it is empty. A shorter message, and every
// message when chunk is 0, travels whole (as one piece). Each piece takes the next
// message number of its pair and direction.
//
// Why the empty last piece: each side cuts by its own length, and where the send and the
// receive disagree on the length the receiver must see it in some piece (one longer or
// shorter than its receive, which fails the call) rather than end early with the
// sender's later pieces waiting forever, or wait for pieces that never come. Every piece
// but the last is exactly `chunk` long and every last piece is shorter, so no layout is a
// prefix of another: two different lengths first differ at a piece that both sides post.
// The chunk must be the same on every rank (TEMPO_P2P_CHUNK_SIZE).
#pragma once

#include <cstdint>

#include "src/algo/plan.h"

namespace tempo::algo {

// `count` pieces: count - 1 of `chunk` bytes, then one of `last` bytes.
struct P2pPieces {
  uint64_t count = 1, last = 0;
};
P2pPieces p2pPieces(uint64_t bytes, uint64_t chunk);

// Appends the Send steps (`send`) or Recv steps of one message of `bytes` at `at` (an
// Absolute or Device location) with `peer`: its pieces, numbered from *msg, which moves
// past them. Every piece travels, empty ones too, so both sides' numbering stays in step.
void addP2pMessage(Plan& plan, bool send, int peer, uint64_t bytes, Loc at, uint64_t chunk, uint32_t* msg);

}  // namespace tempo::algo
