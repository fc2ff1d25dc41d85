// Fuzz target: the 128-byte unique id decoder, which reads what a user or a launcher hands
// ncclCommInitRank. Property: no input crashes it or trips a sanitizer, and an id that
// decodes re-encodes to one that decodes to the same root, flags and secret.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "src/bootstrap/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tempo::bootstrap;
  uint8_t raw[kUniqueIdBytes] = {};
  memcpy(raw, data, std::min(size, kUniqueIdBytes));
  tempo::Result<UniqueId> id = decodeUniqueId(raw);
  if (!id.ok()) return 0;
  uint8_t again[kUniqueIdBytes];
  encodeUniqueId(*id, again);
  tempo::Result<UniqueId> back = decodeUniqueId(again);
  if (!back.ok() || back->flags != id->flags || back->secret != id->secret ||
      back->root.toString() != id->root.toString())
    abort();
  return 0;
}
