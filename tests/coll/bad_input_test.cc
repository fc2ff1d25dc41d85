// Bad input through the public API: each gets its documented error code and a message in
// ncclGetLastError, nothing crashes or hangs, and a communicator that saw a bad argument
// still runs a correct collective afterwards.
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <string>

#include "tests/coll/coll_fixture.h"

namespace tempo::testing {
namespace {

class BadInput : public SharedWorldTest {
 protected:
  ncclComm_t comm() const { return (*world_)[0]; }
  float buf_[64] = {};
};

TEST_F(BadInput, NullCommunicator) {
  EXPECT_NCCL_ERROR(ncclAllReduce(buf_, buf_, 4, ncclFloat, ncclSum, nullptr, nullptr), ncclInvalidArgument,
                    "comm is NULL");
  int n = 0;
  EXPECT_NCCL_ERROR(ncclCommCount(nullptr, &n), ncclInvalidArgument, "comm is NULL");
  ncclResult_t e;
  EXPECT_NCCL_ERROR(ncclCommGetAsyncError(nullptr, &e), ncclInvalidArgument, "comm is NULL");
  EXPECT_EQ(ncclCommDestroy(nullptr), ncclSuccess) << "NCCL accepts destroying NULL";
  EXPECT_EQ(ncclCommAbort(nullptr), ncclSuccess) << "NCCL accepts aborting NULL";
}

TEST_F(BadInput, NullBuffersWithNonZeroCount) {
  EXPECT_NCCL_ERROR(ncclAllReduce(nullptr, buf_, 4, ncclFloat, ncclSum, comm(), nullptr), ncclInvalidArgument,
                    "sendbuff is NULL");
  EXPECT_NCCL_ERROR(ncclAllReduce(buf_, nullptr, 4, ncclFloat, ncclSum, comm(), nullptr), ncclInvalidArgument,
                    "recvbuff is NULL");
}

TEST_F(BadInput, OutOfRangeDatatypeAndOp) {
  EXPECT_NCCL_ERROR(ncclAllReduce(buf_, buf_, 4, ncclDataType_t(12), ncclSum, comm(), nullptr), ncclInvalidArgument,
                    "invalid datatype 12");
  EXPECT_NCCL_ERROR(ncclAllReduce(buf_, buf_, 4, ncclDataType_t(-1), ncclSum, comm(), nullptr), ncclInvalidArgument,
                    "invalid datatype -1");
  EXPECT_NCCL_ERROR(ncclAllReduce(buf_, buf_, 4, ncclFloat, ncclRedOp_t(5), comm(), nullptr), ncclInvalidArgument,
                    "not created by ncclRedOpCreatePreMulSum");
  EXPECT_NCCL_ERROR(ncclAllReduce(buf_, buf_, 4, ncclFloat, ncclRedOp_t(-3), comm(), nullptr), ncclInvalidArgument,
                    "invalid reduction op -3");
  EXPECT_NCCL_ERROR(ncclAllReduce(buf_, buf_, 4, ncclFloat, ncclMaxRedOp, comm(), nullptr), ncclInvalidArgument,
                    "invalid reduction op");
}

TEST_F(BadInput, CountTimesSizeOverflow) {
  EXPECT_NCCL_ERROR(ncclAllReduce(buf_, buf_, SIZE_MAX / 2, ncclFloat, ncclSum, comm(), nullptr),
                    ncclInvalidArgument, "overflows");
}

TEST_F(BadInput, CommunicatorStillWorksAfterABadArgument) {
  ASSERT_EQ(ncclAllReduce(buf_, buf_, 4, ncclDataType_t(99), ncclSum, comm(), nullptr), ncclInvalidArgument);
  std::vector<std::vector<int32_t>> b(2, std::vector<int32_t>(33, 5));
  auto res = world_->onThreads([&](int r) {
    return ncclAllReduce(b[size_t(r)].data(), b[size_t(r)].data(), 33, ncclInt32, ncclSum, (*world_)[r], nullptr);
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(res[size_t(r)], ncclSuccess);
    EXPECT_EQ(b[size_t(r)][32], 10);
  }
}

TEST_F(BadInput, ZeroCountIsSuccessEvenWithNullBuffers) {
  auto res = world_->onThreads(
      [&](int r) { return ncclAllReduce(nullptr, nullptr, 0, ncclFloat, ncclSum, (*world_)[r], nullptr); });
  for (ncclResult_t r : res) EXPECT_EQ(r, ncclSuccess);
}

TEST(BadInit, RankOutsideRangeAndBadRankCount) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t c = nullptr;
  EXPECT_NCCL_ERROR(ncclCommInitRank(&c, 2, id, 2), ncclInvalidArgument, "rank 2 is outside [0, 2)");
  EXPECT_NCCL_ERROR(ncclCommInitRank(&c, 2, id, -1), ncclInvalidArgument, "rank -1 is outside");
  EXPECT_NCCL_ERROR(ncclCommInitRank(&c, 0, id, 0), ncclInvalidArgument, "nranks is 0");
  EXPECT_NCCL_ERROR(ncclCommInitRank(&c, -4, id, 0), ncclInvalidArgument, "nranks is -4");
  EXPECT_NCCL_ERROR(ncclCommInitRank(nullptr, 1, id, 0), ncclInvalidArgument, "output pointer");
  EXPECT_EQ(c, nullptr) << "outputs are set only on success";
  ncclComm_t all[2];
  EXPECT_NCCL_ERROR(ncclCommInitAll(all, 0, nullptr), ncclInvalidArgument, "ndev is 0");
  EXPECT_NCCL_ERROR(ncclCommInitAll(nullptr, 2, nullptr), ncclInvalidArgument, "comms is NULL");
  EXPECT_NCCL_ERROR(ncclGetUniqueId(nullptr), ncclInvalidArgument, "uniqueId is NULL");
  EXPECT_NCCL_ERROR(ncclGetVersion(nullptr), ncclInvalidArgument, "version is NULL");
}

TEST(BadInit, ForeignOrCorruptUniqueId) {
  ncclUniqueId zero;
  memset(&zero, 0, sizeof zero);
  ncclComm_t c = nullptr;
  EXPECT_NCCL_ERROR(ncclCommInitRank(&c, 1, zero, 0), ncclInvalidArgument, "bad magic");
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  id.internal[20] ^= 0x40;  // flip a bit of the root address
  EXPECT_NCCL_ERROR(ncclCommInitRank(&c, 1, id, 0), ncclInvalidArgument, "corrupt");
}

TEST(BadInit, ConfigWithoutInitializerIsRejected) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.magic = 0x12345678;
  ncclComm_t c = nullptr;
  EXPECT_NCCL_ERROR(ncclCommInitRankConfig(&c, 1, id, 0, &cfg), ncclInvalidArgument, "NCCL_CONFIG_INITIALIZER");
  cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 7;
  EXPECT_NCCL_ERROR(ncclCommInitRankConfig(&c, 1, id, 0, &cfg), ncclInvalidArgument, "blocking is 7");
}

TEST(BadInit, OlderConfigStructIsAccepted) {
  // A binary built against the 2.17 header: 48 bytes, version 2.17.1, garbage after.
  alignas(8) unsigned char raw[sizeof(ncclConfig_t)];
  memset(raw, 0x7f, sizeof raw);
  ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
  memcpy(raw, &init, 48);
  auto* old = reinterpret_cast<ncclConfig_t*>(raw);
  old->size = 48;
  old->version = NCCL_VERSION(2, 17, 1);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t c = nullptr;
  ASSERT_EQ(ncclCommInitRankConfig(&c, 1, id, 0, old), ncclSuccess) << ncclGetLastError(nullptr);
  float x = 3;
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, c, nullptr), ncclSuccess);
  EXPECT_EQ(x, 3.0f);
  EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

