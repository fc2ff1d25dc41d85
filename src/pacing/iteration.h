// Iteration boundaries inferred from the repeating pattern of collectives.
//
// The library never sees a training loop, only collectives. A loop issues the same
// sequence of (collective, size) every iteration, so the smallest period p with which
// the recent signatures repeat (over the last 3 periods) is the number of collectives
// per iteration. The iteration starts at the phase of the period with the longest gap
// before its arrival (the compute phase precedes the first collective), and an
// iteration's time is the gap between successive starts' arrivals. A hint
// (setPeriod) overrides the inference.
//
// Pure: fed timestamps by the caller; no clocks, no threads.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace tempo::pacing {

// One collective's identity for period detection: its kind and log2 of its size.
uint32_t signatureOf(uint8_t coll, uint64_t bytes);

// Equal signatures may hide a longer iteration (a loop of two equal buckets repeats with
// period 1). Given the gaps before each collective (arrival - previous exit; gaps[i]
// precedes collective i) and the signature period p, returns the multiple k x p (k <= 8)
// whose phases' median gaps single out one long gap, the compute phase, most clearly: the
// longest phase's median gap must be 4x the median of the others', and a longer candidate
// must make it stand out 1.5x more than the best shorter one. Returns p when no multiple
// does (uneven compute phases, say alternating 8 and 12 ms, are not a longer period).
// Medians, not means: a single stall (a preempted rank) must not invent a phase.
// Working memory comes from `scratch`, which allocates only while it grows.
struct PhaseScratch {
  std::vector<double> medians, byPhase;
  std::vector<uint32_t> start, fill;
};
uint32_t refinePeriod(const std::vector<double>& gaps, uint32_t p, PhaseScratch& scratch);
uint32_t refinePeriod(const std::vector<double>& gaps, uint32_t p);
// The median of each phase's gaps into scratch.medians (q entries), gap i (i >= 1; gap 0
// has no predecessor) belonging to phase (first + i) % q.
void phaseMedians(std::span<const double> gaps, uint64_t first, uint32_t q, PhaseScratch& scratch);

struct IterationSummary {
  uint32_t period = 0;       // collectives per iteration (0: no pattern found yet)
  uint32_t samples = 0;      // iteration times in the statistics below
  double meanNs = 0, cov = 0, p50Ns = 0, p99Ns = 0;
};

class IterationTracker {
 public:
  static constexpr uint32_t kHistory = 512;     // signatures kept for the period search
  static constexpr uint32_t kIterations = 64;   // iteration times kept for the statistics

  IterationTracker();
  void push(uint32_t signature, int64_t arrivalNs, int64_t exitNs);
  // Forces the period (0 returns to inference).
  void setPeriod(uint32_t p) { hint_ = p; }
  // Re-detects the period and takes in the iterations completed since the last call.
  // Returns the mean time of those new iterations (0 if none).
  int64_t update();
  IterationSummary summary() const;

 private:
  uint32_t detectPeriod() const;
  uint32_t bestPhase(uint32_t p) const;
  std::vector<double> gaps_;  // update()'s scratch, kept for its capacity
  mutable PhaseScratch phases_;  // likewise, for the per-phase medians
  struct Entry {
    uint32_t sig;
    int64_t arrival, exit;
  };
  std::array<Entry, kHistory> hist_{};
  uint64_t pushed_ = 0;           // entries ever pushed; entry a is hist_[a % kHistory]
  uint32_t hint_ = 0;
  uint32_t period_ = 0, phase_ = 0;
  uint64_t lastStart_ = UINT64_MAX;  // absolute index of the last iteration start taken in
  std::array<int64_t, kIterations> iters_{};
  uint64_t iterCount_ = 0;
};

}  // namespace tempo::pacing
