// The host-side interface of Tempo's device kernels: plain C++, no HIP or CUDA types, so
// that the rest of Tempo (and the tests) compile with g++ and link whichever backend was
// built: libtempo_kernels_hip (hipcc, AMD) or libtempo_kernels_cuda (nvcc, NVIDIA), both
// from the one source kernels/hip/reduce_kernels.hip.
//
// Contract shared by every call:
//  - Errors come back as a Status (src/core/status.h): UnhandledDeviceError, with the
//    runtime's own error name and the call that failed recorded as the last error.
//  - `stream` is a hipStream_t / cudaStream_t passed as void*; nullptr is the default stream.
//    Kernels are launched on it and the call returns without waiting; synchronize() waits.
//  - Pointers are device pointers (or any pointer the device can address: managed or
//    registered host memory). Elements need only their natural alignment; the kernels use
//    16-byte loads and stores where every pointer involved allows them and element-wise
//    access otherwise.
//  - count == 0 launches nothing and succeeds; pointers may then be null.
//  - Aliasing follows kernels/reduce.h: dst may equal a, b or both; no other overlap.
//  - The arithmetic is exactly kernels/reduce.h's (see element.h): a device reduction is bit
//    for bit what kernels::ref::reduce computes on the host, fp8 in the encoding given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/hip/element.h"
#include "src/core/dtype.h"
#include "src/core/status.h"

namespace tempo::kernels::gpu {

// "HIP" or "CUDA": the backend this library was built for.
const char* backendName();

// The number of devices the runtime sees. A runtime without a device or a driver is an
// error (UnhandledDeviceError) whose message says so; callers that only want to know
// whether a GPU is there (tests that skip) use it as the reason.
Result<int> deviceCount();

struct DeviceInfo {
  int ordinal = 0;
  std::string name;          // "NVIDIA H200", "AMD Instinct MI300X", ...
  std::string arch;          // "sm_90", "gfx942:sramecc+:xnack-", ...
  int multiprocessors = 0;   // SMs or CUs: the kernels' grid is sized from it
  size_t memoryBytes = 0;
  Fp8Encoding fp8 = Fp8Encoding::Ocp;  // what ncclFloat8e4m3/e5m2 mean on this device
};

// Properties of device `ordinal`, as the launchers use them.
Result<DeviceInfo> deviceInfo(int ordinal);

// The device calls from this thread use (hipSetDevice / cudaSetDevice), and which it is.
Status setDevice(int ordinal);
Result<int> currentDevice();

// OCP on NVIDIA and on AMD GPUs other than gfx940-gfx942, FNUZ on those (as RCCL).
Fp8Encoding defaultFp8Encoding(const DeviceInfo& info);

// Whether `p` is device memory the host cannot access directly. Host, registered (pinned)
// and managed memory are not, nor is an address the runtime does not know (host memory it
// never saw), as NCCL treats it.
Result<bool> isDevicePointer(const void* p);

// ---- memory (RAII owner below) ----
Result<void*> allocate(size_t bytes);
Status release(void* ptr);
// Pinned host memory the device copies to and from directly (hipHostMalloc, cudaMallocHost).
Result<void*> allocateHost(size_t bytes);
Status releaseHost(void* ptr);
// Copies `bytes` between any two addresses the runtime knows (host or device), in stream
// order; the host side must stay valid until the stream reaches the copy.
Status copyAsync(void* dst, const void* src, size_t bytes, void* stream);
Status synchronize(void* stream);
// A non-blocking stream of the calling thread's device: it never waits for the null stream.
Result<void*> createStream();
Status destroyStream(void* stream);  // nullptr: nothing to do
// Stream-ordered events (created without timing) and host functions, as in DeviceApi.
Result<void*> recordEvent(void* stream);
Result<bool> eventDone(void* event);
Status destroyEvent(void* event);
Status launchHostFunc(void* stream, void (*fn)(void*), void* arg);

// Owns one device allocation; moves, never copies.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static Result<DeviceBuffer> create(size_t bytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  void* get() const { return ptr_; }
  size_t size() const { return bytes_; }

 private:
  DeviceBuffer(void* p, size_t n) : ptr_(p), bytes_(n) {}
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// ---- kernels (launched on `stream`, asynchronous) ----

// dst[i] = a[i] op b[i]; Sum/Avg with postDivisor > 1 also divide, in one pass.
Status reduce(void* dst, const void* a, const void* b, size_t count, DataType type, RedOp op,
              uint64_t postDivisor, Fp8Encoding fp8, void* stream);

// dst[i] = src[i] / divisor (0 counts as 1). dst may equal src.
Status divide(void* dst, const void* src, size_t count, DataType type, uint64_t divisor,
              Fp8Encoding fp8, void* stream);

// dst[i] = src[i] * scalar, Prod's semantics; `scalar` is one element of `type` in host
// memory, read before the call returns. dst may equal src.
Status scale(void* dst, const void* src, size_t count, DataType type, const void* scalar,
             Fp8Encoding fp8, void* stream);

// dst[0, bytes) = src[0, bytes) by a kernel (not the runtime's copy engine), for copies that
// must run on the compute units or be fused into a sequence of kernels. No overlap.
Status copy(void* dst, const void* src, size_t bytes, void* stream);

}  // namespace tempo::kernels::gpu
