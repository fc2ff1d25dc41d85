#include "src/topo/place.h"

#include <sched.h>

#include <algorithm>
#include <string>

namespace tempo::topo {

int numaOfCpus(const Machine& m, std::span<const int> cpus) {
  if (cpus.empty()) return -1;
  for (size_t node = 0; node < m.numaCpus.size(); ++node) {
    const std::vector<int>& mine = m.numaCpus[node];  // ascending, as hwloc lists them
    const bool all = std::all_of(cpus.begin(), cpus.end(),
                                 [&](int c) { return std::binary_search(mine.begin(), mine.end(), c); });
    if (all) return int(node);
  }
  return -1;
}

int nicFor(const Machine& m, int gpu, int numa) {
  if (gpu >= 0 && size_t(gpu) < m.nearestNic.size()) return m.nearestNic[size_t(gpu)];
  int best = -1, bestScore = 0;
  for (size_t i = 0; i < m.nics.size(); ++i) {
    const PciDevice& nic = m.nics[i];
    // Lower is better: lacking RDMA costs more than sitting on another node.
    const int score = (nic.rdma ? 0 : 2) + (numa >= 0 && nic.numa == numa ? 0 : 1);
    if (best < 0 || score < bestScore) best = int(i), bestScore = score;
  }
  return best;
}

std::string nicName(const PciDevice& nic) {
  if (!nic.rdmaName.empty()) return nic.rdmaName;
  return nic.names.empty() ? std::string() : nic.names.front();
}

std::string cpuListString(std::span<const int> cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(cpus[j]);
    }
    i = j + 1;
  }
  return out;
}

std::vector<int> boundCpus() {
  std::vector<int> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

}  // namespace tempo::topo
