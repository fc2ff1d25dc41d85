// tempo-run: starts the N local processes of one job, without MPI.
//
//   tempo-run -n N [--timeout SEC] [--port P] [--bind-to core|none] -- cmd args...
//
// Contract:
//  - Forks N children that exec `cmd args...` with RANK (0..N-1), WORLD_SIZE=N,
//    LOCAL_RANK=RANK, LOCAL_WORLD_SIZE=N, MASTER_ADDR=127.0.0.1 and MASTER_PORT set. The
//    port is --port P, else a free port found by binding port 0 on 127.0.0.1 (free when
//    chosen, not reserved). Variables of other launchers that would take precedence
//    (OMPI_COMM_WORLD_*, PMI_SIZE/PMI_RANK/PMIX_RANK, SLURM_PROCID/NTASKS/LOCALID) are
//    removed from the children's environment; everything else is inherited, stdin/stdout/
//    stderr included.
//  - --bind-to core pins child k to the k-th CPU of tempo-run's own affinity mask (round
//    robin when N exceeds it); none leaves the mask alone. The default binds to cores when
//    N <= the CPUs available and not otherwise, as mpirun does: left unbound, the
//    scheduler sometimes keeps two polling ranks on one CPU for the whole job, which made
//    small collectives 7x slower on the 2-core machines measured.
//  - Each child runs in its own process group, so a signal sent to the group reaches the
//    child's own descendants too, and the terminal's Ctrl-C reaches tempo-run only.
//  - Waits for all children. When one exits non-zero or is killed by a signal, the others
//    get SIGTERM, and SIGKILL 3 s later if still alive; tempo-run then exits with that
//    first child's status (its exit code, or 128+signal).
//  - --timeout SEC: when the job has run SEC seconds, every child gets SIGTERM, then SIGKILL
//    3 s later, and tempo-run exits 124.
//  - SIGINT, SIGTERM and SIGHUP sent to tempo-run are forwarded to every child's group (the
//    same 3 s SIGKILL fallback applies).
//  - Never leaves orphans: children die with tempo-run (PR_SET_PDEATHSIG SIGKILL), and once
//    all children are reaped, whatever is left in their process groups is killed.
//  - Exit 0 when every child exited 0; 2 for a usage error; 127 from a child that could not
//    exec `cmd`.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr double kKillGraceSec = 3.0;

enum class Bind { Auto, Core, None };

struct Args {
  int n = 0;
  Bind bind = Bind::Auto;
  double timeoutSec = 0;
  int port = 0;
  char** cmd = nullptr;
};

void usage() {
  std::fprintf(stderr, "usage: tempo-run -n N [--timeout SEC] [--port P] [--bind-to core|none] -- cmd args...\n");
}

bool parseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "tempo-run: %s needs a value\n", name);
        return nullptr;
      }
      return argv[++i];
    };
    char* end = nullptr;
    if (s == "--") {
      if (i + 1 >= argc) break;
      a->cmd = argv + i + 1;
      break;
    } else if (s == "-n" || s == "--np") {
      const char* v = value("-n");
      if (!v) return false;
      a->n = int(std::strtol(v, &end, 10));
      if (*end || a->n < 1 || a->n > 4096) return std::fprintf(stderr, "tempo-run: bad -n '%s'\n", v), false;
    } else if (s == "--timeout") {
      const char* v = value("--timeout");
      if (!v) return false;
      a->timeoutSec = std::strtod(v, &end);
      if (*end || !(a->timeoutSec > 0)) return std::fprintf(stderr, "tempo-run: bad --timeout '%s'\n", v), false;
    } else if (s == "--port") {
      const char* v = value("--port");
      if (!v) return false;
      a->port = int(std::strtol(v, &end, 10));
      if (*end || a->port < 1 || a->port > 65535) return std::fprintf(stderr, "tempo-run: bad --port '%s'\n", v), false;
    } else if (s == "--bind-to") {
      const char* v = value("--bind-to");
      if (!v) return false;
      if (std::strcmp(v, "core") == 0) a->bind = Bind::Core;
      else if (std::strcmp(v, "none") == 0) a->bind = Bind::None;
      else return std::fprintf(stderr, "tempo-run: bad --bind-to '%s' (core or none)\n", v), false;
    } else if (s == "-h" || s == "--help") {
      usage();
      std::exit(0);
    } else {
      std::fprintf(stderr, "tempo-run: unknown argument '%s'\n", s.c_str());
      return false;
    }
  }
  if (a->n < 1 || !a->cmd) {
    usage();
    return false;
  }
  return true;
}

int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0)
    port = ntohs(sa.sin_port);
  close(fd);
  return port;
}

double nowSec() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

void onSigchld(int) {}  // SIGCHLD must not be ignored for sigtimedwait to see it

struct Child {
  pid_t pid = -1;
  int rank = 0;
  bool alive = false;
};

// The CPUs this process may run on, in ascending order (empty if unknown).
std::vector<int> allowedCpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

