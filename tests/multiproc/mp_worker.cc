// One rank of a multi-process test, linked against the real librccl.so.1.
//
// Configured by the environment the test sets: RANK, WORLD_SIZE, NCCL_COMM_ID (rank 0
// starts the bootstrap root there), the transport variables under test, and
// TEMPO_MP_MODE:
//   matrix  every datatype x op x count x placement, bit-exact (exit 1 on any mismatch)
//   collectives  every other collective over the matrix of tests/common/rank_case.h, and
//           send/receive between every pair (self included) in one group
//   memory  library host memory after init, and RSS flatness over 10,000 collectives
//   skew    a training-like loop (sleep, then two all-reduces) in which the last rank
//           computes 3 ms longer: the skew statistics must name it as the last arriver,
//           with a lead under half the others' (near 3 ms), and find 2 collectives per
//           iteration; with TEMPO_PACING=on the others are delayed and it never is. It
//           writes a hash of every result to TEMPO_MP_HASH_FILE (results must not depend
//           on pacing). With TEMPO_MP_SKEW_BROADCAST=1 the two all-reduces are broadcasts.
//   abort   the last rank aborts its communicator from a second thread while its first
//           is inside an all-reduce the others have not joined; they join afterwards and
//           must fail, not hang (exit 1 if a call succeeds or abort takes over 10 s)
//   leave   ranks finish at different times: rank 0 destroys its communicator once its send
//           to the last rank is done, while the last rank still waits on a late rank's
//           send, which must succeed. With TEMPO_MP_LEAVE_EARLY=1, rank 0 then leaves one collective early:
//           once the others have met in a barrier without it, every other rank's next all-reduce
//           must fail with ncclRemoteError.
//   timeout with TEMPO_COLL_TIMEOUT=1, the last rank joins an all-reduce 4 s late: the others'
//           call fails with ncclTimeout after 1-3 s, and so does (or with ncclRemoteError)
//           the late rank's, which the others told why
//   stop    the last rank stops its own process (SIGSTOP) instead of joining an all-reduce:
//           it exits nothing and closes nothing, so only heartbeats can tell. With
//           TEMPO_PEER_TIMEOUT=T the others' call must fail with ncclRemoteError within
//           T + 2 s. A child of the stopped rank resumes it (SIGCONT) T + 3 s later: it
//           must not carry on as if nothing happened, so its own all-reduce must then fail
//           too, within T + 2 s.
//   stopinit  rank 0, whose process hosts the bootstrap root (NCCL_COMM_ID), stops its own
//           process half a second into its init, with rank 1 joined and waiting for its table
//           and the last rank still to come (it starts 2 s late and finds a root that accepts
//           connections in the kernel but answers none). With TEMPO_PEER_TIMEOUT=T both
//           inits must fail with ncclRemoteError within T + 2 s of their start. A child of
//           the stopped rank kills it T + 4 s after it started.
//   onesided  every rank registers a window, puts a pattern of its own into every rank's
//           window (its own included) at an offset of its own, signals, and waits for every
//           rank's two signals; every window must then hold every rank's pattern. Then rank
//           0 puts 8 MiB into the last rank's window while that rank sleeps 1 s outside the
//           library: the put must have returned before the sleeper calls again (times on
//           CLOCK_MONOTONIC, compared after an all-reduce).
// Diagnostics go to stderr prefixed with the rank.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "rccl/rccl.h"
#include "tempo/tempo.h"
#include "tests/common/rank_case.h"
#include "tests/common/verify.h"

using namespace tempo;
using namespace tempo::testing;

