// mpi_allreduce_perf: the Open MPI peer of all_reduce_perf. The same sweep, data, timing,
// validation and table (bench/common), with MPI_Allreduce on host buffers instead of Tempo:
// one rank per process, started by mpirun -np N. float/double/int32 and sum/prod/max/min
// (MPI has no average); busbw = algbw * 2(n-1)/n, as all_reduce_perf.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <vector>

#include "bench/common/buffers.h"
#include "bench/common/options.h"
#include "bench/common/report.h"
#include "bench/common/types.h"
#include "bench/common/verify.h"

namespace {

using namespace tempo::bench;

MPI_Datatype mpiType(int t) {
  switch (t) {
    case ncclInt32: return MPI_INT32_T;
    case ncclFloat32: return MPI_FLOAT;
    case ncclFloat64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op mpiOp(int op) {
  switch (op) {
    case ncclSum: return MPI_SUM;
    case ncclProd: return MPI_PROD;
    case ncclMax: return MPI_MAX;
    case ncclMin: return MPI_MIN;
    default: return MPI_OP_NULL;
  }
}

void mpiCheck(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  std::fprintf(stderr, "%s: MPI failure in %s: %s\n", shortHostName().c_str(), what, msg);
  MPI_Abort(MPI_COMM_WORLD, 3);
}

double now() { return MPI_Wtime(); }

class Peer {
 public:
  Peer(const Options& o, Report& r, int rank, int nranks)
      : o_(o), report_(r), rank_(rank), n_(nranks), send_(o.maxBytes, o.unalign * 8), recv_(o.maxBytes, o.unalign * 8) {}

  bool ok() const { return send_.ok() && recv_.ok(); }
  void timeTest(int type, int op);
  double bwSum = 0;
  int bwCount = 0;
  int64_t oob = 0;

 private:
  void allreduce(int type, int op, size_t count, bool inPlace, int iter);
  void benchTime(int type, int op, size_t count, bool inPlace);
  unsigned char* ptr(const HostBuffer& b, int type, size_t shift) const {
    return b.data(o_.unalign * typeSize(type)) + shift;
  }

  const Options& o_;
  Report& report_;
  const int rank_, n_;
  HostBuffer send_, recv_;
  int rep_ = 0;
};

void Peer::allreduce(int type, int op, size_t count, bool inPlace, int iter) {
  const size_t bytes = count * typeSize(type);
  const size_t steps = bytes ? o_.maxBytes / bytes : 1;
  const size_t shift = bytes * (size_t(iter) % std::max<size_t>(steps, 1));  // as all_reduce_perf
  unsigned char* r = ptr(recv_, type, shift);
  const void* s = inPlace ? MPI_IN_PLACE : static_cast<const void*>(ptr(send_, type, shift));
  mpiCheck(MPI_Allreduce(s, r, int(count), mpiType(type), mpiOp(op), MPI_COMM_WORLD), "MPI_Allreduce");
  if (o_.blocking == 1) MPI_Barrier(MPI_COMM_WORLD);  // -z 2: MPI_Allreduce is blocking already
}

void Peer::benchTime(int type, int op, size_t count, bool inPlace) {
  const size_t ts = typeSize(type), bytes = count * ts;
  auto init = [&](int rep) {
    const DataSpec d{type, op, n_, makeSeed(type, op, -1, bytes, rep, inPlace)};
    unsigned char* in = inPlace ? ptr(recv_, type, 0) : ptr(send_, type, 0);
    if (!inPlace) std::memset(ptr(recv_, type, 0), 0, bytes);
    prepareInput(in, count, 0, d, rank_);
    return d;
  };
  if (o_.check) init(99);
  allreduce(type, op, count, inPlace, 0);
  MPI_Barrier(MPI_COMM_WORLD);

  double excluded = 0;
  const double t0 = now();
  for (int iter = 0; iter < o_.iters; ++iter) {
    for (int a = 0; a < o_.aggIters; ++a) allreduce(type, op, count, inPlace, iter * o_.aggIters + a);
    if (o_.blocking == 3) {
      const double b0 = now();
      MPI_Barrier(MPI_COMM_WORLD);
      excluded += now() - b0;
    }
  }
  double sec = (now() - t0 - excluded) / (double(o_.iters) * o_.aggIters);
  double agg = 0;
  switch (o_.average) {
    case 0: agg = sec; MPI_Bcast(&agg, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD); break;
    case 2: MPI_Allreduce(&sec, &agg, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD); break;
    case 3: MPI_Allreduce(&sec, &agg, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD); break;
    default: MPI_Allreduce(&sec, &agg, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); agg /= n_; break;
  }
  const double algBw = double(bytes) / 1.0e9 / agg, busBw = algBw * (2.0 * (n_ - 1)) / n_;
  MPI_Barrier(MPI_COMM_WORLD);

  long long wrong = 0;
  ++rep_;
  for (int c = 0; c < o_.check; ++c) {
    const DataSpec d = init(rep_);
    const size_t u = o_.unalign * ts;
    recv_.armGuards(u, bytes, 0x11);
    if (!inPlace) send_.armGuards(u, bytes, 0x22);
    allreduce(type, op, count, inPlace, 0);
    long long mine[2] = {countWrongReduced(ptr(recv_, type, 0), count, 0, d),
                         recv_.guardDamage(u, bytes, 0x11)};
    if (!inPlace) mine[1] += send_.guardDamage(u, bytes, 0x22) + countWrongInput(ptr(send_, type, 0), count, 0, d, rank_);
    long long all[2] = {0, 0};
    MPI_Allreduce(mine, all, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    wrong = all[0];
    oob += all[1];
    if (wrong) break;
  }
  if (wrong) ++oob;  // as the Tempo tools: one per failed measurement
  report_.rowPart(agg * 1e6, algBw, busBw, wrong, !inPlace);
  bwSum += busBw;
  ++bwCount;
}

void Peer::timeTest(int type, int op) {
  MPI_Barrier(MPI_COMM_WORLD);
  for (size_t size = o_.minBytes; size <= o_.maxBytes; size = size ? size * 2 : 1)
    for (int i = 0; i < o_.warmupIters; ++i) allreduce(type, op, size / typeSize(type), false, i);
  long repeat = o_.runCycles;
  do {
    for (size_t size = o_.minBytes; size <= o_.maxBytes; size = o_.nextSize(size)) {
      const size_t count = size / typeSize(type);
      report_.rowStart(count * typeSize(type), count, typeName(type), opName(op), -1);
      benchTime(type, op, count, false);
      benchTime(type, op, count, true);
      report_.rowEnd();
    }
  } while (--repeat);
}

std::string mpiVersion() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(buf, &len);
  std::string s(buf, size_t(len));
  const size_t cut = s.find_first_of(",\n");
  return cut == std::string::npos ? s : s.substr(0, cut);
}

std::vector<std::string> gatherLines(const std::string& mine, int rank, int n) {
  std::vector<char> all(rank == 0 ? size_t(n) * 512 : 0);
  char line[512] = {};
  std::snprintf(line, sizeof line, "%s", mine.c_str());
  MPI_Gather(line, 512, MPI_CHAR, all.data(), 512, MPI_CHAR, 0, MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (int r = 0; rank == 0 && r < n; ++r) out.emplace_back(all.data() + size_t(r) * 512);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  setlinebuf(stdout);
  const char* prog = program_invocation_short_name;
  Options o;
  switch (parseOptions(argc, argv, ToolInfo{prog, true}, &o)) {
    case ParseResult::Exit0: return 0;
    case ParseResult::Error: return 2;
    case ParseResult::Ok: break;
  }
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm node;
  int localRank = 0;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &localRank);
  MPI_Comm_free(&node);

  std::vector<int> types, ops;
  const int peerTypes[] = {ncclInt32, ncclFloat32, ncclFloat64};
  const int peerOps[] = {ncclSum, ncclProd, ncclMax, ncclMin};
  for (int t : peerTypes)
    if (o.type == kAll || o.type == t) types.push_back(t);
  for (int p : peerOps)
    if (o.op == kAll || o.op == p) ops.push_back(p);
  if (types.empty()) o.notes.emplace_back("# datatype not supported by this peer (int32, float, double only)");
  if (o.op == kAll || o.op == ncclAvg || o.op == kMulSum)
    o.notes.emplace_back("# avg and mulsum have no MPI_Op; skipped");

  Report report(rank == 0, o, prog);
  report.openJson(argc, argv, 0);
  report.preamble({"# mpi_allreduce_perf: MPI_Allreduce peer of all_reduce_perf (nccl-tests table format)",
                   "# MPI library: " + mpiVersion()});
  const std::string host = shortHostName();
  report.devices(gatherLines(rankLine(rank, 0, int(getpid()), host.c_str(), localRank, "host memory"), rank, n));
  report.header();

  Peer peer(o, report, rank, n);
  if (!peer.ok()) {
    std::fprintf(stderr, "out of memory allocating %zu-byte buffers\n", o.maxBytes);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  for (int t : types)
    for (int p : ops) peer.timeTest(t, p);

  const bool bwFailed = report.footer(peer.oob, peer.bwCount ? peer.bwSum / peer.bwCount : 0.0, "", "");
  MPI_Finalize();
  return (peer.oob || bwFailed) ? 1 : 0;
}
