/*
 * nccl.h -- for CUDA-style sources that include <nccl.h>: Tempo's API is the NCCL API, so this
 * simply provides rccl/rccl.h (the stream type is hipStream_t, as with RCCL).
 */
#ifndef TEMPO_NCCL_SHIM_H_
#define TEMPO_NCCL_SHIM_H_

#include "rccl/rccl.h"

#endif /* TEMPO_NCCL_SHIM_H_ */
