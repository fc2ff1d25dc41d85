#include "src/algo/ring_allreduce.h"

#include <algorithm>

#include "src/algo/collectives.h"
#include "src/algo/ring.h"

namespace tempo::algo {
namespace {

uint64_t segmentElems(uint64_t count, uint32_t typeSize, int n) {
  uint64_t align = std::max<uint64_t>(1, 64 / typeSize);
  uint64_t per = (count + uint64_t(n) - 1) / uint64_t(n);
  return (per + align - 1) / align * align;
}

}  // namespace

Range ringSegment(uint64_t count, uint32_t typeSize, int nranks, int seg) {
  uint64_t per = segmentElems(count, typeSize, nranks);
  uint64_t b = std::min(count, per * uint64_t(seg));
  return {b, std::min(count, b + per)};
}

void planRingAllReduce(const RingAllReduceArgs& a, Plan& out) {
  const int n = a.nranks, p = a.pos;
  const uint64_t ts = a.typeSize;
  if (a.count == 0) return;
  if (n == 1) {
    // Single rank: the result is the input (an average over one rank divides by one).
    if (!a.inPlace) {
      Step c;
      c.kind = StepKind::Copy;
      c.bytes = a.count * ts;
      c.src = {BufId::Input, 0};
      c.dst = {BufId::Output, 0};
      out.add(c);
    }
    return;
  }

  const uint64_t segElems = segmentElems(a.count, a.typeSize, n);
  uint64_t chunkBytes = a.chunkBytes;
  if (a.inPlace) chunkBytes = std::min(chunkBytes, a.scratchBytes / 2);  // two slots at least
  const uint32_t msgsPerColumn = uint32_t(2 * (n - 1));
  // Few enough columns that every message id fits below kMaxDataMsgs.
  chunkBytes = columnChunk(segElems * ts, chunkBytes, msgsPerColumn, uint32_t(ts));
  const uint64_t chunkElems = std::max<uint64_t>(1, chunkBytes / ts);
  const uint64_t columns = (segElems + chunkElems - 1) / chunkElems;

  // In-place reduce-scatter receives into scratch slots, reused round-robin; a slot is
  // refilled only after the reduction that read it.
  const uint64_t slotBytes = std::min(chunkElems, segElems) * ts;
  const uint64_t recvs = columns * uint64_t(n - 1);
  const uint64_t slots =
      a.inPlace ? std::min(recvs, std::max<uint64_t>(2, a.scratchBytes / slotBytes)) : 0;
  // Planner scratch lives in the Plan so that its capacity is reused across collectives.
  out.work.assign(size_t(slots) + size_t(n), kNoDep);
  uint32_t* slotReader = out.work.data();
  uint64_t nextSlot = 0;
  out.scratchBytes = slots * slotBytes;

  // Byte range of column c inside segment seg; empty when the segment is shorter.
  auto piece = [&](int seg, uint64_t c) {
    Range r = ringSegment(a.count, a.typeSize, n, seg);
    uint64_t b = std::min(r.end, r.begin + c * chunkElems);
    uint64_t e = std::min(r.end, b + chunkElems);
    return Range{b * ts, e * ts};
  };
  auto xfer = [&](StepKind k, int peer, uint32_t msg, uint64_t bytes, Loc loc, uint32_t dep) {
    Step s;
    s.kind = k;
    s.peer = peer;
    s.msg = msg;
    s.bytes = bytes;
    (k == StepKind::Send ? s.src : s.dst) = loc;
    s.deps[0] = dep;
    return out.add(s);
  };

  const BufId acc = a.inPlace ? BufId::Input : BufId::Output;  // where partial sums live
  out.steps.reserve(out.steps.size() + size_t(columns) * (n - 1) * 5);
  for (uint64_t c = 0; c < columns; ++c) {
    const uint32_t msg0 = uint32_t(c) * msgsPerColumn;
    uint32_t* rsSendIdx = out.work.data() + slots;  // this column's reduce-scatter sends
    uint32_t lastReduce = kNoDep;

    // Phase 1, reduce-scatter: fold the predecessor's partial sum into ours, pass it on.
    for (int s = 0; s < n - 1; ++s) {
      Range sp = piece(ring::rsSendSeg(p, s, n), c);
      Loc from = s == 0 ? Loc{BufId::Input, sp.begin} : Loc{acc, sp.begin};
      rsSendIdx[size_t(s)] = xfer(StepKind::Send, a.nextRank, msg0 + uint32_t(s), sp.size(), from, lastReduce);

      Range rp = piece(ring::rsRecvSeg(p, s, n), c);
      Loc land{BufId::Output, rp.begin};
      uint32_t recvDep = kNoDep;
      uint64_t slot = 0;
      if (a.inPlace) {
        slot = nextSlot++ % slots;
        land = {BufId::Scratch, slot * slotBytes};
        recvDep = slotReader[size_t(slot)];
      }
      uint32_t recv = xfer(StepKind::Recv, a.prevRank, msg0 + uint32_t(s), rp.size(), land, recvDep);

      Step r;
      r.kind = StepKind::Reduce;
      r.bytes = rp.size();
      r.src = land;
      r.src2 = {BufId::Input, rp.begin};
      r.dst = {acc, rp.begin};
      r.postDivisor = (a.average && s == n - 2) ? uint32_t(n) : 1;
      r.deps[0] = recv;
      lastReduce = out.add(r);
      if (a.inPlace) slotReader[size_t(slot)] = lastReduce;
    }

    // Phase 2, all-gather: circulate the finished segments straight into the output. A
    // receive overwrites a segment only after our reduce-scatter send of it completed.
    uint32_t lastRecv = lastReduce;
    for (int s = 0; s < n - 1; ++s) {
      const uint32_t msg = msg0 + uint32_t(n - 1 + s);
      Range sp = piece(ring::agSendSeg(p, s, n), c);
      xfer(StepKind::Send, a.nextRank, msg, sp.size(), Loc{BufId::Output, sp.begin}, lastRecv);
      Range rp = piece(ring::agRecvSeg(p, s, n), c);
      lastRecv = xfer(StepKind::Recv, a.prevRank, msg, rp.size(), Loc{BufId::Output, rp.begin},
                      rsSendIdx[size_t(s)]);
    }
  }
  // Keep about three columns in flight: enough to overlap reductions with transfers.
  out.window = uint32_t(std::min<uint64_t>(out.steps.size(), uint64_t(5 * (n - 1)) * 3));
}

}  // namespace tempo::algo
