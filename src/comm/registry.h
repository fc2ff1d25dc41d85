// Live communicator handles. The API checks every ncclComm_t against this set, so a
// handle that was destroyed (or never created) is rejected with ncclInvalidUsage instead
// of being dereferenced. (A handle whose memory was reused by a new communicator cannot
// be told apart; that is the "where detectable" limit.)
//
// find() returns a pin: a shared reference that keeps the Communicator's memory alive for
// the call that holds it, so that ncclCommAbort or ncclCommDestroy on another thread can
// never free it under a running call. The communicator's resources are released by
// destroy/abort themselves; a pin only delays freeing the (then inert) object.
#pragma once

#include <memory>

#include "src/comm/communicator.h"

namespace tempo::comm {
using Pin = std::shared_ptr<Communicator>;
}  // namespace tempo::comm

namespace tempo::comm::registry {

// Takes ownership; returns the handle value.
Communicator* add(std::unique_ptr<Communicator> c);
// Null if `handle` is not a live communicator.
Pin find(const void* handle);
// Removes the handle (later finds fail) and returns the registry's reference (null if not live).
Pin remove(const void* handle);

}  // namespace tempo::comm::registry
