#include "src/algo/hier_allreduce.h"

#include <algorithm>
#include <vector>

#include "src/algo/collectives.h"
#include "src/algo/rd_allreduce.h"
#include "src/algo/ring_allreduce.h"
#include "src/algo/tree_allreduce.h"

namespace tempo::algo {
namespace {

// Appends `sub` (planned with sub-ranks) to `out`: peers through `globalOf`, message ids
// plus `msgBase`, step indices shifted, Input read as Output when `onOutput`, and every
// root step (no deps) made to wait for `after` (the previous phase's join, or kNoDep).
// Returns the join of everything appended: a chain of empty copies over the sinks, so
// that one step stands for "this phase is done" with at most two deps per step.
uint32_t appendPhase(Plan& out, const Plan& sub, std::span<const int> globalOf, uint32_t msgBase, bool onOutput,
                     uint32_t after, uint32_t* maxMsg) {
  const uint32_t base = uint32_t(out.steps.size());
  std::vector<bool> depended(sub.steps.size(), false);
  for (const Step& s : sub.steps)
    for (uint32_t d : s.deps)
      if (d != kNoDep) depended[d] = true;
  for (Step s : sub.steps) {
    if (s.kind == StepKind::Send || s.kind == StepKind::Recv) {
      s.peer = globalOf[size_t(s.peer)];
      s.msg += msgBase;
      *maxMsg = std::max(*maxMsg, s.msg + 1);
    }
    if (onOutput) {
      for (Loc* l : {&s.src, &s.src2, &s.dst})
        if (l->buf == BufId::Input) l->buf = BufId::Output;
    }
    if (s.deps[0] == kNoDep && s.deps[1] == kNoDep) s.deps[0] = after;
    else
      for (uint32_t& d : s.deps)
        if (d != kNoDep) d += base;
    out.add(s);
  }
  uint32_t join = after;
  for (size_t i = 0; i < sub.steps.size(); ++i) {
    if (depended[i]) continue;
    Step j;  // an empty copy: done once both its deps are
    j.kind = StepKind::Copy;
    j.bytes = 0;
    j.deps[0] = base + uint32_t(i);
    j.deps[1] = join;
    join = out.add(j);
  }
  return join;
}

}  // namespace

void planHierAllReduce(const HierAllReduceArgs& a, Plan& out) {
  const CollPlanArgs& c = a.base;
  const int n = c.nranks, me = c.rank, myHost = a.hostOf[size_t(me)];
  // Who is on my host (leader first: its lowest rank), and the leaders in host order.
  std::vector<int> local, leaders;
  std::vector<bool> seenHost;
  for (int r = 0; r < n; ++r) {
    const int h = a.hostOf[size_t(r)];
    if (h == myHost) local.push_back(r);
    if (size_t(h) >= seenHost.size()) seenHost.resize(size_t(h) + 1, false);
    if (!seenHost[size_t(h)]) seenHost[size_t(h)] = true, leaders.push_back(r);
  }
  // Leaders in topology-ring order when there is one: neighbours on the ring are
  // neighbours in phase 2 (the ring's hops, recursive doubling's first exchanges), so only
  // the last exchanges cross the upper switches.
  if (!c.ring.empty()) {
    auto position = [&](int r) { return int(std::find(c.ring.begin(), c.ring.end(), r) - c.ring.begin()); };
    std::stable_sort(leaders.begin(), leaders.end(), [&](int x, int y) { return position(x) < position(y); });
  }
  const int localIndex = int(std::find(local.begin(), local.end(), me) - local.begin());
  const bool leader = localIndex == 0;
  const uint64_t bytes = c.count * c.typeSize;
  Plan sub;
  uint32_t msgs = 0, join = kNoDep;
  uint64_t scratch = 0;

  // Phase 1: reduce onto the host's leader (sub-rank 0), which ends with its host's sum
  // in its output; a lone rank copies its input there (out of place).
  // Phases 1 and 3 share their pairs and number their messages from 0 and from half the
  // id space, so phase 1 keeps below it (its chunks grow if needed); phase 2's pairs are
  // leaders of different hosts, which phases 1 and 3 never pair, so it numbers from 0.
  const uint64_t halfIds = kMaxDataMsgs / 2 - 64;
  const uint64_t localChunk =
      std::max<uint64_t>(a.localChunkBytes ? a.localChunkBytes : c.chunkBytes, (bytes + halfIds - 1) / halfIds);
  // Phases 1 and 3 run among the host's ranks, rooted at the leader.
  auto onHost = [&](bool inPlace) {
    CollPlanArgs h = c;
    h.chunkBytes = localChunk;
    h.rank = localIndex;
    h.nranks = int(local.size());
    h.root = 0;
    h.inPlace = inPlace;
    h.average = false;
    h.ring = {};
    return h;
  };
  const CollPlanArgs p1 = onHost(c.inPlace);
  sub.clear();
  planChainReduce(p1, sub);
  scratch = std::max(scratch, sub.scratchBytes);
  join = appendPhase(out, sub, local, 0, false, join, &msgs);

  // Phase 2: the leaders all-reduce their hosts' sums, in place on the output.
  if (leader && leaders.size() > 1) {
    const int li = int(std::find(leaders.begin(), leaders.end(), me) - leaders.begin());
    const int nl = int(leaders.size());
    sub.clear();
    CollPlanArgs p2 = c;
    p2.rank = li;
    p2.nranks = nl;
    p2.inPlace = true;
    p2.average = false;
    p2.ring = {};  // leaders are already in ring order
    if (a.leaders == LeaderAlgo::RecursiveDoubling) {
      planRdAllReduce(p2, sub);
    } else if (a.leaders == LeaderAlgo::Tree) {
      planTreeAllReduce(p2, sub);
    } else {
      RingAllReduceArgs r;
      r.count = c.count;
      r.typeSize = c.typeSize;
      r.inPlace = true;
      r.pos = li;
      r.nranks = nl;
      r.nextRank = (li + 1) % nl;
      r.prevRank = (li + nl - 1) % nl;
      r.chunkBytes = c.chunkBytes;
      r.scratchBytes = c.scratchBytes;
      planRingAllReduce(r, sub);
    }
    scratch = std::max(scratch, sub.scratchBytes);
    join = appendPhase(out, sub, leaders, 0, true, join, &msgs);
  }

  // Phase 3: the leader broadcasts the result to its host, in place on the output.
  const CollPlanArgs p3 = onHost(true);
  sub.clear();
  planChainBroadcast(p3, sub);
  scratch = std::max(scratch, sub.scratchBytes);
  appendPhase(out, sub, local, kMaxDataMsgs / 2, true, join, &msgs);
  out.scratchBytes = std::max(out.scratchBytes, scratch);
  out.window = uint32_t(std::min<size_t>(out.steps.size(), 64));
}

}  // namespace tempo::algo
