// RCCL's MSCCL entry points. RCCL 2.28.3 removed MSCCL and kept these three names so that
// binaries linked against them still load: each now warns and has no effect. Tempo loads
// and unloads the same way (ncclSuccess, a WARN line, the handle set to 0), but refuses
// mscclRunAlgo with ncclInvalidUsage: a call that moves no data must not report success
// for a collective the caller expects done.
#include "src/api/entry.h"
#include "src/core/log.h"

using tempo::Status;
using tempo::api::guarded;

MSCCL_API(ncclResult_t, mscclLoadAlgo, const char* mscclAlgoFilePath, mscclAlgoHandle_t* mscclAlgoHandle,
          int rank) {
  return guarded([&] {
    TEMPO_WARN("mscclLoadAlgo(%s) has no effect: MSCCL was removed from RCCL (2.28.3) and Tempo has none",
               mscclAlgoFilePath ? mscclAlgoFilePath : "NULL");
    if (mscclAlgoHandle) *mscclAlgoHandle = 0;
    return Status::Success;
  });
}

MSCCL_API(ncclResult_t, mscclRunAlgo, const void* sendBuff, const size_t sendCounts[], const size_t sDisPls[],
          void* recvBuff, const size_t recvCounts[], const size_t rDisPls[], size_t count, ncclDataType_t dataType,
          int root, int peer, ncclRedOp_t op, mscclAlgoHandle_t mscclAlgoHandle, ncclComm_t comm,
          hipStream_t stream) {
  return guarded([&] {
    return tempo::fail(Status::InvalidUsage,
                       "mscclRunAlgo: MSCCL was removed from RCCL (2.28.3), where this call moves no data; Tempo "
                       "refuses it rather than report a collective done that did not run");
  });
}

MSCCL_API(ncclResult_t, mscclUnloadAlgo, mscclAlgoHandle_t mscclAlgoHandle) {
  return guarded([&] {
    TEMPO_WARN("mscclUnloadAlgo has no effect: MSCCL was removed from RCCL (2.28.3) and Tempo has none");
    return Status::Success;
  });
}
