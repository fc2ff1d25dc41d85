// mpi_<coll>_perf: the Open MPI peers of all_reduce_perf, all_gather_perf,
// reduce_scatter_perf and broadcast_perf. The same sweep, data, timing, validation and
// table (bench/common), with MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block or
// MPI_Bcast on host buffers instead of Tempo: one rank per process, started by mpirun -np N.
// float/double/int32 and sum/prod/max/min (MPI has no average); counts, in-place layouts
// and busbw as the Tempo tool of the same collective. One source, built once per
// collective with TEMPO_MPI_COLL set (0 all-reduce, 1 all-gather, 2 reduce-scatter,
// 3 broadcast from rank 0). MPI's in-place reduce-scatter reads the whole vector from, and
// leaves its block at the start of, recvbuff; MPI_Bcast has only one buffer, so both of
// broadcast's columns run it on recvbuff.
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

enum class Coll { AllReduce = 0, AllGather = 1, ReduceScatter = 2, Broadcast = 3 };
constexpr Coll kColl = Coll(TEMPO_MPI_COLL);
constexpr bool kReduces = kColl == Coll::AllReduce || kColl == Coll::ReduceScatter;
constexpr int kRoot = kColl == Coll::Broadcast ? 0 : -1;
constexpr const char* kMpiName[] = {"MPI_Allreduce", "MPI_Allgather", "MPI_Reduce_scatter_block", "MPI_Bcast"};

// Elements per call (the count argument) for a `size`-byte row, and the per-rank send and
// receive element counts.
struct Counts {
  size_t param, send, recv;
};
Counts countsFor(size_t size, size_t ts, int n) {
  const size_t all = size / ts;
  switch (kColl) {
    case Coll::AllGather: { size_t c = perRankCount16(all, ts, n); return {c, c, c * size_t(n)}; }
    case Coll::ReduceScatter: { size_t c = perRankCount16(all, ts, n); return {c, c * size_t(n), c}; }
    default: return {all, all, all};
  }
}

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
  void run(int type, int op, const Counts& c, bool inPlace, int iter);
  void benchTime(int type, int op, size_t size, bool inPlace);
  unsigned char* ptr(const HostBuffer& b, int type, size_t shift) const {
    return b.data(o_.unalign * typeSize(type)) + shift;
  }

  const Options& o_;
  Report& report_;
  const int rank_, n_;
  HostBuffer send_, recv_;
  int rep_ = 0;
};

void Peer::run(int type, int op, const Counts& c, bool inPlace, int iter) {
  const size_t ts = typeSize(type), bytes = std::max(c.send, c.recv) * ts;
  const size_t steps = bytes ? o_.maxBytes / bytes : 1;
  const size_t shift = bytes * (size_t(iter) % std::max<size_t>(steps, 1));  // as the Tempo tools
  unsigned char* r = ptr(recv_, type, shift);
  const void* s = inPlace ? MPI_IN_PLACE : static_cast<const void*>(ptr(send_, type, shift));
  const int count = int(c.param);
  switch (kColl) {
    case Coll::AllReduce:
      mpiCheck(MPI_Allreduce(s, r, count, mpiType(type), mpiOp(op), MPI_COMM_WORLD), "MPI_Allreduce");
      break;
    case Coll::AllGather:
      mpiCheck(MPI_Allgather(s, count, mpiType(type), r, count, mpiType(type), MPI_COMM_WORLD), "MPI_Allgather");
      break;
    case Coll::ReduceScatter:
      mpiCheck(MPI_Reduce_scatter_block(s, r, count, mpiType(type), mpiOp(op), MPI_COMM_WORLD),
               "MPI_Reduce_scatter_block");
      break;
    case Coll::Broadcast:
      mpiCheck(MPI_Bcast(r, count, mpiType(type), kRoot, MPI_COMM_WORLD), "MPI_Bcast");
      break;
  }
  if (o_.blocking == 1) MPI_Barrier(MPI_COMM_WORLD);  // -z 2: the MPI call is blocking already
}

