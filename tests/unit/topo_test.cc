// src/topo: hostlists, Slurm switch maps, rank placement and locality-aware rings, on the
// fixtures in tests/fixtures (two- and three-level fat trees).
#include <gtest/gtest.h>

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "src/topo/dump.h"
#include "src/topo/hostlist.h"
#include "src/topo/model.h"
#include "src/topo/locality.h"
#include "src/topo/machine.h"
#include "src/topo/place.h"
#include "src/topo/switch_map.h"

namespace tempo::topo {
namespace {

const std::string kFixtures = TEMPO_FIXTURES;

std::vector<std::string> hosts(std::string_view expr) {
  auto h = expandHostlist(expr);
  EXPECT_TRUE(h.ok()) << expr;
  return h.ok() ? h.value() : std::vector<std::string>{};
}

// Each (input, reason) is refused with InvalidArgument, and the message contains the reason.
template <class Parse>
void expectRefused(std::span<const std::pair<const char*, const char*>> cases, Parse parse) {
  for (const auto& [text, why] : cases) {
    EXPECT_EQ(parse(text), Status::InvalidArgument) << text;
    EXPECT_NE(std::string(lastErrorMessage()).find(why), std::string::npos) << lastErrorMessage();
  }
}

TEST(Hostlist, ExpandsRangesListsAndProductsInWrittenOrder) {
  EXPECT_EQ(hosts("node[01-04]"), (std::vector<std::string>{"node01", "node02", "node03", "node04"}));
  EXPECT_EQ(hosts("node[01-02,10]"), (std::vector<std::string>{"node01", "node02", "node10"}));
  EXPECT_EQ(hosts("n[8-10]"), (std::vector<std::string>{"n8", "n9", "n10"}));
  EXPECT_EQ(hosts("a,b[1-2]"), (std::vector<std::string>{"a", "b1", "b2"}));
  EXPECT_EQ(hosts("r[1-2]-n[1-2]"), (std::vector<std::string>{"r1-n1", "r1-n2", "r2-n1", "r2-n2"}));
  EXPECT_EQ(hosts("gpu[000-063]").size(), 64u);
  EXPECT_EQ(hosts("gpu[000-063]").back(), "gpu063");
  EXPECT_EQ(hosts("plain"), (std::vector<std::string>{"plain"}));
}

TEST(Hostlist, RefusesMalformedExpressions) {
  for (const char* bad : {"node[1-4", "node1-4]", "node[]", "node[a-b]", "node[4-1]", "a,,b", "", "n[1-[2]]",
                          "n[0-99999999]", "a[0-999]b[0-9999]"}) {
    auto h = expandHostlist(bad);
    EXPECT_EQ(h.status(), Status::InvalidArgument) << bad;
    EXPECT_NE(std::string(lastErrorMessage()).find("hostlist"), std::string::npos) << bad;
  }
}

TEST(SwitchMap, ReadsTheTwoLevelFixture) {
  auto m = loadSwitchMap(kFixtures + "/slurm/two-level.conf");
  ASSERT_TRUE(m.ok()) << lastErrorMessage();
  EXPECT_EQ(m->switches.size(), 5u);
  EXPECT_EQ(m->height(), 1);
  EXPECT_EQ(m->leafOf.size(), 16u);
  const std::vector<int> path = m->pathOf("node06");
  ASSERT_EQ(path.size(), 2u);
  EXPECT_EQ(m->switches[size_t(path[0])].name, "leaf1");
  EXPECT_EQ(m->switches[size_t(path[1])].name, "spine0");
  EXPECT_EQ(m->switches[size_t(path[1])].level, 1);
  EXPECT_TRUE(m->pathOf("node17").empty());
}

TEST(SwitchMap, ReadsTheThreeLevelFixture) {
  auto m = loadSwitchMap(kFixtures + "/slurm/three-level.conf");
  ASSERT_TRUE(m.ok()) << lastErrorMessage();
  EXPECT_EQ(m->height(), 2);
  EXPECT_EQ(m->leafOf.size(), 64u);
  const std::vector<int> path = m->pathOf("gpu037");
  ASSERT_EQ(path.size(), 3u);
  EXPECT_EQ(m->switches[size_t(path[0])].name, "leaf4");
  EXPECT_EQ(m->switches[size_t(path[1])].name, "pod1");
  EXPECT_EQ(m->switches[size_t(path[2])].name, "core");
}

TEST(SwitchMap, AcceptsCommentsCaseAndLinkSpeed) {
  auto m = parseSwitchMap("# c\n\n  switchname=s1 nodes=a,b LinkSpeed=100 # tail\nSWITCHNAME=top SWITCHES=s1\n", "t");
  ASSERT_TRUE(m.ok()) << lastErrorMessage();
  EXPECT_EQ(m->pathOf("b").size(), 2u);
}

TEST(SwitchMap, RefusesWhatSlurmWouldRefuseNamingTheLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"SwitchName=a Nodes=x\nSwitchName=a Nodes=y\n", "t:2: switch 'a' is defined twice"},
      {"SwitchName=a Nodes=x\nSwitchName=b Nodes=x\n", "t:2: host 'x' is under both 'a' and 'b'"},
      {"SwitchName=top Switches=leaf9\n", "t:1: switch 'leaf9' is never defined"},
      {"Nodes=x\n", "t:1: a line without SwitchName="},
      {"SwitchName=a Colour=red\n", "t:1: unknown key 'Colour'"},
      {"SwitchName=a Nodes\n", "t:1: 'Nodes' is not KEY=VALUE"},
      {"SwitchName=a Nodes=n[2-1]\n", "hostlist 'n[2-1]'"},
      {"SwitchName=l Nodes=x\nSwitchName=p Switches=l\nSwitchName=q Switches=l\n", "'l' is under both 'p' and 'q'"},
      {"SwitchName=a Switches=b\nSwitchName=b Switches=a\n", "cycle"},
  };
  expectRefused(cases, [](const char* text) { return parseSwitchMap(text, "t").status(); });
  EXPECT_EQ(loadSwitchMap(kFixtures + "/slurm/missing.conf").status(), Status::SystemError);
}

