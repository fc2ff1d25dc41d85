// libfabric transport: one FI_EP_RDM endpoint with tagged messages per communicator and
// provider. The rank of the sender travels in the top bits of every tag, so receives
// match on the tag alone and need no FI_DIRECTED_RECV.
#pragma once

#include <memory>
#include <string>

#include "transports/transport.h"

namespace tempo::transport::ofi {

// Opens an endpoint on `provider` ("shm", "tcp", "tcp;ofi_rxm", or any FI_PROVIDER
// value) for rank `rank` of `nranks`, on the provider's domain named `nic` ("eth0",
// "mlx5_0") when it offers one, else on its first.
Result<std::unique_ptr<Endpoint>> create(const std::string& provider, int rank, int nranks,
                                         const std::string& nic = {});

// Whether libfabric offers an RDM tagged endpoint on `provider` here.
bool available(const std::string& provider);

}  // namespace tempo::transport::ofi
