#include "src/mem/host_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "src/core/log.h"

namespace tempo::mem {
namespace {
constexpr size_t kHuge = size_t(2) << 20;
}

Result<HostBuffer> HostBuffer::allocate(size_t bytes) {
  HostBuffer b;
  if (bytes == 0) return b;
  size_t size = (bytes + kHuge - 1) / kHuge * kHuge;
  // Over-map by one huge page so the start can be aligned to 2 MiB, then trim.
  size_t span = size + kHuge;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED)
    return fail(Status::SystemError, "could not map %zu bytes of host memory: %s", size, strerror(errno));
  auto base = reinterpret_cast<uintptr_t>(raw);
  uintptr_t aligned = (base + kHuge - 1) & ~(kHuge - 1);
  if (aligned > base) munmap(raw, aligned - base);
  uintptr_t end = aligned + size;
  if (base + span > end) munmap(reinterpret_cast<void*>(end), base + span - end);
  b.data_ = reinterpret_cast<std::byte*>(aligned);
  b.size_ = size;
  madvise(b.data_, size, MADV_HUGEPAGE);
  // Fault every page in now (one write per 4 KiB, so huge pages are used where granted).
  for (size_t off = 0; off < size; off += 4096) b.data_[off] = std::byte{0};
  TEMPO_INFO(log::AllocHost, "host buffer %p of %zu bytes", static_cast<void*>(b.data_), size);
  return b;
}

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = o.data_;
    size_ = o.size_;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

void HostBuffer::release() {
  if (data_) munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace tempo::mem
