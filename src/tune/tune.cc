#include "src/tune/tune.h"

#include <algorithm>

#include "src/core/param.h"

namespace tempo::tune {

RingChoice ringAllReduce(uint64_t bytes, int nranks, transport::Kind slowest) {
  if (param::ChunkSize() > 0) return {uint64_t(param::ChunkSize())};
  // Columns small enough that a reduction reads data still in cache and several columns
  // pipeline, large enough that per-message costs stay small; larger over TCP, where
  // each message costs more.
  uint64_t seg = bytes / uint64_t(std::max(1, nranks));
  uint64_t target = slowest == transport::Kind::OfiTcp ? (uint64_t(1) << 20) : (uint64_t(256) << 10);
  uint64_t chunk = std::clamp<uint64_t>(seg / 4, 32 << 10, target);
  return {chunk};
}

}  // namespace tempo::tune
