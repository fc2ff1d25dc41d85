// Where one rank sits on its host: the NUMA node of its CPU binding and the NIC it should
// use. Pure functions of a Machine (tested on the hwloc fixtures), plus the one call that
// reads this thread's binding.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "src/topo/machine.h"

namespace tempo::topo {

// The NUMA node (os index) that holds every CPU in `cpus`, or -1 when they span several
// nodes, name a CPU the machine does not have, or are empty (an unbound rank has no node).
int numaOfCpus(const Machine& m, std::span<const int> cpus);

// The NIC (index into m.nics) for a rank whose GPU is `gpu` (index into m.gpus, -1 for
// none) and whose CPUs are on NUMA node `numa` (-1: unknown):
//   1. with a GPU, the GPU's nearest NIC (Machine::nearestNic);
//   2. else an RDMA NIC (InfiniBand, RoCE), one on the rank's NUMA node first;
//   3. else a NIC on the rank's NUMA node;
//   4. else the first found (PCI order).
// -1 when the machine has no NIC.
int nicFor(const Machine& m, int gpu, int numa);

// The name a transport knows a NIC by: its OpenFabrics device ("mlx5_0") when it has one,
// as libfabric's verbs domains and UCX's IB devices are named, else its network interface
// ("eth0"), as libfabric tcp's domains and UCX's tcp devices are.
std::string nicName(const PciDevice& nic);

// "0-7,16-23" for logs.
std::string cpuListString(std::span<const int> cpus);

// The CPUs this thread may run on (sched_getaffinity), ascending.
std::vector<int> boundCpus();

}  // namespace tempo::topo
