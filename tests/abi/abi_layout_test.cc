// The ABI facts of include/rccl/rccl.h (reference/rccl-abi.md sections 1.2-1.5): enum values,
// constants, version arithmetic, struct sizes and offsets, initializers and every function's
// signature. Programs compiled against RCCL's header must see exactly these, so most checks
// are static_asserts (a drift breaks the build); the gtest cases repeat the key ones so they
// show up, with values, in test reports.
#include "rccl/rccl.h"

#include <gtest/gtest.h>

#include <climits>
#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>
#include <unordered_map>

namespace {

// ---- version ----
static_assert(NCCL_MAJOR == 2 && NCCL_MINOR == 30 && NCCL_PATCH == 4);
static_assert(NCCL_VERSION(2, 30, 7) == 23007);
static_assert(NCCL_VERSION(2, 21, 5) == 22105);
static_assert(NCCL_VERSION(2, 8, 4) == 2804);
static_assert(NCCL_VERSION_CODE == NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH));
// Applications compare versions in #if, so the macros must work in the preprocessor too.
#if NCCL_VERSION_CODE != 23004 || NCCL_VERSION(2, 8, 4) != 2804
#error "NCCL_VERSION / NCCL_VERSION_CODE are not usable in #if"
#endif

// ---- feature-test macros: defined, and to 1 ----
#if !defined(RCCL_BFLOAT16) || !defined(RCCL_FLOAT8) || !defined(RCCL_GATHER_SCATTER) || \
    !defined(RCCL_ALLTOALLV) || !defined(RCCL_ALLREDUCE_WITH_BIAS) || !defined(RCCL_SUSPEND_RESUME)
#error "an RCCL feature-test macro is missing"
#endif
static_assert(RCCL_BFLOAT16 == 1 && RCCL_FLOAT8 == 1 && RCCL_GATHER_SCATTER == 1 &&
              RCCL_ALLTOALLV == 1 && RCCL_ALLREDUCE_WITH_BIAS == 1 && RCCL_SUSPEND_RESUME == 1);
#ifndef NCCL_COMM_DUMP
#error "NCCL_COMM_DUMP must be defined for C++"
#endif

// ---- ncclResult_t ----
static_assert(ncclSuccess == 0 && ncclUnhandledCudaError == 1 && ncclSystemError == 2 &&
              ncclInternalError == 3 && ncclInvalidArgument == 4 && ncclInvalidUsage == 5 &&
              ncclRemoteError == 6 && ncclInProgress == 7 && ncclTimeout == 8 &&
              ncclNumResults == 9);
static_assert(sizeof(ncclResult_t) == sizeof(int));

// ---- ncclDataType_t, both fp8 spellings ----
static_assert(ncclInt8 == 0 && ncclChar == 0 && ncclUint8 == 1 && ncclInt32 == 2 && ncclInt == 2 &&
              ncclUint32 == 3 && ncclInt64 == 4 && ncclUint64 == 5 && ncclFloat16 == 6 &&
              ncclHalf == 6 && ncclFloat32 == 7 && ncclFloat == 7 && ncclFloat64 == 8 &&
              ncclDouble == 8 && ncclBfloat16 == 9 && ncclFloat8e4m3 == 10 &&
              ncclFloat8e5m2 == 11 && ncclNumTypes == 12);
static_assert(ncclFp8E4M3 == ncclFloat8e4m3 && ncclFp8E5M2 == ncclFloat8e5m2);
static_assert(std::is_same_v<decltype(ncclFp8E4M3), ncclDataType_t>);
static_assert(sizeof(ncclDataType_t) == sizeof(int));

// ---- ncclRedOp_t ----
static_assert(ncclSum == 0 && ncclProd == 1 && ncclMax == 2 && ncclMin == 3 && ncclAvg == 4 &&
              ncclNumOps == 5 && ncclNumOps_dummy == 5);
static_assert(ncclMaxRedOp == 0x7fffffff);
static_assert(sizeof(ncclRedOp_t) == sizeof(int) && sizeof(ncclRedOp_dummy_t) == sizeof(int));

