// Monotonic time. One clock for the whole library so that records from the engine,
// bootstrap deadlines and pacing can be compared.
#pragma once

#include <cstdint>
#include <ctime>

namespace tempo {

inline int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// A point in time after which a wait gives up. Deadline::never() never expires.
class Deadline {
 public:
  static Deadline after(int64_t ns) { return Deadline(nowNs() + ns); }
  static Deadline afterSeconds(int64_t s) { return after(s * 1000000000); }
  static Deadline never() { return Deadline(INT64_MAX); }
  bool expired() const { return at_ != INT64_MAX && nowNs() >= at_; }
  // Milliseconds left, clamped to [0, INT32_MAX] (for poll()).
  int remainingMs() const {
    if (at_ == INT64_MAX) return INT32_MAX;
    int64_t left = (at_ - nowNs()) / 1000000;
    return left < 0 ? 0 : left > INT32_MAX ? INT32_MAX : int(left);
  }
  int64_t at() const { return at_; }

 private:
  explicit Deadline(int64_t at) : at_(at) {}
  int64_t at_;
};

}  // namespace tempo
