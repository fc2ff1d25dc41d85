#include "src/mem/user_memory.h"

#include <algorithm>
#include <unordered_map>

#include "src/mem/device_api.h"
#include "src/mem/host_buffer.h"

namespace tempo::mem {
namespace {

// One ncclMemAlloc allocation: host memory the library mapped, or device memory of `gpu`.
struct UserAllocation {
  HostBuffer host;
  DeviceApi* gpu = nullptr;
};

std::mutex g_mu;
std::unordered_map<void*, UserAllocation>& allocations() {
  static auto* live = new std::unordered_map<void*, UserAllocation>();  // outlives static destructors
  return *live;
}

}  // namespace

Result<void*> allocUserMemory(size_t bytes) {
  if (bytes == 0) return fail(Status::InvalidArgument, "ncclMemAlloc: size is 0");
  UserAllocation a;
  void* p;
  if (DeviceApi* gpu = deviceApi()) {
    TEMPO_ASSIGN(p, deviceCall(*gpu, gpu->allocate(bytes)));
    a.gpu = gpu;
  } else {
    TEMPO_ASSIGN(a.host, HostBuffer::allocate(bytes));
    p = a.host.data();
  }
  std::lock_guard<std::mutex> lock(g_mu);
  allocations().emplace(p, std::move(a));
  return p;
}

Status freeUserMemory(void* ptr) {
  if (!ptr) return Status::Success;  // as free(NULL)
  UserAllocation a;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = allocations().find(ptr);
    if (it == allocations().end())
      return fail(Status::InvalidArgument, "ncclMemFree: %p was not returned by ncclMemAlloc (or was freed already)",
                  ptr);
    a = std::move(it->second);
    allocations().erase(it);
  }
  return a.gpu ? deviceCall(*a.gpu, a.gpu->release(ptr)) : Status::Success;
}

Result<void*> Registrations::add(void* buff, size_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.push_back(std::make_unique<Entry>(Entry{buff, size}));
  return static_cast<void*>(entries_.back().get());
}

Status Registrations::remove(void* handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const auto& e) { return e.get() == handle; });
  if (it == entries_.end())
    return fail(Status::InvalidArgument, "ncclCommDeregister: handle %p was not registered with this communicator",
                handle);
  entries_.erase(it);
  return Status::Success;
}

size_t Registrations::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace tempo::mem
