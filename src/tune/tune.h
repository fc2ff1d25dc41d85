// Algorithm parameters chosen per collective. Pure functions of the call and the
// transports in use; TEMPO_CHUNK_SIZE overrides the choice.
#pragma once

#include <cstdint>

#include "transports/transport.h"

namespace tempo::tune {

struct RingChoice {
  uint64_t chunkBytes;  // bytes per segment column
};

// `bytes` is the payload of one rank, `slowest` the slowest transport on the ring.
RingChoice ringAllReduce(uint64_t bytes, int nranks, transport::Kind slowest);

}  // namespace tempo::tune
