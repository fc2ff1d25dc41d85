// The GPU runtime plugin (libtempo-gpu-hip.so, libtempo-gpu-cuda.so): the library's
// DeviceApi (src/mem/device_api.h) over the device kernels' host interface
// (kernels/hip/device.h), built once per backend. The library loads it with dlopen only on
// machines with the GPU's device node, so that librccl.so.1 itself needs no GPU runtime.
#include <cstdio>
#include <type_traits>

#include "kernels/hip/device.h"
#include "src/mem/device_api.h"

namespace tempo::mem {
namespace {

namespace gpu = kernels::gpu;

class GpuRuntime final : public DeviceApi {
 public:
  // fp8 means what the first device's architecture makes it (a node's GPUs are alike).
  GpuRuntime() {
    if (auto info = gpu::deviceInfo(0); info.ok()) fp8_ = gpu::defaultFp8Encoding(*info);
  }
  const char* name() const override { return gpu::backendName(); }
  Result<int> currentDevice() override { return gpu::currentDevice(); }
  Result<int> deviceCount() override { return gpu::deviceCount(); }
  Status setDevice(int ordinal) override { return gpu::setDevice(ordinal); }
  Result<bool> isDevicePointer(const void* p) override { return gpu::isDevicePointer(p); }
  Result<void*> allocate(size_t bytes) override { return gpu::allocate(bytes); }
  Status release(void* p) override { return gpu::release(p); }
  Result<void*> allocateHost(size_t bytes) override { return gpu::allocateHost(bytes); }
  Status releaseHost(void* p) override { return gpu::releaseHost(p); }
  Result<void*> createStream() override { return gpu::createStream(); }
  Status destroyStream(void* stream) override { return gpu::destroyStream(stream); }
  Status reduce(void* dst, const void* a, const void* b, size_t count, DataType type, RedOp op, uint64_t postDivisor,
                void* stream) override {
    return gpu::reduce(dst, a, b, count, type, op, postDivisor, fp8_, stream);
  }
  Status copyAsync(void* dst, const void* src, size_t bytes, void* stream) override {
    return gpu::copyAsync(dst, src, bytes, stream);
  }
  Status synchronize(void* stream) override { return gpu::synchronize(stream); }
  Result<void*> recordEvent(void* stream) override { return gpu::recordEvent(stream); }
  Result<bool> eventDone(void* event) override { return gpu::eventDone(event); }
  Status destroyEvent(void* event) override { return gpu::destroyEvent(event); }
  Status launchHostFunc(void* stream, void (*fn)(void*), void* arg) override {
    return gpu::launchHostFunc(stream, fn, arg);
  }
  // This plugin's own record (its copy of Tempo's core), which deviceCall forwards.
  const char* lastError() const override { return lastErrorMessage(); }

 private:
  gpu::Fp8Encoding fp8_ = gpu::Fp8Encoding::Ocp;
};

}  // namespace
}  // namespace tempo::mem

extern "C" __attribute__((visibility("default"))) tempo::mem::DeviceApi* tempo_gpu_plugin_v3(char* why,
                                                                                             size_t whyBytes) {
  static_assert(std::is_same_v<decltype(&tempo_gpu_plugin_v3), tempo::mem::GpuPluginEntry>);
  auto devices = tempo::kernels::gpu::deviceCount();
  if (!devices.ok()) {
    std::snprintf(why, whyBytes, "%s", tempo::lastErrorMessage());
    return nullptr;
  }
  static tempo::mem::GpuRuntime runtime;
  return &runtime;
}
