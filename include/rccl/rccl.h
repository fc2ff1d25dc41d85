/*
 * rccl/rccl.h -- the public API of Tempo's librccl.so.1.
 *
 * Tempo is a drop-in replacement for AMD's RCCL, so this header declares the RCCL/NCCL C API
 * at the level given by NCCL_VERSION_CODE, with the same names, enumeration values, struct
 * layouts and function signatures: a program compiled against the RCCL header runs against
 * Tempo unchanged, and one compiled against this header runs against RCCL. Every function has
 * a profiling twin with a 'p' prefix (pncclAllReduce, pmscclRunAlgo) and the same signature;
 * a PMPI-style interposer defines ncclX and forwards to pncclX.
 *
 * This is plain C (C99 or later) and C++ (C++11 or later). Under hipcc, or when HIP is enabled
 * (__HIP_PLATFORM_AMD__ / __HIP_PLATFORM_NVIDIA__), hipStream_t is HIP's own type; otherwise
 * it is declared here exactly as HIP declares it, so CPU-only code compiles and the ABI is the
 * same either way.
 *
 * Conventions that hold for every function below unless its comment says otherwise:
 *  - The return value is an ncclResult_t; after a failure, ncclGetLastError() describes why.
 *    Output parameters are written only on success.
 *  - Counts are numbers of elements of the given datatype, never bytes.
 *  - Collective and point-to-point calls are asynchronous with respect to the host: they return
 *    once the operation is enqueued on `stream`, and the buffers must stay valid until the
 *    stream has executed it. Inside ncclGroupStart/ncclGroupEnd they are only recorded, and
 *    ncclGroupEnd enqueues them all.
 *  - On a nonblocking communicator (ncclConfig_t.blocking = 0) any call that would otherwise
 *    wait may return ncclInProgress instead. The operation then continues in the background;
 *    poll ncclCommGetAsyncError(comm) until it reports something other than ncclInProgress
 *    before using the result or issuing the next call on that communicator.
 */
#ifndef NCCL_H_
#define NCCL_H_

#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__) || defined(__HIP_PLATFORM_NVIDIA__)
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#elif !defined(HIP_INCLUDE_HIP_HIP_RUNTIME_API_H)
/* Without HIP, hipStream_t is declared exactly as HIP declares it (so C++ code mangles the same
 * as in HIP builds). Skipped when HIP's header is already in: C99 forbids repeating a typedef. */
typedef struct ihipStream_t* hipStream_t;
#endif

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/* ---- Version ---------------------------------------------------------------------------- */
/* The NCCL API level Tempo implements (RCCL reuses NCCL's numbering). Keep these four lines in
 * this exact form: the top-level CMakeLists.txt reads them with a regex. */
#define NCCL_MAJOR 2
#define NCCL_MINOR 30
#define NCCL_PATCH 4
#define NCCL_SUFFIX ""

/* A literal rather than an expression, because build scripts grep for it too; the ABI tests
 * check that it equals NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH). */
#define NCCL_VERSION_CODE 23004
/* Up to 2.8 the code had one digit for the minor number (2.8.4 = 2804); later codes have two
 * (2.30.7 = 23007). */
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

/* ---- RCCL feature-test macros (applications #ifdef these) ------------------------------- */
#define RCCL_BFLOAT16 1            /* ncclBfloat16 */
#define RCCL_FLOAT8 1              /* ncclFloat8e4m3 / ncclFloat8e5m2 (alias ncclFp8E4M3/E5M2) */
#define RCCL_GATHER_SCATTER 1      /* ncclGather, ncclScatter */
#define RCCL_ALLTOALLV 1           /* ncclAlltoAllv */
#define RCCL_ALLREDUCE_WITH_BIAS 1 /* ncclAllReduceWithBias */
#define RCCL_SUSPEND_RESUME 1      /* ncclCommSuspend, ncclCommResume, ncclCommMemStats */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Handles and identifiers ------------------------------------------------------------ */

/* A communicator: one rank's membership in a group of ranks. Opaque. */
typedef struct ncclComm* ncclComm_t;
/* A registered memory window (ncclCommWindowRegister). Opaque. */
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_COMM_NULL NULL

