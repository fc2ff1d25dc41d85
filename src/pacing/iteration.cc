#include "src/pacing/iteration.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace tempo::pacing {

uint32_t signatureOf(uint8_t coll, uint64_t bytes) {
  const uint32_t log2 = bytes ? uint32_t(64 - std::countl_zero(bytes)) : 0;
  return (uint32_t(coll) << 8) | log2;
}

void phaseMedians(std::span<const double> gaps, uint64_t first, uint32_t q, PhaseScratch& scratch) {
  std::vector<double>& med = scratch.medians;
  med.assign(q, 0.0);
  if (q == 0 || gaps.size() < 2) return;
  // Group gaps 1.. by phase (counting sort), then take each group's median: one stall of
  // 100 ms among 30 gaps of 1 ms moves a mean a lot and a median not at all.
  std::vector<uint32_t>& start = scratch.start;
  start.assign(q + 1, 0);
  for (size_t i = 1; i < gaps.size(); ++i) ++start[(first + i) % q + 1];
  for (uint32_t j = 0; j < q; ++j) start[j + 1] += start[j];
  scratch.byPhase.resize(gaps.size() - 1);
  scratch.fill.assign(start.begin(), start.end() - 1);
  for (size_t i = 1; i < gaps.size(); ++i) scratch.byPhase[scratch.fill[(first + i) % q]++] = gaps[i];
  for (uint32_t j = 0; j < q; ++j) {
    auto b = scratch.byPhase.begin() + start[j], e = scratch.byPhase.begin() + start[j + 1];
    if (b == e) continue;
    auto mid = b + (e - b) / 2;
    std::nth_element(b, mid, e);
    med[j] = *mid;
  }
}

uint32_t refinePeriod(const std::vector<double>& gaps, uint32_t p, PhaseScratch& scratch) {
  if (p == 0) return 0;
  uint32_t best = p;
  double bestScore = 1;
  for (uint32_t k = 1; k <= 8; ++k) {
    const uint32_t q = k * p;
    if (q < 2) continue;  // one phase: nothing to single out
    if (4 * size_t(q) > gaps.size()) break;
    phaseMedians(gaps, 0, q, scratch);
    std::vector<double>& med = scratch.medians;
    const auto top = std::max_element(med.begin(), med.end());
    const double longest = *top;
    med.erase(top);  // the others', whose median the longest must stand out from
    std::nth_element(med.begin(), med.begin() + med.size() / 2, med.end());
    const double rest = med[med.size() / 2];
    const double score = rest > 0 ? longest / rest : (longest > 0 ? 1e9 : 1);
    if (score > std::max(4.0, 1.5 * bestScore)) {
      best = q;
      bestScore = score;
    }
  }
  return best;
}

uint32_t refinePeriod(const std::vector<double>& gaps, uint32_t p) {
  PhaseScratch scratch;
  return refinePeriod(gaps, p, scratch);
}

IterationTracker::IterationTracker() {
  // Capacity for the largest period searched, so that update() never allocates.
  gaps_.reserve(kHistory);
  phases_.medians.reserve(kHistory);
  phases_.byPhase.reserve(kHistory);
  phases_.start.reserve(kHistory + 1);
  phases_.fill.reserve(kHistory);
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

// The phase (absolute index mod p) whose arrivals follow the longest median gap since the
// previous collective's exit: where the compute phase sits. Reads gaps_ (update()).
uint32_t IterationTracker::bestPhase(uint32_t p) const {
  if (p == 1) return 0;
  const uint64_t have = std::min<uint64_t>(pushed_, kHistory);
  phaseMedians(gaps_, pushed_ - have, p, phases_);
  return uint32_t(std::max_element(phases_.medians.begin(), phases_.medians.end()) - phases_.medians.begin());
}

int64_t IterationTracker::update() {
  const uint64_t have = std::min<uint64_t>(pushed_, kHistory);
  gaps_.clear();
  for (uint64_t a = pushed_ - have; a < pushed_; ++a)
    gaps_.push_back(a == pushed_ - have ? 0.0 : double(hist_[a % kHistory].arrival - hist_[(a - 1) % kHistory].exit));
  uint32_t p = hint_ ? hint_ : refinePeriod(gaps_, detectPeriod(), phases_);
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
