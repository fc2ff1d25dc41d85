// SkewMonitor: one communicator's skew measurement and pacing, as the engine sees it.
//
// The engine reports every collective it finishes (onCollective). Every W collectives
// (a window; W grows so that windows come at most ~10 times a second) the ranks run one
// small MAX all-reduce of fixed size over uint64 words (exchangeWords): fill() writes this
// rank's contribution, absorb() reads the reduced vector. Duration-based skew needs no
// clock synchronisation (pacing.md 1.2): for each symmetric collective c of the window,
//   comm(c) = min_r D_r(c)   (the last arriver's duration: the transfer itself),
//   lead_r(c) = D_r(c) - comm(c),  skew(c) = max_r D_r(c) - comm(c),
// where D_r(c) runs from rank r's arrival (gate entry, so a paced rank's lead is its
// un-paced lead) to its exit. The minimum travels as the complement of (D << 20 | rank)
// so one MAX gives both it and the last arriver.
// The asymmetric collectives (broadcast, reduce, gather, scatter, all-to-allv) have no
// common exit. Once every rank's offset to rank 0's clock is known (setClock), they are
// measured by arrivals on that clock instead: D is replaced by 2^43 - (synced arrival
// mod 2^42), so the same MAX gives the last arriver and each rank's lead (the last
// arrival minus its own); their skew counts, their "transfer time" does not, and
// relative skew stays the symmetric collectives'. Drift: every rank leaves an exchange at
// about the same moment, so rank 0's exit of one (carried in the next) minus this rank's
// samples the offset; once fitDrift resolves a slope from them (30 s or more, clock.h),
// the offset follows it.
//
// Exchange layout (uint64 words, all MAX-reduced):
//   [0] W proposal  [1] iteration ns  [2] period
//   [3, 3+K)            ~(D << 20 | rank) of the window's last K collectives (0: none)
//   [3+K, 3+2K)          (D << 20 | rank)
//   [3+2K, 3+2K+N)       each rank's lead EWMA in ns (its own slot; the others 0)
//   [3+2K+N, 3+2K+2N)    each rank's delays applied during the window, ns
//   [3+2K+2N]            rank 0's exit of the previous exchange, on its clock (0: none)
// Every rank absorbs the same reduced words, so the controllers agree (controller.h).
//
// Threading: onCollective/fill/absorb/gateDelayNs run on the thread driving the engine;
// snapshot() and setPacing() may run on any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "src/pacing/clock.h"
#include "src/pacing/controller.h"
#include "src/pacing/histogram.h"
#include "src/pacing/iteration.h"

namespace tempo::pacing {

enum class Mode : int { Off = 0, Observe = 1, On = 2 };
// "off", "observe", "on" (case-insensitive); false when `text` is none of them.
bool parseMode(const char* text, Mode* out);
const char* modeName(Mode m);

// One finished collective, as the engine recorded it.
struct Sample {
  uint64_t seq = 0;
  uint8_t coll = 0;
  bool symmetric = false;  // every rank leaves it at about the same time (all-reduce, ...)
  uint64_t bytes = 0;
  int64_t arrivalNs = 0;   // gate entry
  int64_t exitNs = 0;
  int64_t delayNs = 0;     // gate delay applied
};

struct MonitorConfig {
  int rank = 0, nranks = 1;
  Mode mode = Mode::Observe;
  uint32_t window = 32;             // first window, in collectives (and the smallest)
  int64_t minWindowNs = 100000000;  // windows at most every 100 ms
  ControllerConfig controller;
};

// What tempoCommGetSkewStats reports (times in ns).
struct SkewSnapshot {
  uint64_t collectives = 0, windows = 0, measured = 0;
  int64_t skewP50 = 0, skewP99 = 0, commP50 = 0, commP99 = 0;
  double rho = 0;
  IterationSummary iteration;
  double lastEntropy = 0;     // normalised entropy of who arrived last (1: uniform)
  int topLast = -1;
  double topLastShare = 0;
  Mode mode = Mode::Observe;
  PacingDecision decision;
  int64_t delayNs = 0;        // this rank's current gate delay
  int64_t delayTotalNs = 0;   // all delays this rank applied
  uint64_t pacedCollectives = 0;
  uint32_t window = 0;
  std::vector<double> rankLeadNs;  // per rank, as of the last window
  bool clockKnown = false;         // asymmetric collectives are measured (setClock)
  DriftFit drift;                  // the latest fit of this rank's drift against rank 0
  double driftPpm = 0;             // the drift applied (resolved), ppm
};

class SkewMonitor {
 public:
  static constexpr uint32_t kSamples = 64;  // collectives measured per window (the last ones)
  explicit SkewMonitor(const MonitorConfig& c);

