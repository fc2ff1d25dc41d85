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
#include <vector>

#include "src/algo/plan.h"

namespace tempo::algo {

// `count` pieces: count - 1 of `chunk` bytes, then one of `last` bytes.
struct P2pPieces {
  uint64_t count = 1, last = 0;
};
P2pPieces p2pPieces(uint64_t bytes, uint64_t chunk);

// Builds the transfers of one group's point-to-point calls. add() takes each message in
// call order and numbers its pieces from *msg (the pair and direction's counter, which
// moves past them); emit() appends their steps to a plan level by level: every message's
// first piece, then every message's second piece, and so on. Every piece travels, empty
// ones too, so both sides' numbering stays in step.
//
// Why level by level: the engine posts a plan's steps in order while it has request slots
// (sends and receives at most half of them each), so when a group has more pieces than
// slots, the pieces every rank waits for first are the ones every rank posts first, and a
// long message to one peer does not hold back a short one to another. Reuses its memory
// from group to group.
class P2pPlanner {
 public:
  // One message of `bytes` at `at` (an Absolute or Device location) to (`send`) or from
  // `peer`, in pieces of `chunk` bytes (p2pPieces).
  void add(bool send, int peer, uint64_t bytes, Loc at, uint64_t chunk, uint32_t* msg);
  // Appends the messages' steps to `plan` and forgets them.
  void emit(Plan& plan);
  // Forgets them (a group that fails before it is planned).
  void clear() { messages_.clear(); }

 private:
  struct Message {
    bool send;
    int peer;
    Loc at;
    uint64_t chunk;
    uint32_t msg;  // its first piece's number
    P2pPieces pieces;
  };
  std::vector<Message> messages_;
};

}  // namespace tempo::algo
