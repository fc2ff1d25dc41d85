#include "transports/transport.h"

#include <thread>

namespace tempo::transport {

const char* kindName(Kind k) {
  switch (k) {
    case Kind::Loopback: return "loopback";
    case Kind::Shm: return "shm";
    case Kind::OfiShm: return "ofi/shm";
    case Kind::UcxShm: return "ucx/shm";
    case Kind::OfiTcp: return "ofi/tcp";
    case Kind::UcxNet: return "ucx/net";
    case Kind::OfiOther: return "ofi";
  }
  return "?";
}

std::string Endpoint::describePeer(int) const { return name(); }

Result<std::unique_ptr<MemRegion>> Endpoint::registerMemory(void*, size_t) { return std::make_unique<MemRegion>(); }

std::vector<Endpoint*> Endpoint::lanes() { return {this}; }

void Endpoint::wait(int64_t ns) { std::this_thread::sleep_for(std::chrono::nanoseconds(ns)); }

}  // namespace tempo::transport