namespace {

int g_rank = 0, g_size = 1;

#define CHECK_NCCL(call)                                                                       \
  do {                                                                                         \
    ncclResult_t r_ = (call);                                                                  \
    if (r_ != ncclSuccess) {                                                                   \
      fprintf(stderr, "[rank %d] %s failed: %s (%s)\n", g_rank, #call, ncclGetErrorString(r_), \
              ncclGetLastError(nullptr));                                                      \
      exit(2);                                                                                 \
    }                                                                                          \
  } while (0)

long rssKiB() {
  FILE* f = fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

int matrix(ncclComm_t comm) {
  int failures = 0;
  uint64_t seed = 11;
  const size_t counts[] = {0, 1, 7, size_t(g_size) + 1, 1021, 65537, (size_t(1) << 20) + 3};
  for (DataType t : kAllTypes)
    for (RedOp op : kAllOps)
      for (size_t count : counts)
        for (bool inPlace : {false, true}) {
          ++seed;
          // Large counts for a few types only, to keep the run short.
          if (count > 100000 && t != DataType::Float32 && t != DataType::Float16 && t != DataType::Int64) continue;
          size_t bytes = count * dataTypeSize(t);
          GuardedBuffer in(bytes), out(bytes), want(bytes);
          fillInput(in.data(), count, t, op, g_rank, g_size, seed);
          expectedAllReduce(want.data(), count, t, op, g_size, seed);
          void* dst = inPlace ? in.data() : out.data();
          CHECK_NCCL(ncclAllReduce(in.data(), dst, count, ncclDataType_t(t), ncclRedOp_t(op), comm, nullptr));
          size_t bad = countMismatches(dst, want.data(), count, t);
          if (bad || !in.guardsIntact() || !out.guardsIntact()) {
            fprintf(stderr, "[rank %d] %s %s count %zu %s: %zu wrong elements%s\n", g_rank, dataTypeName(t),
                    redOpName(op), count, inPlace ? "in-place" : "out-of-place", bad,
                    in.guardsIntact() && out.guardsIntact() ? "" : ", guard bytes overwritten");
            ++failures;
          }
        }
  return failures;
}

int collectives(ncclComm_t comm) {
  int failures = 0;
  uint64_t seed = 101;
  for (Coll c : {Coll::Broadcast, Coll::Reduce, Coll::AllGather, Coll::ReduceScatter, Coll::AllToAll, Coll::Gather,
                 Coll::Scatter}) {
    const auto cases = casesFor(c, g_size, seed);
    seed += cases.size();
    for (const RankCase& k : cases) {
      RankBuffers b(k, g_rank, g_size);
      CHECK_NCCL(b.call(comm));
      const std::string bad = b.check();
      if (!bad.empty()) {
        fprintf(stderr, "[rank %d] %s: %s\n", g_rank, k.describe().c_str(), bad.c_str());
        ++failures;
      }
    }
  }
  // Every rank sends a distinct block to every rank, itself included, in one group; odd
  // ranks post in the opposite order.
  for (size_t count : {size_t(0), size_t(1), size_t(1021), size_t(70001)}) {
    const size_t bytes = count * 4;
    std::vector<GuardedBuffer> in, out;
    for (int j = 0; j < g_size; ++j) {
      in.emplace_back(bytes);
      out.emplace_back(bytes);
      fillInput(in.back().data(), count, DataType::Int32, RedOp::Sum, g_rank * g_size + j, g_size * g_size, 5);
    }
    CHECK_NCCL(ncclGroupStart());
    for (int k = 0; k < g_size; ++k) {
      const int j = (g_rank & 1) ? g_size - 1 - k : k;
      CHECK_NCCL(ncclRecv(out[size_t(j)].data(), count, ncclInt32, j, comm, nullptr));
      CHECK_NCCL(ncclSend(in[size_t(j)].data(), count, ncclInt32, j, comm, nullptr));
    }
    CHECK_NCCL(ncclGroupEnd());
    for (int j = 0; j < g_size; ++j) {
      GuardedBuffer want(bytes);
      fillInput(want.data(), count, DataType::Int32, RedOp::Sum, j * g_size + g_rank, g_size * g_size, 5);
      if (countMismatches(out[size_t(j)].data(), want.data(), count, DataType::Int32) || !out[size_t(j)].guardsIntact()) {
        fprintf(stderr, "[rank %d] send/recv count %zu: block from rank %d is wrong\n", g_rank, count, j);
        ++failures;
      }
    }
  }
  return failures;
}

int memory(ncclComm_t comm, long rssBeforeInit) {
  long afterInit = rssKiB();
  std::vector<float> buf(size_t(1) << 18, 1.0f);  // 1 MiB, touched
  const size_t sizes[] = {1024, 16384, size_t(1) << 18};
  auto run = [&](int n) {
    for (int i = 0; i < n; ++i)
      CHECK_NCCL(ncclAllReduce(buf.data(), buf.data(), sizes[i % 3], ncclFloat32, ncclMax, comm, nullptr));
  };
  run(1000);
  long warm = rssKiB();
  run(9000);
  long after = rssKiB();
  fprintf(stderr, "[rank %d] rss KiB: before init %ld, after init %ld, after 1000 collectives %ld, after 10000 %ld\n",
          g_rank, rssBeforeInit, afterInit, warm, after);
  int failures = 0;
  if (afterInit - rssBeforeInit > 64 * 1024) {
    fprintf(stderr, "[rank %d] library host memory %ld KiB exceeds 64 MiB\n", g_rank, afterInit - rssBeforeInit);
    ++failures;
  }
  if (after - warm > 1024) {
    fprintf(stderr, "[rank %d] RSS grew by %ld KiB over 9000 collectives\n", g_rank, after - warm);
    ++failures;
  }
  return failures;
}

int skew(ncclComm_t comm) {
  const int straggler = g_size - 1;
  const bool pacing = getenv("TEMPO_PACING") && !strcmp(getenv("TEMPO_PACING"), "on");
  // Broadcasts from rank 0 instead: no common exit, so measured by arrivals on rank 0's
  // clock (with TEMPO_HOSTNAME, every rank another host, whose offset is probed at init).
  const bool broadcasts = getenv("TEMPO_MP_SKEW_BROADCAST") != nullptr;
  // Inputs whose sums round differently in different orders, so that the hash would see
  // any change of reduction order.
  std::vector<float> a(1 << 14), b(1 << 12);
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&](const std::vector<float>& v) {
    for (float x : v) {
      uint32_t bits;
      memcpy(&bits, &x, 4);
      hash = (hash ^ bits) * 1099511628211ull;
    }
  };
  for (int it = 0; it < 250; ++it) {
    for (size_t i = 0; i < a.size(); ++i) a[i] = 1.0f / float(1 + (i * 7 + size_t(g_rank) * 13 + size_t(it)) % 1000);
    for (size_t i = 0; i < b.size(); ++i) b[i] = 0.1f * float(g_rank + 1) + 1e-3f * float(i % 17);
    std::this_thread::sleep_for(std::chrono::microseconds(g_rank == straggler ? 4000 : 1000));
    if (broadcasts) {
      CHECK_NCCL(ncclBroadcast(a.data(), a.data(), a.size(), ncclFloat32, 0, comm, nullptr));
      CHECK_NCCL(ncclBroadcast(b.data(), b.data(), b.size(), ncclFloat32, 0, comm, nullptr));
    } else {
      CHECK_NCCL(ncclAllReduce(a.data(), a.data(), a.size(), ncclFloat32, ncclSum, comm, nullptr));
      CHECK_NCCL(ncclAllReduce(b.data(), b.data(), b.size(), ncclFloat32, ncclSum, comm, nullptr));
    }
    mix(a);
    mix(b);
  }
  tempoSkewStats_t s;
  std::vector<float> lead(static_cast<size_t>(g_size));
  CHECK_NCCL(tempoCommGetSkewStats(comm, &s, lead.data()));
  fprintf(stderr,
          "[rank %d] %llu collectives, %llu windows, skew p50 %.0f us, transfer p50 %.0f us, period %d, "
          "iteration %.0f us CoV %.3f, last arriver %d (%.2f), state %d gain %.2f, delay %.1f us (total %.0f us)\n",
          g_rank, s.collectives, s.windows, s.skewP50Us, s.transferP50Us, s.iterationPeriod, s.iterationMeanUs,
          s.iterationCoV, s.topLastArriver, s.topLastArriverShare, int(s.state), s.gain, s.delayUs, s.delayTotalUs);
  for (int r = 0; r < g_size; ++r) fprintf(stderr, "[rank %d]   rank %d lead %.0f us\n", g_rank, r, lead[size_t(r)]);
  int failures = 0;
  auto expect = [&](bool ok, const char* what) {
    if (!ok) fprintf(stderr, "[rank %d] FAILED: %s\n", g_rank, what);
    failures += !ok;
  };
  // Statistics are as of the last window. Half the collectives (each iteration's first)
  // wait for the straggler's 3 ms; the other half hardly wait at all.
  expect(s.collectives > 400 && s.collectives <= 500 && s.windows >= 5, "most collectives measured, several windows");
  // The straggler is last in every first collective; in the second one another rank
  // (whichever the all-reduce lets go last) may be just as persistently last.
  // (Its share is as of the last window, where a preempted rank now and then takes its
  // place: at least 1.5x the fair share, where the first collectives alone give 2x.)
  expect(s.topLastArriverShare >= 0.375, "a persistent last arriver");
  expect(s.iterationPeriod == 2, "two collectives per iteration");
  expect(s.skewP99Us > 2000, "skew of about the straggler's 3 ms");
  // (Leads are EWMAs, alpha 1/8: on a loaded machine one late wake-up of another rank in
  // the last window moves the straggler's by a millisecond, so "near 0" is relative.)
  for (int r = 0; r < g_size; ++r)
    if (r != straggler) {
      expect(lead[size_t(r)] > lead[size_t(straggler)] + 1000, "the straggler's lead is the least");
      expect(lead[size_t(straggler)] < 0.5 * lead[size_t(r)], "the straggler's lead is under half any other's");
    }
  for (int r = 0; r < g_size; ++r)
    if (r != straggler) expect(lead[size_t(r)] > 1000, "the other ranks lead by about 3 ms every other collective");
  // Every rank's total delay, gathered.
  std::vector<double> delays(static_cast<size_t>(g_size));
  delays[size_t(g_rank)] = s.delayTotalUs;
  CHECK_NCCL(ncclAllGather(&delays[size_t(g_rank)], delays.data(), 1, ncclFloat64, comm, nullptr));
  if (pacing) {
    expect(s.state != tempoControllerObserve || s.pacedCollectives > 0, "the controller engaged");
    expect(s.delayUs <= s.delayCapUs, "delays stay within the cap");
    if (g_rank != straggler) expect(delays[size_t(g_rank)] > 0, "the early ranks are delayed");
    // The straggler is never gated before the collective it is late for; it may be, a
    // little, before the other one (where it need not be the last), so it is paced least.
    for (int r = 0; r < g_size; ++r)
      if (r != straggler)
        expect(delays[size_t(straggler)] < delays[size_t(r)], "the straggler is delayed less than any other rank");
  } else {
    expect(s.pacedCollectives == 0 && s.state == tempoControllerObserve, "observe mode never delays");
    expect(s.wouldPace == 0 || s.wouldPace == 1, "wouldPace is a flag");
  }
  if (const char* path = getenv("TEMPO_MP_HASH_FILE")) {
    FILE* f = fopen(path, "w");
    if (f) {
      fprintf(f, "%016llx\n", (unsigned long long)hash);
      fclose(f);
    }
  }
  return failures;
}

int abortMidCollective(ncclComm_t comm) {
  using Clock = std::chrono::steady_clock;
  std::vector<float> buf(1 << 20, 1.0f);
  const int victim = g_size - 1;
  if (g_rank == victim) {
    ncclResult_t inFlight = ncclSuccess;
    std::thread caller([&] {
      inFlight = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto t0 = Clock::now();
    ncclResult_t a = ncclCommAbort(comm);
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    caller.join();
    fprintf(stderr, "[rank %d] abort returned %s after %.3f s; the call in flight returned %s\n", g_rank,
            ncclGetErrorString(a), secs, ncclGetErrorString(inFlight));
    return a == ncclSuccess && secs < 10 && inFlight != ncclSuccess ? 0 : 1;
  }
  // The others arrive once the victim has aborted.
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const auto t0 = Clock::now();
  ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  fprintf(stderr, "[rank %d] all-reduce after the abort returned %s after %.3f s: %s\n", g_rank,
          ncclGetErrorString(r), secs, ncclGetLastError(comm));
  ncclCommAbort(comm);
  return r != ncclSuccess ? 0 : 1;
}

int leave(ncclComm_t comm) {
  using Clock = std::chrono::steady_clock;
  constexpr size_t kCount = 256;
  const int root = g_size - 1, late = g_size - 2;
  const bool early = getenv("TEMPO_MP_LEAVE_EARLY") != nullptr;
  // Rank 0 and the late rank send a block to the last rank. Rank 0's send is done (and
  // it destroys its communicator) long before the last rank, its bootstrap ring
  // neighbour, has heard from the late rank.
  std::vector<float> mine(kCount, float(g_rank + 1)), got[2] = {std::vector<float>(kCount), std::vector<float>(kCount)};
  const auto t0 = Clock::now();
  if (g_rank == late) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  if (g_rank == 0 || g_rank == late) CHECK_NCCL(ncclSend(mine.data(), kCount, ncclFloat32, root, comm, nullptr));
  if (g_rank == root) {
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclRecv(got[0].data(), kCount, ncclFloat32, 0, comm, nullptr));
    CHECK_NCCL(ncclRecv(got[1].data(), kCount, ncclFloat32, late, comm, nullptr));
    CHECK_NCCL(ncclGroupEnd());
    for (int k = 0; k < 2; ++k)
      for (float x : got[k])
        if (x != float((k ? late : 0) + 1)) {
          fprintf(stderr, "[rank %d] received %g from rank %d\n", g_rank, double(x), k ? late : 0);
          return 1;
        }
  }
  fprintf(stderr, "[rank %d] point-to-point done after %.3f s\n", g_rank,
          std::chrono::duration<double>(Clock::now() - t0).count());
  if (g_rank == 0 || !early) {
    CHECK_NCCL(ncclCommFinalize(comm));
    CHECK_NCCL(ncclCommDestroy(comm));
    return 0;
  }
  // The failure of that all-reduce fails the whole communicator, point-to-point included, so
  // no rank may start it while another's send is still unreturned (the last rank can hold
  // the late rank's data before that rank's send call has returned): a barrier without rank
  // 0, every other rank telling the last one it is done, which then lets them go.
  float token = 0;
  if (g_rank == root) {
    for (int r = 1; r < root; ++r) CHECK_NCCL(ncclRecv(&token, 1, ncclFloat32, r, comm, nullptr));
    CHECK_NCCL(ncclGroupStart());
    for (int r = 1; r < root; ++r) CHECK_NCCL(ncclSend(&token, 1, ncclFloat32, r, comm, nullptr));
    CHECK_NCCL(ncclGroupEnd());
  } else {
    CHECK_NCCL(ncclSend(&token, 1, ncclFloat32, root, comm, nullptr));
    CHECK_NCCL(ncclRecv(&token, 1, ncclFloat32, root, comm, nullptr));
  }
  // An all-reduce that rank 0, gone, never joins: it fails instead of hanging.
  const auto t1 = Clock::now();
  ncclResult_t r = ncclAllReduce(mine.data(), mine.data(), kCount, ncclFloat32, ncclSum, comm, nullptr);
  const double secs = std::chrono::duration<double>(Clock::now() - t1).count();
  fprintf(stderr, "[rank %d] all-reduce without rank 0 returned %s after %.3f s: %s\n", g_rank,
          ncclGetErrorString(r), secs, ncclGetLastError(comm));
  ncclCommAbort(comm);
  return r == ncclRemoteError ? 0 : 1;
}

int timeoutLate(ncclComm_t comm) {
  using Clock = std::chrono::steady_clock;
  std::vector<float> buf(1 << 12, 1.0f);
  const bool late = g_rank == g_size - 1;
  if (late) std::this_thread::sleep_for(std::chrono::seconds(4));
  const auto t0 = Clock::now();
  ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::string why = ncclGetLastError(comm);
  fprintf(stderr, "[rank %d] all-reduce returned %s after %.3f s: %s\n", g_rank, ncclGetErrorString(r), secs,
          why.c_str());
  ncclCommAbort(comm);
  if (late) return r == ncclTimeout || r == ncclRemoteError ? 0 : 1;
  return r == ncclTimeout && secs >= 0.9 && secs < 3 && why.find("TEMPO_COLL_TIMEOUT") != std::string::npos ? 0 : 1;
}

int stopMidCollective(ncclComm_t comm) {
  using Clock = std::chrono::steady_clock;
  const int peerTimeout = getenv("TEMPO_PEER_TIMEOUT") ? atoi(getenv("TEMPO_PEER_TIMEOUT")) : 30;
  std::vector<float> buf(1 << 12, 1.0f);
  if (g_rank == g_size - 1) {
    const pid_t self = getpid();
    if (fork() == 0) {
      sleep(unsigned(peerTimeout + 3));
      kill(self, SIGCONT);
      _exit(0);
    }
    kill(self, SIGSTOP);
    // Resumed, after the others have given up on this rank.
  }
  const auto t0 = Clock::now();
  ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::string why = ncclGetLastError(comm);
  fprintf(stderr, "[rank %d] all-reduce with rank %d stopped returned %s after %.3f s: %s\n", g_rank, g_size - 1,
          ncclGetErrorString(r), secs, why.c_str());
  ncclCommAbort(comm);
  if (g_rank == g_size - 1) return r != ncclSuccess && secs < peerTimeout + 2 ? 0 : 1;
  return r == ncclRemoteError && secs < peerTimeout + 2 ? 0 : 1;
}

int stopDuringInit(const ncclUniqueId& id) {
  using Clock = std::chrono::steady_clock;
  const int peerTimeout = getenv("TEMPO_PEER_TIMEOUT") ? atoi(getenv("TEMPO_PEER_TIMEOUT")) : 30;
  ncclComm_t comm = nullptr;
  if (g_rank == 0) {
    const pid_t self = getpid();
    if (fork() == 0) {
      sleep(unsigned(peerTimeout + 4));
      kill(self, SIGKILL);
      _exit(0);
    }
    std::thread([self] {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      kill(self, SIGSTOP);
    }).detach();
    (void)ncclCommInitRank(&comm, g_size, id, g_rank);
    return 1;  // not reached: killed while stopped
  }
  if (g_rank == g_size - 1) std::this_thread::sleep_for(std::chrono::seconds(2));
  const auto t0 = Clock::now();
  ncclResult_t r = ncclCommInitRank(&comm, g_size, id, g_rank);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  fprintf(stderr, "[rank %d] init with rank 0 (the root) stopped returned %s after %.3f s: %s\n", g_rank,
          ncclGetErrorString(r), secs, ncclGetLastError(nullptr));
  if (r == ncclSuccess) ncclCommDestroy(comm);
  return r == ncclRemoteError && secs < peerTimeout + 2 ? 0 : 1;
}

// The last rank dies right after init. The survivors' all-reduce on the parent fails
// instead of hanging; they shrink it with NCCL_SHRINK_ABORT, excluding the dead rank, and
// the shrunk communicator runs 200 bit-exact all-reduces.
int shrinkAfterDeath(ncclComm_t comm) {
  const int victim = g_size - 1;
  if (g_rank == victim) _exit(0);
  std::vector<float> buf(1 << 16, 1.0f);
  ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
  fprintf(stderr, "[rank %d] all-reduce with rank %d dead returned %s: %s\n", g_rank, victim, ncclGetErrorString(r),
          ncclGetLastError(comm));
  if (r == ncclSuccess) return 1;
  int dead[] = {victim};
  ncclComm_t child = nullptr;
  CHECK_NCCL(ncclCommShrink(comm, dead, 1, &child, nullptr, NCCL_SHRINK_ABORT));
  int n = 0, me = -1;
  CHECK_NCCL(ncclCommCount(child, &n));
  CHECK_NCCL(ncclCommUserRank(child, &me));
  if (n != g_size - 1 || me != g_rank) return 1;
  int bad = 0;
  for (int it = 0; it < 200; ++it) {
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = float((g_rank + 1) * (int(i % 7) + it % 3));
    CHECK_NCCL(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, child, nullptr));
    const int ranksSum = n * (n + 1) / 2;
    for (size_t i = 0; i < buf.size(); ++i) bad += buf[i] != float(ranksSum * (int(i % 7) + it % 3));
  }
  fprintf(stderr, "[rank %d] 200 all-reduces on the shrunk communicator of %d ranks: %d wrong elements\n", g_rank, n,
          bad);
  CHECK_NCCL(ncclCommFinalize(child));
  CHECK_NCCL(ncclCommDestroy(child));
  CHECK_NCCL(ncclCommDestroy(comm));
  return bad ? 1 : 0;
}

// Under TEMPO_FAULT: 200 all-reduces of 1 Ki to 1 Mi floats, each checked. Passes when
// every call that returned ncclSuccess was exact and the stream either finished (the
// faults were harmless) or ended in an error (TEMPO_MP_EXPECT_ERROR=1 requires that).
int faultStream(ncclComm_t comm) {
  const bool mustFail = getenv("TEMPO_MP_EXPECT_ERROR") && atoi(getenv("TEMPO_MP_EXPECT_ERROR")) == 1;
  std::vector<float> in, out;
  int wrong = 0, done = 0;
  ncclResult_t r = ncclSuccess;
  for (int it = 0; it < 200 && r == ncclSuccess; ++it) {
    const size_t count = size_t(1024) << (it % 11);
    in.assign(count, float(g_rank + 1 + it % 5));
    out.assign(count, -1.0f);
    r = ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr);
    if (r != ncclSuccess) break;
    const float want = float(g_size * (g_size + 1) / 2 + g_size * (it % 5));
    for (size_t i = 0; i < count; ++i) wrong += out[i] != want;
    ++done;
  }
  const std::string why = r == ncclSuccess ? "" : ncclGetLastError(comm);
  fprintf(stderr, "[rank %d] %d all-reduces exact-checked (%d wrong elements), then %s %s\n", g_rank, done, wrong,
          ncclGetErrorString(r), why.c_str());
  ncclCommAbort(comm);
  return wrong == 0 && (!mustFail || r != ncclSuccess) ? 0 : 1;
}

