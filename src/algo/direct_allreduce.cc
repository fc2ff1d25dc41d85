#include "src/algo/direct_allreduce.h"

#include <cstddef>
#include <vector>

namespace tempo::algo {

void planDirectAllReduce(const DirectAllReduceArgs& a, Plan& out) {
  const int n = a.nranks, me = a.rank;
  const uint64_t bytes = a.count * a.typeSize;
  if (a.count == 0) return;
  if (n == 1) {
    if (a.inPlace) return;
    Step c;
    c.kind = StepKind::Copy;
    c.bytes = bytes;
    c.src = {BufId::Input, 0};
    c.dst = {BufId::Output, 0};
    out.add(c);
    return;
  }
  out.scratchBytes = directScratchBytes(a.count, a.typeSize, n, a.inPlace);
  out.window = UINT32_MAX;  // the plan is short and every transfer should start at once
  auto slotOf = [&](int r) { return Loc{BufId::Scratch, uint64_t(r < me ? r : r - 1) * bytes}; };
  const Loc input{BufId::Input, 0}, output{BufId::Output, 0};
  // Out of place the sum builds up in the output; in place, in a scratch accumulator,
  // because the input is still needed (and being sent) until its turn in the chain.
  const Loc acc = a.inPlace ? Loc{BufId::Scratch, uint64_t(n - 1) * bytes} : output;

  // Phase 1: post every send and every receive.
  uint32_t allSent = kNoDep;  // a chain of empty joins, done once every send is
  std::vector<uint32_t>& recvOf = out.work;
  recvOf.assign(size_t(n), kNoDep);
  for (int k = 1; k < n; ++k) {
    int peer = (me + k) % n;  // stagger so that ranks do not all target rank 0 first
    Step s;
    s.kind = StepKind::Send;
    s.peer = peer;
    s.bytes = bytes;
    s.src = input;
    uint32_t send = out.add(s);
    Step join;
    join.kind = StepKind::Copy;
    join.deps[0] = send;
    join.deps[1] = allSent;
    allSent = out.add(join);
    Step r;
    r.kind = StepKind::Recv;
    r.peer = peer;
    r.bytes = bytes;
    r.dst = slotOf(peer);
    recvOf[size_t(peer)] = out.add(r);
  }

  // Phase 2: acc = x0 op x1, then acc op= x2, ... in rank order on every rank.
  auto operand = [&](int r) { return r == me ? input : slotOf(r); };
  uint32_t last = kNoDep;
  for (int k = 1; k < n; ++k) {
    const bool final = k == n - 1;
    Step red;
    red.kind = StepKind::Reduce;
    red.bytes = bytes;
    red.src = k == 1 ? operand(0) : acc;
    red.src2 = operand(k);
    red.dst = final && a.inPlace ? output : acc;
    red.postDivisor = final && a.average ? uint32_t(n) : 1;
    red.deps[0] = recvOf[size_t(k)] != kNoDep ? recvOf[size_t(k)] : last;
    red.deps[1] = k == 1 ? recvOf[0] : last;
    if (final && a.inPlace) {
      // The last reduction overwrites the input: every send of it must have finished.
      Step join;
      join.kind = StepKind::Copy;
      join.deps[0] = allSent;
      join.deps[1] = red.deps[1];
      red.deps[1] = out.add(join);
    }
    last = out.add(red);
  }
}

}  // namespace tempo::algo
