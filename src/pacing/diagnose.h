// Failure-mode diagnosis from per-rank collective records (reference/pacing.md 1.8).
//
// Input: every rank's records of one communicator (as TEMPO_TRACE writes them). Records
// are matched across ranks by sequence number; for each symmetric collective the
// duration-based skew of monitor.h applies (transfer = shortest duration, lead = duration
// - transfer), so no clock synchronisation is needed. Output: the features and a label.
//
//   LOCALITY_VARIANCE     one rank is last far above its fair share (3x, at most 75%), in
//                         3 of 4 windows, and its own compute gap (arrival - previous
//                         exit) is over 5% longer than the ranks' median: the rank itself
//                         is slow (F2, F8).
//   FABRIC_CONTENTION     the transfer itself is inflated or erratic: p50 over the best
//                         seen > 1.3, or its CoV > 0.2 (F3).
//   SYNC_AMPLIFICATION    skew is large against the transfer (rho > 0.5) with no
//                         persistent culprit (last-arriver entropy > 0.8) and a normal
//                         transfer time (F1, F2, F3).
//   HEALTHY               none of these.
// The evidence also gives F4, how skew grows with the size of the group (the law that
// says what the same noise costs at more ranks).
// With per-tier receive flows in the records (F5), the evidence also says which tier's
// peers delivered slower than their best, so fabric contention can be placed on a tier.
// Pure: no I/O. tools/tempo-diagnose reads the traces and writes the reports.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "src/pacing/clock.h"
#include "src/pacing/flow.h"

