#include "bench/common/device.h"

#include <dlfcn.h>

#include <cstdio>
#include <string>
#include <utility>

#include "bench/common/launch.h"
#include "bench/common/report.h"
#include "bench/common/verify.h"
#include "src/core/param.h"

namespace tempo::bench {
namespace {

// The directory of the librccl this program runs on, with a trailing '/', or "".
std::string libraryDirectory() {
  void* entry = dlsym(RTLD_DEFAULT, "ncclGetVersion");
  Dl_info info{};
  if (!entry || dladdr(entry, &info) == 0 || !info.dli_fname) return "";
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

}  // namespace

mem::DeviceApi* benchDeviceApi() {
  static mem::DeviceApi* const api = mem::loadDeviceApi(param::Gpu(), libraryDirectory());
  return api;
}

void checkDevice(mem::DeviceApi& gpu, Status s, const char* what) {
  if (ok(s)) return;
  std::fprintf(stderr, "%s: %s failed: %s\n", shortHostName().c_str(), what, gpu.lastError());
  abortJob(2);
}

RankBuffer::RankBuffer(size_t maxBytes, size_t maxUnalignBytes, mem::DeviceApi* gpu)
    : host_(maxBytes, maxUnalignBytes), gpu_(gpu) {
  if (!gpu_ || !host_.ok()) return;
  auto p = gpu_->allocate(host_.allocatedBytes());
  if (p.ok()) device_ = static_cast<unsigned char*>(p.value());
  else std::fprintf(stderr, "%s: device allocation failed: %s\n", shortHostName().c_str(), gpu_->lastError());
}

RankBuffer::~RankBuffer() {
  if (device_) (void)gpu_->release(device_);
}

RankBuffer::RankBuffer(RankBuffer&& o) noexcept
    : host_(std::move(o.host_)), gpu_(o.gpu_), device_(std::exchange(o.device_, nullptr)) {}

void RankBuffer::copySpan(size_t u, size_t bytes, void* stream, bool toDevice) {
  if (!device_) return;
  unsigned char* h = host_.data(u) - kGuardBytes;
  unsigned char* d = translate(h);
  const size_t span = bytes + 2 * kGuardBytes;
  checkDevice(*gpu_, toDevice ? gpu_->copyAsync(d, h, span, stream) : gpu_->copyAsync(h, d, span, stream),
              toDevice ? "copy to the device" : "copy from the device");
  checkDevice(*gpu_, gpu_->synchronize(stream), "stream synchronize");
}

}  // namespace tempo::bench
