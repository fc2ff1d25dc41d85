// The rendezvous root: the listener whose address a unique id carries.
//
// One root serves exactly one communicator: it learns nranks from the first valid hello,
// collects one hello per rank, sends every rank the full table (with a fresh random comm
// nonce), and exits. It runs on its own thread and multiplexes all connections with
// poll(), so a connection that never finishes its hello (slowloris), sends junk, presents
// the wrong secret or claims a bad rank is dropped without delaying anyone else.
// Wrong-secret connections are closed silently; a connection with the right secret but a
// conflicting nranks, a duplicate rank or a rank out of range gets an Error reply.
#pragma once

#include "src/bootstrap/socket.h"
#include "src/bootstrap/wire.h"

namespace tempo::bootstrap {

// Binds a listener on `bindAddr` (port 0 picks one) and starts the root thread. Returns
// the address ranks must connect to. The thread gives up after TEMPO_INIT_TIMEOUT.
Result<SockAddr> startRoot(const SockAddr& bindAddr, const Secret& secret, bool fixedPort);

}  // namespace tempo::bootstrap
