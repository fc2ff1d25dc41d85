// Collectives on a misbehaving wire (TEMPO_FAULT; reliability: "a fault-injection
// decorator on any transport yields either bit-exact results or a clean error, never a
// silent wrong result"). Every rank runs a stream of mixed collectives and checks every
// result it was told succeeded; the faults that the transport contract allows (a slow,
// uneven wire; messages overtaking each other across tags) must leave every result exact,
// and those it does not (a flipped bit, a message delivered twice or lost) must end every
// rank's stream with an error -- none with a wrong result, none hanging.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "src/core/param.h"
#include "tests/coll/coll_fixture.h"

namespace tempo::testing {
namespace {

constexpr int kRanks = 4;

struct RankOutcome {
  int succeeded = 0;          // collectives that returned ncclSuccess
  int wrong = 0;              // ... of which with a result that differs from the reference
  ncclResult_t error = ncclSuccess;  // the error that ended the stream (ncclSuccess: none)
  std::string message;
};

// Sets TEMPO_FAULT (and any other parameter) for the world's lifetime.
class Faults {
 public:
  Faults(const char* spec, const char* collTimeout = nullptr) {
    param::overrideForTest(param::Id::Fault, spec);
    param::overrideForTest(param::Id::CollTimeout, collTimeout);
  }
  ~Faults() {
    param::overrideForTest(param::Id::Fault, nullptr);
    param::overrideForTest(param::Id::CollTimeout, nullptr);
  }
};

// The value rank r contributes at element i of collective `it`.
int32_t valueOf(int r, int it, size_t i) { return int32_t((r + 1) * 1000003 + it * 7919 + int32_t(i % 65521)); }

// Collective `it`: an all-reduce, an all-gather or a broadcast (from a rank that moves), of
// 1 KiB to 1.2 MiB per rank, so that eager and large-message paths both carry them.
ncclResult_t runOne(ncclComm_t comm, int r, int it, std::vector<int32_t>& in, std::vector<int32_t>& out, bool* exact) {
  const size_t count = 256 + size_t(it) * 7919 % 300000;
  in.resize(count);
  for (size_t i = 0; i < count; ++i) in[i] = valueOf(r, it, i);
  ncclResult_t e;
  *exact = true;
  switch (it % 3) {
    case 0:
      out.assign(count, 0);
      e = ncclAllReduce(in.data(), out.data(), count, ncclInt32, ncclSum, comm, nullptr);
      if (e == ncclSuccess)
        for (size_t i = 0; i < count && *exact; ++i) {
          int64_t sum = 0;
          for (int q = 0; q < kRanks; ++q) sum += valueOf(q, it, i);
          *exact = out[i] == int32_t(uint32_t(sum));
        }
      return e;
    case 1:
      out.assign(count * kRanks, 0);
      e = ncclAllGather(in.data(), out.data(), count, ncclInt32, comm, nullptr);
      if (e == ncclSuccess)
        for (size_t i = 0; i < count * kRanks && *exact; ++i) *exact = out[i] == valueOf(int(i / count), it, i % count);
      return e;
    default: {
      const int root = it % kRanks;
      out.assign(count, 0);
      e = ncclBroadcast(in.data(), out.data(), count, ncclInt32, root, comm, nullptr);
      if (e == ncclSuccess)
        for (size_t i = 0; i < count && *exact; ++i) *exact = out[i] == valueOf(root, it, i);
      return e;
    }
  }
}

// Every rank runs `iterations` collectives, or until its first error.
std::vector<RankOutcome> stream(const char* transport, int iterations) {
  CommWorld w(kRanks, transport);
  EXPECT_TRUE(w.ok()) << w.error();
  if (!w.ok()) return {};
  std::vector<RankOutcome> o(kRanks);
  w.onThreads([&](int r) {
    std::vector<int32_t> in, out;
    RankOutcome& me = o[size_t(r)];
    for (int it = 0; it < iterations; ++it) {
      bool exact = true;
      const ncclResult_t e = runOne(w[r], r, it, in, out, &exact);
      if (e != ncclSuccess) {
        me.error = e;
        me.message = ncclGetLastError(w[r]);
        break;
      }
      ++me.succeeded;
      me.wrong += exact ? 0 : 1;
    }
    return ncclSuccess;
  });
  return o;
}

void expectNoWrongResult(const std::vector<RankOutcome>& o) {
  for (size_t r = 0; r < o.size(); ++r)
    EXPECT_EQ(o[r].wrong, 0) << "rank " << r << " returned ncclSuccess with a wrong result";
}

TEST(FaultInjection, ASlowUnevenWireWithMessagesOvertakingLeavesEveryResultExact) {
  Faults f("delay=20,jitter=300,reorder=0.2,seed=11");
  for (const char* transport : {"tempo_shm", "loopback"}) {
    const auto o = stream(transport, 60);
    ASSERT_EQ(o.size(), size_t(kRanks));
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_EQ(o[size_t(r)].error, ncclSuccess) << transport << " rank " << r << ": " << o[size_t(r)].message;
      EXPECT_EQ(o[size_t(r)].succeeded, 60) << transport << " rank " << r;
    }
    expectNoWrongResult(o);
  }
}

// A flipped bit: the rank that receives it fails that collective with ncclSystemError
// naming the check, and every other rank's stream ends with an error too (told around the
// ring), at that collective or the next.
TEST(FaultInjection, CorruptionEndsEveryRanksStreamWithAnErrorAndNoWrongResult) {
  for (const char* seed : {"1", "2", "3"}) {
    const std::string spec = std::string("corrupt=0.01,jitter=50,seed=") + seed;
    Faults f(spec.c_str());
    const auto o = stream("tempo_shm", 300);
    ASSERT_EQ(o.size(), size_t(kRanks));
    expectNoWrongResult(o);
    bool detected = false;
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_NE(o[size_t(r)].error, ncclSuccess) << spec << ": rank " << r << " ran all 300 collectives";
      detected |= o[size_t(r)].error == ncclSystemError &&
                  (o[size_t(r)].message.find("CRC-32C") != std::string::npos ||
                   o[size_t(r)].message.find("is corrupt") != std::string::npos);
    }
    EXPECT_TRUE(detected) << spec << ": no rank reported the failed check itself";
  }
}

