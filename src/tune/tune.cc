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
// up to far larger sizes. Measured (all_reduce_perf -c 0, TEMPO_ALGO=ring|rd): 2 ranks on
// 2 cores tie from 16 KiB to 256 KiB and the ring wins at 1 MiB; 4 ranks on 2 cores, rd
// takes 180 us at 64 KiB against the ring's 340 and ties at 512 KiB, the ring wins from
// 1 MiB.
uint64_t rdLimit(const Context& c) {
  if (c.nranks <= 1) return 0;
  return c.oversubscribed ? (uint64_t(512) << 10) : (uint64_t(64) << 10);
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
  // Auto never picks direct: one round of n-1 messages measured slower than rd at every
  // size on these machines (4 ranks on 2 cores, 64 KiB: 245-268 us vs rd's 180-185 us).
  // It stays selectable for fabrics where a single round wins.
  if (!strcmp(forced, "auto")) {
    if (rdFits && bytes <= rdLimit(ctx)) c.algo = AllReduceAlgo::RecursiveDoubling;
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
