// corrupt_shim: an LD_PRELOAD library that makes every ncclAllReduce on one rank deliver one
// wrong byte. It proves that all_reduce_perf -c 1 notices a wrong result, reports it in
// #wrong and exits non-zero -- a validation that could not fail would prove nothing.
// TEMPO_CORRUPT_RANK (default 0) picks the rank whose output is damaged.
#include <cstddef>
#include <cstdlib>

#include "rccl/rccl.h"

namespace {
size_t elementSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}
}  // namespace

extern "C" __attribute__((visibility("default"))) ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                      ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                      hipStream_t stream) {
  ncclResult_t r = pncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
  if (r != ncclSuccess || count == 0) return r;
  const char* env = std::getenv("TEMPO_CORRUPT_RANK");
  int victim = env ? std::atoi(env) : 0, rank = -1;
  if (pncclCommUserRank(comm, &rank) == ncclSuccess && rank == victim)
    // The most significant byte of element 0 (little endian): for floating types an exponent
    // bit, so no tolerance can absorb it.
    static_cast<unsigned char*>(recvbuff)[elementSize(datatype) - 1] ^= 0x40;
  return r;
}
