// Liveness timing shared by every bootstrap wait that judges a silent peer: the ring
// heartbeats of a formed communicator and the keepalives between the root and the ranks
// waiting for their table during init.
//
// A peer is silent once nothing has arrived from it for TEMPO_PEER_TIMEOUT seconds while
// its connection stayed open: its process is stopped, hung or unreachable. Beats go out
// once a second, or every quarter of the timeout when that is shorter, so that one late
// beat is never taken for silence. Judges always read what has arrived before judging, so
// that a process which was itself stopped does not blame its peers on waking.
#pragma once

#include <algorithm>
#include <cstdint>

#include "src/core/param.h"

namespace tempo::bootstrap {

// The silence after which a peer is judged gone, in ns; 0: never judged.
inline int64_t peerTimeoutNs() { return std::max<int64_t>(0, param::PeerTimeout()) * 1000000000; }

// How often a beat is sent, in ns, for a given peerTimeoutNs().
inline int64_t beatPeriodNs(int64_t timeoutNs) {
  return timeoutNs > 0 ? std::min<int64_t>(1000000000, timeoutNs / 4) : 1000000000;
}

}  // namespace tempo::bootstrap
