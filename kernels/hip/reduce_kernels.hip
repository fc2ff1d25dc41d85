// Tempo's device kernels and their launchers (the interface is kernels/hip/device.h).
// One source: hipcc compiles it for AMD GPUs (-x hip), nvcc for NVIDIA GPUs (-x cu), through
// kernels/hip/portability.h.
//
// Every kernel is one element-wise loop, instantiated per (element codec, operation):
//   phase 1: whole 16-byte packs, when every pointer is 16-byte aligned. Each thread loads
//            kUnroll packs (from each input) before it computes and stores any, so that
//            several loads per thread are in flight; consecutive threads take consecutive
//            packs, so every warp's accesses coalesce.
//   phase 2: the elements after the last whole pack (all of them when some pointer is not
//            16-byte aligned), one element per thread.
// Each element is read and written by exactly one thread, and read before it is written,
// so dst may alias an input. The grid is at most kBlocksPerMultiprocessor blocks per
// multiprocessor (a grid-stride loop does the rest), enough to keep the memory system busy.
#include <atomic>
#include <cstring>
#include <memory>

#include "kernels/hip/device.h"
#include "kernels/hip/portability.h"

namespace tempo::kernels::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;
constexpr int kBlocksPerMultiprocessor = 8;
constexpr int kMaxDevices = 64;

template <class S>
struct alignas(16) Pack {
  static constexpr int kLanes = 16 / sizeof(S);
  S v[kLanes];
};

