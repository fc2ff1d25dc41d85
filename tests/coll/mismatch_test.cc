// Mismatch detection (reliability scenarios M1/M2): a rank that calls a different
// collective, count, datatype, op or root than the others gets ncclInvalidUsage, never a
// hang, and the error names the field, both values and both ranks. Not only the ranks that
// detect it: the fingerprint rounds make every rank's collective wait until every rank's
// fingerprint is known equal to its own, so that very collective fails on every rank --
// also for collectives whose data would have let some ranks finish (a broadcast's
// upstream ranks, a reduce's leaves, an all-to-all's pairs).
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

// Runs call(rank, buffers) on every rank of a fresh world of `ranks`; collects each rank's
// result of that one call and its message. With `pollAsync`, a rank then also checks that
// ncclCommGetAsyncError reports the failure.
Outcome run(const std::function<ncclResult_t(int, ncclComm_t, float*, float*)>& call, const char* transport = "loopback",
            bool pollAsync = false, int ranks = kRanks) {
  CommWorld w(ranks, transport);
  EXPECT_TRUE(w.ok()) << w.error();
  if (!w.ok()) return {};
  std::vector<std::vector<float>> in(size_t(ranks), std::vector<float>(kCount * size_t(ranks), 1.0f)),
      out(size_t(ranks), std::vector<float>(kCount * size_t(ranks), 0.0f));
  Outcome o;
  o.msg.resize(size_t(ranks));
  const auto t0 = std::chrono::steady_clock::now();
  o.res = w.onThreads([&](int r) {
    ncclResult_t e = call(r, w[r], in[size_t(r)].data(), out[size_t(r)].data());
    o.msg[size_t(r)] = ncclGetLastError(w[r]);
    if (pollAsync) {
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(w[r], &async) != ncclSuccess || async != e) return ncclInternalError;
    }
    return e;
  });
  // M1: every rank within 2 s.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  return o;
}

void expectEveryRankFails(const Outcome& o, const std::string& needle, int ranks = kRanks) {
  ASSERT_EQ(o.res.size(), size_t(ranks));
  for (int r = 0; r < ranks; ++r) {
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

TEST(Mismatch, GetAsyncErrorReportsItToo) {
  Outcome o = run(
      [](int r, ncclComm_t c, float* in, float* out) {
        return ncclAllReduce(in, out, kCount, ncclFloat32, r == kOdd ? ncclMin : ncclSum, c, nullptr);
      },
      "loopback", /*pollAsync=*/true);
  expectEveryRankFails(o, "field op is");
}

// The collectives whose data flow lets some ranks finish without the odd one (a
// broadcast's ranks before it in the chain, a reduce's and gather's senders, an
// all-to-all's other pairs) fail on every rank as well, at several world sizes; the odd
// rank is the last one, the farthest from the root.
void everyCollectiveFailsOnEveryRank(const char* transport, std::initializer_list<int> worldSizes) {
  using Call = std::function<ncclResult_t(int, ncclComm_t, float*, float*, size_t)>;
  const std::vector<std::pair<const char*, Call>> calls = {
      {"broadcast", [](int, ncclComm_t c, float* in, float* out, size_t n) { return ncclBroadcast(in, out, n, ncclFloat32, 0, c, nullptr); }},
      {"reduce", [](int, ncclComm_t c, float* in, float* out, size_t n) { return ncclReduce(in, out, n, ncclFloat32, ncclSum, 0, c, nullptr); }},
      {"gather", [](int, ncclComm_t c, float* in, float* out, size_t n) { return ncclGather(in, out, n, ncclFloat32, 0, c, nullptr); }},
      {"scatter", [](int, ncclComm_t c, float* in, float* out, size_t n) { return ncclScatter(in, out, n, ncclFloat32, 0, c, nullptr); }},
      {"alltoall", [](int, ncclComm_t c, float* in, float* out, size_t n) { return ncclAlltoAll(in, out, n, ncclFloat32, c, nullptr); }},
      {"allgather", [](int, ncclComm_t c, float* in, float* out, size_t n) { return ncclAllGather(in, out, n, ncclFloat32, c, nullptr); }},
      {"allreduce", [](int, ncclComm_t c, float* in, float* out, size_t n) { return ncclAllReduce(in, out, n, ncclFloat32, ncclSum, c, nullptr); }},
  };
  for (int ranks : worldSizes) {
    for (const auto& [name, call] : calls) {
      SCOPED_TRACE(std::string(name) + " on " + std::to_string(ranks) + " ranks over " + transport);
      // A small count: the whole collective fits in a message or two, so ranks that need
      // nothing from the odd rank would finish at once if nothing held them.
      Outcome o = run([&, ranks](int r, ncclComm_t c, float* in, float* out) {
        return call(r, c, in, out, r == ranks - 1 ? 16 : 8);
      }, transport, false, ranks);
      expectEveryRankFails(o, "field count is", ranks);
    }
  }
}

TEST(Mismatch, EveryCollectiveFailsOnEveryRankAtEveryWorldSize) { everyCollectiveFailsOnEveryRank("loopback", {2, 3, 5, 8}); }
TEST(Mismatch, EveryCollectiveFailsOnEveryRankOverLibfabric) { everyCollectiveFailsOnEveryRank("tcp", {3, 5}); }

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
