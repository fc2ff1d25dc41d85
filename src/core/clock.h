// Monotonic time. One clock for the whole library so that records from the engine,
// bootstrap deadlines and pacing can be compared.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <ctime>

namespace tempo {

inline int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// A point in time after which a wait gives up. Deadline::never() never expires.
//
// A deadline may also carry a cancel flag (cancelledBy): once the flag is set it counts as
// expired, and remainingMs() never exceeds kCancelPollMs, so that a blocking poll() wakes
// up often enough to notice. This is how ncclCommAbort interrupts a nonblocking init.
class Deadline {
 public:
  static constexpr int kCancelPollMs = 20;
  static Deadline after(int64_t ns) { return Deadline(nowNs() + ns); }
  static Deadline afterSeconds(int64_t s) { return after(s * 1000000000); }
  static Deadline never() { return Deadline(INT64_MAX); }
  // This deadline, also expiring when `*flag` becomes true. `flag` must outlive the waits.
  Deadline cancelledBy(const std::atomic<bool>* flag) const {
    Deadline d = *this;
    d.cancel_ = flag;
    return d;
  }
  // This deadline, or `ns` from now if that is sooner (the cancel flag kept).
  Deadline within(int64_t ns) const {
    Deadline d = *this;
    d.at_ = std::min(at_, nowNs() + ns);
    return d;
  }
  bool cancelled() const { return cancel_ && cancel_->load(std::memory_order_acquire); }
  bool expired() const { return cancelled() || (at_ != INT64_MAX && nowNs() >= at_); }
  // Milliseconds left, clamped to [0, INT32_MAX] (for poll()).
  int remainingMs() const {
    if (cancelled()) return 0;
    int ms = INT32_MAX;
    if (at_ != INT64_MAX) {
      int64_t left = (at_ - nowNs()) / 1000000;
      ms = left < 0 ? 0 : left > INT32_MAX ? INT32_MAX : int(left);
    }
    return cancel_ && ms > kCancelPollMs ? kCancelPollMs : ms;
  }
  int64_t at() const { return at_; }

 private:
  explicit Deadline(int64_t at) : at_(at) {}
  int64_t at_;
  const std::atomic<bool>* cancel_ = nullptr;
};

}  // namespace tempo
