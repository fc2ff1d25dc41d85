// Memory handed to users (ncclMemAlloc) and buffers users register with a communicator
// (ncclCommRegister).
//
// ncclMemAlloc returns device memory where the process has a GPU runtime (deviceApi(), as
// RCCL's is hipMalloc'd), else 2 MiB aligned, huge-page advised, pre-faulted host memory, so
// that the data path never takes first-touch faults on it; ncclMemFree accepts exactly the
// pointers ncclMemAlloc returned. Registrations are the handles a later registration cache will
// key on; now they record (buffer, size) and are validated on deregistration. Both are
// safe to call from any thread.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "src/core/status.h"

namespace tempo::mem {

Result<void*> allocUserMemory(size_t bytes);
Status freeUserMemory(void* ptr);

class Registrations {
 public:
  // A handle for [buff, buff + size).
  Result<void*> add(void* buff, size_t size);
  // Fails with InvalidArgument for a handle this set did not hand out (or already took back).
  Status remove(void* handle);
  size_t size() const;

 private:
  struct Entry {
    void* buff;
    size_t size;
  };
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Entry>> entries_;
};

}  // namespace tempo::mem
