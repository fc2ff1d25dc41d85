// Ranks as real processes over libfabric (shm and tcp), through librccl.so.1.
//
// Each test spawns WORLD_SIZE copies of mp_worker with a fresh environment naming the
// transport, waits for all of them with a deadline (killing every one on timeout, so a
// hang fails the test instead of stalling it), and requires every exit status to be 0.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// Runs `n` workers with `extraEnv`, in which "%r" stands for the worker's rank; returns
// their exit codes (-1: killed on timeout).
std::vector<int> runWorkers(int n, const std::vector<std::string>& extraEnv, int timeoutSec) {
  std::string commId = "NCCL_COMM_ID=127.0.0.1:" + std::to_string(freePort());
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> env = {"RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(n), commId,
                                    "PATH=/usr/bin:/bin"};
    // A sanitized build's settings (its suppressions among them) reach the workers too.
    for (const char* name : {"ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS", "UCX_MEM_EVENTS",
                             "UCX_MEM_MALLOC_HOOKS", "UCX_MEM_MMAP_HOOK_MODE"})
      if (const char* v = getenv(name)) env.push_back(std::string(name) + "=" + v);
    for (std::string e : extraEnv) {
      if (size_t at = e.find("%r"); at != std::string::npos) e.replace(at, 2, std::to_string(r));
      env.push_back(e);
    }
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    char* argv[] = {const_cast<char*>(TEMPO_MP_WORKER), nullptr};
    pid_t pid = 0;
    EXPECT_EQ(posix_spawn(&pid, TEMPO_MP_WORKER, nullptr, nullptr, argv, envp.data()), 0);
    pids.push_back(pid);
  }
  std::vector<int> codes(size_t(n), -1);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSec);
  int left = n;
  while (left > 0 && std::chrono::steady_clock::now() < deadline) {
    for (int r = 0; r < n; ++r) {
      if (pids[size_t(r)] <= 0) continue;
      int status = 0;
      if (waitpid(pids[size_t(r)], &status, WNOHANG) == pids[size_t(r)]) {
        codes[size_t(r)] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        pids[size_t(r)] = 0;
        --left;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (pid_t p : pids)
    if (p > 0) {
      kill(p, SIGKILL);
      waitpid(p, nullptr, 0);
    }
  return codes;
}

void expectAllSucceed(const std::vector<int>& codes) {
  for (size_t r = 0; r < codes.size(); ++r)
    EXPECT_EQ(codes[r], 0) << "rank " << r << (codes[r] == -1 ? " timed out" : " failed");
}

struct Case {
  // "shm" (Tempo's), a libfabric provider ("ofi_shm", "tcp"), UCX with the transports it
  // picks ("ucx") or over tcp only ("ucx_tcp"), or "routed": every rank a host of its own
  // and TEMPO_TRANSPORT=auto's default between hosts, UCX for small messages and libfabric
  // tcp for large ones, split at 4 KiB so that most cases cross it.
  const char* transport;
  int nranks;
  const char* extraEnv;  // e.g. the shm protocol under test
  const char* label;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.transport << " " << c.nranks << " ranks " << c.extraEnv; }

// The environment that selects a case's transport, and its mode.
std::vector<std::string> envFor(const Case& c, const char* mode) {
  std::vector<std::string> env = {std::string("TEMPO_MP_MODE=") + mode};
  const std::string t = c.transport;
  if (t == "shm") {
    env.push_back("TEMPO_TRANSPORT=shm");
    // Large messages pulled by cross-memory attach unless the case says otherwise (by
    // default each receiver chooses by timings, or streams where ranks outnumber cores).
    if (!*c.extraEnv) env.push_back("TEMPO_SHM_CMA=1");
  }
  else if (t == "ucx") env.push_back("TEMPO_TRANSPORT=ucx");
  else if (t == "ucx_tcp") env.insert(env.end(), {"TEMPO_TRANSPORT=ucx", "UCX_TLS=tcp"});
  else if (t == "routed") env.insert(env.end(), {"TEMPO_HOSTNAME=host%r", "TEMPO_NET_LARGE_BYTES=4096"});
  else env.push_back("FI_PROVIDER=" + (t == "ofi_shm" ? std::string("shm") : t));
  if (*c.extraEnv) env.push_back(c.extraEnv);
  return env;
}

std::string caseName(const ::testing::TestParamInfo<Case>& p) {
  return std::string(p.param.transport) + "_" + p.param.label + std::to_string(p.param.nranks) + "ranks";
}

class MultiProcess : public ::testing::TestWithParam<Case> {};

TEST_P(MultiProcess, EveryTypeOpCountIsBitExact) {
  const Case& c = GetParam();
  expectAllSucceed(runWorkers(c.nranks, envFor(c, "matrix"), 240));
}

INSTANTIATE_TEST_SUITE_P(Shm, MultiProcess,
                         // Tempo's shm pulls large messages by cross-memory attach, streams them
                         // through its rings with TEMPO_SHM_CMA=0, or mixes the two as its
                         // timings choose with TEMPO_SHM_CMA=2.
                         ::testing::Values(Case{"shm", 2, "", ""}, Case{"shm", 3, "", ""}, Case{"shm", 4, "", ""},
                                           Case{"shm", 8, "", ""}, Case{"shm", 3, "TEMPO_SHM_CMA=0", "streamed_"},
                                           Case{"shm", 3, "TEMPO_SHM_CMA=2", "timed_"}),
                         caseName);
INSTANTIATE_TEST_SUITE_P(Libfabric, MultiProcess,
                         // libfabric shm copies through shared buffers by default (SAR); CMA is its
                         // other protocol, used when FI_SHM_DISABLE_CMA=0.
                         ::testing::Values(Case{"ofi_shm", 2, "", ""}, Case{"ofi_shm", 3, "", ""},
                                           Case{"ofi_shm", 4, "", ""}, Case{"ofi_shm", 3, "FI_SHM_DISABLE_CMA=0", "cma_"},
                                           Case{"tcp", 2, "", ""}, Case{"tcp", 3, "", ""}),
                         caseName);
#ifdef TEMPO_MP_UCX
INSTANTIATE_TEST_SUITE_P(Ucx, MultiProcess,
                         // UCX over the shared-memory transports it picks on one host, and over tcp.
                         ::testing::Values(Case{"ucx", 2, "", ""}, Case{"ucx", 4, "", ""}, Case{"ucx_tcp", 3, "", ""},
                                           Case{"routed", 3, "", ""}),
                         caseName);
#endif

// Every other collective and send/receive, over the matrix of tests/common/rank_case.h, with
// ranks as processes.
class MultiProcessCollectives : public ::testing::TestWithParam<Case> {};

TEST_P(MultiProcessCollectives, EveryCollectiveTypeCountRootPlacementIsBitExact) {
  const Case& c = GetParam();
  expectAllSucceed(runWorkers(c.nranks, envFor(c, "collectives"), 240));
}

INSTANTIATE_TEST_SUITE_P(All, MultiProcessCollectives,
                         ::testing::Values(Case{"shm", 1, "", ""}, Case{"shm", 2, "", ""}, Case{"shm", 3, "", ""},
                                           Case{"shm", 4, "", ""}, Case{"shm", 5, "", ""}, Case{"shm", 8, "", ""},
                                           Case{"shm", 4, "TEMPO_SHM_CMA=0", "streamed_"},
                                           Case{"shm", 4, "TEMPO_SHM_CMA=2", "timed_"}, Case{"ofi_shm", 3, "", ""},
                                           Case{"tcp", 3, "", ""}
#ifdef TEMPO_MP_UCX
                                           ,
                                           Case{"ucx", 3, "", ""}, Case{"ucx", 4, "", ""}, Case{"ucx_tcp", 3, "", ""},
                                           Case{"routed", 3, "", ""}
#endif
                                           ),
                         caseName);

// One-sided calls between processes: every rank puts into every rank's window, and a put
// completes while its target is outside the library.
TEST(MultiProcessOneSided, PutsLandAndNeverWaitForTheTargetsNextCall) {
#ifdef TEMPO_MP_UCX
  const char* transports[] = {"shm", "ofi_shm", "tcp", "ucx", "routed"};
#else
  const char* transports[] = {"shm", "ofi_shm", "tcp"};
#endif
  for (const char* transport : transports) {
    SCOPED_TRACE(transport);
    expectAllSucceed(runWorkers(3, envFor(Case{transport, 3, "", ""}, "onesided"), 120));
  }
}

// Every transport built, for the fault cases.
std::vector<const char*> faultTransports() {
#ifdef TEMPO_MP_UCX
  return {"shm", "ofi_shm", "tcp", "ucx", "ucx_tcp", "routed"};
#else
  return {"shm", "ofi_shm", "tcp"};
#endif
}

// Default selection between processes of one host is Tempo's shm.
TEST(MultiProcessAuto, DefaultTransportSelection) {
  expectAllSucceed(runWorkers(3, {"TEMPO_MP_MODE=matrix"}, 240));
}

// ncclCommAbort from a second thread of one rank mid all-reduce: it returns within 10 s, the
// call in flight fails, and every other rank's call fails instead of hanging.
TEST(MultiProcessAbort, AbortFromAnotherThreadMidCollective) {
  for (const char* transport : faultTransports()) {
    SCOPED_TRACE(transport);
    expectAllSucceed(runWorkers(3, envFor(Case{transport, 3, "", ""}, "abort"), 60));
  }
}

// A rank that finalizes and destroys its communicator while the others still finish
// work it is done with is no failure; one that leaves before a collective the
// others go on to call is, and they fail with ncclRemoteError instead of hanging.
TEST(MultiProcessLeave, RankDoneWithItsPartMayLeaveWhileOthersFinish) {
  for (const char* transport : faultTransports()) {
    SCOPED_TRACE(transport);
    expectAllSucceed(runWorkers(4, envFor(Case{transport, 4, "", ""}, "leave"), 60));
  }
}

TEST(MultiProcessLeave, RankThatLeavesACollectiveEarlyFailsTheOthersCall) {
  for (const char* transport : faultTransports()) {
    SCOPED_TRACE(transport);
    std::vector<std::string> env = envFor(Case{transport, 4, "", ""}, "leave");
    env.push_back("TEMPO_MP_LEAVE_EARLY=1");
    expectAllSucceed(runWorkers(4, env, 60));
  }
}

// TEMPO_COLL_TIMEOUT: a collective that one rank joins too late fails with ncclTimeout on
// the others (and the cause reaches the late one), rather than waiting for it.
TEST(MultiProcessTimeout, CollectiveThatOutlivesTheTimeoutFailsWithNcclTimeout) {
  for (const char* transport : {"shm", "tcp"}) {
    SCOPED_TRACE(transport);
    std::vector<std::string> env = envFor(Case{transport, 3, "", ""}, "timeout");
    env.push_back("TEMPO_COLL_TIMEOUT=1");
    expectAllSucceed(runWorkers(3, env, 60));
  }
}

// A rank that stops responding without exiting or closing anything (SIGSTOP) while the
// others wait for it in a collective: its successor's heartbeat watch finds it, and every
// survivor's call fails with ncclRemoteError within TEMPO_PEER_TIMEOUT + 2 s, whatever the
// transport's own timeouts. Resumed (SIGCONT) after that, the stopped rank does not carry
// on alone: its own call fails as well.
TEST(MultiProcessHeartbeat, RankThatStopsRespondingFailsTheOthersCallWithinThePeerTimeout) {
  for (const char* transport : {"shm", "tcp"}) {
    SCOPED_TRACE(transport);
    std::vector<std::string> env = envFor(Case{transport, 3, "", ""}, "stop");
    env.push_back("TEMPO_PEER_TIMEOUT=2");
    std::vector<int> codes = runWorkers(3, env, 60);
    EXPECT_EQ(codes[0], 0) << "rank 0";
    EXPECT_EQ(codes[1], 0) << "rank 1";
    EXPECT_EQ(codes[2], 0) << "the stopped rank, resumed, must fail its own call";
  }
}

// The process that hosts the bootstrap root stops (SIGSTOP) during init: the rank waiting
// for its table hears no keepalive, and the rank that connects afterwards gets no
// challenge. Both inits fail with ncclRemoteError within TEMPO_PEER_TIMEOUT + 2 s rather
// than at TEMPO_INIT_TIMEOUT.
TEST(MultiProcessHeartbeat, RootThatStopsRespondingDuringInitFailsTheOthersInitWithinThePeerTimeout) {
  std::vector<std::string> env = envFor(Case{"shm", 3, "", ""}, "stopinit");
  env.push_back("TEMPO_PEER_TIMEOUT=2");
  std::vector<int> codes = runWorkers(3, env, 60);
  EXPECT_EQ(codes[0], 128 + SIGKILL) << "the stopped rank is killed by its own child";
  EXPECT_EQ(codes[1], 0) << "rank 1";
  EXPECT_EQ(codes[2], 0) << "rank 2";
}

// TEMPO_FAULT between processes: flipped bits end every rank's stream of all-reduces with
// an error and no wrong result; a slow wire whose messages overtake each other leaves the
// whole stream exact.
TEST(MultiProcessFaults, CorruptionIsAnErrorOnEveryRankAndASlowWireIsHarmless) {
  for (const char* transport : {"shm", "tcp"}) {
    SCOPED_TRACE(transport);
    std::vector<std::string> env = envFor(Case{transport, 3, "", ""}, "faults");
    env.insert(env.end(), {"TEMPO_FAULT=corrupt=0.01,seed=%r", "TEMPO_MP_EXPECT_ERROR=1"});
    expectAllSucceed(runWorkers(3, env, 120));
    env = envFor(Case{transport, 3, "", ""}, "faults");
    env.push_back("TEMPO_FAULT=delay=10,jitter=100,reorder=0.1,seed=%r");
    expectAllSucceed(runWorkers(3, env, 120));
  }
}

// reliability.md F6: a rank dies; the survivors' call fails, they shrink the communicator
// with NCCL_SHRINK_ABORT and carry on, bit-exact, without it.
TEST(MultiProcessShrink, SurvivorsShrinkAwayADeadRankAndCarryOn) {
  for (const char* transport : faultTransports()) {
    if (!strcmp(transport, "ofi_shm")) continue;  // tcp stands for libfabric here
    SCOPED_TRACE(transport);
    expectAllSucceed(runWorkers(4, envFor(Case{transport, 4, "", ""}, "shrink"), 90));
  }
}

// pacing.md 1.2 and 1.7: the skew statistics find a persistent straggler (duration-based,
// no clock synchronisation); with pacing on, by either actuator, the early ranks are
// delayed, the straggler least, and every result is bitwise what it is without pacing.
TEST(MultiProcessSkew, StragglerIsFoundAndPacingLeavesResultsBitwiseIdentical) {
  const std::string dir = ::testing::TempDir();
  // Observe, then pacing on with each actuator: the entry gate and injection pacing.
  const char* modes[][2] = {{"observe", "gate"}, {"on", "gate"}, {"on", "inject"}};
  std::vector<std::string> hashes[3];
  for (int m = 0; m < 3; ++m) {
    const std::string file = dir + "/tempo_skew_hash_" + std::to_string(getpid()) + "_" + std::to_string(m) + "_%r";
    expectAllSucceed(runWorkers(4,
                                {"TEMPO_MP_MODE=skew", "TEMPO_TRANSPORT=shm", "TEMPO_PACING_HZ=50",
                                 "TEMPO_PACING_MIN_NODES=1", std::string("TEMPO_PACING=") + modes[m][0],
                                 std::string("TEMPO_PACING_ACTUATOR=") + modes[m][1], "TEMPO_MP_HASH_FILE=" + file},
                                120));
    for (int r = 0; r < 4; ++r) {
      std::string path = file;
      path.replace(path.find("%r"), 2, std::to_string(r));
      FILE* f = fopen(path.c_str(), "r");
      char line[64] = {};
      if (f) {
        if (!fgets(line, sizeof line, f)) line[0] = 0;
        fclose(f);
        unlink(path.c_str());
      }
      hashes[m].push_back(line);
    }
  }
  for (int r = 0; r < 4; ++r) {
    EXPECT_FALSE(hashes[0][size_t(r)].empty()) << "rank " << r;
    EXPECT_EQ(hashes[0][size_t(r)], hashes[1][size_t(r)]) << "rank " << r << ": results differ with the gate";
    EXPECT_EQ(hashes[0][size_t(r)], hashes[2][size_t(r)]) << "rank " << r << ": results differ with injection pacing";
    EXPECT_EQ(hashes[0][size_t(r)], hashes[0][0]) << "rank " << r << " disagrees with rank 0";
  }
}

// The same straggler behind broadcasts, which have no common exit: the library measures
// them by arrivals on rank 0's clock, every rank playing a host of its own (so its offset
// is probed at init over the network transport).
TEST(MultiProcessSkew, StragglerBehindBroadcastsIsFoundByArrivalsOnRankZerosClock) {
  expectAllSucceed(runWorkers(4,
                              {"TEMPO_MP_MODE=skew", "TEMPO_MP_SKEW_BROADCAST=1", "TEMPO_HOSTNAME=host%r",
                               "TEMPO_PACING_HZ=50", "TEMPO_PACING=observe"},
                              120));
}

// TEMPO_PACING=off on one rank only would leave the others' telemetry exchange waiting:
// every rank's init refuses it with ncclInvalidUsage instead.
TEST(MultiProcessSkew, PacingOffOnSomeRanksOnlyIsRefusedAtInit) {
  std::vector<int> codes = runWorkers(3, {"TEMPO_MP_MODE=matrix", "TEMPO_TRANSPORT=shm", "TEMPO_MP_PACING_OFF_RANK=1"}, 60);
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 2) << "rank " << r << " should fail its init";
}

// NCCL_COMM_ID jobs, whose id carries no secret, prove TEMPO_SECRET instead: ranks that
// share it initialise and run; where one differs no rank is admitted with the wrong one, and
// every init fails at TEMPO_INIT_TIMEOUT rather than mixing two jobs.
TEST(MultiProcessSecret, CommIdJobsAdmitOnlyRanksThatProveTheSameTempoSecret) {
  expectAllSucceed(runWorkers(3, {"TEMPO_MP_MODE=matrix", "TEMPO_TRANSPORT=shm", "TEMPO_SECRET=correct horse"}, 120));
  std::vector<int> codes =
      runWorkers(3, {"TEMPO_MP_MODE=matrix", "TEMPO_TRANSPORT=shm", "TEMPO_SECRET=job %r", "TEMPO_INIT_TIMEOUT=3"}, 60);
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 2) << "rank " << r << " should fail its init";
}

// 8 ranks: at most 64 MiB of library host memory each, and flat RSS over 10,000
// back-to-back collectives (the worker measures and fails itself).
TEST(MultiProcessMemory, BoundedAndFlatOverTenThousandCollectives) {
  expectAllSucceed(runWorkers(8, {"TEMPO_MP_MODE=memory"}, 240));
}

}  // namespace