TEST(BadUsage, GroupEndWithoutStart) {
  EXPECT_NCCL_ERROR(ncclGroupEnd(), ncclInvalidUsage, "without a matching ncclGroupStart");
}

TEST(BadUsage, ErrorInsideAGroupFailsTheGroup) {
  CommWorld w(1, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  float x = 1;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, w[0], nullptr), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(&x, nullptr, 1, ncclFloat, ncclSum, w[0], nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  // The next group is unaffected.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, w[0], nullptr), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
}

TEST(BadUsage, DestroyedCommunicatorIsDetected) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t c = nullptr;
  ASSERT_EQ(ncclCommInitRank(&c, 1, id, 0), ncclSuccess);
  ASSERT_EQ(ncclCommDestroy(c), ncclSuccess);
  float x = 1;
  EXPECT_NCCL_ERROR(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, c, nullptr), ncclInvalidUsage,
                    "not a live communicator");
  EXPECT_NCCL_ERROR(ncclCommDestroy(c), ncclInvalidUsage, "not a live communicator");
}

// The collectives beyond all-reduce: each bad argument gets its code and a message naming it.
TEST(BadArguments, RootedAndPeeredCallsCheckRootPeerAndBuffers) {
  CommWorld w(2, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  float x[8] = {};
  EXPECT_NCCL_ERROR(ncclBroadcast(x, x, 1, ncclFloat, 2, w[0], nullptr), ncclInvalidArgument, "root 2 is outside [0, 2)");
  EXPECT_NCCL_ERROR(ncclBcast(x, 1, ncclFloat, -1, w[0], nullptr), ncclInvalidArgument, "root -1");
  EXPECT_NCCL_ERROR(ncclReduce(x, x, 1, ncclFloat, ncclSum, 5, w[0], nullptr), ncclInvalidArgument, "root 5");
  EXPECT_NCCL_ERROR(ncclReduce(x, x, 1, ncclFloat, ncclRedOp_t(99), 0, w[0], nullptr), ncclInvalidArgument,
                    "reduction op 99");
  EXPECT_NCCL_ERROR(ncclGather(x, x, 1, ncclFloat, 7, w[0], nullptr), ncclInvalidArgument, "root 7");
  EXPECT_NCCL_ERROR(ncclScatter(x, x, 1, ncclFloat, 7, w[0], nullptr), ncclInvalidArgument, "root 7");
  EXPECT_NCCL_ERROR(ncclSend(x, 1, ncclFloat, 2, w[0], nullptr), ncclInvalidArgument, "peer 2 is outside [0, 2)");
  EXPECT_NCCL_ERROR(ncclRecv(x, 1, ncclFloat, -3, w[0], nullptr), ncclInvalidArgument, "peer -3");
  EXPECT_NCCL_ERROR(ncclSend(nullptr, 1, ncclFloat, 1, w[0], nullptr), ncclInvalidArgument, "sendbuff is NULL");
  EXPECT_NCCL_ERROR(ncclRecv(nullptr, 1, ncclFloat, 1, w[0], nullptr), ncclInvalidArgument, "recvbuff is NULL");
  EXPECT_NCCL_ERROR(ncclAllGather(x, nullptr, 1, ncclFloat, w[0], nullptr), ncclInvalidArgument, "recvbuff is NULL");
  EXPECT_NCCL_ERROR(ncclReduceScatter(nullptr, x, 1, ncclFloat, ncclSum, w[0], nullptr), ncclInvalidArgument,
                    "sendbuff is NULL");
  EXPECT_NCCL_ERROR(ncclAllGather(x, x + 1, 1, ncclDataType_t(42), w[0], nullptr), ncclInvalidArgument,
                    "invalid datatype 42");
  // The whole n x count buffer must be addressable.
  EXPECT_NCCL_ERROR(ncclAllGather(x, x, SIZE_MAX / 4, ncclFloat, w[0], nullptr), ncclInvalidArgument, "overflows");
  EXPECT_NCCL_ERROR(ncclAlltoAll(x, x, 1, ncclFloat, w[0], nullptr), ncclInvalidUsage, "in place");
  size_t counts[2] = {1, 1}, displs[2] = {0, 1};
  EXPECT_NCCL_ERROR(ncclAlltoAllv(x, nullptr, displs, x + 2, counts, displs, ncclFloat, w[0], nullptr),
                    ncclInvalidArgument, "NULL");
  EXPECT_NCCL_ERROR(ncclAlltoAllv(x, counts, displs, x, counts, displs, ncclFloat, w[0], nullptr), ncclInvalidUsage,
                    "in-place");
  // Non-roots may pass NULL for the buffers that only matter on the root.
  EXPECT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclBroadcast(x, x, 2, ncclFloat, 0, w[0], nullptr), ncclSuccess);
  EXPECT_EQ(ncclBroadcast(nullptr, x + 2, 2, ncclFloat, 0, w[1], nullptr), ncclSuccess);
  EXPECT_EQ(ncclReduce(x, x + 4, 2, ncclFloat, ncclSum, 0, w[0], nullptr), ncclSuccess);
  EXPECT_EQ(ncclReduce(x + 2, nullptr, 2, ncclFloat, ncclSum, 0, w[1], nullptr), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
}

// A send to self needs its receive from self in the same group; alone it would hang, so
// it fails at once.
TEST(BadUsage, SendToSelfWithoutItsReceiveFailsInsteadOfHanging) {
  CommWorld w(1, "loopback");
  ASSERT_TRUE(w.ok()) << w.error();
  float x = 1, y = 0;
  EXPECT_NCCL_ERROR(ncclSend(&x, 1, ncclFloat, 0, w[0], nullptr), ncclInvalidUsage, "ncclRecv(s) from self");
  ncclGroupStart();
  ncclSend(&x, 1, ncclFloat, 0, w[0], nullptr);
  ncclRecv(&y, 2, ncclFloat, 0, w[0], nullptr);
  EXPECT_NCCL_ERROR(ncclGroupEnd(), ncclInvalidUsage, "to self of 4 bytes meets an ncclRecv from self of 8 bytes");
}

TEST(ErrorStrings, EveryResultHasAString) {
  EXPECT_STREQ(ncclGetErrorString(ncclSuccess), "no error");
  for (int r = 1; r < int(ncclNumResults); ++r) EXPECT_STRNE(ncclGetErrorString(ncclResult_t(r)), "unknown result code");
  EXPECT_STREQ(ncclGetErrorString(ncclResult_t(99)), "unknown result code");
  int v = 0;
  ASSERT_EQ(ncclGetVersion(&v), ncclSuccess);
  EXPECT_EQ(v, NCCL_VERSION_CODE);
}

}  // namespace
}  // namespace tempo::testing
