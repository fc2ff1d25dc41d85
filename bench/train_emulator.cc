// train_emulator: a synthetic data-parallel training loop, for measuring what skew and
// pacing do to iteration time (reference/pacing.md 1.9).
//
// Every iteration, each rank "computes" (sleeps: 8 ranks fit on 2 cores) its backward pass
// in --buckets slices and all-reduces each bucket of --bucket-bytes after its slice, --inflight
// buckets at a time in one group (several all-reduces in flight, as DDP issues them).
// Compute time per rank and iteration is --compute-us times a noise factor:
//   --noise none | normal:S | lognormal:S | pareto:A   (S: relative sigma; A: tail index,
//                                                       scaled to mean 1)
//   --straggler R:F     rank R computes F times longer, every iteration
//   --burst K:US        every K-th iteration one rank (varying) computes US longer
// The noise comes from a counter-based generator keyed by (seed, rank, iteration), so each
// mode sees the same draws (common random numbers: the comparison is paired).
//
// One invocation runs the modes of --modes (default "off observe on", set with
// tempoCommSetPacing) back to back, --rounds times, rotating which goes first; each block
// has --warmup untimed iterations (the controller needs a few windows to engage) and
// --iters timed ones. Rank 0 prints, per mode: iteration time mean, CoV, p50, p99 (rank 0's
// wall clock between iteration starts), throughput, and what the library reports (skew,
// controller state, delays applied). Launched like the perf tools (tools/tempo-run,
// scripts/fabric-testbed.sh, mpirun). TEMPO_PACING must not be off.
#include <time.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/common/aggregate.h"
#include "bench/common/launch.h"
#include "rccl/rccl.h"
#include "tempo/tempo.h"

namespace {

using tempo::bench::Launch;

struct Options {
  int iters = 200, warmup = 60, rounds = 2;
  double computeUs = 4000;
  std::string noise = "normal:0.05";
  int straggler = -1;
  double stragglerFactor = 1.0;
  int burstEvery = 0;
  double burstUs = 0;
  int buckets = 4, inflight = 1;
  size_t bucketBytes = size_t(1) << 20;
  std::vector<tempoPacingMode_t> modes = {tempoPacingOff, tempoPacingObserve, tempoPacingOn};
  uint64_t seed = 1;
};

[[noreturn]] void usage(const char* why) {
  fprintf(stderr,
          "train_emulator: %s\n"
          "usage: train_emulator [--iters 200] [--warmup 60] [--rounds 2] [--compute-us 4000]\n"
          "                      [--noise none|normal:S|lognormal:S|pareto:A] [--straggler R:F] [--burst K:US]\n"
          "                      [--buckets 4] [--bucket-bytes 1048576] [--inflight 1]\n"
          "                      [--modes off,observe,on] [--seed 1]\n",
          why);
  exit(2);
}

tempoPacingMode_t parseMode(const std::string& s) {
  if (s == "off") return tempoPacingOff;
  if (s == "observe") return tempoPacingObserve;
  if (s == "on") return tempoPacingOn;
  usage(("unknown mode '" + s + "' (off, observe, on)").c_str());
}
const char* modeName(tempoPacingMode_t m) { return m == tempoPacingOff ? "off" : m == tempoPacingOn ? "on" : "observe"; }
const char* stateName(tempoControllerState_t s) {
  static const char* names[] = {"off", "observe", "pace", "cooldown", "disabled"};
  return unsigned(s) < 5 ? names[s] : "?";
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    std::string v = argv[++i];
    char* end = nullptr;
    auto num = [&](double lo) {
      double x = strtod(v.c_str(), &end);
      if (!end || *end || !(x >= lo)) usage((a + " " + v + ": not a number >= " + std::to_string(lo)).c_str());
      return x;
    };
    auto pair = [&](double* first, double* second) {
      size_t colon = v.find(':');
      if (colon == std::string::npos) usage((a + " " + v + ": expected X:Y").c_str());
      *first = strtod(v.substr(0, colon).c_str(), nullptr);
      *second = strtod(v.substr(colon + 1).c_str(), nullptr);
    };
    if (a == "--iters") o.iters = int(num(1));
    else if (a == "--warmup") o.warmup = int(num(0));
    else if (a == "--rounds") o.rounds = int(num(1));
    else if (a == "--compute-us") o.computeUs = num(0);
    else if (a == "--noise") o.noise = v;
    else if (a == "--straggler") {
      double r = 0;
      pair(&r, &o.stragglerFactor);
      o.straggler = int(r);
    } else if (a == "--burst") {
      double k = 0;
      pair(&k, &o.burstUs);
      o.burstEvery = int(k);
    } else if (a == "--buckets") o.buckets = int(num(1));
    else if (a == "--bucket-bytes") o.bucketBytes = size_t(num(4));
    else if (a == "--inflight") o.inflight = int(num(1));
    else if (a == "--seed") o.seed = uint64_t(num(0));
    else if (a == "--modes") {
      o.modes.clear();
      for (size_t at = 0;;) {
        const size_t comma = std::min(v.find(',', at), v.size());
        o.modes.push_back(parseMode(v.substr(at, comma - at)));
        if (comma == v.size()) break;
        at = comma + 1;
      }
    } else usage(("unknown option " + a).c_str());
  }
  const std::string kind = o.noise.substr(0, o.noise.find(':'));
  if (kind != "none" && kind != "normal" && kind != "lognormal" && kind != "pareto")
    usage(("unknown noise " + o.noise).c_str());
  return o;
}

