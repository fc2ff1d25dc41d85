// What an application can ask of the library without running a collective, through the
// public API: the parameter API (ncclParamBind and friends), a group's predicted time
// (ncclGroupSimulateEnd), and RCCL's leftover MSCCL entry points.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/core/param.h"
#include "tests/coll/coll_fixture.h"

namespace tempo::testing {
namespace {

// Sets a parameter for the duration of a test.
struct ScopedParam {
  ScopedParam(param::Id id, const char* value) : id(id) { param::overrideForTest(id, value); }
  ~ScopedParam() { param::overrideForTest(id, nullptr); }
  param::Id id;
};

ncclParamHandle_t bind(const char* key) {
  ncclParamHandle_t h = nullptr;
  EXPECT_EQ(ncclParamBind(&h, key), ncclSuccess) << key << ": " << ncclGetLastError(nullptr);
  return h;
}

// ---- The parameter API ----

TEST(ParamApi, EveryKeyListedBindsAndReadsTheValueInEffect) {
  const char** keys = nullptr;
  int n = 0;
  ASSERT_EQ(ncclParamGetAllParameterKeys(&keys, &n), ncclSuccess);
  ASSERT_EQ(n, int(param::Id::Count));
  for (int i = 0; i < n; ++i) {
    const param::Entry e = param::entry(param::Id(i));
    ASSERT_STREQ(keys[i], e.name);
    ncclParamHandle_t h = bind(keys[i]);
    const char* text = nullptr;
    ASSERT_EQ(ncclParamGetStr(h, &text), ncclSuccess);
    EXPECT_EQ(std::string(text), e.value) << keys[i];
    const char* byKey = nullptr;
    int len = -1;
    ASSERT_EQ(ncclParamGetParameter(keys[i], &byKey, &len), ncclSuccess);
    EXPECT_EQ(std::string(byKey), e.value) << keys[i];
    EXPECT_EQ(len, int(e.value.size()));
    if (e.kind == param::Kind::Int) {
      int64_t v = 0;
      ASSERT_EQ(ncclParamGetI64(h, &v), ncclSuccess) << keys[i];
      EXPECT_EQ(v, e.number) << keys[i];
    }
  }
}

TEST(ParamApi, TypedGettersReadIntParametersThatFitAndRefuseTheRest) {
  ScopedParam set(param::Id::ShmEager, "300");
  ncclParamHandle_t h = bind("TEMPO_SHM_EAGER");
  int16_t i16 = 0;
  uint32_t u32 = 0;
  int8_t i8 = 0;
  uint8_t u8 = 0;
  ASSERT_EQ(ncclParamGetI16(h, &i16), ncclSuccess);
  EXPECT_EQ(i16, 300);
  ASSERT_EQ(ncclParamGetU32(h, &u32), ncclSuccess);
  EXPECT_EQ(u32, 300u);
  EXPECT_NCCL_ERROR(ncclParamGetI8(h, &i8), ncclInvalidArgument, "300, which does not fit in int8_t");
  EXPECT_NCCL_ERROR(ncclParamGetU8(h, &u8), ncclInvalidArgument, "does not fit in uint8_t");
  EXPECT_EQ(i8, 0);  // untouched

  ScopedParam negative(param::Id::ShmEager, "-1");
  uint64_t u64 = 7;
  int32_t i32 = 0;
  EXPECT_NCCL_ERROR(ncclParamGetU64(h, &u64), ncclInvalidArgument, "-1, which does not fit in uint64_t");
  EXPECT_EQ(u64, 7u);
  ASSERT_EQ(ncclParamGetI32(h, &i32), ncclSuccess);
  EXPECT_EQ(i32, -1);

  // A string parameter has no integer to give.
  EXPECT_NCCL_ERROR(ncclParamGetI32(bind("NCCL_DEBUG"), &i32), ncclInvalidArgument,
                    "NCCL_DEBUG is a string parameter");
}

TEST(ParamApi, UnknownKeysAndForeignHandlesAreRefused) {
  ncclParamHandle_t h = reinterpret_cast<ncclParamHandle_t>(uintptr_t(0x1234));
  EXPECT_NCCL_ERROR(ncclParamBind(&h, "NCCL_NO_SUCH_THING"), ncclInvalidArgument, "no parameter is named");
  EXPECT_EQ(h, reinterpret_cast<ncclParamHandle_t>(uintptr_t(0x1234)));  // *out left as it was
  EXPECT_NCCL_ERROR(ncclParamBind(&h, nullptr), ncclInvalidArgument, "key is NULL");
  EXPECT_NCCL_ERROR(ncclParamBind(nullptr, "NCCL_DEBUG"), ncclInvalidArgument, "out is NULL");

  int64_t v = 0;
  const char* s = nullptr;
  EXPECT_NCCL_ERROR(ncclParamGetI64(h, &v), ncclInvalidArgument, "not a handle from ncclParamBind");
  EXPECT_NCCL_ERROR(ncclParamGetStr(nullptr, &s), ncclInvalidArgument, "not a handle from ncclParamBind");
  EXPECT_NCCL_ERROR(ncclParamGetI64(bind("NCCL_BUFFSIZE"), nullptr), ncclInvalidArgument, "out is NULL");

  const char* value = "x";
  int len = 5;
  EXPECT_NCCL_ERROR(ncclParamGetParameter("NCCL_NO_SUCH_THING", &value, &len), ncclInvalidArgument,
                    "no parameter is named");
  EXPECT_EQ(value, nullptr);
  EXPECT_EQ(len, 0);
}

TEST(ParamApi, RawValuesAreTheIntegerOrTheStringWithItsNulAndSayHowMuchRoomTheyNeed) {
  ScopedParam level(param::Id::Debug, "WARN");
  ScopedParam buff(param::Id::BuffSize, "0x10000");
  char out[16] = {};
  int len = 0;
  ncclParamHandle_t debug = bind("NCCL_DEBUG");
  EXPECT_NCCL_ERROR(ncclParamGet(debug, out, 4, &len), ncclInvalidArgument, "needs 5 bytes, maxLen is 4");
  EXPECT_EQ(len, 5);
  ASSERT_EQ(ncclParamGet(debug, out, sizeof out, &len), ncclSuccess);
  EXPECT_EQ(len, 5);
  EXPECT_STREQ(out, "WARN");

  int64_t n = 0;
  ASSERT_EQ(ncclParamGet(bind("NCCL_BUFFSIZE"), &n, sizeof n, &len), ncclSuccess);
  EXPECT_EQ(len, int(sizeof n));
  EXPECT_EQ(n, 0x10000);
  EXPECT_NCCL_ERROR(ncclParamGet(debug, out, sizeof out, nullptr), ncclInvalidArgument, "len is NULL");
}

TEST(ParamApi, TheSecretNeverLeavesTheTable) {
  const char* kSecret = "correct horse battery staple";
  ScopedParam secret(param::Id::Secret, kSecret);
  ncclParamHandle_t h = bind("TEMPO_SECRET");
  const char* s = nullptr;
  ASSERT_EQ(ncclParamGetStr(h, &s), ncclSuccess);
  EXPECT_EQ(std::string(s).find("horse"), std::string::npos) << s;
  int len = 0;
  ASSERT_EQ(ncclParamGetParameter("TEMPO_SECRET", &s, &len), ncclSuccess);
  EXPECT_EQ(std::string(s).find("horse"), std::string::npos) << s;
  char raw[128] = {};
  ASSERT_EQ(ncclParamGet(h, raw, sizeof raw, &len), ncclSuccess);
  EXPECT_EQ(std::string(raw, size_t(len)).find("horse"), std::string::npos);

  ::testing::internal::CaptureStdout();
  ncclParamDumpAll();
  const std::string dump = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(dump.find("horse"), std::string::npos);
  EXPECT_NE(dump.find("TEMPO_SECRET=(set, not shown)"), std::string::npos) << dump;
}

TEST(ParamApi, DumpAllPrintsEveryParameterWithItsSource) {
  ScopedParam level(param::Id::Debug, "WARN");
  ::testing::internal::CaptureStdout();
  ncclParamDumpAll();
  const std::string dump = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(dump.find("NCCL_DEBUG=WARN (override)"), std::string::npos) << dump;
  for (int i = 0; i < int(param::Id::Count); ++i)
    EXPECT_NE(dump.find(std::string("\n") + param::entry(param::Id(i)).name + "="), std::string::npos);
}

// ---- ncclGroupSimulateEnd ----

class Simulate : public SharedWorldTest {
 protected:
  // Each rank all-reduces `calls` times `count` floats inside one simulated group, from
  // this thread; returns the status and fills `info`.
  static ncclResult_t simulateAllReduces(size_t count, int calls, ncclSimInfo_t* info) {
    std::vector<std::vector<float>> bufs(2, std::vector<float>(count, 1.0f));
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    for (int k = 0; k < calls; ++k)
      for (int r = 0; r < 2; ++r)
        EXPECT_EQ(ncclAllReduce(bufs[r].data(), bufs[r].data(), count, ncclFloat, ncclSum, (*world_)[r], nullptr),
                  ncclSuccess);
    const ncclResult_t res = ncclGroupSimulateEnd(info);
    for (auto& b : bufs)
      for (float x : b) EXPECT_EQ(x, 1.0f);  // nothing ran
    return res;
  }
  static float estimate(size_t count, int calls = 1) {
    ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
    EXPECT_EQ(simulateAllReduces(count, calls, &info), ncclSuccess) << ncclGetLastError(nullptr);
    return info.estimatedTime;
  }
  // A real all-reduce on both ranks, checked: the communicators are still in step.
  static void expectRealAllReduceWorks() {
    std::vector<std::vector<float>> bufs = {{1, 2, 3}, {10, 20, 30}};
    ASSERT_EQ(world_->inGroup([&](int r) {
      return ncclAllReduce(bufs[r].data(), bufs[r].data(), 3, ncclFloat, ncclSum, (*world_)[r], nullptr);
    }),
              ncclSuccess);
    for (auto& b : bufs) EXPECT_EQ(b, (std::vector<float>{11, 22, 33}));
  }
};

TEST_F(Simulate, AGroupIsCostedNotRunAndTheCommunicatorsStayInStep) {
  const float us = estimate(1024);
  EXPECT_GT(us, 0.0f);
  EXPECT_NE(us, NCCL_UNDEF_FLOAT);
  expectRealAllReduceWorks();
}

TEST_F(Simulate, TheEstimateGrowsWithSizeAndAddsUpOverOneCommunicatorsCalls) {
  const float small = estimate(256), large = estimate(1 << 20);
  EXPECT_GT(large, small);
  EXPECT_NEAR(estimate(1 << 20, 3), 3 * large, 1e-3 * large);
}

TEST_F(Simulate, CommunicatorsProgressTogetherSoTheLongestCounts) {
  CommWorld other(2, "loopback");
  ASSERT_TRUE(other.ok()) << other.error();
  std::vector<float> a(1 << 20), b(16);
  auto simulate = [&](bool first, bool second) {
    ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < 2; ++r) {
      if (first) {
        EXPECT_EQ(ncclAllGather(a.data(), a.data(), 1024, ncclFloat, (*world_)[r], nullptr), ncclSuccess);
      }
      if (second) {
        EXPECT_EQ(ncclBroadcast(b.data(), b.data(), 16, ncclFloat, 0, other[r], nullptr), ncclSuccess);
      }
    }
    EXPECT_EQ(ncclGroupSimulateEnd(&info), ncclSuccess);
    return info.estimatedTime;
  };
  const float gather = simulate(true, false), bcast = simulate(false, true);
  EXPECT_GT(gather, 0.0f);
  EXPECT_GT(bcast, 0.0f);
  EXPECT_FLOAT_EQ(simulate(true, true), std::max(gather, bcast));
}

TEST_F(Simulate, PointToPointCallsAreCostedTogether) {
  std::vector<float> s(4096), r(4096);
  auto simulate = [&](size_t count, int pairs) {
    ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    for (int k = 0; k < pairs; ++k)
      for (int rank = 0; rank < 2; ++rank) {
        EXPECT_EQ(ncclSend(s.data(), count, ncclFloat, 1 - rank, (*world_)[rank], nullptr), ncclSuccess);
        EXPECT_EQ(ncclRecv(r.data(), count, ncclFloat, 1 - rank, (*world_)[rank], nullptr), ncclSuccess);
      }
    EXPECT_EQ(ncclGroupSimulateEnd(&info), ncclSuccess);
    return info.estimatedTime;
  };
  const float one = simulate(1024, 1);
  EXPECT_GT(one, 0.0f);
  // Two pairs of 1024 floats cost what one pair of 2048 does: one latency, twice the bytes.
  EXPECT_FLOAT_EQ(simulate(1024, 2), simulate(2048, 1));
  EXPECT_GT(simulate(2048, 1), one);
  expectRealAllReduceWorks();
}

TEST_F(Simulate, AnEmptyGroupLeavesTheTimeUndefinedAndNestedEndsCloseOneLevel) {
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclGroupSimulateEnd(&info), ncclSuccess);
  EXPECT_EQ(info.estimatedTime, NCCL_UNDEF_FLOAT);