/* The rendezvous token produced by ncclGetUniqueId and handed, by value, to every rank of the
 * new communicator. Its content is private to the library; copy it as bytes. */
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* ---- Result codes ----------------------------------------------------------------------- */
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1, /* a HIP (or CUDA) runtime call failed */
  ncclSystemError = 2,        /* an OS or network call failed, or memory ran out */
  ncclInternalError = 3,      /* a bug in the library */
  ncclInvalidArgument = 4,    /* a bad value was passed (bad pointer, count, rank, ...) */
  ncclInvalidUsage = 5,       /* a call was made in the wrong state or order */
  ncclRemoteError = 6,        /* a peer exited or the network failed */
  ncclInProgress = 7,         /* a nonblocking operation has not finished yet */
  ncclTimeout = 8,            /* an operation did not finish in the allowed time */
  ncclNumResults = 9
} ncclResult_t;

/* ---- Constants -------------------------------------------------------------------------- */
/* "Not set" markers for ncclConfig_t fields: the library picks the value. */
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
/* ncclCommSplit color for ranks that join no new communicator. */
#define NCCL_SPLIT_NOCOLOR -1
/* "Not set" marker for float fields (ncclSimInfo_t.estimatedTime). */
#define NCCL_UNDEF_FLOAT -1.0f

/* Stamped into ncclConfig_t by NCCL_CONFIG_INITIALIZER; proves the struct was initialised. */
#define NCCL_API_MAGIC 0xcafebeef

/* ncclCommWindowRegister flags. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01  /* every rank registers a buffer of the same size */
#define NCCL_WIN_STRICT_ORDERING 0x02 /* operations on the window complete in issue order */
/* Alignment, in bytes, that a window's buffer must have. */
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* ncclConfig_t.CTAPolicy values. */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01 /* fewer compute units, same bandwidth where possible */
#define NCCL_CTA_POLICY_ZERO 0x02       /* avoid occupying compute units where possible */

/* ncclCommShrink flags. */
#define NCCL_SHRINK_DEFAULT 0x00 /* the parent is healthy: drain it, then shrink */
#define NCCL_SHRINK_ABORT 0x01   /* the parent may be broken: abort its pending work first */

/* ncclCommRevoke flags (only the default exists). */
#define NCCL_REVOKE_DEFAULT 0x00

/* ncclCommSuspend flags. */
#define NCCL_SUSPEND_MEM 0x01 /* release the device memory the communicator can rebuild */

/* ---- Communicator configuration --------------------------------------------------------- */
/* Options for ncclCommInitRankConfig, ncclCommSplit and friends. Always start from
 * NCCL_CONFIG_INITIALIZER and then set only the fields you care about: the library reads
 * `size` and `version` to accept structs built against older headers, checks `magic`, and
 * treats every field still at NCCL_CONFIG_UNDEF_* as "choose for me". Fields are only ever
 * appended, never reordered. */
typedef struct ncclConfig_v23000 {
  /* Set by NCCL_CONFIG_INITIALIZER; do not change. */
  size_t size;
  unsigned int magic;
  unsigned int version;
  /* User-settable. */
  int blocking;            /* 0: calls may return ncclInProgress (see top of file); 1: block */
  int cgaClusterSize;      /* thread-block cluster size for the library's kernels */
  int minCTAs;             /* lower bound on the kernel blocks (channels) used per operation */
  int maxCTAs;             /* upper bound on the same */
  const char* netName;     /* force a network backend by name, e.g. "Socket" */
  int splitShare;          /* 1: children made by ncclCommSplit share the parent's resources */
  int trafficClass;        /* network traffic class for this communicator's traffic */
  const char* commName;    /* a name shown in logs and traces */
  int collnetEnable;       /* 1: allow in-network reduction (CollNet) */
  int CTAPolicy;           /* NCCL_CTA_POLICY_* */
  int shrinkShare;         /* 1: children made by ncclCommShrink share the parent's resources */
  int nvlsCTAs;            /* block count for NVLink-SHARP style algorithms */
  int nChannelsPerNetPeer; /* channels used per remote peer over the network */
  int nvlinkCentricSched;  /* prefer scheduling around intra-node links */
  int graphUsageMode;      /* hint about how the communicator is used in stream graphs */
  int numRmaCtx;           /* number of one-sided (RMA) contexts: valid ctx are 0..n-1 */
  int maxP2pPeers;         /* cap on peers a rank keeps point-to-point connections to */
  int graphStreamOrdering; /* ordering of captured operations relative to the stream */
} ncclConfig_t;

