// An alpha-beta model of ring all-reduce on a hierarchy, for tools/tempo-topo's predicted
// times (and, later, the tuner).
//
// Links: every host has one link each way of hostGBps (its ranks share it); every group at
// level k >= 1 (a switch) has an uplink each way carrying (the sum of its member groups'
// uplinks) / oversub; the top level has none. Ranks on one host exchange at intraHostGBps.
// Only the job's own hosts count: a switch's uplink is sized by the hosts of the job under
// it. A ring all-reduce is 2(n-1) steps; in each, every hop moves bytes/n at once, and a
// hop gets the smallest fair share (capacity / hops on it in that direction) of the links
// it crosses: both host links, and the uplinks of every group it leaves and enters. A step
// takes alpha plus the slowest hop's transfer.
#pragma once

#include <cstdint>
#include <span>

#include "src/topo/locality.h"

namespace tempo::topo {

struct LinkModel {
  double hostGBps = 12.5;      // 100 Gbit/s
  double intraHostGBps = 10;   // copies through shared memory
  double oversub = 1;          // >= 1
  double alphaUs = 5;          // per step
};

double predictRingAllReduceUs(const Locality& loc, std::span<const int> ring, uint64_t bytes, const LinkModel& m);

}  // namespace tempo::topo
