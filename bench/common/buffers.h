// Host buffers of the perf tools: one allocation per rank and role, made once per run at the
// largest size, with room for -u misalignment and guard canaries on both sides, and touched
// in full before any timing (a first-touch page fault costs ~11 us per 4 KiB on our VMs).
//
// Layout: [lead page | unalign bytes | maxBytes | tail guard]. data(unalignBytes) is the
// pointer collectives get; the kGuardBytes before it and after the bytes an operation uses
// are the canaries (bench/common/verify.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tempo::bench {

class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(size_t maxBytes, size_t maxUnalignBytes);
  ~HostBuffer();
  HostBuffer(HostBuffer&& o) noexcept;
  HostBuffer& operator=(HostBuffer&& o) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  bool ok() const { return alloc_ != nullptr; }
  size_t allocatedBytes() const { return allocBytes_; }
  // The whole allocation, guards included (what -R registers).
  unsigned char* allocation() const { return alloc_; }
  // Start of the region collectives use, `unalignBytes` past the aligned base.
  unsigned char* data(size_t unalignBytes) const { return base_ + unalignBytes; }

  // Writes canaries just before data(u) and just after data(u)+bytes.
  void armGuards(size_t unalignBytes, size_t bytes, uint8_t salt);
  // Bytes of those canaries that were overwritten.
  int64_t guardDamage(size_t unalignBytes, size_t bytes, uint8_t salt) const;

 private:
  unsigned char* alloc_ = nullptr;
  unsigned char* base_ = nullptr;
  size_t allocBytes_ = 0;
};

// Resident set size of this process in bytes (/proc/self/statm), 0 if unknown.
size_t residentBytes();

}  // namespace tempo::bench
