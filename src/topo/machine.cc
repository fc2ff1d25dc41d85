#include "src/topo/machine.h"

#include <hwloc.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>

#include "src/topo/text_file.h"

namespace tempo::topo {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;

bool hasOsDevice(hwloc_obj_t pci, hwloc_obj_osdev_type_e type) {
  for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling)
    if (c->type == HWLOC_OBJ_OS_DEVICE && c->attr->osdev.type == type) return true;
  return false;
}

bool isGpu(hwloc_obj_t pci) {
  const auto& p = pci->attr->pcidev;
  if (p.vendor_id != 0x10de && p.vendor_id != 0x1002) return false;
  // 3D controllers (NVIDIA's data-centre GPUs), other display controllers and processing
  // accelerators (AMD Instinct) are GPUs; a VGA controller only when a compute runtime
  // (CUDA, OpenCL, ROCm SMI) lists it, which a server's AMD/ATI BMC display never is.
  if (p.class_id == 0x0302 || p.class_id == 0x0380 || p.class_id == 0x1200) return true;
  return p.class_id == 0x0300 && hasOsDevice(pci, HWLOC_OBJ_OSDEV_COPROC);
}

bool isNicClass(uint16_t classId) { return (classId >> 8) == 0x02 || classId == 0x0c06; }

std::string busId(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%01x", unsigned(p.domain), unsigned(p.bus), unsigned(p.dev),
                unsigned(p.func));
  return buf;
}

PciDevice describe(hwloc_topology_t topo, hwloc_obj_t obj) {
  PciDevice d;
  const auto& p = obj->attr->pcidev;
  d.busId = busId(p);
  d.classId = p.class_id;
  d.vendorId = p.vendor_id;
  d.deviceId = p.device_id;
  for (hwloc_obj_t c = obj->io_first_child; c; c = c->next_sibling)
    if (c->type == HWLOC_OBJ_OS_DEVICE && c->name) d.names.emplace_back(c->name);
  for (hwloc_obj_t a = obj->parent; a; a = a->parent) {
    d.ancestors.push_back(int(a->gp_index));
    ++d.depth;
  }
  if (hwloc_obj_t cpuSide = hwloc_get_non_io_ancestor_obj(topo, obj); cpuSide && cpuSide->nodeset) {
    const int first = hwloc_bitmap_first(cpuSide->nodeset);
    // A device whose nearest CPU-side object spans every node (attached at the machine
    // level) has no NUMA node of its own.
    if (first >= 0 && hwloc_bitmap_weight(cpuSide->nodeset) == 1) d.numa = first;
  }
  return d;
}

// hwloc 2.x reads only its own XML (version 2.0); hwloc 3.x exports version 3.0, whose
// one difference that matters here is that OS device types became flags. Such a file is
// rewritten in memory: the version lowered, and each osdev_type turned into the 2.x type
// it names (OpenFabrics over network, coprocessor over GPU). A 2.x file passes unchanged.
Result<std::string> readXml(const std::string& path) {
  TEMPO_ASSIGN(std::string xml, readTextFile(path, "topology XML"));
#if HWLOC_API_VERSION < 0x00030000
  const std::string v3 = "<topology version=\"3.";
  const size_t at = xml.find(v3);
  if (at == std::string::npos) return xml;
  const size_t close = xml.find('"', at + v3.size());
  if (close == std::string::npos) return fail(Status::InvalidArgument, "%s: a malformed <topology> tag", path.c_str());
  // Rebuilt piece by piece rather than replaced in place (GCC 12 at -O3 warns, wrongly,
  // about overlapping copies in std::string::replace).
  std::string out = xml.substr(0, at) + "<topology version=\"2.0";
  const std::string key = "osdev_type=\"";
  size_t from = close;
  for (size_t p = xml.find(key, from); p != std::string::npos; p = xml.find(key, from)) {
    const size_t v = p + key.size(), e = xml.find('"', v);
    if (e == std::string::npos) break;
    const unsigned long flags = std::strtoul(xml.substr(v, e - v).c_str(), nullptr, 10);
    const int type = flags & 32   ? HWLOC_OBJ_OSDEV_OPENFABRICS
                     : flags & 16 ? HWLOC_OBJ_OSDEV_NETWORK
                     : flags & 8  ? HWLOC_OBJ_OSDEV_COPROC
                     : flags & 4  ? HWLOC_OBJ_OSDEV_GPU
                     : flags & 64 ? HWLOC_OBJ_OSDEV_DMA
                                  : HWLOC_OBJ_OSDEV_BLOCK;
    out.append(xml, from, v - from);
    out += std::to_string(type);
    from = e;
  }
  out.append(xml, from, std::string::npos);
  return out;
#endif
  return xml;
}

}  // namespace

