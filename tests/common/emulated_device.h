// An emulated GPU for tests of the device-buffer path on machines without one.
//
// It implements the library's DeviceApi (src/mem/device_api.h) and installs itself as the
// process's runtime for its lifetime. Its device memory is really unreachable from the host:
// each allocation is a memfd mapped twice, once PROT_NONE (the "device pointer" handed to
// the library, which faults if host code touches it) and once read-write (the alias the
// emulated copy engine and kernels use). Streams are worker threads that run their queue
// in order, the default stream (nullptr) included, so stream order is real: a copy queued
// after a slow kernel waits for it.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "kernels/reduce.h"
#include "src/mem/device_api.h"

namespace tempo::testing {

class EmulatedDevice : public mem::DeviceApi {
 public:
  // `install`: become the process's runtime (deviceApi()) until destroyed; a plugin's
  // device (emulated_plugin.cc) is returned to the loader instead.
  explicit EmulatedDevice(bool install = true) : defaultStream_(std::make_unique<Stream>()), installed_(install) {
    if (installed_) previous_ = mem::setDeviceApiForTesting(this);
  }
  ~EmulatedDevice() override {
    if (installed_) mem::setDeviceApiForTesting(previous_);
    streams_.clear();  // joins every stream before its memory goes
    defaultStream_.reset();
    for (auto& [start, a] : allocs_) unmap(start, a);
    for (auto& [p, len] : pinned_) munmap(p, len);
  }
  EmulatedDevice(const EmulatedDevice&) = delete;
  EmulatedDevice& operator=(const EmulatedDevice&) = delete;

  // ---- the library's view ----
  const char* name() const override { return "emulated"; }
  // Each thread's current device, as a runtime keeps it; the library's device work is
  // recorded with the device current on the thread that queued it (devicesUsed()).
  static constexpr int kDevices = 8;
  Result<int> currentDevice() override { return current(); }
  Result<int> deviceCount() override { return kDevices; }
  Status setDevice(int ordinal) override {
    if (ordinal < 0 || ordinal >= kDevices)
      return fail(Status::InvalidArgument, "emulated device: no device %d (it has %d)", ordinal, kDevices);
    current() = ordinal;
    return Status::Success;
  }
  Result<bool> isDevicePointer(const void* p) override {
    std::lock_guard lock(mu_);
    ++queries_;
    return find(p) != nullptr;
  }
  Result<void*> allocate(size_t bytes) override {
    try {
      return alloc(bytes);
    } catch (const std::exception& e) {
      return fail(Status::SystemError, "%s", e.what());
    }
  }
  Status release(void* p) override {
    if (!p) return Status::Success;
    std::lock_guard lock(mu_);
    auto it = allocs_.find(reinterpret_cast<uintptr_t>(p));
    if (it == allocs_.end()) return fail(Status::InvalidArgument, "emulated device: %p was not allocated", p);
    unmap(it->first, it->second);
    allocs_.erase(it);
    return Status::Success;
  }
  Result<void*> allocateHost(size_t bytes) override {
    const size_t len = (std::max<size_t>(bytes, 1) + 4095) & ~size_t(4095);
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) return fail(Status::SystemError, "emulated device: cannot map %zu bytes of host memory", len);
    std::lock_guard lock(mu_);
    pinned_[p] = len;
    ++pinnedAllocations_;
    return p;
  }
  Status releaseHost(void* p) override {
    if (!p) return Status::Success;
    std::lock_guard lock(mu_);
    auto it = pinned_.find(p);
    if (it == pinned_.end()) return fail(Status::InvalidArgument, "emulated device: %p is not pinned host memory", p);
    munmap(p, it->second);
    pinned_.erase(it);
    return Status::Success;
  }
  Result<void*> createStream() override { return newStream(); }
  Status destroyStream(void* stream) override {
    std::unique_ptr<Stream> gone;
    {
      std::lock_guard lock(mu_);
      auto it = std::find_if(streams_.begin(), streams_.end(), [&](const auto& s) { return s.get() == stream; });
      if (it == streams_.end()) return fail(Status::InvalidArgument, "emulated device: no stream %p", stream);
      gone = std::move(*it);
      streams_.erase(it);
    }
    return Status::Success;  // ~Stream runs what is queued, then joins its thread
  }
  Status copyAsync(void* dst, const void* src, size_t bytes, void* stream) override {
    void* d = alias(dst);
    const void* s = alias(src);
    std::lock_guard lock(mu_);
    devicesUsed_.insert(current());
    ++copies_;
    copiedBytes_ += bytes;
    largestCopy_ = std::max(largestCopy_, bytes);
    streamOf(stream).post([d, s, bytes] { std::memcpy(d, s, bytes); });
    return Status::Success;
  }
  // A "kernel": the host's reducer, run in stream order on the aliases, so it reads and
  // writes device memory as the device would (and pinned host memory as it is).
  Status reduce(void* dst, const void* a, const void* b, size_t count, DataType type, RedOp op, uint64_t postDivisor,
                void* stream) override {
    void* d = alias(dst);
    const void *x = alias(a), *y = alias(b);
    std::lock_guard lock(mu_);
    // As on a GPU, a kernel goes on a stream of the thread's current device.
    if (stream && static_cast<Stream*>(stream)->device != current())
      return fail(Status::InvalidUsage, "emulated device: a kernel on device %d's stream from a thread on device %d",
                  static_cast<Stream*>(stream)->device, current());
    devicesUsed_.insert(current());
    ++reductions_;
    streamOf(stream).post([=] { kernels::reduce(d, x, y, count, type, op, postDivisor); });
    return Status::Success;
  }
  const char* lastError() const override { return "the emulated device never fails"; }
  Status synchronize(void* stream) override {
    Stream* st;
    {
      std::lock_guard lock(mu_);
      st = &streamOf(stream);
    }
    st->drain();
    return Status::Success;
  }