uint8_t onesidedPattern(int writer, size_t i) { return uint8_t(writer * 29 + i * 7 + (i >> 10)); }

int onesided(ncclComm_t comm) {
  using Clock = std::chrono::steady_clock;
  constexpr size_t kBlock = (size_t(1) << 20) + 13;  // past every transport's eager limit, and odd
  constexpr size_t kLarge = size_t(8) << 20;
  std::vector<uint8_t> window(std::max(kBlock * size_t(g_size), kLarge));
  ncclWindow_t win = nullptr;
  CHECK_NCCL(ncclCommWindowRegister(comm, window.data(), window.size(), &win, NCCL_WIN_DEFAULT));
  std::vector<uint8_t> mine(kBlock);
  for (size_t i = 0; i < kBlock; ++i) mine[i] = onesidedPattern(g_rank, i);
  for (int t = 0; t < g_size; ++t)
    CHECK_NCCL(ncclPutSignal(mine.data(), kBlock, ncclUint8, t, win, size_t(g_rank) * kBlock, 0, 0, 0, comm, nullptr));
  for (int t = 0; t < g_size; ++t) CHECK_NCCL(ncclSignal(t, 0, 0, 0, comm, nullptr));
  std::vector<ncclWaitSignalDesc_t> descs;
  for (int p = 0; p < g_size; ++p) descs.push_back({2, p, 0, 0});
  CHECK_NCCL(ncclWaitSignal(g_size, descs.data(), comm, nullptr));
  for (int p = 0; p < g_size; ++p)
    for (size_t i = 0; i < kBlock; ++i)
      if (window[size_t(p) * kBlock + i] != onesidedPattern(p, i)) {
        fprintf(stderr, "[rank %d] byte %zu of rank %d's put is wrong\n", g_rank, i, p);
        return 1;
      }
  // Everyone has read its window before rank 0 overwrites the last rank's.
  float x = 0;
  CHECK_NCCL(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr));

  // A put whose target is outside the library for 1 s.
  const int target = g_size - 1;
  double times[2] = {0, 0};  // [0]: when rank 0's put returned, [1]: when the target called again
  auto now = [] { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); };
  if (g_size > 1 && g_rank == 0) {
    std::vector<uint8_t> big(kLarge, 0xa5);
    CHECK_NCCL(ncclPutSignal(big.data(), kLarge, ncclUint8, target, win, 0, 0, 0, 0, comm, nullptr));
    times[0] = now();
  }
  if (g_size > 1 && g_rank == target) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    times[1] = now();
    ncclWaitSignalDesc_t one{1, 0, 0, 0};
    CHECK_NCCL(ncclWaitSignal(1, &one, comm, nullptr));
  }
  CHECK_NCCL(ncclAllReduce(times, times, 2, ncclFloat64, ncclMax, comm, nullptr));
  if (g_size > 1 && times[0] >= times[1]) {
    fprintf(stderr, "[rank %d] the put returned %.3f s after its target called again\n", g_rank, times[0] - times[1]);
    return 1;
  }
  if (g_rank == target && g_size > 1 && (window[0] != 0xa5 || window[kLarge - 1] != 0xa5)) {
    fprintf(stderr, "[rank %d] the large put did not land\n", g_rank);
    return 1;
  }
  fprintf(stderr, "[rank %d] one-sided calls exact; the put returned %.3f s before its target called again\n", g_rank,
          times[1] - times[0]);
  CHECK_NCCL(ncclCommWindowDeregister(comm, win));
  return 0;
}

}  // namespace

