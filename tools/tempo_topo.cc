// tempo-topo: what Tempo makes of a cluster's topology. Reads a switch map (Slurm
// topology.conf) and a placement of ranks on hosts, or a job topology dump, and prints the
// switch tree, the placement, the topology-aware and rank-order rings with their
// crossings per level, and the predicted ring all-reduce time per message size.
//
//   tempo-topo [--topo FILE | --load DUMP] [--hosts HOSTLIST] [--ranks-per-host K]
//              [--numbering block|round-robin] [--dump FILE] [--xml FILE | --synthetic DESC]
//              [--host-gbps G] [--oversub X] [--alpha-us A] [-b MIN] [-e MAX] [-f FACTOR]
//
// First it prints this host as hwloc sees it (packages, NUMA nodes, cores, GPUs and NICs
// with their PCI bus ids and NUMA nodes, each GPU's nearest NIC), from the live machine, a
// hwloc XML (--xml, default TEMPO_TOPO_XML) or a synthetic description (--synthetic).
// --topo defaults to TEMPO_TOPO_FILE. Without --hosts the job is every host of the map, in
// file order. --ranks-per-host K places K consecutive ranks on each host; --numbering
// round-robin deals hosts out across the leaves (rank r on leaf r % L), as a scheduler
// that ignores the topology might. --dump writes the job topology (map and ranks) in the
// format TEMPO_TOPO_DUMP_FILE writes and --load reads.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "src/algo/tree_allreduce.h"
#include "src/core/param.h"
#include "src/core/status.h"
#include "src/topo/dump.h"
#include "src/topo/hostlist.h"
#include "src/topo/locality.h"
#include "src/topo/machine.h"
#include "src/topo/model.h"
#include "src/topo/place.h"
#include "src/tune/tune.h"

using namespace tempo;

namespace {

int usage(const char* why) {
  if (why) std::fprintf(stderr, "tempo-topo: %s\n", why);
  std::fprintf(stderr,
               "usage: tempo-topo [--topo FILE | --load DUMP] [--hosts HOSTLIST] [--ranks-per-host K]\n"
               "                  [--numbering block|round-robin] [--dump FILE] [--xml FILE | --synthetic DESC]\n"
               "                  [--host-gbps G] [--oversub X]\n"
               "                  [--alpha-us A] [-b MIN] [-e MAX] [-f FACTOR]\n");
  return 2;
}

bool parseSize(const char* s, uint64_t* out) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 10);
  uint64_t mul = 1;
  if (*end == 'K' || *end == 'k') mul = 1 << 10, ++end;
  else if (*end == 'M' || *end == 'm') mul = 1 << 20, ++end;
  else if (*end == 'G' || *end == 'g') mul = 1 << 30, ++end;
  if (end == s || *end) return false;
  *out = v * mul;
  return true;
}

void printTree(const topo::SwitchMap& map, int s, int depth) {
  const auto& sw = map.switches[size_t(s)];
  std::printf("%*s%s (level %d)", depth * 2, "", sw.name.c_str(), sw.level);
  if (!sw.hosts.empty()) {
    std::printf(":");
    for (const auto& h : sw.hosts) std::printf(" %s", h.c_str());
  }
  std::printf("\n");
  for (int c : sw.children) printTree(map, c, depth + 1);
}