// dst[i] = fn(a[i]) (kInputs 1) or fn(a[i], b[i]) (kInputs 2) for i in [0, n).
template <int kInputs, class S, class Fn>
__global__ void elementwise(S* dst, const S* a, const S* b, size_t n, bool packed, Fn fn) {
  using P = Pack<S>;
  constexpr int kLanes = P::kLanes;
  const size_t thread = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t threads = size_t(gridDim.x) * blockDim.x;

  // Phase 1: whole packs, kUnroll per thread per round, all loads before any store.
  const size_t packs = packed ? n / kLanes : 0;
  const P* pa = reinterpret_cast<const P*>(a);
  const P* pb = reinterpret_cast<const P*>(b);
  P* pd = reinterpret_cast<P*>(dst);
  for (size_t base = thread; base < packs; base += threads * kUnroll) {
    P x[kUnroll], y[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t p = base + u * threads;
      if (p < packs) {
        x[u] = pa[p];
        if constexpr (kInputs == 2) y[u] = pb[p];
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t p = base + u * threads;
      if (p < packs) {
        P r;
#pragma unroll
        for (int l = 0; l < kLanes; ++l) {
          if constexpr (kInputs == 2) r.v[l] = fn(x[u].v[l], y[u].v[l]);
          else r.v[l] = fn(x[u].v[l]);
        }
        pd[p] = r;
      }
    }
  }

  // Phase 2: what is left, one element per thread.
  for (size_t i = packs * kLanes + thread; i < n; i += threads) {
    if constexpr (kInputs == 2) dst[i] = fn(a[i], b[i]);
    else dst[i] = fn(a[i]);
  }
}

Status check(gpuError_t e, const char* what) {
  if (e == gpuSuccess) return Status::Success;
  const char* name = TEMPO_GPU(GetErrorName)(e);
  const char* text = TEMPO_GPU(GetErrorString)(e);
  if (std::strcmp(name, text) == 0) {  // HIP 5.2 gives the name twice
    return fail(Status::UnhandledDeviceError, "%s: %s failed: %s", TEMPO_GPU_BACKEND, what, name);
  }
  return fail(Status::UnhandledDeviceError, "%s: %s failed: %s (%s)", TEMPO_GPU_BACKEND, what, name, text);
}

// Multiprocessors of the calling thread's current device, queried once per device.
Result<int> multiprocessors() {
  static std::atomic<int> cache[kMaxDevices] = {};
  int device = 0;
  TEMPO_TRY(check(TEMPO_GPU(GetDevice)(&device), "GetDevice"));
  if (device >= 0 && device < kMaxDevices) {
    if (const int n = cache[device].load(std::memory_order_relaxed); n > 0) return n;
  }
  int n = 0;
  TEMPO_TRY(check(TEMPO_GPU(DeviceGetAttribute)(&n, gpuAttrMultiprocessorCount, device),
                  "DeviceGetAttribute(multiprocessor count)"));
  if (n < 1) n = 1;
  if (device >= 0 && device < kMaxDevices) cache[device].store(n, std::memory_order_relaxed);
  return n;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

template <int kInputs, class S, class Fn>
Status launch(S* dst, const S* a, const S* b, size_t n, Fn fn, void* stream) {
  if (n == 0) return Status::Success;
  TEMPO_ASSIGN(const int sms, multiprocessors());
  const bool packed = aligned16(dst) && aligned16(a) && (kInputs == 1 || aligned16(b));
  // Threads with work: one per kUnroll packs, or per leftover element if there are more.
  const size_t packs = packed ? n / Pack<S>::kLanes : 0;
  const size_t rounds = (packs + kUnroll - 1) / kUnroll, rest = n - packs * Pack<S>::kLanes;
  const size_t units = rounds > rest ? rounds : rest;
  const size_t wanted = (units + kThreads - 1) / kThreads;
  const size_t cap = size_t(sms) * kBlocksPerMultiprocessor;
  const unsigned blocks = unsigned(wanted < cap ? wanted : cap);
  elementwise<kInputs, S, Fn><<<blocks, kThreads, 0, static_cast<gpuStream_t>(stream)>>>(
      dst, a, b, n, packed, fn);
  return check(TEMPO_GPU(GetLastError)(), "kernel launch");
}

Status unknownType(DataType type) {
  return fail(Status::InvalidArgument, "%s kernels: datatype %d is not one of ncclDataType_t",
              TEMPO_GPU_BACKEND, int(type));
}

}  // namespace

const char* backendName() { return TEMPO_GPU_BACKEND; }

Result<int> deviceCount() {
  int n = 0;
  TEMPO_TRY(check(TEMPO_GPU(GetDeviceCount)(&n), "GetDeviceCount"));
  if (n < 1) return fail(Status::UnhandledDeviceError, "%s: no device", TEMPO_GPU_BACKEND);
  return n;
}

Result<DeviceInfo> deviceInfo(int ordinal) {
  gpuDeviceProp_t p;
  std::memset(&p, 0, sizeof p);
  TEMPO_TRY(check(TEMPO_GPU(GetDeviceProperties)(&p, ordinal), "GetDeviceProperties"));
  DeviceInfo info;
  info.ordinal = ordinal;
  info.name = p.name;
#if defined(TEMPO_GPU_HIP)
  info.arch = p.gcnArchName;
#else
  info.arch = "sm_" + std::to_string(p.major * 10 + p.minor);
#endif
  info.multiprocessors = p.multiProcessorCount;
  info.memoryBytes = p.totalGlobalMem;
  info.fp8 = defaultFp8Encoding(info);
  return info;
}

Status setDevice(int ordinal) { return check(TEMPO_GPU(SetDevice)(ordinal), "SetDevice"); }

Result<int> currentDevice() {
  int ordinal = 0;
  TEMPO_TRY(check(TEMPO_GPU(GetDevice)(&ordinal), "GetDevice"));
  return ordinal;
}

Fp8Encoding defaultFp8Encoding(const DeviceInfo& info) {
  for (const char* fnuz : {"gfx940", "gfx941", "gfx942"}) {
    if (info.arch.rfind(fnuz, 0) == 0) return Fp8Encoding::Fnuz;
  }
  return Fp8Encoding::Ocp;
}

Result<bool> isDevicePointer(const void* p) {
#if defined(TEMPO_GPU_HIP)
  hipPointerAttribute_t attr;
  std::memset(&attr, 0, sizeof attr);
  if (hipPointerGetAttributes(&attr, p) != hipSuccess) {
    (void)hipGetLastError();  // HIP 5 refuses memory it never saw: that is host memory
    return false;
  }
#if HIP_VERSION_MAJOR >= 6
  const hipMemoryType type = attr.type;
#else
  const hipMemoryType type = attr.memoryType;
#endif
  return type == hipMemoryTypeDevice && !attr.isManaged;
#else
  cudaPointerAttributes attr;
  std::memset(&attr, 0, sizeof attr);
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeDevice;
#endif
}

Result<void*> allocate(size_t bytes) {
  void* p = nullptr;
  TEMPO_TRY(check(TEMPO_GPU(Malloc)(&p, bytes == 0 ? 1 : bytes), "Malloc"));
  return p;
}

Status release(void* ptr) {
  if (ptr == nullptr) return Status::Success;
  return check(TEMPO_GPU(Free)(ptr), "Free");
}

Result<void*> allocateHost(size_t bytes) {
  void* p = nullptr;
#if defined(TEMPO_GPU_HIP)
  TEMPO_TRY(check(hipHostMalloc(&p, bytes == 0 ? 1 : bytes, hipHostMallocDefault), "HostMalloc"));
#else
  TEMPO_TRY(check(cudaMallocHost(&p, bytes == 0 ? 1 : bytes), "MallocHost"));
#endif
  return p;
}

Status releaseHost(void* ptr) {
  if (ptr == nullptr) return Status::Success;
#if defined(TEMPO_GPU_HIP)
  return check(hipHostFree(ptr), "HostFree");
#else
  return check(cudaFreeHost(ptr), "FreeHost");
#endif
}

Status copyAsync(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return Status::Success;
  return check(TEMPO_GPU(MemcpyAsync)(dst, src, bytes, gpuMemcpyDefault,
                                      static_cast<gpuStream_t>(stream)),
               "MemcpyAsync");
}

Status synchronize(void* stream) {
  return check(TEMPO_GPU(StreamSynchronize)(static_cast<gpuStream_t>(stream)), "StreamSynchronize");
}

Result<void*> createStream() {
  gpuStream_t stream = nullptr;
  TEMPO_TRY(check(TEMPO_GPU(StreamCreateWithFlags)(&stream, TEMPO_GPU(StreamNonBlocking)), "StreamCreateWithFlags"));
  return static_cast<void*>(stream);
}

Status destroyStream(void* stream) {
  if (stream == nullptr) return Status::Success;
  return check(TEMPO_GPU(StreamDestroy)(static_cast<gpuStream_t>(stream)), "StreamDestroy");
}

Result<void*> recordEvent(void* stream) {
  TEMPO_GPU(Event_t) event = nullptr;
  TEMPO_TRY(check(TEMPO_GPU(EventCreateWithFlags)(&event, TEMPO_GPU(EventDisableTiming)), "EventCreateWithFlags"));
  const Status s = check(TEMPO_GPU(EventRecord)(event, static_cast<gpuStream_t>(stream)), "EventRecord");
  if (!ok(s)) {
    (void)TEMPO_GPU(EventDestroy)(event);
    return s;
  }
  return static_cast<void*>(event);
}

Result<bool> eventDone(void* event) {
  const gpuError_t e = TEMPO_GPU(EventQuery)(static_cast<TEMPO_GPU(Event_t)>(event));
  if (e == TEMPO_GPU(ErrorNotReady)) {
    (void)TEMPO_GPU(GetLastError)();
    return false;
  }
  TEMPO_TRY(check(e, "EventQuery"));
  return true;
}

Status destroyEvent(void* event) {
  return check(TEMPO_GPU(EventDestroy)(static_cast<TEMPO_GPU(Event_t)>(event)), "EventDestroy");
}

#if defined(TEMPO_GPU_HIP)
// Debian's HIP 5.2 declares hipLaunchHostFunc but its library lacks it: a stream callback
// that calls the function serves the same purpose.
namespace {
struct HostCall {
  void (*fn)(void*);
  void* arg;
};
void runHostCall(hipStream_t, hipError_t, void* call) {
  std::unique_ptr<HostCall> c(static_cast<HostCall*>(call));
  c->fn(c->arg);
}
}  // namespace

Status launchHostFunc(void* stream, void (*fn)(void*), void* arg) {
  auto call = std::make_unique<HostCall>(HostCall{fn, arg});
  TEMPO_TRY(check(hipStreamAddCallback(static_cast<hipStream_t>(stream), runHostCall, call.get(), 0),
                  "StreamAddCallback"));
  call.release();  // runHostCall owns it now
  return Status::Success;
}
#else
Status launchHostFunc(void* stream, void (*fn)(void*), void* arg) {
  return check(cudaLaunchHostFunc(static_cast<cudaStream_t>(stream), fn, arg), "LaunchHostFunc");
}
#endif

Result<DeviceBuffer> DeviceBuffer::create(size_t bytes) {
  TEMPO_ASSIGN(void* p, allocate(bytes));
  return DeviceBuffer(p, bytes);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    (void)release(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { (void)release(ptr_); }

Status reduce(void* dst, const void* a, const void* b, size_t count, DataType type, RedOp op,
              uint64_t postDivisor, Fp8Encoding fp8, void* stream) {
  Status s = Status::Success;
  const bool known = element::withCodec(type, fp8, [&]<class E>() {
    using S = typename E::Storage;
    auto* d = static_cast<S*>(dst);
    const auto* x = static_cast<const S*>(a);
    const auto* y = static_cast<const S*>(b);
    // Combine divides only sums (and so averages) by postDivisor.
    const bool knownOp = element::withOp(op, [&]<RedOp Op>() {
      s = launch<2>(d, x, y, count, element::Combine<E, Op>{postDivisor}, stream);
    });
    if (!knownOp)
      s = fail(Status::InvalidArgument, "%s kernels: reduction op %d is not one of ncclRedOp_t", TEMPO_GPU_BACKEND,
               int(op));
  });
  return known ? s : unknownType(type);
}

Status divide(void* dst, const void* src, size_t count, DataType type, uint64_t divisor,
              Fp8Encoding fp8, void* stream) {
  Status s = Status::Success;
  const bool known = element::withCodec(type, fp8, [&]<class E>() {
    using S = typename E::Storage;
    s = launch<1>(static_cast<S*>(dst), static_cast<const S*>(src), static_cast<const S*>(nullptr),
                  count, element::Divide<E>{divisor == 0 ? 1 : divisor}, stream);
  });
  return known ? s : unknownType(type);
}

Status scale(void* dst, const void* src, size_t count, DataType type, const void* scalar,
             Fp8Encoding fp8, void* stream) {
  Status s = Status::Success;
  const bool known = element::withCodec(type, fp8, [&]<class E>() {
    using S = typename E::Storage;
    element::Scale<E> fn;
    std::memcpy(&fn.scalar, scalar, sizeof(S));
    s = launch<1>(static_cast<S*>(dst), static_cast<const S*>(src), static_cast<const S*>(nullptr),
                  count, fn, stream);
  });
  return known ? s : unknownType(type);
}

Status copy(void* dst, const void* src, size_t bytes, void* stream) {
  return launch<1>(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src),
                   static_cast<const uint8_t*>(nullptr), bytes, element::Identity<uint8_t>{}, stream);
}

}  // namespace tempo::kernels::gpu
