#include "src/pacing/clock.h"

#include <algorithm>
#include <climits>

namespace tempo::pacing {

ClockOffset estimateOffset(std::span<const ClockProbe> probes) {
  ClockOffset o;
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  for (const ClockProbe& p : probes) {
    if (p.t4 < p.t1 || p.t3 < p.t2) return o;  // a clock went backwards: not a probe
    lo = std::max(lo, p.t3 - p.t4);
    hi = std::min(hi, p.t2 - p.t1);
  }
  if (probes.empty() || lo > hi) return o;
  o.valid = true;
  o.offsetNs = lo + (hi - lo) / 2;
  o.errorNs = hi - o.offsetNs;  // >= o.offsetNs - lo
  o.probes = uint32_t(probes.size());
  return o;
}

}  // namespace tempo::pacing