int main() {
  const char* rank = getenv("RANK");
  const char* size = getenv("WORLD_SIZE");
  if (!rank || !size) {
    fprintf(stderr, "mp_worker: RANK and WORLD_SIZE must be set\n");
    return 2;
  }
  g_rank = atoi(rank);
  g_size = atoi(size);
  std::string mode = getenv("TEMPO_MP_MODE") ? getenv("TEMPO_MP_MODE") : "matrix";
  if (const char* off = getenv("TEMPO_MP_PACING_OFF_RANK"); off && atoi(off) == g_rank) setenv("TEMPO_PACING", "off", 1);
  long rss0 = rssKiB();
  ncclUniqueId id;
  CHECK_NCCL(ncclGetUniqueId(&id));  // with NCCL_COMM_ID, the same id on every rank
  if (mode == "stopinit") return stopDuringInit(id);
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, g_size, id, g_rank));
  if (mode == "abort") return abortMidCollective(comm);
  if (mode == "shrink") return shrinkAfterDeath(comm);
  if (mode == "leave") return leave(comm);
  if (mode == "timeout") return timeoutLate(comm);
  if (mode == "stop") return stopMidCollective(comm);
  if (mode == "faults") return faultStream(comm);
  int failures = mode == "memory"        ? memory(comm, rss0)
                 : mode == "collectives" ? collectives(comm)
                 : mode == "skew"        ? skew(comm)
                 : mode == "onesided"    ? onesided(comm)
                                         : matrix(comm);
  CHECK_NCCL(ncclCommFinalize(comm));
  CHECK_NCCL(ncclCommDestroy(comm));
  return failures ? 1 : 0;
}
