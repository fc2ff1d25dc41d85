// What Tempo needs from a GPU runtime to serve device buffers, and which runtime the
// process has.
//
// DeviceApi is the seam between the library and HIP or CUDA: the library never includes a
// GPU runtime header. A GPU build ships the implementation as a plugin next to the library
// (libtempo-gpu-hip.so, libtempo-gpu-cuda.so, built from kernels/hip), loaded once per
// process when TEMPO_GPU allows it and the machine has the GPU's device node; elsewhere
// there is no runtime, every buffer is host memory and the data path pays one pointer test.
// Tests install an emulated device (tests/common/emulated_device.h) instead.
//
// Contract of every method: thread-safe; an error comes back as a Status whose reason
// lastError() gives on the calling thread (a plugin keeps its own record; deviceCall()
// below makes it the caller's ncclGetLastError); `stream` is the application's
// hipStream_t / cudaStream_t as a void* (nullptr: the default stream).
#pragma once

#include <cstddef>
#include <string>

#include "src/core/dtype.h"
#include "src/core/status.h"

namespace tempo::mem {

class DeviceApi {
 public:
  virtual ~DeviceApi() = default;
  // "HIP", "CUDA", "emulated": for log lines and errors.
  virtual const char* name() const = 0;
  // The device this thread's calls use (hipGetDevice / cudaGetDevice), and making it
  // `ordinal` (hipSetDevice / cudaSetDevice). Every thread starts on device 0.
  virtual Result<int> currentDevice() = 0;
  virtual Result<int> deviceCount() = 0;
  virtual Status setDevice(int ordinal) = 0;
  // Whether `p` is device memory the host cannot read or write directly. Host, pinned
  // (registered) and managed memory are not; neither is an address the runtime does not
  // know, which is then taken to be host memory, as NCCL does.
  virtual Result<bool> isDevicePointer(const void* p) = 0;
  // Device memory of at least `bytes` bytes on the calling thread's device (what hipMalloc
  // gives), freed with release(); release(nullptr) does nothing.
  virtual Result<void*> allocate(size_t bytes) = 0;
  virtual Status release(void* p) = 0;
  // Host memory of at least `bytes` bytes that the device copies to and from directly
  // (pinned: hipHostMalloc, cudaMallocHost), freed with releaseHost().
  virtual Result<void*> allocateHost(size_t bytes) = 0;
  virtual Status releaseHost(void* p) = 0;
  // A non-blocking stream of its own on the calling thread's device (it never waits for
  // the null stream), destroyed with destroyStream() once nothing more is queued on it.
  virtual Result<void*> createStream() = 0;
  virtual Status destroyStream(void* stream) = 0;
  // dst[i] = a[i] op b[i] for `count` elements, by a kernel queued on `stream` (then divided
  // by postDivisor when > 1), bit for bit what kernels::reduce computes on the host, fp8 in
  // the device's encoding. The pointers may be device memory or pinned host memory
  // (allocateHost), which the device reads and writes directly; dst may equal a or b.
  virtual Status reduce(void* dst, const void* a, const void* b, size_t count, DataType type, RedOp op,
                        uint64_t postDivisor, void* stream) = 0;
  // Copies `bytes` between host and device memory (either direction, or device to device)
  // in the order of `stream`: after everything queued on it before, and before anything
  // queued after. Returns once the copy is queued.
  virtual Status copyAsync(void* dst, const void* src, size_t bytes, void* stream) = 0;
  // Waits until everything queued on `stream` so far has run.
  virtual Status synchronize(void* stream) = 0;
  // An event marking what is queued on `stream` now; eventDone() tells, without waiting,
  // whether all of that has run. Every event is destroyed with destroyEvent().
  virtual Result<void*> recordEvent(void* stream) = 0;
  virtual Result<bool> eventDone(void* event) = 0;
  virtual Status destroyEvent(void* event) = 0;
  // Queues fn(arg) on `stream`: it runs on a runtime thread once the stream reaches it, and
  // the stream goes on when it returns. fn must not call the runtime (HIP and CUDA forbid
  // it), and several streams' functions may share one thread, one after another.
  virtual Status launchHostFunc(void* stream, void (*fn)(void*), void* arg) = 0;
  // Why this thread's last failed call failed.
  virtual const char* lastError() const = 0;
};

// Passes `s` through; on failure it makes api.lastError() the calling thread's last error,
// so that ncclGetLastError explains a failure inside the runtime's plugin.
Status deviceCall(const DeviceApi& api, Status s);
template <class T>
Result<T> deviceCall(const DeviceApi& api, Result<T> r) {
  if (!r.ok()) setLastErrorMessage(api.lastError());
  return r;
}

// The process's GPU runtime, or nullptr when it has none: TEMPO_GPU=off, no device node, no
// plugin, or a plugin that found no device (each said once in the INIT log). Decided on
// the first call; later calls are a load and a test.
DeviceApi* deviceApi();

// What deviceApi() decides, decided afresh for `choice` (a TEMPO_GPU value): the loaded
// plugin's runtime, or nullptr with the reason in the INIT log. A loaded plugin stays loaded.
// With "auto" the plugin is looked for in `pluginDirectory` (with its trailing '/'; empty:
// the directory of the library or program this code is linked into).
DeviceApi* loadDeviceApi(const std::string& choice, const std::string& pluginDirectory = "");

// Tests only: uses `api` (nullptr: none) from now on in place of the loaded runtime and
// returns the previous one. Not for use while collectives run.
DeviceApi* setDeviceApiForTesting(DeviceApi* api);

// The plugin's entry point, exported by libtempo-gpu-{hip,cuda}.so: its DeviceApi (which
// lives as long as the process), or nullptr with the reason written to `why` (e.g. no
// device). The name carries the interface's version.
using GpuPluginEntry = DeviceApi* (*)(char* why, size_t whyBytes);
inline constexpr const char* kGpuPluginEntry = "tempo_gpu_plugin_v3";

}  // namespace tempo::mem
