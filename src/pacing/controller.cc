#include "src/pacing/controller.h"

#include <algorithm>
#include <cmath>

namespace tempo::pacing {

const char* pacingStateName(PacingState s) {
  switch (s) {
    case PacingState::Off: return "off";
    case PacingState::Observe: return "observe";
    case PacingState::Pace: return "pace";
    case PacingState::Cooldown: return "cooldown";
    case PacingState::Disabled: return "disabled";
  }
  return "?";
}

SkewController::SkewController(const ControllerConfig& c) : c_(c) { d_.kappa = c.kappaStart; }

// Skew is worth acting on only when it is large against the transfer itself and has a
// persistent culprit: iid noise has none (its last arriver changes from window to
// window, and every rank's average lead is about the same).
bool SkewController::engages(const WindowStats& w) const {
  if (w.samples == 0 || w.nranks < 2 || c_.nodes < c_.minNodes || w.iterNs <= 0) return false;
  const double fair = 1.0 / w.nranks;
  const bool persistent =
      (w.sameTopLast && w.topLastShare > 2 * fair) || (w.sameLeast && w.leastGap > 0.5) || w.leadTau > 0.5;
  return w.rho > c_.thOn && persistent;
}

// The per-collective cap: half the median transfer time, at most maxDelayNs, and small
// enough that a whole iteration's collectives add at most maxIterationShare of it.
int64_t SkewController::capFor(const WindowStats& w) const {
  double cap = std::min<double>(0.5 * double(w.commP50Ns), double(c_.maxDelayNs));
  if (w.iterNs > 0) cap = std::min(cap, c_.maxIterationShare * double(w.iterNs) / std::max<uint32_t>(1, w.period));
  return int64_t(std::max(0.0, cap));
}

PacingDecision SkewController::onWindow(const WindowStats& w) {
  const bool on = engages(w);
  // "The iteration got longer" must beat the window-to-window noise: above the running
  // mean by 2% and by twice the running mean deviation.
  const bool iterRose = iterWindows_ >= 3 && w.iterNs > 0 &&
                        double(w.iterNs) > std::max(1.02 * iterMean_, iterMean_ + 2 * iterDev_);
  const bool wasProbe = d_.probe;
  d_.probe = false;
  d_.wouldPace = on;
  if (!c_.allowPacing && (d_.state == PacingState::Pace || d_.state == PacingState::Cooldown))
    d_.state = PacingState::Observe;  // switched to observe at run time
  above_ = on ? above_ + 1 : 0;
  below_ = w.samples > 0 && w.rho < c_.thOff ? below_ + 1 : 0;
  switch (d_.state) {
    case PacingState::Off:
      break;
    case PacingState::Observe:
      if (c_.allowPacing && above_ >= c_.persistWindows) {
        d_.state = PacingState::Pace;
        d_.kappa = c_.kappaStart;
        paceWindows_ = 0;
        noBenefit_ = 0;
        pacedIterNs_ = 0;
      }
      break;
    case PacingState::Pace: {
      if (wasProbe) {
        // Did pacing pay? The paced windows' iterations against this unpaced one.
        const bool paid = w.iterNs > 0 && pacedIterNs_ > 0 &&
                          pacedIterNs_ < double(w.iterNs) * (1 - c_.noBenefitTolerance);
        noBenefit_ = paid ? 0 : noBenefit_ + 1;
        if (noBenefit_ >= c_.maxNoBenefit) {
          ++disabled_;
          disabledLeft_ = int64_t(1) << std::min<uint32_t>(disabled_, 20);
          d_.state = PacingState::Disabled;
          break;
        }
      } else {
        if (w.iterNs > 0) pacedIterNs_ = pacedIterNs_ > 0 ? 0.75 * pacedIterNs_ + 0.25 * double(w.iterNs) : double(w.iterNs);
        if (w.pacedLastTooOften || iterRose) d_.kappa *= 0.5;
        else if (w.rho < prevRho_) d_.kappa = std::min(c_.kappaMax, d_.kappa + c_.kappaStep);
      }
      if (below_ >= c_.offWindows) {
        d_.state = PacingState::Cooldown;
        cooldownScale_ = 1;
        break;
      }
      d_.probe = ++paceWindows_ % c_.probeEvery == 0;
      break;
    }
    case PacingState::Cooldown:
      cooldownScale_ *= 0.5;
      if (double(lastCap_) * cooldownScale_ < 1000) d_.state = PacingState::Observe;
      break;
    case PacingState::Disabled:
      if (--disabledLeft_ <= 0) d_.state = PacingState::Observe;
      break;
  }
  if (d_.state != PacingState::Cooldown) {
    lastCap_ = capFor(w);
    d_.capNs = lastCap_;
  } else {
    d_.capNs = int64_t(double(lastCap_) * cooldownScale_);
  }
  prevRho_ = w.rho;
  if (w.iterNs > 0) {
    const double x = double(w.iterNs);
    if (iterWindows_++ == 0) iterMean_ = x;
    iterDev_ += 0.25 * (std::abs(x - iterMean_) - iterDev_);
    iterMean_ += 0.25 * (x - iterMean_);
  }
  return d_;
}

int64_t SkewController::delayFor(double leadNs, double leadSigmaNs) const {
  if ((d_.state != PacingState::Pace && d_.state != PacingState::Cooldown) || d_.probe) return 0;
  const double margin = 2 * leadSigmaNs;
  const double d = d_.kappa * (leadNs - margin);
  if (!(d > 0)) return 0;
  return std::min<int64_t>(int64_t(d), d_.capNs);
}

}  // namespace tempo::pacing