// Ranks numbered round-robin across the leaves (rank r on host (r % L) * perLeaf + r / L),
// one rank per host: the rank-order ring crosses the spine on every hop.
std::vector<std::string> roundRobin(const SwitchMap& m, int nhosts) {
  std::vector<std::string> leafHosts[64];
  int leaves = 0;
  for (const auto& s : m.switches)
    if (!s.hosts.empty()) leafHosts[leaves++] = s.hosts;
  std::vector<std::string> hostOfRank;
  const int perLeaf = nhosts / leaves;
  for (int r = 0; r < nhosts; ++r) hostOfRank.push_back(leafHosts[r % leaves][size_t(r / leaves % perLeaf)]);
  return hostOfRank;
}

TEST(LocalityRing, HasTheMinimalCrossingsAtEveryLevelOnTheTwoLevelTree) {
  auto m = loadSwitchMap(kFixtures + "/slurm/two-level.conf");
  ASSERT_TRUE(m.ok());
  const Locality loc = placeRanks(roundRobin(m.value(), 16), &m.value());
  ASSERT_EQ(loc.levels(), 3);
  EXPECT_EQ(loc.levelNames, (std::vector<std::string>{"host", "leaf", "spine"}));
  std::vector<int> rankOrder(16);
  for (int r = 0; r < 16; ++r) rankOrder[size_t(r)] = r;
  EXPECT_EQ(ringCrossings(rankOrder, loc), (std::vector<int>{16, 16, 0})) << "every hop changes leaf";
  const std::vector<int> ring = localityRing(loc);
  EXPECT_EQ(ringCrossings(ring, loc), (std::vector<int>{16, 4, 0}));
  EXPECT_EQ(ringCrossings(ring, loc), minimalCrossings(loc));
  EXPECT_EQ(ring.front(), 0);
  EXPECT_EQ(ring[1], 4) << "rank 4 is the next host on rank 0's leaf";
}

