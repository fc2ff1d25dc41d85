// src/pacing's contract, on synthetic timelines: histograms, iteration inference, the
// pacing controller's state machine and safety rules, and the skew monitor's
// clock-free skew estimate across ranks (pacing.md sections 1.2, 1.5-1.7).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "src/pacing/controller.h"
#include "src/pacing/histogram.h"
#include "src/pacing/iteration.h"
#include "src/pacing/monitor.h"

namespace tempo::pacing {
namespace {

// ---- histograms ----

TEST(LogHistogram, PercentilesAreWithinTheBucketResolution) {
  LogHistogram h;
  std::vector<uint64_t> v;
  std::mt19937_64 rng(1);
  std::exponential_distribution<double> e(1.0 / 50000);
  for (int i = 0; i < 10000; ++i) v.push_back(uint64_t(e(rng)) + 1);
  for (uint64_t x : v) h.add(x);
  std::sort(v.begin(), v.end());
  for (double q : {0.5, 0.9, 0.99}) {
    const double exact = double(v[size_t(q * v.size()) - 1]);
    EXPECT_NEAR(double(h.percentile(q)), exact, 0.07 * exact) << "q=" << q;
  }
  EXPECT_EQ(h.count(), 10000u);
}

TEST(LogHistogram, MergingCountsBothSampleSets) {
  LogHistogram a, b, both;
  for (uint64_t x = 1; x < 5000; x += 7) {
    (x % 2 ? a : b).add(x * 100);
    both.add(x * 100);
  }
  a.merge(b);
  for (double q : {0.1, 0.5, 0.99}) EXPECT_EQ(a.percentile(q), both.percentile(q));
  EXPECT_EQ(a.count(), both.count());
}

TEST(LogHistogram, BucketsAreContiguousAndOrdered) {
  for (uint64_t v = 0; v < 100000; v += 13) {
    const int b = LogHistogram::bucketOf(v);
    EXPECT_LE(LogHistogram::lowerBound(b), v);
    EXPECT_GT(LogHistogram::lowerBound(b + 1), v);
  }
  EXPECT_EQ(LogHistogram::bucketOf(~uint64_t(0)), LogHistogram::kBuckets - 1);
}

TEST(SlidingHistogram, ForgetsSamplesOlderThanItsSpan) {
  SlidingHistogram h(100);
  for (int i = 0; i < 100; ++i) h.add(1000);
  for (int i = 0; i < 100; ++i) h.add(9000);
  EXPECT_NEAR(double(h.snapshot().percentile(0.01)), 9000, 700);
}

// ---- iteration inference ----

// Feeds `iters` iterations of `sizes` (one all-reduce each): iteration k computes, then
// runs its collectives, and lasts iterNs(k) in all.
template <class F>
void feed(IterationTracker& t, const std::vector<uint64_t>& sizes, int iters, F iterNs) {
  int64_t now = 1000000;
  for (int k = 0; k < iters; ++k) {
    const int64_t start = now, len = iterNs(k);
    const int64_t comm = 1000000 / int64_t(sizes.size());
    int64_t at = start + len - comm * int64_t(sizes.size());  // compute, then the collectives
    for (uint64_t s : sizes) {
      t.push(signatureOf(0, s), at, at + comm);
      at += comm;
    }
    now = start + len;
  }
}

TEST(IterationTracker, FindsThePeriodAndTheIterationTime) {
  IterationTracker t;
  feed(t, {4 << 20, 4 << 20, 1 << 20}, 20, [](int) { return 10000000; });
  EXPECT_EQ(t.update(), 10000000);
  IterationSummary s = t.summary();
  EXPECT_EQ(s.period, 3u);
  EXPECT_EQ(s.samples, 19u);
  EXPECT_DOUBLE_EQ(s.meanNs, 10000000);
  EXPECT_DOUBLE_EQ(s.cov, 0);
  EXPECT_EQ(t.update(), 0) << "no iteration completed since";
}

TEST(IterationTracker, CoefficientOfVariationOfAlternatingIterations) {
  IterationTracker t;
  feed(t, {1024}, 41, [](int k) { return k % 2 ? 12000000 : 8000000; });
  t.update();
  IterationSummary s = t.summary();
  EXPECT_EQ(s.period, 1u);
  EXPECT_NEAR(s.meanNs, 1e7, 1e5);
  EXPECT_NEAR(s.cov, 0.2, 0.01);
  EXPECT_EQ(s.p99Ns, 12000000);
}

TEST(IterationTracker, EqualBucketsAfterOneComputePhaseFormOneIteration) {
  // Two equal all-reduces per iteration: the signatures repeat every collective, the
  // compute gap every second one.
  IterationTracker t;
  feed(t, {1 << 20, 1 << 20}, 30, [](int) { return 5000000; });
  t.update();
  EXPECT_EQ(t.summary().period, 2u);
  EXPECT_DOUBLE_EQ(t.summary().meanNs, 5000000);
  // Gaps that do not single out a phase keep the signature period.
  EXPECT_EQ(refinePeriod(std::vector<double>(64, 100.0), 1), 1u);
  std::vector<double> gaps;
  for (int i = 0; i < 64; ++i) gaps.push_back(i % 3 == 0 ? 9000 : 50);
  EXPECT_EQ(refinePeriod(gaps, 1), 3u);
}

TEST(IterationTracker, OneStallDoesNotInventALongerPeriod) {
  // Two all-reduces after a 1 ms compute phase, and one 100 ms stall (a preempted
  // process) in one compute phase. By means, that phase of a 16-collective "period" would
  // stand out 3x more than the compute phase of the real period of 2.
  std::vector<double> gaps;
  for (int i = 0; i < 512; ++i) gaps.push_back(i % 2 == 0 ? 1e6 : 2e4);
  gaps[300] = 1e8;
  EXPECT_EQ(refinePeriod(gaps, 2), 2u);
  EXPECT_EQ(refinePeriod(gaps, 1), 2u) << "equal buckets: the compute phase still sets the period";
  PhaseScratch scratch;
  phaseMedians(gaps, 0, 2, scratch);
  EXPECT_DOUBLE_EQ(scratch.medians[0], 1e6);
  EXPECT_DOUBLE_EQ(scratch.medians[1], 2e4);
}

TEST(IterationTracker, NoPatternNoIterations) {
  IterationTracker t;
  for (int i = 0; i < 50; ++i) t.push(signatureOf(0, uint64_t(1) << (i % 7 + i % 5)), i * 100, i * 100 + 50);
  EXPECT_EQ(t.update(), 0);
  EXPECT_EQ(t.summary().period, 0u);
}

TEST(IterationTracker, AHintOverridesInference) {
  IterationTracker t;
  t.setPeriod(2);
  feed(t, {1024}, 10, [](int) { return 1000000; });
  t.update();
  EXPECT_EQ(t.summary().period, 2u);
  EXPECT_DOUBLE_EQ(t.summary().meanNs, 2000000);
}

// ---- controller ----

WindowStats straggler(double rho = 0.6) {
  WindowStats w;
  w.nranks = 8;
  w.samples = 64;
  w.commP50Ns = 400000;
  w.skewP50Ns = int64_t(rho * 400000);
  w.rho = rho;
  w.topLast = 5;
  w.topLastShare = 0.9;
  w.sameTopLast = true;
  w.iterNs = 20000000;
  w.period = 4;
  return w;
}

ControllerConfig pacingAllowed() {
  ControllerConfig c;
  c.allowPacing = true;
  c.nodes = 8;
  return c;
}

TEST(SkewController, PersistentSkewEngagesAfterThreeWindows) {
  SkewController c(pacingAllowed());
  EXPECT_EQ(c.onWindow(straggler()).state, PacingState::Observe);
  EXPECT_EQ(c.onWindow(straggler()).state, PacingState::Observe);
  PacingDecision d = c.onWindow(straggler());
  EXPECT_EQ(d.state, PacingState::Pace);
  EXPECT_DOUBLE_EQ(d.kappa, 0.3);
  // The cap: min(half the median transfer, 1 ms, 5% of the iteration per collective).
  EXPECT_EQ(d.capNs, std::min<int64_t>(200000, int64_t(0.05 * 20000000 / 4)));
}

TEST(SkewController, IidNoiseNeverEngages) {
  SkewController c(pacingAllowed());
  std::mt19937 rng(3);
  for (int i = 0; i < 200; ++i) {
    WindowStats w = straggler(0.8);
    w.topLast = int(rng() % 8);
    w.topLastShare = 0.2;  // near the fair 1/8
    w.sameTopLast = false;
    w.leadTau = 0.05;
    EXPECT_EQ(c.onWindow(w).state, PacingState::Observe);
  }
}

TEST(SkewController, ThePersistentlyLeastLeadingRankCountsAsACulprit) {
  // 4 ranks: the straggler is last in half the collectives, another rank in the other
  // half (a tie at twice the fair share), but its lead stays far below everyone else's.
  auto window = [](bool sameLeast, double gap) {
    WindowStats w = straggler();
    w.nranks = 4;
    w.topLastShare = 0.5;
    w.sameTopLast = false;
    w.sameLeast = sameLeast;
    w.leastGap = gap;
    return w;
  };
  SkewController c(pacingAllowed());
  for (int i = 0; i < 3; ++i) c.onWindow(window(true, 0.9));
  EXPECT_EQ(c.decision().state, PacingState::Pace);
  SkewController iid(pacingAllowed());
  for (int i = 0; i < 20; ++i) EXPECT_EQ(iid.onWindow(window(true, 0.3)).state, PacingState::Observe) << "gap within noise";
  SkewController moving(pacingAllowed());
  for (int i = 0; i < 20; ++i) EXPECT_EQ(moving.onWindow(window(false, 0.9)).state, PacingState::Observe) << "not the same rank";
}

TEST(SkewController, ObserveModeReportsButNeverPaces) {
  ControllerConfig cfg = pacingAllowed();
  cfg.allowPacing = false;
  SkewController c(cfg);
  for (int i = 0; i < 10; ++i) {
    PacingDecision d = c.onWindow(straggler());
    EXPECT_EQ(d.state, PacingState::Observe);
    EXPECT_TRUE(d.wouldPace);
  }
  EXPECT_EQ(c.delayFor(300000, 1000), 0);
}

TEST(SkewController, FewerHostsThanTheMinimumNeverEngage) {
  ControllerConfig cfg = pacingAllowed();
  cfg.nodes = 4;
  SkewController c(cfg);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(c.onWindow(straggler()).state, PacingState::Observe);
}

TEST(SkewController, DelayIsGainTimesLeadBeyondTheMarginAndCapped) {
  SkewController c(pacingAllowed());
  for (int i = 0; i < 3; ++i) c.onWindow(straggler());
  const int64_t cap = c.decision().capNs;
  EXPECT_EQ(c.delayFor(100000, 10000), int64_t(0.3 * (100000 - 20000)));
  EXPECT_EQ(c.delayFor(15000, 10000), 0) << "a lead within 2 sigma is the predicted last arriver's";
  EXPECT_EQ(c.delayFor(0, 0), 0);
  EXPECT_EQ(c.delayFor(1e9, 0), cap);
}

TEST(SkewController, GainHalvesWhenTheIterationGetsLongerAndGrowsWhenSkewFalls) {
  SkewController c(pacingAllowed());
  for (int i = 0; i < 3; ++i) c.onWindow(straggler());
  WindowStats better = straggler(0.5);
  EXPECT_DOUBLE_EQ(c.onWindow(better).kappa, 0.35);
  WindowStats slower = straggler(0.4);
  slower.iterNs = 25000000;
  EXPECT_DOUBLE_EQ(c.onWindow(slower).kappa, 0.175);
  WindowStats culprit = straggler(0.3);
  culprit.pacedLastTooOften = true;
  EXPECT_DOUBLE_EQ(c.onWindow(culprit).kappa, 0.0875);
}

TEST(SkewController, ProbesRunUnpacedAndUselessPacingDisablesItself) {
  SkewController c(pacingAllowed());
  for (int i = 0; i < 3; ++i) c.onWindow(straggler());
  int probes = 0;
  PacingState last = PacingState::Pace;
  for (int i = 0; i < 200 && last == PacingState::Pace; ++i) {
    PacingDecision d = c.onWindow(straggler());  // the same iteration time paced or not
    last = d.state;
    if (d.probe) {
      ++probes;
      EXPECT_EQ(c.delayFor(300000, 0), 0) << "a probe window applies no delay";
    }
  }
  EXPECT_EQ(last, PacingState::Disabled);
  EXPECT_EQ(probes, 3);
  // Disabled for 2^1 windows, then observing again (and able to re-engage).
  EXPECT_EQ(c.onWindow(straggler()).state, PacingState::Disabled);
  EXPECT_EQ(c.onWindow(straggler()).state, PacingState::Observe);
}

TEST(SkewController, PacingThatPaysStaysOn) {
  SkewController c(pacingAllowed());
  for (int i = 0; i < 3; ++i) c.onWindow(straggler());
  for (int i = 0; i < 200; ++i) {
    WindowStats w = straggler();
    w.iterNs = c.decision().probe ? 22000000 : 20000000;  // unpaced windows are slower
    EXPECT_EQ(c.onWindow(w).state, PacingState::Pace) << "window " << i;
  }
}

TEST(SkewController, SkewGoneCoolsDownThenObserves) {
  SkewController c(pacingAllowed());
  for (int i = 0; i < 3; ++i) c.onWindow(straggler());
  PacingState s = PacingState::Pace;
  int windows = 0;
  for (; windows < 50 && s != PacingState::Cooldown; ++windows) s = c.onWindow(straggler(0.05)).state;
  EXPECT_EQ(windows, 5);
  int64_t cap = c.decision().capNs;
  for (windows = 0; windows < 50 && s == PacingState::Cooldown; ++windows) {
    s = c.onWindow(straggler(0.05)).state;
    if (s == PacingState::Cooldown) {
      EXPECT_LT(c.decision().capNs, cap);
      cap = c.decision().capNs;
    }
  }
  EXPECT_EQ(s, PacingState::Observe);
}

// ---- monitor: the window exchange between ranks, simulated ----

// N monitors; collective c takes `comm` on the last arriver and each rank arrives
// arrive(r, c) ns before it (its lead). Windows are exchanged by element-wise MAX, as the
// engine's internal all-reduce does.
struct Job {
  std::vector<std::unique_ptr<SkewMonitor>> ranks;
  int64_t now = 1000000;
  uint64_t seq = 0;
  int windows = 0;
  Job(int n, Mode mode, int nodes = 8) {
    for (int r = 0; r < n; ++r) {
      MonitorConfig c;
      c.rank = r;
      c.nranks = n;
      c.mode = mode;
      c.window = 32;
      c.minWindowNs = 0;  // a window every 32 collectives
      c.controller.nodes = nodes;
      c.controller.allowPacing = mode == Mode::On;
      ranks.push_back(std::make_unique<SkewMonitor>(c));
    }
  }
  template <class Lead>
  void run(int collectives, int64_t comm, Lead lead) {
    const size_t n = ranks.size();
    for (int k = 0; k < collectives; ++k, ++seq) {
      const int64_t compute = 2000000, exit = now + compute + comm;
      bool close = false;
      for (size_t r = 0; r < n; ++r) {
        Sample s;
        s.seq = seq;
        s.symmetric = true;
        s.bytes = 1 << 20;
        s.delayNs = ranks[r]->gateDelayNs(0, 1 << 20);
        s.arrivalNs = now + compute - lead(int(r), k);  // un-paced arrival: the gate does not move it
        s.exitNs = exit;
        close = ranks[r]->onCollective(s);
      }
      now = exit;
      if (close) exchange();
    }
  }
  // Rank r's clock at time t of rank 0's (which is the simulation's): t by default.
  std::function<int64_t(size_t, int64_t)> clock = [](size_t, int64_t t) { return t; };
  // A broadcast from rank 0 per collective, `gap` apart. Each rank arrives lead(r) ns
  // before the last arriver; the root leaves 10 us after it arrives, the others when the
  // data has come, `comm` after the last arrival. Times are stamped on each rank's clock.
  template <class Lead>
  void runBroadcasts(int collectives, int64_t comm, Lead lead, int64_t gap = 2000000) {
    for (int k = 0; k < collectives; ++k, ++seq) {
      const int64_t last = now + gap, exit = last + comm;
      bool close = false;
      for (size_t r = 0; r < ranks.size(); ++r) {
        Sample s;
        s.seq = seq;
        s.coll = 1;
        s.symmetric = false;
        s.bytes = 1 << 16;
        s.arrivalNs = clock(r, last - lead(int(r)));
        s.exitNs = r == 0 ? s.arrivalNs + 10000 : clock(r, exit);
        close = ranks[r]->onCollective(s);
      }
      now = exit;
      if (close) exchange();
    }
  }
  // The window exchange; every rank leaves it now, give or take 2 us.
  void exchange() {
    std::vector<uint64_t> reduced(ranks[0]->exchangeWords(), 0), mine(reduced.size());
    for (auto& m : ranks) {
      m->fill(mine);
      for (size_t i = 0; i < mine.size(); ++i) reduced[i] = std::max(reduced[i], mine[i]);
    }
    for (size_t r = 0; r < ranks.size(); ++r) ranks[r]->absorb(reduced, clock(r, now + int64_t(jitter(rng))));
    ++windows;
  }
  std::mt19937 rng{3};
  std::uniform_int_distribution<int> jitter{-2000, 2000};
};

TEST(SkewMonitor, EstimatesLeadsAndSkewWithoutSynchronisedClocks) {
  Job job(4, Mode::Observe);
  // Rank 2 is always last; the others arrive 300 us early.
  job.run(32 * 4, 500000, [](int r, int) { return r == 2 ? 0 : 300000; });
  ASSERT_EQ(job.windows, 4);
  for (auto& m : job.ranks) {
    SkewSnapshot s = m->snapshot();
    EXPECT_EQ(s.topLast, 2);
    EXPECT_DOUBLE_EQ(s.topLastShare, 1.0);
    EXPECT_NEAR(double(s.commP50), 500000, 0.07 * 500000);
    EXPECT_NEAR(double(s.skewP50), 300000, 0.07 * 300000);
    EXPECT_NEAR(s.rho, 0.6, 1e-9);
    ASSERT_EQ(s.rankLeadNs.size(), 4u);
    EXPECT_NEAR(s.rankLeadNs[0], 300000, 1);
    EXPECT_NEAR(s.rankLeadNs[2], 0, 1);
    EXPECT_EQ(s.iteration.period, 1u);
    EXPECT_EQ(s.decision.state, PacingState::Observe);
    EXPECT_TRUE(s.decision.wouldPace || s.windows < 3);
    EXPECT_EQ(s.delayNs, 0) << "observe mode never delays";
  }
}

TEST(SkewMonitor, AsymmetricCollectivesCountByArrivalsOnRankZerosClock) {
  // Clocks far apart (one by two minutes); rank 1 arrives 400 us after the others.
  const std::vector<int64_t> offsets = {0, 5000000, -7000000, 120000000000};
  auto lead = [](int r) { return r == 1 ? 0 : 400000; };
  auto skewed = [&](size_t r, int64_t t) { return t - offsets[r]; };
  Job unsynced(4, Mode::Observe);
  unsynced.clock = skewed;
  unsynced.runBroadcasts(64, 300000, lead);
  SkewSnapshot u = unsynced.ranks[0]->snapshot();
  EXPECT_EQ(u.measured, 0u) << "no common exit and no clock: nothing to measure";
  EXPECT_EQ(u.topLast, -1);

  Job job(4, Mode::Observe);
  job.clock = skewed;
  for (size_t r = 0; r < 4; ++r) job.ranks[r]->setClock(offsets[r], 0);
  job.runBroadcasts(64, 300000, lead);
  ASSERT_EQ(job.windows, 2);
  for (auto& m : job.ranks) {
    SkewSnapshot s = m->snapshot();
    EXPECT_EQ(s.measured, 64u);
    EXPECT_EQ(s.topLast, 1);
    EXPECT_DOUBLE_EQ(s.topLastShare, 1.0);
    EXPECT_NEAR(double(s.skewP50), 400000, 0.07 * 400000);
    EXPECT_EQ(s.commP50, 0) << "an asymmetric collective has no common transfer time";
    EXPECT_EQ(s.rho, 0) << "relative skew stays the symmetric collectives'";
    EXPECT_NEAR(s.rankLeadNs[0], 400000, 1);
    EXPECT_NEAR(s.rankLeadNs[1], 0, 1);
    EXPECT_NEAR(s.rankLeadNs[3], 400000, 1);
  }
  // Arrivals are carried modulo 2^42 ns: a collective whose arrivals straddle a wrap
  // (here the first: rank 1 arrives 100 us past it, the others 300 us before) is dropped.
  Job wrap(4, Mode::Observe);
  wrap.clock = skewed;
  for (size_t r = 0; r < 4; ++r) wrap.ranks[r]->setClock(offsets[r], 0);
  wrap.now = (int64_t(1) << 42) + 100000 - 2000000;
  wrap.runBroadcasts(64, 300000, lead);
  EXPECT_EQ(wrap.ranks[0]->snapshot().measured, 63u);
  EXPECT_NEAR(double(wrap.ranks[0]->snapshot().skewP50), 400000, 0.07 * 400000);
}

TEST(SkewMonitor, FollowsClockDriftOnceResolved) {
  // Rank 3's clock runs 50 ppm slow against rank 0's: after 60 s its offset has grown by
  // 3 ms, far more than the 400 us by which rank 1 is late. Every rank's offset was
  // measured at the start (time 0).
  auto drifting = [](size_t r, int64_t t) { return r == 3 ? t - int64_t(50e-6 * double(t)) : t; };
  auto lead = [](int r) { return r == 1 ? 0 : 400000; };
  Job job(4, Mode::Observe);
  job.now = 0;
  job.clock = drifting;
  for (size_t r = 0; r < 4; ++r) job.ranks[r]->setClock(0, 0);
  // 6000 broadcasts 10 ms apart: 60 s, a window (and a drift sample) every 32.
  job.runBroadcasts(6000, 300000, lead, 10000000);
  SkewSnapshot s3 = job.ranks[3]->snapshot();
  ASSERT_TRUE(s3.drift.known);
  EXPECT_GT(s3.drift.spanS, 30);
  EXPECT_NEAR(s3.driftPpm, 50, 1) << "rank 0's clock gains 50 us per second on rank 3's";
  EXPECT_EQ(job.ranks[1]->snapshot().driftPpm, 0) << "no drift, none applied";
  for (auto& m : job.ranks) {
    SkewSnapshot s = m->snapshot();
    EXPECT_EQ(s.topLast, 1);
    EXPECT_NEAR(s.rankLeadNs[1], 0, 1);
    EXPECT_NEAR(s.rankLeadNs[3], 400000, 20000) << "rank 3's arrivals are placed by the drifting offset";
    EXPECT_NEAR(double(s.skewP50), 400000, 0.07 * 400000);
  }
}

TEST(SkewMonitor, PacingDelaysTheEarlyRanksAndNeverTheLastArriver) {
  Job job(4, Mode::On, 8);
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 10000);
  job.run(32 * 8, 500000, [&](int r, int) { return r == 2 ? 0 : int64_t(300000 + noise(rng)); });
  std::vector<PacingState> states;
  for (size_t r = 0; r < 4; ++r) {
    SkewSnapshot s = job.ranks[r]->snapshot();
    states.push_back(s.decision.state);
    if (r == 2) EXPECT_EQ(s.delayNs, 0);
    else EXPECT_GT(s.delayNs, 0) << "rank " << r;
    EXPECT_LE(s.delayNs, s.decision.capNs);
  }
  EXPECT_EQ(states[0], PacingState::Pace);
  EXPECT_TRUE(std::all_of(states.begin(), states.end(), [&](PacingState x) { return x == states[0]; }))
      << "every rank's controller is in the same state";
}

TEST(SkewMonitor, IidArrivalsDoNotEngagePacing) {
  Job job(8, Mode::On, 8);
  std::mt19937 rng(11);
  std::normal_distribution<double> noise(0, 200000);
  job.run(32 * 20, 500000, [&](int, int) { return int64_t(std::abs(noise(rng))); });
  for (auto& m : job.ranks) {
    EXPECT_NE(m->snapshot().decision.state, PacingState::Pace);
    EXPECT_EQ(m->gateDelayNs(0, 1 << 20), 0);
  }
}

TEST(SkewMonitor, WindowsGrowToKeepTheExchangeRateBounded) {
  MonitorConfig c;
  c.nranks = 1;
  c.window = 32;
  c.minWindowNs = 100000000;  // 100 ms; collectives every 10 us -> 10000 per window
  SkewMonitor m(c);
  int64_t t = 0;
  for (uint64_t seq = 0; seq < 32; ++seq, t += 10000) m.onCollective({seq, 0, true, 8, t, t + 5000, 0});
  std::vector<uint64_t> w(m.exchangeWords());
  m.fill(w);
  EXPECT_NEAR(double(w[0]), 100000000.0 / (315000.0 / 32), 2);
  m.absorb(w);
  EXPECT_EQ(m.snapshot().window, uint32_t(w[0]));
}

TEST(PacingMode, ParsesTheThreeModes) {
  Mode m;
  ASSERT_TRUE(parseMode("off", &m));
  EXPECT_EQ(m, Mode::Off);
  ASSERT_TRUE(parseMode("OBSERVE", &m));
  EXPECT_EQ(m, Mode::Observe);
  ASSERT_TRUE(parseMode("on", &m));
  EXPECT_EQ(m, Mode::On);
  EXPECT_FALSE(parseMode("sometimes", &m));
  EXPECT_FALSE(parseMode(nullptr, &m));
}

}  // namespace
}  // namespace tempo::pacing