/* The only correct way to initialise an ncclConfig_t. */
#define NCCL_CONFIG_INITIALIZER {                    \
  sizeof(ncclConfig_t),    /* size */                \
  NCCL_API_MAGIC,          /* magic */               \
  NCCL_VERSION_CODE,       /* version */             \
  NCCL_CONFIG_UNDEF_INT,   /* blocking */            \
  NCCL_CONFIG_UNDEF_INT,   /* cgaClusterSize */      \
  NCCL_CONFIG_UNDEF_INT,   /* minCTAs */             \
  NCCL_CONFIG_UNDEF_INT,   /* maxCTAs */             \
  NCCL_CONFIG_UNDEF_PTR,   /* netName */             \
  NCCL_CONFIG_UNDEF_INT,   /* splitShare */          \
  NCCL_CONFIG_UNDEF_INT,   /* trafficClass */        \
  NCCL_CONFIG_UNDEF_PTR,   /* commName */            \
  NCCL_CONFIG_UNDEF_INT,   /* collnetEnable */       \
  NCCL_CONFIG_UNDEF_INT,   /* CTAPolicy */           \
  NCCL_CONFIG_UNDEF_INT,   /* shrinkShare */         \
  NCCL_CONFIG_UNDEF_INT,   /* nvlsCTAs */            \
  NCCL_CONFIG_UNDEF_INT,   /* nChannelsPerNetPeer */ \
  NCCL_CONFIG_UNDEF_INT,   /* nvlinkCentricSched */  \
  NCCL_CONFIG_UNDEF_INT,   /* graphUsageMode */      \
  NCCL_CONFIG_UNDEF_INT,   /* numRmaCtx */           \
  NCCL_CONFIG_UNDEF_INT,   /* maxP2pPeers */         \
  NCCL_CONFIG_UNDEF_INT,   /* graphStreamOrdering */ \
}

/* Result of ncclGroupSimulateEnd. Initialise with NCCL_SIM_INFO_INITIALIZER. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime; /* modelled duration of the group, in microseconds */
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER                                                            \
  { sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION_CODE, NCCL_UNDEF_FLOAT }

/* ---- Datatypes and reduction operators -------------------------------------------------- */

/* Only used to size ncclMaxRedOp below: it has the size of any enum of small values. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;

/* Built-in reductions are 0..ncclNumOps-1. Values from ncclNumOps up to ncclMaxRedOp are
 * handles created by ncclRedOpCreatePreMulSum. ncclMaxRedOp is the largest value that keeps the
 * enum the size it always had (compilers may make enums signed, hence 0x7f... not 0xff...). */
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4, /* sum divided by the number of ranks */
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

/* Element types. The fp8 entries have two spellings: NCCL's and RCCL's older one. Their bit
 * encoding follows the device: FNUZ on gfx942 (MI300), OCP on gfx950. */
typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFp8E4M3 = 10,
  ncclFloat8e5m2 = 11,
  ncclFp8E5M2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* Where the scalar of ncclRedOpCreatePreMulSum lives, and so when it is read. */
typedef enum {
  ncclScalarDevice = 0,       /* device memory, read each time a collective using the op runs */
  ncclScalarHostImmediate = 1 /* host memory, read once before ncclRedOpCreatePreMulSum returns */
} ncclScalarResidence_t;

/* Counters readable with ncclCommMemStats. */
typedef enum {
  ncclStatGpuMemSuspend = 0,   /* bytes of device memory that ncclCommSuspend can release */
  ncclStatGpuMemSuspended = 1, /* 1 while the communicator is suspended, else 0 */
  ncclStatGpuMemPersist = 2,   /* bytes of device memory that stay allocated while suspended */
  ncclStatGpuMemTotal = 3      /* all device memory the communicator holds, in bytes */
} ncclCommMemStat_t;

