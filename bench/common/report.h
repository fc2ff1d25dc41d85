// The text table (and optional JSON report) of the perf tools, byte for byte in nccl-tests
// 2.19.6's format (reference/perf-conventions.md 4.2): preamble, "# Using devices" with one
// line per rank, a three-line header, one row per (size) with an out-of-place and an
// in-place part, and the footer. Only the process/thread given `main` writes anything.
//
// Not thread-safe: one thread (the main one) calls everything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/common/json.h"
#include "bench/common/options.h"

namespace tempo::bench {

// nccl-tests' getFloatStr: the widest of %.2f, %.1f, %.0f that fits `width`, else %.1e
// (width 7) / %.0e (width 6).
std::string formatFloat(double value, int width);

// One "#  Rank ..." line (with its newline). Host memory: bus id 0000:00:00 and the device
// name "host memory".
std::string rankLine(int rank, int group, int pid, const char* host, int device, const char* deviceName);

// The host name up to the first '.', as nccl-tests' getHostName.
std::string shortHostName();

class Report {
 public:
  Report(bool main, const Options& o, const char* prog) : main_(main), o_(o), prog_(prog) {}

  // -J: opens the JSON file (".json" suffix only, as nccl-tests) and writes the header
  // object (version, start time, args, env, library version).
  void openJson(int argc, char** argv, int libraryVersion);

  // `identity`: the tool's first lines (version lines), each without newline.
  void preamble(const std::vector<std::string>& identity);
  void devices(const std::vector<std::string>& rankLines);
  void header();
  void rowStart(size_t bytes, size_t count, const char* type, const char* op, int root);
  void rowPart(double timeUsec, double algBw, double busBw, int64_t wrong, bool outOfPlace);
  // A variant the collective does not support (in-place all-to-all): N/A in every column.
  void rowPartUnsupported(bool outOfPlace);
  void rowEnd();
  // Prints the footer; returns true when NCCL_TESTS_MIN_BW is set and not met.
  bool footer(int64_t outOfBounds, double avgBusBw, const std::string& memoryLine,
              const std::string& lastError);
  void note(const std::string& line);  // "# ..." line anywhere

 private:
  bool main_;
  const Options& o_;
  const char* prog_;
  JsonWriter json_;
};

}  // namespace tempo::bench
