#include "src/comm/registry.h"

#include <mutex>
#include <unordered_map>

namespace tempo::comm::registry {
namespace {
std::mutex g_mu;
std::unordered_map<const void*, std::unique_ptr<Communicator>>& table() {
  static auto* t = new std::unordered_map<const void*, std::unique_ptr<Communicator>>();  // never destroyed
  return *t;
}
}  // namespace

Communicator* add(std::unique_ptr<Communicator> c) {
  Communicator* p = c.get();
  std::lock_guard<std::mutex> lock(g_mu);
  table()[p] = std::move(c);
  return p;
}

Communicator* find(const void* handle) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = table().find(handle);
  return it == table().end() ? nullptr : it->second.get();
}

std::unique_ptr<Communicator> remove(const void* handle) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = table().find(handle);
  if (it == table().end()) return nullptr;
  std::unique_ptr<Communicator> c = std::move(it->second);
  table().erase(it);
  return c;
}

}  // namespace tempo::comm::registry
