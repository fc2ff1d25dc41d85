// Host memory the library owns (staging and scratch), allocated once at init.
//
// First-touch page faults are expensive on virtual machines (about 11 us per 4 KiB page
// on ours), so every buffer is 2 MiB aligned, advised to use transparent huge pages and
// touched before it is handed out: the data path never faults on library memory.
#pragma once

#include <cstddef>

#include "src/core/status.h"

namespace tempo::mem {

class HostBuffer {
 public:
  HostBuffer() = default;
  // Maps `bytes` (rounded up to 2 MiB) of zeroed, pre-faulted memory.
  static Result<HostBuffer> allocate(size_t bytes);
  HostBuffer(HostBuffer&& o) noexcept : data_(o.data_), size_(o.size_) { o.data_ = nullptr; o.size_ = 0; }
  HostBuffer& operator=(HostBuffer&& o) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer() { release(); }

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void release();
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tempo::mem
