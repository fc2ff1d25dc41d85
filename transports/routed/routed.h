// Size-routed transport: one Endpoint made of two, each message sent over the one that
// moves its size faster.
//
// Between hosts UCX's tcp transport has the lower per-message cost and libfabric's
// tcp;ofi_rxm the higher bandwidth (README, "libfabric vs UCX"), so neither serves every
// size best. A routed endpoint posts a message of fewer than `largeBytes` bytes on `small`
// and a larger one on `large`. Both sides route by the same rule, so a send and its
// receive meet on the same inner endpoint as long as they agree on the length, or are both
// below the threshold; per-(peer, tag) ordering holds within each inner endpoint, which is
// all the contract promises for messages that can match each other.
//
// A receive may be posted longer than its message (the transport contract), which would
// split the pair across the two endpoints when the two lengths straddle the threshold.
// The engine does that only for the messages of mismatch detection (at most 1 KiB plus the
// fingerprint, far below any useful threshold), and point-to-point traffic, whose lengths
// are the user's and may disagree, is pinned: a message whose tag has any bit of
// `pinnedTags` takes `small` whatever its length, so a mismatched ncclSend/ncclRecv pair
// still meets and fails with a clear error instead of waiting forever.
#pragma once

#include <cstdint>
#include <memory>

#include "transports/transport.h"

namespace tempo::transport::routed {

struct Routes {
  uint64_t largeBytes = uint64_t(256) << 10;  // messages at least this long take `large`
  uint64_t pinnedTags = 0;                    // tags with any of these bits take `small`
};

// Takes ownership of both endpoints, which serve the same ranks. The routed endpoint's
// address carries both inner addresses; its kind() is `large`'s (the kind that sizes the
// engine's pipeline messages), its name() names both.
Result<std::unique_ptr<Endpoint>> create(std::unique_ptr<Endpoint> small, std::unique_ptr<Endpoint> large,
                                         Routes routes);

}  // namespace tempo::transport::routed