namespace tempo::pacing {

struct TraceRecord {
  uint64_t seq = 0;
  std::string coll;  // "AllReduce", ...
  uint64_t bytes = 0;
  int64_t arrival = 0, firstData = 0, exit = 0, delay = 0;
  bool injected = false;  // the delay spread the sends (TEMPO_PACING_ACTUATOR=inject), no gate
  int status = 0;
  std::array<Flow, kTiers> flows{};  // received by tier (TEMPO_TRACE's rx_<tier>; flow.h)
  std::vector<PeerFlow> peers;       // received by peer (rx_peers)
};

// F5: how fast one tier's peers delivered data once it flowed (bytes after the first
// message over the time to the last), per rank and collective; its median, and its
// slowdown against the best seen for the same collective and size (time per byte over
// that group's 5th percentile, at p50 and p99).
struct TierPace {
  const char* tier = "";
  size_t samples = 0;
  double p50MBps = 0, slowdownP50 = 1, slowdownP99 = 1;
};

// One link (the data rank `from` sent to rank `to`, as `to` received it): how fast it
// delivered once its data flowed, p50 over its collectives, and its slowdown: the p50 of
// its time per byte over the median of every link of its tier in the same collective and
// size. A link near 1 is as fast as its peers; one near 3 delivers a third as fast.
struct LinkPace {
  int from = -1, to = -1;
  const char* tier = "";
  size_t samples = 0;
  double p50MBps = 0, slowdown = 1;
};

struct RankTrace {
  int rank = 0;
  std::string host;
  uint32_t periodHint = 0;  // collectives per iteration the application declared (0: none)
  // Rank 0's clock minus this rank's (TEMPO_TRACE's "clock" line), for timelines.
  bool clockKnown = false;
  int64_t clockOffsetNs = 0, clockErrorNs = 0;
  std::vector<TraceRecord> records;  // in seq order
};

enum class FailureMode { Healthy, SyncAmplification, FabricContention, LocalityVariance };
const char* failureModeName(FailureMode m);

struct Diagnosis {
  int nranks = 0;
  size_t collectives = 0, measured = 0;
  // Iterations (rank 0's arrivals, period inferred from the collective pattern).
  uint32_t period = 0;
  std::vector<double> iterationUs;
  double iterMeanUs = 0, iterCoV = 0, iterP50Us = 0, iterP99Us = 0;
  // Skew and transfer.
  std::vector<double> skewUs, transferUs;  // per measured collective
  double skewP50Us = 0, skewP99Us = 0, transferP50Us = 0, transferP99Us = 0;
  double rho = 0;                  // F1: p50 skew / p50 transfer
  double transferInflation = 1;    // F3: p50 / p5 of the transfer time, per (coll, size), weighted
  double transferCoV = 0;          // F3: robust (interquartile range / 1.349 / median)
  // Who is late.
  std::vector<double> lastShare;   // per rank: share of collectives it was last in
  std::vector<double> meanLeadUs;  // per rank
  std::vector<double> gapExcess;   // per rank: median compute gap / median of all ranks' (F8)
  double lastEntropy = 0;          // F2, normalised
  int topLast = -1;
  double topLastShare = 0;
  double topStability = 0;         // share of windows (32 collectives) whose top last is topLast
  // Per iteration x rank: the rank's lead at the iteration's first collective (us), for
  // the heat map.
  std::vector<std::vector<double>> leadByIteration;
  std::vector<TierPace> tiers;     // F5: the tiers the traces saw data from, in tier order
  std::vector<LinkPace> links;     // F5 per link (with at least 8 samples), slowest first
  // Clock-synced arrivals (every trace carries its offset to rank 0's clock): the
  // asymmetric collectives (broadcast, reduce, gather, scatter, all-to-allv), whose exits
  // are not simultaneous, get their skew from arrivals on rank 0's clock instead.
  bool clocksAligned = false;
  size_t asymmetric = 0;             // such collectives completed on every rank
  std::vector<double> asymSkewUs;    // their arrival spread, when clocksAligned
  double asymSkewP50Us = 0, asymSkewP99Us = 0;
  // Clock drift against rank 0 (pacing.md 1.4), from the traces alone: every rank leaves a
  // symmetric collective at about the same moment, so rank 0's exit minus rank r's is a
  // sample of their clock offset (biased by a few hop latencies, which drift does not
  // change). The medians of 8 consecutive slices of those samples, regressed on r's time,
  // give the slope: the offset changes by driftPpm[r] ns per ms of r's clock.
  // Known with at least 64 measured collectives; all 0 otherwise and for rank 0.
  std::vector<double> driftPpm;
  std::vector<double> driftErrorPpm;  // the slope's standard error (short runs: tens of ppm)
  bool driftKnown = false;
  double driftSpanS = 0;  // the time the samples span
  // The drift to apply to rank r's timeline: its estimate where it is resolved, else 0.
  // Resolved: over at least 30 s of samples (pacing.md 1.4's window), beyond 3 standard
  // errors, and moving the offset over the span by more than the samples scatter around
  // the fit (exits on a loaded machine scatter by 100s of us, and their bias wanders by
  // tens of us, which no slope fit can tell from drift).
  static constexpr double kDriftMinSpanS = pacing::kDriftMinSpanS;
  std::vector<double> driftScatterUs;  // robust spread of the samples around the fit
  double resolvedDriftPpm(size_t r) const {
    if (r >= driftPpm.size()) return 0;
    return DriftFit{driftKnown, driftPpm[r], driftErrorPpm[r], driftScatterUs[r], driftSpanS}.resolvedPpm();
  }
  // F4: skew against group size. For subsets of n ranks (n = 2, 3, 4, 8, ..., and N) drawn
  // at random in every judged collective, the mean arrival spread within the subset,
  // regressed on sqrt(2 ln n) (the expected maximum of n Gaussians grows so): slope,
  // intercept and R^2, and the skew that law predicts at 2N and 4N ranks. Empty below 4
  // ranks.
  std::vector<std::pair<int, double>> skewBySize;  // (n, mean spread in us)
  double growthSlopeUs = 0, growthInterceptUs = 0, growthR2 = 0;
  double skewAt2NUs = 0, skewAt4NUs = 0;
  FailureMode mode = FailureMode::Healthy;
  std::vector<std::string> evidence;  // human-readable reasons, one per line
};

// `ranks` must hold one trace per rank of the communicator (any order).
Diagnosis diagnose(std::vector<RankTrace> ranks);

// Rank r's local time t on rank 0's clock: plus the offset its trace carries (measured at
// init, about when its first collective began) and the drift `d` resolved since. t itself
// unless d.clocksAligned.
int64_t onRankZeroClock(const RankTrace& r, const Diagnosis& d, int64_t t);

}  // namespace tempo::pacing
