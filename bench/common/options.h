// Command line of the perf tools: nccl-tests 2.19.6's flags (getopt_long, same short and
// long names and defaults; reference/perf-conventions.md 4.1), plus rccl-tests' -Y
// (--memory_type) and its other extra flags, which are accepted and reported as ignored.
// Flags Tempo has no use for (-G, -x, -D, -V, -I, -K and rccl-tests' extras) are accepted
// and noted once.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tempo::bench {

// -Y: where the buffers live. rccl-tests' coarse and fine both mean device memory here.
enum class MemoryType { Auto, Host, Device };  // Auto: Device where there is a GPU runtime

struct Options {
  int nThreads = 1;                    // -t
  int nGpus = 1;                       // -g
  size_t minBytes = 32 << 20;          // -b
  size_t maxBytes = 32 << 20;          // -e
  size_t stepBytes = 1 << 20;          // -i
  size_t stepFactor = 1;               // -f (used when > 1)
  int iters = 20;                      // -n
  int warmupIters = 1;                 // -w
  int aggIters = 1;                    // -m
  int runCycles = 1;                   // -N (0 = run forever)
  int parallelInit = 0;                // -p
  int check = 1;                       // -c
  int op = 0;                          // -o: ncclRedOp_t, kMulSum or kAll
  int type = 7;                        // -d: ncclDataType_t or kAll (default float)
  int root = 0;                        // -r: rank or kAll
  int blocking = 0;                    // -z
  int streamNull = 0;                  // -y: device buffers use the null stream (host: always)
  MemoryType memory = MemoryType::Auto;  // -Y
  int timeout = 0;                     // -T seconds, 0 = none
  int cudaGraph = 0;                   // -G: always 0 here (ignored), printed as "graph"
  int reportCputime = 0;               // -C
  int average = 1;                     // -a: 0 rank0, 1 avg, 2 min, 3 max
  int reportTimestamps = 0;            // -S
  int memoryReport = 0;                // -M
  size_t unalign = 0;                  // -u, in elements
  int localRegister = 0;               // -R: 1 (and 2) ncclCommRegister the send/recv buffers
  std::string jsonPath;                // -J
  std::vector<std::string> notes;      // "# ..." lines for the preamble (ignored options)

  // Sizes of the sweep, in order (nccl-tests' loop; see nextSize()).
  size_t nextSize(size_t size) const;
};

// Which flags a tool honours beyond the common ones (the MPI peer has no threads/GPUs).
struct ToolInfo {
  const char* name;     // program name for usage and the preamble
  bool mpiPeer = false; // rejects -t/-g other than 1 and ignores the NCCL-only flags
};

enum class ParseResult { Ok, Exit0, Error };

// Parses argv into *o. Prints usage for -h (Exit0) or on a bad value (Error, message on
// stderr). Does not touch the environment or the library.
ParseResult parseOptions(int argc, char** argv, const ToolInfo& tool, Options* o);

// nccl-tests' parsesize: a number with an optional K/M/G (1024-based) suffix; -1 on error.
double parseSize(const char* s);

}  // namespace tempo::bench
