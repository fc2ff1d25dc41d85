// Argument checks shared by the entry points (src/api only).
#pragma once

#include "src/comm/communicator.h"
#include "src/core/status.h"

namespace tempo::api {

// The communicator behind a handle: ncclInvalidArgument for NULL, ncclInvalidUsage for a
// handle that is not (or no longer) a live communicator.
Result<comm::Communicator*> liveComm(const void* handle, const char* fn);

}  // namespace tempo::api
