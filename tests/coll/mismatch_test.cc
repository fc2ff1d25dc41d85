// Mismatch detection (reliability scenarios M1/M2): a rank that calls a different
// collective, count, datatype, op or root than the others gets ncclInvalidUsage, never a
// hang, and the error names the field, both values and both ranks. The ranks next to it in
// the ring detect it inside that collective; the others fail in it too, or -- when their
// part of the data had already completed -- in their very next call, with the same code
// and message (NCCL's asynchronous-error model).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/coll/coll_fixture.h"

namespace tempo::testing {
namespace {

constexpr int kRanks = 4;
constexpr int kOdd = 2;  // the rank that calls something else
constexpr size_t kCount = 4096;

struct Outcome {
  std::vector<ncclResult_t> res;
  std::vector<std::string> msg;
};

// Runs call(rank, buffers) on every rank of a fresh world; collects results and messages.
// A rank whose call succeeded learns of the failure from its next call, or -- with
// `pollAsync` -- from ncclCommGetAsyncError, polled as a nonblocking user would.
Outcome run(const std::function<ncclResult_t(int, ncclComm_t, float*, float*)>& call, const char* transport = "loopback",
            bool pollAsync = false) {
  CommWorld w(kRanks, transport);
  EXPECT_TRUE(w.ok()) << w.error();
  if (!w.ok()) return {};
  std::vector<std::vector<float>> in(kRanks, std::vector<float>(kCount * kRanks, 1.0f)),
      out(kRanks, std::vector<float>(kCount * kRanks, 0.0f));
  Outcome o;
  o.msg.resize(kRanks);
  o.res = w.onThreads([&](int r) {
    ncclResult_t e = call(r, w[r], in[size_t(r)].data(), out[size_t(r)].data());
    if (e == ncclSuccess && pollAsync) {
      for (int i = 0; i < 1000 && e == ncclSuccess; ++i) {  // bounded: 10 s at most
        ncclResult_t async = ncclSuccess;
        if (ncclCommGetAsyncError(w[r], &async) != ncclSuccess) return ncclInternalError;
        e = async;
        if (e == ncclSuccess) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    } else if (e == ncclSuccess) {  // learn of the failure on the next call
      float x = 0;
      e = ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, w[r], nullptr);
    }
    o.msg[size_t(r)] = ncclGetLastError(w[r]);
    return e;
  });
  return o;
}

void expectEveryRankFails(const Outcome& o, const std::string& needle) {
  ASSERT_EQ(o.res.size(), size_t(kRanks));
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(o.res[size_t(r)], ncclInvalidUsage) << "rank " << r << ": " << o.msg[size_t(r)];
    EXPECT_NE(o.msg[size_t(r)].find(needle), std::string::npos) << "rank " << r << ": " << o.msg[size_t(r)];
  }
}

TEST(Mismatch, CountDiffersOnOneRank) {
  Outcome o = run([](int r, ncclComm_t c, float* in, float* out) {
    return ncclAllReduce(in, out, r == kOdd ? kCount / 2 : kCount, ncclFloat32, ncclSum, c, nullptr);
  });
  expectEveryRankFails(o, "field count is");
  // The detecting rank names both values and both ranks.
  bool named = false;
  for (const std::string& m : o.msg)
    named |= m.find("4096 on rank") != std::string::npos && m.find("2048 on rank") != std::string::npos;
  EXPECT_TRUE(named) << o.msg[kOdd + 1];
}

TEST(Mismatch, DatatypeDiffersOnOneRank) {
  Outcome o = run([](int r, ncclComm_t c, float* in, float* out) {
    return ncclAllReduce(in, out, kCount, r == kOdd ? ncclInt32 : ncclFloat32, ncclSum, c, nullptr);
  });
  expectEveryRankFails(o, "field datatype is");
}

TEST(Mismatch, OpDiffersOnOneRank) {
  Outcome o = run([](int r, ncclComm_t c, float* in, float* out) {
    return ncclReduceScatter(in, out, kCount, ncclFloat32, r == kOdd ? ncclMax : ncclSum, c, nullptr);
  });
  expectEveryRankFails(o, "field op is");
}

TEST(Mismatch, RanksThatFinishedLearnOfItFromGetAsyncError) {
  Outcome o = run(
      [](int r, ncclComm_t c, float* in, float* out) {
        return ncclAllReduce(in, out, kCount, ncclFloat32, r == kOdd ? ncclMin : ncclSum, c, nullptr);
      },
      "loopback", /*pollAsync=*/true);
  expectEveryRankFails(o, "field op is");
}

TEST(Mismatch, RootDiffersOnOneRank) {
  Outcome o = run([](int r, ncclComm_t c, float* in, float* out) {
    return ncclBroadcast(in, out, kCount, ncclFloat32, r == kOdd ? 1 : 0, c, nullptr);
  });
  expectEveryRankFails(o, "field root is");
}

TEST(Mismatch, CollectiveDiffersOnOneRank) {
  Outcome o = run([](int r, ncclComm_t c, float* in, float* out) {
    return r == kOdd ? ncclAllGather(in, out, kCount, ncclFloat32, c, nullptr)
                     : ncclAllReduce(in, out, kCount, ncclFloat32, ncclSum, c, nullptr);
  });
  expectEveryRankFails(o, "field collective is");
}

// Over libfabric as well. (tcp: with several ranks in one process, libfabric's shm provider
// maps peers that live in the same process directly, so one rank closing its endpoint on
// failure pulls memory from under the others; Tempo never uses shm between ranks of one
// process unless forced to, as this fixture does.)
TEST(Mismatch, DetectedOverLibfabricToo) {
  Outcome o = run(
      [](int r, ncclComm_t c, float* in, float* out) {
        return ncclAllReduce(in, out, r == kOdd ? kCount - 1 : kCount, ncclFloat32, ncclSum, c, nullptr);
      },
      "tcp");
  expectEveryRankFails(o, "field count is");
}

// Matching calls are untouched by the check, and TEMPO_CHECK_MISMATCH=0 turns it off.
TEST(Mismatch, MatchingCallsSucceedWithTheCheckOnOrOff) {
  for (const char* onOff : {"1", "0"}) {
    param::overrideForTest(param::Id::CheckMismatch, onOff);
    Outcome o = run([](int, ncclComm_t c, float* in, float* out) {
      return ncclAllReduce(in, out, kCount, ncclFloat32, ncclSum, c, nullptr);
    });  // (and the follow-up all-reduce succeeds as well)
    for (int r = 0; r < kRanks; ++r) EXPECT_EQ(o.res[size_t(r)], ncclSuccess) << onOff << ": " << o.msg[size_t(r)];
  }
  param::overrideForTest(param::Id::CheckMismatch, nullptr);
}

}  // namespace
}  // namespace tempo::testing
