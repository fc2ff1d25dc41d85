#include "src/engine/regions.h"

#include <algorithm>

namespace tempo::engine {

Status UserRegions::add(const void* key, void* buf, size_t len) {
  Entry e{key, static_cast<const std::byte*>(buf), len, {}};
  e.perEndpoint.reserve(endpoints_.size());
  for (transport::Endpoint* ep : endpoints_) {
    // The transport describes its own failure; what was registered is released with `e`.
    TEMPO_ASSIGN(auto region, ep->registerMemory(buf, len));
    e.perEndpoint.push_back(std::move(region));
  }
  std::lock_guard lock(mu_);
  auto at = std::upper_bound(entries_.begin(), entries_.end(), e.base,
                             [](const std::byte* b, const Entry& x) { return b < x.base; });
  entries_.insert(at, std::move(e));
  maxLen_ = std::max(maxLen_, len);
  count_.store(entries_.size(), std::memory_order_release);
  return Status::Success;
}

bool UserRegions::remove(const void* key) {
  std::vector<std::unique_ptr<transport::MemRegion>> released;  // deregistered outside the lock
  {
    std::lock_guard lock(mu_);
    auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& x) { return x.key == key; });
    if (it == entries_.end()) return false;
    released = std::move(it->perEndpoint);
    entries_.erase(it);
    count_.store(entries_.size(), std::memory_order_release);
  }
  return true;
}

const transport::MemRegion* UserRegions::find(const transport::Endpoint* ep, const void* p, size_t len) const {
  if (count_.load(std::memory_order_acquire) == 0) return nullptr;
  size_t idx = 0;
  while (idx < endpoints_.size() && endpoints_[idx] != ep) ++idx;
  if (idx == endpoints_.size()) return nullptr;
  const auto* b = static_cast<const std::byte*>(p);
  std::lock_guard lock(mu_);
  // Entries starting at or before p, nearest first (registrations may overlap), down to
  // the first that starts more than the longest registration before p.
  auto it = std::upper_bound(entries_.begin(), entries_.end(), b,
                             [](const std::byte* x, const Entry& e) { return x < e.base; });
  while (it != entries_.begin()) {
    --it;
    if (size_t(b - it->base) > maxLen_) break;
    if (size_t(b - it->base) <= it->len && len <= it->len - size_t(b - it->base)) return it->perEndpoint[idx].get();
  }
  return nullptr;
}

}  // namespace tempo::engine