  // The inner end closes its level only; the outer one costs the calls.
  std::vector<float> buf(64, 1.0f);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), 64, ncclFloat, ncclSum, (*world_)[r], nullptr), ncclSuccess);
  EXPECT_EQ(ncclGroupSimulateEnd(&info), ncclSuccess);
  EXPECT_EQ(info.estimatedTime, NCCL_UNDEF_FLOAT);
  EXPECT_EQ(ncclGroupSimulateEnd(&info), ncclSuccess);
  EXPECT_GT(info.estimatedTime, 0.0f);
  for (float x : buf) EXPECT_EQ(x, 1.0f);
  expectRealAllReduceWorks();
}

TEST_F(Simulate, ASimInfoNotMadeByTheInitializerAbandonsTheGroup) {
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  info.magic = 0;
  EXPECT_NCCL_ERROR(simulateAllReduces(16, 1, &info), ncclInvalidArgument, "NCCL_SIM_INFO_INITIALIZER");
  EXPECT_EQ(info.estimatedTime, NCCL_UNDEF_FLOAT);
  EXPECT_NCCL_ERROR(ncclGroupEnd(), ncclInvalidUsage, "without a matching ncclGroupStart");  // it was closed
  expectRealAllReduceWorks();

  // A size that stops before estimatedTime: the rest is neither read nor written.
  ncclSimInfo_t shortInfo = NCCL_SIM_INFO_INITIALIZER;
  shortInfo.size = offsetof(ncclSimInfo_t, estimatedTime);
  EXPECT_EQ(simulateAllReduces(16, 1, &shortInfo), ncclSuccess);
  EXPECT_EQ(shortInfo.estimatedTime, NCCL_UNDEF_FLOAT);
  // Too small even for the magic: not an initialised struct.
  shortInfo.size = sizeof(size_t);
  EXPECT_NCCL_ERROR(simulateAllReduces(16, 1, &shortInfo), ncclInvalidArgument, "NCCL_SIM_INFO_INITIALIZER");
}

