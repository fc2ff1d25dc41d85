#include "src/comm/registry.h"

#include <mutex>
#include <unordered_map>

namespace tempo::comm::registry {
namespace {
std::mutex g_mu;
std::unordered_map<const void*, Pin>& table() {
  static auto* t = new std::unordered_map<const void*, Pin>();  // never destroyed
  return *t;
}
}  // namespace

Communicator* add(std::unique_ptr<Communicator> c) {
  Communicator* p = c.get();
  std::lock_guard<std::mutex> lock(g_mu);
  table()[p] = Pin(std::move(c));
  return p;
}

Pin find(const void* handle) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = table().find(handle);
  return it == table().end() ? nullptr : it->second;
}

Pin remove(const void* handle) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = table().find(handle);
  if (it == table().end()) return nullptr;
  Pin c = std::move(it->second);
  table().erase(it);
  return c;
}

}  // namespace tempo::comm::registry