// The double binary tree among the hosts' leaders (each host's lowest rank, in the
// topology ring's order, as the hierarchical all-reduce lays them out), each rank's
// parent, and how many tree edges cross each level.
void printTrees(const std::vector<int>& ring, const topo::Locality& loc) {
  std::vector<int> leaders;
  std::vector<bool> seen;
  for (int r = 0; r < loc.nranks; ++r) {
    const int h = loc.hosts()[size_t(r)];
    if (size_t(h) >= seen.size()) seen.resize(size_t(h) + 1, false);
    if (!seen[size_t(h)]) seen[size_t(h)] = true, leaders.push_back(r);
  }
  auto position = [&](int r) { return std::find(ring.begin(), ring.end(), r) - ring.begin(); };
  std::stable_sort(leaders.begin(), leaders.end(), [&](int x, int y) { return position(x) < position(y); });
  const int n = int(leaders.size());
  for (int t = 0; t < 2; ++t) {
    std::vector<int> crossings(size_t(loc.levels()), 0);
    std::printf("leader tree %d (rank<-parent):", t);
    for (int p = 0; p < n; ++p) {
      const algo::TreeLinks l = algo::doubleBinaryTree(n, p, t);
      const int r = leaders[size_t(p)];
      if (l.parent < 0) {
        std::printf(" %d(root)", r);
        continue;
      }
      const int up = leaders[size_t(l.parent)];
      std::printf(" %d<-%d", r, up);
      for (int k = 0; k < loc.levels(); ++k) crossings[size_t(k)] += loc.group[size_t(k)][size_t(r)] != loc.group[size_t(k)][size_t(up)];
    }
    std::printf("\n  crossings:");
    for (int k = 0; k < loc.levels(); ++k)
      std::printf("%s %s %d", k ? "," : "", loc.levelNames[size_t(k)].c_str(), crossings[size_t(k)]);
    std::printf("\n");
  }
}

void printRing(const char* what, const std::vector<int>& ring, const topo::Locality& loc) {
  const std::vector<int> c = topo::ringCrossings(ring, loc), least = topo::minimalCrossings(loc);
  std::printf("%s ring: %s\n  crossings:", what, topo::ringString(ring).c_str());
  for (int k = 0; k < loc.levels(); ++k)
    std::printf("%s %s %d (fewest possible %d)", k ? "," : "", loc.levelNames[size_t(k)].c_str(), c[size_t(k)],
                least[size_t(k)]);
  std::printf("\n");
}

void printDevice(const char* what, const topo::PciDevice& d) {
  std::printf("%s %s [%04x:%04x class %04x] numa %d", what, d.busId.c_str(), d.vendorId, d.deviceId, d.classId,
              d.numa);
  for (const auto& n : d.names) std::printf(" %s", n.c_str());
}

