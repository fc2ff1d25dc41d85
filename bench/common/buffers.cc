#include "bench/common/buffers.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "bench/common/verify.h"

namespace tempo::bench {
namespace {
constexpr size_t kPage = 4096;
}

HostBuffer::HostBuffer(size_t maxBytes, size_t maxUnalignBytes) {
  const size_t want = kPage + maxUnalignBytes + maxBytes + kGuardBytes;
  const size_t bytes = (want + kPage - 1) / kPage * kPage;
  alloc_ = static_cast<unsigned char*>(std::aligned_alloc(kPage, bytes));
  if (!alloc_) return;
  allocBytes_ = bytes;
  base_ = alloc_ + kPage;
  std::memset(alloc_, 0, bytes);  // first touch now, outside any timed region
}

HostBuffer::~HostBuffer() { std::free(alloc_); }

HostBuffer::HostBuffer(HostBuffer&& o) noexcept
    : alloc_(std::exchange(o.alloc_, nullptr)), base_(std::exchange(o.base_, nullptr)),
      allocBytes_(std::exchange(o.allocBytes_, 0)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  if (this != &o) {
    std::free(alloc_);
    alloc_ = std::exchange(o.alloc_, nullptr);
    base_ = std::exchange(o.base_, nullptr);
    allocBytes_ = std::exchange(o.allocBytes_, 0);
  }
  return *this;
}

void HostBuffer::armGuards(size_t u, size_t bytes, uint8_t salt) {
  fillGuard(data(u) - kGuardBytes, kGuardBytes, salt);
  fillGuard(data(u) + bytes, kGuardBytes, uint8_t(salt ^ 0x5A));
}

int64_t HostBuffer::guardDamage(size_t u, size_t bytes, uint8_t salt) const {
  return bench::guardDamage(data(u) - kGuardBytes, kGuardBytes, salt) +
         bench::guardDamage(data(u) + bytes, kGuardBytes, uint8_t(salt ^ 0x5A));
}

size_t residentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return n == 2 ? size_t(resident) * size_t(sysconf(_SC_PAGESIZE)) : 0;
}

}  // namespace tempo::bench
