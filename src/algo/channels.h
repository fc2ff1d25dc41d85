// Several channels: one collective split into parts, each planned on a ring of its own and
// moved over a rail of its own where a rank has several NICs (Step::channel; the engine
// maps channel c to rail c % rails). Channels are composed from the one-channel planners:
// each part is planned with offsets from 0, then mergeChannels moves it onto its place.
//
// Even channels run on the ring as given, odd ones on it reversed: the same crossings at
// every level, with each hop's traffic in the other direction.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "src/algo/args.h"
#include "src/algo/plan.h"

namespace tempo::algo {

// Where channel c's part lives.
struct ChannelPart {
  uint64_t byteOffset = 0;     // added to every Input and Output offset of its plan
  uint64_t scratchOffset = 0;  // added to every Scratch offset: its share of scratch
};

// Elements [begin, end) of `count` that channel c of `channels` moves: parts as equal as
// possible, boundaries on 64-byte multiples, so trailing parts may be short or empty.
struct ElementRange {
  uint64_t begin = 0, end = 0;
  uint64_t size() const { return end - begin; }
};
ElementRange channelRange(uint64_t count, uint32_t typeSize, int channels, int c);

// The ring of channel c (see above), ring[p] being the rank at position p.
void channelRing(std::span<const int> ring, int c, std::vector<int>& out);

// Merges subs[c] (planned with offsets from 0) into `out` (cleared first): every Loc moved
// by parts[c], message ids renumbered msg * channels + c so that channels sharing a
// transport never match each other's messages, Step::channel = c, and the steps
// interleaved one from each channel in turn, so that the engine's window advances every
// channel together (a dependency still precedes its dependents). The window is the sum of
// the sub-plans' windows. Returns false, `out` cleared, when the renumbered ids would not
// fit below kMaxDataMsgs: the caller plans one channel instead.
bool mergeChannels(std::span<const Plan> subs, std::span<const ChannelPart> parts, Plan& out);

// The ring collectives over `channels` channels: all-reduce splits the vector, all-gather
// and reduce-scatter every rank's block, into channelRange parts; channel c runs the
// one-channel planner on its part, on channelRing(a.ring, c), with scratch / channels of
// the scratch. One channel (or one rank, or ids that would not fit) is the plain planner.
enum class RingColl { AllReduce, AllGather, ReduceScatter };
void planRingChannels(RingColl coll, const CollPlanArgs& a, int channels, Plan& out);

}  // namespace tempo::algo
