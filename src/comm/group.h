// ncclGroupStart/ncclGroupEnd: per-thread batching of collectives and inits.
//
// Outside a group a collective executes at once and is complete on return (host
// memory). Inside a group, collectives are queued and all of them run when the outermost
// ncclGroupEnd is called, from this one thread: ops on one communicator run in call
// order, ops on different communicators progress together, so one thread can drive
// several ranks. Inits queued in a group run concurrently, one thread each, at group end.
// An argument error inside a group fails the whole group at ncclGroupEnd, as in NCCL.
//
// A batch holds each of its communicators' drive mutex while it runs. A batch on
// nonblocking communicators (all of them or none: NCCL refuses a mix with
// ncclInvalidArgument) runs on the first one's AsyncWorker instead: ncclGroupEnd, or the
// collective outside a group, returns ncclInProgress, and each communicator's async state
// reports the batch's result.
#pragma once

#include <functional>
#include <optional>

#include "src/comm/communicator.h"
#include "src/comm/registry.h"

namespace tempo::comm {

Status groupStart();
Status groupEnd();
// ncclGroupSimulateEnd: like groupEnd, except that the outermost end costs the group's
// calls with the tuner's model instead of running them; they are dropped and nothing is
// sent (inits queued in the group still run). `us` is the model's time for the group, in
// microseconds: per communicator the sum of its calls' times (they run in call order, its
// point-to-point calls together), the longest over communicators (they progress
// together); unset when the group held no call, or while a nonblocking init queued in it
// is still in progress. `valid` false (a simInfo not made with NCCL_SIM_INFO_INITIALIZER)
// abandons the group with ncclInvalidArgument.
struct Simulation {
  bool valid = true;
  std::optional<double> us;
};
Status groupSimulateEnd(Simulation& sim);
bool inGroup();
// Records an error raised while queuing into the current group.
void groupRecordError(Status s);

// Runs `a` on `c` now, or queues it in the current group.
Status submitCollective(const Pin& c, const CollArgs& a);
// Runs `init` now, or queues it to run (in parallel with other queued inits) at group end.
Status submitInit(std::function<Status()> init);

}  // namespace tempo::comm
