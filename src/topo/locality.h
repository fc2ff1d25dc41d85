// Where each rank of a communicator sits in the hierarchy (host, leaf switch, higher
// switches), and rings laid out along it.
//
// Level 0 groups ranks by host; level k >= 1 by the switch k-1 levels above the host's
// leaf (1: leaf switch, then upward; hosts whose tree is shallower repeat their root). Two
// ranks are in the same group at level k when group[k] matches; a ring hop between them
// "crosses level k" when it does not. Locality is a plain value: the ring builders are pure
// functions of it, so they are tested on fixtures.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "src/topo/switch_map.h"

namespace tempo::topo {

struct Locality {
  int nranks = 0;
  std::vector<std::vector<int>> group;  // group[level][rank]: a group id, equal within a group
  std::vector<std::string> levelNames;  // "host", "leaf", ..., "spine"
  std::vector<std::string> unmapped;    // hosts of ranks the switch map does not name
  int levels() const { return int(group.size()); }
};

// `hostOfRank[r]` is rank r's host name. Without a map (or an empty one) there is one
// level, the host. Hosts the map does not name sit under a switch chain of their own, so
// they share no switch with anyone (they are listed in `unmapped`, for a warning).
Locality placeRanks(std::span<const std::string> hostOfRank, const SwitchMap* map);

// A ring (ranks in ring order) in which every group at every level is contiguous, so that
// the ring crosses the boundary of each level-k group exactly twice: it enters and leaves
// it once. Groups are ordered by their lowest rank and ranks inside a group by rank, so a
// communicator whose ranks are already numbered along the hierarchy keeps rank order.
std::vector<int> localityRing(const Locality& loc);

// For each level, how many hops of the ring `order` join ranks in different groups.
std::vector<int> ringCrossings(std::span<const int> order, const Locality& loc);

// For each level, the fewest crossings any ring can have: the number of groups at that
// level when there are several, else 0.
std::vector<int> minimalCrossings(const Locality& loc);

// "0 1 2 3" for logs.
std::string ringString(std::span<const int> order);

}  // namespace tempo::topo
