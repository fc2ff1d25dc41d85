/*
 * Compiled as strict C (-std=c99 / -std=c11 -pedantic -Werror, see CMakeLists.txt) so that
 * anything in the public header that is not plain C breaks the build. ABI_C_HEADER picks the
 * header: 1 = <rccl/rccl.h>, 2 = the <rccl.h> wrapper, 3 = the <nccl.h> shim, 4 = Tempo's
 * <tempo/tempo.h> extensions (which include <rccl/rccl.h>), 5 = the CUDA build's NCCL-ABI
 * <nccl.h> (every stream parameter a cudaStream_t).
 *
 * Besides parsing, it checks in C what a C program relies on: the initializers, a few
 * layout facts, and (by assigning to exactly typed function pointers, which is a constraint
 * violation when the types differ) the prototypes of a representative set of functions.
 */
#if ABI_C_HEADER == 5
#include <nccl.h> /* the CUDA build's generated NCCL-ABI header: cudaStream_t */
#define ABI_STREAM cudaStream_t
#elif ABI_C_HEADER == 2
#include <rccl.h>
#elif ABI_C_HEADER == 3
#include <nccl.h>
#elif ABI_C_HEADER == 4
#include <tempo/tempo.h> /* Tempo's extensions; includes <rccl/rccl.h> */
#else
#include <rccl/rccl.h>
#endif

#include <stddef.h>

#ifndef ABI_STREAM
#define ABI_STREAM hipStream_t
#endif

/* C99 has no _Static_assert: a negative array size is the portable compile-time check. */
#define ABI_C_ASSERT(name, cond) typedef char abi_c_assert_##name[(cond) ? 1 : -1]

ABI_C_ASSERT(unique_id, sizeof(ncclUniqueId) == NCCL_UNIQUE_ID_BYTES);
ABI_C_ASSERT(result_values, ncclTimeout == 8 && ncclNumResults == 9);
ABI_C_ASSERT(fp8_aliases, ncclFp8E4M3 == ncclFloat8e4m3 && ncclFp8E5M2 == ncclFloat8e5m2);
ABI_C_ASSERT(max_red_op, ncclMaxRedOp == 0x7fffffff);
ABI_C_ASSERT(version, NCCL_VERSION_CODE == NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH));
#if defined(__LP64__)
ABI_C_ASSERT(config_size, sizeof(ncclConfig_t) == 96);
ABI_C_ASSERT(config_comm_name, offsetof(ncclConfig_t, commName) == 48);
ABI_C_ASSERT(config_last, offsetof(ncclConfig_t, graphStreamOrdering) == 92);
ABI_C_ASSERT(sim_info_size, sizeof(ncclSimInfo_t) == 24);
#endif

#if !defined(RCCL_BFLOAT16) || !defined(RCCL_FLOAT8) || !defined(RCCL_GATHER_SCATTER) || \
    !defined(RCCL_ALLTOALLV) || !defined(RCCL_ALLREDUCE_WITH_BIAS) || !defined(RCCL_SUSPEND_RESUME)
#error "an RCCL feature-test macro is missing"
#endif
#ifdef NCCL_COMM_DUMP
#error "NCCL_COMM_DUMP (C++ only) must not be defined for C"
#endif

int abi_c_compile_probe(void);

int abi_c_compile_probe(void) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  ncclWaitSignalDesc_t desc = {1, 0, 0, 0};
  ncclComm_t comm = NCCL_COMM_NULL;
  ncclWindow_t win = NULL;
  ncclParamHandle_t param = NULL;
  mscclAlgoHandle_t algo = 0;
  ABI_STREAM stream = NULL;

  ncclResult_t (*allReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            ABI_STREAM) = ncclAllReduce;
  ncclResult_t (*initRankConfig)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*) =
      pncclCommInitRankConfig;
  ncclResult_t (*alltoallv)(const void*, const size_t*, const size_t*, void*, const size_t*,
                            const size_t*, ncclDataType_t, ncclComm_t, ABI_STREAM) =
      ncclAlltoAllv;
  ncclResult_t (*putSignal)(const void*, size_t, ncclDataType_t, int, ncclWindow_t, size_t, int,
                            int, unsigned int, ncclComm_t, ABI_STREAM) = ncclPutSignal;
  ncclResult_t (*groupStart)(void) = ncclGroupStart;
  const char* (*lastError)(ncclComm_t) = ncclGetLastError;
  ncclResult_t (*paramGetU64)(ncclParamHandle_t, uint64_t*) = ncclParamGetU64;
  void (*paramDumpAll)(void) = ncclParamDumpAll;
  ncclResult_t (*runAlgo)(const void*, const size_t*, const size_t*, void*, const size_t*,
                          const size_t*, size_t, ncclDataType_t, int, int, ncclRedOp_t,
                          mscclAlgoHandle_t, ncclComm_t, ABI_STREAM) = pmscclRunAlgo;
#ifdef NCCL_OS_LINUX
  /* Deprecated (both names), so naming it warns: silence that for this one type check. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  void (*resetDebugInit)(void) = pncclResetDebugInit;
#pragma GCC diagnostic pop
#else
  ncclResetDebugInit(); /* without NCCL_OS_LINUX this is an empty macro, as upstream */
#endif

  (void)config; (void)sim; (void)desc; (void)comm; (void)win; (void)param; (void)algo;
  (void)stream; (void)allReduce; (void)initRankConfig; (void)alltoallv; (void)putSignal;
  (void)groupStart; (void)lastError; (void)paramGetU64; (void)paramDumpAll; (void)runAlgo;
#ifdef NCCL_OS_LINUX
  (void)resetDebugInit;
#endif
#if ABI_C_HEADER == 4
  {
    ncclResult_t (*stats)(ncclComm_t, tempoSkewStats_t*, float*) = tempoCommGetSkewStats;
    ncclResult_t (*setPacing)(ncclComm_t, tempoPacingMode_t) = tempoCommSetPacing;
    ncclResult_t (*setPeriod)(ncclComm_t, int) = tempoCommSetIterationPeriod;
    tempoSkewStats_t s = {0};
    (void)stats; (void)setPacing; (void)setPeriod; (void)s;
  }
#endif
  return config.magic == NCCL_API_MAGIC && sim.magic == 0x74685283u ? 0 : 1;
}
