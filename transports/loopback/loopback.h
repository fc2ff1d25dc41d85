// In-process transport: ranks of one communicator that share an address space exchange
// messages by a single memcpy from the sender's buffer into the receiver's.
//
// Whichever side arrives second (the send finding a posted receive, or the receive
// finding a queued send) does the copy, so no intermediate buffer exists. Each rank's
// Mailbox outlives its Endpoint (shared ownership), so a peer that tears down early turns
// into RemoteError for the others instead of a dangling pointer.
#pragma once

#include <cstdint>
#include <memory>

#include "transports/transport.h"

namespace tempo::transport::loopback {

// Creates rank `rank`'s endpoint of the in-process communicator identified by `commId`
// (the same value on every rank of the communicator, unique per communicator).
Result<std::unique_ptr<Endpoint>> create(uint64_t commId, int rank, int nranks);

}  // namespace tempo::transport::loopback
