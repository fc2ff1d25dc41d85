// Micro benchmark of what skew measurement adds to every collective in observe mode: the
// engine's per-collective calls into the monitor (gateDelayNs at activation,
// onCollective at exit), and what one window's fill() + absorb() cost, per rank count.
// The exchange's network time is not here: it is one small all-reduce per window
// (windows come at most TEMPO_PACING_HZ times a second).
#include <benchmark/benchmark.h>

#include <vector>

#include "src/pacing/monitor.h"

namespace {

using namespace tempo::pacing;

MonitorConfig config(int nranks, int window) {
  MonitorConfig c;
  c.nranks = nranks;
  c.window = uint32_t(window);
  c.minWindowNs = 0;
  return c;
}

// The next collective of a steady stream: 10 us apart, 5 us long, a little jitter.
Sample next(uint64_t& seq, int64_t& t, int64_t delay) {
  Sample s{seq, 0, true, 1 << 20, t, t + 5000 + int64_t(seq & 255), delay};
  ++seq;
  t += 10000;
  return s;
}

// Per collective, with a window closing every 1024 (its fill/absorb included, amortised).
void BM_PerCollective(benchmark::State& state) {
  SkewMonitor m(config(int(state.range(0)), 1024));
  std::vector<uint64_t> words(m.exchangeWords());
  uint64_t seq = 0;
  int64_t t = 1000;
  for (auto _ : state) {
    if (m.onCollective(next(seq, t, m.gateDelayNs(0, 1 << 20)))) {
      m.fill(words);
      m.absorb(words);
    }
  }
}
BENCHMARK(BM_PerCollective)->Arg(8)->Arg(64)->Arg(512);

// One window's bookkeeping on a rank: fill() and absorb() of the reduced words.
void BM_Window(benchmark::State& state) {
  SkewMonitor m(config(int(state.range(0)), 64));
  std::vector<uint64_t> words(m.exchangeWords());
  uint64_t seq = 0;
  int64_t t = 1000;
  for (auto _ : state) {
    state.PauseTiming();
    while (!m.onCollective(next(seq, t, 0))) {
    }
    state.ResumeTiming();
    m.fill(words);
    m.absorb(words);
  }
}
BENCHMARK(BM_Window)->Arg(8)->Arg(64)->Arg(512)->Arg(4096);

}  // namespace

BENCHMARK_MAIN();