  Result<void*> recordEvent(void* stream) override {
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::lock_guard lock(mu_);
    events_[done.get()] = done;
    streamOf(stream).post([done] { done->store(true); });
    return static_cast<void*>(done.get());
  }
  Result<bool> eventDone(void* event) override {
    std::lock_guard lock(mu_);
    return events_.at(event)->load();
  }
  Status destroyEvent(void* event) override {
    std::lock_guard lock(mu_);
    events_.erase(event);  // the stream's task holds its own reference
    return Status::Success;
  }
  Status launchHostFunc(void* stream, void (*fn)(void*), void* arg) override {
    std::lock_guard lock(mu_);
    ++hostFuncs_;
    streamOf(stream).post([fn, arg] { fn(arg); });
    return Status::Success;
  }

  // ---- the test's view ----
  // Device memory the host cannot touch (page-granular; freed with the device).
  void* alloc(size_t bytes) {
    const size_t len = (std::max<size_t>(bytes, 1) + 4095) & ~size_t(4095);
    const int fd = memfd_create("tempo-emulated-device", 0);
    if (fd < 0 || ftruncate(fd, off_t(len)) != 0) throw std::runtime_error("emulated device: memfd");
    void* dev = mmap(nullptr, len, PROT_NONE, MAP_SHARED, fd, 0);
    void* rw = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (dev == MAP_FAILED || rw == MAP_FAILED) throw std::runtime_error("emulated device: mmap");
    std::lock_guard lock(mu_);
    allocs_[reinterpret_cast<uintptr_t>(dev)] = {len, static_cast<std::byte*>(rw)};
    return dev;
  }
  void* newStream() {
    std::lock_guard lock(mu_);
    streams_.push_back(std::make_unique<Stream>());
    streams_.back()->device = current();
    return streams_.back().get();
  }
  // A "kernel": fn(alias) runs in stream order, with the host-accessible alias of `dev`.
  void launch(void* stream, void* dev, std::function<void(std::byte*)> fn) {
    std::byte* a = static_cast<std::byte*>(alias(dev));
    std::lock_guard lock(mu_);
    streamOf(stream).post([a, fn = std::move(fn)] { fn(a); });
  }
  // Synchronous copies for the test's own setup and checks.
  void upload(void* dev, const void* host, size_t bytes) {
    (void)copyAsync(dev, host, bytes, nullptr);
    (void)synchronize(nullptr);
  }
  void download(void* host, const void* dev, size_t bytes) {
    (void)copyAsync(host, dev, bytes, nullptr);
    (void)synchronize(nullptr);
  }
  size_t copies() const { std::lock_guard lock(mu_); return copies_; }
  size_t reductions() const { std::lock_guard lock(mu_); return reductions_; }
  // The devices current on the threads that queued copies and reductions since the last reset.
  std::set<int> devicesUsed() const { std::lock_guard lock(mu_); return devicesUsed_; }
  void resetDevicesUsed() { std::lock_guard lock(mu_); devicesUsed_.clear(); }
  // The largest copy since the last resetLargestCopy().
  size_t largestCopy() const { std::lock_guard lock(mu_); return largestCopy_; }
  void resetLargestCopy() { std::lock_guard lock(mu_); largestCopy_ = 0; }
  size_t queries() const { std::lock_guard lock(mu_); return queries_; }
  size_t hostFuncs() const { std::lock_guard lock(mu_); return hostFuncs_; }
  size_t liveEvents() const { std::lock_guard lock(mu_); return events_.size(); }
  size_t liveAllocations() const { std::lock_guard lock(mu_); return allocs_.size(); }
  // Pinned host memory: blocks held now, and allocations made so far.
  size_t livePinned() const { std::lock_guard lock(mu_); return pinned_.size(); }
  size_t pinnedAllocations() const { std::lock_guard lock(mu_); return pinnedAllocations_; }

