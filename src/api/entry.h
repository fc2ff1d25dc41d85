// How every public entry point is defined (the only extern "C" code in Tempo).
//
//   NCCL_API(ncclResult_t, ncclFoo, int a, int* b) { return tempo::api::guarded([&] { ... }); }
//
// defines the weak, default-visibility symbol ncclFoo and a strong alias pncclFoo with the
// same signature, as NCCL's and RCCL's NCCL_API macro does, so a PMPI-style interposer
// can define ncclFoo and forward to pncclFoo. MSCCL_API does the same for msccl* names.
// guarded() turns any exception into a Status, so nothing ever crosses the C ABI.
#pragma once

#include <new>

// The public header declares ncclResetDebugInit only when NCCL_OS_LINUX is defined (as
// upstream does, so applications see a no-op macro otherwise); the library must always see
// the declaration to define and export it. Include this file before anything else in src/api.
#if defined(__linux__) && !defined(NCCL_OS_LINUX)
#define NCCL_OS_LINUX 1
#endif

#include "rccl/rccl.h"
#include "src/core/status.h"

#define NCCL_API(ret, func, ...)                                                      \
  extern "C" __attribute__((visibility("default"))) __attribute__((weak)) ret func(__VA_ARGS__); \
  extern "C" __attribute__((visibility("default"))) __attribute__((alias(#func)))   \
  ret p##func(__VA_ARGS__);                                                            \
  extern "C" __attribute__((visibility("default"))) __attribute__((weak)) ret func(__VA_ARGS__)

// RCCL's msccl* entry points (and pmsccl* twins) follow the same scheme.
#define MSCCL_API(ret, func, ...) NCCL_API(ret, func, __VA_ARGS__)

namespace tempo::api {

inline ncclResult_t toNccl(Status s) { return static_cast<ncclResult_t>(s); }

// Runs `body` (returning Status) and maps it to ncclResult_t; exceptions become
// ncclSystemError (allocation failure) or ncclInternalError, with the reason recorded
// for ncclGetLastError.
template <class F>
ncclResult_t guarded(F&& body) noexcept {
  try {
    return toNccl(body());
  } catch (const std::bad_alloc&) {
    return toNccl(fail(Status::SystemError, "out of host memory"));
  } catch (...) {
    return toNccl(fail(Status::InternalError, "unexpected exception inside Tempo"));
  }
}

}  // namespace tempo::api
