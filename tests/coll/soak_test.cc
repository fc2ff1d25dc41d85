// Init/destroy soak (reliability.md): a thousand communicators of 2 ranks (threads of this
// process), each created, used for one all-reduce and destroyed, leave the process's
// threads and file descriptors as they were and its resident memory within a bound: nothing
// a communicator holds (bootstrap root and ring sockets, the heartbeat thread and its
// connections, transport endpoints, scratch memory) outlives it.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "rccl/rccl.h"

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

}  // namespace
