#include "bench/common/launch.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifdef TEMPO_BENCH_HAVE_MPI
#include <mpi.h>
#endif

namespace tempo::bench {
namespace {

Launch::Kind g_kind = Launch::Single;

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

bool toInt(const char* s, int* out) {
  if (!s) return false;
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < 0 || v > (1 << 24)) return false;
  *out = int(v);
  return true;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// A port every rank of one job agrees on without talking: from the launcher's job id.
// Kept in [20000, 32000), below Linux's default ephemeral range.
int portFromJob() {
  std::string job;
  if (const char* j = env("OMPI_MCA_ess_base_jobid")) job = std::string("ompi:") + j;
  else if (const char* s = env("SLURM_JOB_ID")) {
    job = std::string("slurm:") + s;
    if (const char* st = env("SLURM_STEP_ID")) job += std::string(".") + st;
  }
  if (job.empty()) return 29500;
  return 20000 + int(fnv1a(job) % 12000);
}

bool fromEnv(const char* rankVar, const char* sizeVar, const char* localVar, Launch* l) {
  const char* size = env(sizeVar);
  if (!size) return false;
  if (!toInt(size, &l->nprocs) || l->nprocs < 1 || !toInt(env(rankVar), &l->proc) || l->proc >= l->nprocs) {
    std::fprintf(stderr, "tempo bench: inconsistent launcher environment: %s=%s %s=%s\n", sizeVar, size, rankVar,
                 env(rankVar) ? env(rankVar) : "(unset)");
    l->nprocs = -1;
    return true;
  }
  if (!toInt(env(localVar), &l->localRank)) l->localRank = l->proc;  // assume one host
  l->kind = Launch::Env;
  l->source = std::string(rankVar) + "/" + sizeVar;
  return true;
}

#ifdef TEMPO_BENCH_HAVE_MPI
bool startMpi(int* argc, char*** argv, Launch* l) {
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "tempo bench: MPI_Init_thread failed\n");
    return false;
  }
  MPI_Comm_size(MPI_COMM_WORLD, &l->nprocs);
  MPI_Comm_rank(MPI_COMM_WORLD, &l->proc);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, l->proc, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &l->localRank);
  MPI_Comm_free(&node);
  l->kind = Launch::Mpi;
  l->source = "MPI";
  g_kind = Launch::Mpi;
  return true;
}
#endif

}  // namespace

bool detectLaunch(int* argc, char*** argv, Launch* out) {
  Launch l;
  const char* mode = env("TEMPO_BENCH_LAUNCH");
  const bool forceEnv = mode && std::strcmp(mode, "env") == 0;
  const bool forceMpi = mode && std::strcmp(mode, "mpi") == 0;
  if (mode && !forceEnv && !forceMpi && std::strcmp(mode, "auto") != 0) {
    std::fprintf(stderr, "tempo bench: TEMPO_BENCH_LAUNCH=%s: expected auto, env or mpi\n", mode);
    return false;
  }
  const bool mpiLauncher = env("OMPI_COMM_WORLD_SIZE") || env("PMI_SIZE") || env("PMIX_RANK");
#ifdef TEMPO_BENCH_HAVE_MPI
  if (forceMpi || (mpiLauncher && !forceEnv)) {
    if (!startMpi(argc, argv, &l)) return false;
    *out = l;
    return true;
  }
#else
  (void)argc;
  (void)argv;
  if (forceMpi) {
    std::fprintf(stderr, "tempo bench: TEMPO_BENCH_LAUNCH=mpi, but this tool was built without MPI\n");
    return false;
  }
  if (mpiLauncher && !forceEnv && !env("OMPI_COMM_WORLD_RANK"))
    std::fprintf(stderr, "tempo bench: launched by an MPI launcher but built without MPI\n");
#endif
  if (fromEnv("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", &l) ||
      fromEnv("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", &l) || fromEnv("RANK", "WORLD_SIZE", "LOCAL_RANK", &l)) {
    if (l.nprocs < 0) return false;
  }
  if (l.kind == Launch::Env && l.nprocs > 1 && !env("NCCL_COMM_ID")) {
    const char* addr = env("MASTER_ADDR") ? env("MASTER_ADDR") : "127.0.0.1";
    int port = 0;
    if (env("MASTER_PORT") && (!toInt(env("MASTER_PORT"), &port) || port < 1 || port > 65535)) {
      std::fprintf(stderr, "tempo bench: MASTER_PORT=%s is not a port\n", env("MASTER_PORT"));
      return false;
    }
    if (!port) port = portFromJob();
    const std::string id = std::string(addr) + ":" + std::to_string(port);
    setenv("NCCL_COMM_ID", id.c_str(), 1);
  }
  if (l.kind == Launch::Env && l.nprocs == 1) l.kind = Launch::Single;
  g_kind = l.kind;
  *out = l;
  return true;
}

void finishLaunch(const Launch& l) {
#ifdef TEMPO_BENCH_HAVE_MPI
  if (l.kind == Launch::Mpi) MPI_Finalize();
#else
  (void)l;
#endif
}

void abortJob(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
#ifdef TEMPO_BENCH_HAVE_MPI
  if (g_kind == Launch::Mpi) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  _exit(code);
}

#ifdef TEMPO_BENCH_HAVE_MPI
void mpiBcastBytes(void* data, size_t bytes) { MPI_Bcast(data, int(bytes), MPI_BYTE, 0, MPI_COMM_WORLD); }
void mpiBarrier() { MPI_Barrier(MPI_COMM_WORLD); }

double mpiReduceDouble(double v, Reduce op) {
  if (op == Reduce::Rank0) {
    MPI_Bcast(&v, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return v;
  }
  MPI_Op mop = op == Reduce::Min ? MPI_MIN : op == Reduce::Max ? MPI_MAX : MPI_SUM;
  double out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, mop, MPI_COMM_WORLD);
  return out;
}

int64_t mpiSum(int64_t v) {
  long long in = v, out = 0;
  MPI_Allreduce(&in, &out, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return out;
}

std::vector<std::string> mpiGatherText(const std::string& mine) {
  int n = 0, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  int len = int(mine.size());
  std::vector<int> lens(me == 0 ? size_t(n) : 0), offs(lens.size());
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  int total = 0;
  for (size_t i = 0; i < lens.size(); ++i) offs[i] = total, total += lens[i];
  std::vector<char> all(size_t(total) + 1);
  MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (size_t i = 0; i < lens.size(); ++i) out.emplace_back(all.data() + offs[i], size_t(lens[i]));
  return out;
}

std::string mpiLibraryVersion() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(buf, &len);
  std::string s(buf, size_t(len));
  size_t nl = s.find_first_of(",\n");
  return nl == std::string::npos ? s : s.substr(0, nl);
}
#else
void mpiBcastBytes(void*, size_t) { abortJob(1); }
void mpiBarrier() { abortJob(1); }
double mpiReduceDouble(double, Reduce) { abortJob(1); }
int64_t mpiSum(int64_t) { abortJob(1); }
std::vector<std::string> mpiGatherText(const std::string&) { abortJob(1); }
std::string mpiLibraryVersion() { return ""; }
#endif

}  // namespace tempo::bench
