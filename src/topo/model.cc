#include "src/topo/model.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <utility>

namespace tempo::topo {

double predictRingAllReduceUs(const Locality& loc, std::span<const int> ring, uint64_t bytes, const LinkModel& m) {
  const size_t n = ring.size();
  if (n < 2) return 0;
  const int levels = loc.levels(), h = loc.hostLevel;
  // Phase 1: uplink capacity of every group, bottom up from the hosts' links (a NUMA
  // level below them is inside the host: it has no link of its own here).
  std::vector<std::map<int, double>> capacity(static_cast<size_t>(levels));
  for (size_t r = 0; r < n; ++r) capacity[size_t(h)][loc.group[size_t(h)][r]] = m.hostGBps;
  for (int k = h + 1; k < levels; ++k) {
    std::map<int, std::set<int>> members;  // group at k -> its groups at k-1
    for (size_t r = 0; r < n; ++r) members[loc.group[size_t(k)][r]].insert(loc.group[size_t(k - 1)][r]);
    for (const auto& [g, below] : members) {
      double sum = 0;
      for (int b : below) sum += capacity[size_t(k - 1)][b];
      capacity[size_t(k)][g] = sum / std::max(1.0, m.oversub);
    }
  }
  // Phase 2: which links each hop crosses (level, group, direction: 0 up, 1 down), and
  // how many hops share each. The top level's groups have no uplink.
  using Link = std::tuple<int, int, int>;
  std::map<Link, int> load;
  std::vector<std::vector<Link>> crossed(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t a = size_t(ring[i]), b = size_t(ring[(i + 1) % n]);
    for (int k = h; k + 1 < levels || (k == h && levels == h + 1); ++k) {
      const int ga = loc.group[size_t(k)][a], gb = loc.group[size_t(k)][b];
      if (ga == gb) break;  // the same group here is the same group above
      crossed[i].push_back({k, ga, 0});
      crossed[i].push_back({k, gb, 1});
    }
    for (const Link& l : crossed[i]) ++load[l];
  }
  // Phase 3: the slowest hop sets the step time.
  double slowest = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < n; ++i) {
    double rate = crossed[i].empty() ? m.intraHostGBps : std::numeric_limits<double>::infinity();
    for (const Link& l : crossed[i]) {
      const auto& [k, g, dir] = l;
      rate = std::min(rate, capacity[size_t(k)][g] / load[l]);
    }
    slowest = std::min(slowest, rate);
  }
  const double stepBytes = double(bytes) / double(n);
  return double(2 * (n - 1)) * (m.alphaUs + stepBytes / (slowest * 1e3));  // GB/s = 1e3 bytes/us
}

}  // namespace tempo::topo
