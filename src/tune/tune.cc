#include "src/tune/tune.h"

#include <algorithm>
#include <cstring>

#include "src/core/param.h"

namespace tempo::tune {
namespace {

// Largest payload for which recursive doubling beats the ring, from side-by-side runs of
// both on this project's machines (libfabric shm, 2-core VMs): with every rank on its own
// core the ring's extra latencies cost little, so only tiny messages take the shortcut;
// oversubscribed, every message latency includes a context switch, and fewer of them win
// up to far larger sizes.
uint64_t rdLimit(const Context& c) {
  if (c.nranks <= 1) return 0;
  uint64_t limit = c.oversubscribed ? (uint64_t(256) << 10) : (uint64_t(32) << 10);
  return limit;
}

// One round of n-1 messages: pays off while ranks outnumber cores (every extra round
// costs context switches) and the ranks are few.
uint64_t directLimit(const Context& c) {
  if (c.nranks <= 2 || c.nranks > 8 || !c.oversubscribed) return 0;
  return uint64_t(256) << 10;
}

}  // namespace

const char* algoName(AllReduceAlgo a) {
  switch (a) {
    case AllReduceAlgo::Ring: return "ring";
    case AllReduceAlgo::RecursiveDoubling: return "rd";
    case AllReduceAlgo::Direct: return "direct";
  }
  return "?";
}

Status checkOverrides() {
  const char* a = param::Algo();
  if (strcmp(a, "auto") && strcmp(a, "ring") && strcmp(a, "rd") && strcmp(a, "direct"))
    return fail(Status::InvalidArgument, "TEMPO_ALGO=%s: expected auto, ring, rd or direct", a);
  return Status::Success;
}

AllReduceChoice allReduce(uint64_t bytes, const Context& ctx) {
  AllReduceChoice c;
  const char* forced = param::Algo();
  // The latency-optimised algorithms stage whole vectors in scratch; the ring always fits.
  bool rdFits = bytes <= ctx.scratchBytes;
  bool directFits = bytes * uint64_t(ctx.nranks) <= ctx.scratchBytes;
  if (!strcmp(forced, "auto")) {
    if (directFits && bytes <= directLimit(ctx)) c.algo = AllReduceAlgo::Direct;
    else if (rdFits && bytes <= rdLimit(ctx)) c.algo = AllReduceAlgo::RecursiveDoubling;
  } else if (!strcmp(forced, "rd") && rdFits) {
    c.algo = AllReduceAlgo::RecursiveDoubling;
  } else if (!strcmp(forced, "direct") && directFits) {
    c.algo = AllReduceAlgo::Direct;
  }

  if (param::ChunkSize() > 0) {
    c.chunkBytes = uint64_t(param::ChunkSize());
    return c;
  }
  // Per-message costs dominate on every transport measured here (libfabric shm costs
  // several microseconds per message whatever its size), so a segment travels in as few
  // columns as possible: whole up to 512 KiB, then in 512 KiB columns (1 MiB over TCP),
  // which still pipelines large messages.
  uint64_t seg = bytes / uint64_t(std::max(1, ctx.nranks));
  uint64_t cap = ctx.slowest == transport::Kind::OfiTcp ? (uint64_t(1) << 20) : (uint64_t(512) << 10);
  c.chunkBytes = std::clamp<uint64_t>(seg, 4096, cap);
  return c;
}

}  // namespace tempo::tune
