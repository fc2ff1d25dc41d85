// One host as hwloc sees it: packages, NUMA nodes, cores, and the PCI devices that matter
// to collectives (GPUs and NICs) with their place in the PCI tree, each GPU's nearest NIC.
//
// Sources: the live machine, a hwloc XML export (TEMPO_TOPO_XML; hwloc itself also honours
// HWLOC_XMLFILE when loading the live machine), or a synthetic description ("pack:2
// numa:1 core:4 pu:2"). This is the only code that includes hwloc; Machine is a plain
// value.
//
// GPUs are NVIDIA (0x10de) or AMD (0x1002) PCI devices of class 0x0302 (3D controller),
// 0x0380 or 0x1200 (AMD Instinct), or 0x0300 (VGA) when a compute runtime lists them: a
// server's BMC display (Matrox, ASPEED, ATI ES1000) is not one. NICs are
// PCI devices of class 0x02xx (network) or 0x0207 (InfiniBand) with a network or
// OpenFabrics OS device; their names are those libfabric and UCX use (eth0, mlx5_0).
// The PCI distance of two devices is the number of PCI tree edges between them (two
// functions of one card: 2; across host bridges or sockets: through the root).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/core/status.h"

namespace tempo::topo {

struct PciDevice {
  std::string busId;               // "0000:03:00.0"
  uint16_t classId = 0, vendorId = 0, deviceId = 0;
  std::vector<std::string> names;  // its OS devices: "eth0", "mlx5_0", "cuda0"
  int numa = -1;                   // the NUMA node (os index) it is attached to, -1 if unknown
  int depth = 0;                   // edges from the machine root
  std::vector<int> ancestors;      // hwloc gp_index of its ancestors, nearest first (for distances)
  bool rdma = false;               // NICs: has an OpenFabrics device (verbs: InfiniBand, RoCE)
  std::string rdmaName;            // NICs: that device's name ("mlx5_0"), empty without one
};

struct Machine {
  int packages = 0, numaNodes = 0, cores = 0, pus = 0;
  std::vector<PciDevice> gpus, nics;
  // Per NUMA node, by os index: the os indexes of its PUs (the CPU numbers that
  // sched_getaffinity and taskset use). Empty for a node without CPUs.
  std::vector<std::vector<int>> numaCpus;
  // Per GPU: index into nics, -1 without NICs. The smallest PCI distance wins; ties go to
  // a NIC on the GPU's NUMA node, then to an RDMA NIC, then to the first found.
  std::vector<int> nearestNic;
};

struct MachineSource {
  enum Kind { Live, Xml, Synthetic } kind = Live;
  std::string what;                // the XML path or the synthetic description
};

Result<Machine> discoverMachine(const MachineSource& src);
// The number of PCI tree edges between two devices of one Machine.
int pciDistance(const PciDevice& a, const PciDevice& b);

}  // namespace tempo::topo
