// A job's topology as a file: the switch map (Slurm topology.conf lines) followed by one
// `Rank=<r> Host=<name> [Numa=<node>]` line per rank (Numa: the NUMA node of the rank's CPU
// binding, where it has one). TEMPO_TOPO_DUMP_FILE makes rank 0 of every
// communicator write one at init (as NCCL_TOPO_DUMP_FILE does for NCCL's XML), and
// tools/tempo-topo --load reads it back, so a user's report becomes a test fixture.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/core/status.h"
#include "src/topo/switch_map.h"

namespace tempo::topo {

struct JobTopology {
  SwitchMap map;
  std::vector<std::string> hostOfRank;
  std::vector<int> numaOfRank;  // -1 where a rank's line gives none; empty when none does
};

// The file's text; every switch on one line, hosts and child switches listed in full.
// `numaOfRank` is empty or has an entry per rank (-1: not written).
std::string dumpTopology(const SwitchMap& map, std::span<const std::string> hostOfRank,
                         std::span<const int> numaOfRank = {});
// InvalidArgument, naming the line, for a bad Rank line, ranks missing or given twice, or
// any switch map error (see parseSwitchMap).
Result<JobTopology> parseTopology(std::string_view text, const std::string& source);
Result<JobTopology> loadTopology(const std::string& path);
// Writes dumpTopology's text to `path` (SystemError when it cannot).
Status writeTopology(const std::string& path, const SwitchMap& map, std::span<const std::string> hostOfRank,
                     std::span<const int> numaOfRank = {});

}  // namespace tempo::topo