TEST(LocalityRing, HasTheMinimalCrossingsOnTheThreeLevelTreeWithSeveralRanksPerHost) {
  auto m = loadSwitchMap(kFixtures + "/slurm/three-level.conf");
  ASSERT_TRUE(m.ok());
  // 64 hosts round-robin over the leaves, 2 ranks per host, the second half numbered after
  // the first, so a host's two ranks are 64 apart.
  std::vector<std::string> hostOfRank = roundRobin(m.value(), 64);
  const std::vector<std::string> first = hostOfRank;
  hostOfRank.insert(hostOfRank.end(), first.begin(), first.end());
  const Locality loc = placeRanks(hostOfRank, &m.value());
  ASSERT_EQ(loc.levels(), 4);
  EXPECT_EQ(loc.levelNames, (std::vector<std::string>{"host", "leaf", "agg1", "spine"}));
  const std::vector<int> ring = localityRing(loc);
  EXPECT_EQ(ringCrossings(ring, loc), (std::vector<int>{64, 8, 2, 0}));
  EXPECT_EQ(ringCrossings(ring, loc), minimalCrossings(loc));
  std::vector<int> sorted = ring;
  std::sort(sorted.begin(), sorted.end());
  for (int r = 0; r < 128; ++r) ASSERT_EQ(sorted[size_t(r)], r) << "a permutation of the ranks";
}

TEST(LocalityRing, KeepsRankOrderWhenRanksAreNumberedAlongTheHierarchy) {
  auto m = loadSwitchMap(kFixtures + "/slurm/two-level.conf");
  ASSERT_TRUE(m.ok());
  std::vector<std::string> hostOfRank;
  for (int r = 0; r < 16; ++r) hostOfRank.push_back((r < 9 ? "node0" : "node") + std::to_string(r + 1));
  const std::vector<int> ring = localityRing(placeRanks(hostOfRank, &m.value()));
  for (int r = 0; r < 16; ++r) EXPECT_EQ(ring[size_t(r)], r);
}

TEST(LocalityRing, WithoutASwitchMapGroupsRanksByHost) {
  const std::vector<std::string> hostOfRank{"a", "b", "a", "b", "c"};
  const Locality loc = placeRanks(hostOfRank, nullptr);
  ASSERT_EQ(loc.levels(), 1);
  const std::vector<int> ring = localityRing(loc);
  EXPECT_EQ(ring, (std::vector<int>{0, 2, 1, 3, 4}));
  EXPECT_EQ(ringCrossings(ring, loc), (std::vector<int>{3}));
}

TEST(LocalityRing, HostsTheMapDoesNotNameShareNoSwitch) {
  auto m = parseSwitchMap("SwitchName=l0 Nodes=a,b\nSwitchName=l1 Nodes=c\nSwitchName=s Switches=l[0-1]\n", "t");
  ASSERT_TRUE(m.ok());
  const Locality loc = placeRanks(std::vector<std::string>{"a", "x", "c", "b", "y"}, &m.value());
  EXPECT_EQ(loc.unmapped, (std::vector<std::string>{"x", "y"}));
  const std::vector<int> ring = localityRing(loc);
  EXPECT_EQ(ring, (std::vector<int>{0, 3, 2, 1, 4}));
  EXPECT_EQ(ringCrossings(ring, loc), minimalCrossings(loc));
  EXPECT_EQ(minimalCrossings(loc), (std::vector<int>{5, 4, 3}));
}

