// Where each rank of a communicator sits in the hierarchy (host, leaf switch, higher
// switches), and rings laid out along it.
//
// Level hostLevel groups ranks by host; below it (when ranks of one host sit on different
// NUMA nodes) level 0 groups them by host and NUMA node; level hostLevel + k, k >= 1, by
// the switch k-1 levels above the host's leaf (hostLevel + 1: leaf switch, then upward;
// hosts whose tree is shallower repeat their root). Two
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
  std::vector<std::string> levelNames;  // ["numa",] "host", "leaf", ..., "spine"
  std::vector<std::string> unmapped;    // hosts of ranks the switch map does not name
  int hostLevel = 0;                    // 1 when there is a NUMA level below the hosts
  int levels() const { return int(group.size()); }
  const std::vector<int>& hosts() const { return group[size_t(hostLevel)]; }  // host id per rank
};

// `hostOfRank[r]` is rank r's host name. Without a map (or an empty one) the top level is
// the host. Hosts the map does not name sit under a switch chain of their own, so they
// share no switch with anyone (they are listed in `unmapped`, for a warning).
// `numaOfRank` (empty, or one entry per rank: the NUMA node of its CPU binding, -1 when
// unknown) adds the "numa" level when some host holds ranks on different nodes (a rank of
// unknown node counts as a node of its own); otherwise that level would add nothing, and
// there is none.
Locality placeRanks(std::span<const std::string> hostOfRank, const SwitchMap* map,
                    std::span<const int> numaOfRank = {});

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
