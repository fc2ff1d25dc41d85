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

  c.chunkBytes = ringChunk(bytes / uint64_t(std::max(1, ctx.nranks)), ctx);
  return c;
}

namespace {
uint64_t chunkCap(const Context& ctx) {
  return ctx.slowest == transport::Kind::OfiTcp ? (uint64_t(1) << 20) : (uint64_t(512) << 10);
}
}  // namespace

uint64_t ringChunk(uint64_t segmentBytes, const Context& ctx) {
  if (param::ChunkSize() > 0) return uint64_t(param::ChunkSize());
  // Per-message costs dominate on every transport measured here (libfabric shm costs
  // several microseconds per message whatever its size), so a segment travels in as few
  // columns as possible: whole up to 512 KiB, then in 512 KiB columns (1 MiB over TCP),
  // which still pipelines large messages.
  return std::clamp<uint64_t>(segmentBytes, 4096, chunkCap(ctx));
}

uint64_t chainChunk(uint64_t bytes, const Context& ctx) {
  if (param::ChunkSize() > 0) return uint64_t(param::ChunkSize());
  // A chain of n ranks takes (n - 1 + chunks - 1) chunk times: at least four chunks keep
  // it busy, and the cap keeps per-message costs small against the payload. Over Tempo's
  // shm a large message costs a round trip (ready-to-send, pull, done) however big it is,
  // so its chunks start at 256 KiB (measured at 2 processes: 256 KiB whole in 28-30 us,
  // in four 64 KiB chunks 40-47 us).
  const uint64_t floor = ctx.slowest == transport::Kind::Shm ? (uint64_t(256) << 10) : (uint64_t(64) << 10);
  return std::clamp<uint64_t>(bytes / 4, floor, chunkCap(ctx));
}

}  // namespace tempo::tune