/* One entry of the array passed to ncclWaitSignal. */
typedef struct {
  int opCnt;  /* how many signals to wait for */
  int peer;   /* the rank they come from */
  int sigIdx; /* the signal slot they target */
  int ctx;    /* the RMA context they use */
} ncclWaitSignalDesc_t;

/* ---- Version and unique id -------------------------------------------------------------- */

/* Stores the library's NCCL_VERSION_CODE in *version. Compare it with the header's to detect a
 * mismatched runtime. */
ncclResult_t ncclGetVersion(int* version);
ncclResult_t pncclGetVersion(int* version);

/* Creates a fresh id for a new communicator. Call it on one rank only and distribute the result
 * to all ranks (out of band) before they call ncclCommInitRank*. */
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId);

/* ---- Communicator creation and teardown ------------------------------------------------- */

/* Joins rank `rank` (0..nranks-1) of the communicator identified by commId, using the device
 * current on the calling thread. It waits for the other ranks, so either call it from one
 * thread or process per rank, or wrap several calls in ncclGroupStart/ncclGroupEnd. */
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);

/* As ncclCommInitRank, with options (config may be NULL for defaults). With config->blocking = 0
 * it may return ncclInProgress while *comm is already set: poll ncclCommGetAsyncError(*comm). */
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
    ncclConfig_t* config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
    ncclConfig_t* config);

/* As ncclCommInitRankConfig, but rendezvous is spread over nId ids (commIds[0..nId-1]) to speed
 * up very large jobs. Every rank must pass the same ids in the same order. */
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
    ncclUniqueId* commIds, ncclConfig_t* config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
    ncclUniqueId* commIds, ncclConfig_t* config);

/* Creates, in one process, a communicator of ndev ranks: rank i uses device devlist[i] (or
 * device i when devlist is NULL) and is stored in comm[i], which must hold ndev handles. */
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);

/* Completes all operations issued on comm and releases what it shares with its peers, so that
 * ncclCommDestroy can then free the rest without waiting. On a nonblocking communicator it
 * returns ncclInProgress until the peers are done; poll ncclCommGetAsyncError. */
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);

/* Frees this rank's communicator. Call ncclCommFinalize first; without it, destroy finalizes
 * implicitly and may wait for the peers. The handle is invalid afterwards. */
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);

/* Cancels whatever comm still has in flight and frees it without waiting for the peers. This is
 * the way out after an error or a timeout; the handle is invalid afterwards. */
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);

/* Stops comm's in-flight operations and makes it reject new ones, while keeping it usable as
 * the parent of ncclCommSplit/Shrink/Grow and for destroy/abort (finalize is then invalid).
 * revokeFlags must be NCCL_REVOKE_DEFAULT. Outputs of revoked operations are undefined. */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);

/* Collective over comm: ranks passing the same color form a new communicator, ordered by key
 * (ties by old rank). color NCCL_SPLIT_NOCOLOR yields *newcomm = NULL. config NULL inherits
 * comm's configuration. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
    ncclConfig_t* config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
    ncclConfig_t* config);

/* Creates a communicator of comm's ranks minus the excludeRanksCount ranks listed in
 * excludeRanksList; survivors keep their relative order. Excluded ranks do not call it.
 * shrinkFlags is an NCCL_SHRINK_* value; config NULL inherits comm's configuration. */
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
    ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
    ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);

/* Produces the single-use id that ncclCommGrow needs to admit new ranks into comm. Only one id
 * may be outstanding per communicator at a time. */
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);

/* Creates a communicator of nRanks ranks from comm plus newcomers. Existing ranks pass comm and
 * rank -1 (the one that made the id also passes it, the others NULL); newcomers pass comm NULL,
 * the id and their assigned rank. The id is consumed. */
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
    ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
    ncclComm_t* newcomm, ncclConfig_t* config);

/* Releases the resources selected by flags (NCCL_SUSPEND_*). The communicator must be idle and
 * may not be used again until ncclCommResume. */
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags);

