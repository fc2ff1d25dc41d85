// Clock offsets between hosts from NTP-style probes (reference/pacing.md 1.4).
//
// A probe: the client sends at t1 (its clock), the server receives it at t2 and replies
// at t3 (its clock), the client receives the reply at t4. Since a message cannot arrive
// before it is sent, the server's clock minus the client's lies in [t3 - t4, t2 - t1],
// whatever the split of the round trip between the two directions and however late
// either side noticed a message. Every probe's interval holds the true offset, so their
// intersection does: its midpoint is the estimate and its half-width a guaranteed bound,
// as tight as the fastest probes in each direction allow. An empty intersection means a
// clock stepped (or drifted far) during probing: no estimate, and timelines fall back to
// the duration-based measures, which need none.
//
// Drift is not modelled: an offset is measured once and holds for as long as the hosts'
// clocks run at the same rate (CLOCK_MONOTONIC under NTP discipline drifts up to tens of
// ppm, i.e. tens of us per second between hosts).
// Pure: no I/O.
#pragma once

#include <cstdint>
#include <span>

namespace tempo::pacing {

struct ClockProbe {
  int64_t t1 = 0, t2 = 0, t3 = 0, t4 = 0;  // ns: client send, server receive, server send, client receive
};

struct ClockOffset {
  bool valid = false;
  int64_t offsetNs = 0;  // server clock - client clock
  int64_t errorNs = 0;   // the true offset is within offsetNs +- errorNs
  uint32_t probes = 0;
};

ClockOffset estimateOffset(std::span<const ClockProbe> probes);

}  // namespace tempo::pacing
