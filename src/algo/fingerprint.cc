#include "src/algo/fingerprint.h"

#include <algorithm>

namespace tempo::algo {
namespace {

// Whether step i can run without anything from a peer: local steps (Copy, Reduce) all of
// whose dependencies are local too. `memo` has room for i + 1 entries (0 unknown, 1 no,
// 2 yes); dependencies precede their dependents, so one pass in step order settles it.
bool needsNoPeer(const Plan& plan, uint32_t i, std::vector<uint32_t>& memo) {
  for (uint32_t j = 0; j <= i; ++j) {
    const Step& s = plan.steps[j];
    bool local = j == i || s.kind == StepKind::Copy || s.kind == StepKind::Reduce;
    for (uint32_t d : s.deps)
      if (d != kNoDep && memo[d] != 2) local = false;
    memo[j] = local ? 2 : 1;
  }
  return memo[i] == 2;
}

}  // namespace

uint32_t fingerprintRounds(int nranks) {
  uint32_t rounds = 0;
  while ((int64_t(1) << rounds) < nranks) ++rounds;
  return rounds;
}

uint64_t prependFingerprint(Plan& plan, int rank, int nranks, uint32_t msg, const FingerprintLocs& at) {
  const uint32_t rounds = fingerprintRounds(nranks);
  if (rounds == 0) return 0;
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;

  // Phase 1: the first message (lowest msg) of the plan to rank + 1 and from rank - 1.
  // Both sides of a pair see the same message as the first, so the receiver knows which
  // of its receives round 0 may have carried; whether it did, only the sender knows.
  uint32_t send = kNoDep, recv = kNoDep;
  for (uint32_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    if (s.kind == StepKind::Send && s.peer == next && (send == kNoDep || s.msg < plan.steps[send].msg)) send = i;
    if (s.kind == StepKind::Recv && s.peer == prev && (recv == kNoDep || s.msg < plan.steps[recv].msg)) recv = i;
  }
  auto small = [&](uint32_t i) {
    return i != kNoDep && plan.steps[i].bytes > 0 && plan.steps[i].bytes <= kMaxCarriedBytes;
  };
  // The sender carries its message only if round 0 need not wait for a peer because of it
  // (detection must not depend on the data path) and the window reaches it at once.
  if (small(send)) {
    plan.work.assign(send + 1, 0);
    if (send >= plan.window || !needsNoPeer(plan, send, plan.work)) send = kNoDep;
  } else {
    send = kNoDep;
  }
  const uint64_t carried = send == kNoDep ? 0 : plan.steps[send].bytes;

  // Phase 2: the exchange goes in front; the carrying Send goes right after the carried
  // message's step, which becomes the copy into round 0's message. Built in the plan's
  // spare step list (its capacity kept: no allocation per collective), then swapped in.
  const uint32_t added = 3 * rounds;
  auto moved = [&](uint32_t d) { return d == kNoDep ? kNoDep : d + added + (send != kNoDep && d > send ? 1 : 0); };
  std::vector<Step>& out = plan.spare;
  out.assign(added, Step{});
  for (uint32_t k = 0; k < rounds; ++k) {
    const int dist = int((int64_t(1) << k) % nranks);
    const int to = (rank + dist) % nranks, from = (rank + nranks - dist) % nranks;
    const uint32_t prevCheck = k == 0 ? kNoDep : fingerprintCheckStep(k - 1);
    Step& s = out[3 * k];
    Step& r = out[fingerprintRecvStep(k)];
    Step& check = out[fingerprintCheckStep(k)];
    if (k > 0 || send == kNoDep) {  // else: a no-op, round 0's Send is the carrying one
      s.kind = StepKind::Send;
      s.peer = to;
      s.msg = msg - k;
      s.bytes = at.bytes;
      s.src = at.mine;
      s.deps[0] = prevCheck;
    }
    r.kind = StepKind::Recv;
    r.peer = from;
    r.msg = msg - k;
    r.bytes = k == 0 ? at.bytes + kMaxCarriedBytes : at.bytes;
    r.upTo = k == 0;
    r.dst = k == 0 ? at.leadIn : Loc{at.theirs.buf, at.theirs.offset + (k - 1) * at.bytes};
    check.kind = StepKind::Check;
    check.peer = from;
    check.bytes = at.bytes;
    check.src = r.dst;
    check.src2 = at.mine;
    check.deps[0] = fingerprintRecvStep(k);
    check.deps[1] = prevCheck;
  }
  const bool carries = small(recv);
  for (uint32_t i = 0; i < plan.steps.size(); ++i) {
    Step s = plan.steps[i];
    for (uint32_t& d : s.deps) d = moved(d);
    if (i == recv && carries) {
      s.kind = StepKind::RecvCarried;
      s.src = at.leadIn;
      s.src.offset += at.bytes;
      plan.carriedRecv = uint32_t(out.size());
    }
    if (i != send) {
      out.push_back(s);
      continue;
    }
    Step lead;  // round 0's Send: the fingerprint and the data, once copied in
    lead.kind = StepKind::Send;
    lead.peer = next;
    lead.msg = msg;
    lead.bytes = at.bytes + s.bytes;
    lead.src = at.leadOut;
    lead.deps[0] = uint32_t(out.size());
    s.kind = StepKind::Copy;  // same dependencies as the Send it was
    s.peer = -1;
    s.msg = 0;
    s.dst = at.leadOut;
    s.dst.offset += at.bytes;
    out.push_back(s);
    out.push_back(lead);
  }
  plan.steps.swap(out);
  const uint64_t window = uint64_t(plan.window) + added + (send != kNoDep ? 1 : 0);
  plan.window = uint32_t(std::min<uint64_t>(window, UINT32_MAX));  // some plans have no limit
  return carried;
}

}  // namespace tempo::algo