 private:
  struct Alloc {
    size_t bytes;
    std::byte* rw;
  };
  // A queue run in order by its own thread.
  class Stream {
   public:
    Stream() : worker_([this] { run(); }) {}
    int device = 0;  // the device current where it was created
    ~Stream() {
      {
        std::lock_guard lock(mu_);
        stop_ = true;
      }
      cv_.notify_all();
      worker_.join();
    }
    void post(std::function<void()> fn) {
      {
        std::lock_guard lock(mu_);
        q_.push_back(std::move(fn));
        ++posted_;
      }
      cv_.notify_all();
    }
    void drain() {
      std::unique_lock lock(mu_);
      const size_t target = posted_;
      cv_.wait(lock, [&] { return done_ >= target; });
    }

   private:
    void run() {
      std::unique_lock lock(mu_);
      for (;;) {
        cv_.wait(lock, [&] { return stop_ || !q_.empty(); });
        if (q_.empty()) return;
        auto fn = std::move(q_.front());
        q_.pop_front();
        lock.unlock();
        fn();
        lock.lock();
        ++done_;
        cv_.notify_all();
      }
    }
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> q_;
    size_t posted_ = 0, done_ = 0;
    bool stop_ = false;
    std::thread worker_;
  };

  const Alloc* find(const void* p) const {
    const auto u = reinterpret_cast<uintptr_t>(p);
    auto it = allocs_.upper_bound(u);
    if (it == allocs_.begin()) return nullptr;
    --it;
    return u < it->first + it->second.bytes ? &it->second : nullptr;
  }
  // The host-accessible address of `p`: its alias when it is device memory, else `p`.
  void* alias(const void* p) const {
    std::lock_guard lock(mu_);
    const auto u = reinterpret_cast<uintptr_t>(p);
    auto it = allocs_.upper_bound(u);
    if (it != allocs_.begin() && u < std::prev(it)->first + std::prev(it)->second.bytes) {
      --it;
      return it->second.rw + (u - it->first);
    }
    return const_cast<void*>(p);
  }
  static int& current() {
    thread_local int device = 0;
    return device;
  }
  Stream& streamOf(void* stream) { return stream ? *static_cast<Stream*>(stream) : *defaultStream_; }
  static void unmap(uintptr_t start, const Alloc& a) {
    munmap(reinterpret_cast<void*>(start), a.bytes);
    munmap(a.rw, a.bytes);
  }

  mutable std::mutex mu_;
  std::map<uintptr_t, Alloc> allocs_;
  std::map<void*, size_t> pinned_;
  size_t pinnedAllocations_ = 0;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::unique_ptr<Stream> defaultStream_;
  std::map<void*, std::shared_ptr<std::atomic<bool>>> events_;
  std::set<int> devicesUsed_;
  size_t copies_ = 0, copiedBytes_ = 0, queries_ = 0, hostFuncs_ = 0, reductions_ = 0, largestCopy_ = 0;
  bool installed_;
  mem::DeviceApi* previous_ = nullptr;
};

}  // namespace tempo::testing