  size_t exchangeWords() const { return 4 + 2 * kSamples + 2 * size_t(c_.nranks); }
  // Records a finished collective; returns true when it closes a window (run the exchange
  // now, before the next collective starts: every rank closes windows at the same seq).
  bool onCollective(const Sample& s);
  void fill(std::span<uint64_t> words) const;
  // `exitNs`: when this rank's exchange finished (its clock).
  void absorb(std::span<const uint64_t> words, int64_t exitNs = 0);
  // The gate delay for this rank's next collective, of kind `coll` and `bytes` (0 unless
  // pacing is on and engaged). Leads are kept per (collective, log2 size): the collectives
  // of one iteration wait for different things (the first for the slowest rank's compute,
  // the next ones hardly at all), and one average over them would pace neither right.
  int64_t gateDelayNs(uint8_t coll, uint64_t bytes) const;
  // Sets the mode at run time. Off stops delays and statistics but not the exchange,
  // which all ranks must keep running in step.
  void setMode(Mode m) { mode_.store(m, std::memory_order_relaxed); }
  Mode mode() const { return mode_.load(std::memory_order_relaxed); }
  // Every rank's offset to rank 0's clock is known, this rank's being `offsetNs` (rank 0's
  // clock minus this one's) at `atNs` of this rank's clock: asymmetric collectives are
  // measured too. Every rank must call it alike, before its first collective.
  void setClock(int64_t offsetNs, int64_t atNs) {
    clockKnown_ = true;
    clockOffsetNs_ = offsetNs;
    clockAtNs_ = atNs;
  }
  // Hint: collectives per iteration (0 returns to inference).
  void setIterationPeriod(uint32_t p) { periodHint_.store(p, std::memory_order_relaxed); }
  SkewSnapshot snapshot() const;
  // The controller's decision and the window it came from (the engine's thread only).
  const PacingDecision& decision() const { return controller_.decision(); }
  const WindowStats& lastWindow() const { return lastWindow_; }
  int64_t maxDelayNs() const { return maxDelay_; }

 private:
  MonitorConfig c_;
  std::atomic<Mode> mode_;
  SkewController controller_;
  IterationTracker iter_;
  std::atomic<uint32_t> periodHint_{0};  // applied to iter_ when a window closes
  // The window's measured collectives, at seq % kSamples (a slot is filled when its kept_
  // is set; fill() and absorb() check the seq against the boundary).
  std::array<Sample, kSamples> window_{};
  std::array<bool, kSamples> kept_{};
  bool clockKnown_ = false;
  int64_t clockOffsetNs_ = 0, clockAtNs_ = 0;
  // Drift: offset samples from the exchanges' exits (a ring of the last kDriftSamples),
  // refitted every 8 windows; driftPpm_ is the resolved slope (0 until resolved).
  static constexpr size_t kDriftSamples = 1024;
  std::array<double, kDriftSamples> driftT_{}, driftO_{};
  uint64_t driftCount_ = 0;
  std::vector<double> driftTs_, driftOs_;  // the ring in time order, for the fit
  DriftScratch driftScratch_;
  DriftFit driftFit_;
  double driftPpm_ = 0;
  int64_t prevExchangeExitNs_ = 0;
  void sampleDrift(std::span<const uint64_t> words, int64_t exitNs);
  // Rank 0's clock at `t` of this rank's.
  int64_t onRankZeroClock(int64_t t) const {
    return t + clockOffsetNs_ + int64_t(driftPpm_ * 1e-6 * double(t - clockAtNs_));
  }
  // What a collective contributes to the exchange: its duration, or for an asymmetric one
  // the complement of its arrival on rank 0's clock (0: not measured).
  uint64_t measureOf(const Sample& s) const;
  uint64_t boundarySeq_;      // the seq that closes the current window
  uint32_t w_;                // the current window's length
  int64_t windowStartNs_ = 0, lastExitNs_ = 0;
  int64_t windowIterNs_ = 0;  // set in onCollective when the window closes
  // This rank's lead statistics (EWMA, alpha 1/8): over every measured collective, and
  // per signature (the kSignatures most recently seen), each with its delay.
  struct Lead {
    double ewma = 0, var = 0;
    bool seeded = false;
    void add(double lead);
  };
  struct SignatureLead {
    uint32_t sig = 0;
    uint64_t lastSeen = 0;  // window number
    Lead lead;
    int64_t delayNs = 0;
  };
  static constexpr size_t kSignatures = 16;
  SignatureLead& leadOf(uint32_t sig);
  Lead lead_;
  std::array<SignatureLead, kSignatures> sigLeads_{};
  size_t sigCount_ = 0;
  int64_t maxDelay_ = 0, windowDelayNs_ = 0;
  std::vector<double> prevLeads_;
  int prevTopLast_ = -1, prevLeast_ = -1;
  WindowStats lastWindow_;
  SlidingHistogram skewHist_{256}, commHist_{256};
  std::vector<uint64_t> lastCounts_;  // per rank: times last, over all windows
  // absorb()'s working buffers, sized once so that steady state never allocates.
  std::vector<int64_t> comms_, skews_;
  std::vector<uint32_t> last_;
  std::vector<double> leads_, leadsSorted_;
  uint64_t collectives_ = 0, windows_ = 0, measured_ = 0, paced_ = 0;
  int64_t delayTotal_ = 0;
  mutable std::mutex mu_;  // guards published_
  SkewSnapshot published_;
};

}  // namespace tempo::pacing
