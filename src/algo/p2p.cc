#include "src/algo/p2p.h"

#include <algorithm>

#include "src/algo/steps.h"

namespace tempo::algo {

P2pPieces p2pPieces(uint64_t bytes, uint64_t chunk) {
  if (chunk == 0 || bytes < chunk) return {1, bytes};
  return {bytes / chunk + 1, bytes % chunk};
}

void P2pPlanner::add(bool send, int peer, uint64_t bytes, Loc at, uint64_t chunk, uint32_t* msg) {
  const P2pPieces p = p2pPieces(bytes, chunk);
  messages_.push_back({send, peer, at, chunk, *msg, p});
  *msg += uint32_t(p.count);
}

void P2pPlanner::emit(Plan& plan) {
  uint64_t levels = 0;
  for (const Message& m : messages_) levels = std::max(levels, m.pieces.count);
  for (uint64_t k = 0; k < levels; ++k)
    for (const Message& m : messages_) {
      if (k >= m.pieces.count) continue;
      const uint64_t len = k + 1 == m.pieces.count ? m.pieces.last : m.chunk;
      // An empty piece names no memory (so none on the device either).
      const Loc where = len == 0 ? absolute(nullptr) : Loc{m.at.buf, m.at.offset + k * m.chunk};
      Step s = transfer(m.send ? StepKind::Send : StepKind::Recv, m.peer, m.msg + k, len, where, kNoDep);
      s.travelsEmpty = true;
      plan.add(s);
    }
  messages_.clear();
}

}  // namespace tempo::algo
