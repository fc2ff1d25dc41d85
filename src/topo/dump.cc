#include "src/topo/dump.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "src/topo/text_file.h"

namespace tempo::topo {

std::string dumpTopology(const SwitchMap& map, std::span<const std::string> hostOfRank,
                         std::span<const int> numaOfRank) {
  std::string out = "# Tempo job topology: a Slurm switch map, then each rank's host (and NUMA node)\n";
  for (const SwitchMap::Switch& s : map.switches) {
    out += "SwitchName=" + s.name;
    auto list = [&](const char* key, auto begin, auto end, auto name) {
      if (begin == end) return;
      out += std::string(" ") + key + "=";
      for (auto it = begin; it != end; ++it) {
        if (it != begin) out += ',';
        out += name(*it);  // not "," + name(...): GCC 12 warns falsely (-Wrestrict) on that
      }
    };
    list("Nodes", s.hosts.begin(), s.hosts.end(), [](const std::string& h) { return h; });
    list("Switches", s.children.begin(), s.children.end(), [&](int c) { return map.switches[size_t(c)].name; });
    out += "\n";
  }
  for (size_t r = 0; r < hostOfRank.size(); ++r) {
    out += "Rank=" + std::to_string(r) + " Host=" + hostOfRank[r];
    if (r < numaOfRank.size() && numaOfRank[r] >= 0) out += " Numa=" + std::to_string(numaOfRank[r]);
    out += "\n";
  }
  return out;
}

Result<JobTopology> parseTopology(std::string_view text, const std::string& source) {
  // Rank lines are taken out (replaced by empty lines, so switch map errors keep their
  // line numbers); the rest is the switch map.
  JobTopology job;
  std::string mapText;
  std::vector<bool> seen;
  TEMPO_TRY(forEachLine(text, [&](std::string_view view, int lineNo) -> Status {
    const std::string line(view);
    if (line.rfind("Rank=", 0) != 0) {
      mapText += line + "\n";
      return Status::Success;
    }
    mapText += "\n";
    long rank = -1, numa = -1;
    char host[256] = {};
    int used = 0, usedNuma = 0;
    bool good = std::sscanf(line.c_str(), "Rank=%ld Host=%255s%n", &rank, host, &used) == 2 && rank >= 0 &&
                rank <= 1 << 24;
    const char* rest = line.c_str() + used;
    rest += std::strspn(rest, " \t");
    const bool hasNuma = good && *rest;
    if (hasNuma)
      good = std::sscanf(rest, "Numa=%ld%n", &numa, &usedNuma) == 1 && numa >= 0 && numa < 4096 &&
             rest[usedNuma + std::strspn(rest + usedNuma, " \t")] == '\0';
    if (!good)
      return fail(Status::InvalidArgument, "%s:%d: expected 'Rank=<r> Host=<name> [Numa=<node>]', got '%s'",
                  source.c_str(), lineNo, line.c_str());
    if (size_t(rank) >= job.hostOfRank.size()) {
      job.hostOfRank.resize(size_t(rank) + 1);
      seen.resize(size_t(rank) + 1);
    }
    if (seen[size_t(rank)])
      return fail(Status::InvalidArgument, "%s:%d: rank %ld is given twice", source.c_str(), lineNo, rank);
    seen[size_t(rank)] = true;
    job.hostOfRank[size_t(rank)] = host;
    if (hasNuma) {
      if (job.numaOfRank.size() <= size_t(rank)) job.numaOfRank.resize(size_t(rank) + 1, -1);
      job.numaOfRank[size_t(rank)] = int(numa);
    }
    return Status::Success;
  }));
  for (size_t r = 0; r < seen.size(); ++r)
    if (!seen[r]) return fail(Status::InvalidArgument, "%s: rank %zu has no Rank line", source.c_str(), r);
  if (!job.numaOfRank.empty()) job.numaOfRank.resize(job.hostOfRank.size(), -1);
  TEMPO_ASSIGN(job.map, parseSwitchMap(mapText, source));
  return job;
}

Result<JobTopology> loadTopology(const std::string& path) {
  TEMPO_ASSIGN(std::string text, readTextFile(path, "topology"));
  return parseTopology(text, path);
}

Status writeTopology(const std::string& path, const SwitchMap& map, std::span<const std::string> hostOfRank,
                     std::span<const int> numaOfRank) {
  std::ofstream out(path, std::ios::trunc);
  if (out) out << dumpTopology(map, hostOfRank, numaOfRank);
  if (!out) return fail(Status::SystemError, "cannot write the topology dump %s: %s", path.c_str(), std::strerror(errno));
  return Status::Success;
}

}  // namespace tempo::topo