void Peer::benchTime(int type, int op, size_t size, bool inPlace) {
  const size_t ts = typeSize(type);
  const Counts c = countsFor(size, ts, n_);
  const size_t sendBytes = c.send * ts, recvBytes = c.recv * ts;
  const bool inRecv = inPlace || kColl == Coll::Broadcast;  // where the input lives
  auto init = [&](int rep) {
    const DataSpec d{type, op, n_, makeSeed(type, op, kRoot, sendBytes, rep, inPlace)};
    if (!inRecv) std::memset(ptr(recv_, type, 0), 0, recvBytes);
    unsigned char* in = inRecv ? ptr(recv_, type, 0) : ptr(send_, type, 0);
    if (kColl == Coll::AllGather && inPlace) in += size_t(rank_) * c.send * ts;
    if (kColl == Coll::Broadcast) {
      if (rank_ == kRoot) prepareInput(in, c.send, 0, d, kRoot);
      else std::memset(in, 0, recvBytes);
    } else {
      prepareInput(in, c.send, 0, d, rank_);
    }
    return d;
  };
  if (o_.check) init(99);
  run(type, op, c, inPlace, 0);
  MPI_Barrier(MPI_COMM_WORLD);

  double excluded = 0;
  const double t0 = now();
  for (int iter = 0; iter < o_.iters; ++iter) {
    for (int a = 0; a < o_.aggIters; ++a) run(type, op, c, inPlace, iter * o_.aggIters + a);
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
  double algBw = 0, busBw = 0;
  switch (kColl) {
    case Coll::AllReduce:
      algBw = double(c.param * ts) / 1.0e9 / agg;
      busBw = algBw * (2.0 * (n_ - 1)) / n_;
      break;
    case Coll::AllGather:
    case Coll::ReduceScatter:
      algBw = double(c.param * ts) * n_ / 1.0e9 / agg;
      busBw = algBw * double(n_ - 1) / n_;
      break;
    case Coll::Broadcast:
      algBw = busBw = double(c.param * ts) / 1.0e9 / agg;
      break;
  }
  MPI_Barrier(MPI_COMM_WORLD);

  long long wrong = 0;
  ++rep_;
  for (int k = 0; k < o_.check; ++k) {
    const DataSpec d = init(rep_);
    const size_t u = o_.unalign * ts;
    recv_.armGuards(u, std::max(recvBytes, inPlace ? sendBytes : 0), 0x11);
    if (!inRecv) send_.armGuards(u, sendBytes, 0x22);
    run(type, op, c, inPlace, 0);
    const unsigned char* out = ptr(recv_, type, 0);
    long long mine[2] = {0, recv_.guardDamage(u, std::max(recvBytes, inPlace ? sendBytes : 0), 0x11)};
    switch (kColl) {
      case Coll::AllReduce: mine[0] = countWrongReduced(out, c.recv, 0, d); break;
      case Coll::AllGather:
        for (int j = 0; j < n_; ++j) mine[0] += countWrongInput(out + size_t(j) * c.send * ts, c.send, 0, d, j);
        break;
      case Coll::ReduceScatter: mine[0] = countWrongReduced(out, c.recv, size_t(rank_) * c.recv, d); break;
      case Coll::Broadcast: mine[0] = countWrongInput(out, c.recv, 0, d, kRoot); break;
    }
    if (!inRecv) mine[1] += send_.guardDamage(u, sendBytes, 0x22) + countWrongInput(ptr(send_, type, 0), c.send, 0, d, rank_);
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
  const size_t ts = typeSize(type);
  MPI_Barrier(MPI_COMM_WORLD);
  for (size_t size = o_.minBytes; size <= o_.maxBytes; size = size ? size * 2 : 1)
    for (int i = 0; i < o_.warmupIters; ++i) run(type, op, countsFor(size, ts, n_), false, i);
  long repeat = o_.runCycles;
  do {
    for (size_t size = o_.minBytes; size <= o_.maxBytes; size = o_.nextSize(size)) {
      const Counts c = countsFor(size, ts, n_);
      report_.rowStart(std::max(c.send, c.recv) * ts, c.param, typeName(type), kReduces ? opName(op) : "none", kRoot);
      benchTime(type, op, size, false);
      benchTime(type, op, size, true);
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
    if (!kReduces ? p == ncclSum : (o.op == kAll || o.op == p)) ops.push_back(p);
  if (types.empty()) o.notes.emplace_back("# datatype not supported by this peer (int32, float, double only)");
  if (kReduces && (o.op == kAll || o.op == ncclAvg || o.op == kMulSum))
    o.notes.emplace_back("# avg and mulsum have no MPI_Op; skipped");

  Report report(rank == 0, o, prog);
  report.openJson(argc, argv, 0);
  report.preamble({std::string("# ") + prog + ": " + kMpiName[int(kColl)] + " peer of the Tempo tool (nccl-tests table format)",
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