// Counter-based uniform (0,1) from splitmix64: the same (seed, rank, iteration, k) gives
// the same draw in every mode.
double uniform(uint64_t seed, int rank, int64_t iter, int k) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + uint64_t(rank) * 0xbf58476d1ce4e5b9ull + uint64_t(iter) * 0x94d049bb133111ebull +
               uint64_t(k) * 0x2545f4914f6cdd1dull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (double(z >> 11) + 0.5) / double(uint64_t(1) << 53);
}

// This rank's compute time in iteration `iter` (us).
double computeUs(const Options& o, int rank, int nranks, int64_t iter) {
  const size_t colon = o.noise.find(':');
  const std::string kind = o.noise.substr(0, colon);
  const double p = colon == std::string::npos ? 0 : strtod(o.noise.c_str() + colon + 1, nullptr);
  double f = 1;
  if (kind == "normal" || kind == "lognormal") {
    const double u1 = uniform(o.seed, rank, iter, 0), u2 = uniform(o.seed, rank, iter, 1);
    const double z = std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
    f = kind == "normal" ? std::max(0.0, 1 + p * z) : std::exp(p * z - p * p / 2);
  } else if (kind == "pareto" && p > 1) {
    f = std::pow(uniform(o.seed, rank, iter, 0), -1 / p) * (p - 1) / p;  // mean 1
  }
  double us = o.computeUs * f;
  if (rank == o.straggler) us *= o.stragglerFactor;
  if (o.burstEvery > 0 && iter % o.burstEvery == 0 && rank == int((iter / o.burstEvery) % nranks)) us += o.burstUs;
  return us;
}

int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Sleeps until an absolute monotonic time (no drift from repeated relative sleeps).
void sleepUntil(int64_t t) {
  timespec ts{time_t(t / 1000000000), long(t % 1000000000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0) {
  }
}

struct ModeResult {
  std::vector<double> iterUs;
  double seconds = 0;
  tempoSkewStats_t stats{};
  double delayUs = 0;  // total over the timed iterations, summed over ranks
};

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::clamp<size_t>(size_t(std::ceil(q * double(v.size()))), 1, v.size()) - 1];
}

}  // namespace