TEST(FaultInjection, DuplicatedMessagesEndTheStreamWithAnErrorOrLeaveItExact) {
  Faults f("dup=0.02,seed=4");
  const auto o = stream("tempo_shm", 120);
  ASSERT_EQ(o.size(), size_t(kRanks));
  expectNoWrongResult(o);
}

// Nothing tells a receive that the message it waits for was lost: the collective's own
// deadline does, and every rank's stream ends instead of hanging.
TEST(FaultInjection, ALostMessageEndsEveryRanksStreamAtTheCollectiveDeadline) {
  Faults f("drop=0.01,seed=6", "2");
  const auto o = stream("tempo_shm", 300);
  ASSERT_EQ(o.size(), size_t(kRanks));
  expectNoWrongResult(o);
  bool timedOut = false;
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_NE(o[size_t(r)].error, ncclSuccess) << "rank " << r << " ran all 300 collectives";
    timedOut |= o[size_t(r)].error == ncclTimeout;
  }
  EXPECT_TRUE(timedOut) << "some rank's wait reached TEMPO_COLL_TIMEOUT";
}

TEST(FaultInjection, ABadSpecificationFailsInitWithItsReason) {
  Faults f("corrupt=often");
  CommWorld w(2, "loopback");
  EXPECT_FALSE(w.ok());
  EXPECT_NE(w.error().find("TEMPO_FAULT: 'corrupt=often' is not a non-negative number"), std::string::npos)
      << w.error();
}

}  // namespace
}  // namespace tempo::testing
