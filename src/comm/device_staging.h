// Device buffers, first form: a call on device memory runs on host copies of it, in the
// order of its stream.
//
// stage() runs when the call is made: every device range the call reads or writes (its
// send and receive buffers as far as they are significant on this rank, the bias of
// AllReduceWithBias, a device-resident PreMulSum scalar) gets a host copy, filled by a
// copy queued on the call's stream, so it holds what the stream will have written there
// by then (a kernel queued just before the call included); the call is pointed at the
// copies. Ranges that overlap (NCCL's in-place layouts) share one copy, so in place stays
// in place. Then one of two forms:
//
//  - Blocking (a nonblocking communicator's worker, which answers ncclInProgress anyway):
//    waitInputs() synchronises the streams, the batch runs, copyBack() queues the written
//    ranges back to the device and synchronises.
//  - Stream-ordered (a blocking communicator: the call returns at once, as RCCL's do):
//    recordInputs() marks each stream after its copies with an event, and queueCompletion()
//    queues on each stream a host function that waits for the batch, then the copies back,
//    then a host function that frees the copies; so work queued after the call waits for
//    its result. The batch runs on the communicator's worker, which first waits for the
//    events (pollInputs) and finally calls complete(). Each host function only waits, and
//    only for the batch, which itself waits only for the events queued before them: a
//    runtime that runs every stream's host functions on one thread cannot deadlock it.
//
// Nothing is copied back after a failure in the blocking form; in the stream-ordered form
// the copies back are already queued, so a failed call's output is what the host copies
// held (NCCL leaves it undefined either way).
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "src/comm/communicator.h"
#include "src/mem/device_api.h"

namespace tempo::comm {

class DeviceStaging {
 public:
  explicit DeviceStaging(mem::DeviceApi& gpu) : gpu_(gpu) {}
  ~DeviceStaging();  // frees the copies; releaseEvents() must have run

  // Queues the host copies of `a`'s device ranges (a call of rank c.rank()) on a.stream and
  // points `a` at them. Host pointers are left alone.
  Status stage(const Communicator& c, CollArgs& a);
  bool empty() const { return regions_.empty(); }
  // The streams with copies, each once.
  const std::vector<void*>& streams() const { return streams_; }

  // ---- blocking form ----
  Status waitInputs();
  Status copyBack();

  // ---- stream-ordered form ----
  Status recordInputs();
  // `self` owns this staging: the last host function on each stream holds a reference.
  static Status queueCompletion(const std::shared_ptr<DeviceStaging>& self);
  // Waits (polling) until every stream has run its copies, or `cancelled()` says stop.
  Status pollInputs(const std::function<bool()>& cancelled);
  // Lets the host functions waiting for the batch return.
  void complete();
  // Destroys the events (runtime calls, so not from a host function). Idempotent.
  void releaseEvents();
  // For a batch that will not run: lets any waiting host function return, and keeps the
  // copies alive (a host function on each stream holds them) until the copies already
  // queued into them have run, without waiting for the streams, which may be held.
  static void abandon(const std::shared_ptr<DeviceStaging>& self);

 private:
  struct Region {
    std::byte* device;  // start of the device range
    size_t bytes;
    std::unique_ptr<std::byte[]> host;
    bool written;
    void* stream;
  };
  Status call(Status s) const { return mem::deviceCall(gpu_, s); }
  static void waitForBatch(void* self);  // host function
  static void release(void* owner);      // host function: drops a shared_ptr

  mem::DeviceApi& gpu_;
  std::vector<Region> regions_;
  std::vector<void*> streams_;  // those with copies, each once, in order of first use
  std::vector<void*> events_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

}  // namespace tempo::comm