/* Reacquires what ncclCommSuspend released; the communicator is usable again afterwards. */
ncclResult_t ncclCommResume(ncclComm_t comm);
ncclResult_t pncclCommResume(ncclComm_t comm);

/* Stores the memory counter `stat` of comm in *value (see ncclCommMemStat_t). */
ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);
ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);

/* ---- Errors and queries ----------------------------------------------------------------- */

/* A short, static, human-readable description of a result code. Never NULL. */
const char* ncclGetErrorString(ncclResult_t result);
const char* pncclGetErrorString(ncclResult_t result);

/* The message describing the calling thread's most recent error ("" if none). comm may be NULL.
 * The string stays valid until the thread's next library call. */
const char* ncclGetLastError(ncclComm_t comm);
const char* pncclGetLastError(ncclComm_t comm);

#ifdef NCCL_OS_LINUX
/* Re-reads the logging environment (NCCL_DEBUG, NCCL_DEBUG_SUBSYS, NCCL_DEBUG_FILE). Not part
 * of the supported API; as upstream, it is declared only when NCCL_OS_LINUX is defined and is a
 * no-op macro otherwise. The library always exports it for binaries that call it. */
__attribute__((deprecated("ncclResetDebugInit is not supported as part of the NCCL API and "
                          "will be removed in the future")))
void ncclResetDebugInit(void);
__attribute__((deprecated("pncclResetDebugInit is not supported as part of the NCCL API and "
                          "will be removed in the future")))
void pncclResetDebugInit(void);
#else
#define ncclResetDebugInit()
#define pncclResetDebugInit()
#endif

/* Stores in *asyncError the communicator's state: ncclSuccess, ncclInProgress while a
 * nonblocking operation is still running, or the error that broke it (after which it can only
 * be aborted). Safe to call from any thread at any time; this is the poll for ncclInProgress. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);

/* Stores the number of ranks in comm in *count. */
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count);

/* Stores in *device the HIP device index this rank of comm uses. */
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device);

/* Stores this rank's index within comm (0..count-1) in *rank. */
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank);

/* ---- Memory and registration ------------------------------------------------------------ */

/* Allocates size bytes of device memory suited to every transport (the allocation may be
 * rounded up). Free it with ncclMemFree. */
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t pncclMemAlloc(void** ptr, size_t size);

/* Frees memory obtained from ncclMemAlloc. */
ncclResult_t ncclMemFree(void* ptr);
ncclResult_t pncclMemFree(void* ptr);

/* Registers [buff, buff+size) with comm so operations on it can avoid staging copies; *handle
 * identifies the registration. Purely an optimisation: unregistered buffers work too. */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);

/* Undoes ncclCommRegister. No operation using the buffer may still be pending. */
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle);

/* Collective over comm: each rank exposes [buff, buff+size) as a window that peers can target
 * with one-sided operations (ncclPutSignal). winFlags is a mask of NCCL_WIN_*; buff and size
 * must respect NCCL_WIN_REQUIRED_ALIGNMENT. */
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
    int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
    int winFlags);

/* Collective over comm: releases a window. No operation targeting it may still be pending. */
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/* Stores in *outUserPtr the local buffer address that win was registered with. */
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);
ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);

/* ---- Custom reduction operators --------------------------------------------------------- */

/* Creates in *op a reduction that multiplies each rank's input by *scalar (of type datatype)
 * and then sums. The op is valid only on comm and for that datatype; residence says when the
 * scalar is read. */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
    ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
    ncclScalarResidence_t residence, ncclComm_t comm);

/* Destroys an op made by ncclRedOpCreatePreMulSum on the same comm. Allowed as soon as the last
 * call that was given the op has returned, even if the operation itself is still queued. */
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* ---- Collectives (every rank of comm calls them in the same order) ---------------------- */

/* Reduces count elements across ranks with op and writes the result to every rank's recvbuff.
 * In place when sendbuff == recvbuff. */
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, hipStream_t stream);
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, hipStream_t stream);

/* As ncclAllReduce, with the count-element bias array acc also combined into the result with
 * op. In place when sendbuff == recvbuff. */
ncclResult_t ncclAllReduceWithBias(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, hipStream_t stream,
    const void* acc);
