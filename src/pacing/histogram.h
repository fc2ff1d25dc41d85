// A log-bucket histogram of non-negative durations (ns), HDR-style: 8 buckets per power
// of two, so any percentile is within about 9% of the true value. Fixed size, O(1)
// updates, no allocation, and mergeable: adding two histograms' counts gives the
// histogram of both sample sets (which is what lets ranks or windows be combined).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

namespace tempo::pacing {

class LogHistogram {
 public:
  static constexpr int kSubBits = 3;                    // 8 buckets per octave
  static constexpr int kOctaves = 44;                   // up to 2^44 ns (4.9 hours)
  static constexpr int kBuckets = (kOctaves + 1) << kSubBits;

  void add(uint64_t v, uint32_t times = 1) {
    counts_[size_t(bucketOf(v))] += times;
    total_ += times;
  }
  void merge(const LogHistogram& o) {
    for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += o.counts_[i];
    total_ += o.total_;
  }
  void clear() {
    counts_.fill(0);
    total_ = 0;
  }
  uint64_t count() const { return total_; }

  // The value below which a fraction q (0..1) of the samples lie: the midpoint of the
  // bucket holding the ceil(q * count)-th sample. 0 when empty.
  uint64_t percentile(double q) const {
    if (total_ == 0) return 0;
    const uint64_t rank = std::max<uint64_t>(1, uint64_t(q * double(total_) + 0.999999));
    uint64_t seen = 0;
    for (int b = 0; b < kBuckets; ++b) {
      seen += counts_[size_t(b)];
      if (seen >= rank) return midpoint(b);
    }
    return midpoint(kBuckets - 1);
  }

  // Values below 2^kSubBits have a bucket each; above, bucket = octave * 8 + the next
  // three bits below the leading one.
  static int bucketOf(uint64_t v) {
    if (v < (uint64_t(1) << kSubBits)) return int(v);
    const int msb = 63 - std::countl_zero(v);
    if (msb > kOctaves) return kBuckets - 1;
    const int sub = int((v >> (msb - kSubBits)) & ((1u << kSubBits) - 1));
    return ((msb - kSubBits + 1) << kSubBits) + sub;
  }
  static uint64_t lowerBound(int b) {
    if (b < (1 << kSubBits)) return uint64_t(b);
    const int msb = (b >> kSubBits) + kSubBits - 1;
    const uint64_t sub = uint64_t(b & ((1 << kSubBits) - 1));
    return (uint64_t(1) << msb) | (sub << (msb - kSubBits));
  }
  static uint64_t midpoint(int b) {
    if (b < (1 << kSubBits)) return uint64_t(b);
    const uint64_t lo = lowerBound(b), width = uint64_t(1) << ((b >> kSubBits) - 1);
    return lo + width / 2;
  }

 private:
  std::array<uint32_t, kBuckets> counts_{};
  uint64_t total_ = 0;
};

// A histogram over roughly the last `span` samples: two halves, the older dropped when
// the newer fills (so between span/2 and span samples are counted).
class SlidingHistogram {
 public:
  explicit SlidingHistogram(uint32_t span = 256) : half_(std::max<uint32_t>(1, span / 2)) {}
  void add(uint64_t v) {
    if (current_.count() >= half_) {
      previous_ = current_;
      current_.clear();
    }
    current_.add(v);
  }
  LogHistogram snapshot() const {
    LogHistogram h = previous_;
    h.merge(current_);
    return h;
  }

 private:
  uint32_t half_;
  LogHistogram current_, previous_;
};

}  // namespace tempo::pacing
