// Soaks (reliability.md), ranks as threads of this process:
// - init/destroy: a thousand communicators of 2 ranks, each created, used for one
//   all-reduce and destroyed, leave the process's threads and file descriptors as they
//   were and its resident memory within a bound: nothing a communicator holds (bootstrap
//   root and ring sockets, the heartbeat thread and its connections, transport endpoints,
//   scratch memory) outlives it;
// - 100,000 mixed collectives on one communicator, every result checked, leave threads,
//   descriptors and resident memory as they were after the first thousand: nothing grows
//   per call (op pools, transport requests, skew records, telemetry exchanges).
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include "rccl/rccl.h"
#include "tests/coll/coll_fixture.h"

namespace {

int entries(const char* dir) {
  int n = 0;
  if (DIR* d = opendir(dir)) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}
int threads() { return entries("/proc/self/task"); }
int fds() { return entries("/proc/self/fd") - 1; }  // less the one opendir holds

long rssKiB() {
  long pages = 0, resident = 0;
  if (FILE* f = fopen("/proc/self/statm", "r")) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

// One communicator's life: init, one checked all-reduce, destroy.
void cycle() {
  ncclComm_t comms[2] = {};
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<float> buf[2] = {std::vector<float>(1024, 1.0f), std::vector<float>(1024, 2.0f)};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(ncclAllReduce(buf[r].data(), buf[r].data(), 1024, ncclFloat32, ncclSum, comms[r], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(buf[r][0], 3.0f);
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
  }
}

// Threads that end on their own (a bootstrap root sends its table and returns) may still be
// finishing when a cycle returns: wait until the counts are back, for at most 10 s.
bool settlesAt(int wantThreads, int wantFds) {
  for (int i = 0; i < 1000; ++i) {
    if (threads() == wantThreads && fds() == wantFds) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(Soak, AThousandInitDestroyCyclesLeaveThreadsFdsAndMemoryAsTheyWere) {
  for (int i = 0; i < 20; ++i) cycle();  // one-time initialisation of the libraries below
  ASSERT_FALSE(HasFatalFailure());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const int threads0 = threads(), fds0 = fds();
  const long rss0 = rssKiB();
  for (int i = 0; i < 1000 && !HasFatalFailure(); ++i) cycle();
  EXPECT_TRUE(settlesAt(threads0, fds0)) << "threads " << threads() << " (were " << threads0 << "), fds " << fds()
                                         << " (were " << fds0 << ")";
  const long grown = rssKiB() - rss0;
  printf("1000 cycles: threads %d -> %d, fds %d -> %d, RSS %+ld KiB\n", threads0, threads(), fds0, fds(), grown);
  EXPECT_LT(grown, 32 * 1024) << "RSS grew by " << grown << " KiB over 1000 cycles";
}

// Collective `it` of the mixed stream on rank r of 2: seven kinds in turn, 1 to 4,096
// elements (every 97th 256 Ki), each checked exactly. Returns false on a wrong result.
ncclResult_t mixedCollective(ncclComm_t comm, int r, uint32_t it, std::vector<int32_t>& in, std::vector<int32_t>& out,
                             bool* exact) {
  const size_t count = it % 97 == 0 ? size_t(256) << 10 : 1 + (it * 2654435761u) % 4096;
  const int32_t mine = int32_t(it * 31 + uint32_t(r) * 7 + 1), other = int32_t(it * 31 + uint32_t(1 - r) * 7 + 1);
  in.assign(count * 2, mine);
  out.assign(count * 2, -1);
  ncclResult_t e = ncclSuccess;
  size_t n = count;
  int32_t want = 0;
  auto wantAt = [&](size_t i) { return want != 0 ? want : (i < count ? (r == 0 ? mine : other) : (r == 0 ? other : mine)); };
  switch (it % 7) {
    case 0: e = ncclAllReduce(in.data(), out.data(), count, ncclInt32, ncclSum, comm, nullptr); want = mine + other; break;
    case 1: e = ncclAllGather(in.data(), out.data(), count, ncclInt32, comm, nullptr); n = 2 * count; break;
    case 2: e = ncclBroadcast(in.data(), out.data(), count, ncclInt32, int(it / 7 % 2), comm, nullptr);
            want = int(it / 7 % 2) == r ? mine : other; break;
    case 3: e = ncclReduceScatter(in.data(), out.data(), count, ncclInt32, ncclMax, comm, nullptr);
            want = std::max(mine, other); break;
    case 4: e = ncclAlltoAll(in.data(), out.data(), count, ncclInt32, comm, nullptr); n = 2 * count;
            want = 0; break;  // element block q comes from rank q
    case 5:
      e = ncclGroupStart();
      if (e == ncclSuccess) e = ncclSend(in.data(), count, ncclInt32, 1 - r, comm, nullptr);
      if (e == ncclSuccess) e = ncclRecv(out.data(), count, ncclInt32, 1 - r, comm, nullptr);
      if (const ncclResult_t end = ncclGroupEnd(); e == ncclSuccess) e = end;
      want = other;
      break;
    default: {
      const int root = int(it / 7 % 2);
      e = ncclReduce(in.data(), out.data(), count, ncclInt32, ncclMin, root, comm, nullptr);
      if (r != root) n = 0;  // only the root's output is defined
      want = std::min(mine, other);
    }
  }
  *exact = true;
  for (size_t i = 0; e == ncclSuccess && i < n && *exact; ++i) *exact = out[i] == wantAt(i);
  return e;
}

TEST(Soak, AHundredThousandMixedCollectivesLeaveThreadsFdsAndMemoryFlat) {
  constexpr uint32_t kWarm = 1000, kTotal = 100000;
  tempo::testing::CommWorld w(2, "tempo_shm");
  ASSERT_TRUE(w.ok()) << w.error();
  // Counts taken by rank 0 while both rank threads are alive: after the first kWarm
  // collectives, and after the last.
  int threads0 = 0, fds0 = 0, threads1 = 0, fds1 = 0;
  long rss0 = 0, rss1 = 0;
  std::vector<uint32_t> done(2, 0), wrong(2, 0);
  std::atomic<int> arrived{0};
  auto measureTogether = [&](int r, int round, int& t, int& f, long& rss) {
    arrived.fetch_add(1);
    while (arrived.load() < 3 * round - 1) std::this_thread::yield();  // both ranks here
    if (r == 0) {
      t = threads();
      f = fds();
      rss = rssKiB();
      arrived.fetch_add(1);
    }
    while (arrived.load() < 3 * round) std::this_thread::yield();  // rank 0 has measured
  };
  const auto res = w.onThreads([&](int r) {
    std::vector<int32_t> in, out;
    ncclResult_t e = ncclSuccess;
    for (uint32_t it = 0; it < kTotal && e == ncclSuccess; ++it) {
      if (it == kWarm) measureTogether(r, 1, threads0, fds0, rss0);
      bool exact = true;
      e = mixedCollective(w[r], r, it, in, out, &exact);
      if (e != ncclSuccess) break;
      wrong[size_t(r)] += exact ? 0 : 1;
      ++done[size_t(r)];
    }
    if (e == ncclSuccess) measureTogether(r, 2, threads1, fds1, rss1);
    return e;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(res[size_t(r)], ncclSuccess) << "rank " << r << " after " << done[size_t(r)] << " collectives: "
                                           << ncclGetLastError(w[r]);
    EXPECT_EQ(done[size_t(r)], kTotal);
    EXPECT_EQ(wrong[size_t(r)], 0u) << "rank " << r;
  }
  const long grown = rss1 - rss0;
  printf("%u collectives: threads %d -> %d, fds %d -> %d, RSS %+ld KiB after the first %u\n", kTotal, threads0,
         threads1, fds0, fds1, grown, kWarm);
  EXPECT_EQ(threads1, threads0);
  EXPECT_EQ(fds1, fds0);
  EXPECT_LT(grown, 16 * 1024) << "RSS grew by " << grown << " KiB";
}

}  // namespace
