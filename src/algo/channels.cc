#include "src/algo/channels.h"

#include <algorithm>

#include "src/algo/collectives.h"
#include "src/algo/ring_allreduce.h"

namespace tempo::algo {

ElementRange channelRange(uint64_t count, uint32_t typeSize, int channels, int c) {
  const uint64_t align = std::max<uint64_t>(1, 64 / std::max<uint32_t>(1, typeSize));
  const uint64_t n = uint64_t(std::max(1, channels));
  uint64_t per = (count + n - 1) / n;
  per = (per + align - 1) / align * align;
  const uint64_t begin = std::min(count, per * uint64_t(c));
  return {begin, std::min(count, begin + per)};
}

void channelRing(std::span<const int> ring, int c, std::vector<int>& out) {
  out.assign(ring.begin(), ring.end());
  if (c % 2) std::reverse(out.begin(), out.end());
}

bool mergeChannels(std::span<const Plan> subs, std::span<const ChannelPart> parts, Plan& out) {
  out.clear();
  const uint32_t channels = uint32_t(subs.size());
  size_t longest = 0, total = 0;
  uint64_t window = 0;
  for (uint32_t c = 0; c < channels; ++c) {
    const Plan& p = subs[c];
    longest = std::max(longest, p.steps.size());
    total += p.steps.size();
    window += p.window;
    out.scratchBytes = std::max(out.scratchBytes, parts[c].scratchOffset + p.scratchBytes);
    for (const Step& s : p.steps)
      if ((s.kind == StepKind::Send || s.kind == StepKind::Recv) &&
          uint64_t(s.msg) * channels + c >= kMaxDataMsgs) {
        out.clear();
        return false;
      }
  }
  out.steps.reserve(total);
  out.window = uint32_t(std::min<uint64_t>(window, UINT32_MAX));
  // Phase 1: where each sub-plan's step lands (indices into out.steps), taking step i of
  // every channel before step i + 1 of any.
  std::vector<std::vector<uint32_t>> at(channels);
  for (uint32_t c = 0; c < channels; ++c) at[c].resize(subs[c].steps.size());
  uint32_t next = 0;
  for (size_t i = 0; i < longest; ++i)
    for (uint32_t c = 0; c < channels; ++c)
      if (i < subs[c].steps.size()) at[c][i] = next++;
  out.steps.resize(total);
  // Phase 2: each step moved onto its part, its ids and dependencies renumbered.
  auto move = [](Loc l, const ChannelPart& part) {
    if (l.buf == BufId::Input || l.buf == BufId::Output) l.offset += part.byteOffset;
    else if (l.buf == BufId::Scratch) l.offset += part.scratchOffset;
    return l;
  };
  for (uint32_t c = 0; c < channels; ++c)
    for (size_t i = 0; i < subs[c].steps.size(); ++i) {
      Step s = subs[c].steps[i];
      s.channel = uint8_t(c);
      if (s.kind == StepKind::Send || s.kind == StepKind::Recv) s.msg = s.msg * channels + c;
      s.src = move(s.src, parts[c]);
      s.src2 = move(s.src2, parts[c]);
      s.dst = move(s.dst, parts[c]);
      for (uint32_t& d : s.deps)
        if (d != kNoDep) d = at[c][d];
      out.steps[at[c][i]] = s;
    }
  return true;
}

namespace {

void planOne(RingColl coll, const CollPlanArgs& a, Plan& out) {
  if (coll == RingColl::AllGather) return planRingAllGather(a, out);
  if (coll == RingColl::ReduceScatter) return planRingReduceScatter(a, out);
  const RingView rv(a);
  RingAllReduceArgs r;
  r.count = a.count;
  r.typeSize = a.typeSize;
  r.inPlace = a.inPlace;
  r.average = a.average;
  r.pos = rv.pos;
  r.nranks = a.nranks;
  r.nextRank = rv.rankAt(rv.pos + 1);
  r.prevRank = rv.rankAt(rv.pos - 1);
  r.chunkBytes = a.chunkBytes;
  r.scratchBytes = a.scratchBytes;
  planRingAllReduce(r, out);
}

}  // namespace

void planRingChannels(RingColl coll, const CollPlanArgs& a, int channels, Plan& out) {
  if (channels <= 1 || a.nranks <= 1) return planOne(coll, a, out);
  const size_t C = size_t(channels);
  std::vector<int> identity;
  std::span<const int> ring = a.ring;
  if (ring.empty()) {
    for (int r = 0; r < a.nranks; ++r) identity.push_back(r);
    ring = identity;
  }
  std::vector<std::vector<int>> rings(C);
  std::vector<Plan> subs(C);
  std::vector<ChannelPart> parts(C);
  const uint64_t share = a.scratchBytes / C / 64 * 64;
  for (size_t c = 0; c < C; ++c) {
    const ElementRange part = channelRange(a.count, a.typeSize, channels, int(c));
    channelRing(ring, int(c), rings[c]);
    CollPlanArgs sub = a;
    sub.count = part.size();
    sub.ring = rings[c];
    sub.scratchBytes = share;
    sub.blockStride = a.blockStride ? a.blockStride : a.count * a.typeSize;  // whole blocks apart
    parts[c] = {part.begin * a.typeSize, share * c};
    planOne(coll, sub, subs[c]);
  }
  if (!mergeChannels(subs, parts, out)) planOne(coll, a, out);
}

}  // namespace tempo::algo