ncclResult_t pncclAllReduceWithBias(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, hipStream_t stream,
    const void* acc);

/* Copies count elements from sendbuff on rank root to recvbuff on every rank. sendbuff is only
 * read on root. In place when sendbuff == recvbuff. */
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, int root, ncclComm_t comm, hipStream_t stream);
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, int root, ncclComm_t comm, hipStream_t stream);

/* Legacy in-place broadcast: buff on root is copied into buff on every other rank. */
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
    ncclComm_t comm, hipStream_t stream);
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
    ncclComm_t comm, hipStream_t stream);

/* Reduces count elements across ranks with op into recvbuff on rank root only (recvbuff may be
 * NULL elsewhere). In place when sendbuff == recvbuff. */
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, hipStream_t stream);
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, hipStream_t stream);

/* Every rank contributes sendcount elements; recvbuff (nranks*sendcount elements) receives
 * rank i's block at offset i*sendcount on every rank. In place when
 * sendbuff == recvbuff + rank*sendcount. */
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
    ncclDataType_t datatype, ncclComm_t comm, hipStream_t stream);
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
    ncclDataType_t datatype, ncclComm_t comm, hipStream_t stream);

/* Reduces nranks*recvcount elements across ranks with op; rank i receives block i (recvcount
 * elements) of the result. In place when recvbuff == sendbuff + rank*recvcount. */
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
    ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, hipStream_t stream);
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
    ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, hipStream_t stream);

/* Each rank sends block j (count elements at sendbuff + j*count) to rank j, which stores it at
 * recvbuff + i*count, i being the sender. Both buffers hold nranks*count elements; in-place
 * operation (sendbuff == recvbuff) is not supported. */
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, ncclComm_t comm, hipStream_t stream);
ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, ncclComm_t comm, hipStream_t stream);

/* RCCL's original name for ncclAlltoAll, kept for existing code and binaries. */
ncclResult_t ncclAllToAll(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, ncclComm_t comm, hipStream_t stream)
    __attribute__((deprecated("ncclAllToAll is replaced with ncclAlltoAll and will be removed "
                              "in the future")));
ncclResult_t pncclAllToAll(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, ncclComm_t comm, hipStream_t stream);

/* Variable all-to-all: rank i sends sendcounts[j] elements from sendbuff + sdispls[j] to rank
 * j, and receives recvcounts[j] elements from rank j into recvbuff + rdispls[j]. All four arrays
 * have nranks entries, in elements. In place when sendbuff == recvbuff. */
ncclResult_t ncclAlltoAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
    void* recvbuff, const size_t recvcounts[], const size_t rdispls[], ncclDataType_t datatype,
    ncclComm_t comm, hipStream_t stream);
ncclResult_t pncclAlltoAllv(const void* sendbuff, const size_t sendcounts[],
    const size_t sdispls[], void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
    ncclDataType_t datatype, ncclComm_t comm, hipStream_t stream);

/* RCCL's original name for ncclAlltoAllv, kept for existing code and binaries. */
ncclResult_t ncclAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
    void* recvbuff, const size_t recvcounts[], const size_t rdispls[], ncclDataType_t datatype,
    ncclComm_t comm, hipStream_t stream)
    __attribute__((deprecated("ncclAllToAllv is replaced with ncclAlltoAllv and will be removed "
                              "in the future")));
ncclResult_t pncclAllToAllv(const void* sendbuff, const size_t sendcounts[],
    const size_t sdispls[], void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
    ncclDataType_t datatype, ncclComm_t comm, hipStream_t stream);

/* Every rank sends count elements to root, which stores rank i's block at recvbuff + i*count
 * (recvbuff is unused elsewhere). In place when sendbuff == recvbuff + root*count. */
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, int root, ncclComm_t comm, hipStream_t stream);
ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, int root, ncclComm_t comm, hipStream_t stream);

/* Root sends block i (count elements at sendbuff + i*count) to rank i's recvbuff (sendbuff is
 * unused elsewhere). In place when recvbuff == sendbuff + root*count. */
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, int root, ncclComm_t comm, hipStream_t stream);
ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, int root, ncclComm_t comm, hipStream_t stream);

