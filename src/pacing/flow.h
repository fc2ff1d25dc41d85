// Topology tiers and the data one collective received from each (pacing.md 1.8, F5):
// what the engine records and TEMPO_TRACE writes as rx_<tier>, and what tempo-diagnose
// reads back. Pure: no I/O.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace tempo::pacing {

// Where a peer sits relative to this rank: on the same host, under the same leaf switch,
// or beyond it (across the spine; with no switch map, any other host).
enum class Tier : uint8_t { Host = 0, Leaf, Fabric };
inline constexpr size_t kTiers = 3;
inline constexpr const char* kTierNames[kTiers] = {"host", "leaf", "fabric"};
inline const char* tierName(Tier t) { return kTierNames[size_t(t)]; }

// The data one collective received from one tier's peers, or from one peer: bytes and
// messages, the completion times of the first and last message, and the bytes that
// arrived after the first (so that paced / (last - first) is the rate at which the data
// came once it flowed). All 0 when nothing came.
struct Flow {
  uint64_t bytes = 0, paced = 0;
  uint32_t msgs = 0;
  int64_t first = 0, last = 0;
  void add(uint64_t n, int64_t at) {
    if (msgs++ == 0) first = at;
    else paced += n;
    bytes += n;
    last = at;
  }
};

// One peer's flow into one collective, with the peer's tier.
struct PeerFlow {
  int32_t peer = -1;
  Tier tier = Tier::Host;
  Flow flow;
};

// The flows of the first kPeerFlows peers one collective received from, in order of
// first arrival (a ring has one such peer, a tree up to three, recursive doubling
// log2 n); messages from further peers are only counted.
inline constexpr size_t kPeerFlows = 8;
struct PeerFlows {
  std::array<PeerFlow, kPeerFlows> flows;  // [0, count) are valid
  uint8_t count = 0;
  uint32_t unkept = 0;
  void clear() { count = 0, unkept = 0; }
  void add(int peer, Tier tier, uint64_t bytes, int64_t at) {
    for (size_t i = 0; i < count; ++i)
      if (flows[i].peer == peer) return flows[i].flow.add(bytes, at);
    if (count == kPeerFlows) {
      ++unkept;
      return;
    }
    flows[count++] = {peer, tier, {}};
    flows[count - 1].flow.add(bytes, at);
  }
};

}  // namespace tempo::pacing
