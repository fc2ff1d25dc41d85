// The switch map: which hosts hang off which leaf switch, and how switches nest, read from
// Slurm's topology.conf (the topology/tree plugin's format, as on the clusters that run
// Slurm):
//
//   # comment
//   SwitchName=leaf0 Nodes=node[01-04]
//   SwitchName=spine0 Switches=leaf[0-3]
//
// Keys are case-insensitive; LinkSpeed= is accepted and ignored. A switch's level is its
// height: 0 for a switch with no child switches (a leaf), else one more than its highest
// child. Disjoint trees (several roots) are allowed, as in Slurm; hosts under different
// roots share no switch.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "src/core/status.h"

namespace tempo::topo {

struct SwitchMap {
  struct Switch {
    std::string name;
    int parent = -1;            // index in switches, -1 for a root
    int level = 0;              // height above the hosts' leaf level
    std::vector<int> children;  // child switches, in file order
    std::vector<std::string> hosts;
  };
  std::vector<Switch> switches;                  // in file order
  std::unordered_map<std::string, int> leafOf;   // host -> the switch it hangs off

  // The switches from `host`'s leaf up to its root; empty for a host the map does not name.
  std::vector<int> pathOf(const std::string& host) const;
  int height() const;  // the highest level, or -1 for an empty map
};

// InvalidArgument for anything Slurm would refuse, naming `source` and the line: an
// unknown key, a line without SwitchName, a switch defined twice, a child switch that is
// never defined or has two parents, a cycle, a host under two switches, a bad hostlist.
Result<SwitchMap> parseSwitchMap(std::string_view text, const std::string& source);
// Reads and parses a file; SystemError when it cannot be read.
Result<SwitchMap> loadSwitchMap(const std::string& path);

}  // namespace tempo::topo
