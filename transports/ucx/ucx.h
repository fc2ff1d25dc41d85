// UCX transport: one UCP worker with tagged messages per communicator.
//
// Tagged messages rather than active messages: the engine posts every receive before or
// soon after its send and matches by (peer, tag) in posting order, which is what UCP's tag
// matching does (with its eager/rendezvous protocols and zero-copy large messages), while
// active messages would make us keep an unexpected-message store of our own. The sender's
// rank travels in the top bits of the 64-bit UCP tag, so one receive names its peer.
// Endpoints to peers on other hosts use peer error handling, so a peer that dies fails its
// requests instead of hanging them. UCX 1.13's shared-memory transports offer none, and
// asking for it makes UCX reach a peer on this host over tcp instead (4-5 us slower per
// small message here), so endpoints to peers on this host go without it: there the
// communicator's liveness checks find a dead peer. UCX_TLS, UCX_NET_DEVICES and every other UCX_ variable are read by UCX
// itself, untouched.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transports/transport.h"

namespace tempo::transport::ucx {

struct Options {
  std::string tls;             // when not empty, overrides UCX_TLS for this endpoint only (tests)
  std::vector<bool> sameHost;  // per rank: on this host (default: none is)
  // When not empty, the network devices UCX may use, in its syntax ("eth0", "mlx5_0:1"),
  // instead of UCX_NET_DEVICES (the communicator passes one only when that is unset).
  std::string netDevices;
};

// Opens a worker for rank `rank` of `nranks`.
Result<std::unique_ptr<Endpoint>> create(int rank, int nranks, const Options& options = {});

}  // namespace tempo::transport::ucx
