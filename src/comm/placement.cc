#include "src/comm/placement.h"

#include <net/if.h>
#include <sys/stat.h>

#include <cstring>
#include <mutex>
#include <optional>

#include "src/core/log.h"
#include "src/core/status.h"
#include "src/core/param.h"
#include "src/topo/place.h"

namespace tempo::comm {
namespace {

// hwloc's view of this machine, loaded on first use (tens of milliseconds) and kept for
// the process: communicators are made far more often than machines change.
const topo::Machine* thisMachine() {
  static std::once_flag once;
  static std::optional<topo::Machine> machine;
  std::call_once(once, [] {
    topo::MachineSource src;
    if (*param::TopoXml()) src = {topo::MachineSource::Xml, param::TopoXml()};
    auto m = topo::discoverMachine(src);
    if (m.ok()) {
      machine = std::move(m.value());
      return;
    }
    TEMPO_WARN("cannot read this machine's topology (%s); ranks are placed by host only and the transports "
               "choose their NICs",
               lastErrorMessage());
  });
  return machine ? &*machine : nullptr;
}

bool rdmaDeviceHere(const std::string& name) {
  struct stat st;
  return !name.empty() && name.find('/') == std::string::npos &&
         stat(("/sys/class/infiniband/" + name).c_str(), &st) == 0;
}

}  // namespace

Result<RankPlace> placeThisRank() {
  RankPlace place;
  const topo::Machine* m = thisMachine();
  if (m) place.numa = topo::numaOfCpus(*m, topo::boundCpus());
  const std::string wanted = param::Nic();
  if (wanted == "any") {
    place.why = "TEMPO_NIC=any";
    return place;
  }
  if (wanted != "auto") {
    // One NIC per rail, in the order given.
    for (size_t at = 0; at <= wanted.size();) {
      size_t end = wanted.find(',', at);
      if (end == std::string::npos) end = wanted.size();
      Nic nic;
      nic.name = wanted.substr(at, end - at);
      at = end + 1;
      if (nic.name.empty()) continue;
      nic.rdma = rdmaDeviceHere(nic.name);
      if (!nic.rdma && if_nametoindex(nic.name.c_str()) == 0)
        return fail(Status::InvalidArgument,
                    "TEMPO_NIC=%s names '%s', which is neither a network interface nor an RDMA device here (ip link "
                    "lists the interfaces; TEMPO_NIC=auto or any lets Tempo or the transports choose)",
                    wanted.c_str(), nic.name.c_str());
      if (!nic.rdma) nic.netdev = nic.name;
      place.nics.push_back(std::move(nic));
    }
    place.why = "TEMPO_NIC";
    return place;
  }
  if (!m) return place;
  // Host buffers: the rank has no GPU of its own, so its NUMA node decides.
  const int index = topo::nicFor(*m, /*gpu=*/-1, place.numa);
  if (index < 0) return place;
  const topo::PciDevice& dev = m->nics[size_t(index)];
  Nic nic;
  nic.name = topo::nicName(dev);
  nic.rdma = !dev.rdmaName.empty();
  const bool here = nic.rdma ? rdmaDeviceHere(nic.name) : if_nametoindex(nic.name.c_str()) != 0;
  if (nic.name.empty() || !here) {
    place.why = "nearest NIC " + (nic.name.empty() ? dev.busId : nic.name) + " is not in this network namespace";
    return place;
  }
  // The first OS device that is a network interface here (an HCA lists "ib0" too).
  for (const std::string& n : dev.names)
    if (n != dev.rdmaName && if_nametoindex(n.c_str()) != 0) {
      nic.netdev = n;
      break;
    }
  place.why = place.numa >= 0 && dev.numa == place.numa ? "on this rank's NUMA node " + std::to_string(place.numa)
                                                         : "the machine's " + std::string(nic.rdma ? "RDMA " : "") + "NIC";
  place.nics.push_back(std::move(nic));
  return place;
}

std::string ucxDevices(const Nic& nic) { return nic.rdma ? nic.name + ":1" : nic.name; }

}  // namespace tempo::comm