TEST(LocalityRing, OneRankAndOneHost) {
  const Locality one = placeRanks(std::vector<std::string>{"a"}, nullptr);
  EXPECT_EQ(localityRing(one), (std::vector<int>{0}));
  EXPECT_EQ(ringCrossings(localityRing(one), one), (std::vector<int>{0}));
  const Locality same = placeRanks(std::vector<std::string>{"a", "a", "a"}, nullptr);
  EXPECT_EQ(minimalCrossings(same), (std::vector<int>{0}));
  EXPECT_EQ(ringCrossings(localityRing(same), same), (std::vector<int>{0}));
}

TEST(LocalityRing, RanksOfOneNumaNodeAreContiguousInsideTheirHost) {
  // Two hosts of four ranks; on each, ranks alternate between NUMA nodes 0 and 1.
  const std::vector<std::string> hostOfRank{"a", "a", "a", "a", "b", "b", "b", "b"};
  const std::vector<int> numa{0, 1, 0, 1, 0, 1, 0, 1};
  const Locality loc = placeRanks(hostOfRank, nullptr, numa);
  ASSERT_EQ(loc.levels(), 2);
  EXPECT_EQ(loc.levelNames, (std::vector<std::string>{"numa", "host"}));
  EXPECT_EQ(loc.hostLevel, 1);
  EXPECT_EQ(loc.hosts(), (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
  const std::vector<int> ring = localityRing(loc);
  EXPECT_EQ(ring, (std::vector<int>{0, 2, 1, 3, 4, 6, 5, 7}));
  EXPECT_EQ(ringCrossings(ring, loc), (std::vector<int>{4, 2}));
  EXPECT_EQ(ringCrossings(ring, loc), minimalCrossings(loc));
  // Rank order crosses a NUMA boundary on every hop.
  EXPECT_EQ(ringCrossings(std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}, loc), (std::vector<int>{8, 2}));
}

TEST(LocalityRing, TheNumaLevelSitsUnderTheSwitchLevels) {
  auto m = parseSwitchMap("SwitchName=l0 Nodes=a\nSwitchName=l1 Nodes=b\nSwitchName=s Switches=l[0-1]\n", "t");
  ASSERT_TRUE(m.ok());
  // Round-robin over the leaves, and over the NUMA nodes inside each host; -1 (unbound)
  // is a node of its own.
  const std::vector<std::string> hostOfRank{"a", "b", "a", "b", "a", "b"};
  const std::vector<int> numa{0, 1, 1, 0, -1, 1};
  const Locality loc = placeRanks(hostOfRank, &m.value(), numa);
  EXPECT_EQ(loc.levelNames, (std::vector<std::string>{"numa", "host", "leaf", "spine"}));
  const std::vector<int> ring = localityRing(loc);
  EXPECT_EQ(ring, (std::vector<int>{0, 2, 4, 1, 5, 3}));
  EXPECT_EQ(ringCrossings(ring, loc), minimalCrossings(loc));
}

TEST(LocalityRing, NoNumaLevelWhenEveryHostIsOnOneNode) {
  const std::vector<std::string> hostOfRank{"a", "a", "b", "b"};
  const Locality loc = placeRanks(hostOfRank, nullptr, std::vector<int>{0, 0, 1, 1});
  EXPECT_EQ(loc.levelNames, (std::vector<std::string>{"host"}));
  EXPECT_EQ(loc.hostLevel, 0);
  // A list of the wrong length is ignored, as if there were none.
  EXPECT_EQ(placeRanks(hostOfRank, nullptr, std::vector<int>{0, 1}).levels(), 1);
}

TEST(RingModel, HopsBetweenNumaNodesStayInsideTheHost) {
  // The NUMA level adds no link to the model: the same prediction with and without it.
  const std::vector<std::string> hostOfRank{"a", "a", "b", "b"};
  const Locality plain = placeRanks(hostOfRank, nullptr);
  const Locality numa = placeRanks(hostOfRank, nullptr, std::vector<int>{0, 1, 0, 1});
  ASSERT_EQ(numa.levels(), 2);
  LinkModel model;
  const std::vector<int> ring{0, 1, 2, 3};
  EXPECT_DOUBLE_EQ(predictRingAllReduceUs(numa, ring, 1 << 20, model), predictRingAllReduceUs(plain, ring, 1 << 20, model));
}

TEST(TopologyDump, RoundTripsTheMapAndThePlacement) {
  auto m = loadSwitchMap(kFixtures + "/slurm/three-level.conf");
  ASSERT_TRUE(m.ok());
  const std::vector<std::string> hostOfRank = roundRobin(m.value(), 64);
  auto back = parseTopology(dumpTopology(m.value(), hostOfRank), "dump");
  ASSERT_TRUE(back.ok()) << lastErrorMessage();
  EXPECT_EQ(back->hostOfRank, hostOfRank);
  ASSERT_EQ(back->map.switches.size(), m->switches.size());
  for (size_t s = 0; s < m->switches.size(); ++s) {
    EXPECT_EQ(back->map.switches[s].name, m->switches[s].name);
    EXPECT_EQ(back->map.switches[s].parent, m->switches[s].parent);
    EXPECT_EQ(back->map.switches[s].level, m->switches[s].level);
    EXPECT_EQ(back->map.switches[s].hosts, m->switches[s].hosts);
  }
  // The same rings come out of the reloaded topology.
  EXPECT_EQ(localityRing(placeRanks(back->hostOfRank, &back->map)), localityRing(placeRanks(hostOfRank, &m.value())));
  EXPECT_TRUE(back->numaOfRank.empty());
}

TEST(TopologyDump, CarriesEachRanksNumaNodeWhereItHasOne) {
  const SwitchMap none;
  const std::vector<std::string> hostOfRank{"a", "a", "a"};
  const std::vector<int> numa{1, -1, 0};
  const std::string text = dumpTopology(none, hostOfRank, numa);
  EXPECT_NE(text.find("Rank=0 Host=a Numa=1\nRank=1 Host=a\nRank=2 Host=a Numa=0\n"), std::string::npos) << text;
  auto back = parseTopology(text, "dump");
  ASSERT_TRUE(back.ok()) << lastErrorMessage();
  EXPECT_EQ(back->numaOfRank, numa);
}

TEST(TopologyDump, RefusesBrokenRankLines) {
  const std::pair<const char*, const char*> cases[] = {
      {"SwitchName=l Nodes=a\nRank=0 Host=a\nRank=0 Host=a\n", "d:3: rank 0 is given twice"},
      {"SwitchName=l Nodes=a\nRank=1 Host=a\n", "d: rank 0 has no Rank line"},
      {"Rank=x Host=a\n", "d:1: expected 'Rank=<r> Host=<name> [Numa=<node>]'"},
      {"Rank=0 Host=a extra\n", "d:1: expected"},
      {"Rank=0 Host=a Numa=x\n", "d:1: expected 'Rank=<r> Host=<name> [Numa=<node>]'"},
      {"Rank=0 Host=a Numa=-2\n", "d:1: expected"},
      {"Rank=0 Host=a Numa=1 extra\n", "d:1: expected"},
      {"Rank=0 Host=a\nSwitchName=l Bogus=1\n", "d:2: unknown key 'Bogus'"},
  };
  expectRefused(cases, [](const char* text) { return parseTopology(text, "d").status(); });
}

TEST(RingModel, OversubscriptionCostsTheRankOrderRingItsShareOfTheUplinks) {
  auto m = loadSwitchMap(kFixtures + "/slurm/two-level.conf");
  ASSERT_TRUE(m.ok());
  const Locality loc = placeRanks(roundRobin(m.value(), 16), &m.value());
  std::vector<int> rankOrder(16);
  for (int r = 0; r < 16; ++r) rankOrder[size_t(r)] = r;
  const std::vector<int> ring = localityRing(loc);
  LinkModel model;
  model.alphaUs = 0;
  model.oversub = 4;
  // 4:1: a leaf's uplink carries one host link's worth; the rank-order ring puts 4 hops on
  // each uplink direction, the topology ring 1.
  const uint64_t bytes = 64 << 20;
  const double topoUs = predictRingAllReduceUs(loc, ring, bytes, model);
  const double rankUs = predictRingAllReduceUs(loc, rankOrder, bytes, model);
  EXPECT_NEAR(rankUs / topoUs, 4.0, 1e-9);
  // At line rate: 2(n-1) steps of bytes/n at 12.5 GB/s.
  EXPECT_NEAR(topoUs, 30.0 * (double(bytes) / 16) / 12.5e3, 1e-6);
  // Without oversubscription the uplinks carry all four at full rate: the rings tie.
  model.oversub = 1;
  EXPECT_NEAR(predictRingAllReduceUs(loc, rankOrder, bytes, model), predictRingAllReduceUs(loc, ring, bytes, model),
              1e-9);
  // Alpha adds 2(n-1) step latencies; one rank costs nothing.
  model.alphaUs = 5;
  EXPECT_NEAR(predictRingAllReduceUs(loc, ring, 0, model), 30 * 5.0, 1e-9);
  EXPECT_EQ(predictRingAllReduceUs(placeRanks(std::vector<std::string>{"a"}, nullptr), std::vector<int>{0}, bytes, model), 0);
}

TEST(RingModel, RanksOnOneHostShareItsLink) {
  // Two hosts, two ranks each: the ring 0 1 2 3 has one hop each way between the hosts.
  const Locality loc = placeRanks(std::vector<std::string>{"a", "a", "b", "b"}, nullptr);
  LinkModel model;
  model.alphaUs = 0;
  model.intraHostGBps = 100;
  const double us = predictRingAllReduceUs(loc, std::vector<int>{0, 1, 2, 3}, 4 << 20, model);
  EXPECT_NEAR(us, 6.0 * (1 << 20) / 12.5e3, 1e-6);
  // Interleaved (0 2 1 3), every hop crosses: two hops share each host link direction.
  EXPECT_NEAR(predictRingAllReduceUs(loc, std::vector<int>{0, 2, 1, 3}, 4 << 20, model), 2 * us, 1e-6);
}

// hwloc on the fixtures (tests/fixtures/hwloc, exported by hwloc from real machines).
Machine machineFromXml(const char* file) {
  auto m = discoverMachine({MachineSource::Xml, kFixtures + "/hwloc/" + file});
  EXPECT_TRUE(m.ok()) << lastErrorMessage();
  return m.ok() ? m.value() : Machine{};
}

const PciDevice* byBusId(const std::vector<PciDevice>& devs, const std::string& busId) {
  for (const PciDevice& d : devs)
    if (d.busId == busId) return &d;
  return nullptr;
}

TEST(Machine, DualSocketServerWithGpusAndAnInfiniBandHca) {
  const Machine m = machineFromXml("32em64t-2n8c2t-pci-normalio.xml");
  EXPECT_EQ(m.packages, 2);
  EXPECT_EQ(m.numaNodes, 2);
  EXPECT_EQ(m.cores, 16);
  EXPECT_EQ(m.pus, 32);
  // Three NVIDIA 3D controllers and an AMD VGA card; the Matrox BMC display is no GPU.
  ASSERT_EQ(m.gpus.size(), 4u);
  EXPECT_EQ(byBusId(m.gpus, "0000:05:03.0"), nullptr);
  const PciDevice* tesla0 = byBusId(m.gpus, "0000:03:00.0");
  const PciDevice* tesla2 = byBusId(m.gpus, "0000:84:00.0");
  ASSERT_TRUE(tesla0 && tesla2);
  EXPECT_EQ(tesla0->numa, 0);
  EXPECT_EQ(tesla2->numa, 1);
  EXPECT_EQ(tesla2->names, (std::vector<std::string>{"cuda0", "card0"}));
  // Two Ethernet ports and the ConnectX-4, named as libfabric and UCX name them.
  ASSERT_EQ(m.nics.size(), 3u);
  const PciDevice* hca = byBusId(m.nics, "0000:04:00.0");
  ASSERT_NE(hca, nullptr);
  EXPECT_TRUE(hca->rdma);
  EXPECT_EQ(hca->names, (std::vector<std::string>{"ib0", "mlx5_0"}));
  EXPECT_FALSE(byBusId(m.nics, "0000:81:00.0")->rdma);
  EXPECT_EQ(byBusId(m.nics, "0000:81:00.0")->names, (std::vector<std::string>{"eth0"}));
  // The HCA sits behind the same bridge as the third Tesla: 2 edges apart. Every GPU's
  // nearest NIC is the HCA (for the others the Ethernet ports are as far, and not RDMA).
  EXPECT_EQ(pciDistance(*tesla2, *hca), 2);
  ASSERT_EQ(m.nearestNic.size(), m.gpus.size());
  for (size_t g = 0; g < m.gpus.size(); ++g)
    EXPECT_EQ(&m.nics[size_t(m.nearestNic[g])], hca) << m.gpus[g].busId;
}

TEST(Machine, EachNumaNodeListsItsCpus) {
  const Machine m = machineFromXml("32em64t-2n8c2t-pci-normalio.xml");
  ASSERT_EQ(m.numaCpus.size(), 2u);
  // cpuset 0x00ff00ff and 0xff00ff00: the two hyperthreads of a core are 16 apart.
  EXPECT_EQ(cpuListString(m.numaCpus[0]), "0-7,16-23");
  EXPECT_EQ(cpuListString(m.numaCpus[1]), "8-15,24-31");
}

TEST(RankPlace, TheNumaNodeOfABindingIsTheNodeHoldingAllItsCpus) {
  const Machine m = machineFromXml("32em64t-2n8c2t-pci-normalio.xml");
  EXPECT_EQ(numaOfCpus(m, std::vector<int>{0}), 0);
  EXPECT_EQ(numaOfCpus(m, std::vector<int>{8, 9, 24}), 1);
  EXPECT_EQ(numaOfCpus(m, std::vector<int>{7, 8}), -1) << "spans both nodes";
  EXPECT_EQ(numaOfCpus(m, std::vector<int>{}), -1);
  EXPECT_EQ(numaOfCpus(m, std::vector<int>{99}), -1) << "not a CPU of this machine";
  std::vector<int> all(32);
  for (int c = 0; c < 32; ++c) all[size_t(c)] = c;
  EXPECT_EQ(numaOfCpus(m, all), -1) << "an unbound rank has no node";
}

TEST(RankPlace, ARankWithoutAGpuTakesAnRdmaNicThenOneOnItsNumaNode) {
  // 96em64t: two Ethernet ports on each NUMA node, no RDMA; each node takes its first.
  const Machine big = machineFromXml("96em64t-4n4d3ca2co-pci.xml");
  for (int node = 0; node < 4; ++node) {
    const int nic = nicFor(big, -1, node);
    ASSERT_GE(nic, 0);
    EXPECT_EQ(big.nics[size_t(nic)].numa, node);
    EXPECT_EQ(nicName(big.nics[size_t(nic)]), "eth" + std::to_string(2 * node));
  }
  // 32em64t: every NIC hangs off NUMA node 1; the ConnectX-4 (ib0/mlx5_0) beats the
  // Ethernet ports from either node, and is named by its RDMA device.
  const Machine m = machineFromXml("32em64t-2n8c2t-pci-normalio.xml");
  for (int node : {0, 1, -1}) {
    const int nic = nicFor(m, -1, node);
    ASSERT_GE(nic, 0);
    EXPECT_EQ(nicName(m.nics[size_t(nic)]), "mlx5_0") << "numa " << node;
    EXPECT_EQ(m.nics[size_t(nic)].names.front(), "ib0");
  }
  // With a GPU: the GPU's nearest.
  for (size_t g = 0; g < m.gpus.size(); ++g) EXPECT_EQ(nicFor(m, int(g), 0), m.nearestNic[g]);
  // No NIC at all.
  EXPECT_EQ(nicFor(machineFromXml("nvidiaDGX2.xml"), -1, 0), -1);
}

TEST(RankPlace, ThisThreadsCpusAreTheOnesItMayRunOn) {
  const std::vector<int> cpus = boundCpus();
  ASSERT_FALSE(cpus.empty());
  EXPECT_TRUE(std::is_sorted(cpus.begin(), cpus.end()));
  auto live = discoverMachine({});
  ASSERT_TRUE(live.ok());
  // Every CPU we may run on belongs to some NUMA node of this machine.
  for (int c : cpus) {
    bool found = false;
    for (const auto& node : live->numaCpus) found |= std::find(node.begin(), node.end(), c) != node.end();
    EXPECT_TRUE(found) << "cpu " << c;
  }
}

TEST(Machine, DgxTwoHasSixteenGpusAndNoNicInTheExport) {
  const Machine m = machineFromXml("nvidiaDGX2.xml");
  EXPECT_EQ(m.packages, 2);
  EXPECT_EQ(m.gpus.size(), 16u);
  EXPECT_TRUE(m.nics.empty());
  for (int n : m.nearestNic) EXPECT_EQ(n, -1);
  // GPUs behind one PCIe switch are closer to each other than to a GPU on the other socket.
  std::vector<int> distances;
  for (size_t g = 1; g < m.gpus.size(); ++g) distances.push_back(pciDistance(m.gpus[0], m.gpus[g]));
  EXPECT_LT(*std::min_element(distances.begin(), distances.end()), *std::max_element(distances.begin(), distances.end()));
}

TEST(Machine, SixteenSocketServerWithEightEthernetPortsAndNoGpu) {
  const Machine m = machineFromXml("96em64t-4n4d3ca2co-pci.xml");
  EXPECT_EQ(m.packages, 16);
  EXPECT_EQ(m.numaNodes, 4);
  EXPECT_EQ(m.cores, 96);
  EXPECT_TRUE(m.gpus.empty()) << "its ATI ES1000 is the BMC's display, with no compute runtime";
  ASSERT_EQ(m.nics.size(), 8u);
  for (size_t i = 0; i < m.nics.size(); ++i) {
    EXPECT_EQ(m.nics[i].names, (std::vector<std::string>{"eth" + std::to_string(i)}));
    EXPECT_EQ(m.nics[i].numa, int(i / 2)) << "two ports per NUMA node";
    EXPECT_FALSE(m.nics[i].rdma);
  }
  EXPECT_EQ(pciDistance(m.nics[0], m.nics[1]), 2) << "two functions of one card";
  EXPECT_GT(pciDistance(m.nics[0], m.nics[2]), 2);
}

TEST(Machine, SyntheticAndBadSources) {
  auto m = discoverMachine({MachineSource::Synthetic, "pack:2 numa:1 core:4 pu:2"});
  ASSERT_TRUE(m.ok()) << lastErrorMessage();
  EXPECT_EQ(m->packages, 2);
  EXPECT_EQ(m->numaNodes, 2);
  EXPECT_EQ(m->cores, 8);
  EXPECT_EQ(m->pus, 16);
  EXPECT_TRUE(m->gpus.empty() && m->nics.empty());
  EXPECT_EQ(discoverMachine({MachineSource::Synthetic, "pack:banana"}).status(), Status::InvalidArgument);
  EXPECT_EQ(discoverMachine({MachineSource::Xml, kFixtures + "/hwloc/missing.xml"}).status(), Status::SystemError);
  EXPECT_NE(std::string(lastErrorMessage()).find("missing.xml"), std::string::npos);
  auto live = discoverMachine({});
  ASSERT_TRUE(live.ok()) << lastErrorMessage();
  EXPECT_GE(live->pus, 1);
}

}  // namespace
}  // namespace tempo::topo