// ---- other enums ----
static_assert(ncclScalarDevice == 0 && ncclScalarHostImmediate == 1);
static_assert(ncclStatGpuMemSuspend == 0 && ncclStatGpuMemSuspended == 1 &&
              ncclStatGpuMemPersist == 2 && ncclStatGpuMemTotal == 3);

// ---- constants (section 1.3) ----
static_assert(NCCL_UNIQUE_ID_BYTES == 128);
static_assert(NCCL_SPLIT_NOCOLOR == -1);
static_assert(NCCL_CONFIG_UNDEF_INT == INT_MIN);
static_assert(NCCL_UNDEF_FLOAT == -1.0f);
static_assert(std::is_same_v<decltype(NCCL_UNDEF_FLOAT), float>);
static_assert(NCCL_API_MAGIC == 0xcafebeef);
static_assert(NCCL_WIN_DEFAULT == 0x00 && NCCL_WIN_COLL_SYMMETRIC == 0x01 &&
              NCCL_WIN_STRICT_ORDERING == 0x02 && NCCL_WIN_REQUIRED_ALIGNMENT == 4096);
static_assert(NCCL_CTA_POLICY_DEFAULT == 0x00 && NCCL_CTA_POLICY_EFFICIENCY == 0x01 &&
              NCCL_CTA_POLICY_ZERO == 0x02);
static_assert(NCCL_SHRINK_DEFAULT == 0x00 && NCCL_SHRINK_ABORT == 0x01);
static_assert(NCCL_REVOKE_DEFAULT == 0x00 && NCCL_SUSPEND_MEM == 0x01);

// ---- handle types ----
static_assert(std::is_same_v<ncclComm_t, ncclComm*>);
static_assert(std::is_same_v<ncclWindow_t, ncclWindow_vidmem*>);
static_assert(std::is_same_v<ncclParamHandle_t, ncclParamHandle*>);
static_assert(std::is_same_v<hipStream_t, ihipStream_t*>);  // HIP's own spelling
static_assert(std::is_same_v<mscclAlgoHandle_t, int>);

// ---- ncclUniqueId: 128 opaque bytes, passed by value ----
static_assert(sizeof(ncclUniqueId) == 128 && alignof(ncclUniqueId) == 1);
static_assert(std::is_same_v<decltype(ncclUniqueId::internal), char[NCCL_UNIQUE_ID_BYTES]>);

// ---- ncclConfig_t (section 1.4, x86-64 / LP64) ----
static_assert(std::is_same_v<ncclConfig_t, ncclConfig_v23000>);
static_assert(std::is_standard_layout_v<ncclConfig_t>);
#if defined(__LP64__)
static_assert(sizeof(ncclConfig_t) == 96);
static_assert(offsetof(ncclConfig_t, size) == 0);
static_assert(offsetof(ncclConfig_t, magic) == 8);
static_assert(offsetof(ncclConfig_t, version) == 12);
static_assert(offsetof(ncclConfig_t, blocking) == 16);
static_assert(offsetof(ncclConfig_t, cgaClusterSize) == 20);
static_assert(offsetof(ncclConfig_t, minCTAs) == 24);
static_assert(offsetof(ncclConfig_t, maxCTAs) == 28);
static_assert(offsetof(ncclConfig_t, netName) == 32);
static_assert(offsetof(ncclConfig_t, splitShare) == 40);
static_assert(offsetof(ncclConfig_t, trafficClass) == 44);
static_assert(offsetof(ncclConfig_t, commName) == 48);
static_assert(offsetof(ncclConfig_t, collnetEnable) == 56);
static_assert(offsetof(ncclConfig_t, CTAPolicy) == 60);
static_assert(offsetof(ncclConfig_t, shrinkShare) == 64);
static_assert(offsetof(ncclConfig_t, nvlsCTAs) == 68);
static_assert(offsetof(ncclConfig_t, nChannelsPerNetPeer) == 72);
static_assert(offsetof(ncclConfig_t, nvlinkCentricSched) == 76);
static_assert(offsetof(ncclConfig_t, graphUsageMode) == 80);
static_assert(offsetof(ncclConfig_t, numRmaCtx) == 84);
static_assert(offsetof(ncclConfig_t, maxP2pPeers) == 88);
static_assert(offsetof(ncclConfig_t, graphStreamOrdering) == 92);