/* ---- Point-to-point --------------------------------------------------------------------- */

/* Sends count elements to rank peer, which must post a matching ncclRecv. The stream waits for
 * the transfer, so sends and receives that depend on each other must share one group. */
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
    ncclComm_t comm, hipStream_t stream);
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
    ncclComm_t comm, hipStream_t stream);

/* Receives count elements from rank peer, which must post a matching ncclSend (same count and
 * datatype). Group rules as for ncclSend. */
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
    ncclComm_t comm, hipStream_t stream);
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
    ncclComm_t comm, hipStream_t stream);

/* ---- One-sided (RMA) -------------------------------------------------------------------- */

/* Writes count elements from localbuff into peer's window peerWin at byte offset peerWinOffset
 * and then raises signal sigIdx on peer, in RMA context ctx; the peer takes no part beyond
 * waiting for the signal with ncclWaitSignal. flags is reserved and must be 0. */
ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
    ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
    ncclComm_t comm, hipStream_t stream);
ncclResult_t pncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype,
    int peer, ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
    ncclComm_t comm, hipStream_t stream);

/* Raises signal sigIdx on peer in RMA context ctx without moving any data. flags is reserved
 * and must be 0. */
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
    hipStream_t stream);
ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
    hipStream_t stream);

/* Makes the stream wait until, for each of the nDesc descriptors, opCnt signals have arrived
 * from its peer on its signal slot and context; data put along with them is then visible. */
ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
    hipStream_t stream);
ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
    hipStream_t stream);

/* ---- Groups ----------------------------------------------------------------------------- */

/* Opens a group: until the matching ncclGroupEnd, collective, point-to-point and
 * ncclCommInitRank* calls are only recorded, so one thread can drive several ranks and
 * interdependent sends/receives can proceed together. Groups nest; only the outermost end acts. */
ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);

/* Closes a group and launches everything recorded in it. Returns once the work is enqueued on
 * its streams, not when it is done; on nonblocking communicators it may return ncclInProgress
 * (poll ncclCommGetAsyncError on each communicator involved). */
ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);

/* Closes a group like ncclGroupEnd but runs nothing: it fills simInfo (initialised with
 * NCCL_SIM_INFO_INITIALIZER) with the library's model estimate of how long the group takes. */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

/* ---- Parameters (NCCL_* / RCCL_* / TEMPO_* settings) ------------------------------------ */

/* An opaque reference to one library parameter, owned by the library (never freed). */
typedef struct ncclParamHandle* ncclParamHandle_t;

/* Finds the parameter named key (e.g. "NCCL_DEBUG") and stores a handle to it in *out. */
ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char* key);
ncclResult_t pncclParamBind(ncclParamHandle_t* out, const char* key);

/* Read the parameter's effective value as a signed integer of 8, 16, 32 or 64 bits; fails if
 * the value is not a number or does not fit. */
ncclResult_t ncclParamGetI8(ncclParamHandle_t h, int8_t* out);
ncclResult_t pncclParamGetI8(ncclParamHandle_t h, int8_t* out);
ncclResult_t ncclParamGetI16(ncclParamHandle_t h, int16_t* out);
ncclResult_t pncclParamGetI16(ncclParamHandle_t h, int16_t* out);
ncclResult_t ncclParamGetI32(ncclParamHandle_t h, int32_t* out);
ncclResult_t pncclParamGetI32(ncclParamHandle_t h, int32_t* out);
ncclResult_t ncclParamGetI64(ncclParamHandle_t h, int64_t* out);
ncclResult_t pncclParamGetI64(ncclParamHandle_t h, int64_t* out);

/* The same, as an unsigned integer of 8, 16, 32 or 64 bits. */
ncclResult_t ncclParamGetU8(ncclParamHandle_t h, uint8_t* out);
ncclResult_t pncclParamGetU8(ncclParamHandle_t h, uint8_t* out);
ncclResult_t ncclParamGetU16(ncclParamHandle_t h, uint16_t* out);
ncclResult_t pncclParamGetU16(ncclParamHandle_t h, uint16_t* out);
ncclResult_t ncclParamGetU32(ncclParamHandle_t h, uint32_t* out);
ncclResult_t pncclParamGetU32(ncclParamHandle_t h, uint32_t* out);
ncclResult_t ncclParamGetU64(ncclParamHandle_t h, uint64_t* out);
ncclResult_t pncclParamGetU64(ncclParamHandle_t h, uint64_t* out);

