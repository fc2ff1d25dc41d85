#include "src/mem/user_memory.h"

#include <algorithm>
#include <unordered_map>

#include "src/mem/host_buffer.h"

namespace tempo::mem {
namespace {

std::mutex g_mu;
std::unordered_map<void*, HostBuffer>& allocations() {
  static auto* live = new std::unordered_map<void*, HostBuffer>();  // outlives static destructors
  return *live;
}

}  // namespace

Result<void*> allocUserMemory(size_t bytes) {
  if (bytes == 0) return fail(Status::InvalidArgument, "ncclMemAlloc: size is 0");
  TEMPO_ASSIGN(HostBuffer b, HostBuffer::allocate(bytes));
  void* p = b.data();
  std::lock_guard<std::mutex> lock(g_mu);
  allocations().emplace(p, std::move(b));
  return p;
}

Status freeUserMemory(void* ptr) {
  if (!ptr) return Status::Success;  // as free(NULL)
  std::lock_guard<std::mutex> lock(g_mu);
  if (allocations().erase(ptr) == 0)
    return fail(Status::InvalidArgument, "ncclMemFree: %p was not returned by ncclMemAlloc (or was freed already)",
                ptr);
  return Status::Success;
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
