// Device buffers, first form: a call on device memory runs on host copies of it, in the
// order of its stream, copied when the stream reaches the call.
//
// plan() runs when the call is made: it notes every device range the call reads or writes
// (its send and receive buffers as far as they are significant on this rank, the bias of
// AllReduceWithBias, a device-resident PreMulSum scalar); ranges that overlap (NCCL's
// in-place layouts) become one, so in place stays in place. Nothing is copied then. The
// batch runs on the worker of its first communicator, which owns a staging arena
// (src/mem/staging_arena.h: pinned host memory reused from batch to batch, and a stream):
// once the calls' streams have reached the calls, copyIn() copies every range into the
// arena on the arena's stream, bind() points each call at its copies, the batch runs, and
// copyOut() copies the written ranges back. So the host memory a communicator holds is
// that of its largest batch, however many calls the application queues.
//
// How the worker learns that a stream has reached its call, in two forms:
//  - Blocking (a nonblocking communicator's worker, whose calls answer ncclInProgress):
//    waitStreams() synchronises the streams.
//  - Stream-ordered (a blocking communicator: the call returns at once, as RCCL's do): at
//    call time recordInputs() marks each stream with an event, and queueCompletion() queues
//    on it a host function that waits until complete(), so that work queued after the call
//    waits for its result; the worker polls the events (pollInputs). A host function waits
//    only for its batch, and the batch for work queued before the host functions and for
//    the arena's own stream, so a runtime that runs every stream's host functions on one
//    thread cannot deadlock it.
//
// Nothing is copied back after a failure: the output of a failed call is undefined, as in
// NCCL.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "src/comm/communicator.h"
#include "src/mem/device_api.h"
#include "src/mem/staging_arena.h"

namespace tempo::comm {

class DeviceStaging {
 public:
  explicit DeviceStaging(mem::DeviceApi& gpu) : gpu_(gpu) {}
  ~DeviceStaging();  // releaseEvents() must have run

  // Call time: notes the device ranges of `a` (a call of rank c.rank()), the batch's next
  // call. `a` keeps pointing at device memory until bind().
  Status plan(const Communicator& c, const CollArgs& a);
  bool empty() const { return regions_.empty(); }
  mem::DeviceApi& gpu() const { return gpu_; }
  // Whether the batch can run on the device buffers themselves, with plans lowered for them
  // (algo/device_lowering.h) instead of on whole host copies: TEMPO_GPU_PIPELINE is on and
  // no call has PreMulSum or a bias. Then lower() marks call number
  // `call` (in plan order) for it, and copyIn, bind and copyOut are not used.
  bool lowerable() const;
  void lower(size_t call, CollArgs& a) const;
  // The streams of the calls with device ranges, each once.
  const std::vector<void*>& streams() const { return streams_; }

  // ---- stream-ordered form, at call time ----
  Status recordInputs();
  // `self` owns this staging: each stream's host function holds a reference until it returns.
  static Status queueCompletion(const std::shared_ptr<DeviceStaging>& self);
  // For a batch that will not run: lets any host function already queued return.
  static void abandon(const std::shared_ptr<DeviceStaging>& self);

  // ---- on the worker ----
  // Stream-ordered: waits (polling) until every stream has reached its call, or
  // `cancelled()` says stop. Blocking form: waitStreams() synchronises them instead.
  Status pollInputs(const std::function<bool()>& cancelled);
  Status waitStreams();
  // Copies every range into `arena` and waits for the copies.
  Status copyIn(mem::StagingArena& arena);
  // Points call number `call` (in plan order) at its copies.
  void bind(size_t call, CollArgs& a) const;
  // Copies the ranges the calls write back to the device and waits for the copies.
  Status copyOut(mem::StagingArena& arena);
  // Lets the host functions waiting for the batch return.
  void complete();
  // Destroys the events (runtime calls, so not from a host function). Idempotent.
  void releaseEvents();

 private:
  struct Region {
    std::byte* device;  // start of the device range
    size_t bytes;
    bool written;
    size_t offset;      // of its copy in the arena
  };
  Status call(Status s) const { return mem::deviceCall(gpu_, s); }
  static void waitForBatch(void* owner);  // host function; drops its reference

  mem::DeviceApi& gpu_;
  std::vector<Region> regions_;
  struct Call {
    size_t first, last;  // its regions: [first, last)
    bool send, recv;     // whether its send and receive buffers are device memory
  };
  std::vector<Call> calls_;
  bool lowerable_ = true;
  std::vector<void*> streams_;  // those with copies, each once, in order of first use
  std::vector<void*> events_;
  std::byte* host_ = nullptr;   // the arena's memory while the batch runs
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

}  // namespace tempo::comm
