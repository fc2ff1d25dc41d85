// Chooses how Tempo's shm moves a large message from one peer: streamed through the ring
// (two copies, made by the two processes at once) or pulled by cross-memory attach (one
// copy, made by the kernel, which pins the pages first). Which is faster is a property of
// the machine on the day, not of the code: on the VMs this was written on, the same
// 256 KiB broadcast took 10-18 us streamed and 25-32 us pulled one day, and 31-38 us
// streamed and 15-18 us pulled another. A probe at start-up (one process copying its own
// memory) could not tell, and two processes of one job read it differently. So the receiver
// times the messages it actually moves, per size class, and keeps choosing the faster way.
//
// Policy per size class (a power of two of bytes): the first kWarmup moves each way makes
// are not timed (the first pulls of a buffer took 7-34x their steady cost on these VMs:
// 64 KiB 89-168 us, then about 5; 256 KiB 205-240 us, then 10-16; 1 MiB 234-279 us, then
// 27-66; the first streams up to 3x; kept, they decided a class against pulling before its
// steady cost was seen); until each way has kMinSamples timings after that, the ways take
// turns; then the one whose median cost per byte over its last kWindow messages is lower is
// used, and every kExploreClose-th message (kExploreFar-th when one way is more than 1.25x
// the other) goes the other way, so that a change of the machine's mood is noticed. The
// cost of exploring is bounded by 1/kExploreFar of a message's time where the choice is
// clear.
//
// Not thread-safe: one per peer, used by the endpoint's progress thread. No allocation.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace tempo::transport::shm {

class ModeChooser {
 public:
  enum Mode : uint8_t { Stream = 0, Pull = 1 };
  static constexpr int kClasses = 48;
  static constexpr uint32_t kWarmup = 4;
  static constexpr uint32_t kWindow = 8;
  static constexpr uint32_t kMinSamples = 3;
  static constexpr uint32_t kExploreClose = 16;
  static constexpr uint32_t kExploreFar = 64;

  // The size class of `bytes`: messages of [2^k, 2^(k+1)) bytes share class k.
  static int classOf(size_t bytes) { return std::min(kClasses - 1, int(std::bit_width(bytes | 1)) - 1); }

  // The way to move the next message of `bytes`.
  Mode pick(size_t bytes) {
    Class& c = classes_[classOf(bytes)];
    const uint32_t nth = ++c.picks;
    if (!c.decided()) return c.ways[Pull].moves <= c.ways[Stream].moves ? Pull : Stream;
    float ratio = 1;
    const Mode best = c.better(&ratio);
    const uint32_t every = ratio > 1.25f ? kExploreFar : kExploreClose;
    return nth % every == 0 ? Mode(1 - best) : best;
  }

  // Records that a message of `bytes` took `ns` from its match to its completion by `mode`
  // (one of the way's first kWarmup in its class: counted, not kept).
  void record(Mode mode, size_t bytes, int64_t ns) {
    if (!bytes || ns < 0) return;
    Way& w = classes_[classOf(bytes)].ways[mode];
    if (w.moves++ < kWarmup) return;
    w.cost[w.n++ % kWindow] = float(double(ns) / double(bytes));
  }

  // Whether both ways have been timed enough for `bytes` to prefer one.
  bool decided(size_t bytes) const { return classes_[classOf(bytes)].decided(); }
  // The way pick() prefers for `bytes` once decided(), without counting a pick.
  Mode preferred(size_t bytes) const { return classes_[classOf(bytes)].better(nullptr); }
  // The median ns per byte of `mode` for `bytes` over its last timings (0 before any).
  float medianCost(Mode mode, size_t bytes) const { return classes_[classOf(bytes)].ways[mode].median(); }

 private:
  struct Way {
    float cost[kWindow] = {};
    uint32_t moves = 0;  // timings reported, warm-up included
    uint32_t n = 0;      // timings kept; the last min(n, kWindow) are in `cost`
    float median() const {
      const uint32_t k = std::min(n, kWindow);
      if (!k) return 0;
      float v[kWindow];
      std::copy(cost, cost + k, v);
      std::nth_element(v, v + k / 2, v + k);
      return v[k / 2];
    }
  };
  struct Class {
    Way ways[2];
    uint32_t picks = 0;
    bool decided() const { return ways[Stream].n >= kMinSamples && ways[Pull].n >= kMinSamples; }
    // The cheaper way by median (Pull on a tie), and the slower's median over the faster's.
    Mode better(float* ratio) const {
      const float s = ways[Stream].median(), p = ways[Pull].median();
      if (ratio) *ratio = std::max(s, p) / std::max(std::min(s, p), 1e-12f);
      return p <= s ? Pull : Stream;
    }
  };
  Class classes_[kClasses];
};

}  // namespace tempo::transport::shm
