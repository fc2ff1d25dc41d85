// Building blocks the planners share: one transfer or copy step, and the scratch slots
// that hold partial sums in flight.
#pragma once

#include <algorithm>
#include <cstdint>

#include "src/algo/plan.h"

namespace tempo::algo {

// A Send (reading `loc`) or Recv (writing `loc`) of `bytes` with `peer`, message `msg`,
// waiting for step `dep`.
inline Step transfer(StepKind k, int peer, uint64_t msg, uint64_t bytes, Loc loc, uint32_t dep) {
  Step s;
  s.kind = k;
  s.peer = peer;
  s.msg = uint32_t(msg);
  s.bytes = bytes;
  (k == StepKind::Send ? s.src : s.dst) = loc;
  s.deps[0] = dep;
  return s;
}

inline Step copy(uint64_t bytes, Loc src, Loc dst) {
  Step s;
  s.kind = StepKind::Copy;
  s.bytes = bytes;
  s.src = src;
  s.dst = dst;
  return s;
}

// dst = src (op) src2 once deps d0 and d1 are done.
inline Step reduce(uint64_t bytes, Loc src, Loc src2, Loc dst, uint32_t d0, uint32_t d1 = kNoDep) {
  Step s;
  s.kind = StepKind::Reduce;
  s.bytes = bytes;
  s.src = src;
  s.src2 = src2;
  s.dst = dst;
  s.deps[0] = d0;
  s.deps[1] = d1;
  return s;
}

// Scratch slots for partial sums in flight, reused round-robin: a slot is refilled only
// after the last step that read it (recorded with readBy) has finished. Uses plan.work.
class Slots {
 public:
  Slots(Plan& plan, uint64_t slotBytes, uint64_t count) : plan_(plan), bytes_(slotBytes), n_(count) {
    plan.work.assign(size_t(n_), kNoDep);
    plan.scratchBytes = n_ * bytes_;
  }
  // The next slot and the step its refill must wait for.
  uint64_t take(uint32_t* dep) {
    uint64_t s = next_++ % n_;
    *dep = plan_.work[size_t(s)];
    return s;
  }
  Loc loc(uint64_t slot) const { return {BufId::Scratch, slot * bytes_}; }
  void readBy(uint64_t slot, uint32_t step) { plan_.work[size_t(slot)] = step; }

 private:
  Plan& plan_;
  uint64_t bytes_, n_, next_ = 0;
};

// Slot count for `columns` columns of `chunk` bytes, each needing up to `perColumn` slots,
// within `scratch` bytes (at least two slots, so a send can overlap the next receive).
inline uint64_t slotCount(uint64_t scratch, uint64_t chunk, uint64_t columns, uint64_t perColumn) {
  return std::max<uint64_t>(2, std::min(columns * perColumn, scratch / std::max<uint64_t>(1, chunk)));
}

}  // namespace tempo::algo
