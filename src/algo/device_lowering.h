// Lowering a plan for device buffers: the same collective, with the data left on the GPU.
//
// A planner writes its steps as if every buffer were host memory. When the op's input or
// output is device memory, lowerForDevice() rewrites the plan so that no host step touches
// device memory and the device's own work overlaps the transfers, chunk by chunk:
//  - a Send from device memory becomes a DeviceCopy into a pinned send slot, then the
//    Send from that slot;
//  - a Recv (or RecvCarried) into device memory lands in a pinned receive slot, then a
//    DeviceCopy moves it into place; what waited for the Recv waits for that copy;
//  - a Send of a chunk just as it was received (a ring all-gather's or a chain
//    broadcast's forward) is sent from its receive slot once the Recv is done, beside the
//    copy into place, instead of being copied back out of the device (with 2 slots or
//    more: see the .cc);
//  - a Reduce or Copy with any device operand becomes a DeviceReduce or DeviceCopy, which
//    the device runs reading pinned host memory (scratch, slots) directly;
//  - scratch moves into the staging memory too (it is pinned there, so the device's
//    kernels can read what was received into it).
// Staging layout: [scratch | per lane: `slots` send slots, `slots` receive slots], where a
// lane is a channel (collectives) or a peer (point-to-point plans, whose Device locations
// are their device buffers), every slot as large as the largest lowered message of its
// lane and direction. A slot is reused only after its previous message is finished with
// (the send done, or the copy out of it done): each direction of each lane cycles through
// its own slots, so while one chunk is copied in or out, the next ones are in flight (the
// pipeline), and a slot's reuse waits only for earlier messages of its own lane and
// direction, which never wait for later ones: no new cycle among the ranks' steps.
//
// The fingerprint exchange at the front (fingerprint.h) stays where it is (it is host
// memory), so its step numbers hold. Pure function; tested with the plan simulator.
#pragma once

#include <cstdint>

#include "src/algo/plan.h"

namespace tempo::algo {

struct DeviceLowering {
  bool inputOnDevice = false;
  bool outputOnDevice = false;
  uint32_t slots = 4;  // per direction; at least 1
  // Fewer slots (never below 2, or `slots` if less) where all the slots (two directions
  // per lane) would exceed this many bytes: a plan that moves whole blocks (all-to-all,
  // gather) has slots as large as a block. 0: no limit.
  uint64_t slotBudget = 0;
  // Lanes are peers rather than channels: point-to-point plans, in which an application
  // may order its sends and receives to different peers in any way.
  bool perPeer = false;
};

// Rewrites `plan` as above and sets plan.stagingBytes (0 and nothing changed when no step
// names device memory: no Device location, and neither buffer flagged).
void lowerForDevice(Plan& plan, const DeviceLowering& d);

}  // namespace tempo::algo