int pciDistance(const PciDevice& a, const PciDevice& b) {
  // Ancestors nearest first: the first of a's that b also has is the common one.
  for (size_t i = 0; i < a.ancestors.size(); ++i) {
    auto it = std::find(b.ancestors.begin(), b.ancestors.end(), a.ancestors[i]);
    if (it != b.ancestors.end()) return int(i + 1) + int(it - b.ancestors.begin()) + 1;
  }
  return a.depth + b.depth;
}

Result<Machine> discoverMachine(const MachineSource& src) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return fail(Status::SystemError, "hwloc_topology_init failed");
  TopologyPtr topo(raw);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  std::string xml;
  if (src.kind == MachineSource::Xml) {
    TEMPO_ASSIGN(xml, readXml(src.what));
    if (hwloc_topology_set_xmlbuffer(raw, xml.data(), int(xml.size())) != 0)
      return fail(Status::InvalidArgument, "hwloc cannot parse the topology XML %s", src.what.c_str());
  }
  if (src.kind == MachineSource::Synthetic && hwloc_topology_set_synthetic(raw, src.what.c_str()) != 0)
    return fail(Status::InvalidArgument, "hwloc refuses the synthetic topology '%s'", src.what.c_str());
  if (hwloc_topology_load(raw) != 0)
    return fail(src.kind == MachineSource::Live ? Status::SystemError : Status::InvalidArgument,
                "hwloc could not load the %s topology (HWLOC_XML_VERBOSE=1 says why)",
                src.kind == MachineSource::Live ? "live" : src.what.c_str());

  Machine m;
  m.packages = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_PACKAGE);
  m.numaNodes = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_NUMANODE);
  m.cores = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_CORE);
  m.pus = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_PU);
  for (hwloc_obj_t node = hwloc_get_next_obj_by_type(raw, HWLOC_OBJ_NUMANODE, nullptr); node;
       node = hwloc_get_next_obj_by_type(raw, HWLOC_OBJ_NUMANODE, node)) {
    if (node->os_index > 4096) continue;  // no machine has that many nodes; a corrupt export
    if (m.numaCpus.size() <= node->os_index) m.numaCpus.resize(node->os_index + 1);
    if (!node->cpuset) continue;
    for (int pu = hwloc_bitmap_first(node->cpuset); pu >= 0 && pu < (1 << 16); pu = hwloc_bitmap_next(node->cpuset, pu))
      m.numaCpus[node->os_index].push_back(pu);
  }
  for (hwloc_obj_t obj = hwloc_get_next_pcidev(raw, nullptr); obj; obj = hwloc_get_next_pcidev(raw, obj)) {
    const auto& p = obj->attr->pcidev;
    if (isGpu(obj)) {
      m.gpus.push_back(describe(raw, obj));
      continue;
    }
    if (!isNicClass(p.class_id)) continue;
    PciDevice d = describe(raw, obj);
    bool hasNetDev = false;
    for (hwloc_obj_t c = obj->io_first_child; c; c = c->next_sibling) {
      if (c->type != HWLOC_OBJ_OS_DEVICE) continue;
      if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
        d.rdma = true;
        if (c->name) d.rdmaName = c->name;
      }
      hasNetDev |= c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK || c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS;
    }
    if (hasNetDev) m.nics.push_back(std::move(d));
  }
  // Each GPU's nearest NIC (see Machine::nearestNic).
  for (const PciDevice& g : m.gpus) {
    int best = -1, bestDist = 0;
    for (size_t i = 0; i < m.nics.size(); ++i) {
      const PciDevice& nic = m.nics[i];
      const int dist = pciDistance(g, nic) * 4 + (nic.numa == g.numa ? 0 : 2) + (nic.rdma ? 0 : 1);
      if (best < 0 || dist < bestDist) best = int(i), bestDist = dist;
    }
    m.nearestNic.push_back(best);
  }
  return m;
}

}  // namespace tempo::topo