// ---- ncclSimInfo_t, ncclWaitSignalDesc_t ----
static_assert(std::is_same_v<ncclSimInfo_t, ncclSimInfo_v22200>);
static_assert(sizeof(ncclSimInfo_t) == 24);
static_assert(offsetof(ncclSimInfo_t, size) == 0 && offsetof(ncclSimInfo_t, magic) == 8 &&
              offsetof(ncclSimInfo_t, version) == 12 &&
              offsetof(ncclSimInfo_t, estimatedTime) == 16);
#endif
static_assert(std::is_same_v<decltype(ncclConfig_t::size), size_t>);
static_assert(std::is_same_v<decltype(ncclConfig_t::magic), unsigned int>);
static_assert(std::is_same_v<decltype(ncclConfig_t::netName), const char*>);
static_assert(std::is_same_v<decltype(ncclConfig_t::commName), const char*>);
static_assert(std::is_same_v<decltype(ncclSimInfo_t::estimatedTime), float>);
static_assert(sizeof(ncclWaitSignalDesc_t) == 16);
static_assert(offsetof(ncclWaitSignalDesc_t, opCnt) == 0 &&
              offsetof(ncclWaitSignalDesc_t, peer) == 4 &&
              offsetof(ncclWaitSignalDesc_t, sigIdx) == 8 &&
              offsetof(ncclWaitSignalDesc_t, ctx) == 12);

// ---- every function and its twin: exact type (reference/rccl-abi.md section 1.5) ----
// Top-level const on a parameter (const ncclComm_t) is not part of a function type, so it
// cannot be checked here; everything else is.
using R = ncclResult_t;
using S = hipStream_t;
using C = ncclComm_t;
using Id = ncclUniqueId;
using Cfg = ncclConfig_t;
using T = ncclDataType_t;
using Op = ncclRedOp_t;
using Win = ncclWindow_t;
using P = ncclParamHandle_t;

