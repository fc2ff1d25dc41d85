#include "bench/common/options.h"

#include <getopt.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bench/common/types.h"

namespace tempo::bench {

double parseSize(const char* s) {
  double size;
  char unit;
  int n = std::sscanf(s, "%lf %1c", &size, &unit);
  if (n == 1) return size;
  if (n != 2) return -1.0;
  switch (unit) {
    case 'G': case 'g': return size * 1024 * 1024 * 1024;
    case 'M': case 'm': return size * 1024 * 1024;
    case 'K': case 'k': return size * 1024;
    default: return -1.0;
  }
}

size_t Options::nextSize(size_t size) const {
  // nccl-tests multiplies or adds; a zero start would never grow, so 0 is followed by 1.
  if (stepFactor > 1) return size ? size * stepFactor : 1;
  return size + stepBytes;
}

namespace {

const option kLongOpts[] = {
    {"nthreads", required_argument, nullptr, 't'},
    {"ngpus", required_argument, nullptr, 'g'},
    {"minbytes", required_argument, nullptr, 'b'},
    {"maxbytes", required_argument, nullptr, 'e'},
    {"stepbytes", required_argument, nullptr, 'i'},
    {"stepfactor", required_argument, nullptr, 'f'},
    {"iters", required_argument, nullptr, 'n'},
    {"agg_iters", required_argument, nullptr, 'm'},
    {"warmup_iters", required_argument, nullptr, 'w'},
    {"run_cycles", required_argument, nullptr, 'N'},
    {"parallel_init", required_argument, nullptr, 'p'},
    {"per_iter_timing", required_argument, nullptr, 'I'},
    {"per_iter_skip", required_argument, nullptr, 'K'},
    {"check", required_argument, nullptr, 'c'},
    {"op", required_argument, nullptr, 'o'},
    {"datatype", required_argument, nullptr, 'd'},
    {"root", required_argument, nullptr, 'r'},
    {"blocking", required_argument, nullptr, 'z'},
    {"stream_null", required_argument, nullptr, 'y'},
    {"timeout", required_argument, nullptr, 'T'},
    {"cudagraph", required_argument, nullptr, 'G'},
    {"report_cputime", required_argument, nullptr, 'C'},
    {"report_timestamps", required_argument, nullptr, 'S'},
    {"output_file", required_argument, nullptr, 'J'},
    {"average", required_argument, nullptr, 'a'},
    {"local_register", required_argument, nullptr, 'R'},
    {"cta_policy", required_argument, nullptr, 'x'},
    {"device_implementation", required_argument, nullptr, 'D'},
    {"device_cta_count", required_argument, nullptr, 'V'},
    {"memory", required_argument, nullptr, 'M'},
    {"unalign", required_argument, nullptr, 'u'},
    // rccl-tests only
    {"memory_type", required_argument, nullptr, 'Y'},
    {"stress_cycles", required_argument, nullptr, 's'},
    {"out_of_place", required_argument, nullptr, 'O'},
    {"delay_inout_place", required_argument, nullptr, 'q'},
    {"cache_flush", required_argument, nullptr, 'F'},
    {"rotating_tensor", required_argument, nullptr, 'E'},
    {"output_algo_proto_channels", required_argument, nullptr, 'A'},
    {"rccl_output_file", required_argument, nullptr, 'X'},
    {"output_format", required_argument, nullptr, 'Z'},
    {"help", no_argument, nullptr, 'h'},
    {nullptr, 0, nullptr, 0},
};
constexpr const char* kShortOpts = "t:g:b:e:i:f:n:m:w:N:p:I:K:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:u:Y:s:O:q:F:E:A:X:Z:";

const char* longName(int c) {
  for (const option* o = kLongOpts; o->name; ++o)
    if (o->val == c) return o->name;
  return "?";
}

void usage(const char* prog) {
  std::printf(
      "USAGE: %s \n\t"
      "[-t,--nthreads <num threads>] \n\t"
      "[-g,--ngpus <gpus per thread>] \n\t"
      "[-b,--minbytes <min size in bytes>] \n\t"
      "[-e,--maxbytes <max size in bytes>] \n\t"
      "[-i,--stepbytes <increment size>] \n\t"
      "[-f,--stepfactor <increment factor>] \n\t"
      "[-n,--iters <iteration count>] \n\t"
      "[-m,--agg_iters <aggregated iteration count>] \n\t"
      "[-w,--warmup_iters <warmup iteration count>] \n\t"
      "[-N,--run_cycles <cycle count> run & print each cycle (default: 1; 0=infinite)] \n\t"
      "[-p,--parallel_init <0/1>] \n\t"
      "[-c,--check <check iteration count>] \n\t"
      "[-o,--op <sum/prod/min/max/avg/mulsum/all>] \n\t"
      "[-d,--datatype <nccltype/all>] \n\t"
      "[-r,--root <root/all>] \n\t"
      "[-z,--blocking <0/1/2/3>] \n\t"
      "[-y,--stream_null <0/1>] \n\t"
      "[-T,--timeout <time in seconds>] \n\t"
      "[-G,--cudagraph <num graph launches>] (ignored: host memory) \n\t"
      "[-C,--report_cputime <0/1>] \n\t"
      "[-S,--report_timestamps <0/1> report timestamps (default 0)] \n\t"
      "[-J,--output_file <file> write output to filepath, if accessible. Infer type from suffix (only json supported presently.)] \n\t"
      "[-a,--average <0/1/2/3> report average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>] \n\t"
      "[-R,--local_register <0/1/2>] register send/recv buffers with ncclCommRegister (2: as 1) \n\t"
      "[-x,--cta_policy <0/1/2>] (ignored) \n\t"
      "[-D,--device_implementation <n>] (ignored) \n\t"
      "[-V,--device_cta_count <n>] (ignored) \n\t"
      "[-M,--memory_report <0/1> enable memory usage report (default: 0)] \n\t"
      "[-u,--unalign <num elements> misalign buffers (default: 0)] \n\t"
      "[-Y,--memory_type <coarse/fine/host> device (coarse, fine) or host buffers (default: device where there is a GPU)] \n\t"
      "[-h,--help]\n"
      "Ranks = processes (mpirun, or RANK/WORLD_SIZE e.g. from tempo-run) x threads x gpus.\n",
      prog);
}

bool parseInt(const char* s, long lo, long hi, long* out) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 0);
  if (end == s || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace

ParseResult parseOptions(int argc, char** argv, const ToolInfo& tool, Options* o) {
  bool noted[128] = {};
  auto ignore = [&](int c, const char* why) {
    if (noted[c & 127]) return;
    noted[c & 127] = true;
    char buf[160];
    std::snprintf(buf, sizeof buf, "# option -%c (--%s) ignored: %s", c, longName(c), why);
    o->notes.emplace_back(buf);
  };
  auto bad = [&](int c, const char* v) {
    std::fprintf(stderr, "%s: invalid value '%s' for -%c (--%s)\n", tool.name, v, c, longName(c));
    return ParseResult::Error;
  };
  optind = 1;
  int c;
  while ((c = getopt_long(argc, argv, kShortOpts, kLongOpts, nullptr)) != -1) {
    long v = 0;
    double sz;
    const char* a = optarg;
    switch (c) {
      case 't': if (!parseInt(a, 1, 1024, &v)) return bad(c, a); o->nThreads = int(v); break;
      case 'g': if (!parseInt(a, 1, 1024, &v)) return bad(c, a); o->nGpus = int(v); break;
      case 'b': if ((sz = parseSize(a)) < 0) return bad(c, a); o->minBytes = size_t(sz); break;
      case 'e': if ((sz = parseSize(a)) < 0) return bad(c, a); o->maxBytes = size_t(sz); break;
      case 'i': if ((sz = parseSize(a)) < 0) return bad(c, a); o->stepBytes = size_t(sz); break;
      case 'f': if (!parseInt(a, 0, 1L << 30, &v)) return bad(c, a); o->stepFactor = size_t(v); break;
      case 'n': if (!parseInt(a, 1, 1L << 30, &v)) return bad(c, a); o->iters = int(v); break;
      case 'm': if (!parseInt(a, 1, 1L << 20, &v)) return bad(c, a); o->aggIters = int(v); break;
      case 'w': if (!parseInt(a, 0, 1L << 30, &v)) return bad(c, a); o->warmupIters = int(v); break;
      case 'N': if (!parseInt(a, 0, 1L << 30, &v)) return bad(c, a); o->runCycles = int(v); break;
      case 'p': if (!parseInt(a, 0, 1, &v)) return bad(c, a); o->parallelInit = int(v); break;
      case 'c': if (!parseInt(a, 0, 1L << 20, &v)) return bad(c, a); o->check = int(v); break;
      case 'o': o->op = parseOp(a); break;
      case 'd': o->type = parseType(a); break;
      case 'r':
        if (std::strcmp(a, "all") == 0) o->root = kAll;
        else if (!parseInt(a, 0, 1L << 30, &v)) return bad(c, a);
        else o->root = int(v);
        break;
      case 'z': if (!parseInt(a, 0, 3, &v)) return bad(c, a); o->blocking = int(v); break;
      case 'y': if (!parseInt(a, 0, 1, &v)) return bad(c, a); o->streamNull = int(v); break;
      case 'T': if (!parseInt(a, 0, 1L << 30, &v)) return bad(c, a); o->timeout = int(v); break;
      case 'C': if (!parseInt(a, 0, 1, &v)) return bad(c, a); o->reportCputime = int(v); break;
      case 'S': if (!parseInt(a, 0, 1, &v)) return bad(c, a); o->reportTimestamps = int(v); break;
      case 'a': if (!parseInt(a, 0, 3, &v)) return bad(c, a); o->average = int(v); break;
      case 'M': if (!parseInt(a, 0, 1, &v)) return bad(c, a); o->memoryReport = int(v); break;
      case 'u': if (!parseInt(a, 0, 1L << 20, &v)) return bad(c, a); o->unalign = size_t(v); break;
      case 'J': o->jsonPath = a; break;
      case 'G': ignore(c, "no graph capture for host memory"); break;
      case 'R':
        if (!parseInt(a, 0, 2, &v)) return bad(c, a);
        if (tool.mpiPeer) ignore(c, "MPI has no buffer registration");
        else if (v == 2) ignore(c, "symmetric (window) registration is not implemented; -R 2 registers locally, as -R 1");
        o->localRegister = int(v);
        break;
      case 'x': ignore(c, "no CTAs for host memory"); break;
      case 'D': ignore(c, "no device API for host memory"); break;
      case 'V': ignore(c, "no device API for host memory"); break;
      case 'I': case 'K': ignore(c, "per-iteration event timing is not implemented for host memory"); break;
      case 'Y':
        if (tool.mpiPeer) ignore(c, "the MPI peer uses host memory");
        else if (std::strcmp(a, "coarse") == 0 || std::strcmp(a, "fine") == 0) o->memory = MemoryType::Device;
        else if (std::strcmp(a, "host") == 0) o->memory = MemoryType::Host;
        else if (std::strcmp(a, "managed") == 0) {
          std::fprintf(stderr, "%s: -Y managed: managed memory is not supported (coarse, fine or host)\n", tool.name);
          return ParseResult::Error;
        } else return bad(c, a);
        break;
      case 's': case 'O': case 'q': case 'F': case 'E': case 'A': case 'X': case 'Z':
        ignore(c, "rccl-tests option not implemented");
        break;
      case 'h': usage(tool.name); return ParseResult::Exit0;
      default: usage(tool.name); return ParseResult::Error;
    }
  }
  if (optind < argc) {
    std::fprintf(stderr, "%s: unexpected argument '%s'\n", tool.name, argv[optind]);
    return ParseResult::Error;
  }
  if (o->minBytes > o->maxBytes) {
    std::fprintf(stderr, "invalid sizes for 'minbytes' and 'maxbytes': %llu > %llu\n",
                 (unsigned long long)o->minBytes, (unsigned long long)o->maxBytes);
    return ParseResult::Error;
  }
  if (o->stepFactor <= 1 && o->stepBytes == 0 && o->minBytes < o->maxBytes) {
    std::fprintf(stderr, "%s: -i 0 without -f > 1 never reaches maxbytes\n", tool.name);
    return ParseResult::Error;
  }
  if (tool.mpiPeer && (o->nThreads != 1 || o->nGpus != 1)) {
    std::fprintf(stderr, "%s: -t and -g must be 1 (one MPI rank per process)\n", tool.name);
    return ParseResult::Error;
  }
  return ParseResult::Ok;
}

}  // namespace tempo::bench
