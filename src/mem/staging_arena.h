// Host memory and a stream for staging one communicator's device buffers.
//
// Used only by the thread that runs the communicator's work on device buffers (its
// worker), one batch at a time: the memory is pinned by the GPU runtime, so copies run at
// the link's speed, and it is grown to the largest batch seen and then reused, so a call
// on device buffers takes neither a page fault nor a runtime allocation once warm. The
// stream is the arena's own and non-blocking, so its copies never wait behind the
// application's null stream, which the batch may be holding (device_staging.h).
#pragma once

#include <cstddef>

#include "src/mem/device_api.h"

namespace tempo::mem {

class StagingArena {
 public:
  // `device`: the ordinal of the communicator's device, which enter() makes current.
  StagingArena(DeviceApi& gpu, int device) : gpu_(gpu), device_(device) {}
  ~StagingArena();  // nothing may be queued on the stream any more
  StagingArena(const StagingArena&) = delete;
  StagingArena& operator=(const StagingArena&) = delete;

  DeviceApi& gpu() const { return gpu_; }
  int device() const { return device_; }
  // Makes the arena's device the calling thread's, as every call that allocates or queues
  // work for it must (the thread may serve communicators of several devices); reserve()
  // and stream() do it themselves.
  Status enter();
  // At least `bytes` of pinned host memory. Growing drops what an earlier reserve() gave.
  Result<std::byte*> reserve(size_t bytes);
  // The arena's stream, created on first use.
  Result<void*> stream();
  size_t capacity() const { return bytes_; }
  size_t grows() const { return grows_; }  // allocations made so far

 private:
  DeviceApi& gpu_;
  int device_;
  std::byte* host_ = nullptr;
  size_t bytes_ = 0;
  size_t grows_ = 0;
  void* stream_ = nullptr;
  bool haveStream_ = false;
};

}  // namespace tempo::mem
