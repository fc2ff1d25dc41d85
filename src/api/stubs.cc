// Entry points declared in rccl/rccl.h whose behaviour belongs to a later release.
//
// Each one is already a real, exported definition with the exact header signature (weak ncclX
// plus strong pncclX, through NCCL_API / MSCCL_API), so applications and frameworks that merely
// link against or dlsym() these names load today, and a call fails cleanly: ncclInvalidUsage,
// with "<name>: not implemented yet" in ncclGetLastError. When a function gets its real
// implementation, delete its line here and define it in the module's own src/api file.
//
// The entry points implemented elsewhere in src/api (init/destroy/finalize/abort, queries,
// errors, groups, ncclAllReduce, ncclGetVersion, ncclResetDebugInit) are deliberately absent.
#include "src/api/entry.h"


namespace {

// notImplemented() logs and formats; run it inside the same exception guard as every other
// entry point so nothing can escape through the C ABI.
ncclResult_t stub(const char* func) noexcept {
  return tempo::api::guarded(
      [func] { return static_cast<tempo::Status>(tempo::api::notImplemented(func)); });
}

}  // namespace

// Defines func and pfunc, with the given parameter list, returning "not implemented yet".
#define TEMPO_STUB(func, ...) \
  NCCL_API(ncclResult_t, func, __VA_ARGS__) { return stub(#func); }

// ---- One-sided (RMA) ----
TEMPO_STUB(ncclPutSignal, const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
           ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
           ncclComm_t comm, hipStream_t stream)
TEMPO_STUB(ncclSignal, int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
           hipStream_t stream)
TEMPO_STUB(ncclWaitSignal, int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
           hipStream_t stream)
