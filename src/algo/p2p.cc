#include "src/algo/p2p.h"

#include "src/algo/steps.h"

namespace tempo::algo {

P2pPieces p2pPieces(uint64_t bytes, uint64_t chunk) {
  if (chunk == 0 || bytes < chunk) return {1, bytes};
  return {bytes / chunk + 1, bytes % chunk};
}

void addP2pMessage(Plan& plan, bool send, int peer, uint64_t bytes, Loc at, uint64_t chunk, uint32_t* msg) {
  const P2pPieces p = p2pPieces(bytes, chunk);
  for (uint64_t k = 0; k < p.count; ++k) {
    const uint64_t len = k + 1 == p.count ? p.last : chunk;
    // An empty piece names no memory (so none on the device either).
    const Loc where = len == 0 ? absolute(nullptr) : Loc{at.buf, at.offset + k * chunk};
    Step s = transfer(send ? StepKind::Send : StepKind::Recv, peer, (*msg)++, len, where, kNoDep);
    s.travelsEmpty = true;
    plan.add(s);
  }
}

}  // namespace tempo::algo
