#include "src/mem/staging_arena.h"

namespace tempo::mem {

StagingArena::~StagingArena() {
  if (host_) (void)gpu_.releaseHost(host_);
  if (haveStream_) (void)gpu_.destroyStream(stream_);
}

Status StagingArena::enter() { return deviceCall(gpu_, gpu_.setDevice(device_)); }

Result<std::byte*> StagingArena::reserve(size_t bytes) {
  if (bytes <= bytes_) return host_;
  TEMPO_TRY(enter());
  // Grow to the next power of two (at least 2 MiB), so a sweep of sizes grows a few times.
  size_t want = size_t(2) << 20;
  while (want < bytes) want *= 2;
  if (host_) {
    TEMPO_TRY(deviceCall(gpu_, gpu_.releaseHost(host_)));
    host_ = nullptr;
    bytes_ = 0;
  }
  TEMPO_ASSIGN(void* p, deviceCall(gpu_, gpu_.allocateHost(want)));
  host_ = static_cast<std::byte*>(p);
  bytes_ = want;
  ++grows_;
  return host_;
}

Result<void*> StagingArena::stream() {
  TEMPO_TRY(enter());
  if (!haveStream_) {
    TEMPO_ASSIGN(stream_, deviceCall(gpu_, gpu_.createStream()));
    haveStream_ = true;
  }
  return stream_;
}

}  // namespace tempo::mem
