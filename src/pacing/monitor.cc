#include "src/pacing/monitor.h"

#include <strings.h>

#include <algorithm>
#include <cmath>

namespace tempo::pacing {
namespace {

constexpr int kRankBits = 20;
constexpr uint64_t kMaxDuration = (uint64_t(1) << (64 - kRankBits)) - 1;
// Asymmetric collectives: arrivals on rank 0's clock modulo 2^42 ns (73 minutes), as
// 2^43 - that (in (2^42, 2^43], below kMaxDuration). Arrivals of one collective that
// straddle a wrap show as a spread near 2^42 and are dropped.
constexpr uint64_t kArrivalWrap = uint64_t(1) << 42;
constexpr double kAlpha = 0.125;
// Kendall's tau is O(n^2): beyond this many ranks, persistence rests on the other tests.
constexpr size_t kMaxTauRanks = 128;

template <class T>
T medianOf(std::vector<T>& v) {
  if (v.empty()) return 0;
  auto mid = v.begin() + ptrdiff_t(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// Kendall's tau-a between two equally long vectors (ties count as neither).
double kendallTau(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = a.size();
  if (n < 2 || b.size() != n) return 0;
  int64_t s = 0;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) {
      const double x = a[i] - a[j], y = b[i] - b[j];
      s += (x * y > 0) - (x * y < 0);
    }
  return double(s) / (double(n) * double(n - 1) / 2);
}

}  // namespace

bool parseMode(const char* text, Mode* out) {
  static constexpr struct { const char* name; Mode mode; } kModes[] = {
      {"off", Mode::Off}, {"observe", Mode::Observe}, {"on", Mode::On}};
  for (const auto& m : kModes)
    if (text && strcasecmp(text, m.name) == 0) {
      *out = m.mode;
      return true;
    }
  return false;
}

const char* modeName(Mode m) { return m == Mode::Off ? "off" : m == Mode::On ? "on" : "observe"; }

SkewMonitor::SkewMonitor(const MonitorConfig& c)
    : c_(c), mode_(c.mode), controller_(c.controller), boundarySeq_(std::max<uint32_t>(1, c.window) - 1),
      w_(std::max<uint32_t>(1, c.window)) {
  c_.window = w_;
  c_.nranks = std::clamp(c_.nranks, 1, 1 << kRankBits);
  lastCounts_.assign(size_t(c_.nranks), 0);
  comms_.reserve(kSamples);
  skews_.reserve(kSamples);
  last_.assign(size_t(c_.nranks), 0);
  leads_.assign(size_t(c_.nranks), 0);
  leadsSorted_.assign(size_t(c_.nranks), 0);
  prevLeads_.reserve(size_t(c_.nranks));
  published_.mode = c.mode;
  published_.window = w_;
  published_.decision = controller_.decision();
  published_.rankLeadNs.assign(size_t(c_.nranks), 0);
  driftTs_.reserve(kDriftSamples);
  driftOs_.reserve(kDriftSamples);
  for (auto* v : {&driftScratch_.slice, &driftScratch_.sliceT, &driftScratch_.sliceO, &driftScratch_.spread})
    v->reserve(kDriftSamples);
}

void SkewMonitor::sampleDrift(std::span<const uint64_t> words, int64_t exitNs) {
  const uint64_t zeroExit = words[exchangeWords() - 1];
  if (clockKnown_ && c_.rank != 0 && zeroExit > 0 && prevExchangeExitNs_ > 0) {
    const size_t i = driftCount_++ % kDriftSamples;
    driftT_[i] = double(prevExchangeExitNs_);
    driftO_[i] = double(int64_t(zeroExit) - prevExchangeExitNs_);
    if (driftCount_ % 8 == 0) {
      driftTs_.clear();
      driftOs_.clear();
      const uint64_t n = std::min<uint64_t>(driftCount_, kDriftSamples);
      for (uint64_t k = driftCount_ - n; k < driftCount_; ++k) {
        driftTs_.push_back(driftT_[k % kDriftSamples]);
        driftOs_.push_back(driftO_[k % kDriftSamples]);
      }
      driftFit_ = fitDrift(driftTs_, driftOs_, driftScratch_);
      driftPpm_ = driftFit_.resolvedPpm();
    }
  }
  prevExchangeExitNs_ = exitNs;
}

void SkewMonitor::Lead::add(double lead) {
  if (!seeded) {
    ewma = lead;
    seeded = true;
    return;
  }
  const double diff = lead - ewma;
  ewma += kAlpha * diff;
  var = (1 - kAlpha) * (var + kAlpha * diff * diff);
}

// The entry for `sig`; a new one replaces the entry seen longest ago.
SkewMonitor::SignatureLead& SkewMonitor::leadOf(uint32_t sig) {
  for (size_t i = 0; i < sigCount_; ++i)
    if (sigLeads_[i].sig == sig) {
      sigLeads_[i].lastSeen = windows_;
      return sigLeads_[i];
    }
  size_t slot = sigCount_;
  if (sigCount_ < kSignatures) ++sigCount_;
  else
    slot = size_t(std::min_element(sigLeads_.begin(), sigLeads_.end(),
                                   [](const SignatureLead& a, const SignatureLead& b) { return a.lastSeen < b.lastSeen; }) -
                  sigLeads_.begin());
  sigLeads_[slot] = SignatureLead{sig, windows_, {}, 0};
  return sigLeads_[slot];
}

int64_t SkewMonitor::gateDelayNs(uint8_t coll, uint64_t bytes) const {
  if (mode_.load(std::memory_order_relaxed) != Mode::On || maxDelay_ == 0) return 0;
  const uint32_t sig = signatureOf(coll, bytes);
  for (size_t i = 0; i < sigCount_; ++i)
    if (sigLeads_[i].sig == sig) return sigLeads_[i].delayNs;
  return 0;
}

bool SkewMonitor::onCollective(const Sample& s) {
  ++collectives_;
  if (collectives_ == 1) windowStartNs_ = s.arrivalNs;
  iter_.push(signatureOf(s.coll, s.bytes), s.arrivalNs, s.exitNs);
  if (s.delayNs > 0) {
    ++paced_;
    delayTotal_ += s.delayNs;
    windowDelayNs_ += s.delayNs;
  }
  if (s.symmetric || clockKnown_) {
    window_[s.seq % kSamples] = s;
    kept_[s.seq % kSamples] = true;
  }
  lastExitNs_ = s.exitNs;
  if (s.seq != boundarySeq_) return false;
  iter_.setPeriod(periodHint_.load(std::memory_order_relaxed));
  windowIterNs_ = iter_.update();
  return true;
}

uint64_t SkewMonitor::measureOf(const Sample& s) const {
  if (s.symmetric) return uint64_t(std::clamp<int64_t>(s.exitNs - s.arrivalNs, 1, int64_t(kMaxDuration)));
  if (!clockKnown_) return 0;
  return 2 * kArrivalWrap - (uint64_t(onRankZeroClock(s.arrivalNs)) & (kArrivalWrap - 1));
}

void SkewMonitor::fill(std::span<uint64_t> words) const {
  std::fill(words.begin(), words.end(), 0);
  if (words.size() < exchangeWords()) return;
  // The next window: long enough to last minWindowNs at this window's pace.
  const double perColl = double(std::max<int64_t>(1, lastExitNs_ - windowStartNs_)) / w_;
  const double want = std::ceil(double(c_.minWindowNs) / perColl);
  words[0] = uint64_t(std::clamp(want, double(c_.window), double(1 << 20)));
  words[1] = uint64_t(std::max<int64_t>(0, windowIterNs_));
  words[2] = iter_.summary().period;
  const size_t K = kSamples;
  for (size_t i = 0; i < K; ++i) {
    const Sample& s = window_[i];
    if (!kept_[i] || s.seq > boundarySeq_ || boundarySeq_ - s.seq >= K) continue;
    const size_t j = size_t(boundarySeq_ - s.seq);
    const uint64_t d = measureOf(s);
    if (d == 0) continue;
    const uint64_t v = (d << kRankBits) | uint64_t(c_.rank);
    words[3 + j] = ~v;
    words[3 + K + j] = v;
  }
  words[3 + 2 * K + size_t(c_.rank)] = uint64_t(std::max(0.0, std::round(lead_.ewma)));
  words[3 + 2 * K + size_t(c_.nranks) + size_t(c_.rank)] = uint64_t(std::max<int64_t>(0, windowDelayNs_));
  if (c_.rank == 0) words[exchangeWords() - 1] = uint64_t(std::max<int64_t>(0, prevExchangeExitNs_));
}

void SkewMonitor::absorb(std::span<const uint64_t> words, int64_t exitNs) {
  if (words.size() < exchangeWords()) return;
  sampleDrift(words, exitNs);
  const size_t K = kSamples, N = size_t(c_.nranks);
  ++windows_;
  // Per collective: transfer time, skew, last arriver; this rank's lead. (No allocation
  // here: the buffers are members sized at construction.)
  std::vector<int64_t>& comms = comms_;
  std::vector<int64_t>& skews = skews_;
  std::vector<uint32_t>& last = last_;
  comms.clear();
  skews.clear();
  std::fill(last.begin(), last.end(), 0);
  // This rank's sample of each slot (slot j: the collective j before the boundary).
  std::array<const Sample*, kSamples> mine{};
  uint32_t judged = 0;  // collectives whose last arriver is known (asymmetric ones too)
  for (size_t i = 0; i < K; ++i) {
    const Sample& s = window_[i];
    if (kept_[i] && s.seq <= boundarySeq_ && boundarySeq_ - s.seq < K) mine[size_t(boundarySeq_ - s.seq)] = &s;
  }
  for (size_t j = 0; j < K; ++j) {
    // Every rank called the same collective at this seq, so this rank's sample says
    // whether the slot holds durations or arrivals.
    if (words[3 + j] == 0 || words[3 + K + j] == 0 || !mine[j]) continue;
    const bool symmetric = mine[j]->symmetric;
    const uint64_t lo = ~words[3 + j], hi = words[3 + K + j];
    const int64_t comm = int64_t(lo >> kRankBits), longest = int64_t(hi >> kRankBits);
    const size_t lastRank = size_t(lo & ((1u << kRankBits) - 1));
    if (!symmetric && uint64_t(longest - comm) >= kArrivalWrap / 2) continue;  // straddles a wrap
    if (symmetric) {
      comms.push_back(comm);
      skews.push_back(longest - comm);
      commHist_.add(uint64_t(comm));
    }
    skewHist_.add(uint64_t(longest - comm));
    if (lastRank < N) {
      ++last[lastRank];
      ++lastCounts_[lastRank];
    }
    ++judged;
    ++measured_;
    const double lead = double(int64_t(measureOf(*mine[j])) - comm);
    lead_.add(lead);
    leadOf(signatureOf(mine[j]->coll, mine[j]->bytes)).lead.add(lead);
  }
  WindowStats w;
  w.nranks = c_.nranks;
  w.samples = uint32_t(comms.size());
  w.commP50Ns = medianOf(comms);
  w.skewP50Ns = medianOf(skews);
  w.rho = w.commP50Ns > 0 ? double(w.skewP50Ns) / double(w.commP50Ns) : 0;
  // Who arrived last, and how persistently.
  double entropy = 0;
  if (judged) {
    // Ties go to the rank last most often over all windows.
    w.topLast = 0;
    for (size_t r = 1; r < N; ++r)
      if (last[r] > last[size_t(w.topLast)] ||
          (last[r] == last[size_t(w.topLast)] && lastCounts_[r] > lastCounts_[size_t(w.topLast)]))
        w.topLast = int(r);
    w.topLastShare = double(last[size_t(w.topLast)]) / judged;
    w.sameTopLast = w.topLast == prevTopLast_;
    for (uint32_t n : last)
      if (n) entropy -= double(n) / judged * std::log(double(n) / judged);
    if (N > 1) entropy /= std::log(double(N));
  }
  std::vector<double>& leads = leads_;
  for (size_t r = 0; r < N; ++r) leads[r] = double(words[3 + 2 * K + r]);
  for (size_t r = 0; r < N && judged; ++r)
    if (words[3 + 2 * K + N + r] > 0 && double(last[r]) / judged > 2.0 / double(N)) w.pacedLastTooOften = true;
  if (N <= kMaxTauRanks && prevLeads_.size() == N) w.leadTau = kendallTau(prevLeads_, leads);
  // The rank with the least lead (the predicted last arriver) and how far below the
  // median it is.
  if (N > 1 && windows_ > 1) {
    const size_t least = size_t(std::min_element(leads.begin(), leads.end()) - leads.begin());
    std::copy(leads.begin(), leads.end(), leadsSorted_.begin());
    const double median = medianOf(leadsSorted_);
    w.sameLeast = int(least) == prevLeast_;
    w.leastGap = median > 0 ? (median - leads[least]) / median : 0;
    prevLeast_ = int(least);
  }
  w.iterNs = int64_t(words[1]);
  w.period = uint32_t(words[2]);
  // Decide; then this rank's own delay from its own lead.
  controller_.allowPacing(mode() == Mode::On);
  const PacingDecision d = controller_.onWindow(w);
  lastWindow_ = w;
  maxDelay_ = 0;
  for (size_t i = 0; i < sigCount_; ++i) {
    SignatureLead& l = sigLeads_[i];
    l.delayNs = controller_.delayFor(l.lead.ewma, std::sqrt(l.lead.var));
    maxDelay_ = std::max(maxDelay_, l.delayNs);
  }
  // The next window.
  w_ = uint32_t(std::clamp<uint64_t>(words[0], c_.window, 1 << 20));
  boundarySeq_ += w_;
  windowStartNs_ = lastExitNs_;
  windowDelayNs_ = 0;
  kept_.fill(false);
  if (judged) prevTopLast_ = w.topLast;
  prevLeads_ = leads;
  // Publish for readers on other threads.
  std::lock_guard lock(mu_);
  SkewSnapshot& p = published_;
  const LogHistogram skew = skewHist_.snapshot(), comm = commHist_.snapshot();
  p.collectives = collectives_;
  p.windows = windows_;
  p.measured = measured_;
  p.skewP50 = int64_t(skew.percentile(0.5));
  p.skewP99 = int64_t(skew.percentile(0.99));
  p.commP50 = int64_t(comm.percentile(0.5));
  p.commP99 = int64_t(comm.percentile(0.99));
  p.rho = w.rho;
  p.iteration = iter_.summary();
  p.lastEntropy = entropy;
  p.topLast = w.topLast;
  p.topLastShare = w.topLastShare;
  p.mode = mode();
  p.decision = d;
  p.delayNs = maxDelay_;
  p.delayTotalNs = delayTotal_;
  p.pacedCollectives = paced_;
  p.window = w_;
  std::copy(leads.begin(), leads.end(), p.rankLeadNs.begin());
  p.clockKnown = clockKnown_;
  p.drift = driftFit_;
  p.driftPpm = driftPpm_;
}

SkewSnapshot SkewMonitor::snapshot() const {
  std::lock_guard lock(mu_);
  SkewSnapshot s = published_;
  s.mode = mode();
  return s;
}

}  // namespace tempo::pacing
