// Argument checks shared by the entry points (src/api only).
#pragma once

#include "src/comm/communicator.h"
#include "src/comm/registry.h"
#include "src/core/status.h"

namespace tempo::api {

// The communicator behind a handle, pinned for the call: ncclInvalidArgument for NULL,
// ncclInvalidUsage for a handle that is not (or no longer) a live communicator.
Result<comm::Pin> anyComm(const void* handle, const char* fn);
// As anyComm, for calls that use the communicator (NCCL's ncclCommEnsureReady): also
// ncclInvalidArgument while a nonblocking operation on it is still in progress.
Result<comm::Pin> liveComm(const void* handle, const char* fn);

}  // namespace tempo::api
