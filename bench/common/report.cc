#include "bench/common/report.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

extern char** environ;

namespace tempo::bench {
namespace {

constexpr int kJsonFileVersion = 1;

std::string now() {
  char buf[64];
  time_t t = time(nullptr);
  struct tm tmv;
  localtime_r(&t, &tmv);
  strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tmv);
  return buf;
}

bool hasJsonSuffix(const std::string& path) {
  const size_t dot = path.rfind('.'), slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && slash > dot) || dot + 1 == path.size())
    return false;
  return strcasecmp(path.c_str() + dot + 1, "json") == 0;
}

}  // namespace

std::string formatFloat(double value, int width) {
  char buf[64];
  if (!std::isfinite(value)) {
    std::snprintf(buf, sizeof buf, "%*s", width, std::isnan(value) ? "nan" : "inf");
    return buf;
  }
  int digits = 0;  // digits before the decimal point (0 for values below 1)
  for (double p = 1; value >= p && digits < 400; p *= 10) ++digits;
  if (digits < width - 2) std::snprintf(buf, sizeof buf, "%*.2f", width, value);
  else if (digits < width - 1) std::snprintf(buf, sizeof buf, "%*.1f", width, value);
  else if (digits < width + 1) std::snprintf(buf, sizeof buf, "%*.0f", width, value);
  else if (width >= 7) std::snprintf(buf, sizeof buf, "%*.1e", width, value);
  else std::snprintf(buf, sizeof buf, "%*.0e", width, value);
  return buf;
}

std::string rankLine(int rank, int group, int pid, const char* host, int device, const char* deviceName) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s\n", rank,
                group, pid, host, device, 0u, 0u, 0u, deviceName);
  return buf;
}

std::string shortHostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  if (char* dot = std::strchr(buf, '.')) *dot = '\0';
  return buf;
}

void Report::openJson(int argc, char** argv, int libraryVersion) {
  if (!main_ || o_.jsonPath.empty()) return;
  if (!hasJsonSuffix(o_.jsonPath)) {
    std::printf("# skipping json output; %s does not end in .json\n", o_.jsonPath.c_str());
    return;
  }
  std::string used = json_.open(o_.jsonPath);
  if (used.empty()) {
    std::printf("# skipping json output; %s not accessible\n", o_.jsonPath.c_str());
    return;
  }
  std::printf("# Writing JSON output to %s\n", used.c_str());
  json_.beginObject();
  json_.key("version"); json_.integer(kJsonFileVersion);
  json_.key("start_time"); json_.str(now().c_str());
  json_.key("args"); json_.beginList();
  for (int i = 0; i < argc; ++i) json_.str(argv[i]);
  json_.endList();
  // Only the variables that steer communication: a report is meant to be shared, and the
  // rest of the environment can hold credentials.
  static constexpr const char* kEnvPrefixes[] = {"NCCL_", "RCCL_", "TEMPO_", "FI_", "UCX_",
                                                 "HIP_", "CUDA_", "OMPI_", "SLURM_"};
  json_.key("env"); json_.beginList();
  for (char** e = environ; e && *e; ++e)
    for (const char* p : kEnvPrefixes)
      if (std::strncmp(*e, p, std::strlen(p)) == 0) { json_.str(*e); break; }
  json_.endList();
  json_.key("nccl_version"); json_.integer(libraryVersion);
}

void Report::preamble(const std::vector<std::string>& identity) {
  if (!main_) return;
  for (const std::string& l : identity) std::printf("%s\n", l.c_str());
  std::printf("# Collective test starting: %s\n", prog_);
  const bool factor = o_.stepFactor > 1;
  std::printf("# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
              "agg iters: %d validation: %d graph: %d unalign: %zu\n",
              o_.nThreads, o_.nGpus, o_.minBytes, o_.maxBytes, factor ? o_.stepFactor : o_.stepBytes,
              factor ? "factor" : "bytes", o_.warmupIters, o_.iters, o_.aggIters, o_.check, o_.cudaGraph,
              o_.unalign);
  switch (o_.blocking) {
    case 1: std::printf("# Blocking Enabled: wait for completion and barrier after each collective \n"); break;
    case 2: std::printf("# Blocking Enabled: wait for completion after each collective \n"); break;
    case 3: std::printf("# Blocking Enabled: wait for completion and barrier after each iteration \n"); break;
    default: break;
  }
  if (o_.parallelInit) std::printf("# Parallel Init Enabled: threads call into NcclInitRank concurrently \n");
  for (const std::string& n : o_.notes) std::printf("%s\n", n.c_str());
  std::printf("#\n");

  json_.key("config"); json_.beginObject();
  json_.key("nthreads"); json_.integer(o_.nThreads);
  json_.key("ngpus"); json_.integer(o_.nGpus);
  json_.key("minimum_bytes"); json_.integer((long long)o_.minBytes);
  json_.key("maximum_bytes"); json_.integer((long long)o_.maxBytes);
  if (factor) { json_.key("step_factor"); json_.integer((long long)o_.stepFactor); }
  else { json_.key("step_bytes"); json_.integer((long long)o_.stepBytes); }
  json_.key("warmup_iters"); json_.integer(o_.warmupIters);
  json_.key("iterations"); json_.integer(o_.iters);
  json_.key("aggregated_iterations"); json_.integer(o_.aggIters);
  json_.key("validation"); json_.integer(o_.check);
  json_.key("graph"); json_.integer(o_.cudaGraph);
  json_.key("blocking_collectives"); json_.boolStr(o_.blocking != 0);
  json_.key("parallel_init"); json_.boolStr(o_.parallelInit != 0);
}