void printMachine(const topo::Machine& m, const topo::MachineSource& src) {
  const char* from = src.kind == topo::MachineSource::Live ? "this machine" : src.what.c_str();
  std::printf("# host (%s): %d packages, %d NUMA nodes, %d cores, %d PUs, %zu GPUs, %zu NICs\n", from, m.packages,
              m.numaNodes, m.cores, m.pus, m.gpus.size(), m.nics.size());
  for (size_t g = 0; g < m.gpus.size(); ++g) {
    printDevice(("gpu " + std::to_string(g)).c_str(), m.gpus[g]);
    if (m.nearestNic[g] >= 0) {
      const topo::PciDevice& n = m.nics[size_t(m.nearestNic[g])];
      std::printf("; nearest NIC %s (PCI distance %d)", n.names.empty() ? n.busId.c_str() : n.names[0].c_str(),
                  topo::pciDistance(m.gpus[g], n));
    }
    std::printf("\n");
  }
  for (size_t i = 0; i < m.nics.size(); ++i) {
    printDevice(("nic " + std::to_string(i)).c_str(), m.nics[i]);
    std::printf("\n");
  }
  // What a rank bound to each NUMA node would use (a rank with a GPU takes its GPU's NIC).
  for (size_t node = 0; node < m.numaCpus.size(); ++node) {
    if (m.numaCpus[node].empty()) continue;
    std::printf("numa %zu: cpus %s", node, topo::cpuListString(m.numaCpus[node]).c_str());
    const int nic = topo::nicFor(m, -1, int(node));
    if (nic >= 0) std::printf("; a rank bound here uses NIC %s", topo::nicName(m.nics[size_t(nic)]).c_str());
    std::printf("\n");
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string topoPath = param::TopoFile(), loadPath, dumpPath, hostsExpr, numbering = "block";
  topo::MachineSource machineSource;
  if (*param::TopoXml()) machineSource = {topo::MachineSource::Xml, param::TopoXml()};
  int perHost = 1;
  topo::LinkModel model;
  uint64_t minBytes = 64 << 10, maxBytes = 256 << 20, factor = 4;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") return usage(nullptr), 0;
    if (i + 1 >= argc) return usage(("missing the value of " + a).c_str());
    const char* v = argv[++i];
    if (a == "--topo") topoPath = v;
    else if (a == "--load") loadPath = v;
    else if (a == "--dump") dumpPath = v;
    else if (a == "--hosts") hostsExpr = v;
    else if (a == "--numbering") numbering = v;
    else if (a == "--xml") machineSource = {topo::MachineSource::Xml, v};
    else if (a == "--synthetic") machineSource = {topo::MachineSource::Synthetic, v};
    else if (a == "--ranks-per-host") perHost = std::atoi(v);
    else if (a == "--host-gbps") model.hostGBps = std::atof(v);
    else if (a == "--oversub") model.oversub = std::atof(v);
    else if (a == "--alpha-us") model.alphaUs = std::atof(v);
    else if (a == "-b" || a == "-e" || a == "-f") {
      uint64_t* out = a == "-b" ? &minBytes : a == "-e" ? &maxBytes : &factor;
      if (!parseSize(v, out)) return usage(("bad size " + std::string(v)).c_str());
    } else {
      return usage(("unknown option " + a).c_str());
    }
  }
  if (perHost < 1 || perHost > 4096) return usage("--ranks-per-host must be 1..4096");
  if (numbering != "block" && numbering != "round-robin") return usage("--numbering must be block or round-robin");
  if (model.hostGBps <= 0 || model.oversub < 1 || model.alphaUs < 0) return usage("bad link model values");
  if (factor < 2 || minBytes == 0 || minBytes > maxBytes) return usage("sizes need 0 < -b <= -e and -f >= 2");

  // Phase 1: this host, the map and the placement.
  auto machine = topo::discoverMachine(machineSource);
  if (!machine.ok()) return std::fprintf(stderr, "tempo-topo: %s\n", lastErrorMessage()), 1;
  printMachine(machine.value(), machineSource);

  topo::SwitchMap map;
  std::vector<std::string> hostOfRank;
  std::vector<int> numaOfRank;  // from a dump only
  if (!loadPath.empty()) {
    auto job = topo::loadTopology(loadPath);
    if (!job.ok()) return std::fprintf(stderr, "tempo-topo: %s\n", lastErrorMessage()), 1;
    map = std::move(job->map);
    hostOfRank = std::move(job->hostOfRank);
    numaOfRank = std::move(job->numaOfRank);
  } else {
    if (!topoPath.empty()) {
      auto m = topo::loadSwitchMap(topoPath);
      if (!m.ok()) return std::fprintf(stderr, "tempo-topo: %s\n", lastErrorMessage()), 1;
      map = std::move(m.value());
    }
    std::vector<std::string> hosts;
    if (!hostsExpr.empty()) {
      auto h = topo::expandHostlist(hostsExpr);
      if (!h.ok()) return std::fprintf(stderr, "tempo-topo: %s\n", lastErrorMessage()), 1;
      hosts = std::move(h.value());
    } else {
      for (const auto& s : map.switches) hosts.insert(hosts.end(), s.hosts.begin(), s.hosts.end());
    }
    if (hosts.empty()) return usage("no hosts: give --hosts, or a switch map that names some");
    if (numbering == "round-robin") {
      // Deal the hosts out across their leaves: the first of each leaf, then the second...
      std::vector<std::vector<std::string>> byLeaf;
      std::vector<std::string> leafName;
      for (const auto& h : hosts) {
        const auto path = map.pathOf(h);
        const std::string leaf = path.empty() ? "?" + h : map.switches[size_t(path[0])].name;
        size_t i = 0;
        while (i < leafName.size() && leafName[i] != leaf) ++i;
        if (i == leafName.size()) leafName.push_back(leaf), byLeaf.emplace_back();
        byLeaf[i].push_back(h);
      }
      hosts.clear();
      for (size_t round = 0;; ++round) {
        bool any = false;
        for (auto& l : byLeaf)
          if (round < l.size()) hosts.push_back(l[round]), any = true;
        if (!any) break;
      }
    }
    for (const auto& h : hosts)
      for (int k = 0; k < perHost; ++k) hostOfRank.push_back(h);
  }
  if (!dumpPath.empty() && !ok(topo::writeTopology(dumpPath, map, hostOfRank, numaOfRank)))
    return std::fprintf(stderr, "tempo-topo: %s\n", lastErrorMessage()), 1;

  // Phase 2: what Tempo builds from them.
  const topo::Locality loc = topo::placeRanks(hostOfRank, &map, numaOfRank);
  std::printf("# switch tree (%zu switches, %zu hosts)\n", map.switches.size(), map.leafOf.size());
  for (size_t s = 0; s < map.switches.size(); ++s)
    if (map.switches[s].parent < 0) printTree(map, int(s), 0);
  std::printf("\n# placement: %zu ranks\n", hostOfRank.size());
  for (size_t r = 0; r < hostOfRank.size(); ++r) {
    const auto path = map.pathOf(hostOfRank[r]);
    std::printf("rank %zu: %s", r, hostOfRank[r].c_str());
    if (r < numaOfRank.size() && numaOfRank[r] >= 0) std::printf(" (numa %d)", numaOfRank[r]);
    for (int s : path) std::printf(" < %s", map.switches[size_t(s)].name.c_str());
    std::printf("\n");
  }
  for (const auto& h : loc.unmapped) std::printf("warning: host %s is not in the switch map\n", h.c_str());
  std::vector<int> rankOrder(hostOfRank.size());
  for (size_t r = 0; r < rankOrder.size(); ++r) rankOrder[r] = int(r);
  const std::vector<int> ring = topo::localityRing(loc);
  std::printf("\n# rings\n");
  printRing("topology", ring, loc);
  printRing("rank-order", rankOrder, loc);
  std::printf("\n# trees\n");
  printTrees(ring, loc);

  // Phase 3: predicted times.
  std::printf("\n# predicted ring all-reduce (host links %.2f GB/s, %.1f:1 uplinks, alpha %.1f us)\n", model.hostGBps,
              model.oversub, model.alphaUs);
  std::printf("# %12s  %14s  %14s  %9s\n", "size(B)", "topology us", "rank-order us", "rank/topo");
  for (uint64_t b = minBytes; b <= maxBytes; b *= factor) {
    const double t = topo::predictRingAllReduceUs(loc, ring, b, model);
    const double r = topo::predictRingAllReduceUs(loc, rankOrder, b, model);
    std::printf("  %12llu  %14.1f  %14.1f  %9.2f\n", (unsigned long long)b, t, r, t > 0 ? r / t : 1.0);
    if (b > maxBytes / factor) break;
  }

  // Phase 4: the tuner's all-reduce choice per size, from its two-level cost model (the
  // network level from --host-gbps and --alpha-us, as TEMPO_NET_MBITS and
  // TEMPO_NET_ALPHA_US give it to a job).
  tune::Context ctx;
  ctx.nranks = int(hostOfRank.size());
  ctx.slowest = transport::Kind::OfiTcp;
  ctx.scratchBytes = uint64_t(param::BuffSize());
  ctx.hosts = 0;
  for (int h : loc.hosts()) ctx.hosts = std::max(ctx.hosts, h + 1);
  ctx.maxRanksPerHost = perHost;
  ctx.net = {model.alphaUs, model.hostGBps};
  std::printf("\n# tuner's all-reduce (network %.1f us + %.2f GB/s per host; on a host %.0f us + %.1f GB/s)\n",
              ctx.net.alphaUs, ctx.net.gbps, ctx.local.alphaUs, ctx.local.gbps);
  std::printf("# %12s  %-10s  predicted us per candidate\n", "size(B)", "choice");
  for (uint64_t b = minBytes; b <= maxBytes; b *= factor) {
    const tune::AllReduceChoice c = tune::allReduce(b, ctx);
    tune::Candidate cands[tune::kMaxCandidates];
    const int k = tune::predictAllReduce(b, ctx, false, cands);
    std::printf("  %12llu  %-10s ", (unsigned long long)b, tune::candidateName({c.algo, c.leaders, 0}));
    for (int i = 0; i < k; ++i) std::printf(" %s %.1f", tune::candidateName(cands[i]), cands[i].us);
    std::printf("\n");
    if (b > maxBytes / factor) break;
  }
  return 0;
}
