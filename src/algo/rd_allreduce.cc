#include "src/algo/rd_allreduce.h"

namespace tempo::algo {

void planRdAllReduce(const RdAllReduceArgs& a, Plan& out) {
  const RingView rv(a);
  const int n = a.nranks, r = rv.pos;  // in ring positions; peers through rv.rankAt
  const uint64_t bytes = a.count * a.typeSize;
  if (a.count == 0) return;
  int p = 1, rounds = 0;
  while (p * 2 <= n) {
    p *= 2;
    ++rounds;
  }
  const int extra = n - p;
  const BufId acc = a.inPlace ? BufId::Input : BufId::Output;  // where this rank's sum lives
  const uint32_t unfoldMsg = uint32_t(rounds) + 1;
  out.scratchBytes = r < p ? bytes : 0;
  out.window = 8;

  auto step = [&](StepKind k, int peer, uint32_t msg, Loc src, Loc src2, Loc dst, uint32_t d0, uint32_t d1) {
    Step s;
    s.kind = k;
    s.peer = peer;
    s.msg = msg;
    s.bytes = bytes;
    s.src = src;
    s.src2 = src2;
    s.dst = dst;
    s.deps[0] = d0;
    s.deps[1] = d1;
    return out.add(s);
  };
  const Loc in{BufId::Input, 0}, mine{acc, 0}, scratch{BufId::Scratch, 0}, none{};

  // An extra rank: hand the input to its partner, then receive the result. The receive
  // waits for the send, which reads the same buffer when in place.
  if (r >= p) {
    uint32_t send = step(StepKind::Send, rv.rankAt(r - p), 0, in, none, none, kNoDep, kNoDep);
    step(StepKind::Recv, rv.rankAt(r - p), unfoldMsg, none, none, mine, send, kNoDep);
    return;
  }

  uint32_t last = kNoDep;       // the step that last wrote this rank's sum
  uint32_t scratchFree = kNoDep;  // the step that last read the scratch vector
  if (!a.inPlace) last = step(StepKind::Copy, -1, 0, in, none, mine, kNoDep, kNoDep);
  auto fold = [&](int peer, uint32_t msg, bool final) {
    uint32_t recv = step(StepKind::Recv, peer, msg, none, none, scratch, scratchFree, kNoDep);
    uint32_t red = step(StepKind::Reduce, -1, 0, mine, scratch, mine, recv, last);
    out.steps[red].postDivisor = final && a.average ? uint32_t(n) : 1;
    return red;
  };

  // Phase 1: absorb the extra partner's input.
  if (r < extra) scratchFree = last = fold(rv.rankAt(r + p), 0, rounds == 0);
  // Phase 2: exchange sums with partners at distance 1, 2, 4, ...
  for (int k = 0; k < rounds; ++k) {
    int partner = rv.rankAt(r ^ (1 << k));
    uint32_t msg = uint32_t(k) + 1;
    uint32_t send = step(StepKind::Send, partner, msg, mine, none, none, last, kNoDep);
    uint32_t recv = step(StepKind::Recv, partner, msg, none, none, scratch, scratchFree, kNoDep);
    // The reduction overwrites the sum being sent: it waits for the send as well.
    uint32_t red = step(StepKind::Reduce, -1, 0, mine, scratch, mine, recv, send);
    out.steps[red].postDivisor = k == rounds - 1 && a.average ? uint32_t(n) : 1;
    scratchFree = last = red;
  }
  // Phase 3: return the result to the extra partner.
  if (r < extra) step(StepKind::Send, rv.rankAt(r + p), unfoldMsg, mine, none, none, last, kNoDep);
}

}  // namespace tempo::algo
