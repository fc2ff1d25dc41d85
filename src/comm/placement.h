// Where this rank sits on its host, for the locality ring and the transports: the NUMA
// node of its CPU binding and the NICs it should use (TEMPO_NIC), read once per process
// from hwloc (the live machine, TEMPO_TOPO_XML, or hwloc's own HWLOC_XMLFILE and
// HWLOC_SYNTHETIC).
#pragma once

#include <string>
#include <vector>

#include "src/core/status.h"

namespace tempo::comm {

struct Nic {
  std::string name;    // as libfabric's verbs domains and TEMPO_NIC name it ("mlx5_0", "eth0")
  bool rdma = false;   // an RDMA device (UCX names its port: "mlx5_0:1")
  std::string netdev;  // its network interface ("ib0", "eth0"), for libfabric tcp; may be empty
};

struct RankPlace {
  int numa = -1;          // NUMA node (os index) holding every CPU this rank may run on; -1: none or unknown
  std::vector<Nic> nics;  // one per rail; empty: the transports choose one NIC
  std::string why;        // how they were chosen, for the log ("on this rank's NUMA node 1", "TEMPO_NIC", ...)
};

// This thread's place. A machine hwloc cannot read (logged once) leaves the NUMA node
// unknown and the NIC to the transports. TEMPO_NIC=auto names at most one NIC, and only
// one this network namespace has (an interface in /sys/class/net or an RDMA device in
// /sys/class/infiniband), so that a rank never asks a transport for a device it cannot
// open; a comma list (TEMPO_NIC=eth0,eth1) names one NIC per rail, and a name this host
// does not have fails with InvalidArgument.
Result<RankPlace> placeThisRank();

// `nic` as UCX_NET_DEVICES spells it ("eth0", "mlx5_0:1").
std::string ucxDevices(const Nic& nic);

}  // namespace tempo::comm