/* The parameter's value as text, in *out. The string belongs to the library and stays valid
 * until this thread's next ncclParamGetStr call. */
ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char** out);
ncclResult_t pncclParamGetStr(ncclParamHandle_t h, const char** out);

/* Copies the parameter's raw value (at most maxLen bytes) into out and stores the number of
 * bytes written in *len. */
ncclResult_t ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len);
ncclResult_t pncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len);

/* Looks a parameter up by name and returns its value as text in *value (length in *valueLen).
 * The string belongs to the library and stays valid until this thread's next call of it. */
ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen);
ncclResult_t pncclParamGetParameter(const char* key, const char** value, int* valueLen);

/* Returns the names of the documented parameters (all of them when NCCL_PARAM_DUMP_ALL is set)
 * as an array in *table of *tableLen strings, valid until this thread's next call of it. */
ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen);
ncclResult_t pncclParamGetAllParameterKeys(const char*** table, int* tableLen);

/* Logs every parameter with its value (the same selection as ncclParamGetAllParameterKeys). */
void ncclParamDumpAll(void);
void pncclParamDumpAll(void);

/* ---- MSCCL (RCCL only) ------------------------------------------------------------------ */
/* RCCL's former custom-algorithm path; RCCL made these no-ops and Tempo keeps them so that
 * binaries linked against them still load. Normally called by an MSCCL scheduler, not users. */

/* Identifies a loaded MSCCL algorithm. */
typedef int mscclAlgoHandle_t;

/* Loads the algorithm described by the file at mscclAlgoFilePath for rank and stores its handle
 * in *mscclAlgoHandle. */
ncclResult_t mscclLoadAlgo(const char* mscclAlgoFilePath, mscclAlgoHandle_t* mscclAlgoHandle,
    int rank);
ncclResult_t pmscclLoadAlgo(const char* mscclAlgoFilePath, mscclAlgoHandle_t* mscclAlgoHandle,
    int rank);

/* Runs a loaded algorithm. The parameters are the union of what any collective needs; the
 * algorithm uses the ones that apply to it. */
ncclResult_t mscclRunAlgo(const void* sendBuff, const size_t sendCounts[], const size_t sDisPls[],
    void* recvBuff, const size_t recvCounts[], const size_t rDisPls[], size_t count,
    ncclDataType_t dataType, int root, int peer, ncclRedOp_t op, mscclAlgoHandle_t mscclAlgoHandle,
    ncclComm_t comm, hipStream_t stream);
ncclResult_t pmscclRunAlgo(const void* sendBuff, const size_t sendCounts[],
    const size_t sDisPls[], void* recvBuff, const size_t recvCounts[], const size_t rDisPls[],
    size_t count, ncclDataType_t dataType, int root, int peer, ncclRedOp_t op,
    mscclAlgoHandle_t mscclAlgoHandle, ncclComm_t comm, hipStream_t stream);

/* Releases an algorithm loaded by mscclLoadAlgo. */
ncclResult_t mscclUnloadAlgo(mscclAlgoHandle_t mscclAlgoHandle);
ncclResult_t pmscclUnloadAlgo(mscclAlgoHandle_t mscclAlgoHandle);

#ifdef __cplusplus
}  // extern "C"
#endif

/* ---- C++ only (RCCL) -------------------------------------------------------------------- */
#ifdef __cplusplus
#include <string>
#include <unordered_map>

/* Defined because applications test it before calling ncclCommDump. */
#define NCCL_COMM_DUMP

/* Fills map with key/value strings describing comm's internal state, for debugging hangs. It
 * has C++ linkage (its parameter is a C++ type), as in RCCL, and therefore no 'p' twin. */
ncclResult_t ncclCommDump(ncclComm_t comm, std::unordered_map<std::string, std::string>& map);
#endif

#endif /* NCCL_H_ */