[[noreturn]] void execChild(const Args& a, int rank, int port, pid_t parent, const sigset_t& oldMask, int cpu) {
  setpgid(0, 0);
  if (cpu >= 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0)
      std::fprintf(stderr, "tempo-run: rank %d: cannot bind to CPU %d: %s\n", rank, cpu, std::strerror(errno));
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);  // tempo-run already died
  signal(SIGCHLD, SIG_DFL);
  sigprocmask(SIG_SETMASK, &oldMask, nullptr);
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                        "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID",
                        "SLURM_NTASKS", "SLURM_LOCALID"})
    unsetenv(v);
  const std::string r = std::to_string(rank), n = std::to_string(a.n), p = std::to_string(port);
  setenv("RANK", r.c_str(), 1);
  setenv("LOCAL_RANK", r.c_str(), 1);
  setenv("WORLD_SIZE", n.c_str(), 1);
  setenv("LOCAL_WORLD_SIZE", n.c_str(), 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", p.c_str(), 1);
  execvp(a.cmd[0], a.cmd);
  std::fprintf(stderr, "tempo-run: cannot run %s: %s\n", a.cmd[0], std::strerror(errno));
  _exit(127);
}

class Job {
 public:
  explicit Job(const Args& a) : a_(a) {}
  int run();

 private:
  void signalAll(int sig) {
    for (const Child& c : children_)
      if (c.alive) killpg(c.pid, sig);
  }
  void terminate(double now) {
    if (killAt_ > 0) return;
    signalAll(SIGTERM);
    killAt_ = now + kKillGraceSec;
  }
  void reap(double now);

  const Args& a_;
  std::vector<Child> children_;
  int alive_ = 0;
  int firstFailure_ = 0;  // exit status of the first child that failed
  bool timedOut_ = false;
  double killAt_ = 0;     // when SIGKILL follows SIGTERM; 0 = not terminating
};

void Job::reap(double now) {
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (Child& c : children_) {
      if (c.pid != pid || !c.alive) continue;
      c.alive = false;
      --alive_;
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      if (code != 0 && firstFailure_ == 0 && !timedOut_) {
        firstFailure_ = code;
        if (alive_ > 0 && killAt_ == 0)  // not a casualty of our own SIGTERM / forwarding
          std::fprintf(stderr, "tempo-run: rank %d (pid %d) %s %d; terminating the other %d\n", c.rank, int(pid),
                       WIFEXITED(status) ? "exited with code" : "was killed by signal",
                       WIFEXITED(status) ? code : WTERMSIG(status), alive_);
        terminate(now);
      }
    }
  }
}

int Job::run() {
  int port = a_.port ? a_.port : freePort();
  if (port <= 0) {
    std::fprintf(stderr, "tempo-run: cannot find a free port on 127.0.0.1: %s\n", std::strerror(errno));
    return 2;
  }
  sigset_t set, oldMask;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
  struct sigaction sa{};
  sa.sa_handler = onSigchld;
  sigaction(SIGCHLD, &sa, nullptr);
  sigprocmask(SIG_BLOCK, &set, &oldMask);

  const std::vector<int> cpus = allowedCpus();
  const bool bind = !cpus.empty() && (a_.bind == Bind::Core || (a_.bind == Bind::Auto && size_t(a_.n) <= cpus.size()));
  const pid_t self = getpid();
  const double start = nowSec();
  for (int r = 0; r < a_.n; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      std::fprintf(stderr, "tempo-run: fork failed: %s\n", std::strerror(errno));
      firstFailure_ = 1;
      terminate(nowSec());
      break;
    }
    if (pid == 0) execChild(a_, r, port, self, oldMask, bind ? cpus[size_t(r) % cpus.size()] : -1);
    setpgid(pid, pid);  // also done by the child; whichever runs first wins
    children_.push_back({pid, r, true});
    ++alive_;
  }

  while (alive_ > 0) {
    const double now = nowSec();
    reap(now);
    if (alive_ == 0) break;
    if (killAt_ > 0 && now >= killAt_) {
      signalAll(SIGKILL);
      killAt_ = now + 3600;  // SIGKILL cannot be ignored; just keep reaping
    }
    if (a_.timeoutSec > 0 && !timedOut_ && now - start >= a_.timeoutSec) {
      std::fprintf(stderr, "tempo-run: timeout after %g s; killing %d processes\n", a_.timeoutSec, alive_);
      timedOut_ = true;
      terminate(now);
    }
    double wait = 0.25;  // also a safety net should a SIGCHLD be missed
    if (killAt_ > 0) wait = std::min(wait, std::max(0.0, killAt_ - now));
    if (a_.timeoutSec > 0 && !timedOut_) wait = std::min(wait, std::max(0.0, start + a_.timeoutSec - now));
    timespec ts{time_t(wait), long((wait - std::floor(wait)) * 1e9)};
    siginfo_t info;
    const int sig = sigtimedwait(&set, &info, &ts);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      signalAll(sig);
      if (killAt_ == 0) killAt_ = nowSec() + kKillGraceSec;
    }
  }
  for (const Child& c : children_) killpg(c.pid, SIGKILL);  // leftovers in the groups
  if (timedOut_) return 124;
  return firstFailure_;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parseArgs(argc, argv, &a)) return 2;
  return Job(a).run();
}