TEST_F(Simulate, WithoutSimInfoTheGroupRunsAsNcclGroupEndRunsIt) {
  std::vector<std::vector<float>> bufs = {{1, 2}, {3, 4}};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(ncclAllReduce(bufs[r].data(), bufs[r].data(), 2, ncclFloat, ncclSum, (*world_)[r], nullptr),
              ncclSuccess);
  ASSERT_EQ(ncclGroupSimulateEnd(nullptr), ncclSuccess);
  for (auto& b : bufs) EXPECT_EQ(b, (std::vector<float>{4, 6}));
}

TEST_F(Simulate, OutsideAGroupItIsMisuse) {
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_NCCL_ERROR(ncclGroupSimulateEnd(&info), ncclInvalidUsage,
                    "ncclGroupSimulateEnd called without a matching ncclGroupStart");
}

// ---- ncclCommDump ----

TEST(CommDump, NamesTheCommunicatorAsRcclDoesAndSaysWhereItStands) {
  CommWorld world(3, "loopback");
  ASSERT_TRUE(world.ok()) << world.error();
  std::unordered_map<std::string, std::string> before;
  ASSERT_EQ(ncclCommDump(world[1], before), ncclSuccess);
  EXPECT_EQ(before["rank"], "1");
  EXPECT_EQ(before["nRanks"], "3");
  EXPECT_EQ(before["nNodes"], "1");
  EXPECT_EQ(before["node"], "0");
  EXPECT_EQ(before["localRank"], "1");
  EXPECT_EQ(before["localRanks"], "3");
  EXPECT_EQ(before["opCount"], "0");
  EXPECT_EQ(before["asyncError"], "no error");
  EXPECT_EQ(before["ring"], "0 1 2");
  ASSERT_EQ(before["commHash"].size(), 18u);  // 16 hex digits in quotes, as RCCL's
  EXPECT_EQ(before["commHash"].front(), '"');

  // Two collectives and one group of point-to-point calls: three operations.
  std::vector<std::vector<float>> bufs(3, std::vector<float>(8, 1.0f));
  for (int k = 0; k < 2; ++k)
    ASSERT_EQ(world.inGroup([&](int r) {
      return ncclAllReduce(bufs[r].data(), bufs[r].data(), 8, ncclFloat, ncclSum, world[r], nullptr);
    }),
              ncclSuccess);
  ASSERT_EQ(world.inGroup([&](int r) {
    ncclResult_t a = ncclSend(bufs[r].data(), 4, ncclFloat, (r + 1) % 3, world[r], nullptr);
    ncclResult_t b = ncclRecv(bufs[r].data() + 4, 4, ncclFloat, (r + 2) % 3, world[r], nullptr);
    return a != ncclSuccess ? a : b;
  }),
            ncclSuccess);
  std::unordered_map<std::string, std::string> after;
  ASSERT_EQ(ncclCommDump(world[1], after), ncclSuccess);
  EXPECT_EQ(after["opCount"], "3");
  EXPECT_EQ(after["commHash"], before["commHash"]);

  std::unordered_map<std::string, std::string> none;
  EXPECT_EQ(ncclCommDump(nullptr, none), ncclSuccess);  // as RCCL: nothing to dump
  EXPECT_TRUE(none.empty());
}

// ---- MSCCL, removed from RCCL in 2.28.3 ----

TEST(Msccl, LoadAndUnloadHaveNoEffectAndRunIsRefusedRatherThanFaked) {
  mscclAlgoHandle_t h = 42;
  EXPECT_EQ(mscclLoadAlgo("/nonexistent/algo.xml", &h, 0), ncclSuccess);
  EXPECT_EQ(h, 0);
  float buf[4] = {1, 2, 3, 4};
  EXPECT_NCCL_ERROR(mscclRunAlgo(buf, nullptr, nullptr, buf, nullptr, nullptr, 4, ncclFloat, 0, 0, ncclSum, h,
                                 nullptr, nullptr),
                    ncclInvalidUsage, "MSCCL was removed from RCCL");
  EXPECT_EQ(mscclUnloadAlgo(h), ncclSuccess);
}

}  // namespace
}  // namespace tempo::testing
