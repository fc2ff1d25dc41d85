#include "src/topo/locality.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

namespace tempo::topo {
namespace {

std::string switchLevelName(int k, int topLevel) {
  if (k == 1) return "leaf";
  if (k == topLevel) return "spine";
  return "agg" + std::to_string(k - 1);
}

}  // namespace

// Puts the NUMA level under the hosts when it splits some host; see placeRanks.
void addNumaLevel(Locality& loc, std::span<const int> numaOfRank) {
  const size_t n = size_t(loc.nranks);
  if (numaOfRank.size() != n) return;
  std::map<std::pair<int, int>, int> id;  // (host, node) -> group
  std::vector<int> groups(n);
  for (size_t r = 0; r < n; ++r)
    groups[r] = id.emplace(std::pair(loc.group[0][r], numaOfRank[r]), int(id.size())).first->second;
  if (id.size() == std::unordered_set<int>(loc.group[0].begin(), loc.group[0].end()).size()) return;
  loc.group.insert(loc.group.begin(), std::move(groups));
  loc.levelNames.insert(loc.levelNames.begin(), "numa");
  loc.hostLevel = 1;
}

Locality placeRanks(std::span<const std::string> hostOfRank, const SwitchMap* map, std::span<const int> numaOfRank) {
  Locality loc;
  loc.nranks = int(hostOfRank.size());
  const size_t n = hostOfRank.size();

  // Level 0: hosts, numbered by first appearance.
  std::unordered_map<std::string, int> hostId;
  loc.group.emplace_back(n);
  for (size_t r = 0; r < n; ++r) loc.group[0][r] = hostId.emplace(hostOfRank[r], int(hostId.size())).first->second;
  loc.levelNames.push_back("host");
  if (!map || map->switches.empty()) {
    addNumaLevel(loc, numaOfRank);
    return loc;
  }

  // Levels 1..height+1: the switches above each host, leaf first, the root repeated.
  const int switchLevels = map->height() + 1;
  const int unmappedBase = int(map->switches.size());  // ids for the chains of unmapped hosts
  std::unordered_set<std::string> unmappedSeen;
  for (int k = 1; k <= switchLevels; ++k) {
    loc.group.emplace_back(n);
    loc.levelNames.push_back(switchLevelName(k, switchLevels));
  }
  for (size_t r = 0; r < n; ++r) {
    const std::vector<int> path = map->pathOf(hostOfRank[r]);
    if (path.empty() && unmappedSeen.insert(hostOfRank[r]).second) loc.unmapped.push_back(hostOfRank[r]);
    for (int k = 1; k <= switchLevels; ++k) {
      const size_t i = size_t(k - 1);
      loc.group[size_t(k)][r] =
          path.empty() ? unmappedBase + loc.group[0][r] : path[std::min(i, path.size() - 1)];
    }
  }
  addNumaLevel(loc, numaOfRank);
  return loc;
}

std::vector<int> localityRing(const Locality& loc) {
  const size_t n = size_t(loc.nranks);
  const int levels = loc.levels();
  // The lowest rank of each rank's group at each level: sorting by these top level first
  // (then by rank) makes every group contiguous and orders groups by their lowest rank.
  std::vector<std::vector<int>> lowest(static_cast<size_t>(levels), std::vector<int>(n, 0));
  for (int k = 0; k < levels; ++k) {
    std::unordered_map<int, int> low;
    for (size_t r = 0; r < n; ++r) low.emplace(loc.group[size_t(k)][r], int(r));  // first = lowest
    for (size_t r = 0; r < n; ++r) lowest[size_t(k)][r] = low[loc.group[size_t(k)][r]];
  }
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    for (int k = levels - 1; k >= 0; --k) {
      const int la = lowest[size_t(k)][size_t(a)], lb = lowest[size_t(k)][size_t(b)];
      if (la != lb) return la < lb;
    }
    return a < b;
  });
  return order;
}

std::vector<int> ringCrossings(std::span<const int> order, const Locality& loc) {
  std::vector<int> crossings(size_t(loc.levels()), 0);
  const size_t n = order.size();
  if (n < 2) return crossings;
  for (size_t i = 0; i < n; ++i) {
    const size_t a = size_t(order[i]), b = size_t(order[(i + 1) % n]);
    for (int k = 0; k < loc.levels(); ++k) crossings[size_t(k)] += loc.group[size_t(k)][a] != loc.group[size_t(k)][b];
  }
  return crossings;
}

std::vector<int> minimalCrossings(const Locality& loc) {
  std::vector<int> out;
  for (const auto& g : loc.group) {
    const size_t groups = std::unordered_set<int>(g.begin(), g.end()).size();
    out.push_back(groups > 1 ? int(groups) : 0);
  }
  return out;
}

std::string ringString(std::span<const int> order) {
  std::string s;
  for (int r : order) {
    if (!s.empty()) s += ' ';
    s += std::to_string(r);
  }
  return s;
}

}  // namespace tempo::topo
