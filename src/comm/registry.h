// Live communicator handles. The API checks every ncclComm_t against this set, so a
// handle that was destroyed (or never created) is rejected with ncclInvalidUsage instead
// of being dereferenced. (A handle whose memory was reused by a new communicator cannot
// be told apart; that is the "where detectable" limit.)
#pragma once

#include <memory>

#include "src/comm/communicator.h"

namespace tempo::comm::registry {

// Takes ownership; returns the handle value.
Communicator* add(std::unique_ptr<Communicator> c);
// Null if `handle` is not a live communicator.
Communicator* find(const void* handle);
// Removes and returns ownership (null if not live).
std::unique_ptr<Communicator> remove(const void* handle);

}  // namespace tempo::comm::registry
