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
// Drift: the probes measure an offset once, and it holds only while the hosts' clocks run
// at the same rate (CLOCK_MONOTONIC under NTP discipline drifts up to tens of ppm, tens of
// us per second between hosts). Symmetric collectives sample the offset over time: every
// rank leaves one at about the same moment, so rank 0's exit minus a rank's is its offset
// plus a bias of a few us that stays put. fitDrift regresses such samples on time, by
// the medians of 8 slices (robust to a preempted rank's outlier), and a slope is applied
// only when resolved (resolvedDriftPpm).
// Pure: no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

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

struct DriftFit {
  bool known = false;     // enough samples (64) to fit
  double ppm = 0;         // the offset grows by ppm ns per ms of the sampled clock
  double errorPpm = 0;    // the slope's standard error
  double scatterUs = 0;   // robust spread of the samples around the fit
  double spanS = 0;       // the time the samples span
  // The slope when it is resolved, else 0: at least kDriftMinSpanS of samples, beyond 3
  // standard errors, and moving the offset over the span by more than the samples scatter.
  double resolvedPpm() const;
};
inline constexpr double kDriftMinSpanS = 30;
inline constexpr size_t kDriftMinSamples = 64;

// fitDrift's working memory, reused (it allocates only while it grows).
struct DriftScratch {
  std::vector<double> slice, sliceT, sliceO, spread;
};
// Offset samples o[i] (ns) taken at times t[i] (ns, increasing) of the sampled clock.
DriftFit fitDrift(std::span<const double> t, std::span<const double> o, DriftScratch& scratch);

}  // namespace tempo::pacing