#define SIG(name, ...)                                                          \
  static_assert(std::is_same_v<decltype(name), __VA_ARGS__>, #name);            \
  static_assert(std::is_same_v<decltype(p##name), __VA_ARGS__>, "p" #name)

// The deprecated aliases are named only inside decltype; that is not a use worth a warning.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
SIG(ncclGetVersion, R(int*));
SIG(ncclGetUniqueId, R(Id*));
SIG(ncclCommInitRank, R(C*, int, Id, int));
SIG(ncclCommInitRankConfig, R(C*, int, Id, int, Cfg*));
SIG(ncclCommInitRankScalable, R(C*, int, int, int, Id*, Cfg*));
SIG(ncclCommInitAll, R(C*, int, const int*));
SIG(ncclCommFinalize, R(C));
SIG(ncclCommDestroy, R(C));
SIG(ncclCommAbort, R(C));
SIG(ncclCommRevoke, R(C, int));
SIG(ncclCommSplit, R(C, int, int, C*, Cfg*));
SIG(ncclCommShrink, R(C, int*, int, C*, Cfg*, int));
SIG(ncclCommGetUniqueId, R(C, Id*));
SIG(ncclCommGrow, R(C, int, const Id*, int, C*, Cfg*));
SIG(ncclCommSuspend, R(C, int));
SIG(ncclCommResume, R(C));
SIG(ncclCommMemStats, R(C, ncclCommMemStat_t, uint64_t*));
SIG(ncclGetErrorString, const char*(R));
SIG(ncclGetLastError, const char*(C));
SIG(ncclCommGetAsyncError, R(C, R*));
SIG(ncclCommCount, R(C, int*));
SIG(ncclCommCuDevice, R(C, int*));
SIG(ncclCommUserRank, R(C, int*));
SIG(ncclMemAlloc, R(void**, size_t));
SIG(ncclMemFree, R(void*));
SIG(ncclCommRegister, R(C, void*, size_t, void**));
SIG(ncclCommDeregister, R(C, void*));
SIG(ncclCommWindowRegister, R(C, void*, size_t, Win*, int));
SIG(ncclCommWindowDeregister, R(C, Win));
SIG(ncclWinGetUserPtr, R(C, Win, void**));
SIG(ncclRedOpCreatePreMulSum, R(Op*, void*, T, ncclScalarResidence_t, C));
SIG(ncclRedOpDestroy, R(Op, C));
SIG(ncclAllReduce, R(const void*, void*, size_t, T, Op, C, S));
SIG(ncclAllReduceWithBias, R(const void*, void*, size_t, T, Op, C, S, const void*));
SIG(ncclBroadcast, R(const void*, void*, size_t, T, int, C, S));
SIG(ncclBcast, R(void*, size_t, T, int, C, S));
SIG(ncclReduce, R(const void*, void*, size_t, T, Op, int, C, S));
SIG(ncclAllGather, R(const void*, void*, size_t, T, C, S));
SIG(ncclReduceScatter, R(const void*, void*, size_t, T, Op, C, S));
SIG(ncclAlltoAll, R(const void*, void*, size_t, T, C, S));
SIG(ncclAllToAll, R(const void*, void*, size_t, T, C, S));
SIG(ncclAlltoAllv, R(const void*, const size_t*, const size_t*, void*, const size_t*,
                     const size_t*, T, C, S));
SIG(ncclAllToAllv, R(const void*, const size_t*, const size_t*, void*, const size_t*,
                     const size_t*, T, C, S));
SIG(ncclGather, R(const void*, void*, size_t, T, int, C, S));
SIG(ncclScatter, R(const void*, void*, size_t, T, int, C, S));
SIG(ncclSend, R(const void*, size_t, T, int, C, S));
SIG(ncclRecv, R(void*, size_t, T, int, C, S));
SIG(ncclPutSignal, R(const void*, size_t, T, int, Win, size_t, int, int, unsigned int, C, S));
SIG(ncclSignal, R(int, int, int, unsigned int, C, S));
SIG(ncclWaitSignal, R(int, ncclWaitSignalDesc_t*, C, S));
SIG(ncclGroupStart, R());
SIG(ncclGroupEnd, R());
SIG(ncclGroupSimulateEnd, R(ncclSimInfo_t*));
SIG(ncclParamBind, R(P*, const char*));
SIG(ncclParamGetI8, R(P, int8_t*));
SIG(ncclParamGetI16, R(P, int16_t*));
SIG(ncclParamGetI32, R(P, int32_t*));
SIG(ncclParamGetI64, R(P, int64_t*));
SIG(ncclParamGetU8, R(P, uint8_t*));
SIG(ncclParamGetU16, R(P, uint16_t*));
SIG(ncclParamGetU32, R(P, uint32_t*));
SIG(ncclParamGetU64, R(P, uint64_t*));
SIG(ncclParamGetStr, R(P, const char**));
SIG(ncclParamGet, R(P, void*, int, int*));
SIG(ncclParamGetParameter, R(const char*, const char**, int*));
SIG(ncclParamGetAllParameterKeys, R(const char***, int*));
SIG(ncclParamDumpAll, void());
SIG(mscclLoadAlgo, R(const char*, mscclAlgoHandle_t*, int));
SIG(mscclRunAlgo, R(const void*, const size_t*, const size_t*, void*, const size_t*,
                    const size_t*, size_t, T, int, int, Op, mscclAlgoHandle_t, C, S));
SIG(mscclUnloadAlgo, R(mscclAlgoHandle_t));
#pragma GCC diagnostic pop
// C++ linkage and no twin, as in RCCL.
static_assert(std::is_same_v<decltype(ncclCommDump),
                             R(C, std::unordered_map<std::string, std::string>&)>);
#undef SIG

TEST(AbiLayout, VersionArithmetic) {
  EXPECT_EQ(NCCL_VERSION(2, 30, 7), 23007);
  EXPECT_EQ(NCCL_VERSION(2, 21, 5), 22105);
  EXPECT_EQ(NCCL_VERSION(2, 8, 4), 2804);
  EXPECT_EQ(NCCL_VERSION_CODE, 23004);
  EXPECT_STREQ(NCCL_SUFFIX, "");
}

TEST(AbiLayout, EnumValues) {
  EXPECT_EQ(ncclTimeout, 8);
  EXPECT_EQ(ncclNumResults, 9);
  EXPECT_EQ(ncclNumTypes, 12);
  EXPECT_EQ(ncclFp8E4M3, 10);
  EXPECT_EQ(ncclFp8E5M2, 11);
  EXPECT_EQ(ncclFp8E4M3, ncclFloat8e4m3);
  EXPECT_EQ(ncclFp8E5M2, ncclFloat8e5m2);
  EXPECT_EQ(ncclNumOps, 5);
  EXPECT_EQ(static_cast<long long>(ncclMaxRedOp), 0x7fffffffLL);
}

TEST(AbiLayout, Sizes) {
  EXPECT_EQ(sizeof(ncclUniqueId), 128u);
#if defined(__LP64__)
  EXPECT_EQ(sizeof(ncclConfig_t), 96u);
  EXPECT_EQ(offsetof(ncclConfig_t, commName), 48u);
  EXPECT_EQ(offsetof(ncclConfig_t, graphStreamOrdering), 92u);
#endif
  EXPECT_EQ(sizeof(ncclWaitSignalDesc_t), 16u);
}

TEST(AbiLayout, ConfigInitializer) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  EXPECT_EQ(c.size, sizeof(ncclConfig_t));
  EXPECT_EQ(c.magic, 0xcafebeefu);
  EXPECT_EQ(c.version, static_cast<unsigned>(NCCL_VERSION_CODE));
  EXPECT_EQ(c.netName, nullptr);
  EXPECT_EQ(c.commName, nullptr);
  const int ints[] = {c.blocking, c.cgaClusterSize, c.minCTAs, c.maxCTAs, c.splitShare,
                      c.trafficClass, c.collnetEnable, c.CTAPolicy, c.shrinkShare, c.nvlsCTAs,
                      c.nChannelsPerNetPeer, c.nvlinkCentricSched, c.graphUsageMode,
                      c.numRmaCtx, c.maxP2pPeers, c.graphStreamOrdering};
  // 16 int fields: every int field of the struct (its size less the header and two pointers).
  static_assert(sizeof ints / sizeof ints[0] ==
                (sizeof(ncclConfig_t) - offsetof(ncclConfig_t, blocking) - 2 * sizeof(char*)) /
                    sizeof(int));
  for (int v : ints) EXPECT_EQ(v, INT_MIN);
}

TEST(AbiLayout, SimInfoInitializer) {
  ncclSimInfo_t s = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(s.size, sizeof(ncclSimInfo_t));
  EXPECT_EQ(s.magic, 0x74685283u);
  EXPECT_EQ(s.version, static_cast<unsigned>(NCCL_VERSION_CODE));
  EXPECT_EQ(s.estimatedTime, -1.0f);
}

TEST(AbiLayout, Constants) {
  // Both are NULL: usable wherever a handle or a string pointer goes.
  ncclComm_t nullComm = NCCL_COMM_NULL;
  const char* undefPtr = NCCL_CONFIG_UNDEF_PTR;
  EXPECT_EQ(nullComm, nullptr);
  EXPECT_EQ(undefPtr, nullptr);
  EXPECT_EQ(NCCL_CONFIG_UNDEF_INT, INT_MIN);
  EXPECT_EQ(NCCL_SPLIT_NOCOLOR, -1);
  EXPECT_EQ(NCCL_API_MAGIC, 0xcafebeefu);
  EXPECT_EQ(NCCL_WIN_REQUIRED_ALIGNMENT, 4096);
}

TEST(AbiLayout, UniqueIdIsPlainBytes) {
  // Passed by value between processes as raw bytes: copying must preserve it exactly.
  ncclUniqueId a;
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; ++i) a.internal[i] = static_cast<char>(i * 7);
  ncclUniqueId b = a;
  EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0);
  static_assert(std::is_trivially_copyable_v<ncclUniqueId>);
}

TEST(AbiLayout, ResetDebugInitIsANoOpMacroWithoutNcclOsLinux) {
  // As upstream: applications that do not define NCCL_OS_LINUX get an empty macro.
#ifndef NCCL_OS_LINUX
  ncclResetDebugInit();
  pncclResetDebugInit();
  SUCCEED();
#else
  GTEST_SKIP() << "NCCL_OS_LINUX is defined for this build";
#endif
}

}  // namespace