void Report::devices(const std::vector<std::string>& rankLines) {
  if (!main_) return;
  std::printf("# Using devices\n");
  for (const std::string& l : rankLines) std::printf("%s", l.c_str());
  json_.key("devices"); json_.beginList();
  for (const std::string& l : rankLines) {
    int rank = 0, group = 0, pid = 0, device = 0;
    char host[1025] = {}, hex[129] = {}, info[1025] = {};
    std::sscanf(l.c_str(), "#  Rank %d Group %d Pid %d on %1024s device %d [%128[^]]] %1024[^\n]", &rank, &group,
                &pid, host, &device, hex, info);
    json_.beginObject();
    json_.key("rank"); json_.integer(rank);
    json_.key("group"); json_.integer(group);
    json_.key("pid"); json_.integer(pid);
    json_.key("hostname"); json_.str(host);
    json_.key("device"); json_.integer(device);
    json_.key("device_hex"); json_.str(hex);
    json_.key("device_info"); json_.str(info);
    json_.endObject();
  }
  json_.endList();
  json_.endObject();  // config
}

void Report::header() {
  if (!main_) return;
  const char* ts = o_.reportTimestamps ? "timestamp" : "";
  const char* tsFmt = o_.reportTimestamps ? "%Y-%m-%d %H:%M:%S" : "";
  const int tsPad = o_.reportTimestamps ? 19 : 0;
  const char* t = o_.reportCputime ? "cputime" : "time";
  std::printf("#\n");
  std::printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "",
              "", "", "", "");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size", "count", "type",
              "redop", "root", t, "algbw", "busbw", "#wrong", t, "algbw", "busbw", "#wrong", tsPad, ts);
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)", "(elements)", "",
              "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", tsPad, tsFmt);
  json_.key("results"); json_.beginList();
}

void Report::rowStart(size_t bytes, size_t count, const char* type, const char* op, int root) {
  if (!main_) return;
  char rootStr[32];
  std::snprintf(rootStr, sizeof rootStr, "%6i", root);
  std::printf("%12li  %12li  %8s  %6s  %6s", long(bytes), long(count), type, op, rootStr);
  json_.beginObject();
  json_.key("size"); json_.integer((long long)bytes);
  json_.key("count"); json_.integer((long long)count);
  json_.key("type"); json_.str(type);
  json_.key("redop"); json_.str(op);
  json_.key("root"); json_.str(rootStr);
}

void Report::rowPart(double timeUsec, double algBw, double busBw, int64_t wrong, bool outOfPlace) {
  if (!main_) return;
  const std::string t = formatFloat(timeUsec, 7), a = formatFloat(algBw, 6), b = formatFloat(busBw, 6);
  if (o_.check) std::printf("  %7s  %6s  %6s  %6g", t.c_str(), a.c_str(), b.c_str(), double(wrong));
  else std::printf("  %7s  %6s  %6s    N/A", t.c_str(), a.c_str(), b.c_str());
  if (!outOfPlace && o_.reportTimestamps) std::printf("%21s", now().c_str());
  json_.key(outOfPlace ? "out_of_place" : "in_place");
  json_.beginObject();
  json_.key(o_.reportCputime ? "cpu_time" : "time"); json_.number(timeUsec);
  json_.key("alg_bw"); json_.number(algBw);
  json_.key("bus_bw"); json_.number(busBw);
  json_.key("nwrong");
  if (o_.check) json_.number(double(wrong));
  else json_.null();
  json_.endObject();
}

void Report::rowPartUnsupported(bool outOfPlace) {
  if (!main_) return;
  std::printf("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
  json_.key(outOfPlace ? "out_of_place" : "in_place");
  json_.null();
}

void Report::rowEnd() {
  if (!main_) return;
  std::printf("\n");
  json_.key("actual_iterations"); json_.integer(o_.iters);
  json_.key("experiment_name"); json_.str("");
  json_.endObject();
}

void Report::note(const std::string& line) {
  if (main_) std::printf("%s\n", line.c_str());
}

bool Report::footer(int64_t outOfBounds, double avgBusBw, const std::string& memoryLine,
                    const std::string& lastError) {
  const char* env = std::getenv("NCCL_TESTS_MIN_BW");
  const double minBw = env ? std::atof(env) : -1;
  const bool bwFailed = minBw != -1 && avgBusBw < minBw * 0.9;
  if (!main_) return bwFailed;
  json_.endList();  // results
  std::printf("# %-20s : %lld %s\n", "Out of bounds values", (long long)outOfBounds, outOfBounds ? "FAILED" : "OK");
  std::printf("# %-20s : %g %s\n", "Avg bus bandwidth", avgBusBw, minBw == -1 ? "" : (bwFailed ? "FAILED" : "OK"));
  std::printf("#\n");
  std::printf("# Collective test concluded: %s\n", prog_);
  if (!memoryLine.empty()) std::printf("%s\n", memoryLine.c_str());
  std::printf("#\n");
  if (!lastError.empty()) std::printf("# error: %s\n", lastError.c_str());
  else std::printf("\n");
  std::fflush(stdout);

  json_.key("out_of_bounds"); json_.beginObject();
  json_.key("count"); json_.integer(outOfBounds);
  json_.key("okay"); json_.boolStr(outOfBounds == 0);
  json_.endObject();
  json_.key("average_bus_bandwidth"); json_.beginObject();
  json_.key("bandwidth"); json_.number(avgBusBw);
  json_.key("okay");
  if (minBw == -1) json_.str("unchecked");
  else json_.boolStr(!bwFailed);
  json_.endObject();
  json_.key("errors"); json_.beginList();
  if (!lastError.empty()) json_.str(lastError.c_str());
  json_.endList();
  json_.key("end_time"); json_.str(now().c_str());
  json_.endObject();
  json_.close();
  return bwFailed;
}

}  // namespace tempo::bench
