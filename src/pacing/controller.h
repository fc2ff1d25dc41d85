// The pacing controller (reference/pacing.md section 1.6): a per-communicator state
// machine fed one WindowStats per telemetry window.
//
//   OBSERVE  -> PACE      relative skew rho > thOn with a persistent culprit, on at least
//                         minNodes hosts, for persistWindows windows in a row. Persistent:
//                         the same rank last in more than twice its fair share of the
//                         window, or the same rank with the least lead, well apart
//                         (leastGap > 0.5), or per-rank leads ordered alike (tau > 0.5).
//   PACE     -> COOLDOWN  rho < thOff for offWindows windows in a row
//   PACE     -> DISABLED  pacing did not shorten the iteration in maxNoBenefit probes
//   COOLDOWN -> OBSERVE   once the delay cap, halved every window, is below 1 us
//   DISABLED -> OBSERVE   after 2^k windows (k = times disabled)
//
// In PACE the gain kappa follows AIMD once per window: halved when a paced rank was the
// last arriver more than twice its fair share or the iteration got longer (beyond its
// window-to-window noise), raised by
// kappaStep (up to kappaMax) when rho fell without the iteration getting longer. Every
// probeEvery windows one window runs unpaced (a probe) to check that pacing still pays.
//
// Every rank feeds the same globally reduced WindowStats, so every rank's controller is
// in the same state; each rank then computes only its own delay (delayFor). Pure: no
// clocks, no I/O; a simulator can link it as is.
#pragma once

#include <cstdint>

namespace tempo::pacing {

enum class PacingState : int { Off = 0, Observe = 1, Pace = 2, Cooldown = 3, Disabled = 4 };
const char* pacingStateName(PacingState s);

struct ControllerConfig {
  bool allowPacing = false;  // observe mode: the state machine never leaves OBSERVE
  int nodes = 1;             // hosts in the communicator
  int minNodes = 8;          // pacing engages only with at least this many hosts
  double thOn = 0.25, thOff = 0.10;
  int persistWindows = 3, offWindows = 5;
  double kappaStart = 0.3, kappaStep = 0.05, kappaMax = 0.7;
  int probeEvery = 16, maxNoBenefit = 3;
  double noBenefitTolerance = 0.01;  // a paced iteration must beat the probe's by this share
  int64_t maxDelayNs = 1000000;      // per collective
  double maxIterationShare = 0.05;   // delays per iteration, as a share of its time
};

// What every rank knows after a window's exchange (identical on all ranks).
struct WindowStats {
  int nranks = 1;
  uint32_t samples = 0;         // symmetric collectives measured in the window
  int64_t commP50Ns = 0;        // median transfer time (the last arriver's duration)
  int64_t skewP50Ns = 0;        // median of max - min duration
  double rho = 0;               // skewP50 / commP50
  int topLast = -1;             // the rank most often last in the window
  double topLastShare = 0;      // its share of the window's collectives with a known last arriver
  bool sameTopLast = false;     // ... and it was the previous window's too
  double leadTau = 0;           // Kendall tau between this and the previous window's per-rank leads
  bool sameLeast = false;       // the rank with the least lead is the previous window's
  double leastGap = 0;          // (median lead - least lead) / median lead (0 when unknown)
  bool pacedLastTooOften = false;  // a rank that applied delays was last > 2x its fair share
  int64_t iterNs = 0;           // mean iteration time in the window (0: unknown)
  uint32_t period = 0;          // collectives per iteration (0: unknown)
};

struct PacingDecision {
  PacingState state = PacingState::Observe;
  double kappa = 0;
  bool probe = false;       // the coming window runs unpaced
  int64_t capNs = 0;        // the most any collective of the coming window may be delayed
  bool wouldPace = false;   // observe mode: the engagement condition held this window
};

class SkewController {
 public:
  explicit SkewController(const ControllerConfig& c);
  PacingDecision onWindow(const WindowStats& w);
  const PacingDecision& decision() const { return d_; }
  // Observe mode (false) keeps the state machine in OBSERVE; on (true) lets it pace.
  void allowPacing(bool allow) { c_.allowPacing = allow; }
  // This rank's delay for its next collective: kappa x (lead - margin), margin = 2 sigma,
  // clamped to [0, capNs]. 0 outside PACE and COOLDOWN and in probes; so a rank whose
  // lead is within its noise (the predicted last arriver) is never delayed.
  int64_t delayFor(double leadNs, double leadSigmaNs) const;
  uint32_t timesDisabled() const { return disabled_; }

 private:
  bool engages(const WindowStats& w) const;
  int64_t capFor(const WindowStats& w) const;
  ControllerConfig c_;
  PacingDecision d_;
  int above_ = 0, below_ = 0;   // consecutive windows meeting the on / off conditions
  int paceWindows_ = 0;         // windows in PACE since engaging
  int noBenefit_ = 0;
  uint32_t disabled_ = 0;       // times disabled (k)
  int64_t disabledLeft_ = 0;
  double cooldownScale_ = 1;
  double prevRho_ = 0;
  // Iteration time across windows: running mean and mean absolute deviation (EWMA, 1/4).
  double iterMean_ = 0, iterDev_ = 0;
  int iterWindows_ = 0;
  double pacedIterNs_ = 0;      // EWMA of paced windows' iteration time
  int64_t lastCap_ = 0;
};

}  // namespace tempo::pacing
