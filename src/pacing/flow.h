// Topology tiers and the data one collective received from each (pacing.md 1.8, F5):
// what the engine records and TEMPO_TRACE writes as rx_<tier>, and what tempo-diagnose
// reads back. Pure: no I/O.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tempo::pacing {

// Where a peer sits relative to this rank: on the same host, under the same leaf switch,
// or beyond it (across the spine; with no switch map, any other host).
enum class Tier : uint8_t { Host = 0, Leaf, Fabric };
inline constexpr size_t kTiers = 3;
inline constexpr const char* kTierNames[kTiers] = {"host", "leaf", "fabric"};
inline const char* tierName(Tier t) { return kTierNames[size_t(t)]; }

// The data one collective received from one tier's peers: bytes and messages, the
// completion times of the first and last message, and the bytes that arrived after the
// first (so that paced / (last - first) is the rate at which that tier delivered once it
// flowed). All 0 when nothing came from the tier.
struct TierFlow {
  uint64_t bytes = 0, paced = 0;
  uint32_t msgs = 0;
  int64_t first = 0, last = 0;
};

}  // namespace tempo::pacing
