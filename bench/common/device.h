// Device buffers of the perf tools, allocated as rccl-tests allocates theirs (-Y coarse, the
// default where the process has a GPU runtime): device memory from the GPU runtime plugin
// that librccl itself loads (TEMPO_GPU, looked for beside librccl, so both use the one
// runtime), a stream per local rank, and a host shadow of each buffer with the same layout.
// Validation writes inputs and canaries into the shadow, uploads it before the checked
// operation and downloads it after; timed operations never copy.
#pragma once

#include <cstddef>

#include "bench/common/buffers.h"
#include "src/mem/device_api.h"

namespace tempo::bench {

// The GPU runtime the perf tools use, or nullptr (NCCL_DEBUG=INFO says why). Loaded once.
mem::DeviceApi* benchDeviceApi();

// Ends the job (exit code 2) with the runtime's reason when `s` failed.
void checkDevice(mem::DeviceApi& gpu, Status s, const char* what);

// One rank's send or receive buffer: host memory (gpu == nullptr), or device memory plus
// its host shadow. ok() is false when an allocation failed.
class RankBuffer {
 public:
  RankBuffer(size_t maxBytes, size_t maxUnalignBytes, mem::DeviceApi* gpu);
  ~RankBuffer();
  RankBuffer(RankBuffer&& o) noexcept;
  RankBuffer& operator=(RankBuffer&&) = delete;
  RankBuffer(const RankBuffer&) = delete;
  RankBuffer& operator=(const RankBuffer&) = delete;

  bool ok() const { return host_.ok() && (!gpu_ || device_); }
  bool onDevice() const { return device_ != nullptr; }
  // What collectives get: data(u) of the device allocation, or of the host one.
  unsigned char* data(size_t unalignBytes) const { return translate(host_.data(unalignBytes)); }
  // The host view where validation writes and reads (the buffer itself for host memory).
  HostBuffer& host() { return host_; }
  const HostBuffer& host() const { return host_; }
  // The whole allocation (what -R registers).
  unsigned char* allocation() const { return translate(host_.allocation()); }
  size_t allocatedBytes() const { return host_.allocatedBytes(); }

  // Copies [data(u) - kGuardBytes, data(u) + bytes + kGuardBytes) from the shadow to the
  // device (upload) or back (download), on `stream`, and waits. Nothing to do on host memory.
  void upload(size_t unalignBytes, size_t bytes, void* stream) { copySpan(unalignBytes, bytes, stream, true); }
  void download(size_t unalignBytes, size_t bytes, void* stream) { copySpan(unalignBytes, bytes, stream, false); }

 private:
  unsigned char* translate(unsigned char* h) const {
    return device_ ? device_ + (h - host_.allocation()) : h;
  }
  void copySpan(size_t unalignBytes, size_t bytes, void* stream, bool toDevice);

  HostBuffer host_;
  mem::DeviceApi* gpu_ = nullptr;
  unsigned char* device_ = nullptr;
};

}  // namespace tempo::bench