int main(int argc, char** argv) {
  Launch launch;
  if (!tempo::bench::detectLaunch(&argc, &argv, &launch)) return 2;
  const Options o = parse(argc, argv);
  const int rank = launch.proc, nranks = launch.nprocs;
  ncclUniqueId id;
  if (launch.kind == Launch::Mpi) {
    if (rank == 0) BENCH_NCCL(ncclGetUniqueId(&id));
    tempo::bench::mpiBcastBytes(&id, sizeof id);
  } else {
    BENCH_NCCL(ncclGetUniqueId(&id));  // NCCL_COMM_ID: the same id on every rank
  }
  ncclComm_t comm;
  BENCH_NCCL(ncclCommInitRank(&comm, nranks, id, rank));
  tempoSkewStats_t probe;
  if (tempoCommGetSkewStats(comm, &probe, nullptr) != ncclSuccess) {
    fprintf(stderr, "train_emulator: no skew telemetry (%s); unset TEMPO_PACING=off\n", ncclGetLastError(comm));
    return 2;
  }
  // Every bucket follows a compute slice and has the same size, so the pattern of
  // collectives alone repeats every bucket: tell the library the iteration's length.
  BENCH_NCCL(tempoCommSetIterationPeriod(comm, o.buckets));
  const size_t elems = o.bucketBytes / sizeof(float);
  std::vector<std::vector<float>> buckets(size_t(o.buckets), std::vector<float>(elems, 1.0f));
  float one = 1, sum = 0;
  auto barrier = [&] { BENCH_NCCL(ncclAllReduce(&one, &sum, 1, ncclFloat32, ncclSum, comm, nullptr)); };

  // One iteration: compute each bucket's slice, all-reduce --inflight buckets at a time.
  int64_t iteration = 0;  // the noise's counter, restarted per block: every mode sees the same draws
  auto step = [&] {
    const double slice = computeUs(o, rank, nranks, iteration) / o.buckets;
    int64_t t = nowNs();
    for (int b = 0; b < o.buckets; b += o.inflight) {
      const int n = std::min(o.inflight, o.buckets - b);
      t += int64_t(slice * n * 1000);
      sleepUntil(t);
      BENCH_NCCL(ncclGroupStart());
      for (int k = b; k < b + n; ++k)
        BENCH_NCCL(ncclAllReduce(buckets[size_t(k)].data(), buckets[size_t(k)].data(), elems, ncclFloat32, ncclAvg,
                                 comm, nullptr));
      BENCH_NCCL(ncclGroupEnd());
      t = std::max(t, nowNs());
    }
    ++iteration;
  };

  std::vector<ModeResult> results(o.modes.size());
  for (int r = 0; r < o.rounds; ++r) {
    for (size_t j = 0; j < o.modes.size(); ++j) {
      const size_t m = (j + size_t(r)) % o.modes.size();
      BENCH_NCCL(tempoCommSetPacing(comm, o.modes[m]));
      iteration = int64_t(r) * (o.warmup + o.iters);
      for (int i = 0; i < o.warmup; ++i) step();
      tempoSkewStats_t before;
      BENCH_NCCL(tempoCommGetSkewStats(comm, &before, nullptr));
      barrier();
      const int64_t t0 = nowNs();
      int64_t prev = t0;
      for (int i = 0; i < o.iters; ++i) {
        step();
        const int64_t t = nowNs();
        results[m].iterUs.push_back(double(t - prev) / 1000);
        prev = t;
      }
      results[m].seconds += double(prev - t0) / 1e9;
      barrier();
      BENCH_NCCL(tempoCommGetSkewStats(comm, &results[m].stats, nullptr));
      double delay = results[m].stats.delayTotalUs - before.delayTotalUs, total = 0;
      BENCH_NCCL(ncclAllReduce(&delay, &total, 1, ncclFloat64, ncclSum, comm, nullptr));
      results[m].delayUs += total;
    }
  }
  if (rank == 0) {
    printf("# train_emulator: %d ranks, compute %.0f us per iteration, noise %s", nranks, o.computeUs, o.noise.c_str());
    if (o.straggler >= 0) printf(", straggler rank %d x%.2f", o.straggler, o.stragglerFactor);
    if (o.burstEvery > 0) printf(", burst +%.0f us every %d iterations", o.burstUs, o.burstEvery);
    printf("\n# %d buckets of %zu B, %d in flight; %d round(s) x (%d warmup + %d timed) iterations per mode\n", o.buckets,
           o.bucketBytes, o.inflight, o.rounds, o.warmup, o.iters);
    printf("# %-8s %12s %7s %10s %10s %9s %11s %9s %14s\n", "mode", "iter_mean_us", "CoV", "p50_us", "p99_us",
           "iters/s", "skew_p50_us", "state", "delay_us/iter");
    for (size_t m = 0; m < o.modes.size(); ++m) {
      const ModeResult& x = results[m];
      double mean = 0, var = 0;
      for (double v : x.iterUs) mean += v;
      mean /= double(x.iterUs.size());
      for (double v : x.iterUs) var += (v - mean) * (v - mean);
      const double cov = x.iterUs.size() > 1 ? std::sqrt(var / double(x.iterUs.size() - 1)) / mean : 0;
      printf("  %-8s %12.1f %7.4f %10.1f %10.1f %9.2f %11.1f %9s %14.1f\n", modeName(o.modes[m]), mean, cov,
             percentile(x.iterUs, 0.5), percentile(x.iterUs, 0.99), double(x.iterUs.size()) / x.seconds,
             x.stats.skewP50Us, stateName(x.stats.state), x.delayUs / double(x.iterUs.size()));
    }
  }
  BENCH_NCCL(ncclCommFinalize(comm));
  BENCH_NCCL(ncclCommDestroy(comm));
  tempo::bench::finishLaunch(launch);
  return 0;
}
