#include "src/pacing/iteration.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace tempo::pacing {

uint32_t signatureOf(uint8_t coll, uint64_t bytes) {
  const uint32_t log2 = bytes ? uint32_t(64 - std::countl_zero(bytes)) : 0;
  return (uint32_t(coll) << 8) | log2;
}

uint32_t refinePeriod(const std::vector<double>& gaps, uint32_t p) {
  if (p == 0) return 0;
  uint32_t best = p;
  double bestScore = 1;
  for (uint32_t k = 1; k <= 8; ++k) {
    const uint32_t q = k * p;
    if (q < 2) continue;  // one phase: nothing to single out
    if (4 * size_t(q) > gaps.size()) break;
    // Mean gap per phase (gap index i belongs to phase i % q).
    std::array<double, 8 * 170 + 1> sum{};
    std::array<uint32_t, 8 * 170 + 1> n{};
    if (q >= sum.size()) break;
    for (size_t i = 1; i < gaps.size(); ++i) {
      sum[i % q] += gaps[i];
      ++n[i % q];
    }
    std::array<double, 8 * 170 + 1> mean{};
    for (uint32_t j = 0; j < q; ++j) mean[j] = n[j] ? sum[j] / n[j] : 0;
    const uint32_t top = uint32_t(std::max_element(mean.begin(), mean.begin() + q) - mean.begin());
    std::array<double, 8 * 170> others{};
    uint32_t m = 0;
    for (uint32_t j = 0; j < q; ++j)
      if (j != top) others[m++] = mean[j];
    std::nth_element(others.begin(), others.begin() + m / 2, others.begin() + m);
    const double rest = others[m / 2];
    const double score = rest > 0 ? mean[top] / rest : (mean[top] > 0 ? 1e9 : 1);
    if (score > std::max(4.0, 1.5 * bestScore)) {
      best = q;
      bestScore = score;
    }
  }
  return best;
}

void IterationTracker::push(uint32_t signature, int64_t arrivalNs, int64_t exitNs) {
  hist_[pushed_ % kHistory] = {signature, arrivalNs, exitNs};
  ++pushed_;
}

// The smallest p whose last 3p signatures repeat with period p; with fewer entries than
// three periods, no pattern is claimed.
uint32_t IterationTracker::detectPeriod() const {
  const uint64_t have = std::min<uint64_t>(pushed_, kHistory);
  for (uint32_t p = 1; 3 * uint64_t(p) <= have; ++p) {
    bool repeats = true;
    for (uint64_t k = 0; k < 2 * uint64_t(p) && repeats; ++k) {
      const uint64_t a = pushed_ - 1 - k;
      repeats = hist_[a % kHistory].sig == hist_[(a - p) % kHistory].sig;
    }
    if (repeats) return p;
  }
  return 0;
}

// The phase (absolute index mod p) whose arrivals follow the longest mean gap since the
// previous collective's exit: where the compute phase sits.
uint32_t IterationTracker::bestPhase(uint32_t p) const {
  if (p == 1) return 0;
  const uint64_t have = std::min<uint64_t>(pushed_, kHistory);
  std::array<double, kHistory / 3 + 1> gap{};  // p <= kHistory / 3 (detectPeriod)
  if (p >= gap.size()) return 0;
  for (uint64_t a = pushed_ - have + 1; a < pushed_; ++a) {
    const Entry& e = hist_[a % kHistory];
    const Entry& prev = hist_[(a - 1) % kHistory];
    gap[a % p] += double(e.arrival - prev.exit);
  }
  return uint32_t(std::max_element(gap.begin(), gap.begin() + p) - gap.begin());
}

int64_t IterationTracker::update() {
  uint32_t p = hint_;
  if (!p) {
    p = detectPeriod();
    const uint64_t have = std::min<uint64_t>(pushed_, kHistory);
    gaps_.clear();
    for (uint64_t a = pushed_ - have; a < pushed_; ++a)
      gaps_.push_back(a == pushed_ - have ? 0.0 : double(hist_[a % kHistory].arrival - hist_[(a - 1) % kHistory].exit));
    p = refinePeriod(gaps_, p);
  }
  if (p == 0) return 0;
  const uint32_t phase = bestPhase(p);
  if (p != period_ || phase != phase_) {  // a new pattern: its iterations start afresh
    period_ = p;
    phase_ = phase;
    lastStart_ = UINT64_MAX;
    iterCount_ = 0;
  }
  // Walk the starts still in the history, oldest first; each one after a known start
  // completes an iteration.
  const uint64_t oldest = pushed_ > kHistory ? pushed_ - kHistory : 0;
  uint64_t a = oldest + ((phase_ + p - oldest % p) % p);
  if (lastStart_ != UINT64_MAX && lastStart_ >= oldest) a = lastStart_ + p;
  int64_t sum = 0;
  uint32_t fresh = 0;
  for (; a < pushed_; a += p) {
    if (lastStart_ != UINT64_MAX && a > lastStart_ && lastStart_ >= oldest) {
      const int64_t t = hist_[a % kHistory].arrival - hist_[lastStart_ % kHistory].arrival;
      iters_[iterCount_ % kIterations] = t;
      ++iterCount_;
      sum += t;
      ++fresh;
    }
    lastStart_ = a;
  }
  return fresh ? sum / fresh : 0;
}

IterationSummary IterationTracker::summary() const {
  IterationSummary s;
  s.period = period_;
  const uint32_t n = uint32_t(std::min<uint64_t>(iterCount_, kIterations));
  s.samples = n;
  if (n == 0) return s;
  std::array<double, kIterations> v;  // no allocation: summaries are taken every window
  std::copy(iters_.begin(), iters_.begin() + n, v.begin());
  double sum = 0;
  for (uint32_t k = 0; k < n; ++k) sum += v[k];
  s.meanNs = sum / n;
  double var = 0;
  for (uint32_t k = 0; k < n; ++k) var += (v[k] - s.meanNs) * (v[k] - s.meanNs);
  s.cov = n > 1 && s.meanNs > 0 ? std::sqrt(var / (n - 1)) / s.meanNs : 0;
  std::sort(v.begin(), v.begin() + n);
  // The ceil(q * n)-th smallest (nearest-rank percentile).
  auto pct = [&](double q) { return v[std::clamp<size_t>(size_t(std::ceil(q * n)), 1, n) - 1]; };
  s.p50Ns = pct(0.5);
  s.p99Ns = pct(0.99);
  return s;
}

}  // namespace tempo::pacing
